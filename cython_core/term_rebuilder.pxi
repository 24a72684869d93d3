# Rebuilding a network image: frames arrive by UDP (in any order, possibly twice) and are put at
# their term offset; the gap scanner finds where the contiguous part ends and what is missing
# (Aeron's TermRebuilder and TermGapScanner).


cdef bint rebuild_insert(char* term, int32_t term_offset, const char* packet, int32_t length) noexcept nogil:
    """Copy `length` bytes of frames to term_offset unless a frame is already there; the first
    frame's length word is stored last (release) so readers see whole frames only."""
    if aio_load_i32(term + term_offset) != 0:
        return False
    memcpy(term + term_offset + 8, packet + 8, length - 8)
    aio_put_i32(term + term_offset + 4, aio_get_i32(packet + 4))
    aio_store_i32(term + term_offset, aio_get_i32(packet))
    return True


cdef int32_t scan_for_gap(const char* term, int32_t rebuild_offset, int32_t limit_offset,
                          int32_t term_length, int32_t* gap_length) noexcept nogil:
    """From rebuild_offset, skip the complete frames; if that stops before limit_offset, the gap
    runs to the next frame that is present (or to limit_offset). Returns the offset where the
    contiguous frames end; gap_length[0] is 0 when there is no gap. A corrupt frame (one whose
    length runs past the term: overlapping packets can leave one) ends the contiguous frames
    like a missing one: the receiver position stops before it, never past the term."""
    cdef int32_t offset = rebuild_offset, gap_begin
    cdef int64_t aligned
    gap_length[0] = 0
    while offset < limit_offset:
        aligned = frame_extent(aio_load_i32(term + offset), offset, term_length)
        if aligned <= 0:
            break
        offset += aligned
    gap_begin = offset
    if offset < limit_offset:
        offset += FRAME_ALIGNMENT
        while offset < limit_offset and aio_load_i32(term + offset) == 0:
            offset += FRAME_ALIGNMENT
        gap_length[0] = min(offset, limit_offset) - gap_begin
    return gap_begin


def term_rebuild_insert(object term, int32_t term_offset, object packet) -> bool:
    """Insert the frames in `packet` at term_offset of `term` (a term buffer); False if a frame
    was already there (a duplicate)."""
    cdef Py_ssize_t term_length
    cdef char* address = buffer_address(term, &term_length)
    cdef const unsigned char[::1] data = packet
    cdef Py_ssize_t length = data.shape[0]
    if length < HEADER_LENGTH or term_offset < 0 or term_offset % FRAME_ALIGNMENT \
            or term_offset + length > term_length:
        raise ValueError(f"{length} bytes at term offset {term_offset} do not fit a term of {term_length}")
    return rebuild_insert(address, term_offset, <const char*> &data[0], <int32_t> length)
