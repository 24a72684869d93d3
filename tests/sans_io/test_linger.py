"""A released publication's lifecycle, sans-IO (the times are given): DRAINING until sent (or
consumed), then LINGER. A network publication ends its linger once every receiver acknowledged
the end of stream and the EOS heartbeat went, else at the linger timeout, reporting what was not
acknowledged; an IPC publication lingers for its whole timeout, and a closing driver waits for
it only while it drains. On the receiving side, an image whose stream ended stays until its
subscribers read it to its end (or it goes silent)."""

from types import SimpleNamespace

import numpy as np

from aeronio._core import AtomicBuffer
from aeronio.counters import SystemCounters
from aeronio.driver.driver_publication import PublicationParts, State
from aeronio.driver.flow_control import RECEIVER_TIMEOUT_NS, MinFlowControl
from aeronio.driver.ipc_publication import IpcPublication
from aeronio.driver.network_publication import NetworkPublication
from aeronio.driver.publication_image import IMAGE_COOL_DOWN_NS, PublicationImage
from aeronio.driver.receiver_state import IMAGE_LIVENESS_TIMEOUT_NS
from aeronio.driver.resources import SubscriberPosition
from aeronio.logbuffer import signals
from aeronio.logbuffer.descriptor import LOG_ACTIVE_TRANSPORT_COUNT_OFFSET, LOG_META_DATA_LENGTH
from aeronio.protocol.frames import (
    EOS_FLAG,
    SM_EOS_FLAG,
    DataHeader,
    ErrorFrame,
    SetupFrame,
    StatusMessage,
    error_frame,
    iter_frames,
    setup_frame,
    status_message,
)
from tests.sans_io.test_udp_sans_io import MS, MTU, TERM_LENGTH
from tests.support.udp_harness import Publisher, Slot, feed_frame, image_from_setup

INITIAL_TERM_ID = 5
LINGER_NS = 500 * MS


def status(consumed: int, receiver_id: int = 5, flags: int = 0):
    """Receiver `receiver_id` has consumed up to `consumed` (within the first term); with
    `flags` SM_EOS_FLAG, its farewell."""
    return status_message(
        session_id=77,
        stream_id=10,
        consumption_term_id=INITIAL_TERM_ID,
        consumption_term_offset=consumed,
        receiver_window=TERM_LENGTH // 2,
        receiver_id=receiver_id,
        flags=flags,
    )


def stubs(publisher: Publisher, reports: list[str]) -> PublicationParts:
    """A publication's parts around `publisher`'s log, the driver's stubbed (its proxy keeps the
    subscription ids told their image went in `told`)."""
    proxy = SimpleNamespace(image_ready=lambda *args: None, told=[], errors=[])
    proxy.image_unavailable = lambda publication, subscriber: proxy.told.append(
        subscriber.subscription_id
    )
    proxy.publication_error = lambda publication, code, message, **where: proxy.errors.append(
        (code, message, where)
    )
    return PublicationParts(
        registration_id=1,
        channel="aeron:udp?endpoint=127.0.0.1:40123",
        media_key="udp:127.0.0.1:40123",
        exclusive=False,
        log=publisher.log,
        counters=[publisher.pub_limit, Slot()],
        term_window_length=TERM_LENGTH // 2,
        unblock_timeout_ns=10_000 * MS,
        linger_ns=LINGER_NS,
        unblocked_counter=Slot(),
        stream_counters=SimpleNamespace(free=lambda *counters: None),
        proxy=proxy,
        wake=lambda: None,
        report=reports.append,
    )


def network(
    tmp_path, spies_simulate_connection: bool = False, **sender
) -> tuple[NetworkPublication, Publisher, list[str]]:
    """A network publication whose SETUP went at 0 and whose receiver answered at 1 ms (its
    sender made with `sender`'s keywords); with `spies_simulate_connection`, no receiver."""
    publisher = Publisher(
        tmp_path / "pub.log",
        TERM_LENGTH,
        MTU,
        INITIAL_TERM_ID,
        {c: Slot() for c in SystemCounters},
        **sender,
    )
    reports: list[str] = []
    publication = NetworkPublication(
        stubs(publisher, reports),
        sender=publisher.sender,
        sender_counters=[],
        endpoint=SimpleNamespace(publications={}),
        release_endpoint=lambda endpoint: None,
        spies_simulate_connection=spies_simulate_connection,
    )
    publisher.datagrams(0)
    if not spies_simulate_connection:
        publisher.sender.on_status_message(status(0), MS)
        assert publisher.sender.is_connected
    publication.update_publisher_limit()
    return publication, publisher, reports


def released_and_sent(tmp_path, messages: int = 3, sent: list | None = None, **sender):
    """`messages` offered, released at 2 ms, all sent at 3 ms (the datagrams to `sent`):
    lingering from 3 ms."""
    publication, publisher, reports = network(tmp_path, **sender)
    assert publisher.offer(0, messages, messages) == messages
    end = publisher.log.producer_position
    publication.decref(2 * MS)
    publication.advance(2 * MS)
    assert publication.state is State.DRAINING and publication.awaiting_delivery
    datagrams = publisher.datagrams(3 * MS)
    if sent is not None:
        sent.extend(map(bytes, datagrams))
    assert publisher.sender.sender_position.get() == end
    publication.advance(3 * MS)
    assert publication.state is State.LINGER and publication.awaiting_delivery
    return publication, publisher, reports, end


def eos_heartbeats(datagrams) -> int:
    return sum(
        1
        for datagram in map(bytes, datagrams)
        for ref in iter_frames(datagram)
        if ref.is_heartbeat and ref.decode(datagram).flags & EOS_FLAG
    )


def test_a_linger_ends_once_acknowledged_and_the_end_of_stream_announced(tmp_path):
    publication, publisher, reports, end = released_and_sent(tmp_path)
    heartbeat = publisher.sender.data_sender.heartbeat_deadline_ns
    assert publication.deadline_ns() == heartbeat  # to look once the EOS heartbeat went
    publisher.sender.on_status_message(status(end), 4 * MS)
    publication.advance(4 * MS)
    assert publication.state is State.LINGER  # acknowledged, the end not announced yet
    assert eos_heartbeats(publisher.datagrams(heartbeat)) == 1
    publication.advance(heartbeat)
    assert publication.state is State.DONE and not publication.awaiting_delivery
    assert reports == []


def test_a_linger_not_acknowledged_ends_at_its_timeout_and_reports_the_loss(tmp_path):
    publication, publisher, reports, end = released_and_sent(tmp_path)
    publisher.sender.on_status_message(status(end - 64), 4 * MS)  # the last message not read
    assert eos_heartbeats(publisher.datagrams(103 * MS)) == 1
    assert publication.deadline_ns() == 3 * MS + LINGER_NS
    publication.advance(3 * MS + LINGER_NS - 1)
    assert publication.state is State.LINGER and reports == []
    publication.advance(3 * MS + LINGER_NS)
    assert publication.state is State.DONE
    assert reports == [
        "publication 1 on aeron:udp?endpoint=127.0.0.1:40123 (session 77, stream 10) ended "
        f"after its linger of 500 ms: its receivers have not acknowledged up to {end} "
        f"(acknowledged up to {end - 64}, sent up to {end})"
    ]


def test_every_receiver_heard_lately_must_acknowledge_and_one_gone_keeps_its_count(tmp_path):
    """Receiver 6 lags: it holds the linger until it goes silent. Then receiver 5, which
    acknowledged everything, goes silent too: what it acknowledged still counts."""
    publication, publisher, reports, end = released_and_sent(tmp_path)
    sender = publisher.sender
    sender.on_status_message(status(64, receiver_id=6), 4 * MS)
    sender.on_status_message(status(end), 5 * MS)
    publisher.datagrams(103 * MS)  # the EOS heartbeat
    publication.advance(103 * MS)
    assert sender.acknowledged_position == 64 and publication.state is State.LINGER
    sender.on_status_message(status(end), 400 * MS)
    sender.check_receiver_liveness(4 * MS + RECEIVER_TIMEOUT_NS + 1)  # receiver 6 is gone
    assert sender.acknowledged_position == end
    sender.check_receiver_liveness(400 * MS + RECEIVER_TIMEOUT_NS + 1)  # and receiver 5
    assert sender.acknowledged_position == end
    publication.advance(400 * MS + RECEIVER_TIMEOUT_NS + 1)
    assert publication.state is State.DONE and reports == []


def test_a_publication_that_published_nothing_has_nothing_to_deliver(tmp_path):
    publication, publisher, reports = network(tmp_path)
    publication.decref(2 * MS)
    publication.advance(2 * MS)
    assert publication.state is State.LINGER
    heartbeat = publisher.sender.data_sender.heartbeat_deadline_ns
    publisher.datagrams(heartbeat)
    publication.advance(heartbeat)
    assert publication.state is State.DONE and reports == []


def released_ipc(tmp_path) -> tuple[IpcPublication, Slot, int, list[str]]:
    """An IPC publication with one subscriber at 0, 3 messages offered (up to the returned end),
    released at 1 ms; its subscriber's position counter."""
    publisher = Publisher(
        tmp_path / "pub.log", TERM_LENGTH, MTU, INITIAL_TERM_ID, {c: Slot() for c in SystemCounters}
    )
    reports: list[str] = []
    publication = IpcPublication(stubs(publisher, reports))
    publication._subscribers_changed = lambda: None  # no log flags to set here
    subscriber = SubscriberPosition(2, 3, "aeron:ipc", Slot(0))
    publication.add_subscriber(subscriber)
    publication.update_publisher_limit()
    assert publisher.offer(0, 3, 3) == 3
    end = publisher.log.producer_position
    publication.decref(MS)
    assert publication.publisher_limit.get() == end  # frozen at the end of stream
    return publication, subscriber.counter, end, reports


def test_an_ipc_publication_drains_to_its_subscribers_then_lingers_its_whole_timeout(tmp_path):
    """Its subscribers are told their image went once drained, as it starts to linger (as
    Aeron's), not as it ends."""
    publication, position, end, reports = released_ipc(tmp_path)
    publication.advance(2 * MS)
    assert publication.state is State.DRAINING and publication.awaiting_delivery
    assert publication.undelivered() == f"its subscribers consumed up to 0, not up to {end}"
    assert publication._proxy.told == []
    position.set(end)
    publication.advance(3 * MS)
    assert publication.state is State.LINGER and not publication.awaiting_delivery
    assert publication._proxy.told == [2] and publication.subscribers == []
    assert publication.deadline_ns() == 3 * MS + LINGER_NS
    publication.advance(3 * MS + LINGER_NS - 1)
    assert publication.state is State.LINGER
    publication.advance(3 * MS + LINGER_NS)
    assert publication.state is State.DONE and reports == []


UNBLOCK_NS = 10_000 * MS  # the stubs' unblock timeout


def test_an_ipc_publication_drains_a_slow_subscriber_for_as_long_as_it_reads(tmp_path):
    """A subscriber that moves within every unblock timeout is drained to the end of stream,
    however long past the release that takes (it is not cut off a timeout after it)."""
    publication, position, end, _ = released_ipc(tmp_path)
    now = MS
    for read in (end // 3, 2 * end // 3, end - 1):
        now += UNBLOCK_NS  # not past the timeout since the last move
        publication.advance(now)
        assert publication.state is State.DRAINING
        position.set(read)
        publication.advance(now)
    assert now - MS == 3 * UNBLOCK_NS
    position.set(end)
    publication.advance(now + 1)
    assert publication.state is State.LINGER and publication.undelivered() is None


def test_an_ipc_publication_gives_up_on_a_subscriber_an_unblock_timeout_after_it_stopped(
    tmp_path,
):
    publication, position, end, _ = released_ipc(tmp_path)
    stopped = MS + UNBLOCK_NS
    position.set(end // 2)
    publication.advance(stopped)
    publication.advance(stopped + UNBLOCK_NS)
    assert publication.state is State.DRAINING
    publication.advance(stopped + UNBLOCK_NS + 1)
    assert publication.state is State.LINGER
    assert publication.undelivered() == (
        f"its subscribers consumed up to {end // 2}, not up to {end}"
    )


def image_whose_stream_ended(
    tmp_path, read: int, sent: list | None = None, cooled: list | None = None
) -> tuple[PublicationImage, Slot]:
    """An image rebuilt to the end of its stream (1024), its subscriber having read `read`; what
    it sends its connections goes to `sent`, the cool-downs it asks for to `cooled`."""
    sent = [] if sent is None else sent
    cooled = [] if cooled is None else cooled
    receiver = SimpleNamespace(
        session_id=77,
        stream_id=10,
        rebuilder=SimpleNamespace(set_consumers=lambda positions: None),
        rebuild_position=Slot(1024),
        time_of_last_packet_ns=0,
        is_alive=lambda now_ns: False,  # ended and rebuilt to its end
        revoked=False,
        farewell=lambda left_at: b"farewell" if left_at is None else b"farewell at %d" % left_at,
        log=SimpleNamespace(
            metadata=AtomicBuffer(np.zeros(LOG_META_DATA_LENGTH, np.uint8)),
            path=tmp_path / "image.log",
            close=lambda: None,
        ),
    )
    image = PublicationImage(
        registration_id=3,
        receiver=receiver,
        subscribers=[],
        endpoint=SimpleNamespace(
            dispatcher=SimpleNamespace(cool_down=lambda *a: cooled.append(a)),
            connections={(77, 10): {("127.0.0.1", 40123): ("127.0.0.1", 40124)}},
            send_to_connections=lambda image, frame: sent.append((image, frame)),
            remove_image=lambda session_id, stream_id: None,
        ),
        source_address="127.0.0.1:40124",
        log_file=str(tmp_path / "image.log"),
        log_signals=signals.acquire(str(tmp_path / "image.log")),
        counters=[],
        stream_counters=SimpleNamespace(free=lambda *counters: None),
        proxy=SimpleNamespace(image_ready=lambda *args: None, image_unavailable=lambda *a: None),
        wake=lambda: None,
    )
    subscriber = SubscriberPosition(2, 3, "aeron:ipc", Slot(read))
    image.add_subscriber(subscriber)
    return image, subscriber.counter


def test_an_ended_image_stays_until_its_subscribers_read_it_to_its_end(tmp_path):
    """Told it is gone, a subscriber stops reading: what it had not read would be lost."""
    image, subscriber = image_whose_stream_ended(tmp_path, read=512)
    image.on_time_event(MS)
    assert not image.has_reached_end_of_life()
    subscriber.set(1024)
    image.on_time_event(2 * MS)
    assert image.has_reached_end_of_life()


def test_an_ended_image_says_farewell_to_its_senders_and_leaves_it_to_its_cool_down(tmp_path):
    sent, cooled = [], []
    image, subscriber = image_whose_stream_ended(tmp_path, read=512, sent=sent, cooled=cooled)
    image.on_time_event(MS)
    assert sent == cooled == []
    subscriber.set(1024)
    image.on_time_event(2 * MS)
    assert sent == [((77, 10), b"farewell")]
    assert cooled == [(77, 10, 2 * MS + IMAGE_COOL_DOWN_NS, b"farewell")]
    image.on_time_event(3 * MS)
    assert len(sent) == len(cooled) == 1  # once


def test_an_image_closed_before_its_end_says_farewell_as_it_goes(tmp_path):
    """Its last subscription closed, or the driver: its senders hear that it left (Aeron 1.53's
    publications then stop counting it), once."""
    sent, cooled = [], []
    image, _ = image_whose_stream_ended(tmp_path, read=512, sent=sent, cooled=cooled)
    image.close()
    assert sent == [((77, 10), b"farewell")] and cooled == []


def test_an_image_whose_last_subscriber_left_says_where_it_left_as_it_goes(tmp_path):
    """What its subscribers read before they closed counts: the farewell says where the last
    one left (the receiver's farewell, below, says no less than what it acknowledged)."""
    sent = []
    image, _ = image_whose_stream_ended(tmp_path, read=512, sent=sent)
    image.add_subscriber(SubscriberPosition(4, 3, "aeron:ipc", Slot(768)))
    image.remove_subscriber(2)
    image.remove_subscriber(4)
    image.close()
    assert sent == [((77, 10), b"farewell at 768")]


def test_an_image_left_by_its_last_subscriber_says_farewell_and_cools_down(tmp_path):
    """Its last subscription closed (its endpoint carries other streams): it ends at once with
    its farewell, which its senders get again during the cool-down; closed, it says no more."""
    sent, cooled = [], []
    image, _ = image_whose_stream_ended(tmp_path, read=512, sent=sent, cooled=cooled)
    image.remove_subscriber(2)
    image.leave(5 * MS)
    assert image.has_reached_end_of_life()
    assert sent == [((77, 10), b"farewell at 512")]
    assert cooled == [(77, 10, 5 * MS + IMAGE_COOL_DOWN_NS, b"farewell at 512")]
    image.close()
    assert len(sent) == 1


def test_an_ended_image_closed_says_no_second_farewell(tmp_path):
    sent = []
    image, subscriber = image_whose_stream_ended(tmp_path, read=1024, sent=sent)
    image.on_time_event(MS)
    image.close()
    assert sent == [((77, 10), b"farewell")]


def test_a_stream_read_to_its_end_after_it_ended_is_acknowledged_by_the_farewell(tmp_path):
    """The receiver has the whole stream and its end before its subscriber reads the last
    messages, less than a quarter window: no status message is due for them before the image
    ends. Its farewell acknowledges them, which ends the publication's linger, nothing lost."""
    sent: list[bytes] = []
    publication, publisher, reports, end = released_and_sent(tmp_path, sent=sent)
    system = {c: Slot() for c in SystemCounters}
    setup = setup_frame(
        session_id=77, stream_id=10, initial_term_id=INITIAL_TERM_ID, term_length=TERM_LENGTH,
        mtu=MTU,
    )  # fmt: skip
    image, _, subscriber = image_from_setup(
        tmp_path / "image.log", SetupFrame.decode(setup.encode()), receiver_id=5, system=system,
        now_ns=MS,
    )  # fmt: skip
    heartbeat = publisher.sender.data_sender.heartbeat_deadline_ns
    for datagram in [*sent, *map(bytes, publisher.datagrams(heartbeat))]:
        for ref in iter_frames(datagram):
            feed_frame(image, datagram, ref, DataHeader.decode(datagram, ref.offset), heartbeat)
    (sm,) = image.do_work(heartbeat)  # due with the heartbeat: nothing read yet
    publisher.sender.on_status_message(StatusMessage.decode(sm), heartbeat)
    assert publisher.sender.acknowledged_position == 0
    assert image.end_of_stream_position == image.rebuild_position.get() == end
    subscriber.set(end)
    assert image.do_work(heartbeat + MS) == []  # 3 messages read: no status message due
    farewell = image.farewell()
    assert StatusMessage.decode(farewell) == status_message(
        session_id=77,
        stream_id=10,
        consumption_term_id=INITIAL_TERM_ID,
        consumption_term_offset=end,
        receiver_window=image.window,
        receiver_id=5,
        flags=SM_EOS_FLAG,
    )
    assert system[SystemCounters.STATUS_MESSAGES_SENT].get() == 2
    publisher.sender.on_status_message(StatusMessage.decode(farewell), heartbeat + MS)
    publication.advance(heartbeat + MS)
    assert publication.state is State.DONE and reports == []


def test_an_ended_image_its_subscriber_does_not_read_ends_when_silent_without_farewell(tmp_path):
    """Its senders are not heard: it tells them nothing, now or during its cool-down (Aeron's
    receivers send only to connections heard lately)."""
    sent, cooled = [], []
    image, _ = image_whose_stream_ended(tmp_path, read=512, sent=sent, cooled=cooled)
    image.on_time_event(IMAGE_LIVENESS_TIMEOUT_NS)
    assert not image.has_reached_end_of_life()
    image.on_time_event(IMAGE_LIVENESS_TIMEOUT_NS + 1)
    assert image.has_reached_end_of_life()
    image.close()
    assert sent == []
    assert cooled == [(77, 10, IMAGE_LIVENESS_TIMEOUT_NS + 1 + IMAGE_COOL_DOWN_NS, None)]


def test_an_images_active_transport_count_is_its_senders_until_it_is_silent(tmp_path):
    image, _ = image_whose_stream_ended(tmp_path, read=512)
    count = image.receiver.log.metadata
    assert count.get_int32_volatile(LOG_ACTIVE_TRANSPORT_COUNT_OFFSET) == 0
    image.on_time_event(IMAGE_LIVENESS_TIMEOUT_NS)
    assert count.get_int32_volatile(LOG_ACTIVE_TRANSPORT_COUNT_OFFSET) == 1
    image.on_time_event(IMAGE_LIVENESS_TIMEOUT_NS + 1)
    assert count.get_int32_volatile(LOG_ACTIVE_TRANSPORT_COUNT_OFFSET) == 0


def test_a_linger_whose_receivers_are_gone_ends_then_and_reports_the_loss(tmp_path):
    """Nothing is left to deliver to once no receiver was heard for RECEIVER_TIMEOUT_NS."""
    publication, publisher, reports, end = released_and_sent(tmp_path)
    sender = publisher.sender
    sender.on_status_message(status(end - 64), 4 * MS)
    publication.linger_ns = 10 * LINGER_NS
    gone = 4 * MS + RECEIVER_TIMEOUT_NS + 1
    assert gone < publication.linger_deadline_ns()
    sender.check_receiver_liveness(gone - 2)
    publication.advance(gone - 2)
    assert publication.state is State.LINGER and reports == []
    sender.check_receiver_liveness(gone)
    publication.advance(gone)
    assert publication.state is State.DONE
    assert reports == [
        "publication 1 on aeron:udp?endpoint=127.0.0.1:40123 (session 77, stream 10) ended "
        f"with no receiver left: its receivers have not acknowledged up to {end} "
        f"(acknowledged up to {end - 64}, sent up to {end})"
    ]


def released_with_spy(tmp_path, read: int):
    """A publication released at 2 ms with a spy that has read `read`, its receiver having
    acknowledged everything at 4 ms (so it drains for its spy)."""
    publication, publisher, reports = network(tmp_path)
    spy = SubscriberPosition(2, 3, "aeron-spy:aeron:udp?endpoint=127.0.0.1:40123", Slot(read))
    publication.add_subscriber(spy)
    assert publisher.offer(0, 3, 3) == 3
    end = publisher.log.producer_position
    publication.decref(2 * MS)
    publisher.datagrams(3 * MS)
    publisher.sender.on_status_message(status(end), 4 * MS)
    return publication, publisher, reports, end, spy


def spied(tmp_path, read: int):
    """`released_with_spy`, and at GONE its receiver is gone: it lingers from then."""
    publication, publisher, reports, end, spy = released_with_spy(tmp_path, read)
    publisher.datagrams(103 * MS)  # the EOS heartbeat
    publication.advance(103 * MS)
    assert publication.state is State.DRAINING  # for its spy
    publisher.sender.check_receiver_liveness(GONE)
    assert not publisher.sender.receivers_heard
    publication.advance(GONE)
    assert publication.state is State.LINGER
    return publication, reports, end, spy.counter


GONE = 4 * MS + RECEIVER_TIMEOUT_NS + 1


def test_a_linger_whose_receivers_are_gone_waits_for_its_spies(tmp_path):
    """No receiver left, a spy that has not read everything still holds the linger (Aeron's
    draining waits for its spies); once it has, the linger ends with nothing reported."""
    publication, reports, end, spy = spied(tmp_path, 0)
    publication.advance(GONE + 1)
    assert publication.state is State.LINGER and publication.awaiting_delivery
    spy.set(end)
    publication.advance(GONE + 2)
    assert publication.state is State.DONE and reports == []


def test_a_network_publication_drains_a_slow_spy_for_as_long_as_it_reads(tmp_path):
    """Its receiver has it all; the drain waits for a spy that moves within every unblock
    timeout (as for an IPC subscriber), and gives up on it only an unblock timeout after it
    stopped."""
    publication, _, _, end, spy = released_with_spy(tmp_path, 0)
    now = 2 * MS  # the spy at 0 since
    for read in (end // 3, 2 * end // 3):
        now += UNBLOCK_NS
        publication.advance(now)
        assert publication.state is State.DRAINING
        spy.counter.set(read)
        publication.advance(now)
    publication.advance(now + UNBLOCK_NS)
    assert publication.state is State.DRAINING
    publication.advance(now + UNBLOCK_NS + 1)
    assert publication.state is State.LINGER


def test_a_linger_ended_before_its_spies_read_everything_reports_their_loss(tmp_path):
    publication, reports, end, _ = spied(tmp_path, 64)
    publication.advance(GONE + LINGER_NS - 1)
    assert publication.state is State.LINGER
    publication.advance(GONE + LINGER_NS)
    assert publication.state is State.DONE
    assert reports == [
        "publication 1 on aeron:udp?endpoint=127.0.0.1:40123 (session 77, stream 10) ended "
        f"after its linger of 500 ms: its spies read up to 64, not up to {end}"
    ]


def test_a_stream_that_only_spies_consumed_has_nothing_for_receivers_to_acknowledge(tmp_path):
    """spies-simulate-connection and no receiver ever heard: read by its spy, the stream is
    delivered once its end was announced, nothing reported."""
    publication, publisher, reports = network(tmp_path, spies_simulate_connection=True)
    spy = SubscriberPosition(2, 3, "aeron-spy:aeron:udp?endpoint=127.0.0.1:40123", Slot(0))
    publication.add_subscriber(spy)
    assert publisher.offer(0, 3, 3) == 3
    end = publisher.log.producer_position
    spy.counter.set(end)
    publication.update_publisher_limit()  # the sender counts what the spy read as sent
    publication.decref(2 * MS)
    publication.advance(2 * MS)
    assert publication.state is State.LINGER
    assert publication.undelivered() is None
    heartbeat = publisher.sender.data_sender.heartbeat_deadline_ns
    assert eos_heartbeats(publisher.datagrams(heartbeat)) == 1
    publication.advance(heartbeat)
    assert publication.state is State.DONE and reports == []


def test_the_farewell_of_an_image_with_no_subscriber_left_claims_nothing_more(tmp_path):
    """Its subscribers gone, an image's farewell says what it acknowledged last, or where its
    last subscriber left if further, not what it rebuilt since: nobody read that."""
    sent: list[bytes] = []
    _, publisher, _, end = released_and_sent(tmp_path, messages=3, sent=sent)
    setup = setup_frame(
        session_id=77, stream_id=10, initial_term_id=INITIAL_TERM_ID, term_length=TERM_LENGTH,
        mtu=MTU,
    )  # fmt: skip
    image, _, subscriber = image_from_setup(
        tmp_path / "image.log", SetupFrame.decode(setup.encode()), receiver_id=5,
        system={c: Slot() for c in SystemCounters}, now_ns=MS,
    )  # fmt: skip
    for datagram in sent:
        for ref in iter_frames(datagram):
            feed_frame(image, datagram, ref, DataHeader.decode(datagram, ref.offset), 4 * MS)
    subscriber.set(64)
    image.do_work(300 * MS)  # the periodic status message: 64 consumed
    assert image.rebuild_position.get() == end > 64
    image.consumption_position = lambda: None
    farewell = StatusMessage.decode(image.farewell())
    assert (farewell.consumption_term_offset, farewell.flags) == (64, SM_EOS_FLAG)
    farewell = StatusMessage.decode(image.farewell(left_at=32))  # its last subscriber at 32
    assert farewell.consumption_term_offset == 64  # never less than it acknowledged
    farewell = StatusMessage.decode(image.farewell(left_at=end))  # its last read everything
    assert farewell.consumption_term_offset == end


def test_a_farewell_acknowledges_but_keeps_no_receiver_alive(tmp_path):
    """What a receiver read when it left counts; that it spoke does not keep the publication
    connected (Aeron 1.53's receiver liveness)."""
    _, publisher, _ = network(tmp_path)
    sender = publisher.sender
    sender.on_status_message(status(64, flags=SM_EOS_FLAG), 2 * MS)
    assert sender.acknowledged_position == 64
    assert sender.flow_control.receiver_count == 0
    sender.check_receiver_liveness(MS + RECEIVER_TIMEOUT_NS + 1)  # from the SM at 1 ms
    assert not sender.is_connected


def test_the_only_receivers_farewell_disconnects_the_publication_at_once(tmp_path):
    """Aeron 1.53's receiver liveness is per receiver: the farewell of the only one leaves
    none, and the log says not connected at once (offers are refused, not sent to nobody). A
    status message it sent before (a repeat taken at the timer) does not bring it back; one it
    sends later does. It used to stay connected for the receiver timeout (2 s)."""
    _, publisher, _ = network(tmp_path)
    sender = publisher.sender
    sender.on_status_message(status(0, receiver_id=6), 2 * MS)
    sender.on_status_message(status(0, flags=SM_EOS_FLAG), 3 * MS)
    assert sender.is_connected  # receiver 6 is still there
    sender.on_status_message(status(0, receiver_id=6, flags=SM_EOS_FLAG), 4 * MS)
    assert not sender.is_connected and not publisher.log.mapped.is_connected()
    sender.on_status_message(status(0, receiver_id=6), 4 * MS)  # heard before it left
    assert not sender.is_connected
    sender.on_status_message(status(0, receiver_id=6), 5 * MS)
    assert sender.is_connected and publisher.log.mapped.is_connected()


def test_the_only_receivers_err_frame_disconnects_the_publication_at_once(tmp_path):
    """A receiver that refused the stream (its ERR frame) is not live any more either."""
    _, publisher, _ = network(tmp_path)
    frame = error_frame(
        session_id=77, stream_id=10, receiver_id=5, group_tag=0, error_code=13,
        error_length=8, error_message=b"rejected",
    )  # fmt: skip
    publisher.sender.on_error(ErrorFrame.decode(frame.encode()), ("127.0.0.1", 4005), 2 * MS)
    assert not publisher.sender.is_connected and not publisher.log.mapped.is_connected()


def test_a_receivers_err_frame_takes_it_out_of_flow_control_and_is_told_once(tmp_path):
    """A receiver that refused its image (its ERR frame, Aeron 1.53's) paces the stream no more:
    min flow control's limit follows the other receiver. The publication's clients are told
    once (its next ERR frame finds it gone); an ERR frame of a receiver not heard tells nobody."""
    publication, publisher, _ = network(tmp_path, flow_control=MinFlowControl())
    sender = publisher.sender
    sender.on_status_message(status(4096, receiver_id=6), 2 * MS)
    window = TERM_LENGTH // 2
    assert sender.sender_limit.get() == window  # receiver 5, at 0, the slowest

    def err(receiver_id: int) -> ErrorFrame:
        frame = error_frame(
            session_id=77, stream_id=10, receiver_id=receiver_id, group_tag=2, error_code=13,
            error_length=8, error_message=b"rejected",
        )  # fmt: skip
        return ErrorFrame.decode(frame.encode())

    for receiver_id in (7, 5, 5):
        sender.on_error(err(receiver_id), ("127.0.0.1", 4000 + receiver_id), 3 * MS)
    assert sender.sender_limit.get() == 4096 + window
    assert sender.flow_control.receiver_count == 1
    assert publication._proxy.errors == [
        (13, "rejected", {"source": ("127.0.0.1", 4005), "receiver_id": 5, "group_tag": 2})
    ]


def test_a_linger_waits_for_a_receiver_that_said_farewell_before_its_subscribers_read_all(
    tmp_path,
):
    """Aeron 1.53's receivers say farewell while their image drains, from when it has the whole
    stream, each saying what their subscribers read by then: the linger waits for the one that
    says they read it all (within the receiver timeout), and reports nothing. Min flow control:
    the first farewell leaves it no receiver that paces it."""
    publication, publisher, reports, end = released_and_sent(
        tmp_path, flow_control=MinFlowControl()
    )
    sender = publisher.sender
    heartbeat = sender.data_sender.heartbeat_deadline_ns
    publisher.datagrams(heartbeat)  # the EOS heartbeat
    sender.on_status_message(status(end - 64, flags=SM_EOS_FLAG), heartbeat)
    sender.check_receiver_liveness(heartbeat + 200 * MS)
    assert not sender.is_connected
    publication.advance(heartbeat + 200 * MS)
    assert publication.state is State.LINGER and reports == []
    sender.on_status_message(status(end, flags=SM_EOS_FLAG), heartbeat + 400 * MS)
    publication.advance(heartbeat + 400 * MS)
    assert publication.state is State.DONE and reports == []
