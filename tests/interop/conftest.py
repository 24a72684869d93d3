"""The interop tests' fixtures."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import RUN_DIR
from tests.support.java_aeron import require_aeron_java

JAVA_SOURCES = Path(__file__).parent / "java"


@pytest.fixture(scope="module")
def reference_ports():
    """The reference's fixed ports, one module at a time: the archive tests' channels are at
    fixed ports (8010, 8020, 8030, 14123-14126: tests/support/archive_interop.py), so each of
    those modules (`pytestmark`) holds a lock of the run's (tests/conftest.py) while it runs,
    and one on the other worker waits for it."""
    with open(RUN_DIR / "reference-ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory) -> str:
    """tests/interop/java/*.java compiled against the reference jar; the classpath to run them."""
    classpath = require_aeron_java()
    if shutil.which("javac") is None:
        pytest.skip("Java interop: no `javac` on PATH (apt-get install openjdk-17-jdk-headless)")
    out = tmp_path_factory.mktemp("archive-java")
    done = subprocess.run(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(out),
         *sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"javac of tests/interop/java failed ({done.returncode}):\n{done.stderr}")
    return f"{out}{os.pathsep}{classpath}"
