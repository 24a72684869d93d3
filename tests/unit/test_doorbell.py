"""A Doorbell's callbacks: each one rung, whatever is added or removed during a ring (a callback
may let go of the GIL, and another thread remove one meanwhile)."""

from aeronio._core import Doorbell


def test_a_callback_removed_during_a_ring_skips_no_other():
    bell = Doorbell()
    calls = []

    def first() -> None:
        calls.append("first")
        bell.remove_callback(first)  # as another thread might while `first` runs

    def second() -> None:
        calls.append("second")

    bell.add_callback(first)
    bell.add_callback(second)
    bell.ring()
    assert calls == ["first", "second"]  # before: the list shifted, and `second` was skipped
    bell.ring()
    assert calls == ["first", "second", "second"]


def test_a_callback_added_during_a_ring_is_rung_from_the_next():
    bell = Doorbell()
    calls = []

    def late() -> None:
        calls.append("late")

    def adding() -> None:
        calls.append("adding")
        bell.add_callback(late)

    bell.add_callback(adding)
    bell.ring()
    assert calls == ["adding"]
    bell.remove_callback(adding)
    bell.ring()
    assert calls == ["adding", "late"]
