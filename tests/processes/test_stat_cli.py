"""`aeronio stat`, `aeronio errors` and `aeronio driver` as an operator runs them: subprocesses
against a driver running in another process."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types

import pytest

from aeronio import cli
from aeronio.cnc import CNC_FILE, CncFile
from aeronio.concurrent.error_log import DistinctErrorLog
from aeronio.counters import CountersManager
from aeronio.driver.context import DriverContext
from aeronio.errors import ConfigurationError
from aeronio.protocol.layout import LOCK_FILE
from tests.support.ports import free_port
from tests.support.procs import await_until, procs_fixture, wait_until

# A driver (embedded in this child) with a publisher and a subscriber on aeron:ipc stream 10
# that keep the positions moving; it provokes one driver-side error before saying "ready".
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    import aeronio

    async def main(dir):
        async with aeronio.connect(dir=dir, ipc_term_length=65536) as aeron:
            subscription = await aeron.add_subscription("aeron:ipc", 10)
            publication = await aeron.add_publication("aeron:ipc", 10)
            try:
                await aeron.add_publication("aeron:ipc?term-length=128k", 10)
            except aeronio.AeronError as e:
                print("rejected:", e, flush=True)
            else:
                print("the driver accepted a different term length", flush=True)

            async def publish():
                payload = bytes(100)
                while True:
                    await publication.offer(payload)
                    await asyncio.sleep(0.002)

            async def consume():
                async for _ in subscription:
                    pass

            print("ready", flush=True)
            tasks = [asyncio.create_task(publish()), asyncio.create_task(consume())]
            await asyncio.sleep(60)  # the test kills us long before
            for task in tasks:
                task.cancel()

    asyncio.run(main(sys.argv[1]))
    """
)

COUNTER_LINE = re.compile(r"^ *(\d+): +([\d,]+) - (.*)$")
HEADER = re.compile(
    r"^\d\d:\d\d:\d\d - aeronio stat \(CnC 0\.2\.0\), pid (\d+), heartbeat age (-?\d+)ms$"
)


procs = pytest.fixture(procs_fixture, name="procs")


def aeronio_cmd(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aeronio.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def counters(out: str) -> dict[str, int]:
    """label -> value for the counter lines of one snapshot."""
    found = {}
    for line in out.splitlines():
        m = COUNTER_LINE.match(line)
        if m:
            found[m[3]] = int(m[2].replace(",", ""))
    return found


@pytest.fixture(scope="module")
def live_driver(tmp_path_factory):
    """(pid, dir, first stdout lines) of a child process running a driver and traffic."""
    base = tmp_path_factory.mktemp("stat")
    dir = str(base / "driver")
    with open(base / "child.err", "w+") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, dir], stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        watchdog = threading.Timer(60, child.kill)  # a hung child cannot hang the test run
        watchdog.start()
        try:
            lines = []
            while not lines or lines[-1] != "ready":
                line = child.stdout.readline()
                if not line:
                    stderr.seek(0)
                    pytest.fail(f"driver child exited ({child.wait(10)}): {stderr.read()}")
                lines.append(line.strip())
            watchdog.cancel()
            yield child.pid, dir, lines
        finally:
            watchdog.cancel()
            child.kill()
            child.wait(timeout=30)
            child.stdout.close()


def test_stat_shows_the_live_driver_and_moving_positions(live_driver):
    pid, dir, _ = live_driver

    def snapshot() -> str:
        result = aeronio_cmd("stat", "--dir", dir)
        assert result.returncode == 0, result.stderr
        return result.stdout

    snapshots = [snapshot()]
    first = counters(snapshots[0])
    assert "Errors" in first and "Bytes sent" in first
    positions = [label for label in first if label.startswith(("pub-pos", "sub-pos"))]
    assert any(label.startswith("pub-pos (sampled): ") for label in positions)
    assert any(re.match(r"sub-pos: \d+ -?\d+ 10 aeron:ipc @\d+$", label) for label in positions)
    assert all(first[label] >= 0 for label in positions), first

    def moved() -> str | None:
        """A snapshot in which every position moved past the first's (the conductor samples
        pub-pos at its timer, once a second)."""
        out = snapshot()
        later = counters(out)
        return out if all(later.get(label, -1) > first[label] for label in positions) else None

    snapshots.append(wait_until(moved, 30, "a snapshot with every position moved"))
    for out in snapshots:
        lines = out.splitlines()
        header = HEADER.match(lines[0])
        assert header, lines[0]
        assert int(header[1]) == pid
        assert 0 <= int(header[2]) < 10_000  # the driver is alive and heartbeating
        assert lines[1] == "=" * 70
        assert all(COUNTER_LINE.match(line) for line in lines[2:]), out


def test_stat_filter(live_driver):
    _, dir, _ = live_driver
    result = aeronio_cmd("stat", "--dir", dir, "--filter", "sub-pos")
    assert result.returncode == 0, result.stderr
    labels = list(counters(result.stdout))
    assert labels and all("sub-pos" in label for label in labels)
    result = aeronio_cmd("stat", "--dir", dir, "--filter", r"re:^(pub|sub)-pos\b")
    labels = list(counters(result.stdout))
    assert {label.split(":")[0] for label in labels} == {"pub-pos (sampled)", "sub-pos"}


def test_stat_watch_prints_snapshots_until_iterations(live_driver):
    _, dir, _ = live_driver
    env = dict(os.environ, AERONIO_DIR=dir)  # --dir from the environment
    result = aeronio_cmd("stat", "--watch", "0.2", "--iterations", "3", env=env)
    assert result.returncode == 0, result.stderr
    snapshots = result.stdout.rstrip("\n").split("\n\n")
    assert len(snapshots) == 3
    assert all(HEADER.match(snapshot.splitlines()[0]) for snapshot in snapshots)
    assert "\x1b" not in result.stdout  # no terminal control codes


def test_errors_shows_the_provoked_error(live_driver):
    _, dir, lines = live_driver
    assert lines[0].startswith("rejected:") and "term-length" in lines[0], lines
    deadline = time.monotonic() + 10
    while True:
        result = aeronio_cmd("errors", "--dir", dir)
        assert result.returncode == 0, result.stderr
        if "1 distinct errors observed." in result.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out = result.stdout
    time_ = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
    assert re.match(
        rf"1 observations from {time_} to {time_} for:\n term-length=131072 differs from the "
        r"existing publication's term-length=65536 on stream 10\n",
        out,
    ), out
    assert out.endswith("1 distinct errors observed.\n")
    assert counters(aeronio_cmd("stat", "--dir", dir, "--filter", "Errors").stdout) == {"Errors": 1}


# -- in-process: formatting and error paths ---------------------------------------------------


def small_cnc(dir, pid: int | None = None) -> CncFile:
    return CncFile.create(
        dir, to_driver_capacity=1024, to_clients_capacity=1024, max_counters=64, pid=pid
    )


def test_stat_format(tmp_path, capsys):
    manager = CountersManager.of(small_cnc(tmp_path, pid=4242))
    try:
        manager.cnc.to_driver.set_consumer_heartbeat_time(time.time_ns() // 1_000_000 - 1500)
        small = manager.allocate("Bytes sent", 0)
        big = manager.allocate("sub-pos: 1 2 3 aeron:ipc @0", 4)
        manager.counter(small).set(7)
        manager.counter(big).set(12_345_678_901)
        manager.free(manager.allocate("freed", 0))
        (tmp_path / LOCK_FILE).touch()
        assert cli.main(["stat", "--dir", str(tmp_path)]) == 0
        lines = capsys.readouterr().out.splitlines()
        # Without aeronio's lock file (Aeron's driver keeps none), the heartbeat's age decides.
        (tmp_path / LOCK_FILE).unlink()
        assert cli.main(["stat", "--dir", str(tmp_path)]) == 0
        assert capsys.readouterr().out.splitlines()[1] == "=" * 70  # 1.5 s: running
        manager.cnc.to_driver.set_consumer_heartbeat_time(time.time_ns() // 1_000_000 - 20_000)
        assert cli.main(["stat", "--dir", str(tmp_path)]) == 0
        assert re.fullmatch(
            r"DRIVER NOT RUNNING: no heartbeat for 2\d\.\d s, more than the 10 s Aeron's clients "
            r"allow \(pid 4242\)",
            capsys.readouterr().out.splitlines()[1],
        )
    finally:
        manager.close()
    header = HEADER.match(lines[0])
    assert header and header[1] == "4242" and 1500 <= int(header[2]) < 60_000
    # No driver holds the directory's lock: marked as not running.
    assert re.fullmatch(
        r"DRIVER NOT RUNNING: its lock is free; the last heartbeat was \d+\.\d s ago \(pid 4242\)",
        lines[1],
    ), lines[1]
    assert lines[2:] == [
        "=" * 70,
        f"{small:3}:                    7 - Bytes sent",
        f"{big:3}:       12,345,678,901 - sub-pos: 1 2 3 aeron:ipc @0",
    ]


def test_stat_without_a_driver(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AERONIO_DIR", raising=False)
    assert cli.main(["stat"]) == 1
    assert "no driver directory: pass --dir or set AERONIO_DIR" in capsys.readouterr().err
    assert cli.main(["stat", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"no media driver in {tmp_path} (cnc.dat missing)" in err
    (tmp_path / CNC_FILE).write_bytes(b"\0" * 8192)
    assert cli.main(["stat", "--dir", str(tmp_path)]) == 1
    assert "is not ready: its driver is still writing it" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["stat", "--dir", str(tmp_path), "--iterations", "2"])  # needs --watch
    assert info.value.code == 2


def test_stat_watch_stops_quietly_on_ctrl_c(tmp_path, capsys, monkeypatch):
    manager = CountersManager.of(small_cnc(tmp_path))
    manager.allocate("Bytes sent", 0)

    def interrupt(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.time, "sleep", interrupt)
    try:
        assert cli.main(["stat", "--dir", str(tmp_path), "--watch", "1"]) == 0
    finally:
        manager.close()
    captured = capsys.readouterr()
    assert captured.out.count("aeronio stat") == 1 and not captured.err


def test_errors_format(tmp_path, capsys):
    cnc = small_cnc(tmp_path)
    times = iter([1_700_000_000_000, 1_700_000_001_500, 1_700_000_002_000])
    log = DistinctErrorLog(cnc.error_log_buffer, clock=lambda: next(times))
    log.record("client 9 timed out")
    log.record("client 9 timed out")
    try:
        raise ValueError("bad frame")
    except ValueError as e:
        log.record(e)
    assert cli.main(["errors", "--dir", str(tmp_path)]) == 0
    cnc.close()
    out = capsys.readouterr().out
    first = cli._iso(1_700_000_000_000)
    assert re.fullmatch(r"2023-11-1[45]T\d\d:\d\d:20\.000[+-]\d\d:\d\d", first), first
    assert out.startswith(
        f"2 observations from {first} to {cli._iso(1_700_000_001_500)} for:\n client 9 timed out\n"
    )
    assert "1 observations from " in out and " ValueError: bad frame\nTraceback" in out
    assert out.endswith("\n2 distinct errors observed.\n")


def test_errors_paths(tmp_path, capsys):
    assert cli.main(["errors", "--dir", str(tmp_path)]) == 1
    assert f"no media driver in {tmp_path} (cnc.dat missing)" in capsys.readouterr().err
    cnc = small_cnc(tmp_path)
    assert cli.main(["errors", "--dir", str(tmp_path)]) == 0  # a driver with no errors yet
    assert capsys.readouterr().out == "0 distinct errors observed.\n"
    assert cli.main(["errors", "--dir", str(tmp_path / "nope")]) == 1
    assert "no media driver directory" in capsys.readouterr().err
    cnc.error_log_buffer[0:4] = (2**30).to_bytes(4, "little")  # a length past the end
    assert cli.main(["errors", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"the error log in {tmp_path}/cnc.dat is corrupt: error log record at 0" in err
    cnc.close()


# -- aeronio driver: options ---------------------------------------------------------------


@pytest.fixture
def started(monkeypatch):
    """The contexts `aeronio driver` (cli.main) starts its driver with, in order; the driver
    itself (aeronio.driver.standalone.run) replaced by a stand-in that only notes them."""
    ran = []

    async def run(ctx):
        ran.append(ctx)

    fake = types.ModuleType("aeronio.driver.standalone")
    fake.run = run
    monkeypatch.setitem(sys.modules, "aeronio.driver.standalone", fake)
    monkeypatch.setattr("aeronio.driver.standalone", fake, raising=False)
    return ran


def test_driver_options_from_command_line_env_and_file(tmp_path, monkeypatch, started):
    config = tmp_path / "driver.toml"
    config.write_text('ipc-mtu = 4096\nmax_counters = 100\npublication_linger_ns = "1s"\n')
    monkeypatch.setenv("AERONIO_MAX_COUNTERS", "200")
    monkeypatch.setenv("AERONIO_DIR", str(tmp_path / "from-env"))
    argv = ["driver", "--config", str(config), "--ipc-term-length", "128k"]
    assert cli.main([*argv, "--term-buffer-sparse-file", "no"]) == 0
    (ctx,) = started
    assert ctx.ipc_term_length == 131072  # command line
    assert ctx.ipc_mtu == 4096  # file
    assert ctx.max_counters == 200  # env over file
    assert ctx.publication_linger_ns == 1_000_000_000
    assert ctx.term_buffer_sparse_file is False
    assert ctx.dir == str(tmp_path / "from-env")
    assert cli.main([*argv, "--max-counters", "300", "--dir", str(tmp_path / "d")]) == 0
    assert (started[1].max_counters, started[1].dir) == (300, str(tmp_path / "d"))


def test_a_standalone_driver_spins_only_for_ipc(tmp_path, monkeypatch, started):
    """`aeronio driver`'s agent spins after work only while an IPC publication has subscribers
    (an embedded driver's spins, which yield to the application's loop, always); the command
    line and env still decide."""
    monkeypatch.delenv("AERONIO_CONDUCTOR_IDLE_SPINS_IPC_ONLY", raising=False)
    argv = ["driver", "--dir", str(tmp_path / "d")]
    assert cli.main(argv) == 0
    assert (started[0].conductor_idle_spins, started[0].conductor_idle_spins_ipc_only) == (
        100,
        True,
    )
    assert DriverContext.from_sources().conductor_idle_spins_ipc_only is False  # embedded
    assert cli.main([*argv, "--conductor-idle-spins-ipc-only", "no"]) == 0
    monkeypatch.setenv("AERONIO_CONDUCTOR_IDLE_SPINS_IPC_ONLY", "false")
    assert cli.main(argv) == 0
    assert [ctx.conductor_idle_spins_ipc_only for ctx in started] == [True, False, False]
    shown = " ".join(aeronio_cmd("driver", "--help").stdout.split())
    assert "(env AERONIO_CONDUCTOR_IDLE_SPINS_IPC_ONLY; default True)" in shown


def test_a_standalone_driver_lingers_after_work(tmp_path, monkeypatch, started):
    """`aeronio driver`'s data path lingers a millisecond after work (its loop is its own); an
    embedded driver's not at all (it would hold the application's loop); a negative time is
    refused by name."""
    monkeypatch.delenv("AERONIO_DATA_PATH_LINGER_NS", raising=False)
    argv = ["driver", "--dir", str(tmp_path / "d")]
    assert cli.main(argv) == 0 and started[0].data_path_linger_ns == 1_000_000
    assert DriverContext.from_sources().data_path_linger_ns == 0  # embedded
    assert cli.main([*argv, "--data-path-linger-ns", "0"]) == 0
    assert started[1].data_path_linger_ns == 0
    with pytest.raises(ConfigurationError, match="data_path_linger_ns must not be negative"):
        DriverContext.from_sources(data_path_linger_ns=-1)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--ipc-term-length", "1000"], {}, "option: ipc_term_length 1000 must be a power"),
        (["--ipc-term-length", "lots"], {}, "--ipc-term-length: invalid size for ipc_term_length"),
        (["--publication-linger-ns", "5h"], {}, "--publication-linger-ns: invalid duration"),
        ([], {"AERONIO_IPC_MTU": "100"}, "AERONIO_IPC_MTU: ipc_mtu 100 must be a multiple of 32"),
        ([], {"AERONIO_NOT_AN_OPTION": "1"}, "AERONIO_NOT_AN_OPTION: unknown driver option"),
        (["--config", "/nonexistent/d.toml"], {}, "config file /nonexistent/d.toml: no such"),
    ],
)
def test_driver_configuration_errors_exit_2(args, env, message):
    result = aeronio_cmd("driver", *args, env={**os.environ, **env})
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.startswith("aeronio driver: ")


def test_driver_help_lists_every_option():
    result = aeronio_cmd("driver", "--help")
    assert result.returncode == 0
    for flag in ("--config", "--dir", "--ipc-term-length", "--client-liveness-timeout-ns",
                 "--client-keepalive-interval-ns", "--dir-delete-on-shutdown"):  # fmt: skip
        assert flag in result.stdout


def test_stat_marks_a_driver_killed_under_it(tmp_path, procs):
    dir = str(tmp_path / "killed")
    driver = procs.driver(dir)
    live = aeronio_cmd("stat", "--dir", dir).stdout.splitlines()
    assert live[1] == "=" * 70  # running: not marked
    driver.kill()
    driver.wait(10)
    dead = aeronio_cmd("stat", "--dir", dir).stdout.splitlines()
    assert dead[1].startswith("DRIVER NOT RUNNING: its lock is free; the last heartbeat was ")
    assert dead[1].endswith(f"(pid {driver.pid})")


def test_stat_marks_a_driver_that_closed(tmp_path, procs):
    """A driver that closed cleanly (SIGTERM) with its directory kept marked its heartbeat
    closed: stat says so, not a heartbeat age of decades."""
    dir = str(tmp_path / "closed")
    driver = procs.driver(dir, "--dir-delete-on-shutdown", "false")
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(30) == 0, driver.describe()
    closed = aeronio_cmd("stat", "--dir", dir).stdout.splitlines()
    assert closed[0].endswith(f"pid {driver.pid}, driver closed")
    assert closed[1] == f"DRIVER NOT RUNNING: it closed (pid {driver.pid})"


async def test_streams_shows_positions_backlogs_and_log_memory():
    """`aeronio streams` on a driver with an IPC stream and a UDP stream (loopback), before and
    after the subscribers read: each backlog is exactly the bytes not yet read."""
    import io

    import aeronio
    from aeronio.logbuffer.descriptor import compute_log_length
    from tests.driver.test_async_api import first_messages

    def shown(dir: str) -> str:
        out = io.StringIO()
        assert cli.run_streams(dir, out) == 0
        return out.getvalue()

    udp = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as aeron:
        ipc_sub = await aeron.add_subscription("aeron:ipc", 5)
        ipc_pub = await aeron.add_publication("aeron:ipc?term-length=64k", 5)
        udp_sub = await aeron.add_subscription(udp, 6)
        udp_pub = await aeron.add_publication(udp, 6)
        await ipc_pub.wait_connected(timeout=5)
        await udp_sub.wait_connected(timeout=5)
        for _ in range(10):
            await ipc_pub.offer(b"x" * 100)  # 10 frames of 160 B
            await udp_pub.offer(b"y" * 50)  # 10 frames of 96 B

        def sampled() -> str | None:  # the conductor samples pub-pos at its timer (1 s)
            out = shown(aeron.driver_dir)
            return out if "pub-pos 1,600," in out else None

        before = await await_until(sampled, 5, "the sampled pub-pos")
        ipc_id, udp_id = ipc_sub.registration_id, udp_sub.registration_id
        assert f"session {ipc_pub.session_id} stream 5 aeron:ipc?term-length=64k" in before
        assert "pub-pos 1,600, pub-lmt " in before
        assert f"backlog: sub {ipc_id} 1,600" in before
        assert "rcv-hwm 960, rcv-pos 960" in before
        assert f"backlog: sender 0, receiver 0, sub {udp_id} 960" in before
        mapped = compute_log_length(64 * 1024, 4096)
        assert before.count(f": {mapped / 1e6:.1f} MB mapped") == 3  # IPC log, UDP pub, image

        assert len([m async for m in first_messages(ipc_sub, 10)]) == 10
        assert len([m async for m in first_messages(udp_sub, 10)]) == 10
        after = shown(aeron.driver_dir)
        assert f"backlog: sub {ipc_id} 0" in after
        assert f"backlog: sender 0, receiver 0, sub {udp_id} 0" in after
