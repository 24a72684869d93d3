"""The loss report aeronio's driver writes, read by the reference Aeron's LossStat (1.15.1): the
same file layout, so Aeron's own tool reads every entry and field."""

import subprocess
from datetime import datetime

from aeronio.driver.loss_report import LossReport
from aeronio.protocol.layout import LOSS_REPORT_FILE
from tests.support.java_aeron import require_aeron_java
from tests.support.reference_aeron import java_args

FIRST_MS = 1_700_000_000_123


def test_aerons_loss_stat_reads_every_entry(tmp_path):
    classpath = require_aeron_java()
    report = LossReport.create(tmp_path / LOSS_REPORT_FILE)
    unicast = report.create_entry(
        64, FIRST_MS, -5, 1001, "aeron:udp?endpoint=10.0.0.2:40123", "10.0.0.1:5555"
    )
    unicast.record_observation(128, FIRST_MS + 2_000)
    report.create_entry(1408, FIRST_MS + 500, 7, 9, "aeron:udp?endpoint=224.0.1.1:40456", "h:1")
    report.close()

    done = subprocess.run(
        java_args("io.aeron.samples.LossStat", {"aeron.dir": tmp_path}, class_path=classpath),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("#OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION"), lines
    assert lines[-1] == "2 entries read", lines
    rows = [line.split(",") for line in lines[1:-1]]
    assert [row[:2] + row[4:] for row in rows] == [
        ["2", "192", "-5", "1001", "aeron:udp?endpoint=10.0.0.2:40123", "10.0.0.1:5555"],
        ["1", "1408", "7", "9", "aeron:udp?endpoint=224.0.1.1:40456", "h:1"],
    ]
    # LossStat's dates: yyyy-MM-dd HH:mm:ss.SSSZ in the JVM's zone (the milliseconds are ours)
    times = [datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f%z") for row in rows for t in row[2:4]]
    millis = [int(t.timestamp() * 1000) for t in times]
    assert millis == [FIRST_MS, FIRST_MS + 2_000, FIRST_MS + 500, FIRST_MS + 500]
