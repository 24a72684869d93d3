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
from aeronio.protocol.layout import LOSS_REPORT_FILE
from tests.support.ports import free_port
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


async def test_the_bytes_mapped_are_cnc_dat_the_loss_report_and_the_logs(tmp_path):
    """Aeron's "Bytes currently mapped", sampled each timer interval: cnc.dat, the loss report
    and each log the driver maps (an IPC publication's; a UDP publication's and its image's),
    each until it is freed."""
    dir = str(tmp_path / "driver")
    driver = await MediaDriver.launch(
        dir=dir, timer_interval_ns=10_000_000, publication_linger_ns=0
    ).start()
    try:
        files = (CNC_FILE, LOSS_REPORT_FILE)
        base = sum(os.path.getsize(os.path.join(dir, name)) for name in files)
        async with connect(dir) as aeron:
            mapped = aeron.counters.counter(SystemCounters.BYTES_CURRENTLY_MAPPED)
            await await_until(lambda: mapped.get() == base, 10, "cnc.dat and the loss report")
            publication = await aeron.add_publication("aeron:ipc?term-length=64k", 5)
            (log_file,) = [pub.log_file for pub in driver.conductor.publications]
            log_length = os.path.getsize(log_file)
            assert log_length > 3 * 64 * 1024
            await await_until(lambda: mapped.get() == base + log_length, 10, "the log too")
            await publication.close()
            await await_until(lambda: mapped.get() == base, 10, "the log freed")
            channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
            subscription = await aeron.add_subscription(channel, 6)
            publication = await aeron.add_publication(channel, 6)
            await subscription.wait_connected(timeout=10)
            logs = [pub.log_file for pub in driver.conductor.publications]
            logs += [image.log_file for image in driver.conductor.resources.images]
            assert len(logs) == 2
            both = base + sum(map(os.path.getsize, logs))
            await await_until(lambda: mapped.get() == both, 10, "a UDP stream's two logs")
    finally:
        await driver.close()


async def test_a_duty_cycle_over_the_threshold_is_counted_and_the_longest_kept(
    tmp_path, monkeypatch
):
    """Aeron's conductor cycle counters: the Python part of each duty cycle is timed, the
    longest kept ("Conductor max cycle time"), one over `conductor_cycle_threshold_ns` counted
    (here a timer tick that holds the loop for 50 ms, the threshold 20 ms)."""
    dir = str(tmp_path / "driver")
    driver = await MediaDriver.launch(
        dir=dir, timer_interval_ns=10_000_000, conductor_cycle_threshold_ns=20_000_000
    ).start()
    try:
        conductor = driver.conductor
        on_timer, held = conductor._on_timer, []

        def holding_timer(now_ns: int) -> None:
            on_timer(now_ns)
            if not held:
                held.append(now_ns)
                time.sleep(0.05)  # the event loop held, as a stuck duty cycle holds it

        monkeypatch.setattr(conductor, "_on_timer", holding_timer)
        with CountersReader.open(dir) as reader:
            counted = reader.get_counter_value
            exceeded = SystemCounters.CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED
            await await_until(lambda: counted(exceeded) >= 1, 10, "the long duty cycle counted")
            assert counted(SystemCounters.CONDUCTOR_MAX_CYCLE_TIME) >= 50_000_000
    finally:
        await driver.close()
