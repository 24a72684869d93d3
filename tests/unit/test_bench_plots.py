"""bench/plots.py: the JSON report a benchmark writes (bench/reports.py, --json) becomes its
throughput and latency charts, and every run checked in under docs/pictures/benchmarks has its
charts beside it."""

import importlib
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
BENCH = ROOT / "bench"
CHARTS = ROOT / "docs" / "pictures" / "benchmarks"


def bench_module(name: str):
    """A module of bench/ (its siblings importable, as when a benchmark runs)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def report_json(reports, with_latency: bool = True) -> dict:
    """What a benchmark writes with --json, for a run of three throughput paths at 32 B (one
    1 KiB row that failed) and two round-trip paths."""
    names = {"a": "aeronio (a) try_offer -> poll", "z": "pyzmq PUSH/PULL ipc://",
             "j": "Aeron Java EmbeddedIpcThroughput"}  # fmt: skip
    tput = [
        reports.TputCell("a", 32, 1000, rates=[5e6, 6e6, 7e6]),
        reports.TputCell("z", 32, 1000, rates=[1.5e6]),
        reports.TputCell("j", 32, 0, rates=[2e7]),
        reports.TputCell("a", 1024, 1000, note="failed: it broke"),
    ]
    rtt_names = {"spin": "aeronio busy-spin", "zmq": "pyzmq PAIR ipc://"}
    rtt = [
        reports.RttCell("spin", 32, 1000, {"n": 1000, "median": 1.5, "p99": 5.6, "p999": 9.3,
                                           "mean": 1.7, "max": 300.0}),
        reports.RttCell("zmq", 32, 1000, {"n": 1000, "median": 60.0, "p99": 90.0, "p999": 150.0,
                                          "mean": 65.0, "max": 900.0}),
    ]  # fmt: skip
    report = reports.Report(
        "IPC between processes",
        ("Throughput", "Latency"),
        {"date": "2026-11-25 08:00:00 UTC"},
        reports.tput_table(tput, names, "note", lambda c: c.note),
        reports.rtt_table(rtt, rtt_names) if with_latency else None,
        [],
        [],
    )
    return report.as_json("bench/ipc_processes.py", "python bench/ipc_processes.py --json x")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def test_a_benchmarks_report_becomes_its_two_charts(tmp_path, capsys):
    source = tmp_path / "ipc.json"
    source.write_text(json.dumps(report_json(bench_module("reports"))))
    assert bench_module("plots").main([str(source), "--out", str(tmp_path / "charts")]) == 0
    made = capsys.readouterr().out.split()
    charts = tmp_path / "charts"
    assert made == [str(charts / "ipc-throughput.png"), str(charts / "ipc-latency.png")]
    # one 4.5-inch panel at 100 dpi (the failed 1 KiB row has no rate), then 8 inches
    assert [png_size(Path(p))[0] for p in made] == [450, 800]


def test_a_report_without_latency_rows_makes_no_latency_chart(tmp_path):
    source = tmp_path / "t.json"
    source.write_text(json.dumps(report_json(bench_module("reports"), with_latency=False)))
    assert [p.name for p in bench_module("plots").plot(source, tmp_path)] == ["t-throughput.png"]


def test_every_run_checked_in_has_its_charts():
    runs = sorted(CHARTS.glob("*.json"))
    assert runs, f"no benchmark runs in {CHARTS}"
    for run in runs:
        report = json.loads(run.read_text())
        for kind in ("throughput", "latency"):
            if report.get(kind):
                assert (CHARTS / f"{run.stem}-{kind}.png").exists(), (run.name, kind)
