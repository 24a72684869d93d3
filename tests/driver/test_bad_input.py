"""Bad input gets a clear exception type and a message naming what is wrong; nothing is
silently dropped or truncated."""

from __future__ import annotations

import array
import asyncio
import os
import re
from fractions import Fraction

import pytest

import aeronio
from aeronio.driver.context import DriverContext
from tests.support.ports import free_port

TERM_64K = "aeron:ipc?term-length=64k"


@pytest.fixture
async def aeron():
    async with aeronio.connect() as client:
        yield client


async def connected(aeron, stream_id: int, channel: str = TERM_64K, exclusive: bool = False):
    sub = await aeron.add_subscription("aeron:ipc", stream_id)
    add = aeron.add_exclusive_publication if exclusive else aeron.add_publication
    pub = await add(channel, stream_id)

    async def wait():
        while not pub.is_connected or not sub.images:
            await asyncio.sleep(0.001)

    await asyncio.wait_for(wait(), 5)
    return pub, sub


def received(sub) -> list[bytes]:
    got: list[bytes] = []
    assembler = aeronio.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
    while sub.poll(assembler, 100):
        pass
    return got


# -- term length ----------------------------------------------------------------------------


@pytest.mark.parametrize("term_length", [1000, 0, -65536, 32 * 1024, 3 * 65536, 2 * 1024**3])
def test_driver_context_rejects_bad_term_length(term_length):
    with pytest.raises(aeronio.ConfigurationError, match=r"term[-_]length") as info:
        DriverContext.from_options(ipc_term_length=term_length)
    assert str(term_length) in str(info.value)
    with pytest.raises(aeronio.ConfigurationError, match=r"term[-_]length"):
        DriverContext(ipc_term_length=term_length)
    with pytest.raises(aeronio.ConfigurationError, match=r"term[-_]length"):
        aeronio.MediaDriver.launch(ipc_term_length=term_length)


async def test_connect_rejects_bad_term_length():
    with pytest.raises(aeronio.ConfigurationError, match=r"term[-_]length.*1000|1000.*term"):
        async with aeronio.connect(ipc_term_length=1000):
            pass


@pytest.mark.parametrize("value", ["1000", "0", "96k", "2g", "abc", "64x"])
async def test_channel_rejects_bad_term_length(aeron, value):
    channel = f"aeron:ipc?term-length={value}"
    for add in (aeron.add_publication, aeron.add_exclusive_publication, aeron.add_subscription):
        with pytest.raises(aeronio.ChannelUriError, match="term-length") as info:
            await add(channel, 1)
        assert value in str(info.value)


async def test_term_length_bounds_are_accepted(aeron):
    for value, length in [("64k", 65536), ("1m", 1 << 20)]:
        pub = await aeron.add_exclusive_publication(f"aeron:ipc?term-length={value}", 2)
        assert pub.term_length == length
        assert pub.max_message_length == length // 8


async def test_mtu_too_large_for_term_is_refused_naming_mtu(aeron):
    with pytest.raises(aeronio.AeronError, match="mtu"):
        await aeron.add_publication("aeron:ipc?term-length=64k|mtu=16384", 3)
    with pytest.raises(aeronio.ConfigurationError, match="mtu"):
        DriverContext.from_options(ipc_mtu=1000)


async def test_a_shared_log_of_another_initial_term_id_or_start_is_refused(aeron):
    """It used to be joined, at its own positions: those of the init-term-id asked for were
    not its, nor was the position asked for; the same start joins it (Aeron's
    confirmPublicationMatch)."""
    first = await aeron.add_publication("aeron:ipc?init-term-id=5|term-id=6|term-offset=64", 4)
    assert (first.initial_term_id, first.position) == (5, 64 * 1024 * 1024 + 64)
    other = "aeron:ipc?init-term-id=7|term-id=7|term-offset=0"
    differs = "^init-term-id=7 differs from the existing publication's init-term-id=5 on stream 4$"
    with pytest.raises(aeronio.DriverError, match=differs):
        await aeron.add_publication(other, 4)
    with pytest.raises(aeronio.DriverError, match=r"term-id=5 term-offset=0 \(position 0\)"):
        await aeron.add_publication("aeron:ipc?init-term-id=5|term-id=5|term-offset=0", 4)
    same = await aeron.add_publication("aeron:ipc?init-term-id=5|term-id=6|term-offset=64", 4)
    assert (same.session_id, same.position) == (first.session_id, first.position)


# -- stream ids -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream_id", [2**31, -(2**31) - 1, "x", 1.0, None, True, b"1"])
async def test_invalid_stream_id(aeron, stream_id):
    for add in (aeron.add_publication, aeron.add_exclusive_publication, aeron.add_subscription):
        with pytest.raises(aeronio.ConfigurationError, match="stream_id") as info:
            await add("aeron:ipc", stream_id)
        assert repr(stream_id) in str(info.value)
    # Nothing was registered by the refused calls.
    assert not aeron._conductor._subscriptions and not aeron._conductor._publications


@pytest.mark.parametrize("stream_id", [2**31 - 1, -(2**31), 0])
async def test_stream_id_bounds_are_accepted(aeron, stream_id):
    pub, sub = await connected(aeron, stream_id)
    assert await pub.offer(b"edge") > 0
    assert received(sub) == [b"edge"]
    assert sub.images[0].stream_id == stream_id


# -- message sizes ----------------------------------------------------------------------------


async def test_oversized_message_names_its_length(aeron):
    pub, sub = await connected(aeron, 10)
    assert pub.max_message_length == 8192
    too_big = bytes(8193)
    with pytest.raises(aeronio.MessageTooLargeError, match="8193") as info:
        pub.try_offer(too_big)
    assert "8192" in str(info.value)  # and the limit, and the options that raise it
    assert "term-length=" in str(info.value)
    named = re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", str(info.value).split("driver's")[1])
    assert named and all(hasattr(DriverContext, option) for option in named), named
    with pytest.raises(aeronio.MessageTooLargeError, match="8193"):
        await pub.offer(too_big)
    with pytest.raises(aeronio.MessageTooLargeError, match="8193"):
        pub.try_offer(bytes(10_000), 0, 8193)
    with pytest.raises(aeronio.MessageTooLargeError, match="nothing was appended"):
        await pub.offer_batch([b"ok", too_big])  # checked before anything is appended
    items = array.array("i", range(2049))  # 2049 items, 8196 bytes
    with pytest.raises(aeronio.MessageTooLargeError, match="message 1 of 8196 bytes"):
        await pub.offer_batch([b"ok", items])  # by its bytes, not its items
    assert isinstance(info.value, ValueError)
    # The max itself goes through, whole.
    biggest = bytes(range(256)) * 32
    assert await pub.offer(biggest) > 0
    assert received(sub) == [biggest]


async def test_oversized_message_on_exclusive_publication(aeron):
    pub, sub = await connected(aeron, 11, exclusive=True)
    position = pub.position
    with pytest.raises(aeronio.MessageTooLargeError, match="8193"):
        pub.try_offer(bytes(8193))
    assert pub.position == position
    assert received(sub) == []


async def test_claim_over_max_payload(aeron):
    pub, sub = await connected(aeron, 12, "aeron:ipc?term-length=64k|mtu=1408")
    assert pub.max_payload_length == 1376
    with pytest.raises(aeronio.MessageTooLargeError, match="1377") as info:
        pub.try_claim(1377)
    assert "1376" in str(info.value)
    with pytest.raises(aeronio.MessageTooLargeError, match="1377"):
        async with pub.claim(1377):
            pass
    with pytest.raises(aeronio.MessageTooLargeError):
        pub.try_claim(-1)
    claim = pub.try_claim(1376)
    claim.buffer[:] = b"z" * 1376
    claim.commit()
    assert received(sub) == [b"z" * 1376]


async def test_claim_used_after_commit(aeron):
    pub, _ = await connected(aeron, 13)
    claim = pub.try_claim(8)
    claim.commit()
    with pytest.raises(aeronio.ClaimError):
        claim.buffer  # noqa: B018
    with pytest.raises(aeronio.ClaimError):
        claim.commit()
    with pytest.raises(aeronio.ClaimError):
        claim.abort()


# -- offset / length ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "length", "named"),
    [
        (-1, None, "offset"),
        (11, None, "offset"),
        (0, 11, "length"),
        (5, 6, "length"),
        (0, -1, "length"),
        (10, 1, "length"),
    ],
)
async def test_offset_and_length_outside_the_buffer(aeron, offset, length, named):
    pub, sub = await connected(aeron, 14)
    buffer = b"0123456789"
    with pytest.raises(ValueError, match=named):
        pub.try_offer(buffer, offset, length)
    with pytest.raises(ValueError, match=named):
        await pub.offer(buffer, offset, length)
    assert received(sub) == []


@pytest.mark.parametrize(("offset", "length"), [(1, 2**63 - 1), (5, 2**63 - 3)])
async def test_a_length_that_overflows_past_the_offset_overruns_the_buffer(aeron, offset, length):
    """Not a message too large: offset + length was computed, and wrapped round."""
    pub, sub = await connected(aeron, 17)
    overruns = f"^length {length} at offset {offset} overruns the buffer of 10 bytes$"
    with pytest.raises(ValueError, match=overruns):
        pub.try_offer(b"0123456789", offset, length)
    assert received(sub) == []


async def test_offset_and_length_inside_the_buffer(aeron):
    pub, sub = await connected(aeron, 15)
    buffer = bytearray(b"0123456789")
    assert pub.try_offer(buffer, 2, 3) > 0
    assert pub.try_offer(memoryview(buffer), 10) > 0  # empty message at the end
    assert await pub.offer(buffer, 7) > 0
    assert received(sub) == [b"234", b"", b"789"]


async def test_non_buffer_message_is_a_type_error(aeron):
    pub, sub = await connected(aeron, 16)
    with pytest.raises(TypeError):
        pub.try_offer("text is not bytes")
    with pytest.raises(TypeError):
        pub.try_offer(12345)
    assert received(sub) == []


# -- closed publications ------------------------------------------------------------------------


@pytest.mark.parametrize("exclusive", [False, True])
async def test_offer_on_closed_publication(aeron, exclusive):
    pub, sub = await connected(aeron, 17, exclusive=exclusive)
    await pub.offer(b"last")
    await pub.close()
    assert pub.is_closed
    assert pub.try_offer(b"x") == aeronio.CLOSED
    assert pub.try_claim(4) == aeronio.CLOSED
    assert pub.try_offer_batch([b"x"]) == aeronio.CLOSED
    with pytest.raises(aeronio.PublicationClosedError, match=str(pub.registration_id)):
        await pub.offer(b"x")
    with pytest.raises(aeronio.PublicationClosedError):
        await pub.offer(b"x", timeout=1)
    with pytest.raises(aeronio.PublicationClosedError):
        await pub.offer_batch([b"x"])
    with pytest.raises(aeronio.PublicationClosedError):
        async with pub.claim(4):
            pass
    await pub.close()  # idempotent
    assert received(sub) == [b"last"]


async def test_publications_are_closed_with_their_client():
    async with aeronio.connect() as aeron:
        pub = await aeron.add_publication(TERM_64K, 18)
    assert pub.try_offer(b"x") == aeronio.CLOSED
    with pytest.raises(aeronio.AeronError):
        await aeron.add_publication(TERM_64K, 18)


# -- channels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "named"),
    [
        ("aeron:ipc?bogus-key=1", "bogus-key"),
        ("aeron:ipc?term-length=64k|frobnicate=yes", "frobnicate"),
        ("aeron:ipc?endpoint=localhost:40123", "endpoint"),
        ("aeron:ipc?mtu=1000", "mtu"),
        ("aeron:ipc?linger=forever", "linger"),
        ("aeron:ipc?sparse=maybe", "sparse"),
        ("aeron:ipc?session-id=abc", "session-id"),
        ("aeron:ipc?tags=1,abc", "tags"),
        ("aeron:ipc?tags=1,2,3", "tags"),
        (f"aeron:ipc?tags={2**63}", "tags"),
        ("aeron:ipc?term-id=5", "init-term-id"),
        ("aeron:tcp", "tcp"),
        ("ipc", "aeron:"),
        ("aeron:ipc?", "empty"),
        ("aeron:ipc?term-length", "term-length"),
    ],
)
async def test_bad_channel_names_the_fault(aeron, channel, named):
    for add in (aeron.add_publication, aeron.add_exclusive_publication, aeron.add_subscription):
        with pytest.raises(aeronio.ChannelUriError, match=re.escape(named)):
            await add(channel, 1)
    assert not aeron._conductor._subscriptions and not aeron._conductor._publications


async def test_channel_must_be_a_string(aeron):
    with pytest.raises(aeronio.ChannelUriError, match="str"):
        await aeron.add_publication(b"aeron:ipc", 1)


@pytest.mark.parametrize("name", ["available_image", "unavailable_image"])
async def test_an_image_handler_that_is_not_callable_is_refused_naming_it(aeron, name):
    """Before: the subscription was made, and each image's event logged a TypeError while the
    handler never ran."""
    with pytest.raises(aeronio.ConfigurationError, match=f"{name} 'x' is not callable"):
        await aeron.add_subscription("aeron:ipc", 1, **{name: "x"})
    assert not aeron._conductor._subscriptions


async def test_bad_destination_and_rejection_arguments_are_refused_naming_them(aeron):
    """Before: an AttributeError (reason 123), a TypeError (None), a struct.error ("x"), five
    NUL bytes sent to the driver as a channel (5), a bytes channel accepted."""
    control = f"127.0.0.1:{free_port()}"
    pub = await aeron.add_publication(f"aeron:udp?control={control}|control-mode=manual", 1)
    sub = await aeron.add_subscription("aeron:udp?control-mode=manual", 2)
    for bad in (5, None, b"aeron:udp?endpoint=127.0.0.1:40123"):
        for owner in (pub, sub):
            with pytest.raises(aeronio.ChannelUriError, match="str"):
                await owner.add_destination(bad)
    with pytest.raises(aeronio.ConfigurationError, match="registration_id"):
        await pub.remove_destination_by_id("x")
    ipc_sub = await aeron.add_subscription("aeron:ipc", 3)
    await aeron.add_publication("aeron:ipc", 3)
    await ipc_sub.wait_connected(10)
    (image,) = ipc_sub.images
    with pytest.raises(aeronio.ConfigurationError, match="reason must be a str, not int"):
        await image.reject(123)
    assert ipc_sub.images == (image,)  # nothing was sent: the image stays


async def test_calls_on_a_closed_client_or_publication_say_it_is_closed():
    """Before: driver_pid an AttributeError (the cnc.dat views gone), wait_sent a ValueError
    (the counters closed)."""
    async with aeronio.connect() as client:
        pub = await client.add_publication("aeron:ipc", 4)
    with pytest.raises(aeronio.AeronError, match="the Aeron client is closed"):
        _ = client.driver_pid
    with pytest.raises(aeronio.PublicationClosedError):
        await pub.wait_sent()


# -- driver options -----------------------------------------------------------------------------


def test_unknown_driver_option_is_named():
    with pytest.raises(aeronio.ConfigurationError, match="no_such_option"):
        DriverContext.from_options(no_such_option=1)
    with pytest.raises(aeronio.ConfigurationError, match="ipc_term_lenght"):
        aeronio.MediaDriver.launch(ipc_term_lenght=65536)  # a typo is not silently ignored


async def test_unknown_driver_option_on_connect():
    with pytest.raises(aeronio.ConfigurationError, match="bogus_option"):
        async with aeronio.connect(bogus_option=True):
            pass


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("ipc_term_length", "64k"),
        ("publication_linger_ns", -1),
        ("publication_unblock_timeout_ns", "soon"),
        ("max_counters", 1),
        ("ipc_publication_term_window_length", -5),
    ],
)
def test_bad_driver_option_value_is_named(option, value):
    with pytest.raises(aeronio.ConfigurationError, match=option.replace("ipc_", "")):
        DriverContext.from_options(**{option: value})


# -- client options -----------------------------------------------------------------------------

NAN = float("nan")


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: aeronio.BusySpinIdleStrategy(0), "yield_every 0"),  # was ZeroDivisionError
        (lambda: aeronio.BusySpinIdleStrategy(-1), "yield_every -1"),  # was a frozen loop
        (lambda: aeronio.BackoffIdleStrategy(max_spins=-1), "max_spins -1"),
        (lambda: aeronio.BackoffIdleStrategy(max_yields=2.5), "max_yields 2.5"),
        (lambda: aeronio.BackoffIdleStrategy(max_park_s=NAN), "max_park_s nan"),
        (lambda: aeronio.BackoffIdleStrategy(min_park_s=0.1), "min_park_s 0.1 is above"),
        (lambda: aeronio.NotifyingIdleStrategy(max_yields="50"), "max_yields '50'"),
        (lambda: aeronio.NotifyingIdleStrategy(fallback_s=NAN), "fallback_s nan"),
        (lambda: aeronio.NotifyingIdleStrategy(fallback_s=0), "fallback_s 0"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_bad_idle_strategy_arguments_are_named(make, named):
    with pytest.raises(aeronio.ConfigurationError, match="^" + re.escape(named)):
        make()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"driver_timeout_s": 0}, "driver_timeout_s 0 must be a finite number of seconds above"),
        ({"driver_timeout_s": -1}, "driver_timeout_s -1 must be"),
        ({"driver_timeout_s": NAN}, "driver_timeout_s nan must be"),  # was a hang
        ({"driver_timeout_s": "10"}, "driver_timeout_s '10' must be"),
        ({"idle_strategy": None}, "idle_strategy None has no idle(attempt, park) method"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
async def test_bad_client_options_are_named(aeron, options, named):
    with pytest.raises(aeronio.ConfigurationError, match="^" + re.escape(named)):
        await asyncio.wait_for(aeronio.connect(aeron.driver_dir, **options), 10)


async def test_numbers_of_every_kind_are_taken_as_timeouts_and_counts(aeron):
    """numpy's integers and floats, and fractions, are numbers: `timeout` took them where
    `driver_timeout_s` and the idle strategies' counts refused them as no number."""
    np = pytest.importorskip("numpy")
    spin = aeronio.BusySpinIdleStrategy(np.int64(7))
    backoff = aeronio.BackoffIdleStrategy(max_spins=np.int32(3), max_park_s=np.float32(0.01))
    aeronio.NotifyingIdleStrategy(max_yields=np.uint8(5), fallback_s=Fraction(1, 10))
    assert (spin.yield_every, backoff.max_spins, backoff.max_park_s) == (7, 3, np.float32(0.01))
    async with aeronio.connect(
        aeron.driver_dir, driver_timeout_s=np.float64(5), idle_strategy=backoff
    ) as client:
        pub = await client.add_publication("aeron:ipc", 20)
        sub = await client.add_subscription("aeron:ipc", 20)
        await pub.wait_connected(np.int64(10))
        assert await pub.offer(b"numpy", timeout=np.float64(10)) > 0
        await sub.wait_connected(Fraction(10))
        assert (await sub.receive()).data == b"numpy"


@pytest.mark.parametrize("timeout", [NAN, "1"], ids=["nan", "str"])
async def test_a_wait_with_a_timeout_that_is_no_number_is_refused(aeron, timeout):
    """A NaN timeout never came due: each of these waited for ever; "1" was a TypeError about
    adding a float and a str."""
    pub = await aeron.add_publication(TERM_64K, 18)  # no subscriber: every wait waits
    sub = await aeron.add_subscription("aeron:ipc", 19)

    async def claim():
        async with pub.claim(8, timeout=timeout):
            pass

    waits = (
        lambda: pub.offer(b"x", timeout=timeout),
        lambda: pub.offer_batch([b"x"], timeout=timeout),
        claim,
        lambda: pub.wait_connected(timeout),
        lambda: sub.wait_connected(timeout),
    )
    named = f"^timeout {re.escape(repr(timeout))} must be a number of seconds or None$"
    for wait in waits:
        with pytest.raises(aeronio.ConfigurationError, match=named):
            await asyncio.wait_for(wait(), 10)
    # refused too where no wait needs it (an offer with room took any timeout)
    pub, reader = await connected(aeron, 20, "aeron:ipc")  # what the offers above now use
    for wait in waits[:3]:
        with pytest.raises(aeronio.ConfigurationError, match=named):
            await asyncio.wait_for(wait(), 10)
    assert pub.position == 0
    await reader.close()


# -- drivers ------------------------------------------------------------------------------------


async def test_connect_to_a_dir_with_no_driver(tmp_path):
    missing = tmp_path / "no-driver-here"
    with pytest.raises(aeronio.DriverNotFoundError, match=re.escape(str(missing))):
        await aeronio.connect(dir=missing, driver_timeout_s=0.2)  # how long it waits for one
    with pytest.raises(aeronio.DriverNotFoundError):
        async with aeronio.connect(dir=str(missing), driver_timeout_s=0.2):
            pass
    assert not os.path.exists(missing)  # looking did not create anything


async def test_connect_to_an_explicit_driver_and_a_second_driver_on_its_dir(tmp_path):
    driver_dir = tmp_path / "driver"
    async with aeronio.MediaDriver.launch(dir=driver_dir, ipc_term_length=65536) as driver:
        async with aeronio.connect(dir=driver.dir) as aeron:
            pub, sub = await connected(aeron, 20, "aeron:ipc")
            assert pub.term_length == 65536
        with pytest.raises(aeronio.ConfigurationError, match="already runs"):
            await aeronio.MediaDriver.launch(dir=driver_dir).start()
    with pytest.raises(aeronio.DriverNotFoundError):
        await aeronio.connect(dir=driver_dir, driver_timeout_s=0.5)


# -- max position -------------------------------------------------------------------------------


@pytest.mark.parametrize("exclusive", [False, True])
async def test_max_position_exceeded(aeron, exclusive):
    # Start the log 256 bytes before the end of its positions (term length x 2^31).
    channel = "aeron:ipc?term-length=64k|init-term-id=0|term-id=2147483647|term-offset=65280"
    pub, sub = await connected(aeron, 21, channel, exclusive)
    max_position = pub.term_length << 31
    assert pub.position == max_position - 256
    positions = [pub.try_offer(b"m%d" % i) for i in range(4)]
    assert positions[-1] == max_position
    assert pub.try_offer(b"over") == aeronio.MAX_POSITION_EXCEEDED
    with pytest.raises(aeronio.MaxPositionExceededError, match=str(max_position)):
        await asyncio.wait_for(pub.offer(b"over"), 5)
    assert received(sub) == [b"m0", b"m1", b"m2", b"m3"]
