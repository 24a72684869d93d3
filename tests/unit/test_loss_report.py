"""The driver's loss report file (Aeron's LossReport layout): entries written by the driver's side
and read back through a mapping of their own, as another process reads them."""

import struct

import numpy as np
import pytest

from aeronio.driver.loss_report import (
    ENTRY_ALIGNMENT,
    LossEntry,
    LossReport,
    LossReportError,
    load_loss_report,
    read_loss_report,
)


def test_entries_are_read_back_from_another_mapping_as_they_are_recorded(tmp_path):
    path = tmp_path / "loss-report.dat"
    report = LossReport.create(path, 4096)
    assert load_loss_report(path) == []
    first = report.create_entry(
        64, 1_000, -5, 1001, "aeron:udp?endpoint=10.0.0.2:40123", "10.0.0.1:5555"
    )
    assert load_loss_report(path) == [
        LossEntry(
            1, 64, 1_000, 1_000, -5, 1001, "aeron:udp?endpoint=10.0.0.2:40123", "10.0.0.1:5555"
        )
    ]
    first.record_observation(128, 1_500)
    second = report.create_entry(32, 2_000, 7, 9, "aeron:udp?endpoint=224.0.1.1:40456", "x:1")
    first.record_observation(1, 2_500)
    second.record_observation(32, 2_600)
    assert load_loss_report(path) == [
        LossEntry(
            3, 193, 1_000, 2_500, -5, 1001, "aeron:udp?endpoint=10.0.0.2:40123", "10.0.0.1:5555"
        ),
        LossEntry(2, 64, 2_000, 2_600, 7, 9, "aeron:udp?endpoint=224.0.1.1:40456", "x:1"),
    ]
    report.close()


def test_the_layout_is_aerons(tmp_path):
    """Count, bytes, first, last (i64), session, stream (i32), then two length-prefixed ASCII
    strings; the next entry at the next multiple of 64."""
    path = tmp_path / "loss-report.dat"
    report = LossReport.create(path, 4096)
    report.create_entry(10, 111, 3, 4, "c" * 20, "s" * 5)  # 48 + 25 bytes: 128 with alignment
    report.create_entry(20, 222, 5, 6, "ch", "src")
    report.close()
    data = path.read_bytes()
    assert struct.unpack_from("<qqqqii", data, 0) == (1, 10, 111, 111, 3, 4)
    assert struct.unpack_from("<i20si5s", data, 40) == (20, b"c" * 20, 5, b"s" * 5)
    assert data[73:128] == bytes(55)
    second = 2 * ENTRY_ALIGNMENT
    assert struct.unpack_from("<qqqqii", data, second) == (1, 20, 222, 222, 5, 6)
    assert struct.unpack_from("<i2si3s", data, second + 40) == (2, b"ch", 3, b"src")


def test_a_full_report_takes_no_more_entries_and_what_it_has_stays_readable(tmp_path):
    path = tmp_path / "loss-report.dat"
    report = LossReport.create(path, 256)
    entries = [report.create_entry(1, i, i, i, "aeron:x", "b:2") for i in range(5)]
    assert [e is not None for e in entries] == [True, True, True, True, False]  # 64 bytes each
    entries[3].record_observation(5, 99)
    read = load_loss_report(path)
    assert [(e.session_id, e.observation_count, e.total_bytes_lost) for e in read] == [
        (0, 1, 1), (1, 1, 1), (2, 1, 1), (3, 2, 6),
    ]  # fmt: skip
    report.close()


def test_a_corrupt_entry_is_refused_not_read_past_the_end():
    mapped = np.zeros(128, dtype=np.uint8)
    struct.pack_into("<qi", mapped, 0, 1, 0)
    struct.pack_into("<i", mapped, 40, 1000)  # a channel longer than the file
    with pytest.raises(LossReportError, match="runs past the end"):
        read_loss_report(mapped)


def test_a_missing_report_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_loss_report(tmp_path / "nope.dat")
