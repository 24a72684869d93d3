"""The synchronous per-call paths: `publication.try_offer` and `subscription.poll` with its
handler. `subscription.poll` runs in the core (no Python frame of its own per call); what the
handler sees is exact, whatever the length and wherever the term ends; limits hold across images;
`try_offer` takes any bytes-like object, with an offset and a length checked against it."""

from __future__ import annotations

import asyncio
import dis
import sys

import pytest

import aeronio
from tests.driver.test_async_api import TERM_64K, image_of

MAX_PAYLOAD = 1408 - 32  # aeron:ipc's default MTU less a header


@pytest.fixture
async def aeron():
    async with aeronio.connect() as client:
        yield client


def message(length: int, seed: int) -> bytes:
    return bytes((seed * 31 + i * 7) & 0xFF for i in range(length))


async def offer_polling(pub, sub, data: bytes, handler) -> None:
    """try_offer `data`; while back-pressured, poll (one fragment a call) and let the driver
    move the limit."""
    while pub.try_offer(data) < 0:
        if not sub.poll(handler, 1):
            await asyncio.sleep(0.001)


async def test_poll_runs_no_python_code_but_the_handler(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 40)
    pub = await aeron.add_publication(TERM_64K, 40)
    await image_of(sub)
    assert pub.try_offer(b"x") > 0
    calls = []

    def handler(buffer, header) -> None:
        pass

    def profile(frame, event, arg) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        assert sub.poll(handler, 10) == 1
        assert sub.poll(handler, 10) == 0
    finally:
        sys.setprofile(None)
    assert calls == ["handler"]


async def test_every_length_is_handed_over_exactly_across_term_ends(aeron):
    """Every payload length from 0 to past the MTU, over 64 KiB terms (many rotations, pads),
    polled with varying limits: each unfragmented fragment is the message byte for byte, the
    fragments of a longer one are its consecutive slices, each at most the MTU's payload."""
    sub = await aeron.add_subscription("aeron:ipc", 41)
    pub = await aeron.add_publication(TERM_64K, 41)
    await image_of(sub)
    fragments: list[tuple[bytes, int, int]] = []

    def handler(buffer, header) -> None:
        fragments.append((bytes(buffer), header.flags & 0xC0, header.position))

    lengths = list(range(MAX_PAYLOAD + 100))
    expected = [message(n, n) for n in lengths]
    for data in expected:
        await offer_polling(pub, sub, data, handler)
    limits = [1, 2, 3, 7, 64]
    calls = 0
    while True:
        before = len(fragments)
        limit = limits[calls % len(limits)]
        done = sub.poll(handler, limit)
        calls += 1
        assert done == len(fragments) - before <= limit
        if not done:
            break
    assert [p for _, _, p in fragments] == sorted({p for _, _, p in fragments})
    got, parts = [], []
    for data, flags, _ in fragments:
        assert len(data) <= MAX_PAYLOAD
        if flags == 0xC0:
            assert not parts
            got.append(data)
            continue
        parts.append(data)
        if flags == 0x40:  # END
            got.append(b"".join(parts))
            parts = []
    assert got == expected
    assert sum(1 for _, flags, _ in fragments if flags != 0xC0) > 0
    assert sub.images[0].position == pub.position


async def test_poll_limit_holds_across_images_taken_in_turn(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 42)
    first = await aeron.add_exclusive_publication(TERM_64K, 42)
    second = await aeron.add_exclusive_publication(TERM_64K, 42)
    await image_of(sub, first.session_id)
    await image_of(sub, second.session_id)
    for i in range(3):
        assert first.try_offer(b"a%d" % i) > 0
        assert second.try_offer(b"b%d" % i) > 0
    got: list[bytes] = []

    def handler(buffer, header) -> None:
        got.append(bytes(buffer))

    assert sub.poll(handler, 1) == 1
    assert sub.poll(handler, 1) == 1
    assert sorted(got) == [b"a0", b"b0"]  # one from each image: each call starts one further
    assert sub.poll(handler, 3) == 3
    assert sub.poll(handler, 10) == 1
    assert sub.poll(handler, 10) == 0
    assert sorted(got) == sorted(b"%s%d" % (s, i) for s in (b"a", b"b") for i in range(3))
    assert [m for m in got if m[:1] == b"a"] == [b"a0", b"a1", b"a2"]


async def test_a_subscription_without_images_polls_nothing(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 43)
    assert sub.poll(lambda buffer, header: None, 10) == 0


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
async def test_try_offer_takes_a_slice_of_any_bytes_like_object(aeron, kind):
    sub = await aeron.add_subscription("aeron:ipc", 44)
    pub = await aeron.add_publication(TERM_64K, 44)
    await image_of(sub)
    source = message(300, 5)
    buffer = kind(source)
    assert pub.try_offer(buffer) > 0
    assert pub.try_offer(buffer, 10) > 0
    assert pub.try_offer(buffer, 10, 20) > 0
    assert pub.try_offer(buffer, 300) > 0  # nothing from the end: an empty message
    assert pub.try_offer(buffer, 0, 0) > 0
    with pytest.raises(ValueError, match="offset 301 is outside the buffer of 300 bytes"):
        pub.try_offer(buffer, 301)
    with pytest.raises(ValueError, match="offset -1 is outside the buffer of 300 bytes"):
        pub.try_offer(buffer, -1)
    with pytest.raises(ValueError, match="length 291 at offset 10 overruns the buffer of 300"):
        pub.try_offer(buffer, 10, 291)
    with pytest.raises(ValueError, match="length -1 at offset 0 overruns"):
        pub.try_offer(buffer, 0, -1)
    with pytest.raises(TypeError):
        pub.try_offer("text")
    got: list[bytes] = []
    assert sub.poll(lambda view, header: got.append(bytes(view)), 100) == 5
    assert got == [source, source[10:], source[10:30], b"", b""]


async def test_a_length_whose_index_resizes_the_bytearray_is_read_before_it(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 46)
    pub = await aeron.add_publication(TERM_64K, 46)
    await image_of(sub)
    buffer = bytearray(message(4096, 8))

    class Shrinks:
        def __index__(self) -> int:
            buffer.clear()
            return 4096

    with pytest.raises(ValueError, match="length 4096 at offset 0 overruns the buffer of 0"):
        pub.try_offer(buffer, 0, Shrinks())
    buffer.extend(message(100, 9))
    with pytest.raises(ValueError, match="length 4096 at offset 0 overruns the buffer of 0"):
        await pub.offer(buffer, 0, Shrinks())
    assert sub.poll(lambda view, header: None, 10) == 0


class Bytes(bytearray):
    """A subclass: taken through the buffer protocol, not bytearray's own storage."""


@pytest.mark.parametrize("kind", [bytearray, Bytes])
async def test_a_bytearray_is_copied_at_the_call_and_left_resizable(aeron, kind):
    sub = await aeron.add_subscription("aeron:ipc", 45)
    pub = await aeron.add_publication(TERM_64K, 45)
    await image_of(sub)
    short, long = message(100, 6), message(3 * MAX_PAYLOAD + 17, 7)  # one frame; four fragments
    buffer = kind(short)
    assert pub.try_offer(buffer, 1, 98) > 0
    buffer[:] = long  # resized: nothing of the offer holds the buffer
    assert pub.try_offer(buffer) > 0
    assert await pub.offer(buffer, MAX_PAYLOAD - 1) > 0
    buffer.extend(b"after")
    buffer[0:10] = bytes(10)
    got: list[bytes] = []
    async for received in sub:  # whole messages, the fragmented ones reassembled
        got.append(received.data)
        if len(got) == 3:
            break
    assert got == [short[1:99], long, long[MAX_PAYLOAD - 1 :]]


# Compiled afresh for each publication (exec): a code object's lookups specialise for the types
# they see first, and this test looks at them. Outside the test module: no assertion rewriting.
PER_CALL_LOOP = """
async def calls(pub, sub, handler, first):
    for i in range(first, first + 200):
        if pub.try_offer(i.to_bytes(4, "little")) <= 0 or sub.poll(handler, 1) != 1:
            raise AssertionError(f"message {i} was not offered and polled")
        await pub.offer(b"")
        if sub.poll(handler, 1) != 1:
            raise AssertionError(f"the empty message after {i} was not polled")
"""


async def test_the_per_call_methods_are_found_by_a_specialised_lookup(aeron):
    """A publication and a subscription have no instance dict: with one (a Python subclass of a
    core type gets one CPython 3.12+ never lays out inline) `pub.try_offer(...)`,
    `sub.poll(...)` and `pub.offer(...)` stay generic lookups, about 100 ns each on 3.12."""
    sub = await aeron.add_subscription("aeron:ipc", 42)
    pubs = [
        await aeron.add_publication(TERM_64K, 42),
        await aeron.add_exclusive_publication(TERM_64K, 42),
    ]
    await image_of(sub)
    assert [hasattr(thing, "__dict__") for thing in (sub, *pubs)] == [False, False, False]
    got: list[bytes] = []

    def handler(buffer, header) -> None:
        got.append(bytes(buffer))

    for n, pub in enumerate(pubs):
        namespace: dict = {}
        exec(PER_CALL_LOOP, namespace)
        await namespace["calls"](pub, sub, handler, n * 200)
        generic = [
            (i.opname, i.argval)
            for i in dis.get_instructions(namespace["calls"], adaptive=True)
            if i.argval in ("try_offer", "poll", "offer")
            and i.opname in ("LOAD_ATTR", "LOAD_METHOD")
        ]
        assert generic == [], type(pub).__name__
    assert got == [m for i in range(400) for m in (i.to_bytes(4, "little"), b"")]
