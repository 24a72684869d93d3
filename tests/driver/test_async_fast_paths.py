"""The fast paths of the awaitable API (cython_core/awaitables.pxi): `await offer` and `async for`
complete without suspending when space or data is there, fall back to waiting when not, and keep
every rule of the slow path; the in-place forms (poll's fragment views, messages(copy=False))
keep their lifetime rules."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dis
import gc
import inspect
import struct
import sys
import sysconfig
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import aeronio
from aeronio import _core
from aeronio.driver import storage
from tests.driver.test_async_api import (
    TERM_64K,
    fill_window,
    first_messages,
    image_of,
)
from tests.support.procs import await_until

pytestmark = pytest.mark.loops  # awaitables that complete without suspending the loop


@pytest.fixture
async def aeron():
    async with aeronio.connect() as client:
        yield client


@contextlib.contextmanager
def loop_turns(interval_ns: int):
    """The loop's turn interval (awaitables.pxi) set to `interval_ns` meanwhile: 0 gives the
    loop a turn every LOOP_TURN_CALLS fast-path calls, 2**62 never."""
    before = _core._set_loop_turn_ns(interval_ns)
    try:
        yield
    finally:
        _core._set_loop_turn_ns(before)


@pytest.fixture(autouse=True)
def no_loop_turns():
    """The tests here count suspensions: no turns of the loop but where they are tested."""
    with loop_turns(2**62):
        yield


async def connected_pair(aeron, stream: int, channel: str = TERM_64K):
    sub = await aeron.add_subscription("aeron:ipc", stream)
    pub = await aeron.add_publication(channel, stream)
    image = await image_of(sub)
    return pub, sub, image


async def others_ran_during(coroutine) -> tuple[object, int]:
    """(the result of awaiting `coroutine`, how many times another task ran meanwhile)."""
    steps = 0
    stop = False

    async def other():
        nonlocal steps
        while not stop:
            steps += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    steps = 0
    try:
        result = await coroutine
    finally:
        stop = True
        await task
    return result, steps


# -- await offer ----------------------------------------------------------------------------


async def test_offer_with_space_completes_without_suspending(aeron):
    pub, sub, _ = await connected_pair(aeron, 1)
    awaitable = pub.offer(b"now")
    assert not inspect.iscoroutine(awaitable)  # no coroutine object on the fast path
    assert asyncio.iscoroutine(awaitable)  # ...yet create_task and friends take it
    assert pub.position == 64  # the attempt was made when called

    async def offers():
        return [await pub.offer(b"x" * 10) for _ in range(100)]

    positions, others = await others_ran_during(offers())
    assert positions == [64 + 64 * (i + 1) for i in range(100)]
    assert others == 0  # never suspended
    assert await awaitable == 64
    assert await asyncio.create_task(pub.offer(b"task")) == 64 * 102
    assert await asyncio.wait_for(pub.offer(b"wait_for"), 1) == 64 * 103
    assert len([m async for m in first_messages(sub, 103)]) == 103


async def test_back_pressured_offer_waits_and_cancels_cleanly(aeron):
    pub, sub, image = await connected_pair(aeron, 2)
    appender_waiters = pub._appender.consumed_doorbell.waiters
    sent = await fill_window(pub, b"m" * 100)
    position = pub.position
    awaitable = pub.offer(b"late")
    assert inspect.iscoroutine(awaitable)  # refused: the waiting coroutine
    task = asyncio.create_task(awaitable)
    await asyncio.sleep(0.05)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pub.position == position  # nothing appended, nothing half-written

    consumed = [m.data async for m in first_messages(sub, sent)]
    assert consumed == [b"m" * 100] * sent
    assert await asyncio.wait_for(pub.offer(b"after"), 5) == position + 64
    assert (await sub.receive()).data == b"after"
    await await_until(
        lambda: pub._appender.consumed_doorbell.waiters == appender_waiters,
        5.0,
        "the publication's waiters released",
    )
    assert image.signals.data.waiters == 0


async def test_a_kept_awaitable_is_never_reused(aeron):
    pub, sub, _ = await connected_pair(aeron, 3)
    first = pub.offer(b"one")
    second = pub.offer(b"two")  # `first` is still held: a new one
    assert first is not second
    assert (await first, await second) == (64, 128)
    a, b = sub.receive(), sub.receive()
    assert a is not b
    assert ((await a).data, (await b).data) == (b"one", b"two")


def test_a_completed_offer_returns_its_position_through_am_send(aeron_loop_free_offer):
    """PyIter_Send (am_send: how CPython 3.10/3.11 `await`, and C code on any version, drive an
    awaitable) gives the position as PYGEN_RETURN, with no exception."""
    awaitable, position = aeron_loop_free_offer
    send = ctypes.pythonapi.PyIter_Send
    send.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p)]
    send.restype = ctypes.c_int
    result = ctypes.c_void_p()
    assert send(awaitable, None, ctypes.byref(result)) == 0  # PYGEN_RETURN
    assert ctypes.cast(result, ctypes.py_object).value == position


@pytest.fixture
def aeron_loop_free_offer():
    """(an offer's completed awaitable, its position), made on a loop that is then closed."""

    async def make():
        async with aeronio.connect() as client:
            pub, _, _ = await connected_pair(client, 12)
            awaitable = pub.offer(b"sent")
            return awaitable, pub.position

    return asyncio.run(make())


@contextlib.contextmanager
def stop_iterations_raised():
    """The ids of the StopIterations raised meanwhile (seen by sys.monitoring's RAISE)."""
    monitoring = sys.monitoring
    tool = next(i for i in range(6) if monitoring.get_tool(i) is None)
    ids: list[int] = []

    def on_raise(code, offset, exception):
        if type(exception) is StopIteration:
            ids.append(id(exception))

    monitoring.use_tool_id(tool, "test_async_fast_paths")
    monitoring.register_callback(tool, monitoring.events.RAISE, on_raise)
    monitoring.set_events(tool, monitoring.events.RAISE)
    try:
        yield ids
    finally:
        monitoring.set_events(tool, 0)
        monitoring.register_callback(tool, monitoring.events.RAISE, None)
        monitoring.free_tool_id(tool)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 awaits through am_send")
async def test_completed_awaits_raise_one_reused_stop_iteration(aeron):
    """From 3.12 `await` takes a completed awaitable's value from a StopIteration: the core
    raises the same one each time (a new one per await costs as much as the rest of it)."""
    pub, sub, _ = await connected_pair(aeron, 13)
    blockers = []  # each takes the memory a freed StopIteration left: a new one gets a new id
    with stop_iterations_raised() as ids:
        for i in range(20):
            assert await pub.offer(struct.pack("<I", i)) == 64 * (i + 1)
            blockers.append(StopIteration(None))
        messages = aiter(sub)
        for i in range(20):
            assert (await anext(messages)).data == struct.pack("<I", i)
            blockers.append(StopIteration(None))
        for i in range(20):
            pub.try_offer(struct.pack("<I", i))
        views = sub.messages(copy=False)
        for i in range(20):
            assert (await anext(views)).data == struct.pack("<I", i)
            blockers.append(StopIteration(None))
    assert len(ids) == 60 and len(set(ids)) == 1


async def test_a_stop_iteration_somebody_keeps_is_never_changed(aeron):
    """A completed awaitable's StopIteration caught in user code is StopIteration(value), and
    stays so while later awaits complete."""
    pub, _, _ = await connected_pair(aeron, 14)
    with pytest.raises(StopIteration) as first:
        next(pub.offer(b"one"))
    assert (first.value.value, first.value.args) == (64, (64,))
    assert [await pub.offer(b"x") for _ in range(3)] == [128, 192, 256]
    with pytest.raises(StopIteration) as second:
        next(pub.offer(b"two"))
    assert second.value is not first.value
    assert (first.value.value, first.value.args) == (64, (64,))
    assert (second.value.value, second.value.args) == (320, (320,))
    assert first.value.__traceback__ is not None and second.value.__context__ is None


# -- async for ------------------------------------------------------------------------------


async def test_async_for_completes_without_suspending_while_messages_are_there(aeron):
    pub, sub, _ = await connected_pair(aeron, 4)
    for i in range(300):
        assert pub.try_offer(struct.pack("<I", i)) > 0

    async def read_all():
        return [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, 300)]

    got, others = await others_ran_during(read_all())
    assert got == list(range(300))
    assert others == 0
    waiting = sub.__aiter__().__anext__()
    assert inspect.iscoroutine(waiting)  # nothing there: it waits
    waiting.close()
    pub.try_offer(b"x")
    assert not inspect.iscoroutine(sub.__aiter__().__anext__())


async def test_message_is_its_last_fragments_header(aeron):
    pub, sub, _ = await connected_pair(aeron, 5)
    payload = bytes(range(256)) * 20  # five fragments at the default mtu
    end = await pub.offer(payload)
    message = await sub.receive()
    assert isinstance(message, _core.Header)
    assert message.header is message
    assert message.data == payload
    assert message.position == end
    assert message.session_id == pub.session_id and message.stream_id == 5
    assert message.flags & 0x40  # the END fragment's header
    copied = message.copy()
    assert type(copied) is _core.Header and copied.to_bytes() == message.to_bytes()


def read_data(messages: list) -> list:
    out = []
    for message in messages:  # not a comprehension: its own code object before 3.12
        out.append(message.data)
    return out


async def test_message_data_is_a_slot_the_interpreter_specializes(aeron):
    """`message.data` is a read-only member slot (aeronio_cpython.h, "Member slots"), which
    the adaptive interpreter reads with LOAD_ATTR_SLOT; Cython's own attribute (a getset
    descriptor) stays a generic lookup, about 22 ns on 3.12."""
    pub, sub, _ = await connected_pair(aeron, 6)
    payloads = [i.to_bytes(4, "little") * (1 + i % 9) for i in range(100)]
    for payload in payloads:
        await pub.offer(payload)
    messages = [await sub.receive() for _ in payloads]
    for _ in range(100):  # past the interpreter's warm-up of the function's instructions
        assert read_data(messages) == payloads
    loads = [
        i.opname
        for i in dis.get_instructions(read_data, adaptive=True)
        if i.argval == "data" and i.opname.startswith("LOAD_ATTR")
    ]
    assert loads == ["LOAD_ATTR_SLOT"]
    with pytest.raises(AttributeError):
        messages[0].data = b"other"
    assert messages[0].data == payloads[0]


async def test_batches_yield_what_one_poll_found(aeron):
    pub, sub, _ = await connected_pair(aeron, 6)
    for i in range(10):
        pub.try_offer(struct.pack("<I", i))
    iterator = sub.batches(fragment_limit=4)
    batches = [await anext(iterator) for _ in range(3)]
    assert [[struct.unpack("<I", m.data)[0] for m in b] for b in batches] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9],
    ]
    waiting = asyncio.create_task(anext(iterator))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    pub.try_offer(b"late")
    assert [m.data for m in await asyncio.wait_for(waiting, 5)] == [b"late"]
    with pytest.raises(ValueError, match="fragment_limit"):
        sub.batches(fragment_limit=0)


async def test_views_and_batches_reuse_one_completed_unless_it_is_kept(aeron):
    """Like await offer and async for, each step of messages(copy=False) and batches() that
    finds data hands out its iterator's one Completed again once the await that took it let it
    go, and a new one while somebody still holds it."""
    pub, sub, _ = await connected_pair(aeron, 13)
    for i in range(6):
        assert pub.try_offer(struct.pack("<I", i)) > 0
    for iterator in (sub.messages(copy=False), sub.batches(fragment_limit=1)):
        step = iterator.__anext__()
        await step
        address = id(step)
        del step
        # Had the step been let go, the allocations below would take its memory.
        fillers = [pub.offer(b"f") for _ in range(100)]
        again = iterator.__anext__()
        assert id(again) == address
        kept = iterator.__anext__()  # `again` is still held: a new one
        assert kept is not again
        values = [await again, await kept]
        assert values[0] is not None and values[1] is not None
        del fillers, again, kept


async def test_closing_the_subscription_ends_every_form(aeron):
    _, sub, _ = await connected_pair(aeron, 7)
    loops = [sub, sub.messages(copy=False), sub.batches()]

    async def run(loop):
        return [m async for m in loop]

    tasks = [asyncio.create_task(run(loop)) for loop in loops]
    await asyncio.sleep(0.02)
    await sub.close()
    assert await asyncio.wait_for(asyncio.gather(*tasks), 5) == [[], [], []]


# -- the loop's turn ------------------------------------------------------------------------

# The fast paths look at the clock (every LOOP_TURN_CALLS calls at most) and give the loop a
# turn (yield once, then do the work) when it had none from their publication or subscription
# for the interval. At interval 0 (tests) a turn comes at the first call and every
# LOOP_TURN_CALLS calls after it. (The default interval, against a driver's liveness timeout:
# tests/processes/test_driver_processes.py.)
TERM_1M = "aeron:ipc?term-length=1048576"  # a window of 8192 of the messages below
EVERY = 256  # awaitables.pxi's LOOP_TURN_CALLS


def numbered(i: int) -> bytes:
    return struct.pack("<I", i)


async def test_await_offer_gives_the_loop_a_turn_every_so_many_calls(aeron):
    pub, sub, _ = await connected_pair(aeron, 41, TERM_1M)

    async def offers():
        return [await pub.offer(numbered(i)) for i in range(4 * EVERY)]

    with loop_turns(0):
        positions, others = await others_ran_during(offers())
    assert positions == [64 * (i + 1) for i in range(4 * EVERY)]
    assert others == 4
    got = [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, 4 * EVERY)]
    assert got == list(range(4 * EVERY))


@pytest.mark.parametrize("form", ["copy", "views", "batches", "anew"])
async def test_async_for_gives_the_loop_a_turn_every_so_many_steps(aeron, form):
    """Each form of the iterators, and iterators made anew for each step (`anext(sub.batches())`,
    `anext(sub.messages(copy=False))` in turn: the subscription counts the steps of them all)."""
    pub, sub, _ = await connected_pair(aeron, 42, TERM_1M)
    for i in range(4 * EVERY):
        assert pub.try_offer(numbered(i)) > 0
    kept = {"copy": sub, "views": sub.messages(copy=False), "batches": sub.batches(1)}

    def iterator(step: int):
        if form != "anew":
            return kept[form]
        return sub.messages(copy=False) if step % 2 else sub.batches(fragment_limit=1)

    async def read_all():
        got = []
        for step in range(4 * EVERY):
            taken = await anext(iterator(step))
            for message in taken if isinstance(taken, list) else [taken]:
                got.append(struct.unpack("<I", message.data)[0])
        return got

    with loop_turns(0):
        got, others = await others_ran_during(read_all())
    assert got == list(range(4 * EVERY))
    assert others == 4


async def test_slow_steps_are_looked_at_more_often(aeron):
    """Work between the steps makes the looks at the clock come more often: 40 steps 2 ms apart
    with a 10 ms interval give the loop turns (a look every 256 steps would give none)."""
    pub, sub, _ = await connected_pair(aeron, 46, TERM_1M)
    for i in range(40):
        assert pub.try_offer(numbered(i)) > 0

    async def read_slowly():
        got = []
        async for message in sub:
            got.append(struct.unpack("<I", message.data)[0])
            until = time.monotonic() + 0.002
            while time.monotonic() < until:  # work that holds the loop
                pass
            if len(got) == 40:
                return got

    with loop_turns(10_000_000):
        got, others = await others_ran_during(read_slowly())
    assert got == list(range(40))
    assert others >= 3  # 80 ms or more of steps, a turn every 10 ms or so


async def test_a_closed_subscription_ends_the_loop_at_a_turn(aeron):
    pub, sub, _ = await connected_pair(aeron, 47, TERM_1M)
    assert pub.try_offer(numbered(0)) > 0
    with loop_turns(0):
        first = sub.__anext__()  # the first call turns, then takes
        assert inspect.iscoroutine(first)
        assert struct.unpack("<I", (await first).data)[0] == 0
        for _ in range(EVERY - 1):  # nothing there: the slow path, which waits
            waiting = sub.__anext__()
            assert inspect.iscoroutine(waiting)
            waiting.close()
        at_turn = sub.__anext__()
        await sub.close()
        with pytest.raises(StopAsyncIteration):
            await at_turn


async def test_a_turn_cancelled_did_nothing(aeron):
    """The call that is due a turn returns a coroutine that yields before it offers or takes:
    cancelled there, the message is neither appended nor consumed."""
    pub, sub, _ = await connected_pair(aeron, 43, TERM_1M)
    with loop_turns(0):
        for i in range(EVERY):  # the offers before the turn complete at once, in order
            awaitable = pub.offer(numbered(i))
            if inspect.iscoroutine(awaitable):
                break
            assert await awaitable == 64 * (i + 1)
        assert inspect.iscoroutine(awaitable)  # space was there: the turn
        position = pub.position
        task = asyncio.create_task(awaitable)
        await asyncio.sleep(0)  # the task is in its turn now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pub.position == position  # nothing appended
        offered = i + EVERY
        for j in range(i, offered):
            assert pub.try_offer(numbered(j)) > 0

        taken = []
        for _ in range(EVERY):
            step = sub.__anext__()
            if inspect.iscoroutine(step):
                break
            taken.append(struct.unpack("<I", (await step).data)[0])
        assert inspect.iscoroutine(step) and len(taken) < offered  # data was there: the turn
        task = asyncio.create_task(step)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    rest = [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, offered - len(taken))]
    assert taken + rest == list(range(offered))  # the message due after the turn is still there


async def test_the_waiting_forms_give_the_loop_a_turn_too(aeron):
    """offer_batch (before each part) and claim give the loop its turn when it is due, as offer
    (offer_block looks as offer_batch does)."""
    pub, sub, _ = await connected_pair(aeron, 44, TERM_1M)
    with loop_turns(0):
        end, others = await others_ran_during(pub.offer_batch([numbered(0), numbered(1)]))
        assert (end, others) == (128, 1)

        async def claimed():
            async with pub.claim(4) as buffer:
                buffer[:] = numbered(2)

        assert (await others_ran_during(claimed()))[1] == 1
    with loop_turns(2**62):
        end, others = await others_ran_during(pub.offer_batch([numbered(3)]))
        assert (end, others) == (256, 0)
    got = [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, 4)]
    assert got == [0, 1, 2, 3]


# -- wrapped, cancelled, thrown into ----------------------------------------------------------

# A Completed has done its work when it is returned and never suspends: a task made of it can be
# cancelled only before its first step (as `wait_for(..., 0)` does). Thrown into, it undoes what
# it can, as a coroutine that never ran would have done nothing: the message it took goes back
# among the untaken, in order, and the exception is raised, never swallowed. Closed or let go
# unawaited, its message goes back too. An offer stays appended (awaitables.pxi).


def task_cancelled_before_it_ran(awaitable) -> asyncio.Future:
    task = asyncio.ensure_future(awaitable)
    task.cancel()
    return task


async def test_an_offer_cancelled_before_it_ran_was_appended_all_the_same(aeron):
    pub, sub, _ = await connected_pair(aeron, 48, TERM_1M)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pub.offer(numbered(0)), 0)
    with pytest.raises(asyncio.CancelledError):  # never swallowed...
        await task_cancelled_before_it_ran(pub.offer(numbered(1)))
    assert pub.position == 128  # ...though appended when offer was called (documented)
    assert await pub.offer(numbered(2)) == 192
    got = [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, 3)]
    assert got == [0, 1, 2]


def stepper(sub, form: str):
    """(a step of the form, what a step's result holds as numbers, its iterator)."""
    iterator = {"copy": sub, "views": sub.messages(copy=False), "batches": sub.batches(1)}.get(form)

    def step():
        return sub.receive() if iterator is None else anext(iterator)

    def numbers(taken) -> list[int]:
        messages = taken if isinstance(taken, list) else [taken]
        return [struct.unpack("<I", m.data)[0] for m in messages]

    return step, numbers, iterator


@pytest.mark.parametrize("form", ["receive", "copy", "views", "batches"])
async def test_a_step_cancelled_before_it_ran_puts_its_message_back(aeron, form):
    """The exception, and the message comes next: from a task made of the step, from
    `wait_for(step, 0)` and `wait_for(anext(it, default), 0)` (TimeoutError), from a gather
    cancelled, and from a parent's timeout passed on to the task it awaits."""
    pub, sub, _ = await connected_pair(aeron, 49, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, iterator = stepper(sub, form)
    with pytest.raises(asyncio.CancelledError):
        await task_cancelled_before_it_ran(step())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(step(), 0)
    if iterator is not None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(iterator, None), 0)
    with pytest.raises(asyncio.CancelledError):
        await task_cancelled_before_it_ran(asyncio.gather(step()))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):
            await asyncio.get_running_loop().create_task(step())
    got = []
    while len(got) < 3:
        got += numbers(await step())
    assert got == [0, 1, 2]


@pytest.mark.parametrize("form", ["receive", "copy", "views", "batches"])
async def test_a_step_closed_or_let_go_unawaited_puts_its_message_back(aeron, form):
    """A step closed (as a coroutine never started may be) or let go before an await took it:
    its message comes again, first (let go: at the iterator's next step, which reuses it)."""
    pub, sub, _ = await connected_pair(aeron, 56, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, _ = stepper(sub, form)
    step().close()
    dropped = step()
    del dropped
    got = []
    async with asyncio.timeout(10):  # a message lost: the third never comes
        while len(got) < 3:
            got += numbers(await step())
    assert got == [0, 1, 2]


@pytest.mark.parametrize("form", ["receive", "copy", "views", "batches"])
async def test_a_step_driven_by_send_or_next_is_taken_once(aeron, form):
    """A step run by its Python methods (`send`, `__next__`) and not by `await`'s slots, as
    asyncio's pure-Python Task runs its coroutine (nest_asyncio installs it as asyncio.Task):
    its message counts as taken, and comes once. It counted as untaken and came again, out of
    order, at the next step."""
    pub, sub, _ = await connected_pair(aeron, 57, TERM_1M)
    for i in range(5):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, _ = stepper(sub, form)

    def value_of(run) -> object:
        with pytest.raises(StopIteration) as stopped:
            run()
        return stopped.value.value

    got = numbers(await step())
    got += numbers(value_of(lambda: step().send(None)))
    got += numbers(value_of(lambda: step().__next__()))
    got += numbers(await asyncio.tasks._PyTask(step()))
    async with asyncio.timeout(10):
        while len(got) < 5:
            got += numbers(await step())
    assert got == [0, 1, 2, 3, 4]
    assert sub.poll(lambda *_: None, 10) == 0  # nothing more: none came twice


@pytest.mark.parametrize("form", ["receive", "copy", "views", "batches"])
async def test_a_step_let_go_unawaited_and_freed_puts_its_message_back(aeron, form):
    """A step still held at the next one (which takes another Completed) and then freed without
    an await: its message comes again, before the later ones of its image."""
    pub, sub, _ = await connected_pair(aeron, 57, TERM_1M)
    for i in range(4):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, _ = stepper(sub, form)
    held = step()
    got = numbers(await step())
    del held
    gc.collect()
    async with asyncio.timeout(10):  # a message lost: the fourth never comes
        while len(got) < 4:
            got += numbers(await step())
    assert got == [1, 0, 2, 3]


@pytest.mark.parametrize("form", ["receive", "copy", "views", "batches"])
async def test_a_step_held_over_the_next_then_awaited_gives_its_own_message(aeron, form):
    """A view's step held while the next consumed its message in place used to give the next
    message when awaited: the held one's was lost, the next one's came twice."""
    pub, sub, _ = await connected_pair(aeron, 59, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, _ = stepper(sub, form)
    held = step()
    got = numbers(await step())
    got += numbers(await held)
    async with asyncio.timeout(10):
        got += numbers(await step())
    assert got == [1, 0, 2]


@pytest.mark.parametrize("form", ["receive", "copy", "views", "batches"])
async def test_a_step_let_go_comes_first_when_the_next_step_waits(aeron, form):
    """A step let go unawaited, then a step that finds nothing and waits: the let-go message
    comes to it. Before, only a next step that found data put it back: the waiting one got the
    next message first, and on a stream that always waits the let-go one never came."""
    pub, sub, _ = await connected_pair(aeron, 62, TERM_1M)
    for i in range(2):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, _ = stepper(sub, form)
    got = numbers(await step())
    dropped = step()
    del dropped
    waiting = asyncio.get_running_loop().create_task(step())
    await asyncio.sleep(0)
    assert pub.try_offer(numbered(2)) > 0
    async with asyncio.timeout(10):
        got += numbers(await waiting)
        while len(got) < 3:
            got += numbers(await step())
    assert got == [0, 1, 2]


@pytest.mark.parametrize("let_go", ["cancelled", "freed"])
async def test_a_view_step_outliving_its_iterator_puts_its_message_back(aeron, let_go):
    """`anext(subscription.messages(copy=False))` makes an iterator nobody keeps: cancelled
    before it ran (`wait_for(..., 0)`), or let go, its message comes next. Before, the step
    found no iterator to put it back through, and the image consumed it at its next read."""
    pub, sub, _ = await connected_pair(aeron, 63, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    if let_go == "cancelled":
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(sub.messages(copy=False)), 0)
    else:
        step = anext(sub.messages(copy=False))
        del step
        gc.collect()
    async with asyncio.timeout(10):  # a message lost: the third never comes
        got = [struct.unpack("<I", (await sub.receive()).data)[0] for _ in range(3)]
    assert got == [0, 1, 2]


async def test_a_wait_that_reads_part_of_a_long_message_does_not_park(aeron):
    """A waiting step whose reads take fragments of a message not yet whole goes on reading:
    the rest is there. Before, it parked after each few fragments, for the idle strategy's
    fallback each time (the publisher rang once): a 100-fragment message read 4 fragments a
    step took minutes with a 5 s fallback."""
    async with aeronio.connect(
        aeron.driver_dir, idle_strategy=aeronio.NotifyingIdleStrategy(0, fallback_s=5)
    ) as client:
        pub, sub, _ = await connected_pair(client, 64, TERM_1M)
        batches = sub.batches(4)
        waiting = asyncio.get_running_loop().create_task(anext(batches))
        await asyncio.sleep(0)
        message = bytes(range(256)) * 512  # 128 KiB: about a hundred fragments
        assert pub.try_offer(message) > 0
        async with asyncio.timeout(3):
            (got,) = await waiting
        assert got.data == message


async def test_a_view_step_held_over_a_wait_then_let_go_comes_back_once(aeron):
    """A view's step held while the next step waits (it is given a copy of its own), then let
    go unawaited: its message comes next, once, and the later ones after it. Before, the
    iterator kept that step and reused it for later messages with the copy still in it: the
    first message came again and again, and the later ones were consumed unseen."""
    pub, sub, _ = await connected_pair(aeron, 65, TERM_1M)
    views = sub.messages(copy=False)
    assert pub.try_offer(numbered(0)) > 0
    held = anext(views)  # message 0, handed out
    waiting = anext(views)  # nothing more yet: the slow path, which gave `held` its copy
    del held
    gc.collect()
    for i in range(1, 4):
        assert pub.try_offer(numbered(i)) > 0
    async with asyncio.timeout(10):
        got = [struct.unpack("<I", (await waiting).data)[0]]
        while len(got) < 4:
            got.append(struct.unpack("<I", (await anext(views)).data)[0])
    assert got == [0, 1, 2, 3]


async def test_a_batch_freed_with_its_iterator_unawaited_comes_again(aeron):
    pub, sub, _ = await connected_pair(aeron, 58, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    batches = sub.batches(2)
    step = anext(batches)
    del batches, step
    gc.collect()
    async with asyncio.timeout(10):  # the batch lost: the third message never comes
        got = [struct.unpack("<I", (await sub.receive()).data)[0] for _ in range(3)]
    assert got == [0, 1, 2]


@pytest.mark.parametrize("let_go", ["closed", "freed"])
async def test_a_step_let_go_in_a_polls_handler_goes_back_as_the_poll_ends(aeron, let_go):
    """A poll holds the untaken messages while its handler runs: a step closed or freed there (a
    collection may free one anywhere) goes back when the poll ends, and the handler's ABORT
    still leaves its own message untaken (it crashed the process before)."""
    pub, sub, _ = await connected_pair(aeron, 59, TERM_1M)
    for i in range(4):
        assert pub.try_offer(numbered(i)) > 0
    step, numbers, _ = stepper(sub, "receive")
    held = [step()]
    got = numbers(await step())

    def let_go_and_abort(buffer, header):
        if let_go == "closed":
            held[0].close()
        held.clear()
        return aeronio.ControlledPollAction.ABORT

    assert sub.controlled_poll(let_go_and_abort, 10) == 0
    async with asyncio.timeout(10):
        while len(got) < 4:
            got += numbers(await step())
    assert got == [1, 0, 2, 3]


async def test_steps_run_as_tasks_through_asyncio_wait(aeron):
    pub, sub, _ = await connected_pair(aeron, 50, TERM_1M)
    for i in range(2):
        assert pub.try_offer(numbered(i)) > 0
    done, _ = await asyncio.wait([asyncio.ensure_future(sub.receive())])
    assert struct.unpack("<I", done.pop().result().data)[0] == 0
    assert struct.unpack("<I", (await asyncio.shield(sub.receive())).data)[0] == 1


async def test_many_steps_cancelled_go_back_in_order(aeron):
    """Tasks are cancelled in the order they were made: each message goes back after the earlier
    ones of its image, not simply first."""
    pub, sub, _ = await connected_pair(aeron, 55, TERM_1M)
    for i in range(8):
        assert pub.try_offer(numbered(i)) > 0
    cancelled = [
        task_cancelled_before_it_ran(sub.receive()),  # 0
        task_cancelled_before_it_ran(sub.receive()),  # 1
        task_cancelled_before_it_ran(anext(sub.batches())),  # 2..7, the iterator dropped
    ]
    for task in cancelled:
        with pytest.raises(asyncio.CancelledError):
            await task
    got = [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, 8)]
    assert got == list(range(8))


async def test_a_message_put_back_goes_before_those_polled_since(aeron):
    pub, sub, _ = await connected_pair(aeron, 51, TERM_1M)
    assert pub.try_offer(numbered(0)) > 0
    cancelled = task_cancelled_before_it_ran(sub.receive())  # took the last one polled
    assert pub.try_offer(numbered(1)) > 0
    assert struct.unpack("<I", (await sub.receive()).data)[0] == 1  # a new poll
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert pub.try_offer(numbered(2)) > 0
    got = [struct.unpack("<I", m.data)[0] async for m in first_messages(sub, 2)]
    assert got == [0, 2]


@pytest.mark.parametrize("read", ["poll", "receive"])
async def test_a_view_read_past_by_another_read_still_goes_back(aeron, read):
    """Another read consumed the view's frames (a view lives until the next read of its image)
    and went on: the view, cancelled, goes back as a copy among the untaken and comes next, as
    a copied message would. Before: it went back only while its image still lent it, so here it
    was lost without a word."""
    pub, sub, _ = await connected_pair(aeron, 52, TERM_1M)
    for i in range(4):
        assert pub.try_offer(numbered(i)) > 0
    views = sub.messages(copy=False)
    cancelled = task_cancelled_before_it_ran(anext(views))  # took 0
    got = []
    if read == "poll":
        assert sub.poll(lambda buffer, header: got.append(struct.unpack("<I", buffer)[0]), 1) == 1
    else:
        got.append(struct.unpack("<I", (await sub.receive()).data)[0])
    assert got == [1]  # read past 0
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    taken = [await anext(views) for _ in range(1)] + [await sub.receive()]
    assert [struct.unpack("<I", bytes(m.data))[0] for m in taken] == [0, 2]


async def test_a_view_step_taken_before_an_earlier_one_ran_puts_the_earlier_back(aeron):
    """A view is valid until its iterator's next step, which reuses its Message: an earlier
    step not awaited by then keeps a copy, which its task, cancelled, puts back (it was lost)."""
    pub, sub, _ = await connected_pair(aeron, 57, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    views = sub.messages(copy=False)
    cancelled = task_cancelled_before_it_ran(anext(views))  # took 0
    assert struct.unpack("<I", (await anext(views)).data)[0] == 1
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert [struct.unpack("<I", bytes((await anext(views)).data))[0] for _ in range(2)] == [0, 2]


async def test_a_view_of_an_untaken_message_goes_back_among_them(aeron):
    """A view handed from what async for polled and left is a copy: it goes back there."""
    pub, sub, _ = await connected_pair(aeron, 56, TERM_1M)
    for i in range(3):
        assert pub.try_offer(numbered(i)) > 0
    assert struct.unpack("<I", (await sub.receive()).data)[0] == 0  # 1 and 2 left untaken
    views = sub.messages(copy=False)
    with pytest.raises(asyncio.CancelledError):
        await task_cancelled_before_it_ran(anext(views))  # took 1
    assert struct.unpack("<I", (await sub.receive()).data)[0] == 1
    assert struct.unpack("<I", bytes((await anext(views)).data))[0] == 2


async def test_views_and_their_completed_go_with_the_last_reference(aeron):
    """The Completed refers to its views iterator weakly (and the others' to the subscription):
    no cycle left for the collector."""
    pub, sub, _ = await connected_pair(aeron, 54)
    assert pub.try_offer(b"x") > 0
    views = sub.messages(copy=False)
    assert (await anext(views)).data == b"x"
    gone = weakref.ref(views)
    del views
    assert gone() is None


async def test_a_completed_raises_what_is_thrown_into_it(aeron):
    pub, sub, _ = await connected_pair(aeron, 53)
    offer = pub.offer(b"x")
    with pytest.raises(KeyError, match="thrown"):
        offer.throw(KeyError("thrown"))
    with pytest.raises(KeyError, match="value"):
        offer.throw(KeyError, "value")  # the old signature: the type called with the value
    with pytest.raises(asyncio.CancelledError):
        offer.throw(asyncio.CancelledError)
    step = sub.receive()
    with pytest.raises(ValueError):
        step.throw(ValueError())
    assert (await sub.receive()).data == b"x"  # put back


# -- reused messages ------------------------------------------------------------------------

# The Messages of a batch that only the subscription still holds when it polls the next one are
# filled again (aeronio_cpython.h, "Reused messages"); elsewhere every message is new.
REUSES_MESSAGES = sys.implementation.name == "cpython" and not sysconfig.get_config_var(
    "Py_GIL_DISABLED"
)
REWRITES_BYTES = REUSES_MESSAGES and (3, 11) <= sys.version_info < (3, 14)  # their data's too


async def drain(sub, n: int) -> None:
    """Take `n` messages with `async for`, keeping none."""
    count = 0
    async for _ in sub:
        count += 1
        if count == n:
            return


def made_at(snapshot, line: int, size: int) -> int:
    """How many blocks of `size` bytes `snapshot` holds that were made under `line` of this file."""
    return sum(
        1
        for trace in snapshot.traces
        if trace.size == size
        and any(f.filename == __file__ and f.lineno == line for f in trace.traceback)
    )


@pytest.mark.skipif(not REUSES_MESSAGES, reason="messages are reused on CPython with the GIL")
async def test_messages_nobody_holds_are_filled_again_by_the_next_poll(aeron):
    pub, sub, _ = await connected_pair(aeron, 17)
    size = sys.getsizeof(_core.Message(b"", _core.Header.decode(bytes(32))))
    data_size = sys.getsizeof(struct.pack("<I", 0))
    tracemalloc.start(8)
    try:
        for i in range(50):
            assert pub.try_offer(struct.pack("<I", i)) > 0
        first = sys._getframe().f_lineno + 1
        await drain(sub, 50)
        for i in range(50):
            assert pub.try_offer(struct.pack("<I", i)) > 0
        second = sys._getframe().f_lineno + 1
        await drain(sub, 50)
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # The second batch is the first one's Messages again, but for the last one, which the loop,
    # its awaitable or the StopIteration may still have held when the next batch was polled.
    assert made_at(snapshot, first, size) >= 49
    assert made_at(snapshot, second, size) <= 1
    assert made_at(snapshot, second, data_size) == (1 if REWRITES_BYTES else 50)


async def test_a_message_somebody_holds_never_changes(aeron):
    pub, sub, _ = await connected_pair(aeron, 18)
    kept: list = []  # whole messages, their headers (the message itself) or only their data
    expected: list = []
    for batch in range(6):
        for i in range(40):
            end = pub.try_offer(struct.pack("<II", batch, i) * (1 + i % 5))
            assert end > 0
            expected.append((batch, i, end))
        count = 0
        async for message in sub:  # a third kept whole, a third by their data, a third let go
            if count % 3 == 0:
                kept.append((message, message.to_bytes()))
            elif count % 3 == 1:
                kept.append((message.data, None))
            count += 1
            if count == 40:
                break
    held_ones = [e for n, e in enumerate(expected) if n % 40 % 3 != 2]
    assert len(kept) == len(held_ones) == 6 * 27
    for (held, header), (batch, i, end) in zip(kept, held_ones, strict=True):
        data = struct.pack("<II", batch, i) * (1 + i % 5)
        if header is None:
            assert held == data
        else:
            assert (held.data, held.to_bytes(), held.position) == (data, header, end)


async def test_a_message_given_other_data_by_hand_is_not_reused(aeron):
    pub, sub, _ = await connected_pair(aeron, 21)
    for batch in range(3):
        for i in range(20):
            assert pub.try_offer(struct.pack("<II", batch, i)) > 0
        got = []
        async for message in first_messages(sub, 20):
            got.append(message.data)
            message.__init__(bytearray(b"mine"), message)  # the public constructor, again
        assert got == [struct.pack("<II", batch, i) for i in range(20)]


async def test_reused_data_is_hashed_afresh(aeron):
    pub, sub, _ = await connected_pair(aeron, 20)
    for batch in range(4):
        for i in range(30):
            assert pub.try_offer(struct.pack("<II", batch, i)) > 0
        async for message in first_messages(sub, 30):
            data = message.data
            assert hash(data) == hash(bytes(bytearray(data)))  # cached in the bytes object
            assert {data: 1}.get(struct.pack("<II", batch, data[4])) == 1


async def test_reused_messages_carry_each_images_header(aeron):
    """Two sessions on one stream, a fragmented message among small ones: each message's
    session, position and data are its own, batch after batch."""
    sub = await aeron.add_subscription("aeron:ipc", 19)
    pubs = [await aeron.add_exclusive_publication(TERM_64K, 19) for _ in range(2)]
    await await_until(lambda: len(sub.images) == 2, 10, "both images")
    long = bytes(range(256)) * 12  # three fragments at the default mtu
    for round_ in range(5):
        expected = {}
        for i in range(30):
            for n, pub in enumerate(pubs):
                data = long if i == 7 and n == round_ % 2 else struct.pack("<III", round_, n, i)
                end = await pub.offer(data)
                expected[(pub.session_id, end)] = data
        got = {}
        async for message in first_messages(sub, 60):
            got[(message.session_id, message.position)] = message.data
        assert got == expected


# -- messages(copy=False): in place, consumed at the next step ------------------------------


async def test_views_are_the_messages_in_place_consumed_at_the_next_step(aeron):
    pub, sub, image = await connected_pair(aeron, 8)
    starts = [pub.position]
    for i in range(3):
        starts.append(await pub.offer(struct.pack("<I", i) * 8))
    views = sub.messages(copy=False)
    first = await anext(views)
    assert type(first.data) is memoryview and first.data.readonly
    assert first.data == struct.pack("<I", 0) * 8
    assert image.position == starts[0]  # lent, not consumed: the publisher cannot reuse it
    second = await anext(views)
    assert second is first  # the message object is reused (documented)
    assert second.data == struct.pack("<I", 1) * 8
    assert image.position == starts[1]  # the first consumed, the second lent
    kept = second.data
    third = await anext(views)
    with pytest.raises(ValueError, match="released"):
        kept.tobytes()  # a view kept past its step raises, never shows other bytes
    assert third.data == struct.pack("<I", 2) * 8
    # Leaving the loop: any other read of the subscription consumes the lent message first.
    pub.try_offer(b"after")
    assert (await sub.receive()).data == b"after"
    assert image.position == pub.position


async def test_views_follow_the_log_through_rotations_and_back_pressure(aeron):
    """A 64 KiB term, 5000 messages of 96..1500 bytes from a task that awaits space while the
    consumer reads in place: every message, in order, byte for byte (fragments reassembled)."""
    pub, sub, image = await connected_pair(aeron, 9)
    rng = np.random.default_rng(7)
    sizes = rng.integers(96, 1500, 5000)
    blob = rng.integers(0, 256, 4000, dtype=np.uint8).tobytes()

    def message(i: int) -> bytes:
        return struct.pack("<I", i) + blob[i % 997 : i % 997 + int(sizes[i]) - 4]

    async def publish():
        for i in range(len(sizes)):
            await pub.offer(message(i))

    task = asyncio.create_task(publish())
    count = 0
    kinds = set()
    async with asyncio.timeout(30):
        async for m in sub.messages(copy=False):
            assert m.data == message(count), count
            kinds.add(type(m.data))
            count += 1
            if count == len(sizes):
                break
    await task
    assert kinds == {memoryview, bytes}  # in place, and reassembled fragmented messages
    assert image.position < pub.position  # the last one is still lent...
    assert sub.poll(lambda buffer, header: None, 10) == 0  # ...until the next read: no repeat
    assert image.position == pub.position


async def test_a_view_exported_further_is_documented_as_untracked(aeron):
    pub, sub, _ = await connected_pair(aeron, 10)
    pub.try_offer(b"A" * 64)
    pub.try_offer(b"B" * 64)
    views = sub.messages(copy=False)
    message = await anext(views)
    array = np.frombuffer(message.data, dtype=np.uint8)  # an export: cannot be released
    await anext(views)  # still steps (the docstring says such exports are not tracked)
    assert array.shape == (64,)


# -- reused positions -----------------------------------------------------------------------

# Where the core writes a position the caller let go into the int it returns next
# (aeronio_cpython.h, "Reused positions"); elsewhere every position is a new int.
REUSES_POSITIONS = (
    sys.implementation.name == "cpython"
    and (3, 11) <= sys.version_info < (3, 14)
    and sys.int_info.bits_per_digit == 30
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
)
PAYLOAD = b"p" * 300  # a 352-byte frame: every position is above CPython's small ints


def int_blocker(i: int) -> int:
    """A new int of two digits, made at run time: it takes the memory a freed position left, so
    a position made new afterwards gets another id."""
    return int(str(2**40 + i))


@pytest.mark.skipif(not REUSES_POSITIONS, reason="positions are reused on CPython 3.11-3.13")
async def test_a_position_nobody_holds_is_reused_by_try_offer_and_await_offer(aeron):
    pub, _, _ = await connected_pair(aeron, 15)
    blockers, ids = [], []
    for i in range(10):
        position = pub.try_offer(PAYLOAD)
        assert position == pub.position == 352 * (i + 1)
        ids.append(id(position))
        del position
        blockers.append(int_blocker(i))
    for i in range(10, 20):
        position = await pub.offer(PAYLOAD)
        assert position == pub.position == 352 * (i + 1)
        ids.append(id(position))
        del position
        blockers.append(int_blocker(i))
    assert len(set(ids)) == 1
    # A variable that holds each position until the next call's result replaces it: the
    # publication alternates between two ints.
    ids, position = [], None
    for i in range(20, 40):
        position = pub.try_offer(PAYLOAD) if i % 2 else await pub.offer(PAYLOAD)
        assert position == pub.position == 352 * (i + 1)
        ids.append(id(position))
        blockers.append(int_blocker(i))
    assert len(set(ids)) == 2 and ids[0] != ids[1] == ids[3]


async def test_a_position_somebody_holds_never_changes(aeron):
    pub, _, _ = await connected_pair(aeron, 16)
    offered = [pub.try_offer(PAYLOAD) for _ in range(5)]
    awaited = [await pub.offer(PAYLOAD) for _ in range(5)]
    assert offered + awaited == [352 * (i + 1) for i in range(10)]
    pending = pub.offer(PAYLOAD)  # completed, held, not awaited yet
    held = pub.try_offer(PAYLOAD)  # while the publication's own Completed is held elsewhere
    with pytest.raises(StopIteration) as caught:  # a StopIteration user code keeps
        next(pub.offer(PAYLOAD))
    for _ in range(5):
        pub.try_offer(PAYLOAD)
        await pub.offer(PAYLOAD)
    assert offered + awaited == [352 * (i + 1) for i in range(10)]
    assert (await pending, held) == (352 * 11, 352 * 12)
    assert (caught.value.value, caught.value.args) == (352 * 13, (352 * 13,))
    assert pub.position == 352 * 23


@pytest.mark.parametrize(
    "term_length, term_count",
    [(64 * 1024, 2**14), (2**30, 2**30)],
    ids=["one to two digits (2**30)", "two to three digits (2**60)"],
)
async def test_positions_across_an_int_digit_boundary(aeron, term_length, term_count):
    """Positions read the same as a new int of their value on both sides of 2**30 (one 30-bit
    digit to two) and of 2**60 (two to three, where a kept int has no room: made new)."""
    boundary = term_count * term_length
    if storage.usable_space(aeron.driver_dir, aeron.driver_dir) < 3 * term_length + 2**20:
        pytest.skip(f"no room for a sparse log of three {term_length:,}-byte terms")
    await aeron.add_subscription("aeron:ipc", 17)
    pub = await aeron.add_exclusive_publication(
        f"aeron:ipc?term-length={term_length}|sparse=true|init-term-id=0"
        f"|term-id={term_count - 1}|term-offset={term_length - 1024}",
        17,
    )
    await pub.wait_connected(5)
    assert pub.position == boundary - 1024
    seen = []
    for i in range(8):
        offer = pub.try_offer if i % 2 else pub.offer
        position = offer(PAYLOAD)
        if not isinstance(position, int):
            position = await position
        if position == aeronio.ADMIN_ACTION:  # the term ended: padded, the next one taken
            continue
        expected = pub.position
        assert position == expected and position - boundary == expected - boundary
        assert str(position) == str(expected) and hash(position) == hash(expected)
        assert position.bit_length() == expected.bit_length() and position > 0
        seen.append(expected - boundary)
        del position
    assert seen[0] < 0 < seen[-1]


# -- poll's reused fragment view ------------------------------------------------------------


async def test_poll_reuses_the_fragment_view_only_when_nobody_kept_it(aeron):
    pub, sub, _ = await connected_pair(aeron, 11)
    for i in range(4):
        pub.try_offer(bytes([i]) * 40)
    ids, kept = [], []

    def handler(buffer, header):
        ids.append(id(buffer))
        if len(ids) == 2:  # keep the second one
            kept.append(buffer)

    assert sub.poll(handler, 10) == 4
    assert ids[0] == ids[1]  # re-pointed: the handler kept nothing
    assert ids[2] != ids[1]  # the second was kept: a new view from then on
    assert bytes(kept[0]) == bytes([1]) * 40  # and it still shows its own fragment
    assert len(kept[0]) == 40


async def test_help_lists_the_per_message_methods():
    text = inspect.getdoc(aeronio.Publication.try_offer) or ""
    assert "without" in text
    names = {name for name, _ in inspect.getmembers(aeronio.Publication)}
    assert {"try_offer", "try_claim", "try_offer_batch", "offer"} <= names
    assert {"receive", "messages", "batches"} <= {
        name for name, _ in inspect.getmembers(aeronio.Subscription)
    }
