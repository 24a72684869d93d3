"""The examples' scripts as a user runs them with bad arguments: one line naming what is wrong and
a failing status, never a traceback or a wait for Ctrl-C that was not asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


def script(path: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / path), *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.parametrize("seconds", ["0", "-1"])
def test_the_chat_demo_refuses_a_time_that_is_not_above_0(seconds):
    """Before: 0 waited for Ctrl-C (servers running), -1 started both servers, then a
    traceback (a negative sleep)."""
    result = script("chat/demo.py", "--seconds", seconds, timeout=30)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "demo.py: error: --seconds: must be above 0"


@pytest.mark.parametrize(
    ("work", "said"),
    [("/etc/hostname/x", "Not a directory"), ("/proc/aeronio-x", "No such file or directory")],
)
def test_the_market_run_names_a_work_directory_it_cannot_make(work, said):
    """Before: a traceback (NotADirectoryError, FileNotFoundError) once the run started."""
    result = script("market_data/run.py", "--work", work, "--no-spark")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"run.py: error: --work {work}: {said}"


@pytest.mark.slow  # each waits for a driver, as aeronio.connect does: 10 s
def test_the_market_scripts_say_in_one_line_that_no_driver_runs_on_their_dir(tmp_path):
    """Before: a traceback ending in DriverNotFoundError."""
    names = ("feed.py", "consumer.py", "dashboard.py")
    runs = [
        subprocess.Popen(
            [sys.executable, str(EXAMPLES / "market_data" / name), "--dir", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in names
    ]
    try:
        for name, run in zip(names, runs, strict=True):
            _, err = run.communicate(timeout=60)
            assert run.returncode == 1
            assert err == (
                f"{name}: no media driver runs on dir {tmp_path}: no cnc.dat after waiting 10 s\n"
            )
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
            run.wait(10)
