"""Counters in cnc.dat: layout, allocation, cross-thread and cross-process atomics."""

import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import aeronio
from aeronio.cnc import CONTROL_PROTOCOL_VERSION, CncFile
from aeronio.counters import (
    AERONIO_SYSTEM_COUNTER_TYPE_ID,
    PUBLISHER_LIMIT_TYPE_ID,
    RECORD_ALLOCATED,
    RECORD_RECLAIMED,
    RECORD_UNUSED,
    SUBSCRIBER_POSITION_TYPE_ID,
    SYSTEM_COUNTER_TYPE_ID,
    CountersFileError,
    CountersFullError,
    CountersManager,
    CountersReader,
    SystemCounters,
    allocate_system_counters,
    control_protocol_version,
)
from aeronio.errors import AeronError


class FakeClock:
    def __init__(self, now_ms: int = 1_000):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def cnc(tmp_path: Path) -> Path:
    """A driver directory."""
    return tmp_path


def create(dir: Path, max_counters: int = 16, **kwargs) -> CountersManager:
    """A small cnc.dat in dir, and the manager of its counters."""
    cnc = CncFile.create(
        dir,
        to_driver_capacity=1024,
        to_clients_capacity=1024,
        max_counters=max_counters,
        error_log_length=1024,
        pid=kwargs.pop("pid", None),
    )
    return CountersManager(cnc.counters_metadata_buffer, cnc.counters_values_buffer, cnc, **kwargs)


@pytest.fixture
def manager(cnc: Path):
    m = create(cnc)
    yield m
    m.close()


def run_python(code: str, *args: object, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


# -- layout ---------------------------------------------------------------------------------


def test_layout_at_documented_offsets(cnc: Path) -> None:
    """Aeron's records: metadata (512 bytes) and values (128 bytes, reference id @24), in
    cnc.dat after the header (128), the to-driver (1024 + 768) and to-clients (1024 + 128)."""
    m = create(cnc, max_counters=10)
    m.allocate("first", type_id=7)
    cid = m.allocate(
        "pub-lmt: 1 2 3", PUBLISHER_LIMIT_TYPE_ID, b"KEY", registration_id=99, reference_id=-5
    )
    m.counter(cid).set(0x0102030405060708)
    m.close()

    raw = (cnc / "cnc.dat").read_bytes()
    meta_off = 128 + 1024 + 768 + 1024 + 128
    values_off = meta_off + 10 * 512
    assert struct.unpack_from("<ii", raw, 12) == (10 * 512, 10 * 128)
    rec = meta_off + cid * 512
    state, type_id, deadline = struct.unpack_from("<iiq", raw, rec)
    assert (state, type_id) == (1, PUBLISHER_LIMIT_TYPE_ID)
    assert deadline == 2**63 - 1
    assert raw[rec + 16 : rec + 19] == b"KEY"
    assert raw[rec + 19 : rec + 128] == bytes(109)
    assert struct.unpack_from("<i", raw, rec + 128) == (14,)
    assert raw[rec + 132 : rec + 512] == b"pub-lmt: 1 2 3" + bytes(380 - 14)
    val = values_off + cid * 128
    assert raw[val : val + 128] == struct.pack("<qqqq", 0x0102030405060708, 99, 0, -5) + bytes(96)


def test_value_offset_matches_layout(manager: CountersManager) -> None:
    cid = manager.allocate("x")
    assert manager.value_offset(cid) == cid * 128
    counter = manager.counter(cid)
    assert counter.buffer is manager.buffer and counter.offset == manager.value_offset(cid)
    manager.buffer.put_int64_ordered(counter.offset, 5)
    assert counter.get() == manager.get_counter_value(cid) == 5
    assert manager.get_counter_reference_id(cid) == 0


# -- allocation -----------------------------------------------------------------------------


def test_allocate_and_read_back(manager: CountersManager) -> None:
    a = manager.allocate("sub-pos: 1", SUBSCRIBER_POSITION_TYPE_ID, b"k1", 10, owner_id=3)
    b = manager.allocate("other", 2, registration_id=11)
    assert (a, b) == (0, 1)
    assert manager.get_counter_label(a) == "sub-pos: 1"
    assert manager.get_counter_type_id(a) == SUBSCRIBER_POSITION_TYPE_ID
    assert manager.get_counter_key(a)[:3] == b"k1\x00"
    assert len(manager.get_counter_key(a)) == 112
    assert manager.get_counter_registration_id(a) == 10
    assert manager.get_counter_owner_id(a) == 3
    assert manager.get_counter_state(a) == RECORD_ALLOCATED
    assert manager.get_counter_state(5) == RECORD_UNUSED
    assert manager.find_by_type_id_and_registration_id(2, 11) == b
    assert manager.find_by_type_id_and_registration_id(2, 12) is None
    infos = list(manager.for_each())
    assert [(i.id, i.label, i.registration_id) for i in infos] == [
        (a, "sub-pos: 1", 10),
        (b, "other", 11),
    ]


def test_free_and_reuse_after_deadline(cnc: Path) -> None:
    clock = FakeClock(1_000)
    m = create(cnc, max_counters=4, reuse_timeout_ms=500, clock=clock)
    ids = [m.allocate(f"c{i}") for i in range(3)]
    m.counter(ids[1]).set(77)
    m.free(ids[1])
    assert m.get_counter_state(ids[1]) == RECORD_RECLAIMED
    assert [i.id for i in m.for_each()] == [0, 2]
    assert m.allocate("c3") == 3  # freed id still inside its reuse timeout
    with pytest.raises(CountersFullError):
        m.allocate("too many")
    clock.now_ms = 1_499
    with pytest.raises(CountersFullError, match="4 counters"):
        m.allocate("still too early")
    clock.now_ms = 1_500
    reused = m.allocate("reused", type_id=5, key=b"z")
    assert reused == ids[1]
    assert m.get_counter_value(reused) == 0
    assert m.get_counter_label(reused) == "reused"
    assert m.get_counter_type_id(reused) == 5
    assert m.get_counter_key(reused) == b"z" + bytes(111)
    m.close()


def test_default_reuse_timeout_is_zero(manager: CountersManager) -> None:
    a = manager.allocate("a")
    manager.allocate("b")
    manager.free(a)
    assert manager.allocate("c") == a


def test_label_truncated_on_utf8_boundary(manager: CountersManager) -> None:
    label = "a" + "€" * 200  # 1 + 600 bytes; 380 would split a 3-byte character
    cid = manager.allocate(label)
    stored = manager.get_counter_label(cid)
    assert stored == "a" + "€" * 126  # 1 + 378 bytes
    assert len(stored.encode()) == 379
    exact = "b" * 380
    assert manager.get_counter_label(manager.allocate(exact)) == exact
    assert manager.get_counter_label(manager.allocate("b" * 381)) == exact


def test_short_label_overwrites_longer_on_reuse(manager: CountersManager) -> None:
    cid = manager.allocate("a fairly long label")
    manager.free(cid)
    assert manager.allocate("short") == cid
    assert manager.get_counter_label(cid) == "short"


# Aeron 1.53's system counters (aeron_counters.h ids, aeron_system_counters.c labels; "Errors"
# and "Aeron software" carry Aeron's version there).
AERON_1_53_SYSTEM_COUNTERS = [
    "Bytes sent", "Bytes received", "Failed offers to ReceiverProxy",
    "Failed offers to SenderProxy", "Failed offers to DriverConductorProxy", "NAKs sent",
    "NAKs received", "Status Messages sent", "Status Messages received", "Heartbeats sent",
    "Heartbeats received", "Retransmits sent", "Flow control under runs",
    "Flow control over runs", "Invalid packets", "Errors", "Short sends",
    "Failed attempts to free log buffers",
    "Sender flow control limits, i.e. back-pressure events", "Unblocked Publications",
    "Unblocked Control Commands", "Possible TTL Asymmetry", "ControllableIdleStrategy status",
    "Loss gap fills", "Client liveness timeouts", "Resolution changes",
    "Conductor max cycle time doing its work in ns",
    "Conductor work cycle exceeded threshold count", "Sender max cycle time doing its work in ns",
    "Sender work cycle exceeded threshold count", "Receiver max cycle time doing its work in ns",
    "Receiver work cycle exceeded threshold count", "NameResolver max time in ns",
    "NameResolver exceeded threshold count", "Aeron software", "Bytes currently mapped",
    "Retransmitted bytes", "Retransmit Pool Overflow count", "Error Frames received",
    "Error Frames sent", "Publications Revoked", "Publication Images Revoked", "Images rejected",
    "Control protocol version", "Status Messages rejected",
    "Failed offers to NativeResourceAgentProxy",
]  # fmt: skip


def test_system_counters_are_aerons_at_aerons_ids_then_aeronios(cnc: Path) -> None:
    manager = create(cnc, max_counters=64)
    assert control_protocol_version(manager) == 0  # no system counters: an old driver's file
    counters = allocate_system_counters(manager)
    aerons = [d for d in SystemCounters if d.type_id == SYSTEM_COUNTER_TYPE_ID]
    assert [d.label for d in aerons] == AERON_1_53_SYSTEM_COUNTERS
    assert [int(d) for d in aerons] == list(range(46))
    assert SystemCounters.CONTROL_PROTOCOL_VERSION == 43
    assert [(int(d), d.type_id) for d in SystemCounters if d not in aerons] == [
        (SystemCounters.NAKS_SUPPRESSED, AERONIO_SYSTEM_COUNTER_TYPE_ID),
        (SystemCounters.LOW_STORAGE_WARNINGS, AERONIO_SYSTEM_COUNTER_TYPE_ID),
    ]
    for descriptor, counter in counters.items():
        assert counter.id == descriptor
        assert manager.get_counter_type_id(counter.id) == descriptor.type_id
        assert manager.get_counter_registration_id(counter.id) == descriptor
        assert manager.get_counter_key(counter.id)[:4] == struct.pack("=i", descriptor)
        if descriptor is not SystemCounters.AERON_VERSION:
            assert counter.label == descriptor.label
    version = counters[SystemCounters.AERON_VERSION]
    assert version.label == f"Aeron software: aeronio version={aeronio.__version__}"
    major, minor, patch = (int(part) for part in aeronio.__version__.split(".")[:3])
    assert version.get() == (major << 16) | (minor << 8) | patch
    assert counters[SystemCounters.CONTROL_PROTOCOL_VERSION].get() == 1 << 16  # 1.0.0
    assert control_protocol_version(manager) == CONTROL_PROTOCOL_VERSION == 1 << 16
    counters[SystemCounters.ERRORS].increment()
    assert manager.get_counter_value(SystemCounters.ERRORS) == 1
    manager.close()


# -- errors ---------------------------------------------------------------------------------


def test_bad_ids(manager: CountersManager) -> None:
    for bad in (-1, 16, 1000):
        with pytest.raises(ValueError, match=f"counter id {bad} out of range"):
            manager.get_counter_value(bad)
        with pytest.raises(ValueError, match="out of range"):
            manager.value_offset(bad)
        with pytest.raises(ValueError, match="out of range"):
            manager.free(bad)
    with pytest.raises(ValueError, match="counter id 3 is not allocated"):
        manager.free(3)
    with pytest.raises(ValueError, match="not allocated"):
        manager.counter(3)
    cid = manager.allocate("x")
    manager.free(cid)
    with pytest.raises(ValueError, match="not allocated"):
        manager.free(cid)
    with pytest.raises(ValueError, match="key is 113 bytes"):
        manager.allocate("k", key=bytes(113))


def test_full_file(manager: CountersManager) -> None:
    for i in range(16):
        assert manager.allocate(f"c{i}") == i
    with pytest.raises(CountersFullError, match="full") as info:
        manager.allocate("one too many")
    assert isinstance(info.value, AeronError)


def test_buffers_that_do_not_fit_together_are_refused() -> None:
    with pytest.raises(CountersFileError, match="must be 4 times the values"):
        CountersReader(memoryview(bytearray(1024)), memoryview(bytearray(128)))
    with pytest.raises(CountersFileError, match="whole number"):
        CountersReader(memoryview(bytearray(0)), memoryview(bytearray(0)))
    with pytest.raises(ValueError, match="not mapped from a cnc.dat"):
        _ = CountersReader(memoryview(bytearray(512)), memoryview(bytearray(128))).driver_pid


def test_counters_of_a_cnc_dat_that_do_not_fit_together_name_the_file(tmp_path: Path) -> None:
    CncFile.create(
        tmp_path, to_driver_capacity=1024, to_clients_capacity=1024, max_counters=4,
        error_log_length=256,
    ).close()  # fmt: skip
    path = tmp_path / "cnc.dat"
    with open(path, "r+b") as f:
        f.seek(12)  # the counters metadata length: 100 of the 2048 bytes
        f.write(struct.pack("<i", 100))
    with pytest.raises(CountersFileError) as raised:
        CountersReader.open(tmp_path)
    assert str(raised.value) == (
        f"{str(path)!r}: counters metadata (100 bytes) must be 4 times the values (512 bytes), "
        f"a whole number of 128-byte records"
    )


def test_open_without_a_driver(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        CountersReader.open(tmp_path / "missing")


def test_closed_reader(cnc: Path, manager: CountersManager) -> None:
    reader = CountersReader.open(cnc)
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        reader.get_counter_value(0)


# -- atomics --------------------------------------------------------------------------------


def test_counter_ops(manager: CountersManager) -> None:
    c = manager.counter(manager.allocate("c"))
    c.set(10)
    assert c.increment() == 10
    assert c.increment(5) == 11
    assert c.get() == 16
    assert c.propose_max(15) is False
    assert c.propose_max(16) is False
    assert c.propose_max(17) is True
    assert c.get() == 17


def test_threads_increment(manager: CountersManager) -> None:
    counter = manager.counter(manager.allocate("threads"))
    n, threads = 100_000, 4

    def work() -> None:
        for _ in range(n):
            counter.increment()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert counter.get() == n * threads


def test_threads_propose_max(manager: CountersManager) -> None:
    counter = manager.counter(manager.allocate("max"))
    winners: list[int] = []

    def work(start: int) -> None:
        for v in range(start, 40_000, 4):
            if counter.propose_max(v):
                winners.append(v)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert counter.get() == 39_999
    assert len(winners) == len(set(winners))  # each value was stored at most once


# -- across processes -----------------------------------------------------------------------


def test_reader_in_another_process(cnc: Path) -> None:
    manager = create(cnc, pid=1234)
    manager.cnc.to_driver.set_consumer_heartbeat_time(5678)
    shared = manager.allocate("shared ☃", type_id=4, key=b"key!", registration_id=42)
    reply = manager.allocate("reply")
    manager.counter(shared).set(424242)

    out = run_python(
        """
        import sys
        from aeronio.counters import CountersReader
        r = CountersReader.open(sys.argv[1])
        cid, reply = int(sys.argv[2]), int(sys.argv[3])
        print(r.get_counter_value(cid), r.get_counter_label(cid), r.get_counter_type_id(cid),
              r.get_counter_registration_id(cid), r.get_counter_key(cid)[:4].decode(),
              r.driver_pid, r.driver_heartbeat_ms, r.max_counters,
              r.find_by_type_id_and_registration_id(4, 42), sep="|")
        r.counter(reply).set(-99)
        """,
        cnc,
        shared,
        reply,
    )
    fields = out.stdout.strip().split("|")
    assert fields == ["424242", "shared ☃", "4", "42", "key!", "1234", "5678", "16", str(shared)]
    assert manager.get_counter_value(reply) == -99
    manager.close()


def test_two_processes_increment(cnc: Path, manager: CountersManager) -> None:
    ready = manager.counter(manager.allocate("ready"))
    go = manager.counter(manager.allocate("go"))
    total = manager.counter(manager.allocate("total"))
    script = textwrap.dedent(
        """
        import sys, time
        from aeronio.counters import CountersReader
        r = CountersReader.open(sys.argv[1])
        ready, go, total = (r.counter(int(a)) for a in sys.argv[2:5])
        ready.increment()
        deadline = time.monotonic() + 30
        while go.get() == 0:
            if time.monotonic() > deadline:
                sys.exit("timed out waiting for go")
        for _ in range(50_000):
            total.increment()
        """
    )
    args = [sys.executable, "-c", script, str(cnc), str(ready.id), str(go.id), str(total.id)]
    procs = [subprocess.Popen(args, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        deadline = time.monotonic() + 30
        while ready.get() < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert ready.get() == 2
        go.set(1)
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert total.get() == 100_000
