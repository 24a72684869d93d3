"""The interop tests' fixtures."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.java_aeron import require_aeron_java

JAVA_SOURCES = Path(__file__).parent / "java"


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
