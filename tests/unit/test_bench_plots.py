"""bench/plots.py: a benchmark's JSON report (--json) becomes its throughput and latency charts,
and every run checked in under docs/pictures/benchmarks has its charts beside it."""

import importlib.util
import json
import struct
from pathlib import Path

ROOT = Path(__file__).parents[2]
CHARTS = ROOT / "docs" / "pictures" / "benchmarks"


def plots_module():
    spec = importlib.util.spec_from_file_location("plots", ROOT / "bench" / "plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPORT = {
    "title": "IPC between processes",
    "info": {"date": "2026-11-25 08:00:00 UTC"},
    "throughput": {
        "headers": ["path", "size B", "N", "msgs/s", "MB/s", "e2e msgs/s", "vs pyzmq", "note"],
        "rows": [
            ["aeronio (a) try_offer -> poll", "32", "1,000", "5,000,000", "160.0", "", "", ""],
            ["pyzmq PUSH/PULL ipc://", "32", "1,000", "1,500,000", "48.0", "", "", ""],
            ["Aeron Java EmbeddedIpcThroughput", "32", "-", "20,000,000", "640", "-", "", ""],
            ["aeronio (a) try_offer -> poll", "1024", "1,000", "n/a", "n/a", "", "", "failed"],
        ],
    },
    "latency": {
        "headers": [
            "path",
            "size B",
            "round trips",
            "median us",
            "p99 us",
            "p99.9 us",
            "mean us",
            "max us",
            "vs pyzmq",
            "note",
        ],  # fmt: skip
        "rows": [
            ["aeronio busy-spin", "32", "1,000", "1.50", "5.60", "9.30", "1.70", "300", "", ""],
            ["pyzmq PAIR ipc://", "32", "1,000", "60.00", "90.00", "150.0", "65.0", "900", "", ""],
        ],
    },
}


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def test_a_report_becomes_its_two_charts(tmp_path, capsys):
    source = tmp_path / "ipc.json"
    source.write_text(json.dumps(REPORT))
    assert plots_module().main([str(source), "--out", str(tmp_path / "charts")]) == 0
    made = capsys.readouterr().out.split()
    assert made == [
        str(tmp_path / "charts" / f"ipc-{kind}.png") for kind in ("throughput", "latency")
    ]
    widths = [png_size(Path(p))[0] for p in made]
    assert widths == [450, 800]  # one 4.5-inch panel (the 1 KiB row has no rate), 8 inches


def test_a_report_without_latency_rows_makes_no_latency_chart(tmp_path):
    source = tmp_path / "t.json"
    source.write_text(json.dumps({**REPORT, "latency": None}))
    assert [p.name for p in plots_module().plot(source, tmp_path)] == ["t-throughput.png"]


def test_every_run_checked_in_has_its_charts():
    runs = sorted(CHARTS.glob("*.json"))
    assert runs, f"no benchmark runs in {CHARTS}"
    for run in runs:
        report = json.loads(run.read_text())
        for kind in ("throughput", "latency"):
            if report.get(kind):
                assert (CHARTS / f"{run.stem}-{kind}.png").exists(), (run.name, kind)
