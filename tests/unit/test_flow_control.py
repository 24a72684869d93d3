"""Sender flow control strategies (aeronio.driver.flow_control), driven with explicit times."""

from __future__ import annotations

import struct

import pytest

from aeronio.driver.flow_control import (
    RECEIVER_TIMEOUT_NS,
    FlowControl,
    MaxFlowControl,
    MinFlowControl,
    TaggedFlowControl,
    UnicastFlowControl,
    flow_control_for,
    group_tag_feedback,
)
from aeronio.errors import ChannelUriError
from aeronio.logbuffer.descriptor import compute_position
from aeronio.protocol.channel import parse_flow_control
from aeronio.protocol.frames import SM_SETUP_FLAG, StatusMessage, status_message

TERM = 64 * 1024
INITIAL = 1_000_000  # initial term id
WINDOW = 16 * 1024
TAG = 0x0102030405060708


def sm(
    receiver_id: int,
    term_count: int,
    term_offset: int,
    window: int = WINDOW,
    *,
    feedback: bytes = b"",
    flags: int = 0,
) -> StatusMessage:
    """An SM at `term_count` terms after the initial one, decoded as the sender would see it."""
    frame = status_message(
        session_id=7,
        stream_id=1001,
        consumption_term_id=INITIAL + term_count,
        consumption_term_offset=term_offset,
        receiver_window=window,
        receiver_id=receiver_id,
        flags=flags,
        feedback=feedback,
    )
    return StatusMessage.decode(frame.encode())


def pos(term_count: int, term_offset: int) -> int:
    return compute_position(INITIAL + term_count, term_offset, TERM, INITIAL)


def feed(fc: FlowControl, limit: int, message: StatusMessage, now_ns: int) -> int:
    return fc.on_status_message(message, limit, INITIAL, TERM, now_ns)


def setup_sm(receiver_id: int, feedback: bytes = b"") -> StatusMessage:
    return sm(receiver_id, -INITIAL, 0, 0, flags=SM_SETUP_FLAG, feedback=feedback)


# -- unicast -------------------------------------------------------------------------------


def test_unicast_follows_its_receiver_and_never_goes_back():
    fc = UnicastFlowControl()
    assert fc.receiver_count == 0 and fc.has_required_receivers()
    limit = feed(fc, 0, sm(1, 0, 1024), 10)
    assert limit == 1024 + WINDOW
    assert fc.receiver_count == 1
    limit = feed(fc, limit, sm(1, 2, 96), 20)  # across two term boundaries
    assert limit == pos(2, 96) + WINDOW == 2 * TERM + 96 + WINDOW
    assert feed(fc, limit, sm(1, 1, 0), 30) == limit  # an older SM does not lower it
    assert fc.on_idle(10 * RECEIVER_TIMEOUT_NS, limit) == limit
    assert fc.receiver_count == 0  # a receiver silent that long is gone (as for max)


def test_unicast_ignores_setup_eliciting_sms():
    fc = UnicastFlowControl()
    assert feed(fc, 4096, setup_sm(1), 10) == 4096
    assert fc.receiver_count == 0


# -- max -----------------------------------------------------------------------------------


def test_max_is_paced_by_the_fastest_receiver():
    fc = MaxFlowControl()
    limit = feed(fc, 0, sm(1, 0, 4096), 0)
    assert limit == 4096 + WINDOW
    limit = feed(fc, limit, sm(2, 1, 512), 1)
    assert limit == pos(1, 512) + WINDOW
    # The slow receiver neither lowers the limit nor is it waited for.
    assert feed(fc, limit, sm(1, 0, 8192), 2) == limit
    limit = feed(fc, limit, sm(1, 3, 0), 3)  # the slow one overtakes
    assert limit == pos(3, 0) + WINDOW
    assert fc.receiver_count == 2
    assert fc.has_required_receivers()


def test_max_drops_silent_receivers_from_its_count():
    fc = MaxFlowControl(timeout_ns=1000)
    limit = feed(fc, 0, sm(1, 0, 0), 0)
    limit = feed(fc, limit, sm(2, 0, 64), 500)
    assert fc.on_idle(1000, limit) == limit and fc.receiver_count == 2  # exactly the timeout
    assert fc.on_idle(1001, limit) == limit
    assert fc.receiver_count == 1  # receiver 1 went silent
    assert fc.on_idle(1501, limit) == limit
    assert fc.receiver_count == 0
    assert fc.has_required_receivers()


def test_max_counts_a_receiver_that_said_farewell_no_more():
    fc = MaxFlowControl()
    limit = feed(fc, 0, sm(1, 0, 0), 0)
    limit = feed(fc, limit, sm(2, 0, 64), 1)
    assert fc.on_receiver_left(1, limit) == limit and fc.receiver_count == 1
    assert fc.on_receiver_left(3, limit) == limit and fc.receiver_count == 1  # never tracked


def test_max_ignores_setup_eliciting_sms():
    fc = MaxFlowControl()
    assert feed(fc, 100, setup_sm(1), 0) == 100
    assert fc.receiver_count == 0


# -- min -----------------------------------------------------------------------------------


def test_min_is_paced_by_the_slowest_receiver():
    fc = MinFlowControl()
    assert fc.timeout_ns == RECEIVER_TIMEOUT_NS and fc.min_group_size == 0
    assert fc.on_idle(0, 123) == 123  # nobody tracked: the limit stays
    limit = feed(fc, 0, sm(1, 1, 4096), 0)
    assert limit == pos(1, 4096) + WINDOW
    limit = feed(fc, limit, sm(2, 2, 0), 1)  # a faster one does not raise it
    assert limit == pos(1, 4096) + WINDOW
    limit = feed(fc, limit, sm(1, 2, 1024), 2)  # the slowest moves: now receiver 2 is slowest
    assert limit == pos(2, 0) + WINDOW
    assert fc.receiver_count == 2


def test_min_slower_joiner_lowers_the_limit():
    fc = MinFlowControl()
    limit = feed(fc, 0, sm(1, 3, 0), 0)
    assert limit == pos(3, 0) + WINDOW
    limit = feed(fc, limit, sm(2, 2, TERM - 32, window=1024), 1)
    assert limit == pos(2, TERM - 32) + 1024 < pos(3, 0) + WINDOW
    assert fc.receiver_count == 2


def test_min_receiver_back_from_far_behind_does_not_hold_the_group():
    """A receiver dropped after its timeout (its driver paused 3 s) whose status messages come
    back from where it stopped, terms behind: taken back in, it held the sender (and every
    other receiver) until its image timed out, 12 s here; as Aeron's, it is not taken back."""
    fc = MinFlowControl(timeout_ns=1_000)
    limit = feed(fc, 0, sm(1, 0, 0), 0)
    limit = feed(fc, limit, sm(2, 0, 0), 0)
    limit = feed(fc, limit, sm(1, 40, 0), 900)
    limit = fc.on_idle(1_001, limit)  # receiver 2 timed out
    assert limit == pos(40, 0) + WINDOW and fc.receiver_count == 1
    assert feed(fc, limit, sm(2, 0, 0), 1_100) == pos(40, 0) + WINDOW
    assert fc.receiver_count == 1
    assert fc.on_idle(1_900, limit) == limit  # nor later, from where it is
    # Back within its window of the group (a new image of it, joined at the live position),
    # and a joiner of a smaller window at the live position: both taken in.
    assert feed(fc, limit, sm(2, 40, 0), 2_000) == pos(40, 0) + WINDOW
    assert feed(fc, limit, sm(3, 40, 0, window=1024), 2_000) == pos(40, 0) + 1024
    assert fc.receiver_count == 3
    # Just beyond its window behind the slowest: not.
    assert feed(fc, 0, sm(4, 39, TERM - 1024 - 32, window=1024), 2_100) == 0
    assert fc.receiver_count == 3
    tagged = TaggedFlowControl(TAG)
    tag = group_tag_feedback(TAG)
    limit = feed(tagged, 0, sm(1, 40, 0, feedback=tag), 0)
    assert feed(tagged, limit, sm(2, 0, 0, feedback=tag), 1) == limit
    assert tagged.receiver_count == 1


def test_min_silent_receiver_stops_holding_the_sender_back():
    fc = MinFlowControl(timeout_ns=1_000)
    limit = feed(fc, 0, sm(1, 0, 0), 0)  # slow, then silent
    limit = feed(fc, limit, sm(2, 1, 0), 0)
    assert limit == WINDOW
    limit = feed(fc, limit, sm(2, 1, 2048), 900)
    assert limit == WINDOW
    assert fc.on_idle(1_000, limit) == limit  # not yet more than the timeout
    limit = fc.on_idle(1_001, limit)
    assert limit == pos(1, 2048) + WINDOW
    assert fc.receiver_count == 1
    # When the last one times out the limit stays where it is.
    assert fc.on_idle(2_000, limit) == limit
    assert fc.receiver_count == 0
    # A receiver that comes back is tracked again.
    assert feed(fc, limit, sm(1, 0, 512), 3_000) == 512 + WINDOW
    assert fc.receiver_count == 1


def test_min_receiver_that_said_farewell_stops_holding_the_sender_back_at_once():
    """Aeron 1.53's: a receiver whose image ended or closed leaves the group at its farewell,
    not at its timeout."""
    for fc in (MinFlowControl(), TaggedFlowControl(7)):
        tag = group_tag_feedback(7)
        limit = feed(fc, 0, sm(1, 0, 0, feedback=tag), 0)  # slow
        limit = feed(fc, limit, sm(2, 1, 0, feedback=tag), 0)
        assert limit == WINDOW and fc.receiver_count == 2
        assert fc.on_receiver_left(1, limit) == pos(1, 0) + WINDOW
        assert fc.receiver_count == 1 and fc.has_required_receivers()
        assert fc.on_receiver_left(2, 12345) == 12345  # the last: the limit stays
        assert fc.receiver_count == 0 and fc.has_required_receivers()  # none required
        assert fc.on_receiver_left(1, 12345) == 12345  # gone already


def test_min_and_tagged_without_a_group_size_take_any_receiver_while_none_is_tracked():
    """Aeron 1.53's: with no group size (none required) the receivers' liveness alone says
    connected, and while no member is tracked a receiver outside the group (untagged, for
    tagged flow control) moves the limit on as max flow control would; once a member is, only
    members pace it. A tagged publication used to wait, never connected, for a tagged receiver."""
    for fc in (MinFlowControl(), TaggedFlowControl(7)):
        assert fc.has_required_receivers()
        assert feed(fc, 0, sm(1, 0, 0), 0) == WINDOW  # untagged: tracked by min only
        assert fc.receiver_count == (type(fc) is MinFlowControl)
    tagged = TaggedFlowControl(7)
    limit = feed(tagged, 0, sm(1, 1, 0), 0)
    assert limit == pos(1, 0) + WINDOW
    limit = feed(tagged, limit, sm(2, 1, 0, feedback=group_tag_feedback(7)), 1)
    assert limit == pos(1, 0) + WINDOW and tagged.receiver_count == 1
    assert feed(tagged, limit, sm(1, 2, 0), 2) == limit  # a member paces it now


def test_min_group_size_for_required_receivers():
    fc = MinFlowControl(min_group_size=2)
    assert not fc.has_required_receivers()
    limit = feed(fc, 0, sm(1, 0, 0), 0)
    assert not fc.has_required_receivers()
    feed(fc, limit, sm(1, 0, 64), 1)  # the same receiver again
    assert not fc.has_required_receivers()
    feed(fc, limit, sm(2, 0, 0), 2)
    assert fc.has_required_receivers()
    fc.on_idle(2 + RECEIVER_TIMEOUT_NS, limit)  # receiver 1 timed out
    assert fc.receiver_count == 1 and not fc.has_required_receivers()


def test_min_ignores_setup_eliciting_sms():
    fc = MinFlowControl()
    limit = feed(fc, 0, sm(1, 1, 0), 0)
    assert feed(fc, limit, setup_sm(2), 1) == limit
    assert fc.receiver_count == 1


# -- tagged --------------------------------------------------------------------------------


def test_group_tag_feedback():
    assert group_tag_feedback(None) == b""
    assert group_tag_feedback(TAG) == struct.pack("<q", TAG)
    assert group_tag_feedback(-1) == b"\xff" * 8


def test_tagged_counts_only_its_group():
    fc = TaggedFlowControl(TAG)
    tagged = group_tag_feedback(TAG)
    untagged = sm(1, 0, 0)
    other = sm(2, 0, 0, feedback=group_tag_feedback(TAG + 1))
    truncated = sm(3, 0, 0, feedback=tagged[:4])
    padded = sm(4, 0, 0, feedback=tagged + b"\0")
    for message in (untagged, other, truncated, padded):  # not tracked: none is required
        assert feed(fc, 777, message, 0) == WINDOW  # and no member yet: they pace it
    assert fc.receiver_count == 0
    limit = feed(fc, 0, sm(5, 2, 64, feedback=tagged), 1)
    assert limit == pos(2, 64) + WINDOW
    limit = feed(fc, limit, sm(6, 2, 0, feedback=tagged), 2)  # a slower member joins
    assert limit == pos(2, 0) + WINDOW
    assert feed(fc, limit, untagged, 3) == limit  # non-members never hold it back
    assert fc.receiver_count == 2


def test_tagged_group_minimum_and_timeout():
    fc = TaggedFlowControl(-5, min_group_size=2, timeout_ns=1_000)
    tagged = group_tag_feedback(-5)
    limit = feed(fc, 0, sm(1, 0, 0, feedback=tagged), 0)
    feed(fc, limit, sm(2, 0, 0), 0)  # untagged: no help for the group
    assert not fc.has_required_receivers()
    limit = feed(fc, limit, sm(3, 1, 0, feedback=tagged), 500)
    assert fc.has_required_receivers() and limit == WINDOW
    limit = fc.on_idle(1_001, limit)  # receiver 1 timed out: below the group size, it stays
    assert limit == WINDOW
    assert fc.receiver_count == 1 and not fc.has_required_receivers()
    assert feed(fc, limit, sm(3, 1, 512, feedback=tagged), 1_002) == WINDOW
    limit = feed(fc, limit, sm(1, 1, 0, feedback=tagged), 1_003)  # back: two again
    assert limit == pos(1, 0) + WINDOW and fc.has_required_receivers()


def test_tagged_ignores_setup_eliciting_sms():
    fc = TaggedFlowControl(TAG, min_group_size=1)
    assert feed(fc, 42, setup_sm(1, group_tag_feedback(TAG)), 0) == 42
    assert fc.receiver_count == 0 and not fc.has_required_receivers()


# -- fc= parsing ---------------------------------------------------------------------------


def test_defaults_without_fc():
    assert isinstance(flow_control_for(None, one_to_many=False), UnicastFlowControl)
    assert isinstance(flow_control_for(None, one_to_many=True), MaxFlowControl)


@pytest.mark.parametrize(
    ("fc", "cls", "attrs"),
    [
        ("max", MaxFlowControl, {"timeout_ns": RECEIVER_TIMEOUT_NS}),
        ("min", MinFlowControl, {"timeout_ns": RECEIVER_TIMEOUT_NS, "min_group_size": 0}),
        ("min,t:5s", MinFlowControl, {"timeout_ns": 5_000_000_000, "min_group_size": 0}),
        ("min,g:/3", MinFlowControl, {"timeout_ns": RECEIVER_TIMEOUT_NS, "min_group_size": 3}),
        ("min,g:/3,t:500ms", MinFlowControl, {"timeout_ns": 500_000_000, "min_group_size": 3}),
        ("min,t:250us,g:/0", MinFlowControl, {"timeout_ns": 250_000, "min_group_size": 0}),
        ("min,t:1000", MinFlowControl, {"timeout_ns": 1000, "min_group_size": 0}),
        (
            "tagged,g:123",
            TaggedFlowControl,
            {"group_tag": 123, "min_group_size": 0, "timeout_ns": RECEIVER_TIMEOUT_NS},
        ),
        (
            "tagged,g:-7/2",
            TaggedFlowControl,
            {"group_tag": -7, "min_group_size": 2, "timeout_ns": RECEIVER_TIMEOUT_NS},
        ),
        (
            "tagged,g:9/4,t:3s",
            TaggedFlowControl,
            {"group_tag": 9, "min_group_size": 4, "timeout_ns": 3_000_000_000},
        ),
        (
            "tagged,t:10ms,g:9223372036854775807",
            TaggedFlowControl,
            {"group_tag": 2**63 - 1, "min_group_size": 0, "timeout_ns": 10_000_000},
        ),
    ],
)
@pytest.mark.parametrize("one_to_many", [True, False])
def test_parse_forms(fc, cls, attrs, one_to_many):
    parse_flow_control(fc)
    built = flow_control_for(fc, one_to_many)
    assert type(built) is cls
    assert {name: getattr(built, name) for name in attrs} == attrs


def test_parsed_tagged_uses_its_tag():
    fc = flow_control_for("tagged,g:99/1", one_to_many=True)
    assert feed(fc, 0, sm(1, 0, 0, feedback=group_tag_feedback(98)), 0) == 0
    assert not fc.has_required_receivers()
    assert feed(fc, 0, sm(1, 0, 0, feedback=group_tag_feedback(99)), 0) == WINDOW
    assert fc.has_required_receivers()


@pytest.mark.parametrize(
    ("fc", "message"),
    [
        ("foo", "unknown flow control strategy 'foo' in fc"),
        ("", "unknown flow control strategy '' in fc"),
        ("MIN", "unknown flow control strategy 'MIN' in fc"),
        ("unicast", "unknown flow control strategy 'unicast' in fc"),
        ("min,x:1", "bad option 'x:1' in fc 'min,x:1'"),
        ("min,", "bad option '' in fc 'min,'"),
        ("min,g:", "bad option 'g:' in fc 'min,g:'"),
        ("min,g:/", "bad option 'g:/' in fc 'min,g:/'"),
        ("min,g:/x", "bad option 'g:/x' in fc 'min,g:/x'"),
        ("min,g:/-1", "bad option 'g:/-1' in fc 'min,g:/-1'"),
        ("tagged,g:1/", "bad option 'g:1/' in fc 'tagged,g:1/'"),
        ("tagged,g:abc", "bad option 'g:abc' in fc 'tagged,g:abc'"),
        ("max,t:5s", "bad option 't:5s' in fc 'max,t:5s'"),
        ("max,g:/2", "bad option 'g:/2' in fc 'max,g:/2'"),
        ("min,t:5x", "invalid duration for fc: '5x'"),
        ("min,t:", "invalid duration for fc: ''"),
        ("min,t:1s,t:2s", "duplicate option 't:' in fc 'min,t:1s,t:2s'"),
        ("tagged,g:1,g:2", "duplicate option 'g:' in fc 'tagged,g:1,g:2'"),
        ("min,g:5", "fc 'min' takes no group tag: 'g:5'"),
        ("min,g:5/2", "fc 'min' takes no group tag: 'g:5/2'"),
        ("tagged", "fc 'tagged' requires a group tag g:<tag>"),
        ("tagged,g:/3", "fc 'tagged' requires a group tag g:<tag>"),
        ("tagged,t:1s", "fc 'tagged' requires a group tag g:<tag>"),
        ("tagged,g:9223372036854775808", "group tag 9223372036854775808 in fc"),
        ("min,g:/2147483648", "group minimum size 2147483648 in fc"),
    ],
)
def test_parse_errors(fc, message):
    for parse in (parse_flow_control, lambda value: flow_control_for(value, True)):
        with pytest.raises(ChannelUriError) as info:
            parse(fc)
        assert message in str(info.value)
        assert "fc" in str(info.value)
