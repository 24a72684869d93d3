# The awaitable API's fast paths: `await publication.offer(...)` and `async for message in
# subscription` cost no coroutine, future or task per message when space or data is there.
#
# Rules
# - `offer` and `__anext__` do their work when called (unless the loop is due a turn, below).
#   If it succeeded they return a Completed: `await` on it returns the result without
#   suspending the task (see aeronio_cpython.h).
# - Otherwise they return the Python class's coroutine (`_offer_slowly`, `_next_slowly`, ...),
#   which idles through the client's idle strategy and tries again: back-pressure still awaits,
#   and cancelling it leaves nothing behind.
# - A Completed is also a collections.abc.Coroutine (send/throw/close), so create_task,
#   wait_for, gather and anyio take it wherever they take the coroutine it stands for.
# - Thrown into, it undoes what it can, as a coroutine that never ran: it never suspends, so an
#   exception reaches it only before it ran (a task made of it and cancelled before its first
#   step: `wait_for(subscription.receive(), 0)`). The message it took goes back among the
#   untaken, before the later ones of its image, and the exception is raised: a cancellation is
#   never swallowed. Closed, or let go, before an await took it, its message (or batch) goes
#   back too (let go: at the iterator's next step, whichever path it takes, or when it is
#   freed). An offer stays appended; a view goes back as a copy. (The iterator's next step
#   reuses its Message: a step let go goes back as a copy first; a step still held is given a
#   copy of its own, which its await takes or its close puts back. An iterator freed first
#   does the same, the step's owner then the subscription.)
# - The loop gets a turn: a task that finds space or data every time would never suspend, and
#   the event loop's other tasks (the client's keepalive among them: the driver times a silent
#   client out) would wait for as long as the stream keeps up. So the fast paths look at the
#   clock (every LOOP_TURN_CALLS calls at most, more often while calls are slow), and when the
#   loop has had no turn from their publication or subscription for LOOP_TURN_NS they return
#   the Python class's `_offer_after_turn` or `_after_turn` coroutine instead, which yields once
#   (asyncio.sleep(0)) before it does the work: cancelled there, nothing was done. (So an offer
#   called but not yet awaited can be appended after offers called later, as a refused one
#   always could. Turns the loop had meanwhile from other awaits are not seen: one turn a
#   LOOP_TURN_NS may be one too many.)

import collections.abc as _abc
from weakref import ref as _weakref

cdef enum:
    LOOP_TURN_CALLS = 256  # the most fast-path calls between looks at the clock
    _LOOP_TURN_NS = 50000000  # about the longest a stream that keeps up holds the loop

LOOP_TURN_NS = _LOOP_TURN_NS
cdef int64_t _loop_turn_interval_ns = _LOOP_TURN_NS  # tests change it (_set_loop_turn_ns)


cdef struct LoopTurn:
    uint32_t calls  # fast-path calls since the clock was last looked at
    uint32_t stride  # calls between looks: from 1, doubled while they come fast, up to 256
    int64_t looked_ns  # when the clock was last looked at (monotonic)
    int64_t last_ns  # when the loop last had a turn from this owner


cdef inline void _loop_turn_start(LoopTurn* turn) noexcept:
    """A new owner: its first turn comes an interval after it was made."""
    turn.stride = 1
    turn.looked_ns = turn.last_ns = _monotonic_ns()


cdef inline bint _loop_turn_due(LoopTurn* turn) noexcept:
    """Count a fast-path call; True (the turn counted as given) at a look at the clock when the
    loop has had no turn from this owner for the interval. Looks come every `stride` calls: the
    stride doubles while a look comes within a 32nd of the interval and halves while one comes
    after an 8th, so that slow calls (work between them) are looked at often enough. Interval 0
    (tests): a turn at every look, every LOOP_TURN_CALLS calls."""
    cdef int64_t now, elapsed
    turn.calls += 1
    if turn.calls < turn.stride:
        return False
    turn.calls = 0
    now = _monotonic_ns()
    elapsed = now - turn.looked_ns
    turn.looked_ns = now
    if _loop_turn_interval_ns == 0:
        turn.stride = LOOP_TURN_CALLS
    elif elapsed > _loop_turn_interval_ns >> 3:
        if turn.stride > 1:
            turn.stride >>= 1
    elif elapsed < _loop_turn_interval_ns >> 5 and turn.stride < LOOP_TURN_CALLS:
        turn.stride <<= 1
    if now - turn.last_ns < _loop_turn_interval_ns:
        return False
    turn.last_ns = now
    return True


cdef inline bint _loop_turn_due_now(LoopTurn* turn) noexcept:
    """True (the turn counted as given) when the loop has had no turn from this owner for the
    interval: for calls that do much each (offer_batch, claim)."""
    cdef int64_t now = _monotonic_ns()
    if now - turn.last_ns < _loop_turn_interval_ns:
        return False
    turn.last_ns = now
    return True


def _set_loop_turn_ns(int64_t ns) -> int:
    """Set the loop's turn interval (0: a turn every LOOP_TURN_CALLS fast-path calls, a huge
    one: none) for tests; returns the one before."""
    global _loop_turn_interval_ns
    cdef int64_t before = _loop_turn_interval_ns
    _loop_turn_interval_ns = ns
    return before


@cython.final
@cython.freelist(64)
@cython.no_gc  # nothing it refers to refers back to it (as a GC type: 10 ns more an await)
cdef class Completed:
    """An awaitable whose result is already there."""

    cdef object value
    cdef object _owner  # a weak reference to what puts the value back (_put_back); None: offers
    cdef bint _untaken  # a message (or batch) in `value` that no await took yet

    def __class_getitem__(cls, item):  # generic, as the stub types it, at run time too
        return _GenericAlias(cls, item)

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):  # the slot is aio_completed_next (no traceback entry); the method,
        self._untaken = False  # `send` and asyncio's pure-Python Task (nest_asyncio's) end here
        raise StopIteration(self.value)

    def send(self, object value):
        self._untaken = False
        raise StopIteration(self.value)

    def throw(self, object typ, object val=None, object tb=None):
        """Raise what is thrown in, the message taken put back first (see the rules)."""
        cdef object error = typ
        if val is not None:
            error = val if isinstance(val, BaseException) else typ(val)
        cdef object owner = self._owner() if self._owner is not None else None
        self._untaken = False
        if owner is not None:
            owner._put_back(self)
        raise error

    def close(self) -> None:
        """Closed before an await took it: the message taken goes back (see the rules)."""
        cdef object owner = self._owner() if self._owner is not None else None
        if self._untaken and owner is not None:
            self._untaken = False
            owner._put_back(self)

    def __del__(self):
        """Freed before an await took it: as closed (tp_finalize; it keeps no reference to
        itself, so it is not resurrected)."""
        if self._untaken:
            self.close()


cdef PyObject* _completed_value(PyObject* completed) noexcept:
    """The value, borrowed (the Completed keeps it until the await took it), taken."""
    (<Completed> completed)._untaken = False
    return <PyObject*> (<Completed> completed).value


aio_make_completed_type(<PyTypeObject*> Completed, _completed_value)
_abc.Coroutine.register(Completed)


# The per-message paths reuse one Completed each: when only its holder still refers to it, the
# `await` that took the last one has finished with it.


cdef int _put_in_order(list pending, Message message) except -1:
    """Insert `message` among the untaken `pending`: after the earlier messages of its image
    (session), before its later ones, else first."""
    cdef int32_t session = message.session_id
    cdef int64_t position = message.position
    cdef Py_ssize_t i, at = 0
    for i in range(len(pending)):
        other = <Message> pending[i]
        if other.session_id == session:
            if other.position > position:
                break
            at = i + 1
    pending.insert(at, message)
    return 0


cdef inline Completed _completed_of(object owner):
    """A Completed whose `owner` puts back what it took if it is thrown into."""
    cdef Completed done = Completed.__new__(Completed)
    done._owner = _weakref(owner)
    return done


cdef object _deadline = None  # aeronio.idle.deadline, imported at first use (the package
# loads only the core and the errors when imported)


cdef int _check_timeout(object timeout) except -1:
    """ConfigurationError for a timeout that is no number (idle.deadline's rule)."""
    global _deadline
    if _deadline is None:
        from aeronio.idle import deadline
        _deadline = deadline
    _deadline(timeout)
    return 0


cdef class PublicationBase:
    """The per-message methods of Publication (aeronio.client.publication), in C."""

    cdef public LogAppender _appender
    cdef Completed _done
    cdef aio_positions _positions  # the ints returned (aeronio_cpython.h, "Reused positions")
    cdef LoopTurn _turn

    def __cinit__(self, *args, **kwargs):
        _loop_turn_start(&self._turn)

    def __dealloc__(self):
        aio_positions_clear(&self._positions)

    cdef inline object _position_of(self, int64_t position):
        """`position` as an int, maybe a kept one written over (aeronio_cpython.h); this
        object's Completed, while nobody else holds it, is one of its own references."""
        cdef PyObject* extra = NULL
        if self._done is not None and aio_refcount(<PyObject*> self._done) == 1:
            extra = <PyObject*> self._done.value
        return aio_position(&self._positions, position, extra)

    def _turn_due(self) -> bool:
        """Whether a coroutine of this publication that would not suspend should give the loop
        its turn first (True counts it as given)."""
        return _loop_turn_due_now(&self._turn)

    @cython.binding(False)
    def try_offer(self, object buffer, Py_ssize_t offset=0, object length=None) -> int:
        """Append a message (bytes-like; `length` bytes from `offset`, default the rest) without
        waiting: its new position, or NOT_CONNECTED, BACK_PRESSURED, ADMIN_ACTION, CLOSED or
        MAX_POSITION_EXCEEDED. MessageTooLargeError above max_message_length."""
        cdef int64_t result = self._appender.try_offer(buffer, offset, length)
        if result > 0:
            return self._position_of(result)
        return result

    @cython.binding(False)
    def try_claim(self, Py_ssize_t length):
        """Reserve `length` bytes (at most max_payload_length) to write in place: a BufferClaim
        to commit() or abort(), or a result code as try_offer's."""
        return self._appender.try_claim(length)

    @cython.binding(False)
    def try_offer_batch(self, object messages, Py_ssize_t start=0) -> int:
        """Append messages[start:] (a sequence of buffers or a 2-D uint8 array of records) as far
        as the window allows: how many were appended, or a result code when none was."""
        return self._appender.offer_batch(messages, start)

    @cython.binding(False)
    def offer(self, object buffer, Py_ssize_t offset=0, object length=None, *, object timeout=None):
        """Append a message, waiting while back-pressured or not connected; awaitable, its
        result the message's position. The first attempt is made when called (every 50 ms of
        calls that never wait, after a turn of the event loop: await each offer before the
        next to keep their order); only a refused one waits. (So a task made of it and cancelled
        before it ran may have appended it.) Raises PublicationClosedError,
        MessageTooLargeError, MaxPositionExceededError or TimeoutError (after `timeout`
        seconds; ConfigurationError for a timeout that is no number, even when no wait needs
        it)."""
        if timeout is not None:
            _check_timeout(timeout)
        if _loop_turn_due(&self._turn):
            return self._offer_after_turn(buffer, offset, length, timeout)
        cdef int64_t result = self._appender.try_offer(buffer, offset, length)
        cdef object position
        if result > 0:
            if self._done is None or aio_refcount(<PyObject*> self._done) != 1:
                self._done = Completed.__new__(Completed)
            position = self._position_of(result)
            if self._done.value is not position:
                self._done.value = position
            return self._done
        return self._offer_slowly(buffer, offset, length, timeout, result)


cdef class SubscriptionBase:
    """The message iterators of Subscription (aeronio.client.subscription), in C.

    Whole messages are polled from the images a batch at a time into `_pending` and handed out
    one by one; the images are polled in turn, starting one further each time."""

    cdef readonly list _images  # Image objects, set by _set_images
    cdef list _readers  # their ImageReaders
    cdef public bint is_closed
    cdef list _pending
    cdef Py_ssize_t _next
    cdef Py_ssize_t _fill_start
    cdef Py_ssize_t _poll_start
    cdef int _fragment_limit
    cdef MessageIterator _messages
    # Errors of images lost before their end (ImageUnavailableError): while one is there the
    # iterators take no new message, their slow path raises it first.
    cdef public list _lost
    # Errors of images refused as they came (their log did not map), also in _lost while it has
    # room: the next poll of any kind raises the first; each is raised once, by a poll or an
    # iterator.
    cdef public list _refused
    # In methods that hold _pending or an index into it (_busy: how many, a poll's handler may
    # call another): messages that come back meanwhile (a step freed by a collection there,
    # closed by a poll's handler) wait in _returned until the last one ends.
    cdef int _busy
    cdef list _returned
    cdef LoopTurn _turn  # shared by its iterators: one made per step still counts
    cdef object __weakref__  # Completeds refer to it weakly (to put messages back)

    def __cinit__(self, *args, **kwargs):
        _loop_turn_start(&self._turn)
        self._lost = []
        self._refused = []
        self._returned = []
        self._images = []
        self._readers = []
        self._pending = []
        self._fragment_limit = 1024
        self._messages = MessageIterator(self)

    def __aiter__(self):
        """`async for message in subscription`: whole messages, copied (Message, data bytes)."""
        return self._messages

    def __anext__(self):
        return self._messages.__anext__()

    def receive(self):
        """The next whole message (awaitable; waits for one); SubscriptionClosedError once the
        subscription is closed."""
        return self._messages._next(True)

    def messages(self, *, bint copy=True):
        """`async for message in subscription.messages(copy=False)`: the same messages without
        copying. `message.data` is a read-only memoryview into the log, valid until the next
        step: the message is consumed at the next read of its image (this iterator's next step,
        or any other read of the subscription after a loop left with break). A view still held
        at the iterator's next step is released (using it raises ValueError); buffers made from
        it (numpy arrays, slices) are not tracked and must be copied to be kept. The Message
        object is reused: its fields and data change at each step (a step not yet awaited at
        the next one keeps its message, as a copy). Fragmented messages are
        reassembled into bytes; messages `async for` polled and did not hand out (a loop left
        with break) come first, as bytes. With copy=True: the subscription itself."""
        if copy:
            return self
        return MessageViews(self)

    def batches(self, int fragment_limit=1024):
        """`async for batch in subscription.batches()`: lists of whole, copied messages, as many
        as one poll of up to `fragment_limit` fragments found (messages async for left untaken:
        up to `fragment_limit` of them)."""
        if fragment_limit <= 0:
            raise ValueError(f"fragment_limit {fragment_limit} must be positive")
        return MessageBatches(self, fragment_limit)

    def _set_images(self, list images) -> None:
        """The images to read (a new list whenever they change)."""
        self._images = images
        self._readers = [image._reader for image in images]

    @cython.binding(False)
    def poll(self, object handler, int fragment_limit) -> int:
        """Deliver up to fragment_limit fragments as handler(buffer, header), the images in turn
        (starting one further each call); returns the count. Every poll method raises
        ClientTimeoutError (DriverTimeoutError) once the driver timed this client out (was
        lost): its images are gone then."""
        cdef list readers = self._readers
        cdef Py_ssize_t count = len(readers), i, start
        cdef int fragments = 0
        _check_handler(handler)
        if aio_list_size(<PyObject*> self._refused):
            self._raise_refused()
        if self._next < aio_list_size(<PyObject*> self._pending):
            return self._poll_untaken(handler, fragment_limit, False)
        if count == 1:
            return (<ImageReader> readers[0])._poll(handler, fragment_limit)
        if count == 0:
            self._check_client()
            return 0
        start = self._poll_start = (self._poll_start + 1) % count
        for i in range(count):
            fragments += (<ImageReader> readers[(start + i) % count])._poll(
                handler, fragment_limit - fragments)
            if fragments >= fragment_limit:
                break
        return fragments

    def _raise_refused(self) -> None:
        """Raise the first refused image's error, taken from _lost too."""
        error = self._refused.pop(0)
        if error in self._lost:
            self._lost.remove(error)
        raise error

    def _has_pending(self) -> bool:
        return self._ready()

    def _untaken(self) -> int:
        """How many messages the iterators polled from the images and did not hand out."""
        return len(self._pending) - self._next

    cpdef int _poll_untaken(self, object handler, int fragment_limit, bint controlled) except -1:
        """Hand a poll's handler the messages the iterators polled and did not hand out (a loop
        left with break), before any read of the images, which are past them: each whole, as
        one unfragmented fragment. Taken before the call, as the images' polls consume a
        fragment before theirs; `controlled`: the handler's ABORT leaves it, BREAK stops."""
        cdef int fragments = 0, action
        cdef Message message
        cdef object result
        _check_handler(handler)
        self._busy += 1
        try:
            while fragments < fragment_limit and self._next < len(self._pending):
                message = <Message> self._take()
                result = handler(memoryview(message.data), as_unfragmented(message))
                action = _action_of(result) if controlled else ACTION_CONTINUE
                if action == ACTION_ABORT or action == ACTION_INVALID:
                    self._next -= 1
                    if action == ACTION_INVALID:
                        raise _invalid_action(result)
                    break
                fragments += 1
                if action == ACTION_BREAK:
                    break
        finally:
            self._end_busy()
        return fragments

    cdef inline bint _ready(self) except -1:
        """Whether a message is ready to be taken (polling the images when none is left)."""
        if self._next < aio_list_size(<PyObject*> self._pending):
            return True
        return self._fill(self._fragment_limit) > 0

    cdef object _take(self):
        self._next += 1
        return <object> aio_list_item(<PyObject*> self._pending, self._next - 1)

    def _take_one(self) -> Message:
        return self._take()

    def _put_back(self, Completed done) -> None:
        """The message (or batch) `done` took and never delivered, back among the untaken."""
        self._put_back_messages(done.value if type(done.value) is list else [done.value])

    cdef int _put_back_messages(self, list messages) except -1:
        """Back among the untaken, in order: now, or as the busy method ends."""
        if self._busy:
            self._returned += messages
            return 0
        if len(messages) == 1 and self._next and self._pending[self._next - 1] is messages[0]:
            self._next -= 1
            return 0
        self._busy += 1
        try:
            pending = self._pending[self._next:]
            for message in messages:
                _put_in_order(pending, <Message> message)
            self._pending = pending
            self._next = 0
        finally:
            self._end_busy()
        return 0

    cdef int _end_busy(self) except -1:
        """Leave a busy method: the last one puts back what came back meanwhile."""
        cdef list returned = self._returned
        self._busy -= 1
        if returned and not self._busy:
            self._returned = []
            self._put_back_messages(returned)
        return 0

    cdef list _take_batch(self, int limit):
        """Up to `limit` of the messages polled and not handed out: what one poll of `limit`
        fragments found, or the first of those another iterator left."""
        cdef list batch
        self._busy += 1
        try:
            if self._next == 0 and len(self._pending) <= limit:
                batch = self._pending
                self._pending = []
            else:
                batch = self._pending[self._next:self._next + limit]
                self._next += len(batch)
        finally:
            self._end_busy()
        return batch

    cdef Py_ssize_t _fill(self, int fragment_limit) except -1:
        """Poll whole messages from the images (after every pending one was taken); the Messages
        taken before that nobody kept are filled again (the rest of them dropped here)."""
        cdef list readers = self._readers
        cdef Py_ssize_t count = len(readers), i, start
        cdef int fragments = 0
        cdef list spent = None
        if self._next < len(self._pending):
            return len(self._pending) - self._next
        self._busy += 1
        try:
            if self._next:
                spent = self._pending
                self._pending = []
                self._next = 0
            if self._lost:
                return 0
            if count == 1:
                (<ImageReader> readers[0])._poll_messages(self._pending, fragment_limit, spent)
            elif count:
                start = self._fill_start = (self._fill_start + 1) % count
                for i in range(count):
                    fragments += (<ImageReader> readers[(start + i) % count])._poll_messages(
                        self._pending, fragment_limit - fragments, spent)
                    if fragments >= fragment_limit:
                        break
        finally:
            self._end_busy()
        return len(self._pending)


cdef int _put_back_let_go(PyObject* done, SubscriptionBase subscription) except -1:
    """Before a step that does not take at once (it waits, or gives the loop its turn first):
    the last step `done` (borrowed from its iterator), let go unawaited (only the iterator
    holds it), puts its message (or batch) back among the untaken, to come first. (A step that
    takes at once does so as it reuses the Completed.)"""
    if done == <PyObject*> None or aio_refcount(done) != 1:  # counted before any reference
        return 0
    cdef Completed step = <Completed> done
    if step._untaken:
        step._untaken = False
        subscription._put_back(step)
    return 0


@cython.final
cdef class MessageIterator:
    """`async for message in subscription` (a C type of its own: the iterator's slots are called
    directly, where a Python subclass's would be looked up by name)."""

    cdef SubscriptionBase _subscription
    cdef Completed _done

    def __cinit__(self, SubscriptionBase subscription):
        self._subscription = subscription

    def __aiter__(self):
        return self

    def __anext__(self):
        return self._next(False)

    cdef inline object _next(self, bint receiving):
        """The next message, awaitable: at once when there is one; else (or at the loop's turn)
        the subscription's slow path, which ends iteration once it is closed or, `receiving`
        (`receive()`), raises SubscriptionClosedError."""
        cdef SubscriptionBase subscription = self._subscription
        if _loop_turn_due(&subscription._turn):
            _put_back_let_go(<PyObject*> self._done, subscription)
            return subscription._after_turn(
                subscription._receive_slowly if receiving else subscription._next_slowly
            )
        if subscription._ready():
            if self._done is None or aio_refcount(<PyObject*> self._done) != 1:
                self._done = _completed_of(subscription)
            elif self._done._untaken:  # let go unawaited: its message comes again, first
                subscription._put_back(self._done)
            self._done.value = subscription._take()
            self._done._untaken = True
            return self._done
        _put_back_let_go(<PyObject*> self._done, subscription)
        return subscription._receive_slowly() if receiving else subscription._next_slowly()


@cython.final
cdef class MessageBatches:
    """subscription.batches(): each step a list of the messages one poll found."""

    cdef SubscriptionBase _subscription
    cdef int _fragment_limit
    cdef Completed _done

    def __cinit__(self, SubscriptionBase subscription, int fragment_limit):
        self._subscription = subscription
        self._fragment_limit = fragment_limit

    def __aiter__(self):
        return self

    def __anext__(self):
        if _loop_turn_due(&self._subscription._turn):
            _put_back_let_go(<PyObject*> self._done, self._subscription)
            return self._subscription._after_turn(self._subscription._batch_slowly, self)
        if self.ready():
            if self._done is None or aio_refcount(<PyObject*> self._done) != 1:
                self._done = _completed_of(self._subscription)
            elif self._done._untaken:  # let go unawaited: its messages come again, first
                self._subscription._put_back(self._done)
            self._done.value = self._subscription._take_batch(self._fragment_limit)
            self._done._untaken = True
            return self._done
        _put_back_let_go(<PyObject*> self._done, self._subscription)
        return self._subscription._batch_slowly(self)

    cpdef bint ready(self) except -1:
        return self._subscription._fill(self._fragment_limit) > 0

    def take(self) -> list:
        """The batch `ready` found."""
        return self._subscription._take_batch(self._fragment_limit)


@cython.final
cdef class MessageViews:
    """subscription.messages(copy=False): one message at a time, read in place, consumed at the
    next step (see SubscriptionBase.messages)."""

    cdef SubscriptionBase _subscription
    cdef Message _message
    cdef bint _ready
    cdef Py_ssize_t _image
    cdef Completed _done
    cdef PyObject* _handed  # the Completed that handed out the message in hand (identity only)
    cdef object __weakref__

    def __cinit__(self, SubscriptionBase subscription):
        self._subscription = subscription
        self._message = Message.__new__(Message)

    def __aiter__(self):
        return self

    def __anext__(self):
        if _loop_turn_due(&self._subscription._turn):
            return self._subscription._after_turn(self._subscription._view_slowly, self)
        if self.ready():
            self._ready = False
            if self._done is None or aio_refcount(<PyObject*> self._done) != 1:
                self._done = _completed_of(self)
                self._done.value = self._message
            self._done._untaken = True
            self._handed = <PyObject*> self._done
            return self._done
        return self._subscription._view_slowly(self)

    def take(self) -> Message:
        self._ready = False
        self._handed = NULL
        return self._message

    def __del__(self):
        """Freed with a step handed out that no await took (a temporary iterator: `anext(
        subscription.messages(copy=False))` cancelled or let go): as at a next step, the step
        gets a copy of its own, which its await takes, or its close or free puts back, now
        through the subscription; let go too, the copy goes back at once."""
        if self._handed != NULL and self._done._untaken:
            self._done._owner = _weakref(self._subscription)
            self._keep_untaken()

    def _put_back(self, Completed done) -> None:
        """The message `done` handed out among the untaken: a copy of the message in hand if no
        step came since (the next read of any kind takes it first, whether or not a read
        consumed the view's frames since), else the copy `done` was given at that step."""
        if done.value is not self._message:
            self._subscription._put_back_messages([done.value])
        elif self._handed == <PyObject*> done:
            self._handed = NULL
            self._subscription._put_back_messages([self._copy()])

    cdef Message _copy(self):
        """The message in hand, its data as bytes."""
        cdef Message copy = Message.__new__(Message)
        copy._become(self._message)
        if type(copy.data) is not bytes:
            copy.data = bytes(copy.data)
        return copy

    cdef int _keep_untaken(self) except -1:
        """Before the message in hand is consumed: if the step that handed it out has not been
        awaited, its message is kept. Let go (only this iterator holds the step), it goes back
        among the untaken, to come next; held, the step gets a copy of its own (an await takes
        it, a close or a free puts it back) and is no longer this iterator's to reuse (its
        value is no longer the message in hand)."""
        self._handed = NULL
        if aio_refcount(<PyObject*> self._done) == 1:
            self._done._untaken = False
            self._subscription._put_back_messages([self._copy()])
        else:
            self._done.value = self._copy()
            self._done = None
        return 0

    cpdef bint ready(self) except -1:
        """Let go of the message handed out last and look for the next (its image consumes the
        last one as it reads); idempotent until taken."""
        if self._ready:
            return True
        if self._handed != NULL and self._done._untaken:  # handed out, no await took it
            self._keep_untaken()
        self._handed = NULL
        self._let_go()
        if self._subscription._next < aio_list_size(<PyObject*> self._subscription._pending):
            self._message._become(<Message> self._subscription._take())  # polled, not taken
            self._ready = True
            return True
        if self._subscription._lost:
            return False
        cdef list readers = self._subscription._readers
        cdef Py_ssize_t count = len(readers), i, at, start = self._image
        cdef ImageReader reader
        for i in range(count):
            at = (start + i) % count
            reader = <ImageReader> readers[at]
            self._image = (at + 1) % count  # should it raise (a corrupt image), the next read
            if reader._view_message(self._message):  # starts past it (no try: a cost on 3.12+)
                self._image = at
                self._ready = True
                return True
        self._image = start
        return False

    cdef void _let_go(self) except *:
        """Invalidate a view of the message just consumed that the user kept: it is released
        (the next message gets a new one)."""
        cdef object view
        if type(self._message.data) is memoryview and aio_refcount(<PyObject*> self._message.data) > 1:
            view = self._message.data
            self._message.data = None
            try:
                view.release()
            except BufferError:
                pass  # exported further (numpy, a slice): documented as not tracked
