"""bench/versus_aeron_c.py's parts that need no process: a gap or a reorder fails a run of
aeronio's one-process loops, and the table shows a failed or absent cell as such, never as a
number. The aeronio side's handlers keep their counts where every Python specialises the access.
"""

import asyncio
import contextlib
import dis
import os
import sys
import time
import types

import pytest

from tests.unit.test_bench_plots import bench_module


@pytest.mark.parametrize(
    "numbers", [[0, 2, 3], [0, 2, 1], [0, 1, 1]], ids=["gap", "reorder", "twice"]
)
def test_a_message_out_of_sequence_fails_the_run(numbers):
    workers = bench_module("one_process_workers")
    basics = bench_module("basics")
    got = workers.Received()
    handler = workers.counting_handler(got)
    for number in numbers:
        handler(workers.SEQ.pack(number) + bytes(24), None)
    assert got.count == 3
    with pytest.raises(basics.BenchError, match="sequence check failed"):
        workers.checked(got, 3, 32)


def test_every_message_in_order_passes():
    workers = bench_module("one_process_workers")
    got = workers.Received()
    handler = workers.counting_handler(got)
    for number in range(3):
        handler(workers.SEQ.pack(number) + bytes(24), None)
    workers.checked(got, 3, 32)
    with pytest.raises(bench_module("basics").BenchError, match="received 3 messages"):
        workers.checked(got, 4, 32)


def test_the_handlers_counts_are_not_shadowed_by_class_attributes():
    """From 3.12 CPython leaves `got.count` unspecialised (about 20 ns each, several per message)
    when the class has an attribute of the same name, as a plain dataclass's defaults are: the
    counts live in slots, and the handler's accesses to them specialise after a warmup."""
    workers = bench_module("one_process_workers")
    got = workers.Received()
    shadowing = [
        name
        for name in ("count", "bad", "last_length", "stalled")
        if not isinstance(vars(type(got)).get(name), types.MemberDescriptorType)
    ]
    assert shadowing == []
    handler = workers.counting_handler(got)
    message = bytearray(32)
    for number in range(2000):
        workers.SEQ.pack_into(message, 0, number)
        handler(message, None)
    assert (got.count, got.bad, got.last_length) == (2000, None, 32)
    if sys.version_info >= (3, 12):  # every message runs these; 3.11 specialises them either way
        generic = [
            (i.opname, i.argval)
            for i in dis.get_instructions(handler, adaptive=True)
            if i.argval in ("count", "last_length") and i.opname in ("LOAD_ATTR", "STORE_ATTR")
        ]
        assert generic == []


def test_the_table_shows_medians_ranges_ratios_errors_and_absent_apis():
    versus = bench_module("versus_aeron_c")
    rate = versus.Line("IPC (a)", "rate")
    rate.values = {"pyaeron": [2e6, 1e6, 3e6], "aeronio": [4e6, 5e6, 3e6]}
    assert rate.row() == ["IPC (a)", "2.00 M (1.00..3.00)", "4.00 M (3.00..5.00)", "2.00×"]
    rtt = versus.Line("round trip", "median", time=True)
    rtt.values = {"pyaeron": [0.5], "aeronio": [0.75]}
    assert rtt.row() == ["round trip", "0.50 µs", "0.75 µs", "1.50× the time"]
    failed = versus.Line("UDP", "rate")
    failed.values["aeronio"] = [1e6]
    failed.errors["pyaeron"] = ["counted 9 of 10"]
    assert failed.row() == ["UDP", "error: counted 9 of 10", "1.00 M", "n/a"]
    skipped = versus.Line("UDP", "rate")
    skipped.values["aeronio"] = [1e6]
    skipped.errors["pyaeron"] = ["skipped: needs Python 3.12+"]
    assert skipped.row() == ["UDP", "skipped: needs Python 3.12+", "1.00 M", "n/a"]
    absent = versus.Line("IPC (b)", "rate", absent={"pyaeron"})
    absent.values["aeronio"] = [1e6]
    assert absent.row() == ["IPC (b)", "—", "1.00 M", "—"]


@pytest.mark.parametrize(("size", "rule"), [(7, "at least 8"), (1377, "at most 1376")])
def test_a_size_the_handlers_cannot_count_is_refused(size, rule, capsys):
    """The handlers count frames (as Aeron's samples do): a message must fit one frame."""
    versus = bench_module("versus_aeron_c")
    with pytest.raises(SystemExit) as refused:
        versus.main(["--size", str(size)])
    assert refused.value.code == 2
    assert f"--size must be {rule}" in capsys.readouterr().err


def test_cpu_per_message_counts_each_process_once():
    """Each process's CPU over its own window, per timed message; a driver the two workers
    share (IPC through one standalone driver) is counted once, as the receiver's."""
    runs = bench_module("runs")
    received = {"count": 1000, "cpu_s": 2e-4, "driver_pid": 7, "driver_cpu_s": 1e-4}
    sent = {"cpu_s": 3e-4, "driver_pid": 8, "driver_cpu_s": 5e-5}
    assert runs.cpu_per_message(received, sent) == pytest.approx(
        {"receiver": 200, "receiver's driver": 100, "sender": 300, "sender's driver": 50}
    )
    shared = {**sent, "driver_pid": 7}
    assert runs.cpu_per_message(received, shared) == pytest.approx(
        {"receiver": 200, "receiver's driver": 100, "sender": 300}
    )
    embedded = {"count": 1000, "cpu_s": 2e-4, "driver_pid": None, "driver_cpu_s": None}
    assert runs.cpu_per_message(embedded, None) == pytest.approx({"receiver": 200})
    assert runs.cpu_per_message({**received, "incomplete": "out of time"}, sent) == {}


def test_the_cpu_table_shows_medians_per_process_and_their_sum():
    versus = bench_module("versus_aeron_c")
    line = versus.Line("UDP", "rate")
    assert versus.cpu_table([line]) == []
    line.cpu_ns["aeronio"] = [
        {"receiver": 100, "receiver's driver": 50, "sender": 90, "sender's driver": 40},
        {"receiver": 120, "receiver's driver": 70, "sender": 80, "sender's driver": 60},
        {"receiver": 110, "receiver's driver": 60, "sender": 100, "sender's driver": 50},
    ]
    line.cpu_ns["pyaeron"] = [{"receiver": 300, "receiver's driver": 10, "sender": 200}]
    assert line.cpu_row("aeronio") == ["UDP", "aeronio", "110", "60", "90", "50", "320"]
    assert line.cpu_row("pyaeron") == ["UDP", "pyaeron", "300", "10", "200", "—", "510"]
    table = versus.cpu_table([line])
    assert "| UDP | pyaeron | 300 | 10 | 200 | — | 510 |" in table
    assert "| UDP | aeronio | 110 | 60 | 90 | 50 | 320 |" in table


def test_a_process_cpu_time_is_read_to_the_nanosecond():
    """Runs of a few hundred ms need more than /proc/PID/stat's 10 ms ticks."""
    children = bench_module("children")
    before = children.proc_cpu_s(os.getpid())
    deadline = time.thread_time() + 0.003
    while time.thread_time() < deadline:
        pass
    used = children.proc_cpu_s(os.getpid()) - before
    assert 0.003 <= used < 1.0
    assert children.proc_cpu_s(None) is None
    assert children.driver_cpu(5, 1.0, 1.25) == {"driver_pid": 5, "driver_cpu_s": 0.25}
    assert children.driver_cpu(None, None, 1.0) == {"driver_pid": None, "driver_cpu_s": None}


def test_a_paced_sender_waits_until_each_message_is_due():
    pace = bench_module("worker_protocol").Pace(1000.0)  # a message a millisecond
    start = time.perf_counter()
    pace.wait(10)  # the first sets the schedule: due at once
    assert time.perf_counter() - start < 0.5
    pace.wait(15)
    assert time.perf_counter() - start >= 0.005
    assert (type(pace).nap(1000.0), type(pace).nap(0)) == (type(pace).IDLE, 0.0)


async def test_a_paced_aeronio_sender_turns_its_loop_while_it_waits():
    """Its sleeps block its loop, where aeronio's client keeps itself alive: it turns the loop
    every tenth of a second's messages (here 20 at 200 a second), so nothing there waits for
    the end of a run (a client silent for the driver's liveness timeout loses its
    publications)."""
    workers = bench_module("aeron_workers")
    offered = []
    pub = types.SimpleNamespace(try_offer=lambda msg: offered.append(bytes(msg)) or 1)
    turns = []

    async def count_turns() -> None:
        while True:
            turns.append(time.perf_counter())
            await asyncio.sleep(0)

    ticker = asyncio.ensure_future(count_turns())
    await asyncio.sleep(0)
    spec = {"rate": 200.0, "size": 16, "idle_yield": 10, "send_yield": 0}
    start = time.perf_counter()
    await workers.pub_spin(pub, spec, 0, 100)  # half a second
    end = time.perf_counter()
    ticker.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ticker
    assert len(offered) == 100 and end - start >= 0.45
    assert len([t for t in turns if start < t < end]) >= 4  # at 0, 20, 40, 60 and 80


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--udp-rate", "-1"], "--udp-rate must not be negative"),
        (["--udp-rate", "1000"], "--udp-rate paces the standalone drivers' row"),
    ],
)
def test_a_pace_the_rows_cannot_take_is_refused(args, said, capsys):
    versus = bench_module("versus_aeron_c")
    with pytest.raises(SystemExit) as refused:
        versus.main(args)
    assert refused.value.code == 2
    assert said in capsys.readouterr().err


def test_issue_28s_table_is_the_default_and_udp_round_trips_are_asked_for():
    """The default rows are issue 28's table; `udp-rtt` (minutes of round trips between
    standalone drivers) runs when --rows names it."""
    versus = bench_module("versus_aeron_c")
    default = versus.build_parser().parse_args([]).rows.split(",")
    assert set(versus.ROWS) - set(default) == {"udp-rtt"}
    assert "udp-rtt" in versus.build_parser().parse_args(["--rows", "udp-rtt"]).rows


def test_the_udp_rows_are_bounded_by_the_ipc_loops_of_the_same_run():
    """aeronio's (a) loops over IPC in the run bound what its UDP rows can reach: the bound is
    shown per UDP row as that rate ÷ pyaeron's, and not at all without the IPC row."""
    versus = bench_module("versus_aeron_c")
    ipc = versus.Line(versus.ROWS["ipc-3p-a"], "rate")
    ipc.values = {"pyaeron": [4e6], "aeronio": [5e6, 6e6, 5.5e6]}
    standalone = versus.Line(f"{versus.ROWS['udp-standalone']}, window 2m", "rate")
    standalone.values = {"pyaeron": [2.2e6, 2.5e6], "aeronio": [2e6]}
    embedded = versus.Line(f"{versus.ROWS['udp-embedded']}, window 2m", "rate")
    embedded.values["aeronio"] = [4e6]
    embedded.errors["pyaeron"] = ["counted 9 of 10"]
    bounds = versus.udp_bounds([ipc, standalone, embedded])
    assert "reached 5.50 M msgs/s" in bounds[1]
    assert bounds[3:] == [f"- {standalone.test}: at most 2.34× pyaeron"]
    assert versus.udp_bounds([standalone, embedded]) == []
    ipc.errors["aeronio"] = ["counted 1 of 2"]
    assert versus.udp_bounds([ipc, standalone]) == []
