"""WatchRules: when the driver looks for commands that no doorbell announces, as a state
machine fed inotify's events on cnc.dat, the settling time and the scans' verdicts."""

from aeronio.driver.command_watch import RESCAN_FIRST_S, RESCAN_MAX_S, WatchRules


def settled(rules: WatchRules, foreign: bool) -> float | None:
    """Run the scan the rules want, with `foreign` as its verdict."""
    assert rules.scan_wanted
    return rules.end_scan(rules.begin_scan(), foreign)


def test_it_looks_from_the_start_until_a_scan_finds_no_foreign_writer():
    rules = WatchRules()
    assert rules.watching and rules.scan_wanted
    assert settled(rules, foreign=False) is None
    assert not rules.watching and not rules.scan_wanted


def test_an_open_makes_it_look_and_its_close_asks_for_a_scan():
    rules = WatchRules()
    settled(rules, foreign=False)
    rules.on_open()
    assert rules.watching and not rules.scan_wanted  # the opener may not have mapped it yet
    rules.on_close()
    assert rules.watching and rules.scan_wanted
    settled(rules, foreign=False)
    assert not rules.watching


def test_an_open_kept_open_is_scanned_once_settled():
    """Python's mmap keeps the file open while mapped: the scan comes after SETTLE_S."""
    rules = WatchRules()
    settled(rules, foreign=False)
    rules.on_open()
    rules.on_settled()
    assert rules.watching and rules.scan_wanted
    settled(rules, foreign=False)
    assert not rules.watching


def test_a_foreign_writer_keeps_it_looking_and_is_rescanned_with_a_growing_pause():
    rules = WatchRules()
    settled(rules, foreign=False)
    rules.on_open()
    rules.on_close()
    delays = []
    for _ in range(6):
        delays.append(settled(rules, foreign=True))
        assert rules.watching and not rules.scan_wanted
        rules.on_rescan_due()
        assert rules.watching  # still, while the rescan runs
    assert delays == [RESCAN_FIRST_S, 2.0, 4.0, RESCAN_MAX_S, RESCAN_MAX_S, RESCAN_MAX_S]
    settled(rules, foreign=False)  # it left
    assert not rules.watching
    rules.on_open()  # a new open starts the pauses over
    rules.on_close()
    assert settled(rules, foreign=True) == RESCAN_FIRST_S


def test_a_scan_begun_before_the_latest_open_settles_nothing():
    rules = WatchRules()
    settled(rules, foreign=False)
    rules.on_open()
    rules.on_close()
    generation = rules.begin_scan()
    rules.on_open()  # a client opened it while the scan ran
    rules.on_close()
    assert rules.end_scan(generation, foreign=False) is None
    assert rules.watching and rules.scan_wanted
    settled(rules, foreign=True)
    assert rules.watching


def test_a_close_during_a_scan_leaves_its_verdict_standing():
    rules = WatchRules()
    settled(rules, foreign=False)
    rules.on_open()
    rules.on_settled()
    generation = rules.begin_scan()
    rules.on_close()
    rules.end_scan(generation, foreign=False)
    assert not rules.watching and not rules.scan_wanted


def test_lost_events_ask_for_a_scan_and_a_lost_watch_looks_for_good():
    rules = WatchRules()
    settled(rules, foreign=False)
    rules.on_open()  # its close was among the lost events
    rules.on_overflow()
    assert rules.watching and rules.scan_wanted and rules.opened == 0
    settled(rules, foreign=False)
    assert not rules.watching
    rules.on_close()  # an unmatched close (an open from before the watch) counts nothing
    assert rules.opened == 0 and not rules.watching
    rules.look_always()
    assert rules.watching and not rules.scan_wanted
