"""The driver's directory holds Aeron's cnc.dat: its header, the driver heartbeat as the to-driver
ring buffer's consumer heartbeat (on the timer), the counters and the distinct error log."""

import os
import struct
import time

from aeronio import connect
from aeronio.cnc import CNC_FILE, CNC_VERSION, HEADER_LENGTH, CncFile
from aeronio.concurrent import ring_buffer
from aeronio.concurrent.error_log import DistinctErrorLog, read_error_log
from aeronio.counters import CountersReader, SystemCounters
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import AeronError
from tests.support.procs import await_until


async def test_the_driver_writes_cnc_dat_and_beats_in_its_to_driver_trailer(tmp_path):
    dir = str(tmp_path / "driver")
    before_ms = time.time_ns() // 1_000_000
    driver = await MediaDriver.launch(dir=dir, timer_interval_ns=50_000_000).start()
    try:
        assert sorted(os.listdir(dir)) == sorted(
            [CNC_FILE, "driver.lock", "images", "loss-report.dat", "publications"]
        )
        with CncFile.map(dir) as cnc:
            assert cnc.cnc_version == CNC_VERSION and cnc.pid == os.getpid()
            assert before_ms <= cnc.start_timestamp_ms <= time.time_ns() // 1_000_000
            assert cnc.client_liveness_timeout_ns == driver.ctx.client_liveness_timeout_ns
            first = cnc.driver_heartbeat_ms
            assert first >= before_ms
            heartbeat_at = HEADER_LENGTH + cnc.to_driver.capacity
            heartbeat_at += ring_buffer.CONSUMER_HEARTBEAT_OFFSET
            with open(os.path.join(dir, CNC_FILE), "rb") as f:
                raw = f.read(heartbeat_at + 8)
            assert struct.unpack_from("<i", raw) == (CNC_VERSION,)
            assert struct.unpack_from("<q", raw, heartbeat_at) == (first,)
            await await_until(lambda: cnc.driver_heartbeat_ms > first, 10, "the next heartbeat")
        with CountersReader.open(dir) as reader:
            system = list(reader.for_each())[: len(SystemCounters)]
            assert [(c.id, c.type_id) for c in system] == [(d, d.type_id) for d in SystemCounters]
            labels = zip(system, SystemCounters, strict=True)
            assert all(c.label.startswith(d.label) for c, d in labels)
            assert reader.driver_pid == os.getpid()
    finally:
        await driver.close()


async def test_the_drivers_errors_are_in_the_error_log_of_cnc_dat(tmp_path):
    dir = str(tmp_path / "driver")
    driver = await MediaDriver.launch(dir=dir).start()
    try:
        async with connect(dir) as aeron:
            for _ in range(2):
                try:
                    await aeron.add_publication("aeron:udp?endpoint=no-such-host.invalid:1", 1)
                except AeronError:
                    pass
        with CncFile.map(dir) as cnc:
            (observation,) = read_error_log(cnc.error_log_buffer)
        assert observation.count == 2 and "no-such-host.invalid" in observation.text
    finally:
        await driver.close()


async def test_an_error_the_full_log_cannot_take_is_counted_and_logged(tmp_path, caplog):
    driver = await MediaDriver.launch(dir=str(tmp_path / "driver")).start()
    try:
        conductor = driver.conductor
        errors = conductor.system[SystemCounters.ERRORS]
        conductor.error_log = DistinctErrorLog(bytearray(64))
        conductor.record_error("the first error fits")
        assert not caplog.records
        conductor.record_error(ValueError("the second does not"))
        assert errors.get() == 2 and conductor.error_log.dropped == 1
        (record,) = caplog.records
        assert record.getMessage() == (
            "error log in cnc.dat full, unrecordable error: the second does not"
        )
    finally:
        await driver.close()
