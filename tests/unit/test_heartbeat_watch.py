"""HeartbeatWatch: a peer is silent while its heartbeat stamp stands still, on the watcher's own
monotonic clock, whatever the stamp holds; a look counts one period at most."""

from aeronio.concurrent.heartbeat import HeartbeatWatch

MS = 1_000_000


def test_a_stamp_that_stands_still_is_silence_for_the_time_between_looks():
    watch = HeartbeatWatch(stamp=5_000, now_ns=0, period_ns=500 * MS)
    assert watch.look(5_000, 300 * MS) == 300 * MS
    assert watch.look(5_000, 800 * MS) == 800 * MS
    assert watch.silent_ns == 800 * MS


def test_any_change_is_a_beat_even_one_back_in_time():
    watch = HeartbeatWatch(stamp=5_000, now_ns=0, period_ns=500 * MS)
    assert watch.look(5_000, 400 * MS) == 400 * MS
    assert watch.look(5_400, 800 * MS) == 0  # forward
    assert watch.look(5_400, 1_200 * MS) == 400 * MS
    assert watch.look(-60_000, 1_600 * MS) == 0  # the writer's clock stepped back a minute
    assert watch.look(-60_000, 2_000 * MS) == 400 * MS


def test_a_stamp_far_from_the_watchers_wall_clock_is_no_silence():
    """The stamp is never compared with a clock: an hour ahead or behind, it beats if it moves."""
    watch = HeartbeatWatch(stamp=0, now_ns=0, period_ns=500 * MS)
    for i in range(1, 10):
        assert watch.look(i * 3_600_000, i * 500 * MS) == 0


def test_a_look_late_by_a_stall_counts_one_period():
    watch = HeartbeatWatch(stamp=7, now_ns=0, period_ns=500 * MS)
    assert watch.look(7, 500 * MS) == 500 * MS
    assert watch.look(7, 9_500 * MS) == 1_000 * MS  # the watcher stalled 9 s: one period
    assert watch.look(7, 10_000 * MS) == 1_500 * MS
    assert watch.look(7, 10_750 * MS) == 2_000 * MS  # a busy watcher, late: one period
    assert watch.look(8, 20_000 * MS) == 0


def test_a_clock_read_out_of_order_counts_nothing():
    watch = HeartbeatWatch(stamp=7, now_ns=1_000 * MS, period_ns=500 * MS)
    assert watch.look(7, 900 * MS) == 0
    assert watch.look(7, 1_300 * MS) == 400 * MS
