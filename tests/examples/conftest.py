"""The examples' end-to-end tests: each example runs as its users run it (its own processes,
from its command line), and its pages are driven in Debian's chromium by Playwright.

`browser`: one headless chromium per module (the system's, `shutil.which("chromium")`; nothing
is downloaded), or a skip that says what to install. Screenshots go to `artifacts`
(tests/examples/artifacts/, kept after the run for a look).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import RUN_DIR

ARTIFACTS = Path(__file__).parent / "artifacts"
# What chromium needs on a closed network, as root: no sandbox, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("no chromium: `apt-get install chromium` (.ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra has playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=CHROMIUM_ARGS,
            env={**os.environ, "XDG_CONFIG_HOME": str(RUN_DIR / "config")},  # not ~/.config
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
