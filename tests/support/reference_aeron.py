"""How to run the reference Aeron (Java 1.15.1): the one launcher of the tests and the
benchmarks.

`../shared/aeron-java/aeron-java` beside the repository (or the script `$AERON_JAVA` names) gets
the reference jar and prints its classpath (`--jar`); `java_args` makes the command line that
runs a class of it (or of classes compiled against it) as the script would.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

# What the aeron-java script gives the JVM (the 1.15.1 jar reaches into these JDK internals).
JVM_FLAGS = (
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
)


def runner() -> Path:
    """The aeron-java script: $AERON_JAVA, else ../shared/aeron-java/aeron-java beside the
    repository (whether or not it exists)."""
    beside = Path(__file__).resolve().parents[3] / "shared" / "aeron-java" / "aeron-java"
    return Path(os.environ.get("AERON_JAVA") or beside)


def missing() -> str | None:
    """Why the reference Aeron cannot run here (what to install), or None."""
    if shutil.which("java") is None:
        return "no `java` on PATH (apt-get install openjdk-17-jdk-headless)"
    if not runner().is_file():
        return (
            f"the reference Aeron runner {runner()} is missing (put shared/ beside the "
            "repository or set AERON_JAVA)"
        )
    return None


class RunnerError(RuntimeError):
    """The runner is there but could not give the jar."""


@functools.cache
def classpath(script: Path | None = None) -> str:
    """The reference jar's classpath from `script` (by default the `runner()`), which fetches
    the jar once and then caches it."""
    script = script or runner()
    done = subprocess.run([str(script), "--jar"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RunnerError(f"{script} --jar failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()


def java_args(
    cls: str, props: dict[str, object] | None = None, args: tuple = (), class_path: str = ""
) -> list[str]:
    """The command line running `cls` (on `class_path`, by default the reference jar's) with
    `-Dk=v` properties and `args`, as the aeron-java script would."""
    return [
        "java",
        *JVM_FLAGS,
        *(f"-D{k}={v}" for k, v in (props or {}).items()),
        "-cp",
        class_path or classpath(),
        cls,
        *(str(a) for a in args),
    ]


def java_version() -> str:
    if shutil.which("java") is None:
        return "not found"
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"
