"""A child process whose stdout lines are read by a thread and handed out with timeouts: the one
process helper of the tests (tests/support/procs.py) and the benchmarks (bench/).

The child dies with its parent (PR_SET_PDEATHSIG), runs in a session of its own (so `stop`
signals its whole process group), and gets the environment without `AERONIO_*` variables, so
that nothing configures its drivers behind our back. Its stderr is kept for the messages of
`ChildError`, raised when it does not say what was awaited in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import threading
import time

PR_SET_PDEATHSIG = 1


class ChildError(AssertionError):
    """A child did not do what was awaited (its output and stderr are in the message)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL me when the parent dies (no orphans, even if pytest
    or the benchmark itself is killed)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def child_env() -> dict[str, str]:
    """The environment without AERONIO_* variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AERONIO_")}


class Child:
    """`argv` running as `name`; `stdin`: False (none), True (a pipe for `send`), or text
    written to it at once (the pipe stays open until `release`)."""

    def __init__(self, argv: list[str], name: str, stdin: bool | str = False):
        self.name = name
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL if stdin is False else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
            preexec_fn=_die_with_parent,
            start_new_session=True,
        )
        self.pid = self.proc.pid
        if isinstance(stdin, str):
            with contextlib.suppress(OSError):
                self.proc.stdin.write(stdin)
                self.proc.stdin.flush()
        self._lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self._stderr: list[str] = []
        self.stdout_seen: list[str] = []
        self.line_time = 0.0  # when the line next_line returned last arrived (CLOCK_MONOTONIC)
        self._eof = False
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump_stdout(self) -> None:
        with contextlib.suppress(Exception):
            for line in self.proc.stdout:
                self._lines.put((time.monotonic(), line.rstrip("\n")))
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        with contextlib.suppress(Exception):
            for line in self.proc.stderr:
                self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def tail(self, lines: int = 12) -> str:
        """The last `lines` lines of its stderr, indented on lines of their own ("" if none)."""
        text = self.stderr.strip().splitlines()[-lines:]
        return ("\n  " + "\n  ".join(text)) if text else ""

    def describe(self) -> str:
        return (
            f"{self.name} (pid {self.pid}, returncode {self.proc.poll()}); "
            f"stdout so far: {self.stdout_seen[-10:]!r}; stderr:\n{self.stderr[-4000:]}"
        )

    # -- output -----------------------------------------------------------------------

    def next_line(self, timeout: float) -> str | None:
        """The next stdout line, None at its end; raises queue.Empty after `timeout`."""
        if self._eof:
            return None
        item = self._lines.get(timeout=max(0.0, timeout))
        if item is None:
            self._eof = True
            return None
        self.line_time, line = item
        self.stdout_seen.append(line)
        return line

    def lines(self) -> list[str]:
        """Every stdout line so far (taking those not yet handed out), without waiting."""
        with contextlib.suppress(queue.Empty):
            while self.next_line(0) is not None:
                pass
        return list(self.stdout_seen)

    @property
    def ended(self) -> bool:
        """Its stdout ended (as far as `next_line` or `lines` have read)."""
        return self._eof

    def expect(self, tag: str, timeout: float = 15.0, peer: Child | None = None) -> str:
        """The rest of the next stdout line starting with `tag` (earlier lines are kept in
        stdout_seen). ChildError if none comes within `timeout` seconds, stdout ends first, or
        `peer` (a child that should outlive this one's answer) exits first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.next_line(left if peer is None else min(0.5, left))
            except queue.Empty:
                if peer is not None and peer.proc.poll() is not None:
                    raise ChildError(
                        f"{peer.describe()}\nexited while waiting for {self.name}"
                    ) from None
                if peer is not None and left > 0:
                    continue
                raise ChildError(
                    f"no {tag!r} line within {timeout} s from {self.describe()}"
                ) from None
            if line is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
                raise ChildError(f"stdout ended before a {tag!r} line: {self.describe()}")
            if line.startswith(tag):
                return line[len(tag) :].strip()

    def expect_json(self, tag: str, timeout: float = 15.0, peer: Child | None = None):
        return json.loads(self.expect(tag, timeout, peer))

    async def aexpect(self, tag: str, timeout: float = 15.0) -> str:
        """`expect` without blocking the event loop (whose client must keep sending keepalives)."""
        return await asyncio.to_thread(self.expect, tag, timeout)

    async def aexpect_json(self, tag: str, timeout: float = 15.0):
        return json.loads(await self.aexpect(tag, timeout))

    # -- input and life ---------------------------------------------------------------

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def release(self) -> None:
        """Close the child's stdin (a worker waiting for its end may now finish)."""
        with contextlib.suppress(OSError, AttributeError):
            self.proc.stdin.close()

    def wait(self, timeout: float = 15.0) -> int:
        """The exit status, once the process exited and its output was read."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ChildError(f"did not exit within {timeout} s: {self.describe()}") from None
        for thread in self._threads:
            thread.join(5)
        return status

    async def await_exit(self, timeout: float = 15.0) -> int:
        return await asyncio.to_thread(self.wait, timeout)

    def send_signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL and reap (a zombie would still look alive to kill(pid, 0))."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        """Signal the child's process group, then SIGKILL it if it outlives `timeout` (a
        driver's close waits up to its publications' linger, 5 s by default, on a machine that
        may be busy)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)

    def finish(self) -> None:
        """Teardown: SIGKILL if still running, reap, close pipes."""
        with contextlib.suppress(Exception):
            self.kill()
        for thread in self._threads:
            thread.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()
