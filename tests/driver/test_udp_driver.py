"""aeronio to aeronio over real UDP sockets on loopback: two embedded drivers, one publishing,
one subscribing, through the driver's network publications, endpoints and images."""

import asyncio
import os
import random
import socket
import time

import pytest

import aeronio
from aeronio.counters import SystemCounters
from aeronio.counters.counters_file import RECORD_RECLAIMED, CountersFullError
from aeronio.driver import log_params, sender_state
from tests.support.driver_internals import conductor, udp_media
from tests.support.ports import free_port
from tests.support.procs import await_until


async def connected(pub, sub) -> None:
    for _ in range(500):
        if pub.is_connected and sub.images:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("publication and subscription never connected over UDP")


def payload(i: int, size: int) -> bytes:
    return i.to_bytes(4, "little") + bytes((i + k) % 251 for k in range(size - 4))


async def exchange(pub, sub, expected: list[bytes], timeout: float) -> list[bytes]:
    """Offer `expected` while receiving; what the subscription got, in order."""

    async def produce():
        for message in expected:
            await pub.offer(message, timeout=20)

    producer = asyncio.create_task(produce())
    received = []
    async with asyncio.timeout(timeout):
        async for message in sub:
            received.append(message.data)
            if len(received) == len(expected):
                break
    await producer
    return received


@pytest.mark.parametrize(
    "term_length,sizes",
    [
        (65536, [4, 5, 1376, 1377, 3000, 8192]),  # 1376 = MTU - 32; max message 8 KiB
        (1024 * 1024, [65536, 131072, 4]),  # 64 and 128 KiB messages in MTU fragments
    ],
)
@pytest.mark.loops
async def test_unicast_delivers_every_message_in_order(term_length, sizes):
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length={term_length}"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel, 7)
        pub = await a.add_publication(channel, 7)
        await connected(pub, sub)
        count = 3000 if term_length == 65536 else 40
        expected = [payload(i, sizes[i % len(sizes)]) for i in range(count)]
        assert await exchange(pub, sub, expected, 60) == expected
        if term_length == 65536:
            assert pub.position > 10 * term_length  # many term rotations


@pytest.mark.slow
async def test_empty_message_and_close_ends_the_image():
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k|linger=0"
    gone = asyncio.Event()
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel, 8, unavailable_image=lambda image: gone.set())
        pub = await a.add_publication(channel, 8)
        await connected(pub, sub)
        await pub.offer(b"")
        await pub.offer(b"last")
        got = []
        async with asyncio.timeout(10):
            async for message in sub:
                got.append(message.data)
                if len(got) == 2:
                    break
        assert got == [b"", b"last"]
        image = sub.images[0]
        await pub.close()
        async with asyncio.timeout(15):
            await gone.wait()
        assert image.is_end_of_stream or image.is_closed


async def test_udp_channel_forms_that_cannot_work_are_refused_naming_what_is_wrong():
    async with aeronio.connect() as a:
        with pytest.raises(aeronio.ChannelUriError, match="needs a control address"):
            await a.add_publication("aeron:udp?control-mode=manual", 1)
        for extra in ("control-mode=manual", f"control=127.0.0.1:{free_port()}"):
            with pytest.raises(aeronio.ChannelUriError, match="control-mode are for multi-dest"):
                await a.add_publication(f"aeron:udp?endpoint=127.0.0.1:{free_port()}|{extra}", 1)
        with pytest.raises(aeronio.ChannelUriError, match="subscription needs an endpoint"):
            await a.add_subscription(f"aeron:udp?control=127.0.0.1:{free_port()}", 1)
        with pytest.raises(aeronio.ChannelUriError, match="multicast subscription takes no"):
            await a.add_subscription(
                f"aeron:udp?endpoint=224.20.30.1:{free_port()}|control=127.0.0.1:4000", 1
            )
        with pytest.raises(aeronio.ChannelUriError, match="a publication is no spy"):
            await a.add_exclusive_publication(
                f"aeron-spy:aeron:udp?endpoint=127.0.0.1:{free_port()}", 1
            )
        with pytest.raises(aeronio.ChannelUriError, match="even last byte"):
            await a.add_publication("aeron:udp?endpoint=224.20.30.2:40456", 1)
        with pytest.raises(aeronio.ChannelUriError, match="fc"):
            await a.add_publication("aeron:udp?endpoint=224.20.30.1:40456|fc=fastest", 1)
        unicast = await a.add_publication(f"aeron:udp?endpoint=127.0.0.1:{free_port()}", 1)
        with pytest.raises(aeronio.DriverError, match="control-mode=manual"):
            await unicast.add_destination(f"aeron:udp?endpoint=127.0.0.1:{free_port()}")
        mdc = await a.add_publication(
            f"aeron:udp?control=127.0.0.1:{free_port()}|control-mode=manual", 1
        )
        with pytest.raises(aeronio.ChannelUriError, match="must be aeron:udp.endpoint"):
            await mdc.add_destination("aeron:ipc")
        with pytest.raises(aeronio.DriverError, match="is not a destination"):
            await mdc.remove_destination(f"aeron:udp?endpoint=127.0.0.1:{free_port()}")
        for v6 in (
            f"aeron:udp?endpoint=[::1]:{free_port()}",
            f"aeron:udp?endpoint=127.0.0.1:{free_port()}|interface=[::1]",
        ):
            for add in (a.add_publication, a.add_subscription):
                with pytest.raises(aeronio.DriverError, match="'::1' is an IPv6 address"):
                    await add(v6, 1)
        with pytest.raises(aeronio.DriverError, match="'::1' is an IPv6 address"):
            await mdc.add_destination(f"aeron:udp?endpoint=[::1]:{free_port()}")


async def test_one_to_many_parameters_that_cannot_work_are_refused_naming_them():
    """An interface that is no address of this host (a multicast group, which a socket binds
    and sends nothing from, taken on a unicast channel), a destination that is a multicast group
    or port 0, a publication to port 0: refused naming the parameter (they failed naming
    another address, or were taken and sent nowhere: never connected, short sends)."""
    absent = "192.0.2.1"  # TEST-NET-1: no host has it
    group = f"224.20.30.1:{free_port()}"
    async with aeronio.connect() as a:
        for add in (a.add_publication, a.add_subscription):
            channel = f"aeron:udp?endpoint={group}|interface={absent}"
            with pytest.raises(aeronio.ChannelUriError) as refused:
                await add(channel, 1)
            assert str(refused.value) == (
                f"interface '{absent}' of {channel}: {absent} is no address of this host: "
                "Cannot assign requested address"
            )
            with pytest.raises(aeronio.DriverError, match="^interface 'no-such-nic' of "):
                await add(f"aeron:udp?endpoint={group}|interface=no-such-nic", 1)
        for interface in (absent, "224.20.30.3"):
            unicast = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|interface={interface}"
            with pytest.raises(aeronio.ChannelUriError, match=f"^interface '{interface}' of "):
                await a.add_publication(unicast, 1)
        with pytest.raises(aeronio.ChannelUriError, match="224.20.30.3 is a multicast group, no"):
            await a.add_subscription(f"aeron:udp?endpoint={group}|interface=224.20.30.3", 1)
        with pytest.raises(aeronio.ChannelUriError, match="endpoint port 0 names no receiver"):
            await a.add_publication("aeron:udp?endpoint=127.0.0.1:0", 1)
        mdc = await a.add_publication(
            f"aeron:udp?control=127.0.0.1:{free_port()}|control-mode=manual", 1
        )
        with pytest.raises(aeronio.ChannelUriError, match="is a multicast group, whose rec"):
            await mdc.add_destination(f"aeron:udp?endpoint={group}")
        with pytest.raises(aeronio.ChannelUriError, match="endpoint port 0 names no receiver"):
            await mdc.add_destination("aeron:udp?endpoint=127.0.0.1:0")
        (endpoint,) = udp_media(a).send_endpoints.values()
        assert endpoint.destinations == {}


async def test_a_stream_sharing_an_endpoint_asks_no_other_socket_option():
    """A publication whose channel shares a send endpoint (one socket) with others is refused
    when it asks another ttl, so-sndbuf or so-rcvbuf (it was taken, and its datagrams went out
    with the first's TTL, 1: never past the first router); the same ones, or none, share. So
    is a subscription sharing a receive endpoint."""
    channel = f"aeron:udp?endpoint=224.20.30.5:{free_port()}|interface=127.0.0.1|ttl=4"
    async with aeronio.connect() as a:
        await a.add_publication(f"{channel}|so-sndbuf=64k", 1)
        for extra, said in (
            ("|ttl=16", "ttl=16 does not match ttl=4"),
            ("|so-sndbuf=1m", "so-sndbuf=1m does not match so-sndbuf=64k"),
            ("|so-rcvbuf=1m", "so-rcvbuf=1m does not match the OS default"),
        ):
            with pytest.raises(aeronio.ChannelUriError) as refused:
                await a.add_publication(channel.replace("|ttl=4", "") + extra, 2)
            assert said in str(refused.value)
        await a.add_publication(f"{channel}|so-sndbuf=65536", 3)
        await a.add_publication(channel.replace("|ttl=4", ""), 4)
        (endpoint,) = udp_media(a).send_endpoints.values()
        assert len(endpoint.publications) == 3
        assert endpoint.socket.getsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL) == 4

        await a.add_subscription(f"{channel}|so-rcvbuf=256k", 1)
        with pytest.raises(aeronio.ChannelUriError, match="so-rcvbuf=1m does not match so-rcv"):
            await a.add_subscription(f"{channel}|so-rcvbuf=1m", 2)
        await a.add_subscription(channel, 3)
        (receiving,) = udp_media(a).receive_endpoints.values()
        assert receiving.dispatcher.streams.keys() == {1, 3}


async def test_one_control_address_takes_one_control_mode():
    """A second multi-destination-cast publication on a control address in the other control
    mode is refused naming it (it shared the first's endpoint: a dynamic one's receivers were
    never added, never connected, and nothing said why); a subscription answering control
    port 0 is refused."""
    async with aeronio.connect() as a:
        for first, second in (("manual", "dynamic"), ("dynamic", "manual")):
            control = f"127.0.0.1:{free_port()}"
            await a.add_publication(f"aeron:udp?control={control}|control-mode={first}", 1)
            channel = f"aeron:udp?control={control}|control-mode={second}"
            with pytest.raises(aeronio.ChannelUriError) as refused:
                await a.add_publication(channel, 2)
            assert str(refused.value) == (
                f"{channel}: control-mode={second}, but the publications on control {control} "
                f"are control-mode={first}: one control address, one mode"
            )
            same = await a.add_publication(f"aeron:udp?control={control}|control-mode={first}", 3)
            assert same.stream_id == 3
        with pytest.raises(aeronio.ChannelUriError, match="control port 0 names no publication"):
            await a.add_subscription(
                f"aeron:udp?endpoint=127.0.0.1:{free_port()}|control=127.0.0.1:0", 1
            )


async def test_a_session_id_clashes_only_where_both_would_reach_the_same_receivers():
    """Two publications of one session and stream on two endpoints are two streams (an
    archive's replay to a late joiner beside the live publication, as the chat example runs);
    on the same endpoint, or on IPC, the second is refused naming the session id."""
    one, two = (f"aeron:udp?endpoint=127.0.0.1:{free_port()}" for _ in range(2))
    async with aeronio.connect() as a, aeronio.connect() as b:
        subs = [await b.add_subscription(channel, 3) for channel in (one, two)]
        first = await a.add_exclusive_publication(one, 3)
        same = f"|session-id={first.session_id}"
        second = await a.add_exclusive_publication(two + same, 3)
        assert second.session_id == first.session_id
        for channel in (one + same, "aeron:ipc?session-id=7"):
            if channel.startswith("aeron:ipc"):
                await a.add_exclusive_publication(channel, 3)
            with pytest.raises(aeronio.ChannelUriError, match="session-id .* already in use"):
                await a.add_exclusive_publication(channel, 3)
        for pub, sub, data in ((first, subs[0], b"one"), (second, subs[1], b"two")):
            await connected(pub, sub)
            assert await exchange(pub, sub, [data], 10) == [data]


def garbage(rng, legit: bytes) -> bytes:
    """Random bytes, or a real frame truncated, mis-sized, of an unknown type, or a SETUP with an
    absurd term length or MTU."""
    data = bytearray(legit)
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 200))
    if kind == 1:
        return bytes(data[: rng.randrange(0, len(data))])
    if kind == 2:
        data[0:4] = rng.choice([1, 31, -5, 2**31 - 1, len(data) + 64]).to_bytes(
            4, "little", signed=True
        )
    elif kind == 3:
        data[6:8] = rng.choice([4, 9, 0x7777, 0xFFFF]).to_bytes(2, "little")
    else:
        data[0:8] = (40).to_bytes(4, "little") + bytes([0, 0, 5, 0])
        data[28:36] = rng.choice([3, 1 << 20 | 1, 0]).to_bytes(4, "little") + rng.choice(
            [0, 33, 1 << 20]
        ).to_bytes(4, "little")
        return bytes(data[:40])
    return bytes(data)


async def test_live_receiver_counts_garbage_and_keeps_the_stream_intact():
    port = free_port()
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=64k"
    rng = random.Random(7)
    legit = bytes.fromhex("2e00000000c0010000000000") + bytes(52)  # a DATA frame shape
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel, 9)
        pub = await a.add_publication(channel, 9)
        await connected(pub, sub)
        attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        expected = [payload(i, 4 + (i * 37) % 2000) for i in range(2000)]
        received = []

        async def produce():
            for i, message in enumerate(expected):
                await pub.offer(message, timeout=20)
                for _ in range(3):
                    attacker.sendto(garbage(rng, legit), ("127.0.0.1", port))
                if i % 50 == 0:
                    attacker.sendto(b"", ("127.0.0.1", port))  # zero-length datagrams too

        producer = asyncio.create_task(produce())
        try:
            async with asyncio.timeout(60):
                async for message in sub:
                    received.append(message.data)
                    if len(received) == len(expected):
                        break
            await producer
        finally:
            attacker.close()
        assert received == expected
        invalid = next(c.value for c in b.counters.for_each() if c.label == "Invalid packets")
        assert invalid > 1000


@pytest.mark.parametrize("rcv_wnd, window", [("8k", 8192), ("1m", 32 * 1024)])
async def test_subscription_rcv_wnd_sets_the_window_the_sender_gets(rcv_wnd, window):
    """As asked, up to half a term (Aeron's bound: a sender never over-runs what the
    subscribers still read)."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(f"{channel}|rcv-wnd={rcv_wnd}|so-rcvbuf=1m", 12)
        pub = await a.add_publication(channel, 12)
        await connected(pub, sub)
        counters = {c.label.split(":")[0]: c.value for c in a.counters.for_each()}
        assert counters["snd-lmt"] - counters["snd-pos"] == window
        assert counters["snd-bpe"] == 0  # the sender's back-pressure events, per publication


async def test_a_receiver_window_larger_than_the_socket_buffer_is_refused():
    """rcv-wnd past so-rcvbuf (or past the OS default SO_RCVBUF without it; Aeron's initial
    window, 128 KiB, without rcv-wnd) is refused with a ChannelUriError naming both, as Aeron's
    driver refuses it: a sender let past what the socket holds has its data dropped there. At
    the buffer's size it is taken; nothing of a refused subscription stays."""
    os_default = log_params.os_default_socket_buffer_lengths()[1]
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    async with aeronio.connect() as a:
        refusals = {
            f"{channel}|rcv-wnd=64k|so-rcvbuf=32k": "rcv-wnd=65536 is greater than so-rcvbuf "
            "(32768)",
            f"{channel}|so-rcvbuf=64k": "rcv-wnd=131072 is greater than so-rcvbuf (65536)",
            f"{channel}|rcv-wnd={os_default + 32}": f"rcv-wnd={os_default + 32} is greater than "
            f"the OS default SO_RCVBUF ({os_default})",
        }
        for refused, reason in refusals.items():
            with pytest.raises(aeronio.ChannelUriError) as error:
                await a.add_subscription(refused, 1)
            assert str(error.value) == (
                f"{refused}: {reason}: the window must fit the socket's receive buffer (raise "
                "so-rcvbuf, or lower rcv-wnd)"
            )
        assert udp_media(a).receive_endpoints == {}
        await a.add_subscription(f"{channel}|rcv-wnd=64k|so-rcvbuf=64k", 1)
        assert len(udp_media(a).receive_endpoints) == 1


@pytest.mark.parametrize("read", ["async for", "views", "batches"])
async def test_a_message_larger_than_the_receiver_window_arrives_whole(read):
    """The sender sends only so far past the subscriber position: a reader waiting at a
    message's BEGIN for its END would wait forever (views did, before). Its first fragments go
    into the image's assembly and the position moves on."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=1m"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(f"{channel}|rcv-wnd=8k", 13)
        pub = await a.add_publication(channel, 13)
        await connected(pub, sub)
        big = [payload(i, 64 * 1024) for i in range(3)]  # 48 fragments each, the window 6
        producer = asyncio.create_task(exchange_big(pub, big))
        got: list[bytes] = []
        async with asyncio.timeout(20):
            if read == "batches":
                async for batch in sub.batches():
                    got += [m.data for m in batch]
                    if len(got) == len(big):
                        break
            else:
                async for message in sub if read == "async for" else sub.messages(copy=False):
                    got.append(bytes(message.data))
                    if len(got) == len(big):
                        break
        await producer
        assert got == big


async def exchange_big(pub, messages: list[bytes]) -> None:
    for message in messages:
        await pub.offer(message, timeout=20)


@pytest.mark.parametrize(
    "params,reliable,nak_delay_ns",
    [("", True, 0), ("|reliable=false|nak-delay=20ms", False, 20_000_000)],
)
async def test_subscription_reliable_and_nak_delay_shape_the_image(params, reliable, nak_delay_ns):
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel + params, 13)
        pub = await a.add_publication(channel, 13)
        await connected(pub, sub)
        (image,) = conductor(b).resources.images
        assert image.receiver.reliable is reliable
        assert image.receiver.loss.delay_ns == nak_delay_ns


async def test_spy_reads_the_network_publications_log_without_holding_the_sender_back():
    """An `aeron-spy:` subscription in the publisher's driver gets every message the network
    publication sends, from its log, with no socket of its own; a spy that stops reading holds
    the publisher back at a term window (as Aeron's spies do) but never the sender; a spy alone
    does not make the publication connected."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        spy = await a.add_subscription("aeron-spy:" + channel, 14)
        pub = await a.add_publication(channel, 14)
        await await_until(lambda: spy.images, 10, "the spy's image of the publication")
        bytes_sent = conductor(a).system[SystemCounters.BYTES_SENT]
        before = bytes_sent.get()
        await await_until(lambda: bytes_sent.get() > before, 10, "a SETUP sent after the spy came")
        assert not pub.is_connected and pub.try_offer(b"x") == aeronio.NOT_CONNECTED
        sub = await b.add_subscription(channel, 14)
        await connected(pub, sub)
        assert len(spy.images) == 1 and spy.images[0].session_id == pub.session_id
        expected = [payload(i, 4 + i % 3000) for i in range(500)]
        spied = []

        async def read_spy():
            async for message in spy:
                spied.append(message.data)
                if len(spied) == len(expected):
                    return

        reader = asyncio.create_task(read_spy())
        assert await exchange(pub, sub, expected, 30) == expected
        await asyncio.wait_for(reader, 10)
        assert spied == expected

        # The spy stops reading: the publisher fills a term window past it, all of which the
        # sender sends and the remote subscriber gets.
        start = pub.position
        sent = []
        while (result := pub.try_offer(payload(len(sent), 100))) > 0:
            sent.append(payload(len(sent), 100))
        assert result == aeronio.BACK_PRESSURED
        assert pub.position - start >= 32 * 1024 - 200  # half a 64 KiB term
        got = []
        async with asyncio.timeout(10):
            async for message in sub:
                got.append(message.data)
                if len(got) == len(sent):
                    break
        assert got == sent
        counters = {c.label.split(":")[0]: c.value for c in a.counters.for_each()}
        assert counters["snd-pos"] == pub.position


async def test_a_spy_never_sees_network_images_and_closing_it_holds_nothing_back():
    """A spy reads only this driver's publications: beside a subscription on the same channel it
    gets no image of a remote sender, and once closed the image's flow control goes on."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel, 9)
        spy = await b.add_subscription("aeron-spy:" + channel, 9)
        pub = await a.add_publication(channel, 9)
        await connected(pub, sub)
        later = await b.add_subscription(channel, 9)  # its image: told after any of the spy's
        await await_until(lambda: later.images, 10, "the later subscription's image")
        assert spy.images == ()
        await later.close()  # it reads nothing: it would hold the image back
        await spy.close()
        expected = [payload(i, 200) for i in range(3000)]  # 10 windows of 32 KiB
        assert await exchange(pub, sub, expected, 30) == expected


@pytest.mark.slow
async def test_a_session_without_counters_left_leaves_no_image_log_behind():
    """A receiver whose counters are full cannot make an image: each SETUP is recorded as an
    error and leaves no log file (16 MiB each by default) behind."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect(max_counters=64) as b, aeronio.connect() as a:
        await b.add_subscription(channel, 7)
        with pytest.raises(aeronio.AeronError):
            for stream in range(100, 200):  # each takes a publisher limit and position
                await b.add_publication("aeron:ipc?term-length=64k", stream)
        await a.add_publication(channel, 7)

        def errors() -> int:
            return {c.label: c.value for c in b.counters.for_each()}["Errors"]

        await await_until(lambda: errors() >= 5, 15, "5 SETUPs (every 100 ms) counted as errors")
        images = os.path.join(b.driver_dir, "images")
        assert os.listdir(images) == []


async def test_a_spy_that_stopped_reading_does_not_stop_unblocking():
    """An abandoned claim on a network publication is unblocked at the sender's position even
    with a spy that stopped reading sitting behind it."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    options = {"publication_unblock_timeout_ns": 300_000_000}
    async with aeronio.connect(**options) as a, aeronio.connect() as b:
        await a.add_subscription("aeron-spy:" + channel, 5)  # never read
        sub = await b.add_subscription(channel, 5)
        p1 = await a.add_publication(channel, 5)
        p2 = await a.add_publication(channel, 5)
        await connected(p1, sub)
        await p1.offer(b"first", timeout=5)
        claim = p1.try_claim(64)
        assert not isinstance(claim, int), claim
        after = [b"after-%d" % i for i in range(10)]
        for message in after:
            await p2.offer(message, timeout=5)
        got = []
        async with asyncio.timeout(10):
            async for message in sub:
                got.append(bytes(message.data))
                if len(got) == 1 + len(after):
                    break
        assert got == [b"first", *after]
        unblocked = {c.label: c.value for c in a.counters.for_each()}["Unblocked Publications"]
        assert unblocked == 1


@pytest.mark.loops
async def test_invoke_runs_the_driver_for_a_loop_that_never_yields(tmp_path):
    """A busy-spinning application drives its embedded driver with invoke(): messages go out
    and come back over UDP while the loop never runs the driver's own task."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 9)
            pub = await client.add_publication(channel, 9)
            await connected(pub, sub)
            expected = [payload(i, 4 + i % 300) for i in range(5000)]
            got: list[bytes] = []
            handler = lambda buffer, header: got.append(bytes(buffer))  # noqa: E731
            sent, spins = 0, 0
            while len(got) < len(expected):  # no await in here: only invoke() moves the data
                if sent < len(expected) and pub.try_offer(expected[sent]) > 0:
                    sent += 1
                driver.invoke()
                sub.poll(handler, 10)
                spins += 1
                assert spins < 1_000_000, f"stalled at {len(got)} of {len(expected)}"
            assert got == expected
            assert driver.invoke() >= 0

            def from_another_thread():
                with pytest.raises(aeronio.DriverError, match="event loop"):
                    driver.invoke()

            await asyncio.to_thread(from_another_thread)
    with pytest.raises(aeronio.DriverError, match="not running"):
        driver.invoke()


async def test_a_publication_refused_its_socket_leaves_nothing_behind():
    """A multi-destination-cast control port in use: the publication is refused and its log,
    counters and session are released (a refused one never leaks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        async with aeronio.connect() as a:
            for _ in range(3):
                with pytest.raises(aeronio.DriverError, match=f"cannot bind 127.0.0.1:{port}"):
                    await a.add_publication(f"aeron:udp?control=127.0.0.1:{port}", 1)
            kinds = ("pub-", "snd-", "fc-", "mdc-")
            assert [c.label for c in a.counters.for_each() if c.label.startswith(kinds)] == []
            assert os.listdir(os.path.join(a.driver_dir, "publications")) == []
            pub = await a.add_publication(f"aeron:udp?endpoint=127.0.0.1:{free_port()}", 1)
            assert pub.session_id is not None


@pytest.mark.loops
async def test_invoke_from_an_image_callback_runs_a_duty_cycle(tmp_path):
    """Image callbacks run when the client reads the broadcast buffer, outside the driver's duty
    cycle: a busy-spinning application may invoke the driver from one."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    invoked: list[int] = []

    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(
                channel, 9, available_image=lambda image: invoked.append(driver.invoke())
            )
            pub = await client.add_publication(channel, 9)
            await connected(pub, sub)
    assert len(invoked) == 1 and invoked[0] >= 0


async def test_a_sender_with_more_than_a_batch_keeps_sending_without_new_appends(tmp_path):
    """The duty cycle after one that worked runs in full even if nothing moved since: a sender
    that stopped at its batch of datagrams sends the rest at once, not at the next timer tick."""
    port = free_port()
    pub_channel = f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=1m"
    sub_channel = f"{pub_channel}|rcv-wnd=512k|so-rcvbuf=512k"
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(sub_channel, 9)
            pub = await client.add_publication(pub_channel, 9)
            await connected(pub, sub)
            sender = udp_media(driver).publications[0].sender
            window = 300 * 1056  # the datagrams below, each a 1000-byte message and its header
            await await_until(
                lambda: sender.sender_limit.get() - sender.sender_position.get() >= window,
                10,
                "status messages that open a window for 300 datagrams",
            )
            start = sender.sender_position.get()
            for i in range(300):  # a datagram each: several batches
                assert pub.try_offer(payload(i, 1000)) > 0
            driver_conductor = conductor(driver)
            now = driver_conductor.schedule.next_timer_ns - 1  # no timer tick during what follows
            positions = []
            for _ in range(6):
                driver_conductor.do_work(now)
                positions.append(sender.sender_position.get())
            assert positions[-1] == pub.position, positions
            assert positions[0] - start < pub.position - start  # one batch did not send it all


async def test_spies_that_simulate_a_connection_let_a_publication_without_receivers_publish():
    """With spies-simulate-connection, a spy connects the network publication as a receiver
    would: the publisher goes at the spy's pace with no receiver; a receiver that comes later
    joins at the live position and gets what follows."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        pub = await a.add_publication(f"{channel}|spies-simulate-connection=true", 15)
        await asyncio.sleep(0.2)
        assert not pub.is_connected and pub.try_offer(b"x") == aeronio.NOT_CONNECTED
        spy = await a.add_subscription(f"aeron-spy:{channel}", 15)
        await await_until(lambda: pub.is_connected, 10, "the spy to connect the publication")
        first = [payload(i, 4 + i % 400) for i in range(600)]  # about four 64 KiB terms
        assert await exchange(pub, spy, first, 30) == first
        sub = await b.add_subscription(channel, 15)
        await await_until(lambda: sub.images, 10, "a receiver's image")
        join = sub.images[0].join_position
        assert join == pub.position  # live: nothing before it is sent again
        later = [payload(i, 100) for i in range(600, 800)]
        got = await exchange(pub, sub, later, 30)
        assert got == later
        spied: list[bytes] = []
        async with asyncio.timeout(10):
            async for message in spy:
                spied.append(message.data)
                if len(spied) == len(later):
                    break
        assert spied == later


@pytest.mark.slow
@pytest.mark.loops
async def test_an_idle_stream_keeps_connected_without_the_drivers_python():
    """Idle, a stream's heartbeats (every 100 ms) and status messages (every 200 ms) are sent
    and taken by the drivers' DataPaths in C: each driver runs its Python duty cycle only for
    its timer and its client's keepalives, not once per heartbeat or status message. The image
    stays alive on the heartbeats, and the publication stays connected past the receiver
    timeout (2 s) on the status messages absorbed as repeats (the timer takes their times)."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel, 9)
        pub = await a.add_publication(channel, 9)
        await connected(pub, sub)
        assert await exchange(pub, sub, [b"before"], 10) == [b"before"]
        await asyncio.sleep(0.5)  # the last bookkeeping of the message done
        sender, receiver = conductor(a), conductor(b)
        full_cycles = {"sender": 0, "receiver": 0}
        for key, of in (("sender", a), ("receiver", b)):
            run = udp_media(of).do_work

            def counted(now_ns, data_path, run=run, key=key):
                full_cycles[key] += 1
                return run(now_ns, data_path)

            udp_media(of).do_work = counted
        counters = [
            (sender, SystemCounters.HEARTBEATS_SENT),
            (receiver, SystemCounters.HEARTBEATS_RECEIVED),
            (receiver, SystemCounters.STATUS_MESSAGES_SENT),
            (sender, SystemCounters.STATUS_MESSAGES_RECEIVED),
        ]
        before = [driver.system[counter].get() for driver, counter in counters]
        idle_s, start = 3.5, asyncio.get_running_loop().time()
        while asyncio.get_running_loop().time() - start < idle_s:
            assert pub.is_connected and len(sub.images) == 1
            await asyncio.sleep(0.1)
        after = [driver.system[counter].get() for driver, counter in counters]
        counted = [a - b for a, b in zip(after, before, strict=True)]
        heartbeats_sent, heartbeats_received, sms_sent, sms_received = counted
        assert heartbeats_sent >= 25 and heartbeats_received >= 25, counted
        assert sms_sent >= 12 and sms_received >= 12, counted
        assert all(cycles <= 15 for cycles in full_cycles.values()), full_cycles
        (image,) = receiver.resources.images
        age_ns = time.monotonic_ns() - image.receiver.time_of_last_packet_ns
        assert age_ns < 300_000_000  # alive on the heartbeats
        assert await exchange(pub, sub, [b"after"], 10) == [b"after"]


@pytest.mark.loops
async def test_an_idle_driver_watches_what_came_while_it_idled():
    """A parked conductor watches each network publication's appends (a doorbell waiter) and
    stays watching while it stays idle; a publication added meanwhile is watched from its next
    park on, and one removed is not watched any more."""
    async with aeronio.connect() as aeron:
        media = udp_media(aeron)

        def watched() -> list[int]:
            return [publication.signals.data.waiters for publication in media.publications]

        bytes_sent = conductor(aeron).system[SystemCounters.BYTES_SENT]

        async def watched_past_a_setup(expected: list[int]) -> None:
            """Watched as `expected` once parked again after a SETUP deadline's wake-up."""
            before = bytes_sent.get()
            await await_until(
                lambda: bytes_sent.get() > before and watched() == expected,
                10,
                lambda: f"watched {watched()}, not {expected}, after a SETUP went out",
            )

        channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|linger=0"
        first = await aeron.add_publication(channel, 1)
        await watched_past_a_setup([1])
        second = await aeron.add_publication(f"aeron:udp?endpoint=127.0.0.1:{free_port()}", 2)
        await watched_past_a_setup([1, 1])
        (kept,) = [p for p in media.publications if p.stream_id == 2]
        await first.close()
        await await_until(  # gone at the driver's next timer (1 s)
            lambda: watched() == [1] and kept.signals.data.waiters == 1,
            10,
            lambda: f"the closed publication still watched: {watched()}",
        )
        await second.close()


@pytest.mark.parametrize("transport", ["ipc", "udp"])
async def test_a_publication_says_not_connected_only_once_it_takes_no_more(transport):
    """The log's connected flag goes down only after the publisher limit came back to the
    producer position: a publisher that reads it down cannot append (its offer says
    NOT_CONNECTED) to a stream nobody reads. A task looks at every turn of the loop the driver
    runs on; over UDP the flag goes down at the timer that finds the receiver gone, which used
    to move the limit only at the next duty cycle."""
    channel = (
        "aeron:ipc?term-length=64k"
        if transport == "ipc"
        else f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    )
    async with aeronio.connect() as a, aeronio.connect() as b:
        subscription = await (a if transport == "ipc" else b).add_subscription(channel, 31)
        publication = await a.add_publication(channel, 31)
        await connected(publication, subscription)
        assert await exchange(publication, subscription, [b"before"], 10) == [b"before"]

        async def first_look_unconnected() -> tuple[int, int]:
            while publication.is_connected:
                await asyncio.sleep(0)
            return publication.position_limit, publication.position

        look = asyncio.create_task(first_look_unconnected())
        await subscription.close()
        async with asyncio.timeout(10):
            limit, position = await look
        assert limit <= position
        assert publication.try_offer(b"nobody") == aeronio.NOT_CONNECTED


async def test_a_stream_whose_last_subscription_closed_leaves_its_endpoint_at_once(monkeypatch):
    """Two streams on one endpoint; the subscription of one closes: its image goes at once
    with its farewell (Aeron's image drains once it has no subscriber), so that stream's
    publisher stops counting the receiver and goes unconnected rather than sending into an
    image nobody reads, while the other stream flows on. Subscribed again, it gets a new image
    at once (no cool-down for a stream subscribed anew). The receiver timeout is made a minute
    here: the farewell alone disconnects (it used to take the timeout, 2 s of offers taken for
    nobody)."""
    monkeypatch.setattr(sender_state, "RECEIVER_TIMEOUT_NS", 60 * 10**9)
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as a, aeronio.connect() as b:
        leaving = await b.add_subscription(channel, 21)
        staying = await b.add_subscription(channel, 22)
        pubs = [await a.add_publication(channel, stream) for stream in (21, 22)]
        await connected(pubs[0], leaving)
        await connected(pubs[1], staying)
        images = udp_media(b).resources.images
        await leaving.close()
        assert [image.stream_id for image in images] == [22]
        await await_until(lambda: not pubs[0].is_connected, 10, "the left stream to disconnect")
        assert pubs[0].try_offer(b"nobody") == aeronio.NOT_CONNECTED
        assert await exchange(pubs[1], staying, [b"on", b"and on"], 10) == [b"on", b"and on"]

        again = await b.add_subscription(channel, 21)
        await connected(pubs[0], again)
        assert await exchange(pubs[0], again, [b"back"], 10) == [b"back"]


async def test_a_udp_subscription_refused_for_want_of_counters_leaves_nothing(monkeypatch):
    """A subscription of a UDP stream with two images whose second position finds the counters
    full is refused, and nothing of it stays: the first image's position for it stayed (an
    orphan no remove could reach, holding that image's consumption back for every other
    subscriber) and its stream on the endpoint's dispatcher (the endpoint never closed)."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.connect() as aeron:
        first = await aeron.add_subscription(channel, 9)
        publications = [await aeron.add_exclusive_publication(channel, 9) for _ in range(2)]
        await await_until(lambda: len(first.images) == 2, 10, "both images")
        media = udp_media(aeron)
        counters = media.services.counters
        position = counters.subscriber_position
        made = []

        def one_left(*args, **kwargs):
            if made:
                raise CountersFullError("counters are full (a test's)")
            made.append(position(*args, **kwargs))
            return made[-1]

        monkeypatch.setattr(counters, "subscriber_position", one_left)
        with pytest.raises(aeronio.DriverError, match="counters are full"):
            await aeron.add_subscription(channel, 9)
        monkeypatch.undo()
        images = [i for i in media.resources.images if i.stream_id == 9]
        assert [[s.subscription_id for s in i.subscribers] for i in images] == [
            [first.registration_id]
        ] * 2
        assert aeron.counters.get_counter_state(made[0].id) == RECORD_RECLAIMED  # freed
        (endpoint,) = media.receive_endpoints.values()
        assert endpoint.dispatcher.streams == {9: 1}
        await first.close()
        for publication in publications:
            await publication.close()
        await await_until(lambda: not media.receive_endpoints, 10, "the endpoint closed")
