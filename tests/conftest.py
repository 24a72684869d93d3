"""Suite-wide settings.

Hypothesis runs without timing checks: a per-example deadline or the slow-generation health check
would turn a hiccup of a shared machine into a failure; the tests assert behaviour, never time.

Markers by folder: every test under `netns/` is `netns` (root, `ip`, `nft`), every test under
`interop/` is `java` (Java 17 and the reference Aeron runner), every test under `spark/` is
`spark` (a local SparkSession: the spark extra and Java 17); tests elsewhere that need them, and
the `slow` ones, are marked in their modules. The fast loop:
`python -m pytest -q -m "not slow and not netns and not java"`.

Event loops: every async test runs on asyncio's own loop and on uvloop (uvicorn's default), ids
`[asyncio]` and `[uvloop]`, except under `interop/`, `netns/`, `spark/` and `examples/` (asyncio
only).
"""

import asyncio
from pathlib import Path

import pytest
import uvloop
from hypothesis import HealthCheck, settings

settings.register_profile("aeronio", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("aeronio")

FOLDER_MARKERS = {
    "netns": pytest.mark.netns,
    "interop": pytest.mark.java,
    "spark": pytest.mark.spark,
}
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0]
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])


ASYNCIO_ONLY = {"interop", "netns", "spark", "examples"}


def pytest_asyncio_loop_factories(config, item):
    """The event loops an async test runs on (pytest-asyncio's hook)."""
    if item.path.relative_to(TESTS).parts[0] in ASYNCIO_ONLY:
        return {"asyncio": asyncio.new_event_loop}
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
