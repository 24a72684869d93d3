"""The network namespace tests skip only where the machine refuses namespaces (not root, no
`ip` or `nft`, the kernel saying not permitted or not supported): a setup that goes wrong
otherwise fails its test, so a slow or broken helper is never counted as a skip."""

import pytest

from tests.support import netns
from tests.support.netns import NetnsPair


class FailingSetup:
    """A namespace set whose setup raises `error`; closed or not."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.closed = False

    def _setup(self) -> None:
        raise self.error

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def machine_allows_namespaces(monkeypatch):
    """As on a root machine with `ip` and `nft`: the setup itself is what is tried."""
    monkeypatch.setattr(netns.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)


def create(made: FailingSetup):
    return NetnsPair._create_or_skip(lambda: made)


def test_a_setup_that_times_out_fails_and_is_undone():
    made = FailingSetup(RuntimeError("veth0 never came up: state DOWN"))
    with pytest.raises(RuntimeError, match="never came up"):
        create(made)
    assert made.closed


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError(
            "`ip netns add t` failed (1): mount --make-shared /run/netns: Operation not permitted"
        ),
        RuntimeError(
            "`nft add table inet t` failed (1): Could not process rule: Operation not supported"
        ),
        PermissionError(1, "Operation not permitted"),
    ],
)
def test_a_setup_the_kernel_refuses_skips_saying_why(error):
    made = FailingSetup(error)
    with pytest.raises(pytest.skip.Exception, match="cannot set up namespaces"):
        create(made)
    assert made.closed
