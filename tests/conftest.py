"""Suite-wide settings.

Hypothesis runs without timing checks: a per-example deadline or the slow-generation health check
would turn a hiccup of a shared machine into a failure; the tests assert behaviour, never time.

Markers by folder: every test under `netns/` is `netns` (root, `ip`, `nft`), every test under
`interop/` is `java` (Java 17 and the reference Aeron runner), every test under `spark/` is
`spark` (a local SparkSession: the spark extra and Java 17), every test under `aeron_c/` is
`aeron_c` (current Aeron through pyaeron on Python 3.12+: tests/support/aeron_c.py); tests
elsewhere that need them, and the `slow` ones, are marked in their modules. The fast loop:
`python -m pytest -q -n 2 --dist loadfile -m "not slow and not netns and not java"`.

Workers: README's commands run the tests in two worker processes (pytest-xdist's `-n 2`;
`--dist loadfile` puts each file on one of them, so a module's fixtures are made once) beside the
process pytest started, the controller, which runs no test: it makes what the run shares before
it starts the workers, which inherit it through the environment, and removes it at the end.
Without `-n` that one process runs the tests itself. Resources the tests name (ports, groups,
directories, namespaces) are chosen apart (tests/support/ports.py, uuids); the few fixed ones
are locked (tests/interop/conftest.py).

Files: the run has a directory of its own ($PYTEST_AERONIO_RUN_DIR: the tools' home below, the
locks the workers share) and gives aeronio a cache of its own ($AERONIO_CACHE: the Spark reader's
jar), both removed at its end; its summary lists aeronio's entries in the temp dir, /dev/shm and
the user's cache that appeared during the run and are still there (this run's leftovers, or a
concurrent run's: they share those places, so the list is reported, not failed).

Event loops: an async test runs on asyncio's own loop (its id names no loop); marked `loops` (a
module's `pytestmark` or the test) it runs on uvloop (uvicorn's default) too, ids `[asyncio]` and
`[uvloop]`: the tests of what talks to the event loop itself (readers on eventfds and sockets, the
driver's parking and waking, the awaitables' completion, timeouts, cancellation, signals).
Elsewhere the loop is only the caller's and its implementation changes nothing the test checks.

Logging: no test leaves the root logger changed (its level, its handlers). Code that sets it up
(a build backend's setuptools, an example's main) runs in a process of its own: a root lowered
to INFO lets Py4J log each connection it retries with its traceback, from the finalisers of Java
objects, and on CPython 3.11 a traceback formatted during a collection inside `ast.parse` fails
that parse (tests/support/python_source.py), pytest's own included.
"""

import asyncio
import atexit
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import uvloop
from hypothesis import HealthCheck, settings

WORKER = "PYTEST_XDIST_WORKER" in os.environ  # a worker of pytest-xdist's, not the controller

# The run's directory, made by the controller and removed when it exits (also when pytest stops
# at a bad option, before any hook that ends a session). What other tools write while the tests
# run (matplotlib's font cache, chromium's settings and dconf cache) goes there; the user's cache
# is left as it was. (~/.config stays: pip reads its settings there.)
if not WORKER:
    made = tempfile.mkdtemp(prefix=f"aeronio-test-home-{os.getpid()}-")
    atexit.register(shutil.rmtree, made, ignore_errors=True)
    USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")  # for the report
    os.environ["PYTEST_AERONIO_RUN_DIR"] = made  # not AERONIO_*: the driver reads those
    os.environ["XDG_CACHE_HOME"] = os.path.join(made, "cache")
    os.environ["MPLCONFIGDIR"] = os.path.join(made, "matplotlib")
RUN_DIR = Path(os.environ["PYTEST_AERONIO_RUN_DIR"])


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


@pytest.fixture(autouse=True)
def _root_logger_kept():
    """The root logger's level and handlers after the test are those before it."""
    root = logging.getLogger()
    before = (logging.getLevelName(root.level), list(root.handlers))
    yield
    after = (logging.getLevelName(root.level), list(root.handlers))
    assert after == before, "the test changed the root logger (level, handlers)"


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
    """A name with a pid (an embedded driver's directory, a run's directory) whose process is
    still running: in use, not left behind."""
    found = re.match(r"aeronio-(?:test-home-)?(\d+)-", path.name)
    return found is not None and Path("/proc", found[1]).exists()


LEFT_BEHIND: list[Path] = []
BEFORE: set[Path] = set()
SAVED_CACHE: list[str | None] = []  # $AERONIO_CACHE as it was, put back at the end


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller, before it starts the workers: what is in the shared places now, and a
    cache of the run's own."""
    if WORKER:
        return
    BEFORE.update(aeronio_entries())
    SAVED_CACHE.append(os.environ.get("AERONIO_CACHE"))
    (RUN_DIR / "aeronio-cache").mkdir()
    os.environ["AERONIO_CACHE"] = str(RUN_DIR / "aeronio-cache")


@pytest.hookimpl(trylast=True)  # after the session's fixtures are gone
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller, after the workers: what appeared in the shared places and stayed."""
    if WORKER:
        return
    saved = SAVED_CACHE.pop()
    if saved is None:
        del os.environ["AERONIO_CACHE"]
    else:
        os.environ["AERONIO_CACHE"] = saved
    shutil.rmtree(RUN_DIR / "aeronio-cache")
    LEFT_BEHIND[:] = sorted(p for p in aeronio_entries() - BEFORE if not of_a_live_process(p))


def pytest_terminal_summary(terminalreporter) -> None:
    if LEFT_BEHIND:
        terminalreporter.section("aeronio entries left behind (by this or a concurrent session)")
        for path in LEFT_BEHIND:
            terminalreporter.write_line(str(path))
