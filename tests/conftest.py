"""Suite-wide settings.

Hypothesis runs without timing checks: a per-example deadline or the slow-generation health check
would turn a hiccup of a shared machine into a failure; the tests assert behaviour, never time.

Markers by folder: every test under `netns/` is `netns` (root, `ip`, `nft`), every test under
`interop/` is `java` (Java 17 and the reference Aeron runner), every test under `spark/` is
`spark` (a local SparkSession: the spark extra and Java 17), every test under `aeron_c/` is
`aeron_c` (current Aeron through pyaeron on Python 3.12+: tests/support/aeron_c.py); tests
elsewhere that need them, and the `slow` ones, are marked in their modules. The fast loop:
`python -m pytest -q -m "not slow and not netns and not java"`.

Files: the session gives aeronio a cache of its own ($AERONIO_CACHE, removed at its end: the
Spark reader's jar), and its summary lists aeronio's entries in the temp dir, /dev/shm and the
user's cache that appeared during the session and are still there (this session's leftovers, or
a concurrent session's: they share those places, so the list is reported, not failed).

Event loops: an async test runs on asyncio's own loop (its id names no loop); marked `loops` (a
module's `pytestmark` or the test) it runs on uvloop (uvicorn's default) too, ids `[asyncio]` and
`[uvloop]`: the tests of what talks to the event loop itself (readers on eventfds and sockets, the
driver's parking and waking, the awaitables' completion, timeouts, cancellation, signals).
Elsewhere the loop is only the caller's and its implementation changes nothing the test checks.
"""

import asyncio
import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import uvloop
from hypothesis import HealthCheck, settings

# What other tools write while the tests run (matplotlib's font cache, chromium's settings and
# dconf cache) goes to a directory of the run's, removed when the process exits (also when
# pytest stops at a bad option, before any hook that ends a session); the user's cache is left
# as it was. (~/.config stays: pip reads its settings there.)
TOOLS_HOME = Path(tempfile.mkdtemp(prefix=f"aeronio-test-home-{os.getpid()}-"))
atexit.register(shutil.rmtree, TOOLS_HOME, ignore_errors=True)
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
os.environ["XDG_CACHE_HOME"] = str(TOOLS_HOME / "cache")
os.environ["MPLCONFIGDIR"] = str(TOOLS_HOME / "matplotlib")


settings.register_profile("aeronio", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("aeronio")

FOLDER_MARKERS = {
    "netns": pytest.mark.netns,
    "interop": pytest.mark.java,
    "spark": pytest.mark.spark,
    "aeron_c": pytest.mark.aeron_c,
}
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0]
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])


def pytest_asyncio_loop_factories(config, item):
    """The event loops an async test runs on (pytest-asyncio's hook): uvloop too if `loops`."""
    if item.get_closest_marker("loops") is None:
        return {"asyncio": asyncio.new_event_loop}
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def aeronio_entries() -> set[Path]:
    """aeronio's entries in the temp dir and /dev/shm, and the files of the user's cache."""
    cache = USER_CACHE / "aeronio"
    found = {*Path(tempfile.gettempdir()).glob("aeronio*"), *Path("/dev/shm").glob("aeronio*")}
    return found | {p for p in cache.rglob("*") if p.is_file()}


def of_a_live_process(path: Path) -> bool:
    """A name with a pid (an embedded driver's directory, a session's cache) whose process is
    still running: in use, not left behind."""
    found = re.match(r"aeronio-(?:test-cache-)?(\d+)-", path.name)
    return found is not None and Path("/proc", found[1]).exists()


LEFT_BEHIND: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def files_of_the_session():
    """A cache of the session's own; what appeared in the shared places and stayed, noted."""
    before = aeronio_entries()
    cache = tempfile.mkdtemp(prefix=f"aeronio-test-cache-{os.getpid()}-")
    saved = os.environ.get("AERONIO_CACHE")
    os.environ["AERONIO_CACHE"] = cache
    yield
    if saved is None:
        del os.environ["AERONIO_CACHE"]
    else:
        os.environ["AERONIO_CACHE"] = saved
    shutil.rmtree(cache)
    LEFT_BEHIND[:] = sorted(p for p in aeronio_entries() - before if not of_a_live_process(p))


def pytest_terminal_summary(terminalreporter) -> None:
    if LEFT_BEHIND:
        terminalreporter.section("aeronio entries left behind (by this or a concurrent session)")
        for path in LEFT_BEHIND:
            terminalreporter.write_line(str(path))
