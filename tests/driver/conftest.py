"""The driver tests' default client (a module may define its own `aeron` instead)."""

import pytest

import aeronio


@pytest.fixture
async def aeron():
    """A client on an embedded driver that lets images of closed publications go soon."""
    async with aeronio.connect(
        publication_unblock_timeout_ns=300_000_000, publication_linger_ns=50_000_000
    ) as client:
        yield client
