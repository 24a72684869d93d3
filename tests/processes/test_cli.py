"""The `aeronio` command as a user runs it: a subprocess."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from aeronio import _core
from aeronio.driver.directories import default_base
from aeronio.logbuffer.descriptor import LOG_TYPE_EXCLUSIVE_PUBLICATION, LogParams
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.support.ports import free_port
from tests.support.procs import procs_fixture

procs = pytest.fixture(procs_fixture, name="procs")


def run(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_demo_delivers_every_message_and_reports_positions():
    out = run("demo", "--count", "20000", "--size", "100")
    assert re.search(r"^20000 messages of 100 B in [\d.]+ s: [\d.]+ M msg/s", out, re.M)
    positions = re.search(r"pub-pos (\d+), sub-pos (\d+), pub-lmt (\d+)", out)
    pub_pos, sub_pos, pub_lmt = map(int, positions.groups())
    assert pub_pos == sub_pos == 20000 * 160  # 100 B + 32 B header, aligned to 32
    assert pub_lmt >= sub_pos
    assert re.search(r"sub-pos: \d+ -?\d+ 1001 aeron:ipc @0$", out, re.M)


def test_demo_rejects_bad_arguments():
    result = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "demo", "--size", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--size must be at least 8" in result.stderr


def test_demo_names_a_size_over_the_max_message_length():
    """It used to publish nothing and wait for ever: the publisher's task failed unseen."""
    result = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "demo", "--size", "9000000", "--count", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (
        2,
        "aeronio demo: --size 9000000 is over the max message length 8388608 of aeron:ipc (an "
        "eighth of its term length 67108864)\n",
    )


def test_demo_interrupted_says_so_and_removes_its_driver():
    demo = subprocess.Popen(
        [sys.executable, "-m", "aeronio.cli", "demo", "--count", "1000000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = demo.stdout.readline()
        assert first.startswith("driver dir "), demo.stderr.read()
        dir = first.split()[2].rstrip(",")
        assert os.path.isdir(dir)
        demo.send_signal(signal.SIGINT)
        assert demo.wait(60) == 130
        assert demo.stderr.read() == "aeronio demo: interrupted\n"
        assert not os.path.exists(dir)
    finally:
        if demo.poll() is None:
            demo.kill()
        demo.wait(10)


def driver_dirs_of(pid: int) -> list[str]:
    """The embedded driver directories process `pid` made (aeronio-<pid>-* under /dev/shm)."""
    base = default_base()
    return [os.path.join(base, n) for n in os.listdir(base) if n.startswith(f"aeronio-{pid}-")]


@pytest.mark.parametrize(
    ("command", "sig", "status", "said"),
    [
        (["pong"], signal.SIGTERM, 0, ""),  # runs until stopped: stopped, it ends well
        (["rate"], signal.SIGTERM, 0, ""),
        (["pong", "--count", "5"], signal.SIGTERM, 143, "aeronio pong: terminated\n"),
        (["ping", "--timeout", "60"], signal.SIGTERM, 143, "aeronio ping: terminated\n"),
        (["ping", "--timeout", "60"], signal.SIGINT, 130, "aeronio ping: interrupted\n"),
        (["demo", "--count", "1000000000"], signal.SIGTERM, 143, "aeronio demo: terminated\n"),
    ],
    ids=["pong", "rate", "pong-count", "ping-term", "ping-int", "demo"],
)
def test_a_sample_stopped_by_a_signal_removes_its_driver_and_says_how_it_ended(
    command, sig, status, said
):
    """Before: SIGTERM ended them at once (status 143, no word), their embedded driver's
    directory left in /dev/shm; ping interrupted said nothing and exited 0."""
    channels = ["--ping-channel", _udp_channel(), "--pong-channel", _udp_channel()]
    if command[0] == "rate":
        channels = ["--channel", _udp_channel()]
    if command[0] == "demo":
        channels = []
    child = subprocess.Popen(
        [sys.executable, "-m", "aeronio.cli", *command, *channels],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline(), child.stderr.read()  # running: its first line
        assert driver_dirs_of(child.pid), "an embedded driver's directory"
        child.send_signal(sig)
        assert child.wait(60) == status
        assert child.stderr.read() == said
        assert driver_dirs_of(child.pid) == []
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)


@pytest.mark.parametrize(
    ("dir", "said"),
    [("/proc/aeronio-x", "No such file or directory"), ("/etc/hostname", "not a directory")],
)
def test_a_driver_dir_that_cannot_be_made_is_named(dir, said):
    """Before: the OSError's type and text and "(--debug shows where)", naming no option."""
    result = fails("driver", "--dir", dir)
    assert (result.returncode, result.stderr) == (1, f"aeronio driver: --dir {dir}: {said}\n")


@pytest.mark.parametrize(
    ("dir", "said"),
    [("/proc/aeronio-x", "No such file or directory"), ("/etc/hostname", "not a directory")],
)
def test_an_archive_dir_that_cannot_be_made_is_named(dir, said):
    """Before: the OSError's text alone, naming no option."""
    result = fails("archive", "serve", "--dir", dir)
    assert result.stderr == f"aeronio archive serve: --dir {dir}: {said}\n"


def test_clean_of_a_base_that_is_no_directory_fails(tmp_path):
    """Before: a warning, "nothing to remove", and status 0."""
    result = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "clean", "--base", str(tmp_path / "absent")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (
        2, f"aeronio clean: --base {tmp_path / 'absent'} is not a directory\n"
    )  # fmt: skip


def test_logdump_prints_metadata_and_frames(tmp_path):
    path = tmp_path / "x.logbuffer"
    log = LogBuffers.create(
        path,
        term_length=65536,
        initial_term_id=-7,
        session_id=42,
        stream_id=9,
        mtu=1408,
        correlation_id=77,
        params=LogParams(
            type=LOG_TYPE_EXCLUSIVE_PUBLICATION, publication_window_length=32768, sparse=True
        ),
    )
    limit = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(limit).put_int64_ordered(0, 1 << 40)
    appender = _core.LogAppender(log.mapped, limit, 0, False)
    assert appender.try_offer(b"hello") == 64
    assert (
        appender.try_offer(bytes(2000)) == 64 + 1408 + 672
    )  # 2000 B = 1376 + 624: frames of 1408 and 656 (672 aligned)
    log.close()
    out = run("logdump", str(path))
    assert "initial term id: -7" in out
    assert "term length: 65536" in out
    assert "mtu length: 1408" in out
    assert "correlation id: 77" in out
    assert "type: exclusive publication" in out.splitlines()
    assert "publication window length: 32768" in out.splitlines()
    assert "sparse: True" in out.splitlines()
    assert "default frame header: 00 00 00 00 00 c0 01 00" in out  # then offset, ids, term id
    assert "tail counter 0: term id -7, term offset 2144" in out
    assert "@0: DATA length 37 flags 0xc0 term offset 0 session 42 stream 9 term id -7" in out
    assert "@64: DATA length 1408 flags 0x80 term offset 64" in out
    assert "@1472: DATA length 656 flags 0x40 term offset 1472" in out


# -- mistakes answered in one line ------------------------------------------------------------


def fails(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result


def test_version():
    import importlib.metadata

    assert run("--version").strip() == f"aeronio {importlib.metadata.version('aeronio')}"


def test_logdump_of_a_missing_file_or_not_a_log(tmp_path):
    assert fails("logdump", str(tmp_path / "missing")).stderr.startswith(
        f"aeronio logdump: no such file {tmp_path / 'missing'}"
    )
    (tmp_path / "text").write_text("not a log\n")
    assert "is not a log buffer" in fails("logdump", str(tmp_path / "text")).stderr
    assert "is not a log buffer" in fails("logdump", str(tmp_path)).stderr  # a directory


def test_archive_verify_of_a_directory_without_a_catalog(tmp_path):
    result = fails("archive", "verify", "--dir", str(tmp_path))
    assert result.stderr == f"aeronio archive verify: no catalog at {tmp_path}/archive.catalog\n"
    assert list(tmp_path.iterdir()) == []  # nothing made there


def test_unexpected_failures_are_one_line_unless_debug(tmp_path, monkeypatch, capsys):
    from aeronio import cli

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "run_clean", broken)
    assert cli.main(["clean", "--base", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == "aeronio clean: RuntimeError: boom (--debug shows where)\n"
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["--debug", "clean", "--base", str(tmp_path)])


def test_stat_into_a_closed_pipe(tmp_path, procs):
    dir = str(tmp_path / "drv")
    procs.driver(dir)
    piped = subprocess.run(
        f"{sys.executable} -m aeronio.cli stat --dir {dir} | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0 and piped.stderr == "", piped
    assert piped.stdout.count("\n") == 1


def test_logdump_data_shows_payloads_as_hex_and_text(tmp_path):
    path = tmp_path / "d.logbuffer"
    log = LogBuffers.create(
        path, term_length=65536, initial_term_id=0, session_id=1, stream_id=2, mtu=1408
    )
    limit = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(limit).put_int64_ordered(0, 1 << 40)
    appender = _core.LogAppender(log.mapped, limit, 0, False)
    appender.try_offer(b"hello, aeronio!\x00\x01\x7f-and a second line of it")
    log.close()
    out = run("logdump", str(path), "--data", "20").splitlines()
    at = out.index(next(line for line in out if line.startswith("  @0: DATA length 74")))
    assert out[at + 1 : at + 4] == [
        "    0000  68 65 6c 6c 6f 2c 20 61 65 72 6f 6e 69 6f 21 00  |hello, aeronio!.|",
        "    0010  01 7f 2d 61                                      |..-a|",
        "    ... (22 more bytes)",
    ]
    assert "    0000" not in run("logdump", str(path))  # only with --data


def test_demo_over_udp():
    out = run("demo", "--udp", "--count", "20000", "--size", "64")
    assert re.search(r"channel aeron:udp\?endpoint=127\.0\.0\.1:\d+$", out, re.M)
    assert re.search(r"^20000 messages of 64 B in [\d.]+ s", out, re.M)
    pub_pos, sub_pos, _ = map(
        int, re.search(r"pub-pos (\d+), sub-pos (\d+), pub-lmt (\d+)", out).groups()
    )
    assert pub_pos == sub_pos == 20000 * 96
    assert re.search(r"snd-pos: .*aeron:udp\?endpoint=127\.0\.0\.1:\d+", out)


def _udp_channel() -> str:
    return f"aeron:udp?endpoint=127.0.0.1:{free_port()}"


def test_ping_and_pong_in_two_processes():
    ping_channel, pong_channel = _udp_channel(), _udp_channel()
    channels = ["--ping-channel", ping_channel, "--pong-channel", pong_channel]
    pong = subprocess.Popen(
        [sys.executable, "-m", "aeronio.cli", "pong", "--count", "700", *channels],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert pong.stdout.readline().startswith(f"pong: echoing {ping_channel} stream 1002")
        out = run("ping", "--count", "500", "--warmup", "200", "--size", "64", *channels)
        match = re.search(
            r"^500 round trips of 64 B \(us\): min ([\d.]+), p50 ([\d.]+), p90 ([\d.]+), "
            r"p99 ([\d.]+), p99\.9 ([\d.]+), max ([\d.]+), mean ([\d.]+)$",
            out,
            re.M,
        )
        assert match, out
        low, p50, p90, p99, p999, high, _ = map(float, match.groups())
        assert 0 < low <= p50 <= p90 <= p99 <= p999 <= high
        assert pong.wait(30) == 0  # it echoed its 700 (200 + 500) and left
    finally:
        if pong.poll() is None:
            pong.kill()
        pong.wait(10)


def ping(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "ping", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["ping", "--count", "0"], "--count must be at least 1"),  # was an IndexError at the end
        (["ping", "--warmup", "-1"], "--warmup must be at least 0"),
        (["pong", "--count", "-1"], "--count must be at least 1"),  # was for ever
        (["rate", "--reports", "-1"], "--reports must be at least 1"),  # was for ever
        # were the driver's "stream_id ... must be ...", naming no flag (demo: as a bug's)
        (["ping", "--ping-stream", "2147483648"], "--ping-stream 2147483648 must be a signed "
         "32-bit integer"),
        (["pong", "--pong-stream", "-2147483649"], "--pong-stream -2147483649 must be a signed "
         "32-bit integer"),
        (["rate", "--stream", "99999999999"], "--stream 99999999999 must be a signed 32-bit "
         "integer"),
        (["demo", "--stream-id", "99999999999"], "--stream-id 99999999999 must be a signed "
         "32-bit integer"),
    ],
)  # fmt: skip
def test_sample_counts_and_stream_ids_out_of_range_are_refused_first(args, said):
    result = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", *args], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (2, f"aeronio {args[0]}: {said}\n")


def test_ping_without_a_pong_says_what_it_waits_for_and_gives_up():
    ping_channel, pong_channel = _udp_channel(), _udp_channel()
    channels = ["--ping-channel", ping_channel, "--pong-channel", pong_channel]
    echo = f"echoing {ping_channel} stream 1002 to {pong_channel} stream 1003"
    started = time.monotonic()
    result = ping("--count", "10", "--timeout", "2", *channels)
    assert time.monotonic() - started >= 2
    assert result.returncode == 1
    assert result.stdout == f"ping: waiting up to 2 s for a pong {echo}\n"
    assert result.stderr == (
        f"aeronio ping: TimeoutError: no pong {echo} connected within 2 s (start `aeronio "
        "pong` with the same channels, or give a longer --timeout)\n"
    )
    for bad in ("0", "-1", "nan"):
        result = ping("--timeout", bad, *channels)
        assert (result.returncode, result.stderr) == (
            2, "aeronio ping: --timeout must be positive\n"
        )  # fmt: skip


def test_ping_names_the_round_trip_a_pong_leaves_unanswered():
    ping_channel, pong_channel = _udp_channel(), _udp_channel()
    channels = ["--ping-channel", ping_channel, "--pong-channel", pong_channel]
    pong = subprocess.Popen(
        [sys.executable, "-m", "aeronio.cli", "pong", "--count", "5", *channels],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert pong.stdout.readline().startswith(f"pong: echoing {ping_channel} stream 1002")
        result = ping("--count", "10", "--warmup", "0", "--timeout", "2", *channels)
        assert result.returncode == 1
        *linger, error = result.stderr.splitlines()
        assert error == (
            "aeronio ping: TimeoutError: round trip 5 of 10: no answer from the pong within 2 s"
        )
        # Whether the pong acknowledged the sixth ping before it left is its exit's race: if it
        # did not, the closing driver says so in this one line (that it always does is
        # tests/processes/test_publisher_exit.py's); nothing else may be said.
        report = (
            rf"publication \d+ on {re.escape(ping_channel)} \(session -?\d+, stream 1002\) "
            r"ended with no receiver left: its receivers have not acknowledged up to 384 .*"
        )
        assert not linger or len(linger) == 1 and re.fullmatch(report, linger[0]), result.stderr
        assert pong.wait(30) == 0  # it echoed its 5 and left
    finally:
        if pong.poll() is None:
            pong.kill()
        pong.wait(10)


def test_rate_reports_what_arrives(tmp_path):
    import asyncio

    import aeronio

    channel = _udp_channel()
    rate = subprocess.Popen(
        [sys.executable, "-m", "aeronio.cli", "rate", "--channel", channel, "--stream", "7",
         "--interval", "0.3", "--reports", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip

    async def publish() -> None:
        async with aeronio.connect() as aeron:
            publication = await aeron.add_publication(channel, 7)
            await publication.wait_connected(timeout=20)
            while rate.poll() is None:  # try_offer: once rate left, nobody is connected
                for _ in range(100):
                    publication.try_offer(bytes(100))
                await asyncio.sleep(0.001)

    try:
        assert rate.stdout.readline().strip() == f"rate: {channel} stream 7"
        asyncio.run(publish())
        reports = rate.stdout.read().splitlines()
        assert rate.wait(10) == 0, rate.stderr.read()
        assert len(reports) == 4
        figures = [re.fullmatch(r"([\d,]+) msgs/s, ([\d.]+) MB/s", line) for line in reports]
        assert all(figures), reports
        rates = [(int(m[1].replace(",", "")), float(m[2])) for m in figures]
        assert any(msgs > 0 for msgs, _ in rates)
        for msgs, mb in rates:  # 100-byte messages
            assert abs(mb - msgs * 100 / 1e6) <= 0.01 + msgs * 100 / 1e6 * 0.001
    finally:
        if rate.poll() is None:
            rate.kill()
        rate.wait(10)
