"""No leaked shared memory: what a process killed with its embedded driver leaves under the base
directory is removed by the next driver or `aeronio clean`, decided by the directory's lock (a
live driver's directory is never touched); under `aeronio.run`, SIGTERM and SIGINT unwind the
application and its driver removes its own directory.

Each test uses its own base directory (AERONIO_* is not involved: the children name their
drivers' directories the way default_dir() does, `aeronio-<pid>-<hex>`, under that base).
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import pytest

import aeronio
from aeronio.driver import directories
from aeronio.protocol.layout import LOCK_FILE

CHILD = textwrap.dedent(
    """
    import asyncio, os, sys, uuid
    import aeronio

    base, runner = sys.argv[1], sys.argv[2]

    async def main():
        dir = os.path.join(base, f"aeronio-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        async with aeronio.connect(
            dir=dir, ipc_term_length=1 << 20, term_buffer_sparse_file=False
        ) as aeron:
            await aeron.add_publication("aeron:ipc", 1)  # a log in the directory
            print(dir, flush=True)
            await asyncio.sleep(3600)

    if runner == "aeronio.run":
        aeronio.run(main())
    else:
        asyncio.run(main())
    """
)


@pytest.fixture
def start_child() -> Iterator[Callable[..., tuple[subprocess.Popen, str]]]:
    """start_child(base, runner="asyncio.run") -> (process, its dir): a process with an
    embedded driver (and one IPC publication) under `base`, once it printed its dir (within
    60 s). Every one started is killed when the test ends, however it ends."""
    started: list[subprocess.Popen] = []

    def start(base, runner: str = "asyncio.run") -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(base), runner],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        assert select.select([proc.stdout], [], [], 60)[0], "the child printed no dir in 60 s"
        line = proc.stdout.readline().strip()
        assert line, proc.stderr.read()
        assert os.path.isdir(line)
        return proc, line

    yield start
    for proc in started:
        stop(proc)


def age(dir: str, seconds: float = 60.0) -> None:
    """Make a driver directory's lock file look older (as one left long ago would be)."""
    then = time.time() - seconds
    os.utime(os.path.join(dir, LOCK_FILE), (then, then))


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_the_next_driver_removes_a_killed_drivers_dir_and_keeps_a_live_ones(tmp_path, start_child):
    killed, killed_dir = start_child(tmp_path)
    alive, alive_dir = start_child(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    assert os.path.isdir(killed_dir)  # SIGKILL: nothing could clean up
    assert directories._size(killed_dir) > 1 << 20  # the log's pages are still taken
    age(killed_dir)
    age(alive_dir)  # old too: only its lock protects it

    found = directories.remove_dead_driver_dirs(str(tmp_path))
    assert [path for path, _ in found.removed] == [killed_dir]
    assert found.live == [(alive_dir, str(alive.pid))]
    assert not os.path.exists(killed_dir)
    assert os.path.isdir(alive_dir)


async def test_a_driver_starting_cleans_the_default_base(tmp_path, monkeypatch, start_child):
    monkeypatch.setattr(directories, "default_base", lambda: str(tmp_path))
    killed, killed_dir = start_child(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    age(killed_dir)
    async with aeronio.MediaDriver.launch(str(tmp_path / "own")):
        assert not os.path.exists(killed_dir)


def test_a_free_but_young_dir_is_left_alone(tmp_path, start_child):
    killed, killed_dir = start_child(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    found = directories.remove_dead_driver_dirs(str(tmp_path))
    assert found.young == [killed_dir] and not found.removed
    assert os.path.isdir(killed_dir)


def test_only_driver_dirs_are_looked_at(tmp_path):
    (tmp_path / "aeronio-not-a-driver").mkdir()  # no lock file
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / LOCK_FILE).write_text("1\n")  # not our prefix
    found = directories.remove_dead_driver_dirs(str(tmp_path))
    assert found == directories.Cleaning()
    assert (tmp_path / "aeronio-not-a-driver").is_dir() and (tmp_path / "other").is_dir()


def test_aeronio_clean_says_what_it_removed_and_kept(tmp_path, start_child):
    killed, killed_dir = start_child(tmp_path)
    alive, alive_dir = start_child(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    age(killed_dir)
    run = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "clean", "--base", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = sorted(run.stdout.splitlines())
    assert len(lines) == 2, run.stdout
    assert lines[0].startswith(f"kept {alive_dir}: its driver (pid {alive.pid}) is running")
    assert lines[1].startswith(f"removed {killed_dir} (")
    assert lines[1].endswith("MB): its driver is gone")
    again = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "clean", "--base", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"nothing to remove under {tmp_path}" in again.stdout


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, None)]
)
def test_aeronio_run_unwinds_on_signals_and_removes_the_dir(tmp_path, signum, status, start_child):
    proc, dir = start_child(tmp_path, runner="aeronio.run")
    proc.send_signal(signum)
    code = proc.wait(20)
    stderr = proc.stderr.read()
    if status is not None:
        assert code == status, stderr
    else:
        assert "KeyboardInterrupt" in stderr and code != 0
    assert not os.path.exists(dir), stderr  # the driver closed and removed it


def test_control_plain_asyncio_run_leaves_the_dir_on_sigterm(tmp_path, start_child):
    """Why aeronio.run exists (and proof the check above can fail)."""
    proc, dir = start_child(tmp_path, runner="asyncio.run")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == -signal.SIGTERM
    assert os.path.isdir(dir)


@pytest.mark.loops
async def test_cancelling_the_application_removes_the_embedded_dir(tmp_path):
    dirs = []

    async def app():
        async with aeronio.connect(
            dir=str(tmp_path / "aeronio-cancelled"), dir_delete_on_shutdown=True
        ) as aeron:
            await aeron.add_publication("aeron:ipc", 1)
            dirs.append(aeron.driver_dir)
            await asyncio.sleep(3600)

    task = asyncio.create_task(app())
    while not dirs:
        await asyncio.sleep(0.01)
    assert os.path.isdir(dirs[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not os.path.exists(dirs[0])
