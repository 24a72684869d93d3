# Term scanners: whole frames up to a limit, never across a term (Aeron's TermBlockScanner and
# TermScanner).


cdef int32_t scan_block(const char* term, int32_t term_offset, int32_t limit_offset) noexcept nogil:
    """The offset after the whole frames in [term_offset, limit_offset); a PAD ends the block
    (and is the whole block when it comes first)."""
    cdef int32_t offset = term_offset, frame_length, aligned
    while offset < limit_offset:
        frame_length = aio_load_i32(term + offset)
        if frame_length <= 0 or frame_length > (1 << 30):  # absent, or corrupt
            break
        aligned = align_frame(frame_length)
        if is_padding(term + offset):
            if offset == term_offset:
                offset += aligned
            break
        if offset + aligned > limit_offset:
            break
        offset += aligned
    return offset


cdef int32_t scan_for_availability(const char* term, int32_t term_offset, int32_t max_length,
                                   int32_t term_length, int32_t* padding) noexcept nogil:
    """Bytes of whole frames available from term_offset, up to max_length, as a sender sends them.

    A PAD counts as its 32-byte header only (padding[0] holds the rest of its length, which is
    never sent) and ends the scan.
    """
    cdef int32_t available = 0, frame_length, aligned, offset
    padding[0] = 0
    if max_length > term_length - term_offset:
        max_length = term_length - term_offset
    while available < max_length:
        offset = term_offset + available
        frame_length = aio_load_i32(term + offset)
        if frame_length <= 0 or frame_length > term_length - offset:
            break
        aligned = align_frame(frame_length)
        if is_padding(term + offset):
            padding[0] = aligned - HEADER_LENGTH
            aligned = HEADER_LENGTH
        available += aligned
        if available > max_length:
            available -= aligned
            padding[0] = 0
            break
        if padding[0] != 0:
            break
    return available


def term_block_scan(object term, int32_t term_offset, int32_t limit_offset) -> int:
    """Python entry to the block scanner over a term buffer (for tests and tools)."""
    cdef Py_ssize_t length
    cdef char* address = buffer_address(term, &length)
    if term_offset < 0 or limit_offset > length or term_offset > limit_offset:
        raise ValueError(f"offsets {term_offset}..{limit_offset} outside the term of {length} bytes")
    return scan_block(address, term_offset, limit_offset)


def term_scan_for_availability(object term, int32_t term_offset, int32_t max_length) -> tuple:
    """(available, padding) from term_offset, as scan_for_availability (for tests and tools)."""
    cdef Py_ssize_t length
    cdef int32_t padding
    cdef char* address = buffer_address(term, &length)
    if term_offset < 0 or term_offset > length:
        raise ValueError(f"term_offset {term_offset} outside the term of {length} bytes")
    available = scan_for_availability(address, term_offset, max_length, <int32_t> length, &padding)
    return available, padding


def scan_datagrams(object term, int32_t term_offset, int32_t max_length, int32_t mtu,
                   int max_datagrams, list out) -> tuple:
    """Append to `out` the datagrams a sender sends from term_offset of `term` (a writable
    buffer over one term): whole frames, at most `mtu` bytes each and `max_length` in all, a PAD
    as its header only (ending the scan), at most `max_datagrams` of them. Each is a slice of
    `term`. Returns (bytes of the term covered, padding included; datagrams appended)."""
    cdef Py_ssize_t length
    cdef char* address = buffer_address(term, &length)
    cdef int32_t covered = 0, available, padding = 0, offset = term_offset
    cdef int count = 0
    if term_offset < 0 or term_offset > length or mtu < HEADER_LENGTH:
        raise ValueError(f"term_offset {term_offset} or mtu {mtu} invalid for a term of {length} bytes")
    while count < max_datagrams and covered < max_length and padding == 0:
        available = scan_for_availability(address, offset, min(mtu, max_length - covered),
                                          <int32_t> length, &padding)
        if available == 0:
            break
        out.append(term[offset:offset + available])
        covered += available + padding
        offset += available + padding
        count += 1
    return covered, count


def scan_whole_frames(object buffer, Py_ssize_t start, Py_ssize_t end) -> int:
    """The offset after the last whole frame from `start` (a frame boundary) in a recorded
    segment (any buffer, read-only too): stops at a length word below a header's (zero: not
    written yet), at a frame that does not fit before `end`, or at `end`. PAD frames are whole
    frames like any other."""
    cdef Py_buffer view
    cdef Py_ssize_t offset = start
    cdef int32_t length
    cdef Py_ssize_t aligned
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        if end > view.len:
            end = view.len
        if start < 0:
            raise ValueError(f"start {start} is negative")
        with nogil:
            while offset + HEADER_LENGTH <= end:
                length = aio_get_i32(<const char*> view.buf + offset)
                if length < HEADER_LENGTH:
                    break
                aligned = align_frame(length)
                if offset + aligned > end:
                    break
                offset += aligned
    finally:
        PyBuffer_Release(&view)
    return offset
