"""The reference Aeron (Java, 1.15.1) as a peer for the interop tests.

tests/support/reference_aeron.py runs any class of the reference jar on this machine's Java.
Here, for the tests: a Java media driver in a directory of its own, Java samples run as children
of that driver, their stdout read line by line with bounded waits, and the Java driver's
counters read straight from its cnc.dat. Programs of our own (tests/java/*.java) are compiled
against the reference jar with `compile_java_sources` and run with `reference_aeron.java_args`.
Every Java process is a `Child` (its own process group, killed on teardown, and by the kernel if
the test process dies first).
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support import reference_aeron
from tests.support.child import Child
from tests.support.reference_aeron import java_args

JAVA_SOURCES = Path(__file__).parent / "java"


def require_aeron_java() -> str:
    """The classpath of the reference jar; skips (with the reason printed) when Java or the
    runner is missing, fails when they are there but the jar cannot be had."""
    reason = reference_aeron.missing()
    if reason is not None:
        print(f"Java interop tests skipped: {reason}")
        pytest.skip(f"Java interop: {reason}")
    try:
        return reference_aeron.classpath()
    except reference_aeron.RunnerError as e:
        pytest.fail(str(e))


def compile_java_sources(classpath: str, out_dir: str | os.PathLike) -> str:
    """Compile tests/java/*.java against the reference jar into `out_dir`; returns the classpath
    to run them with (`out_dir` first). Fails the test with javac's output if they do not
    compile."""
    if shutil.which("javac") is None:
        print("Java interop tests skipped: no `javac` on PATH")
        pytest.skip("Java interop: no `javac` on PATH (apt-get install openjdk-17-jdk-headless)")
    sources = sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))
    done = subprocess.run(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(out_dir), *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"javac of tests/java failed ({done.returncode}):\n{done.stderr}")
    return f"{out_dir}{os.pathsep}{classpath}"


def cnc_counters(dir: str | os.PathLike) -> list[tuple[int, int, str, int]]:
    """(id, type id, label, value) of every allocated counter in a Java driver's cnc.dat
    (CncFileDescriptor / Agrona CountersReader layout of 1.15.1)."""
    with open(Path(dir) / "cnc.dat", "rb") as f:
        cnc = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        _version, to_driver, to_clients, meta_length, values_length = struct.unpack_from(
            "<5i", cnc, 0
        )
        meta = 128 + to_driver + to_clients
        values = meta + meta_length
        found = []
        for counter_id in range(values_length // 128):
            record = meta + counter_id * 512
            state, type_id = struct.unpack_from("<ii", cnc, record)
            if state == 0:
                break
            if state != 1:
                continue
            (label_length,) = struct.unpack_from("<i", cnc, record + 128)
            label = cnc[record + 132 : record + 132 + label_length].decode("utf-8", "replace")
            (value,) = struct.unpack_from("<q", cnc, values + counter_id * 128)
            found.append((counter_id, type_id, label, value))
        return found
    finally:
        cnc.close()


class JavaProcess:
    """One JVM running a class of the reference jar (a Child); its stdout read as lines."""

    def __init__(self, cls: str, props: dict[str, object], stdin: str | None = None):
        self.name = cls.rsplit(".", 1)[-1]
        self.child = Child(java_args(cls, props), f"Java {self.name}", stdin or False)
        self.proc = self.child.proc
        if stdin is not None:
            self.child.release()

    def describe(self) -> str:
        self.child.lines()
        return self.child.describe()

    def matches(self, pattern: re.Pattern[str] | str) -> list[re.Match[str]]:
        pattern = re.compile(pattern)
        return [m for line in self.child.lines() if (m := pattern.fullmatch(line))]

    async def wait_for(
        self, pattern: re.Pattern[str] | str, timeout: float, count: int = 1
    ) -> list[re.Match[str]]:
        """Waits (without blocking the event loop) until `count` lines match `pattern`."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.matches(pattern)
            if len(found) >= count:
                return found
            if self.child.ended:
                raise AssertionError(
                    f"{self.name} ended with {len(found)}/{count} lines matching "
                    f"{getattr(pattern, 'pattern', pattern)!r}: {self.describe()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{len(found)}/{count} lines matching "
                    f"{getattr(pattern, 'pattern', pattern)!r} within {timeout} s: "
                    f"{self.describe()}"
                )
            await asyncio.sleep(0.02)

    async def wait_exit(self, timeout: float) -> int:
        return await self.child.await_exit(timeout)

    def kill(self) -> None:
        self.child.stop(signal.SIGKILL)
        self.child.finish()


class JavaDriver:
    """A Java media driver (io.aeron.driver.MediaDriver) on a directory of its own."""

    # The Java driver's image liveness timeout is raised well above every wait in these tests,
    # so an image the Java side reports gone within a test went through END OF STREAM.
    PROPS = {
        "aeron.dir.delete.on.start": "true",
        "aeron.threading.mode": "SHARED",
        "aeron.term.buffer.sparse.file": "true",
        "aeron.image.liveness.timeout": 60_000_000_000,
    }

    def __init__(self) -> None:
        self.dir = f"/dev/shm/aeronio-java-{uuid.uuid4().hex}"
        self.process = JavaProcess(
            "io.aeron.driver.MediaDriver", {"aeron.dir": self.dir, **self.PROPS}
        )
        self.samples: list[JavaProcess] = []

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the driver has written its cnc.dat's version: the file is full size then (the
        runner's IoUtil stand-in fills new files block by block, and a client mapping a file
        still being filled maps it short)."""
        cnc = Path(self.dir) / "cnc.dat"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.proc.poll() is not None:
                break
            with contextlib.suppress(OSError):
                with open(cnc, "rb") as f:
                    if struct.unpack("<i", f.read(4) or b"\0\0\0\0")[0] != 0:
                        return
            time.sleep(0.02)
        self.close()
        raise AssertionError(f"Java media driver not ready: {self.process.describe()}")

    def sample(self, cls: str, props: dict[str, object], stdin: str | None = None) -> JavaProcess:
        """A Java sample (io.aeron.samples.*) as a client of this driver."""
        process = JavaProcess(
            f"io.aeron.samples.{cls}", {"aeron.dir": self.dir, **props}, stdin=stdin
        )
        self.samples.append(process)
        return process

    def kill_samples(self) -> None:
        for process in self.samples:
            process.kill()
        self.samples.clear()

    def counters(self) -> list[tuple[int, int, str, int]]:
        """(id, type id, label, value) of every allocated counter in the driver's cnc.dat."""
        return cnc_counters(self.dir)

    def counter(self, label: str) -> int:
        """The value of the system counter labelled exactly `label`."""
        for _id, type_id, name, value in self.counters():
            if type_id == 0 and name == label:
                return value
        raise KeyError(label)

    def counters_text(self, contains: str = "") -> str:
        return "\n".join(
            f"  java #{i} {label}: {value}"
            for i, _t, label, value in self.counters()
            if contains in label and (value or contains)
        )

    def close(self) -> None:
        self.kill_samples()
        self.process.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
