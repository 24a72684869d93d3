"""ControlSession as a state machine over a stand-in publication: a client that does not read
its answers has its session aborted, by the backlog bound or by the reference's timeout."""

from aeronio.archive import codecs
from aeronio.archive.control_session import ControlSession, State
from aeronio.archive.proxies import ControlResponseProxy
from aeronio.client.publication import BACK_PRESSURED

TIMEOUT_NS = 5_000_000_000


class StandInPublication:
    """Connected; takes `room` more messages, then is back-pressured."""

    def __init__(self, room: int, max_message_length: int = 1 << 20):
        self.is_connected = True
        self.room = room
        self.max_message_length = max_message_length
        self.sent: list[bytes] = []

    def try_offer(self, data: bytes) -> int:
        if self.room <= 0:
            return BACK_PRESSURED
        self.room -= 1
        self.sent.append(data)
        return len(self.sent) * 64


def active_session(
    room: int, max_pending_bytes: int, max_message_length: int = 1 << 20
) -> tuple[ControlSession, StandInPublication]:
    publication = StandInPublication(room, max_message_length)
    session = ControlSession(
        7, 1, ControlResponseProxy(publication), TIMEOUT_NS, TIMEOUT_NS, max_pending_bytes, 0
    )
    session.do_work(0)
    assert session.state is State.ACTIVE
    return session, publication


def unknown_recording(session: ControlSession, correlation_id: int) -> None:
    session.error(correlation_id, codecs.ErrorCode.UNKNOWN_RECORDING, "unknown recording 12345")


def test_a_backlog_over_the_bound_aborts_the_session_and_drops_it():
    session, publication = active_session(room=1, max_pending_bytes=1000)  # room: connect OK
    size = len(
        codecs.ControlResponse(7, 2, 5, codecs.ControlResponseCode.ERROR, "unknown recording 12345")
        .encode()
    )  # fmt: skip
    correlation_id = 2
    while session.proxy.pending_bytes + size <= 1000:
        unknown_recording(session, correlation_id)
        correlation_id += 1
    assert session.state is State.ACTIVE and session.abort_reason is None
    unknown_recording(session, correlation_id)  # one more: over the bound
    assert session.state is State.DONE
    assert session.abort_reason == (
        f"{(correlation_id - 1) * size} bytes of responses wait, over the 1000 allowed "
        "(max_pending_response_bytes)"
    )
    assert session.proxy.pending_bytes == 0 and not session.proxy.pending
    unknown_recording(session, correlation_id + 1)  # a DONE session keeps nothing
    assert not session.proxy.pending
    assert len(publication.sent) == 1  # the connect OK only


def test_responses_that_wait_with_none_sent_for_the_message_timeout_abort_it():
    session, publication = active_session(room=1, max_pending_bytes=1 << 20)
    unknown_recording(session, 2)
    session.do_work(1)  # the deadline is set: nothing went
    session.do_work(1 + TIMEOUT_NS)
    assert session.state is State.ACTIVE
    publication.room = 1  # the client reads one: progress, the deadline goes
    unknown_recording(session, 3)
    assert len(publication.sent) == 2 and len(session.proxy.pending) == 1
    session.do_work(2 + TIMEOUT_NS)  # a new deadline from here
    session.do_work(2 + 2 * TIMEOUT_NS)
    assert session.state is State.ACTIVE
    session.do_work(3 + 2 * TIMEOUT_NS)
    assert session.state is State.DONE
    assert session.abort_reason == "failed to send response for more than 5000 ms"
    assert not session.proxy.pending


def test_a_session_whose_answers_go_is_never_aborted():
    session, publication = active_session(room=10**6, max_pending_bytes=100)
    for i in range(1000):
        unknown_recording(session, i)
        session.do_work(i * TIMEOUT_NS)
    assert session.state is State.ACTIVE and len(publication.sent) == 1001


def descriptor(correlation_id: int, channel: str) -> codecs.RecordingDescriptor:
    return codecs.RecordingDescriptor(7, correlation_id, *[0] * 11, channel, channel, "source")


def test_an_error_too_long_for_one_message_is_cut_to_fit():
    session, publication = active_session(room=10, max_pending_bytes=1 << 20, max_message_length=96)
    session.error(2, codecs.ErrorCode.GENERIC, "bad channel aeron:udp?endpoint=" + "é" * 100)
    sent = codecs.decode(publication.sent[-1])
    assert len(publication.sent[-1]) == 96 and session.state is State.ACTIVE
    assert sent == codecs.ControlResponse(
        7, 2, codecs.ErrorCode.GENERIC, codecs.ControlResponseCode.ERROR,
        "bad channel aeron:udp?endpoint=" + "?" * 22 + "...",  # sent as ASCII
    )  # fmt: skip
    session.error(3, codecs.ErrorCode.GENERIC, "short")  # one that fits goes whole
    assert codecs.decode(publication.sent[-1]).error_message == "short"


def test_a_response_that_cannot_fit_aborts_the_session_and_its_listing():
    """A descriptor longer than a message of the response channel cannot be cut: the session
    is aborted (its listing with it), not left raising in every duty cycle."""
    session, publication = active_session(
        room=10, max_pending_bytes=1 << 20, max_message_length=512
    )
    short, long = descriptor(2, "aeron:ipc"), descriptor(2, "aeron:ipc?alias=" + "a" * 300)
    session.list(lambda: iter([short, long, short]))
    assert session.do_work(1) == 2
    assert [codecs.decode(data) for data in publication.sent[1:]] == [short]
    assert session.state is State.DONE and not session.busy
    assert session.abort_reason == (
        f"a RecordingDescriptor of {len(long.encode())} bytes does not fit the response "
        "channel's max message length 512"
    )
