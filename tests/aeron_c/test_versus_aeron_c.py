"""bench/versus_aeron_c.py at tiny sizes: aeronio and pyaeron (Aeron 1.53's C client and C media
driver) side by side on an IPC row and a UDP row - the table's shape, every message counted on
both sides, and nothing left behind in /dev/shm."""

import glob
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
COUNT, UDP_COUNT = 20_000, 5_000
WARMUP, UDP_WARMUP = COUNT // 5, UDP_COUNT // 5  # the harness's warmup: a fifth of the count
RATE = re.compile(r"^\d+\.\d\d M$")  # one repeat: the median alone, no range
RATIO = re.compile(r"^\d+\.\d\d×$")
SIDES = ("pyaeron", "aeronio")


@pytest.mark.slow
def test_the_harness_counts_every_message_of_both_sides(pyaeron_interpreter, tmp_path):
    report = tmp_path / "versus.json"
    command = [
        sys.executable, str(ROOT / "bench" / "versus_aeron_c.py"),
        "--python", sys.executable, "--pyaeron-python", pyaeron_interpreter.get(),
        "--rows", "ipc-3p-a,ipc-1t-b,udp-embedded", "--windows", "default",
        "--repeats", "1", "--count", str(COUNT), "--udp-count", str(UDP_COUNT),
        "--timeout", "60", "--json", str(report),
    ]  # fmt: skip
    bench = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = bench.communicate(timeout=600)
    finally:
        bench.kill()
    assert bench.returncode == 0, err[-3000:]
    assert not glob.glob(f"/dev/shm/aeronio-bench-*-{bench.pid}-*"), "a run left its directory"

    tables = re.findall(r"(?m)(?:^\|.*\n)+", out)
    table, cpu = (t.splitlines() for t in tables)
    assert table[0] == "| test | pyaeron (C) | aeronio | aeronio ÷ pyaeron |"
    rows = {cells[0]: cells[1:] for cells in (line.strip("| ").split(" | ") for line in table[2:])}
    ipc_a = "IPC, 3 processes: (a) try_offer → poll"
    udp_a = "UDP, 2 processes, drivers embedded, window 128 KiB (default)"
    assert list(rows) == [ipc_a, "IPC, one thread: (b) await offer → async for", udp_a]
    for test in (ipc_a, udp_a):
        pyaeron, aeronio, ratio = rows[test]
        assert RATE.match(pyaeron) and RATE.match(aeronio) and RATIO.match(ratio), rows[test]
    pyaeron, aeronio, ratio = rows["IPC, one thread: (b) await offer → async for"]
    assert (pyaeron, ratio) == ("—", "—") and RATE.match(aeronio)
    assert "SHARED" in out.upper() and "aeronio side:" in out and "pyaeron side:" in out

    # Where the CPU went, per message: the rows across processes, each side's processes (one
    # standalone driver both IPC workers share, counted once; UDP's drivers in the workers).
    assert cpu[0] == (
        "| test | side | receiver | receiver's driver | sender | sender's driver | all |"
    )
    shown = {tuple(line.strip("| ").split(" | ")[:2]): line for line in cpu[2:]}
    assert list(shown) == [(test, side) for test in (ipc_a, udp_a) for side in SIDES]
    for (test, _), line in shown.items():
        numbers = line.strip("| ").split(" | ")[2:]
        dashes = ["receiver's driver", "sender's driver"] if test == udp_a else ["sender's driver"]
        expected = [
            p in dashes for p in ("receiver", "receiver's driver", "sender", "sender's driver")
        ]
        assert [n == "—" for n in numbers[:4]] == expected, line
        assert all(n.isdigit() for n in numbers if n != "—"), line

    written = json.loads(report.read_text())
    counted = {row["test"]: (row["pyaeron"], row["aeronio"]) for row in written["rows"]}
    ipc, one_thread, udp = (counted[test] for test in rows)
    assert [side["counted"] for side in ipc] == [[[COUNT + WARMUP] * 2]] * 2
    assert [side["counted"] for side in udp] == [[[UDP_COUNT + UDP_WARMUP] * 2]] * 2
    assert one_thread[0]["absent"] and one_thread[0]["counted"] == []
    assert one_thread[1]["counted"] == [[COUNT + WARMUP] * 2]
    assert all(not side["errors"] for sides in counted.values() for side in sides)
    cpu_ns = {row["test"]: [row[side]["cpu_ns"] for side in SIDES] for row in written["rows"]}
    assert [len(runs) for runs in cpu_ns[ipc_a]] == [1, 1]
    assert all(
        set(runs[0]) == {"receiver", "receiver's driver", "sender"} for runs in cpu_ns[ipc_a]
    )
    assert all(set(runs[0]) == {"receiver", "sender"} for runs in cpu_ns[udp_a])


@pytest.mark.slow
def test_udp_between_standalone_drivers_paced_and_in_round_trips(pyaeron_interpreter, tmp_path):
    """--udp-rate: both sides' publishers paced, their standalone drivers' CPU per message
    reported for each of the four processes; and round trips between two standalone drivers,
    each pong's number checked."""
    report = tmp_path / "paced.json"
    count, rate = 2_000, 20_000
    command = [
        sys.executable, str(ROOT / "bench" / "versus_aeron_c.py"),
        "--python", sys.executable, "--pyaeron-python", pyaeron_interpreter.get(),
        "--rows", "udp-standalone,udp-rtt", "--windows", "default", "--repeats", "1",
        "--udp-count", str(count), "--udp-rate", str(rate), "--timeout", "60",
        "--rtt-count", "500", "--rtt-warmup", "100",
        "--json", str(report),
    ]  # fmt: skip
    bench = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert bench.returncode == 0, bench.stderr[-3000:]
    row, median, p99 = json.loads(report.read_text())["rows"]
    assert row["test"].endswith(f"paced at {rate:,} msgs/s")
    assert median["test"] == "UDP round trip, standalone drivers, busy poll: median"
    for side in SIDES:
        assert median[side]["counted"] == p99[side]["counted"] == [[500, 500]]
        assert 0 < median[side]["median"] <= p99[side]["median"]
    for side in SIDES:
        assert row[side]["counted"] == [[count + count // 5] * 2]
        (cpu,) = row[side]["cpu_ns"]
        assert set(cpu) == {"receiver", "receiver's driver", "sender", "sender's driver"}
        assert all(ns > 0 for ns in cpu.values()), (side, cpu)
    assert "Paced: the publishers offer a message every 1/20,000 s" in bench.stdout
