# Term scanners: whole frames up to a limit, never across a term (Aeron's TermBlockScanner and
# TermScanner).


cdef int32_t scan_block(const char* term, int32_t term_offset, int32_t limit_offset,
                        int32_t term_length) noexcept nogil:
    """The offset after the whole frames in [term_offset, limit_offset); a PAD ends the block
    (and is the whole block when it comes first). Stops before a frame not written yet and
    before a corrupt one (frame_extent against the term's end): the caller tells which by the
    frame at the offset returned."""
    cdef int32_t offset = term_offset
    cdef int64_t aligned
    while offset < limit_offset:
        aligned = frame_extent(aio_load_i32(term + offset), offset, term_length)
        if aligned <= 0:
            break
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
    never sent) and ends the scan. A corrupt frame ends it too, before that frame: nothing past
    it is sent.
    """
    cdef int32_t available = 0, offset
    cdef int64_t aligned
    padding[0] = 0
    if max_length > term_length - term_offset:
        max_length = term_length - term_offset
    while available < max_length:
        offset = term_offset + available
        aligned = frame_extent(aio_load_i32(term + offset), offset, term_length)
        if aligned <= 0:
            break
        if is_padding(term + offset):
            padding[0] = <int32_t> aligned - HEADER_LENGTH
            aligned = HEADER_LENGTH
        available += aligned
        if available > max_length:
            available -= aligned
            padding[0] = 0
            break
        if padding[0] != 0:
            break
    return available


cdef char* term_address(object term, int32_t term_offset, Py_ssize_t* length) except NULL:
    """The address of a writable buffer over one term (a multiple of FRAME_ALIGNMENT, at most
    1 GiB: the longest term) for the Python entries of the scanners, `term_offset` a frame
    boundary in it."""
    cdef char* address = buffer_address(term, length)
    if length[0] > TERM_MAX_LENGTH or length[0] % FRAME_ALIGNMENT:
        raise ValueError(f"a term is a multiple of {FRAME_ALIGNMENT} bytes up to 1 GiB, "
                         f"not {length[0]}")
    if term_offset < 0 or term_offset > length[0] or term_offset % FRAME_ALIGNMENT:
        raise ValueError(f"term_offset {term_offset} is not a frame boundary in the term of "
                         f"{length[0]} bytes")
    return address


def term_block_scan(object term, int32_t term_offset, int32_t limit_offset) -> int:
    """Python entry to the block scanner over a term buffer (for tests and tools)."""
    cdef Py_ssize_t length
    cdef char* address = term_address(term, term_offset, &length)
    if limit_offset > length or term_offset > limit_offset:
        raise ValueError(f"offsets {term_offset}..{limit_offset} outside the term of {length} bytes")
    return scan_block(address, term_offset, limit_offset, <int32_t> length)


def term_scan_for_availability(object term, int32_t term_offset, int32_t max_length) -> tuple:
    """(available, padding) from term_offset, as scan_for_availability (for tests and tools)."""
    cdef Py_ssize_t length
    cdef int32_t padding
    cdef char* address = term_address(term, term_offset, &length)
    available = scan_for_availability(address, term_offset, max_length, <int32_t> length, &padding)
    return available, padding


def scan_datagrams(object term, int32_t term_offset, int32_t max_length, int32_t mtu,
                   int max_datagrams, list out) -> tuple:
    """Append to `out` the datagrams a sender sends from term_offset of `term` (a writable
    buffer over one term): whole frames, at most `mtu` bytes each and `max_length` in all, a PAD
    as its header only (ending the scan), at most `max_datagrams` of them. Each is a slice of
    `term`. Returns (bytes of the term covered, padding included; datagrams appended)."""
    cdef Py_ssize_t length
    cdef char* address = term_address(term, term_offset, &length)
    cdef int32_t covered = 0, available, padding = 0, offset = term_offset
    cdef int count = 0
    if mtu < HEADER_LENGTH:
        raise ValueError(f"mtu {mtu} is below a frame header's {HEADER_LENGTH} bytes")
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
    written yet; negative or 1..31: damaged), at a frame that does not fit before `end` (its
    aligned length computed in 64 bits: any length word is safe), or at `end`. PAD frames are
    whole frames like any other. So a damaged frame is reported as where the whole frames end;
    the length word at the offset returned tells why: zero, nothing written; anything else, a
    damaged frame or one running past `end`."""
    cdef Py_buffer view
    cdef Py_ssize_t offset = start
    cdef int64_t aligned
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        if end > view.len:
            end = view.len
        if start < 0:
            raise ValueError(f"start {start} is negative")
        with nogil:
            while offset + HEADER_LENGTH <= end:
                aligned = frame_extent(aio_get_i32(<const char*> view.buf + offset), offset, end)
                if aligned <= 0:
                    break
                offset += aligned
    finally:
        PyBuffer_Release(&view)
    return offset
