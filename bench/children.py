"""The parent side of the cross-process benchmarks: child processes (the one Child of
tests/support/child.py), the directories and ports of a run, and their clean-up."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import uuid

from tests.support.child import Child
from tests.support.ports import free_port, free_ports  # noqa: F401 (the benchmarks' ports)

# =========================================================================================
# Cross-process benchmarks, parent side: child processes, their clean-up, runs and reports
# =========================================================================================


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_s(pid: int | None) -> float | None:
    """CPU seconds a live process ran (its live threads: a thread that ended no longer
    counts), from /proc: the scheduler's nanoseconds (`schedstat`) where the kernel keeps them,
    else user + system ticks (10 ms apart: too coarse for a run of a few hundred ms). None when
    unknown."""
    if not pid:
        return None
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # a thread that ended since the listing
                continue
        if total:  # 0: the kernel keeps no scheduler statistics (sched_info off)
            return total / 1e9
    except (OSError, IndexError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def driver_cpu(pid: int | None, before: float | None, after: float | None) -> dict:
    """A worker's result fields for its driver's process over a timed window (`proc_cpu_s`
    at its start and end): its pid (None when the driver is in the worker's process) and the
    CPU seconds it used then (None when unknown)."""
    used = None if before is None or after is None else after - before
    return {"driver_pid": pid, "driver_cpu_s": used}


def shm_base() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def unique_name(kind: str) -> str:
    return f"aeronio-bench-{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Scope:
    """Everything a run starts - child processes, then directories - torn down in `close()`
    whatever happened. `script` is the benchmark run as the workers (`--worker JSON`)."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.children: list[Child] = []
        self.paths: list[str] = []

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def child(self, name: str, argv: list[str], stdin_text: str | None = None) -> Child:
        """A child with a stdin pipe (and `stdin_text` written to it), closed by `release`."""
        c = Child(argv, name, True if stdin_text is None else stdin_text)
        self.children.append(c)
        return c

    def worker(self, name: str, spec: dict) -> Child:
        return self.child(name, [sys.executable, self.script, "--worker", json.dumps(spec)])

    def shm_dir(self, kind: str) -> str:
        """A fresh directory name under /dev/shm (not created), removed on close."""
        dir = os.path.join(shm_base(), unique_name(kind))
        self.paths.append(dir)
        return dir

    def temp_dir(self, prefix: str) -> str:
        dir = tempfile.mkdtemp(prefix=prefix)
        self.paths.append(dir)
        return dir

    def close(self) -> None:
        for c in reversed(self.children):
            with contextlib.suppress(Exception):
                c.stop()
                c.finish()
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def unwind_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the finally blocks stop every child and remove every
    directory."""
    signal.signal(signal.SIGTERM, _terminated)
