"""Current Aeron's C client (pyaeron, 1.53) served by aeronio's media driver through cnc.dat:
the to-driver ring buffer, the broadcast buffer, heartbeat counters; the driver standalone
(`aeronio driver`) or embedded in another aeronio process."""

import re
import signal
import struct
import zlib

import pytest

from aeronio.counters import (
    CLIENT_HEARTBEAT_TYPE_ID,
    LOCAL_SOCKADDR_TYPE_ID,
    RECEIVE_CHANNEL_STATUS_TYPE_ID,
    SEND_CHANNEL_STATUS_TYPE_ID,
    ChannelStatus,
    CountersReader,
    SystemCounters,
)
from tests.support.procs import aeronio_cmd, system_counters, wait_until
from tests.support.pyaeron_roles import payload

UDP = "aeron:udp?endpoint=127.0.0.1:{port}"
IPC = "aeron:ipc?term-length=64k"
COUNT = 200
SIZES = [100, 3000]  # 3000: fragmented at the 1408 mtu


def _crc(count: int) -> int:
    """What the `subscribe` role reports for `count` messages of the `publish` role."""
    crc = 0
    for i in range(count):
        data = payload(i, SIZES[i % len(SIZES)])
        crc = zlib.crc32(len(data).to_bytes(4, "big") + data, crc)
    return crc


def _aeronio_driver(aeron_c, kind: str, *options: str) -> str:
    """The directory of an aeronio driver: standalone, or embedded in an aeronio process."""
    if kind == "standalone":
        dir = aeron_c.new_dir()
        aeron_c.driver(dir, *options)
        return dir
    service = aeron_c.role("idle_service", name="embedded-driver", stdin=True)
    dir = service.expect_json("ready", 30)["dir"]
    aeron_c.dirs.append(dir)  # the teardown's SIGKILL leaves it
    return dir


def _driver_dir(aeron_c, driver: str) -> str:
    """The directory of a standalone driver: Aeron's C driver ("aeron-c") or aeronio's."""
    if driver == "aeron-c":
        dir = aeron_c.new_dir()
        aeron_c.pyaeron("driver", dir=dir).expect_json("ready", 30)
        return dir
    return _aeronio_driver(aeron_c, "standalone")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["standalone", "embedded"])
@pytest.mark.parametrize("medium", ["ipc", "udp"])
def test_pyaeron_publishes_and_subscribes_on_an_aeronio_driver(aeron_c, free_port, kind, medium):
    """Every message, in order, byte for byte; the image comes with the publisher's session and,
    once the publisher closes, goes."""
    dir = _aeronio_driver(aeron_c, kind)
    channel = IPC if medium == "ipc" else UDP.format(port=free_port)
    subscriber = aeron_c.pyaeron("subscribe", dir=dir, channel=channel, stream_id=9, count=COUNT)
    subscriber.expect("subscribed", 30)
    publisher = aeron_c.pyaeron(
        "publish", dir=dir, channel=channel, stream_id=9, count=COUNT, sizes=SIZES
    )
    session_id = publisher.expect_json("publication", 30)["session_id"]
    publisher.expect("sent", 60)
    image = subscriber.expect_json("image-available", 60)
    assert image["session_id"] == session_id
    assert subscriber.expect_json("received", 60) == {
        "count": COUNT,
        "crc": _crc(COUNT),
        "in_order": True,
    }
    publisher.release()
    publisher.wait(30)
    assert subscriber.expect_json("image-unavailable", 60)["session_id"] == session_id


# The counter types Aeron's StreamStat reads by their keys: pub-lmt, snd-pos, rcv-hwm, sub-pos,
# rcv-pos, snd-lmt, pub-pos, snd-bpe.
STREAM_COUNTER_TYPE_IDS = {1, 2, 3, 4, 5, 9, 12, 13}


@pytest.mark.parametrize("driver", ["aeron-c", "aeronio"])
def test_stream_counters_keys_are_as_aerons_stream_stat_reads_them(aeron_c, free_port, driver):
    """Aeron's StreamStat tells streams apart by the keys of their counters (registration id,
    session id, stream id, then the channel: its length and bytes), not by their labels: each
    stream counter's key says what its label says, on Aeron's C driver (which shows the test
    reads the keys as Aeron writes them) and on aeronio's, whose sender, receiver and network
    subscriber counters had empty keys (StreamStat put them in one stream of session 0 and
    stream 0) and whose other keys held no channel."""
    dir = _driver_dir(aeron_c, driver)
    channel = UDP.format(port=free_port)
    subscriber = aeron_c.pyaeron("subscribe", dir=dir, channel=channel, stream_id=9, count=1)
    subscriber.expect("subscribed", 30)
    publisher = aeron_c.pyaeron(
        "publish", dir=dir, channel=channel, stream_id=9, count=1, sizes=[100]
    )
    session_id = publisher.expect_json("publication", 30)["session_id"]
    subscriber.expect_json("received", 60)
    kinds = set()
    with CountersReader.open(dir) as reader:
        for info in reader.for_each():
            if info.type_id not in STREAM_COUNTER_TYPE_IDS:
                continue
            registration_id, session, stream, length = struct.unpack_from("<qiii", info.key)
            kind, _, rest = info.label.partition(": ")
            assert rest.startswith(f"{registration_id} {session} {stream} {channel}"), info
            assert info.key[20 : 20 + length] == channel.encode(), info
            assert (session, stream) == (session_id, 9), info
            kinds.add(kind.split()[0])
    assert kinds == {"pub-lmt", "pub-pos", "snd-pos", "snd-lmt", "snd-bpe", "rcv-hwm", "rcv-pos",
                     "sub-pos"}  # fmt: skip


@pytest.mark.parametrize("driver", ["aeron-c", "aeronio"])
def test_channel_status_counters_are_aerons_and_read_active(aeron_c, free_port, driver):
    """A UDP publication's and subscription's endpoints each have a channel status counter
    (snd-channel, rcv-channel: key the channel's length and bytes, label the channel and the
    bound address) that Aeron's C client reads ACTIVE, freed with the endpoints; on Aeron's C
    driver (which shows the test reads them as Aeron writes them) and on aeronio's, which made
    none (its READY responses said NOT_ALLOCATED, which that client reads as -1, ERRORED)."""
    dir = _driver_dir(aeron_c, driver)
    channel = UDP.format(port=free_port)
    client = aeron_c.pyaeron("channel_status", dir=dir, channel=channel, stream_id=9)
    active = ChannelStatus.ACTIVE
    status = client.expect_json("status", 30)
    assert (status["subscription"], status["publication"]) == (active, active)
    kinds = (SEND_CHANNEL_STATUS_TYPE_ID, RECEIVE_CHANNEL_STATUS_TYPE_ID)
    key = struct.pack("<i", len(channel)) + channel.encode()
    with CountersReader.open(dir) as reader:
        snd, rcv = sorted(
            (c for c in reader.for_each() if c.type_id in kinds), key=lambda c: c.type_id
        )
        assert snd.key[: len(key)] == rcv.key[: len(key)] == key
        # The publication's socket as bound: Aeron's connected to the endpoint, aeronio's not.
        host = "127.0.0.1" if driver == "aeron-c" else "0.0.0.0"
        assert re.fullmatch(rf"snd-channel: {re.escape(channel)} {host}:\d+", snd.label)
        assert rcv.label == f"rcv-channel: {channel} 127.0.0.1:{free_port}"
        assert snd.value == rcv.value == active
        client.release()
        client.wait(30)
        wait_until(
            lambda: not any(c.type_id in kinds for c in reader.for_each()),
            30,
            "the endpoints' channel status counters freed",
        )


@pytest.mark.parametrize("driver", ["aeron-c", "aeronio"])
def test_a_subscription_on_port_0_finds_its_port_in_its_local_addresses(aeron_c, driver):
    """Aeron's C client finds the port a subscription on `endpoint=127.0.0.1:0` was bound to
    (aeron_subscription_local_sockaddrs: the rcv-local-sockaddr counters of its channel
    status), and a publication to that port delivers; the publication finds its own socket's
    address. On Aeron's C driver (the test's reference) and on aeronio's, where it found none
    (no such counters)."""
    dir = _driver_dir(aeron_c, driver)
    channel = "aeron:udp?endpoint=127.0.0.1:0"
    client = aeron_c.pyaeron("channel_status", dir=dir, channel=channel, stream_id=9)
    status = client.expect_json("status", 30)
    (address,) = status["subscription_addresses"]
    assert re.fullmatch(r"127\.0\.0\.1:[1-9]\d*", address)
    host = "127.0.0.1" if driver == "aeron-c" else "0.0.0.0"  # as bound: see above
    (publication_address,) = status["publication_addresses"]
    assert re.fullmatch(rf"{host}:[1-9]\d*", publication_address)
    assert status["received"] == "to the bound port"
    with CountersReader.open(dir) as reader:
        (rcv,) = [c for c in reader.for_each() if c.type_id == RECEIVE_CHANNEL_STATUS_TYPE_ID]
        (sockaddr,) = [
            c
            for c in reader.for_each()
            if c.type_id == LOCAL_SOCKADDR_TYPE_ID and c.label.startswith("rcv")
        ]
        key = struct.pack("<ii", rcv.id, len(address)) + address.encode()
        assert sockaddr.key[: len(key) + 1] == key + b"\0"
        assert sockaddr.label == f"rcv-local-sockaddr: {rcv.id} {address}"
        assert sockaddr.value == ChannelStatus.ACTIVE
        assert sockaddr.registration_id == rcv.registration_id
        client.release()
        client.wait(30)
        wait_until(
            lambda: not any(c.type_id == LOCAL_SOCKADDR_TYPE_ID for c in reader.for_each()),
            30,
            "the local socket address counters freed",
        )


def test_an_ipc_image_goes_once_drained_not_after_the_linger(aeron_c):
    """As Aeron's driver, an IPC publication's subscribers are told their image went once they
    have read all of it (ON_UNAVAILABLE_IMAGE as the publication starts to linger): they used to
    be told only once the linger ended (publication-linger-ns later, 5 s by default; here 10
    minutes, past the test's wait)."""
    dir = _aeronio_driver(aeron_c, "standalone", "--publication-linger-ns", "600000000000")
    subscriber = aeron_c.pyaeron("subscribe", dir=dir, channel=IPC, stream_id=5, count=COUNT)
    subscriber.expect("subscribed", 30)
    publisher = aeron_c.pyaeron(
        "publish", dir=dir, channel=IPC, stream_id=5, count=COUNT, sizes=SIZES
    )
    session_id = publisher.expect_json("publication", 30)["session_id"]
    assert subscriber.expect_json("image-available", 60)["session_id"] == session_id
    assert subscriber.expect_json("received", 60)["count"] == COUNT
    publisher.release()
    publisher.wait(30)
    assert subscriber.expect_json("image-unavailable", 60)["session_id"] == session_id


def test_a_revoked_ipc_publication_ends_at_once_for_its_subscribers(aeron_c):
    """Aeron's C client revokes an exclusive IPC publication (REMOVE_PUBLICATION, flag REVOKE):
    as Aeron's driver, aeronio's ends it at once, its subscriber's image goes with messages
    unread and says the publication was revoked. The flag used to be ignored: the publication
    drained, the image stayed until the unblock timeout and the linger had passed, unrevoked."""
    dir = _aeronio_driver(aeron_c, "standalone")
    client = aeron_c.pyaeron("revoke_ipc", dir=dir, stream_id=6, count=10, timeout_s=10)
    assert client.expect_json("revoked", 60) == {"image_gone": True, "image_revoked": True}
    assert system_counters(dir)[SystemCounters.PUBLICATIONS_REVOKED] == 1


@pytest.mark.parametrize(
    ("publisher", "subscriber"),
    [("aeron-c", "aeronio"), ("aeronio", "aeron-c"), ("aeronio", "aeronio")],
)
def test_a_revoked_udp_publication_ends_its_receivers_images_at_once(
    aeron_c, free_port, publisher, subscriber
):
    """Aeron's C client revokes an exclusive UDP publication on one driver; the image of Aeron's
    C client on the other driver goes at once, unread, and says its publication was revoked:
    Aeron 1.53's sender heartbeats flagged EOS and REVOKED, understood both ways. aeronio's
    driver counts both ends ("Publications Revoked", "Publication Images Revoked"). Its sender
    used to release a revoked publication as if closed (its receivers drained it all), and its
    receiver took a revoked heartbeat for an end of stream."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port}|term-length=64k"
    receiving, sending = _driver_dir(aeron_c, subscriber), _driver_dir(aeron_c, publisher)
    watcher = aeron_c.pyaeron("watch_image", dir=receiving, channel=channel, stream_id=9,
                              timeout_s=30)  # fmt: skip
    revoker = aeron_c.pyaeron("revoke_publication", dir=sending, channel=channel, stream_id=9,
                              count=10)  # fmt: skip
    session_id = revoker.expect_json("offered", 30)["session_id"]
    assert watcher.expect_json("image", 30) == {"session_id": session_id}
    revoker.send("revoke")
    revoker.expect("revoked", 30)
    assert watcher.expect_json("watched", 60) == {"image_gone": True, "image_revoked": True}
    if publisher == "aeronio":
        assert system_counters(sending)[SystemCounters.PUBLICATIONS_REVOKED] == 1
    if subscriber == "aeronio":
        assert system_counters(receiving)[SystemCounters.PUBLICATION_IMAGES_REVOKED] == 1


def test_an_ipc_image_rejected_by_aerons_client_is_unlinked_then_linked_again(aeron_c):
    """aeron_image_reject (REJECT_IMAGE, fire and forget) of an IPC image: as Aeron's driver,
    aeronio's tells the publication's client its error in Aeron's layout (its publication
    error frame handler gets IMAGE_REJECTED, the reason, loopback port 0), takes the image
    from the subscriber (the publication is not connected) and, after the cool-down (the
    image liveness timeout), gives it back. The driver used to refuse it, NOT_SUPPORTED, which
    the C client cannot show: the image stayed, holding its publisher."""
    dir = _aeronio_driver(aeron_c, "standalone", "--image-liveness-timeout-ns", "500000000")
    client = aeron_c.pyaeron("reject_ipc_image", dir=dir, stream_id=8, reason="no room for it")
    rejected = client.expect_json("rejected", 60)
    (frame,) = rejected["frames"]
    assert frame == {
        "registration_id": rejected["registration_id"],
        "destination_registration_id": -1,
        "session_id": frame["session_id"],
        "stream_id": 8,
        "receiver_id": -1,
        "group_tag": -1,
        "address_type": 1,
        "source_port": 0,
        "source_address": "7f000001" + "00" * 12,
        "error_code": 13,  # IMAGE_REJECTED
        "error_message": "no room for it",
    }
    assert rejected["connected"] is False
    counted = system_counters(dir)
    assert counted[SystemCounters.IMAGES_REJECTED] == 1
    assert counted[SystemCounters.ERROR_FRAMES_SENT] == 0  # an IPC image's: no frame


def test_an_invalid_channel_is_refused_with_aerons_code(aeron_c):
    dir = _aeronio_driver(aeron_c, "standalone")
    failing = aeron_c.pyaeron("add_publication_error", dir=dir, channel="aeron:udp?endpoint=nope")
    message = failing.expect_json("error", 30)["message"]
    assert "endpoint=nope" in message and "INVALID_CHANNEL" in message.upper().replace(" ", "_")


def test_a_shared_publication_is_joined_as_aerons_driver_joins_it(aeron_c):
    """As Aeron's driver matches a stream's shared publication: an add with its session-id joins
    it; one asking for another session-id, or for another position to start at (term-id,
    term-offset), is refused saying so, not given a second session or the log at a position it
    did not ask for; an exclusive one of its session-id clashes (INVALID_CHANNEL)."""
    dir = _aeronio_driver(aeron_c, "standalone")
    at = "init-term-id=1|term-id=2|term-offset=64|term-length=64k"
    adds = [
        ["aeron:ipc?session-id=5", 11, False],
        ["aeron:ipc?session-id=5", 11, False],
        ["aeron:ipc?session-id=6", 11, False],
        ["aeron:ipc?session-id=5", 11, True],
        [f"aeron:ipc?{at}", 12, False],
        [f"aeron:ipc?{at}", 12, False],
        [f"aeron:ipc?{at.replace('term-id=2', 'term-id=3')}", 12, False],
        [f"aeron:ipc?{at.replace('term-offset=64', 'term-offset=128')}", 12, False],
    ]
    client = aeron_c.pyaeron("add_publications", dir=dir, adds=adds)
    answers = client.expect_json("answered", 30)
    assert answers[:2] == [{"session_id": 5, "position": 0}] * 2
    differs = "session-id=6 differs from the existing publication's session-id=5"
    assert differs in answers[2]["error"]
    clash = answers[3]["error"]  # INVALID_CHANNEL, as Aeron's driver says it
    assert "session-id 5 is already in use on stream 11" in clash
    assert "INVALID_CHANNEL" in clash.upper().replace(" ", "_")
    assert answers[4]["position"] == answers[5]["position"] == 64 * 1024 + 64
    assert answers[4]["session_id"] == answers[5]["session_id"]
    started = "from where the existing publication started (position 65600: term-id=2 "
    assert f"term-id=3 term-offset=64 (position 131136) differ {started}" in answers[6]["error"]
    assert f"term-id=2 term-offset=128 (position 65664) differ {started}" in answers[7]["error"]


@pytest.mark.slow
def test_a_killed_pyaeron_client_is_timed_out_and_its_resources_freed(aeron_c):
    """SIGKILLed, the client writes its heartbeat counter no more: after the client liveness
    timeout the driver frees the counter and the client's publication (its counters go)."""
    dir = _aeronio_driver(aeron_c, "standalone", "--client-liveness-timeout-ns", "1000000000")
    publisher = aeron_c.pyaeron(
        "publish", dir=dir, channel=IPC, stream_id=3, count=1, sizes=[100], timeout_s=600
    )
    client_id = publisher.expect_json("publication", 30)["client_id"]
    reader = CountersReader.open(dir)
    try:

        def labels() -> list[str]:
            return [c.label for c in reader.for_each()]

        heartbeat = wait_until(
            lambda: reader.find_by_type_id_and_registration_id(CLIENT_HEARTBEAT_TYPE_ID, client_id),
            30,
            "the client's heartbeat counter",
        )
        assert any(label.startswith("pub-lmt") for label in labels())
        # Aeron's client finds its counter by type and key, and writes its liveness into it.
        wait_until(
            lambda: " name=" in reader.get_counter_label(heartbeat), 30, "the client's label"
        )
        publisher.send_signal(signal.SIGKILL)
        publisher.wait(30)
        wait_until(
            lambda: system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS] == 1,
            30,
            "the client timed out",
        )
        assert (
            reader.find_by_type_id_and_registration_id(CLIENT_HEARTBEAT_TYPE_ID, client_id) is None
        )
        wait_until(
            lambda: not any(label.startswith(("pub-lmt", "pub-pos")) for label in labels()),
            60,
            "the publication released",
        )
    finally:
        reader.close()


@pytest.mark.slow
def test_one_ipc_stream_shared_by_aeronio_and_pyaeron_clients(aeron_c):
    """An aeronio publisher and subscriber and a pyaeron publisher and subscriber, all clients
    of one aeronio driver's cnc.dat, on one IPC stream: one log (one session), every message of both
    publishers to both subscribers, in order per publisher."""
    dir = _aeronio_driver(aeron_c, "standalone", "--ipc-term-length", "65536")
    counts = {"aeronio": 500, "pyaeron": 500}
    subscribers = [
        aeron_c.role("tagged_subscriber", stdin=True, dir=dir, stream=4, counts=counts),
        aeron_c.pyaeron(
            "subscribe_tagged", dir=dir, channel="aeron:ipc", stream_id=4, counts=counts
        ),
    ]
    for subscriber in subscribers:
        subscriber.expect("subscribed", 30)
    publishers = [
        aeron_c.role("tagged_publisher", stdin=True, dir=dir, stream=4, tag="aeronio", count=500),
        aeron_c.pyaeron(
            "publish_tagged", dir=dir, channel="aeron:ipc", stream_id=4, tag="pyaeron", count=500
        ),
    ]
    sessions = {publisher.expect_json("connected", 30)["session_id"] for publisher in publishers}
    assert len(sessions) == 1  # one log
    for publisher in publishers:
        publisher.send("go")
    for publisher in publishers:
        publisher.expect("sent", 60)
    for subscriber in subscribers:
        assert subscriber.expect_json("received", 90) == {"counts": counts, "errors": []}


def test_a_driver_termination_request_makes_no_client(aeron_c):
    """Aeron's request that a driver terminate (a TERMINATE_DRIVER naming a client id of its
    own) is refused by a driver that does not allow it, and makes no client, as Aeron's driver:
    it used to make one, with a heartbeat counter, which the driver timed out a liveness
    timeout later (counted in CLIENT_TIMEOUTS, a ClientTimeoutError in its error log)."""
    dir = _aeronio_driver(aeron_c, "standalone")
    aeron_c.pyaeron("request_termination", dir=dir, token="stop").expect("requested", 30)
    wait_until(
        lambda: "TERMINATE_DRIVER from client" in aeronio_cmd("errors", "--dir", dir).stdout,
        30,
        "the request refused",
    )
    with CountersReader.open(dir) as reader:
        assert [c.label for c in reader.for_each() if c.type_id == CLIENT_HEARTBEAT_TYPE_ID] == []


def test_static_counters_and_publications_named_as_aerons_c_client_names_them(aeron_c):
    """Aeron's C client adds a static counter twice (one counter, owned by no client, that
    outlives the client); it names a publication by its add's correlation id: its
    REMOVE_DESTINATION_BY_ID is answered (with the publication's id where the destination's
    goes, as that client writes it: nothing removed, as Aeron's driver does) and its
    REMOVE_PUBLICATION releases the publication while the client lives. aeronio's driver shows
    Aeron's "Control protocol version" system counter, so the client asks it for the next
    session ids (consecutive, from the driver's sequence) rather than making random ones."""
    dir = _aeronio_driver(aeron_c, "standalone")
    client = aeron_c.pyaeron("commands_1_53", dir=dir, static_type_id=1006, registration_id=777)
    answered = client.expect_json("answered", 30)
    first, second = answered["counter_ids"]
    assert first == second
    session_id, next_session_id = answered["session_ids"]
    assert next_session_id == session_id + 1
    with CountersReader.open(dir) as reader:
        assert reader.get_counter_registration_id(first) == 777
        assert reader.get_counter_owner_id(first) == -1
        assert reader.get_counter_label(first) == "a static counter"
        wait_until(
            lambda: not any("control-mode=manual" in c.label for c in reader.for_each()),
            30,
            "the closed publication's counters freed",
        )
        client.release()
        client.wait(30)
        assert reader.get_counter_state(first) == 1  # the client is gone, the counter not
