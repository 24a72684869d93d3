# ImageReader: consumes one image (one publication session's log) and advances its subscriber
# position (Aeron's Image with TermReader). Handlers get memoryviews into the term that are valid
# only during the call (the reader points the same view at the next fragment when the handler
# kept no reference to it: see aeronio_cpython.h). A handler that is not callable, or a
# controlled handler's result that is not an action, consumes nothing: TypeError or ValueError. A message poll_messages began and could not
# finish (its first fragments consumed into the reader's assembly, as flow control needs) is the
# first thing every read of the image hands out, whole ("The assembly" below). An exception
# from a handler propagates after the position has moved past the fragment that raised it. A
# corrupt frame (a length below a header's, or running past the term) stops every read before
# it: what came before is delivered, and the read that starts at it raises AeronError naming its
# offset and length.

import numpy as _np

cdef enum:
    LENT_PUBLISH_BYTES = 16384  # see ImageReader._view_message
    ACTION_ABORT = 1
    ACTION_BREAK = 2
    ACTION_COMMIT = 3
    ACTION_CONTINUE = 4
    ACTION_INVALID = -1  # what _action_of makes of anything but None or one of the four


cdef inline int _check_handler(object handler) except -1:
    """A handler that cannot be called is refused before a read consumes anything."""
    if not PyCallable_Check(handler):
        raise TypeError(f"handler must be callable, not {type(handler).__name__}")
    return 0


cdef inline int _action_of(object result) noexcept:
    """A controlled handler's result as its action (None: CONTINUE), ACTION_INVALID if it is not
    one (a bool too: True is 1, ABORT, and would hold the reader at that fragment forever)."""
    if result is None:
        return ACTION_CONTINUE
    if type(result) is bool or not isinstance(result, int) \
            or not ACTION_ABORT <= result <= ACTION_CONTINUE:
        return ACTION_INVALID
    return <int> result


cdef inline object _invalid_action(object result):
    return ValueError(f"controlled_poll handler returned {result!r}, not a ControlledPollAction: "
                      "its fragment is left unconsumed")


cdef class FragmentBatch:
    """The fragments of one batch_poll over one image, as numpy arrays over the term.

    `term` is the term buffer (uint8); `offsets[i]` and `lengths[i]` locate fragment i's payload
    in it, `flags[i]` are its B/E flags. Valid only inside the batch handler.
    """

    cdef readonly object term
    cdef readonly object offsets
    cdef readonly object lengths
    cdef readonly object flags
    cdef readonly int32_t session_id
    cdef readonly int32_t term_id
    cdef readonly int64_t position
    cdef object _log_view
    cdef Py_ssize_t _term_base
    cdef int32_t _uniform_length
    cdef bint _contiguous

    def __len__(self):
        return len(self.offsets)

    def messages(self) -> list:
        """Each fragment's payload as a memoryview."""
        cdef object view = memoryview(self.term)
        return [view[o:o + n] for o, n in zip(self.offsets.tolist(), self.lengths.tolist())]

    def records(self, object dtype):
        """The payloads as a structured array of `dtype`: a view over the term when every payload
        has the dtype's size and the frames are evenly spaced, otherwise a copy."""
        dtype = _np.dtype(dtype)
        count = len(self.offsets)
        if count == 0:
            return _np.empty(0, dtype=dtype)
        if self._uniform_length != dtype.itemsize:
            raise ValueError(f"payload lengths differ from the record size {dtype.itemsize}")
        if self._contiguous:
            # Frames back to back: a read-only strided view straight over the log.
            return _np.ndarray((count,), dtype, self._log_view,
                               self._term_base + self.offsets[0],
                               (align_frame(dtype.itemsize + HEADER_LENGTH),))
        rows = self.offsets[:, None] + _np.arange(dtype.itemsize)[None, :]
        return self.term[rows].copy().view(dtype).reshape(count)


cdef class ImageReader:
    cdef readonly MappedLog log
    cdef readonly int32_t session_id
    cdef readonly int32_t stream_id
    cdef object _position_pin  # the buffer _position is in, pinned
    cdef char* _position
    cdef readonly Header header
    cdef object _view
    cdef object _array
    cdef object _fragment
    cdef readonly Doorbell consumed_doorbell
    cdef bytearray _assembly
    cdef bint _assembling
    cdef int64_t _next_fragment_position
    cdef int64_t _assembly_start  # where the assembly's message begins
    cdef int64_t _end_position  # after the assembly's END, once _take_assembled found it
    cdef int64_t _lent_end  # the end of a message lent out in place, consumed at the next read
    cdef object _batch_offsets
    cdef object _batch_lengths
    cdef object _batch_flags
    cdef bint _closed
    cdef int64_t _final_position  # where _position points once closed

    def __cinit__(self, MappedLog log, object position_buffer, Py_ssize_t position_offset,
                  Doorbell consumed_doorbell=None):
        cdef Py_ssize_t length
        self.log = log
        self._position_pin = memoryview(position_buffer)
        self._position = buffer_address(self._position_pin, &length)
        if position_offset < 0 or position_offset + 8 > length or position_offset % 8:
            raise ValueError(f"position_offset {position_offset} is not an aligned int64 in the buffer")
        self._position += position_offset
        self.header = Header.__new__(Header)
        self.header.initial_term_id = log.initial_term_id
        self.header._shift = log.position_bits_to_shift
        self._array = _np.asarray(log.owner, dtype=_np.uint8).reshape(-1)
        self._view = memoryview(self._array).toreadonly()
        self.consumed_doorbell = consumed_doorbell
        self._assembly = bytearray()
        self._assembling = False
        self.session_id = aio_get_i32(log.meta + LOG_DEFAULT_FRAME_HEADER_OFFSET + SESSION_ID_FIELD_OFFSET)
        self.stream_id = aio_get_i32(log.meta + LOG_DEFAULT_FRAME_HEADER_OFFSET + STREAM_ID_FIELD_OFFSET)
        self._batch_offsets = _np.empty(0, dtype=_np.int64)

    def close(self) -> None:
        """Stop reading: every poll returns 0 and the position counter is never touched again
        (the driver may hand it to someone else): the position stays where it was, kept here,
        as Aeron's Image keeps its final position."""
        if not self._closed:
            self._final_position = aio_load_i64(self._position)
            self._position = <char*> &self._final_position
        self._closed = True

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def position(self) -> int:
        return aio_load_i64(self._position)

    @position.setter
    def position(self, int64_t value):
        aio_store_i64(self._position, value)

    @property
    def taken_position(self) -> int:
        """Just after the last message taken from the image: the position, or past it the end of
        the message messages(copy=False) lent out (consumed at the image's next read), or before
        it the beginning of the message whose first fragments the assembly holds."""
        cdef int64_t position = aio_load_i64(self._position)
        if self._lent_end > position:
            return self._lent_end
        if self._assembling and position == self._next_fragment_position:
            return self._assembly_start
        return position

    @property
    def is_end_of_stream(self) -> bool:
        """True once the publication has ended and everything before its end was taken (the
        last message may be the one messages(copy=False) lent out; a message whose END never
        came was not)."""
        return self.taken_position >= aio_load_i64(self.log.meta + LOG_END_OF_STREAM_POSITION_OFFSET)

    cdef inline void _advance(self, int64_t new_position) noexcept:
        aio_store_i64(self._position, new_position)
        if self.consumed_doorbell is not None and self.consumed_doorbell.waiters > 0:
            try:
                self.consumed_doorbell.ring()
            except Exception:
                pass
        self.log.wake_conductor_after_consume()

    cdef inline object _fragment_view(self, char* payload, Py_ssize_t start, Py_ssize_t length):
        """A view of `length` bytes at `payload` (offset `start` in the log): the last one handed
        out, re-pointed, unless someone else holds it."""
        if self._fragment is None or not aio_rewrap_view(<PyObject*> self._fragment, NULL, payload, length):
            self._fragment = self._view[start:start + length]
        return self._fragment

    cdef inline int32_t _extent(self, int32_t offset, int32_t frame_length, bint first) except -2:
        """The aligned length of the frame at term offset `offset` (frame_extent: 0 when it is
        not written yet, FRAME_CORRUPT when its length is below a header or runs past the term).
        A corrupt frame stops every read before it, so what came before is delivered and
        consumed; the read that finds it `first` (nothing consumed yet) raises AeronError."""
        cdef int64_t aligned = frame_extent(frame_length, offset, self.log.term_length)
        if aligned == FRAME_CORRUPT and first:
            raise AeronError(
                f"corrupt frame length {frame_length} at term offset {offset} of session "
                f"{self.session_id}, stream {self.stream_id}: the image cannot be read past it")
        return <int32_t> aligned

    @cython.binding(False)
    def poll(self, object handler, int fragment_limit) -> int:
        """Deliver up to fragment_limit fragments as handler(buffer, header); returns the count."""
        _check_handler(handler)
        return self._poll(handler, fragment_limit)

    cdef int _poll(self, object handler, int fragment_limit) except -1:
        """poll, callable from C (a subscription with one image calls it directly)."""
        self._settle()
        if self._closed:
            return 0
        cdef Message message
        if self._assembling and fragment_limit > 0:
            message = self._take_assembled()
            if message is not None:
                self._consume_assembled()
                handler(memoryview(message.data), as_unfragmented(message))
                return 1 + (self._poll(handler, fragment_limit - 1) if fragment_limit > 1 else 0)
            if self._assembling:
                return 0
        cdef int64_t position = aio_load_i64(self._position)
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef Py_ssize_t base = index * <Py_ssize_t> term_length
        cdef int32_t offset = term_offset, frame_offset, frame_length, aligned
        cdef int fragments = 0
        cdef Header header = self.header
        try:
            while fragments < fragment_limit and offset < term_length:
                frame_length = aio_load_i32(term + offset)
                aligned = self._extent(offset, frame_length, offset == term_offset)
                if aligned <= 0:
                    break
                frame_offset = offset
                offset += aligned
                if is_padding(term + frame_offset):
                    continue
                fragments += 1
                header._wrap(term + frame_offset)
                handler(self._fragment_view(term + frame_offset + HEADER_LENGTH,
                                            base + frame_offset + HEADER_LENGTH,
                                            frame_length - HEADER_LENGTH), header)
        finally:
            if offset > term_offset:
                self._advance(position + (offset - term_offset))
        return fragments

    def controlled_poll(self, object handler, int fragment_limit) -> int:
        """Like poll, with the handler returning CONTINUE, BREAK, ABORT or COMMIT (None = CONTINUE)."""
        _check_handler(handler)
        self._settle()
        if self._closed:
            return 0
        if self._assembling and fragment_limit > 0:
            return self._controlled_poll_assembled(handler, fragment_limit)
        return self._controlled_poll(handler, fragment_limit)

    cdef int _controlled_poll_assembled(self, object handler, int fragment_limit) except -1:
        """controlled_poll's first step while the assembly holds a message: it, whole, then the
        log (ABORT leaves the message, the END in the log and the assembly as they are)."""
        cdef Message message = self._take_assembled()
        cdef int action
        cdef object result
        if message is None:
            return 0 if self._assembling else self._controlled_poll(handler, fragment_limit)
        try:
            result = handler(memoryview(message.data), as_unfragmented(message))
        except BaseException:
            self._consume_assembled()
            raise
        action = _action_of(result)
        if action == ACTION_INVALID:
            raise _invalid_action(result)
        if action == ACTION_ABORT:
            return 0
        self._consume_assembled()
        if action == ACTION_BREAK or fragment_limit <= 1:
            return 1
        return 1 + self._controlled_poll(handler, fragment_limit - 1)

    cdef int _controlled_poll(self, object handler, int fragment_limit) except -1:
        """controlled_poll over the log."""
        cdef int64_t position = aio_load_i64(self._position)
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef Py_ssize_t base = index * <Py_ssize_t> term_length
        cdef int32_t offset = term_offset, start = term_offset, frame_offset, frame_length, aligned
        cdef int fragments = 0, action
        cdef Header header = self.header
        cdef object result
        try:
            while fragments < fragment_limit and offset < term_length:
                frame_length = aio_load_i32(term + offset)
                aligned = self._extent(offset, frame_length, offset == start)
                if aligned <= 0:
                    break
                frame_offset = offset
                offset += aligned
                if is_padding(term + frame_offset):
                    continue
                header._wrap(term + frame_offset)
                result = handler(self._fragment_view(term + frame_offset + HEADER_LENGTH,
                                                     base + frame_offset + HEADER_LENGTH,
                                                     frame_length - HEADER_LENGTH), header)
                action = _action_of(result)
                if action == ACTION_ABORT or action == ACTION_INVALID:
                    offset -= aligned
                    if action == ACTION_INVALID:
                        raise _invalid_action(result)
                    break
                fragments += 1
                if action == ACTION_BREAK:
                    break
                if action == ACTION_COMMIT:
                    position += offset - term_offset
                    term_offset = offset
                    self._advance(position)
        finally:
            if offset > term_offset:
                self._advance(position + (offset - term_offset))
        return fragments

    def block_poll(self, object handler, int block_length_limit) -> int:
        """Deliver whole frames (up to block_length_limit bytes, one term at most) as
        handler(block, session_id, term_id); returns the bytes consumed."""
        _check_handler(handler)
        self._settle()
        if self._closed:
            return 0
        self._check_not_assembling("block_poll")
        cdef int64_t position = aio_load_i64(self._position)
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef Py_ssize_t base = index * <Py_ssize_t> term_length
        cdef int32_t limit_offset = <int32_t> min(<int64_t> term_offset + block_length_limit, term_length)
        cdef int32_t resulting = scan_block(term, term_offset, limit_offset, term_length)
        cdef int32_t length = resulting - term_offset
        if length == 0:
            self._extent(term_offset, aio_load_i32(term + term_offset), True)  # raises if corrupt
        else:
            try:
                handler(self._view[base + term_offset:base + resulting], self.session_id,
                        aio_get_i32(term + term_offset + TERM_ID_FIELD_OFFSET))
            finally:
                self._advance(position + length)
        return length

    def batch_poll(self, object handler, int fragment_limit) -> int:
        """Deliver up to fragment_limit fragments of one term as one FragmentBatch to handler(batch);
        returns the count."""
        _check_handler(handler)
        self._settle()
        if not self._closed:
            self._check_not_assembling("batch_poll")
        cdef int64_t position = aio_load_i64(self._position)
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef int32_t offset = term_offset, frame_offset, frame_length, aligned
        cdef int fragments = 0
        cdef FragmentBatch batch
        cdef int32_t uniform_length = -1
        cdef bint contiguous = True
        if self._closed or term_offset >= term_length or aio_load_i32(term + term_offset) <= 0:
            return 0  # nothing new: skip the numpy set-up
        if self._batch_offsets.shape[0] < fragment_limit:
            self._batch_offsets = _np.empty(fragment_limit, dtype=_np.int64)
            self._batch_lengths = _np.empty(fragment_limit, dtype=_np.int32)
            self._batch_flags = _np.empty(fragment_limit, dtype=_np.uint8)
        cdef int64_t[::1] offsets = self._batch_offsets
        cdef int32_t[::1] lengths = self._batch_lengths
        cdef uint8_t[::1] flags = self._batch_flags
        while fragments < fragment_limit and offset < term_length:
            frame_length = aio_load_i32(term + offset)
            aligned = self._extent(offset, frame_length, offset == term_offset)
            if aligned <= 0:
                break
            frame_offset = offset
            offset += aligned
            if is_padding(term + frame_offset):
                continue
            if fragments == 0:
                uniform_length = frame_length - HEADER_LENGTH
            elif uniform_length != frame_length - HEADER_LENGTH:
                uniform_length = -2
            if fragments > 0 and frame_offset != offsets[fragments - 1] - HEADER_LENGTH \
                    + align_frame(lengths[fragments - 1] + HEADER_LENGTH):
                contiguous = False
            offsets[fragments] = frame_offset + HEADER_LENGTH
            lengths[fragments] = frame_length - HEADER_LENGTH
            flags[fragments] = <uint8_t> term[frame_offset + FLAGS_FIELD_OFFSET]
            fragments += 1
        if offset == term_offset:
            return 0
        try:
            if fragments > 0:
                batch = FragmentBatch.__new__(FragmentBatch)
                batch.term = self._array[index * <Py_ssize_t> term_length:(index + 1) * <Py_ssize_t> term_length]
                batch.offsets = self._batch_offsets[:fragments]
                batch.lengths = self._batch_lengths[:fragments]
                batch.flags = self._batch_flags[:fragments]
                batch.session_id = self.session_id
                batch.term_id = aio_get_i32(term + term_offset + TERM_ID_FIELD_OFFSET)
                batch.position = position
                batch._log_view = self._view
                batch._term_base = index * <Py_ssize_t> term_length
                batch._uniform_length = uniform_length
                batch._contiguous = contiguous
                handler(batch)
        finally:
            self._advance(position + (offset - term_offset))
        return fragments

    def poll_messages(self, list out, int fragment_limit) -> int:
        """Append whole messages (copied, fragments reassembled) to `out`; returns fragments read."""
        return self._poll_messages(out, fragment_limit, None)

    cdef int _poll_messages(self, list out, int fragment_limit, list spent) except -1:
        """poll_messages, filling again the Messages of `spent` (a list of Messages handed out
        before, which nobody else sees) that nothing else holds. A message it cannot finish (the
        fragment limit, or the rest not written yet) waits in the assembly, its fragments
        consumed (a publisher or sender must go on to write the rest)."""
        self._settle()
        if self._closed:
            return 0
        cdef int64_t position = aio_load_i64(self._position)
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef int32_t offset = term_offset, frame_offset, frame_length, aligned
        cdef int fragments = 0
        cdef uint8_t flags
        cdef char* payload
        cdef int32_t initial_term_id = self.log.initial_term_id
        cdef int shift = self.log.position_bits_to_shift
        while fragments < fragment_limit and offset < term_length:
            frame_length = aio_load_i32(term + offset)
            aligned = self._extent(offset, frame_length, offset == term_offset)
            if aligned <= 0:
                break
            frame_offset = offset
            offset += aligned
            if is_padding(term + frame_offset):
                if self._assembling:
                    self._drop_assembly()  # a message never holds a PAD: it broke off
                continue
            fragments += 1
            payload = term + frame_offset + HEADER_LENGTH
            flags = <uint8_t> term[frame_offset + FLAGS_FIELD_OFFSET]
            if (flags & UNFRAGMENTED) == UNFRAGMENTED:
                if self._assembling:
                    self._drop_assembly()  # nor a whole message
                out.append(new_message(payload, frame_length - HEADER_LENGTH, term + frame_offset,
                                       initial_term_id, shift, spent))
            elif flags & BEGIN_FRAG_FLAG:
                del self._assembly[:]
                self._assembly += PyBytes_FromStringAndSize(payload, frame_length - HEADER_LENGTH)
                self._assembling = True
                self._assembly_start = position + (frame_offset - term_offset)
                self._next_fragment_position = position + (offset - term_offset)
            elif self._assembling and (frame_offset == 0 or self._next_fragment_position
                                       != position + (frame_offset - term_offset)):
                self._drop_assembly()  # a fragment is missing (an unreliable gap), or a term
                # began (a message lies in one term): drop it
            elif self._assembling:
                self._assembly += PyBytes_FromStringAndSize(payload, frame_length - HEADER_LENGTH)
                self._next_fragment_position = position + (offset - term_offset)
                if flags & END_FRAG_FLAG:
                    out.append(new_message(PyByteArray_AS_STRING(self._assembly),
                                           PyByteArray_GET_SIZE(self._assembly),
                                           term + frame_offset, initial_term_id, shift, spent))
                    self._drop_assembly()
        if offset > term_offset:
            self._advance(position + (offset - term_offset))
        return fragments

    # -- one message at a time, consumed at the next step (subscription.messages(copy=False)) --

    cdef bint _view_message(self, Message out) except -1:
        """Lend `out` the next whole message: `out.data` is a view into the log (re-pointed when
        only `out` holds it) or, for a fragmented message, its bytes reassembled. The message
        lent before is consumed now; this one at the next call or the next read of this image of
        any kind. Padding, and fragments of a message whose beginning is not in the log (a join
        or an unreliable gap), are consumed on the way; those of a message not all written yet
        go into the assembly. False when no whole message is there.

        The subscriber position is stored at every step, just before the message lent now (the
        one lent before, released by the caller, is behind it): so the driver sees a slow reader
        move and never sees it more than the message in hand behind. The wakes that go with a
        store (_advance: a full fence, publishers wanting the limit, processes parked for space)
        come once LENT_PUBLISH_BYTES have been consumed, or when no message is found (the caller
        may park): not per message."""
        if self._closed:
            return False
        cdef Message assembled
        if self._assembling:
            self._settle()  # the assembly's message lent before: consumed now, with it
            if self._assembling:
                assembled = self._take_assembled()
                if assembled is not None:
                    out._become(assembled)
                    self._lent_end = self._end_position
                    return True
                if self._assembling:
                    return False
        cdef int64_t published = aio_load_i64(self._position)
        cdef int64_t position = self._lent_end if self._lent_end > published else published
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef Py_ssize_t base = index * <Py_ssize_t> term_length
        cdef int32_t offset = term_offset, begin = term_offset, frame_length, last, aligned, end
        cdef uint8_t flags
        while offset < term_length:
            frame_length = aio_load_i32(term + offset)
            aligned = self._extent(offset, frame_length, offset == term_offset)
            if aligned <= 0:
                break
            begin = offset
            offset += aligned
            flags = <uint8_t> term[begin + FLAGS_FIELD_OFFSET]
            if is_padding(term + begin) or not (flags & BEGIN_FRAG_FLAG):
                begin = offset
                continue
            if flags & END_FRAG_FLAG:
                if out.data is None or type(out.data) is not memoryview or not aio_rewrap_view(
                        <PyObject*> out.data, <PyObject*> self._array, term + begin + HEADER_LENGTH,
                        frame_length - HEADER_LENGTH):
                    out.data = self._view[base + begin + HEADER_LENGTH:base + begin + frame_length]
                last = begin
                break
            last = self._find_last_fragment(term, offset, &end)
            if last == -1:  # the rest is not written yet: what is, into the assembly (the
                del self._assembly[:]  # position must move on for the rest to come)
                self._assembly += self._reassemble(term, begin, end)
                self._assembling = True
                self._assembly_start = position + (begin - term_offset)
                self._next_fragment_position = position + (end - term_offset)
                offset = begin = end
                break
            if last < -1:  # broken off (unreliable gap): drop it, go on from where it broke
                offset = -last - 2
                begin = offset
                continue
            out.data = self._reassemble(term, begin, end)
            offset = end
            break
        position += begin - term_offset  # where the message starts: all before it is consumed
        if offset == begin:
            self._lent_end = 0
            if position > published:
                self._advance(position)
            return False
        if position - published >= min(LENT_PUBLISH_BYTES, term_length >> 3):
            self._advance(position)
        elif position > published:
            aio_store_i64(self._position, position)
        out._wrap(term + last)
        out.initial_term_id = self.log.initial_term_id
        out._shift = self.log.position_bits_to_shift
        self._lent_end = position + (offset - begin)
        return True

    cdef int32_t _find_last_fragment(self, char* term, int32_t offset, int32_t* end) noexcept:
        """The offset of the END fragment of the message whose BEGIN ends at `offset` (`*end`:
        where that END ends); -1 while a fragment is not written yet (`*end`: where it will be),
        or -(o + 2) when the frame at `o` breaks the message off (a PAD, a BEGIN, or a corrupt
        frame: the caller stops at that one) or the term ends at `o` with no END (a message
        lies in one term)."""
        cdef int32_t aligned
        cdef uint8_t flags
        while offset < self.log.term_length:
            aligned = <int32_t> frame_extent(aio_load_i32(term + offset), offset, self.log.term_length)
            if aligned == 0:
                end[0] = offset
                return -1
            flags = <uint8_t> term[offset + FLAGS_FIELD_OFFSET]
            if aligned < 0 or is_padding(term + offset) or flags & BEGIN_FRAG_FLAG:
                return -(offset + 2)
            if flags & END_FRAG_FLAG:
                end[0] = offset + aligned
                return offset
            offset += aligned
        return -(offset + 2)

    cdef bytes _reassemble(self, char* term, int32_t begin, int32_t end):
        """The payloads of the fragments in [begin, end) (checked by _find_last_fragment), as
        one bytes object. Each length is checked again as it is read: a writer that changed one
        since is an AeronError, never a copy past the bytes or the term."""
        cdef Py_ssize_t length = 0, left
        cdef int32_t offset = begin, frame_length
        while offset < end:
            frame_length = self._fragment_length(term, offset, end)
            length += frame_length - HEADER_LENGTH
            offset += align_frame(frame_length)
        cdef bytes data = PyBytes_FromStringAndSize(NULL, length)
        cdef char* out = data
        offset, left = begin, length
        while offset < end:
            frame_length = self._fragment_length(term, offset, end)
            if frame_length - HEADER_LENGTH > left:
                left = -1
                break
            memcpy(out, term + offset + HEADER_LENGTH, frame_length - HEADER_LENGTH)
            out += frame_length - HEADER_LENGTH
            left -= frame_length - HEADER_LENGTH
            offset += align_frame(frame_length)
        if left != 0:
            raise AeronError(f"the fragments at term offsets {begin}..{end} of session "
                             f"{self.session_id}, stream {self.stream_id} changed as they were read")
        return data

    cdef int32_t _fragment_length(self, char* term, int32_t offset, int32_t end) except -1:
        """The length of the frame at `offset`, which must lie within `end`."""
        cdef int32_t frame_length = aio_load_i32(term + offset)
        if frame_length < HEADER_LENGTH or frame_extent(frame_length, offset, end) <= 0:
            raise AeronError(f"the fragment at term offset {offset} of session {self.session_id}, "
                             f"stream {self.stream_id} changed as it was read (length {frame_length})")
        return frame_length

    # -- The assembly --------------------------------------------------------------------------
    #
    # poll_messages consumes the first fragments of a message it cannot finish into the
    # assembly (the position must move on: a sender sends only so far past it, and the
    # unblocker frees a stuck message only past its BEGIN). Every read of the image then takes
    # that message first, whole: poll and controlled_poll as one unfragmented fragment (its
    # header the END's, flags BEGIN|END), messages(copy=False) as a copy lent until its next
    # read, poll_messages as it goes on. batch_poll and block_poll, which hand out the log
    # itself, raise until it is taken. The END stays in the log until the message is taken, so
    # a controlled_poll's ABORT leaves it to be taken again (a lent copy put back goes among the
    # subscription's untaken, like any view).

    cdef Message _take_assembled(self):
        """The assembly's message, whole: its next fragments appended (consumed) up to its END,
        which is left in the log (`_end_position`: after it). None while a fragment is not
        written yet (`_assembling` stays), or when it broke off (dropped: a PAD, a BEGIN, a
        corrupt frame or the term's end; the frame is left for the read)."""
        cdef int64_t position = aio_load_i64(self._position)
        cdef int32_t term_length = self.log.term_length
        cdef int32_t term_offset = <int32_t> (position & (term_length - 1))
        cdef int index = index_by_position(position, self.log.position_bits_to_shift)
        cdef char* term = self.log.term(index)
        cdef int32_t offset = term_offset, frame_length, aligned
        cdef uint8_t flags
        cdef Message message = None
        cdef bint broken = position != self._next_fragment_position or term_offset == 0
        while not broken and offset < term_length:
            frame_length = aio_load_i32(term + offset)
            aligned = <int32_t> frame_extent(frame_length, offset, term_length)
            if aligned == 0:
                break
            flags = <uint8_t> term[offset + FLAGS_FIELD_OFFSET]
            broken = aligned < 0 or is_padding(term + offset) or flags & BEGIN_FRAG_FLAG
            if broken:
                break
            if flags & END_FRAG_FLAG:
                message = Message.__new__(Message)
                message.data = bytes(self._assembly) + PyBytes_FromStringAndSize(
                    term + offset + HEADER_LENGTH, frame_length - HEADER_LENGTH)
                message._wrap(term + offset)
                message.initial_term_id = self.log.initial_term_id
                message._shift = self.log.position_bits_to_shift
                self._end_position = position + (offset + aligned - term_offset)
                break
            self._assembly += PyBytes_FromStringAndSize(term + offset + HEADER_LENGTH,
                                                       frame_length - HEADER_LENGTH)
            offset += aligned
        else:
            broken = True  # at the term's end with no END
        if offset > term_offset:
            self._next_fragment_position = position + (offset - term_offset)
            self._advance(self._next_fragment_position)
        if broken:
            self._drop_assembly()
        return message

    cdef void _consume_assembled(self) noexcept:
        """The message _take_assembled found taken: its END consumed, the assembly emptied."""
        self._advance(self._end_position)
        self._drop_assembly()

    cdef inline void _drop_assembly(self) noexcept:
        del self._assembly[:]
        self._assembling = False

    cdef int _check_not_assembling(self, str read) except -1:
        if self._assembling and aio_load_i64(self._position) != self._next_fragment_position:
            self._drop_assembly()  # the position was moved past it: nothing left to finish
        if self._assembling:
            raise AeronError(
                f"{read} would hand out the log past the first fragments of a message that "
                f"poll_messages (async for) took into its assembly, for session {self.session_id}, "
                f"stream {self.stream_id}: take that message first (poll, receive)")
        return 0

    cdef inline void _settle(self) noexcept:
        """Consume the message lent out by _view_message, if any (unless closed); when it was the
        assembly's, the assembly with it."""
        if self._lent_end:
            if not self._closed and self._lent_end > aio_load_i64(self._position):
                self._advance(self._lent_end)
            if self._assembling and self._lent_end == self._end_position:
                self._drop_assembly()
            self._lent_end = 0


cdef class FragmentAssembler:
    """A poll handler that reassembles fragmented messages (per session) before calling
    handler(buffer, header) with each whole message."""

    cdef object _handler
    cdef dict _builders

    def __class_getitem__(cls, item):  # generic, as the stub types it, at run time too
        return _GenericAlias(cls, item)

    def __init__(self, handler):
        self._handler = handler
        self._builders = {}

    def __call__(self, object buffer, Header header):
        """Fragments must follow each other in the stream: a message with a fragment missing
        (a gap an unreliable image filled) is dropped, never glued to another's fragments."""
        cdef uint8_t flags = <uint8_t> header._bytes[FLAGS_FIELD_OFFSET]
        cdef int32_t session_id
        cdef list entry
        cdef int64_t end, start
        if (flags & UNFRAGMENTED) == UNFRAGMENTED:
            return self._handler(buffer, header)
        session_id = aio_get_i32(header._bytes + SESSION_ID_FIELD_OFFSET)
        end = header.position
        start = end - align_frame(aio_get_i32(header._bytes + FRAME_LENGTH_FIELD_OFFSET))
        if flags & BEGIN_FRAG_FLAG:
            self._builders[session_id] = [bytearray(buffer), end]
            return None
        entry = self._builders.get(session_id)
        if entry is None:
            return None
        if entry[1] != start:
            del self._builders[session_id]
            return None
        entry[0] += buffer
        entry[1] = end
        if flags & END_FRAG_FLAG:
            del self._builders[session_id]
            return self._handler(memoryview(entry[0]), header)
        return None

    def free_session(self, int32_t session_id) -> None:
        """Drop a partly assembled message of a session that went away."""
        self._builders.pop(session_id, None)
