"""Cross-process wake slots in the log metadata: claimed by writers, shared within a process,
self-healing when the parked process died."""

import numpy as np

from aeronio import _core
from aeronio.logbuffer import descriptor, waker
from aeronio.logbuffer.log_buffers import LogBuffers

DEAD_PROCESS_ID = 0x1234567  # a wake id no live process has


def make_log(tmp_path):
    log = LogBuffers.create(
        tmp_path / "log", term_length=65536, initial_term_id=0, session_id=1, stream_id=2, mtu=1408
    )
    limit = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(limit).put_int64_ordered(0, 1 << 40)
    return log, _core.LogAppender(log.mapped, limit, 0, False)


def slots(log) -> list[int]:
    return [
        log.metadata.get_int64_volatile(descriptor.LOG_WAKE_SLOTS_OFFSET + 8 * i)
        for i in range(descriptor.LOG_WAKE_SLOT_COUNT)
    ]


def test_a_dead_processs_data_slot_is_cleared_by_the_next_append(tmp_path):
    log, appender = make_log(tmp_path)
    log.metadata.put_int64_ordered(descriptor.LOG_WAKE_SLOTS_OFFSET + 16, DEAD_PROCESS_ID)
    space_waiter = DEAD_PROCESS_ID | descriptor.LOG_WAKE_SPACE_BIT
    log.metadata.put_int64_ordered(descriptor.LOG_WAKE_SLOTS_OFFSET + 24, space_waiter)
    assert appender.try_offer(b"x") > 0
    assert slots(log)[2] == 0, "the appender claims (and wakes) the data waiter's slot"
    assert slots(log)[3] == space_waiter, "space waiters are the conductor's to wake"
    log.mapped.wake_space_waiters()
    assert slots(log)[3] == 0


def test_tasks_of_one_process_share_one_slot_per_log_and_kind(tmp_path):
    log, _ = make_log(tmp_path)
    own = waker.waker().id
    a = waker.register_data_waiter(log.metadata)
    b = waker.register_data_waiter(log.metadata)
    c = waker.register_space_waiter(log.metadata)
    assert sorted(v for v in slots(log) if v) == [own, own | descriptor.LOG_WAKE_SPACE_BIT]
    a.cancel()
    assert own in slots(log), "still held for the other parked task"
    log.metadata.put_int64_ordered(descriptor.LOG_WAKE_SLOTS_OFFSET + 8 * slots(log).index(own), 0)
    d = waker.register_data_waiter(log.metadata)  # a writer claimed it: the next park re-claims
    assert own in slots(log)
    for registration in (b, c, d):
        registration.cancel()
    assert slots(log) == [0] * descriptor.LOG_WAKE_SLOT_COUNT


def test_own_process_slots_are_left_to_doorbells(tmp_path):
    log, appender = make_log(tmp_path)
    registration = waker.register_data_waiter(log.metadata)
    assert appender.try_offer(b"x") > 0
    assert waker.waker().id in slots(log), "no datagram to ourselves: the doorbell rings"
    registration.cancel()


def test_the_wake_fields_sit_in_aeron_s_second_padding():
    """After Aeron's end-of-stream, connected and transport-count fields and before its
    correlation id: not in the 128 bytes of the tail counters, which every offer writes and a
    subscriber would otherwise pull across cores after every poll."""
    d = descriptor
    first = d.LOG_LIMIT_WANTED_OFFSET
    end = d.LOG_WAKE_SLOTS_OFFSET + 8 * d.LOG_WAKE_SLOT_COUNT
    assert d.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET + 4 <= first
    assert end <= d.LOG_CORRELATION_ID_OFFSET
    fields = sorted(
        [
            (d.LOG_LIMIT_WANTED_OFFSET, 8),
            (d.LOG_CONDUCTOR_WAKE_ID_OFFSET, 8),
            (d.LOG_WAKE_SLOTS_OFFSET, 8 * d.LOG_WAKE_SLOT_COUNT),
        ]
    )
    for (a, n), (b, _) in zip(fields, fields[1:], strict=False):
        assert a + n <= b
    assert all(offset % 8 == 0 for offset, _ in fields)  # 8-byte atomics
    assert first >= 2 * 64  # the tails' pair of cache lines (an adjacent-line prefetch) apart
