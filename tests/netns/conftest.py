"""The fixtures of the tests on a pair of network namespaces: `netns`, a NetnsPair (a: 10.201.0.1,
b: 10.201.0.2) each dropping 5 % of the UDP it receives, and `procs`, the test's children, killed
(and their driver directories removed) before the namespaces they run in are deleted. A module
may define its own."""

import pytest

from tests.support.netns import NetnsPair
from tests.support.procs import procs_fixture

LOSS_PERCENT = 5


@pytest.fixture
def netns():
    pair = NetnsPair.create(LOSS_PERCENT)
    try:
        yield pair
    finally:
        pair.close()


@pytest.fixture
def procs(netns):
    yield from procs_fixture()
