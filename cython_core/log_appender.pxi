# LogAppender: appends messages to a publication's log (Aeron's TermAppender and the offer
# logic of ConcurrentPublication / ExclusivePublication).
#
# A concurrent appender reserves space with an atomic fetch-add on the active term's tail (many
# writers, threads or processes). An exclusive appender owns the tail and stores it with release
# semantics. Each frame is written with a negative length, then its body, then its positive length
# (release). A message that does not fit the rest of the term pads the term out, rotates the log
# and returns ADMIN_ACTION.

cdef Py_ssize_t _batch_message_length(object message, Py_ssize_t i) except -1:
    """The length in bytes of message `i` of a batch (not its items: an array('i') of 3000 is
    12000 bytes); BufferError when its bytes are not one C-contiguous block, as try_offer would
    refuse it only after the messages before it went in."""
    cdef Py_buffer view
    cdef Py_ssize_t length
    cdef bint contiguous
    if type(message) is bytes:
        return PyBytes_GET_SIZE(message)
    PyObject_GetBuffer(message, &view, PyBUF_FULL_RO)
    length, contiguous = view.len, PyBuffer_IsContiguous(&view, b'C')
    PyBuffer_Release(&view)
    if not contiguous:
        raise BufferError(f"message {i} ({type(message).__name__}) is not C-contiguous: its "
                          f"bytes are not one block; nothing was appended")
    return length


cdef class LogAppender:
    cdef readonly MappedLog log
    cdef readonly bint exclusive
    cdef readonly bint is_closed
    cdef readonly int32_t max_payload_length
    cdef readonly int32_t max_message_length
    cdef readonly int64_t max_possible_position
    cdef readonly int32_t session_id
    cdef readonly int32_t stream_id
    cdef char default_header[HEADER_LENGTH]
    cdef object _limit_pin  # the buffer _limit is in, pinned
    cdef char* _limit
    cdef readonly Doorbell data_doorbell
    cdef readonly Doorbell consumed_doorbell
    cdef bint _waiting_for_space
    # Exclusive writer state (unused by a concurrent appender).
    cdef int32_t _term_offset
    cdef int32_t _term_id
    cdef int _index
    cdef int64_t _term_begin

    def __cinit__(self, MappedLog log, object limit_buffer, Py_ssize_t limit_offset,
                  bint exclusive=False, Doorbell data_doorbell=None,
                  Doorbell consumed_doorbell=None):
        cdef Py_ssize_t limit_length
        self.log = log
        self.exclusive = exclusive
        self.is_closed = False
        self.data_doorbell = data_doorbell
        self.consumed_doorbell = consumed_doorbell
        self._waiting_for_space = False
        memcpy(self.default_header, log.meta + LOG_DEFAULT_FRAME_HEADER_OFFSET, HEADER_LENGTH)
        self.session_id = aio_get_i32(self.default_header + SESSION_ID_FIELD_OFFSET)
        self.stream_id = aio_get_i32(self.default_header + STREAM_ID_FIELD_OFFSET)
        self.max_payload_length = log.mtu_length - HEADER_LENGTH
        self.max_message_length = min(log.term_length // 8, MAX_MESSAGE_LENGTH)
        self.max_possible_position = (<int64_t> log.term_length) << 31
        self._limit_pin = memoryview(limit_buffer)
        self._limit = buffer_address(self._limit_pin, &limit_length)
        if limit_offset < 0 or limit_offset + 8 > limit_length or limit_offset % 8:
            raise ValueError(f"limit_offset {limit_offset} is not an aligned int64 in the buffer")
        self._limit += limit_offset
        cdef int32_t term_count = log.active_term_count()
        cdef int64_t raw_tail = aio_load_i64(log.tail_address(index_by_term_count(term_count)))
        self._index = index_by_term_count(term_count)
        self._term_id = tail_term_id(raw_tail)
        self._term_offset = tail_term_offset(raw_tail, log.term_length)
        self._term_begin = compute_position(self._term_id, 0, log.position_bits_to_shift,
                                            log.initial_term_id)

    def close(self) -> None:
        """Further offers and claims return CLOSED."""
        self.is_closed = True
        self._space_found()

    @property
    def position(self) -> int:
        """The position the next message would be appended at."""
        return self._position()

    cdef inline int64_t _position(self) noexcept:
        if self.exclusive:
            return self._term_begin + self._term_offset
        return self.log.producer_position()

    @property
    def position_limit(self) -> int:
        """The limit as the driver last moved it. Read with less than a quarter of a term left
        before it, it asks for the limit to move as consumers free space, as a refused offer
        does: a parked conductor sees their consumption only when asked (or at its timer)."""
        cdef int64_t limit = aio_load_i64(self._limit)
        if limit - self._position() < (self.log.term_length >> 2):
            self.log.want_limit()
        return limit

    # -- reservation ------------------------------------------------------------------------

    cdef int64_t _begin(self, int32_t* term_count, int32_t* term_id, int64_t* position) noexcept:
        """Find where the next append starts; returns the raw term offset or -1 for ADMIN_ACTION."""
        cdef int64_t raw_tail, term_offset
        if self.exclusive:
            term_id[0] = self._term_id
            term_count[0] = self._term_id - self.log.initial_term_id
            position[0] = self._term_begin + self._term_offset
            return self._term_offset
        term_count[0] = self.log.active_term_count()
        raw_tail = aio_load_i64(self.log.tail_address(index_by_term_count(term_count[0])))
        term_offset = raw_tail & 0xFFFFFFFFLL
        term_id[0] = tail_term_id(raw_tail)
        if term_count[0] != <int32_t> (<uint32_t> term_id[0] - <uint32_t> self.log.initial_term_id):
            return -1
        position[0] = compute_position(term_id[0], 0, self.log.position_bits_to_shift,
                                       self.log.initial_term_id) + term_offset
        return term_offset

    cdef int32_t _reserve(self, int32_t term_count, int32_t* term_id, int32_t aligned_length,
                          int32_t* term_offset) except? -2:
        """Claim `aligned_length` bytes of the active term; returns the resulting offset, or -1 if
        the term is full (after padding it out). term_id[0] becomes the term the space is in: a
        concurrent writer stalled across rotations finds a newer term in that partition and
        writes (or pads) there, leaving no hole."""
        cdef int index = index_by_term_count(term_count)
        cdef int64_t raw_tail, resulting
        if self.exclusive:
            term_offset[0] = self._term_offset
            resulting = <int64_t> self._term_offset + aligned_length
            aio_store_i64(self.log.tail_address(index), pack_tail(term_id[0], <int32_t> min(resulting, 0x7FFFFFFF)))
        else:
            raw_tail = aio_fetch_add_i64(self.log.tail_address(index), aligned_length)
            term_id[0] = tail_term_id(raw_tail)
            if (raw_tail & 0xFFFFFFFFLL) >= self.log.term_length:
                term_offset[0] = self.log.term_length
                return -1
            term_offset[0] = <int32_t> (raw_tail & 0xFFFFFFFFLL)
            resulting = <int64_t> term_offset[0] + aligned_length
        if resulting > self.log.term_length:
            self._pad_to_end(self.log.term(index), term_offset[0], term_id[0])
            return -1
        return <int32_t> resulting

    cdef void _pad_to_end(self, char* term, int32_t term_offset, int32_t term_id) noexcept nogil:
        cdef int32_t length = self.log.term_length - term_offset
        if length > 0:
            write_header(term + term_offset, self.default_header, length, UNFRAGMENTED, HDR_TYPE_PAD,
                         term_offset, term_id)
            aio_store_i32(term + term_offset, length)

    cdef int64_t _new_position(self, int32_t term_count, int32_t term_id, int64_t position,
                               int64_t term_offset, int32_t resulting) noexcept:
        """Turn an append result into a position, or rotate the log on a full term."""
        cdef int64_t term_begin = compute_position(term_id, 0, self.log.position_bits_to_shift,
                                                   self.log.initial_term_id)
        self._space_found()
        if resulting > 0:
            if self.exclusive:
                self._term_offset = resulting
            return term_begin + resulting
        if self.exclusive:
            return self._rotate_exclusive()
        if term_begin + self.log.term_length >= self.max_possible_position:
            return MAX_POSITION_EXCEEDED_CODE
        self.log.rotate(<int32_t> (<uint32_t> term_id - <uint32_t> self.log.initial_term_id), term_id)
        return ADMIN_ACTION_CODE

    cdef int64_t _rotate_exclusive(self) noexcept nogil:
        """An exclusive writer's full term: the next term becomes the active one (ADMIN_ACTION),
        or MAX_POSITION_EXCEEDED when the log has no term after it."""
        cdef int32_t term_count = self._term_id - self.log.initial_term_id
        if self._term_begin + self.log.term_length >= self.max_possible_position:
            return MAX_POSITION_EXCEEDED_CODE
        self._index = (self._index + 1) % PARTITION_COUNT
        self._term_id += 1
        self._term_offset = 0
        self._term_begin += self.log.term_length
        aio_store_i64(self.log.tail_address(self._index), pack_tail(self._term_id, 0))
        aio_store_i32(self.log.meta + LOG_ACTIVE_TERM_COUNT_OFFSET, term_count + 1)
        return ADMIN_ACTION_CODE

    cdef int64_t _back_pressure_status(self, int64_t position, Py_ssize_t length) noexcept:
        if position + length >= self.max_possible_position:
            return MAX_POSITION_EXCEEDED_CODE
        # Until the next successful append, readers in this process wake the conductor when they
        # consume, so the limit moves without waiting for the conductor's idle period.
        if not self._waiting_for_space and self.consumed_doorbell is not None:
            self._waiting_for_space = True
            self.consumed_doorbell.waiters += 1
        self.log.want_limit()
        if aio_load_i32(self.log.meta + LOG_IS_PUBLICATION_REVOKED_OFFSET) & 0xFF:
            return CLOSED_CODE  # another holder revoked it: its stream ended for good
        if aio_load_i32(self.log.meta + LOG_IS_CONNECTED_OFFSET) == 1:
            return BACK_PRESSURED_CODE
        return NOT_CONNECTED_CODE

    cdef inline void _space_found(self) noexcept:
        if self._waiting_for_space:
            self._waiting_for_space = False
            self.consumed_doorbell.waiters -= 1

    # -- offer ------------------------------------------------------------------------------

    cdef int64_t _append(self, const char* data, Py_ssize_t length) except? -100:
        cdef int32_t term_count, term_id, term_offset, resulting, frame_length, aligned
        cdef int64_t position, raw_offset, result
        cdef char* frame
        cdef char* term
        if self.is_closed:
            return CLOSED_CODE
        if length > self.max_message_length:
            raise MessageTooLargeError(
                f"message length {length} exceeds max_message_length {self.max_message_length} "
                f"(an eighth of the term length {self.log.term_length}, at most 16 MiB): raise "
                f"the term length, `term-length=` on the channel or the driver's "
                f"ipc_term_length (IPC) / term_length (UDP)")
        raw_offset = self._begin(&term_count, &term_id, &position)
        if raw_offset < 0:
            return ADMIN_ACTION_CODE
        if position >= aio_load_i64(self._limit):
            return self._back_pressure_status(position, length)
        term = self.log.term(index_by_term_count(term_count))
        if length <= self.max_payload_length:
            frame_length = <int32_t> length + HEADER_LENGTH
            aligned = align_frame(frame_length)
            resulting = self._reserve(term_count, &term_id, aligned, &term_offset)
            if resulting > 0:
                frame = term + term_offset
                write_header(frame, self.default_header, frame_length, UNFRAGMENTED, HDR_TYPE_DATA,
                             term_offset, term_id)
                memcpy(frame + HEADER_LENGTH, data, length)
                aio_store_i32(frame, frame_length)
        else:
            resulting = self._append_fragmented(term, term_count, &term_id, data, length, &term_offset)
        result = self._new_position(term_count, term_id, position, raw_offset, resulting)
        if result > 0:
            self._wake_readers()
        return result

    cdef inline void _wake_readers(self) noexcept:
        if self.data_doorbell is not None and self.data_doorbell.waiters > 0:
            try:
                self.data_doorbell.ring()
            except Exception:
                pass
        self.log.wake_after_append()

    cdef int32_t _append_fragmented(self, char* term, int32_t term_count, int32_t* term_id,
                                    const char* data, Py_ssize_t length,
                                    int32_t* term_offset) except? -2:
        """Reserve every fragment of a message as one block, then write them B ... E."""
        cdef int32_t max_payload = self.max_payload_length
        cdef Py_ssize_t full = length // max_payload
        cdef int32_t remaining = <int32_t> (length % max_payload)
        cdef int32_t last = align_frame(remaining + HEADER_LENGTH) if remaining > 0 else 0
        cdef int32_t required = <int32_t> (full * (max_payload + HEADER_LENGTH)) + last
        cdef int32_t resulting = self._reserve(term_count, term_id, required, term_offset)
        cdef int32_t offset, chunk, frame_length
        cdef Py_ssize_t left = length
        cdef uint8_t flags = BEGIN_FRAG_FLAG
        cdef char* frame
        if resulting < 0:
            return resulting
        offset = term_offset[0]
        while left > 0:
            chunk = <int32_t> (left if left < max_payload else max_payload)
            if chunk == left:
                flags |= END_FRAG_FLAG
            frame_length = chunk + HEADER_LENGTH
            frame = term + offset
            write_header(frame, self.default_header, frame_length, flags, HDR_TYPE_DATA, offset, term_id[0])
            memcpy(frame + HEADER_LENGTH, data + (length - left), chunk)
            aio_store_i32(frame, frame_length)
            left -= chunk
            offset += align_frame(frame_length)
            flags = 0
        return resulting

    cpdef int64_t try_offer(self, object buffer, Py_ssize_t offset=0, object length=None) except? -100:
        """Append a message; returns the new position or a negative Aeron result code."""
        cdef Py_buffer view
        cdef bint whole = length is None
        cdef Py_ssize_t n = 0 if whole else length  # first: its __index__ may run any code
        if type(buffer) is bytes:  # immutable and held by the caller: no buffer to acquire
            return self._offer_range(PyBytes_AS_STRING(buffer), PyBytes_GET_SIZE(buffer), offset,
                                     whole, n)
        if type(buffer) is bytearray:  # copied before any Python code runs: nothing resizes it
            return self._offer_range(PyByteArray_AS_STRING(buffer), PyByteArray_GET_SIZE(buffer),
                                     offset, whole, n)
        PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
        try:
            return self._offer_range(<const char*> view.buf, view.len, offset, whole, n)
        finally:
            PyBuffer_Release(&view)

    cdef inline int64_t _offer_range(self, const char* data, Py_ssize_t size, Py_ssize_t offset,
                                     bint whole, Py_ssize_t n) except? -100:
        """Append `n` bytes (`whole`: the rest) from `offset` of the `size` bytes at `data`."""
        if offset < 0 or offset > size:
            raise ValueError(f"offset {offset} is outside the buffer of {size} bytes")
        if whole:
            n = size - offset
        elif n < 0 or n > size - offset:  # not offset + n: it overflows for a huge n
            raise ValueError(f"length {n} at offset {offset} overruns the buffer of {size} bytes")
        return self._append(data + offset, n)

    # -- block ------------------------------------------------------------------------------

    def try_offer_block(self, object block) -> int:
        """Append whole frames copied from another log of the same term length and initial term
        id (an archive's replay): `block` must start at this publication's term offset and end
        within its term. Each frame gets this publication's session and stream id; the first
        frame's length is stored last, so readers see the block whole. Returns the new position
        or a negative result code (exclusive publications only)."""
        cdef Py_buffer view
        cdef int32_t term_count, term_id, resulting, offset, frame_length, first_length
        cdef int64_t position, raw_offset, result, aligned
        cdef char* source
        if not self.exclusive:
            raise TypeError("offer_block needs an exclusive publication")
        if self.is_closed:
            return CLOSED_CODE
        PyObject_GetBuffer(block, &view, PyBUF_SIMPLE)
        try:
            raw_offset = self._begin(&term_count, &term_id, &position)
            if view.len <= 0 or view.len % FRAME_ALIGNMENT != 0:
                raise ValueError(f"block length {view.len} must be a positive multiple of {FRAME_ALIGNMENT}")
            if raw_offset == self.log.term_length:  # the last block filled the term: rotate
                return self._new_position(term_count, term_id, position, raw_offset, -1)
            if raw_offset + view.len > self.log.term_length:
                raise ValueError(f"block of {view.len} bytes at term offset {raw_offset} "
                                 f"overruns the term of {self.log.term_length}")
            if aio_get_i32(<char*> view.buf + TERM_OFFSET_FIELD_OFFSET) != raw_offset:
                raise ValueError(f"block starts at term offset {aio_get_i32(<char*> view.buf + TERM_OFFSET_FIELD_OFFSET)}, "
                                 f"the publication is at {raw_offset}")
            source = <char*> view.buf
            first_length = aio_get_i32(source)  # read once: checked here, stored last
            offset = 0
            while offset < view.len:  # whole frames only, tiling the block
                frame_length = aio_get_i32(source + offset) if offset else first_length
                aligned = frame_extent(frame_length, offset, view.len)
                if aligned <= 0:
                    raise ValueError(f"frame at block offset {offset} has length {frame_length}: "
                                     f"not a whole frame within the block of {view.len}")
                offset += aligned
            if position + view.len > aio_load_i64(self._limit):
                return self._back_pressure_status(position, view.len)
            resulting = self._copy_block(source, <int32_t> view.len, first_length)
        finally:
            PyBuffer_Release(&view)
        result = self._new_position(term_count, term_id, position, raw_offset, resulting)
        if result > 0:
            self._wake_readers()
        return result

    cdef int32_t _copy_block(self, const char* source, int32_t length,
                             int32_t first_length) noexcept nogil:
        """Copy `length` bytes of whole frames (checked to tile them and to fit the term, within
        the limit) to an exclusive writer's term offset: the frames with this publication's
        session, stream and term ids, then the first frame's length (read once, `first_length`),
        so readers see the block whole, then the tail; returns the resulting term offset.

        The tail last (Aeron's appendBlock stores it first): a writer killed in the copy leaves
        its bytes past the tail, where the driver neither unblocks nor ends the stream, so no
        header of a torn block is padded over and no payload read as frames."""
        cdef char* frame = self.log.term(self._index) + self._term_offset
        cdef int32_t offset = 0
        cdef int64_t aligned = align_frame(first_length)
        cdef int32_t resulting = self._term_offset + length
        memcpy(frame + 4, source + 4, length - 4)
        while True:  # over the copy, bounded again: the source may change under a mapping
            aio_put_i32(frame + offset + SESSION_ID_FIELD_OFFSET, self.session_id)
            aio_put_i32(frame + offset + STREAM_ID_FIELD_OFFSET, self.stream_id)
            aio_put_i32(frame + offset + TERM_ID_FIELD_OFFSET, self._term_id)
            offset += <int32_t> aligned
            if offset >= length:
                break
            aligned = frame_extent(aio_get_i32(frame + offset), offset, length)
            if aligned <= 0:
                break
        aio_store_i32(frame, first_length)
        aio_store_i64(self.log.tail_address(self._index), pack_tail(self._term_id, resulting))
        return resulting

    # -- claim ------------------------------------------------------------------------------

    def try_claim(self, Py_ssize_t length):
        """Reserve one unfragmented frame to be written in place; a BufferClaim or a result code."""
        cdef int32_t term_count, term_id, term_offset, resulting, frame_length
        cdef int64_t position, raw_offset, result
        cdef char* term
        if length < 0 or length > self.max_payload_length:
            raise MessageTooLargeError(
                f"claim length {length} must be within 0..max_payload_length {self.max_payload_length}")
        if self.is_closed:
            return CLOSED_CODE
        raw_offset = self._begin(&term_count, &term_id, &position)
        if raw_offset < 0:
            return ADMIN_ACTION_CODE
        if position >= aio_load_i64(self._limit):
            return self._back_pressure_status(position, length)
        term = self.log.term(index_by_term_count(term_count))
        frame_length = <int32_t> length + HEADER_LENGTH
        resulting = self._reserve(term_count, &term_id, align_frame(frame_length), &term_offset)
        if resulting > 0:
            write_header(term + term_offset, self.default_header, frame_length, UNFRAGMENTED,
                         HDR_TYPE_DATA, term_offset, term_id)
        result = self._new_position(term_count, term_id, position, raw_offset, resulting)
        if result < 0:
            return result
        return BufferClaim._create(self, index_by_term_count(term_count), term_offset, frame_length, result)

    # -- batch ------------------------------------------------------------------------------

    def offer_batch(self, object messages, Py_ssize_t start=0) -> int:
        """Append messages[start:] until the limit or the term end; returns how many were appended
        (> 0), or a negative result code when none was.

        `messages` is a 2-D C-contiguous uint8 array (one fixed-size record per row, appended by one
        reservation) or a sequence of bytes-like objects; every message is checked before anything
        is appended: its length in bytes (an array('i') of 3000 items is 12000 bytes), and that its
        bytes are one C-contiguous block.
        """
        cdef int64_t last = 0
        return self._offer_batch(messages, start, &last)

    def offer_batch_positioned(self, object messages, Py_ssize_t start=0) -> tuple:
        """(offer_batch's result, the position after the last message this call appended: its
        own, whatever other threads append meanwhile; 0 when none was)."""
        cdef int64_t last = 0
        cdef int64_t result = self._offer_batch(messages, start, &last)
        return result, last

    cdef int64_t _offer_batch(self, object messages, Py_ssize_t start,
                              int64_t* last) except? -100:
        if self.is_closed:
            return CLOSED_CODE
        if hasattr(messages, "ndim") and messages.ndim == 2:
            return self._offer_records(messages, start, last)
        cdef Py_ssize_t count = len(messages)
        cdef Py_ssize_t i, length
        cdef int64_t result
        if start < 0 or start > count:
            raise ValueError(f"start {start} is outside 0..{count}")
        for i in range(start, count):
            length = _batch_message_length(messages[i], i)
            if length > self.max_message_length:
                raise MessageTooLargeError(
                    f"message {i} of {length} bytes exceeds max_message_length "
                    f"{self.max_message_length}; nothing was appended")
        for i in range(start, count):
            result = self.try_offer(messages[i])
            if result < 0:
                return (i - start) if i > start else result
            last[0] = result
        return count - start

    cdef int64_t _offer_records(self, object records, Py_ssize_t start,
                                int64_t* last) except? -100:
        cdef const unsigned char[:, ::1] rows = records
        cdef Py_ssize_t count = rows.shape[0], size = rows.shape[1], n, i
        cdef int32_t term_count, term_id, term_offset, resulting, frame_length, aligned, offset
        cdef int64_t position, raw_offset, limit, result
        cdef char* term
        cdef char* frame
        if start < 0 or start > count:
            raise ValueError(f"start {start} is outside 0..{count}")
        if start == count:
            return 0
        if size > self.max_payload_length:
            raise MessageTooLargeError(
                f"record size {size} exceeds max_payload_length {self.max_payload_length} (the "
                f"mtu less the 32-byte header): raise `mtu=` on the channel, or offer larger "
                f"messages one by one (they are fragmented)")
        frame_length = <int32_t> size + HEADER_LENGTH
        aligned = align_frame(frame_length)
        raw_offset = self._begin(&term_count, &term_id, &position)
        if raw_offset < 0:
            return ADMIN_ACTION_CODE
        limit = aio_load_i64(self._limit)
        if position >= limit:
            return self._back_pressure_status(position, size)
        # As many records as start below the limit and fit the rest of the term (at least one).
        n = min(count - start, (limit - position + aligned - 1) // aligned)
        if raw_offset < self.log.term_length:
            n = min(n, max(1, (self.log.term_length - raw_offset) // aligned))
        term = self.log.term(index_by_term_count(term_count))
        resulting = self._reserve(term_count, &term_id, <int32_t> (n * aligned), &term_offset)
        if resulting > 0:
            with nogil:
                offset = term_offset
                for i in range(start, start + n):
                    frame = term + offset
                    write_header(frame, self.default_header, frame_length, UNFRAGMENTED,
                                 HDR_TYPE_DATA, offset, term_id)
                    memcpy(frame + HEADER_LENGTH, &rows[i, 0], size)
                    aio_store_i32(frame, frame_length)
                    offset += aligned
        result = self._new_position(term_count, term_id, position, raw_offset, resulting)
        if result < 0:
            return result
        last[0] = result
        self._wake_readers()
        return n


cdef class BufferClaim:
    """A frame reserved in the log by try_claim: write `buffer`, then commit() or abort()."""

    cdef LogAppender _appender
    cdef char* _frame
    cdef readonly int32_t frame_length
    cdef readonly int32_t term_id
    cdef readonly int64_t position
    cdef bint _done
    cdef object _buffer

    @staticmethod
    cdef BufferClaim _create(LogAppender appender, int index, int32_t term_offset,
                             int32_t frame_length, int64_t position):
        cdef BufferClaim claim = BufferClaim.__new__(BufferClaim)
        cdef MappedLog log = appender.log
        cdef Py_ssize_t start = index * <Py_ssize_t> log.term_length + term_offset + HEADER_LENGTH
        claim._appender = appender
        claim._frame = log.term(index) + term_offset
        claim.frame_length = frame_length
        claim.term_id = aio_get_i32(claim._frame + TERM_ID_FIELD_OFFSET)
        claim.position = position
        claim._done = False
        claim._buffer = memoryview(log.owner).cast("B")[start:start + frame_length - HEADER_LENGTH]
        return claim

    @property
    def buffer(self) -> memoryview:
        """The writable payload of the claimed frame."""
        if self._done:
            raise ClaimError("the claim was already committed or aborted")
        return self._buffer

    @property
    def length(self) -> int:
        return self.frame_length - HEADER_LENGTH

    def _finish(self):
        if self._done:
            raise ClaimError("the claim was already committed or aborted")
        self._done = True
        self._buffer.release()

    cdef inline bint _still_ours(self) noexcept:
        return aio_get_i32(self._frame + TERM_ID_FIELD_OFFSET) == self.term_id

    def commit(self) -> None:
        """Publish the frame: swap its length from negative to positive (release).

        Raises ClaimError when the claim was held past the unblock timeout and the driver turned
        it into padding: the message is lost, and no other frame is touched.
        """
        self._finish()
        if not (self._still_ours() and aio_cas_i32(self._frame, -self.frame_length, self.frame_length)
                and not is_padding(self._frame)):
            raise ClaimError("the claim was held past the publication unblock timeout and was "
                             "turned into padding; its message is lost")
        self._appender._wake_readers()

    def abort(self) -> None:
        """Turn the frame into padding that readers skip (nothing to do if already unblocked)."""
        self._finish()
        if self._still_ours() and aio_load_i32(self._frame) == -self.frame_length:
            self._frame[TYPE_FIELD_OFFSET] = <char> HDR_TYPE_PAD
            self._frame[TYPE_FIELD_OFFSET + 1] = 0
            aio_cas_i32(self._frame, -self.frame_length, self.frame_length)

    @property
    def is_done(self) -> bool:
        return self._done
