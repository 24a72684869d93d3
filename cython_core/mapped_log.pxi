# MappedLog: the raw pointers of a log buffer (3 terms + metadata) mapped into this process.

# This process's wake id and the function that sends a wake-up datagram to another process
# (set by aeronio.logbuffer.waker).
cdef int64_t _own_wake_id = 0
cdef object _wake_sender = None
cdef object _local_waker = None
cdef int64_t WAKE_SPACE_BIT = 1LL << 62  # exported to Python as LOG_WAKE_SPACE_BIT
cdef int64_t WAKE_ID_MASK = (1LL << 62) - 1


cdef void _send_wake(int64_t wake_id) noexcept:
    if _wake_sender is not None:
        try:
            _wake_sender(wake_id)
        except Exception:
            pass


cdef void _wake_locally() noexcept:
    if _local_waker is not None:
        try:
            _local_waker()
        except Exception:
            pass


def set_waker(int64_t own_wake_id, object sender, object local) -> None:
    """Install this process's wake id, its wake-up sender and what a wake-up does here
    (aeronio.logbuffer.waker does this)."""
    global _own_wake_id, _wake_sender, _local_waker
    _own_wake_id = own_wake_id
    _wake_sender = sender
    _local_waker = local


# What a log's metadata may say (aeronio/protocol/limits.py, as Aeron's driver checks).
cdef enum:
    LOG_PAGE_MIN_SIZE = 4 * 1024
    LOG_MTU_MAX_LENGTH = 65504


cdef inline bint _parked_elsewhere(char* meta, bint space) noexcept nogil:
    """Whether another process parks for space (or for data) on the log whose metadata is
    `meta`."""
    cdef int i
    cdef int64_t value
    for i in range(LOG_WAKE_SLOT_COUNT):
        value = aio_load_i64(meta + LOG_WAKE_SLOTS_OFFSET + 8 * i)
        if value != 0 and ((value & WAKE_SPACE_BIT) != 0) == space \
                and (value & WAKE_ID_MASK) != _own_wake_id:
            return True
    return False


cdef class MappedLog:
    """Pointers into a mapped log buffer, read from its metadata.

    Holds a reference to the buffer so the mapping outlives every reader and appender of it,
    and pins it (its export held: the owner cannot close or resize it meanwhile).
    """

    cdef readonly object owner
    cdef char* base
    cdef char* meta
    cdef readonly int32_t term_length
    cdef readonly int32_t initial_term_id
    cdef readonly int32_t mtu_length
    cdef readonly int position_bits_to_shift
    cdef readonly Py_ssize_t length
    cdef object _pin

    def __cinit__(self, object buffer):
        """Raises ValueError, saying what is wrong, for a log whose metadata no driver wrote: a
        term length, page size or MTU out of Aeron's range, or a length that is not the log
        length they give (LogBufferDescriptor.computeLogLength). Checked once, here: appenders
        and readers rely on these (an MTU below a header's divides by zero or less)."""
        cdef Py_ssize_t length
        cdef int32_t page_size
        cdef int64_t expected
        self.owner = buffer
        self._pin = memoryview(buffer)
        self.base = buffer_address(self._pin, &length)
        self.length = length
        if length < LOG_META_DATA_LENGTH + PARTITION_COUNT * TERM_MIN_LENGTH:
            raise ValueError(f"log buffer of {length} bytes is too short")
        self.meta = self.base + length - LOG_META_DATA_LENGTH
        self.term_length = aio_get_i32(self.meta + LOG_TERM_LENGTH_OFFSET)
        if not TERM_MIN_LENGTH <= self.term_length <= TERM_MAX_LENGTH \
                or (self.term_length & (self.term_length - 1)) != 0:
            raise ValueError(f"log metadata has an invalid term length {self.term_length}")
        page_size = aio_get_i32(self.meta + LOG_PAGE_SIZE_OFFSET)
        if not LOG_PAGE_MIN_SIZE <= page_size <= TERM_MAX_LENGTH or (page_size & (page_size - 1)):
            raise ValueError(f"log metadata has an invalid page size {page_size}")
        expected = PARTITION_COUNT * <int64_t> self.term_length + LOG_META_DATA_LENGTH
        expected = (expected + page_size - 1) // page_size * page_size
        if length != expected:
            raise ValueError(f"log buffer of {length} bytes is not the {expected} that its term "
                             f"length {self.term_length} and page size {page_size} give")
        self.initial_term_id = aio_get_i32(self.meta + LOG_INITIAL_TERM_ID_OFFSET)
        self.mtu_length = aio_get_i32(self.meta + LOG_MTU_LENGTH_OFFSET)
        if not 2 * HEADER_LENGTH <= self.mtu_length <= LOG_MTU_MAX_LENGTH \
                or self.mtu_length % FRAME_ALIGNMENT:
            raise ValueError(f"log metadata has an invalid MTU {self.mtu_length}")
        self.position_bits_to_shift = 0
        while (1 << self.position_bits_to_shift) < self.term_length:
            self.position_bits_to_shift += 1

    cdef inline char* term(self, int index) noexcept nogil:
        return self.base + index * <Py_ssize_t> self.term_length

    cdef inline char* tail_address(self, int index) noexcept nogil:
        return self.meta + TERM_TAIL_COUNTERS_OFFSET + 8 * index

    cdef inline int32_t active_term_count(self) noexcept nogil:
        return aio_load_i32(self.meta + LOG_ACTIVE_TERM_COUNT_OFFSET)

    cdef int64_t producer_position(self) noexcept nogil:
        """The position of the tail of the active term."""
        cdef int32_t term_count = self.active_term_count()
        cdef int64_t raw_tail = aio_load_i64(self.tail_address(index_by_term_count(term_count)))
        return compute_position(tail_term_id(raw_tail), tail_term_offset(raw_tail, self.term_length),
                                self.position_bits_to_shift, self.initial_term_id)

    cdef bint rotate(self, int32_t term_count, int32_t term_id) noexcept nogil:
        """Move the log to the next term: reset that term's tail, then bump the active term count."""
        cdef int32_t next_term_id = term_id + 1
        cdef int32_t next_term_count = term_count + 1
        cdef char* next_tail = self.tail_address(index_by_term_count(next_term_count))
        cdef int32_t expected_term_id = next_term_id - PARTITION_COUNT
        cdef int64_t raw_tail
        while True:
            raw_tail = aio_load_i64(next_tail)
            if tail_term_id(raw_tail) != expected_term_id:
                break
            if aio_cas_i64(next_tail, raw_tail, pack_tail(next_term_id, 0)):
                break
        return aio_cas_i32(self.meta + LOG_ACTIVE_TERM_COUNT_OFFSET, term_count, next_term_count)

    cdef void wake_parked(self, bint space) noexcept:
        """Send one wake-up to each other process parked on this log for data (or for space):
        its slot is claimed by CAS, so a parked process is woken once per park and the slot of a
        process that died is cleared by the first writer that finds it. This process's own
        waiters are rung through doorbells."""
        cdef char* slot
        cdef int64_t value
        cdef int i
        for i in range(LOG_WAKE_SLOT_COUNT):
            slot = self.meta + LOG_WAKE_SLOTS_OFFSET + 8 * i
            value = aio_load_i64(slot)
            if value != 0 and ((value & WAKE_SPACE_BIT) != 0) == space \
                    and (value & WAKE_ID_MASK) != _own_wake_id and aio_cas_i64(slot, value, 0):
                _send_wake(value & WAKE_ID_MASK)

    cdef inline void wake_after_append(self) noexcept:
        aio_fence_full()  # the frame's length store must be visible before the slots load
        self.wake_parked(False)

    # The publisher limit, wanted: a conductor that parks must still move the limit once a
    # publisher found no space (try_offer as well as a parked `await offer`) and a consumer then
    # frees some. The publisher that finds no space sets LOG_LIMIT_WANTED (0 -> 1) and wakes the
    # conductor (consumption before that is seen then); the first consumer after clears it
    # (1 -> 0) and wakes the conductor again. So each time a publisher runs out of space the
    # conductor is woken at most twice, by whichever process, and never misses a consumption.

    cdef inline void want_limit(self) noexcept:
        """A publisher found no space: ask for the limit to move (once until a consumer)."""
        if aio_load_i64(self.meta + LOG_LIMIT_WANTED_OFFSET) == 0 \
                and aio_cas_i64(self.meta + LOG_LIMIT_WANTED_OFFSET, 0, 1):
            self.wake_conductor()

    cdef inline void wake_conductor_after_consume(self) noexcept:
        """Wake the conductor to see this consumption if a publisher wants the limit to move,
        or if another process parks for space on this log (a conductor parked on an image, to
        send its status message)."""
        aio_fence_full()  # the position's store must be visible before these loads
        if aio_load_i64(self.meta + LOG_LIMIT_WANTED_OFFSET) != 0 \
                and aio_cas_i64(self.meta + LOG_LIMIT_WANTED_OFFSET, 1, 0):
            self.wake_conductor()
        elif _parked_elsewhere(self.meta, True):
            self.wake_conductor()

    cdef void wake_conductor(self) noexcept:
        cdef int64_t conductor = aio_load_i64(self.meta + LOG_CONDUCTOR_WAKE_ID_OFFSET)
        if conductor == _own_wake_id:
            _wake_locally()
        elif conductor != 0:
            _send_wake(conductor)

    def wake_data_waiters(self) -> None:
        """Wake the processes parked for data on this log (after a receiver rebuilt more)."""
        self.wake_after_append()

    def wake_space_waiters(self) -> None:
        """Wake the processes parked for space on this log (after the limit moved)."""
        aio_fence_full()
        self.wake_parked(True)

    def set_conductor_wake_id(self, int64_t wake_id) -> None:
        aio_store_i64(self.meta + LOG_CONDUCTOR_WAKE_ID_OFFSET, wake_id)

    def producer_position_volatile(self) -> int:
        """The producer (tail) position, read with acquire semantics."""
        return self.producer_position()

    def rotate_log(self, int32_t term_count, int32_t term_id) -> bool:
        return self.rotate(term_count, term_id)

    def end_of_stream_position(self) -> int:
        return aio_load_i64(self.meta + LOG_END_OF_STREAM_POSITION_OFFSET)

    def set_end_of_stream_position(self, int64_t position) -> None:
        aio_store_i64(self.meta + LOG_END_OF_STREAM_POSITION_OFFSET, position)

    def is_connected(self) -> bool:
        return aio_load_i32(self.meta + LOG_IS_CONNECTED_OFFSET) == 1

    def set_connected(self, bint connected) -> None:
        aio_store_i32(self.meta + LOG_IS_CONNECTED_OFFSET, 1 if connected else 0)

    def is_publication_revoked(self) -> bool:
        return (aio_load_i32(self.meta + LOG_IS_PUBLICATION_REVOKED_OFFSET) & 0xFF) != 0

    def clean(self, int64_t from_position, int64_t to_position) -> int:
        """Zero the bytes in [from_position, to_position), never crossing a term; returns bytes zeroed.

        The first word of the range is zeroed last with release semantics so a concurrent reader
        never sees a stale frame length after a zeroed body.
        """
        cdef int32_t mask = self.term_length - 1
        cdef int32_t offset = <int32_t> (from_position & mask)
        cdef int64_t length = to_position - from_position
        cdef int index = index_by_position(from_position, self.position_bits_to_shift)
        cdef char* start
        if length <= 0:
            return 0
        if length > self.term_length - offset:
            length = self.term_length - offset
        start = self.term(index) + offset
        with nogil:
            if length > 8:
                memset(start + 8, 0, length - 8)
                aio_store_i64(start, 0)
            else:
                memset(start, 0, length)
        return length
