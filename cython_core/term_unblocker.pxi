# Unblocking: a writer that reserved a frame and never committed it (crashed, or a claim never
# finished) leaves a zero or negative length that stops every reader. Past the unblock timeout
# the driver turns that frame (or the zeroed run up to the next frame) into a PAD.


cdef void _write_pad(char* term, int32_t offset, int32_t length, int32_t term_id,
                     const char* default_header) noexcept nogil:
    write_header(term + offset, default_header, length, UNFRAGMENTED, HDR_TYPE_PAD, offset, term_id)
    aio_store_i32(term + offset, length)


cdef bint _zeroed_between(const char* term, int32_t from_offset, int32_t to_offset) noexcept nogil:
    cdef int32_t offset = to_offset - FRAME_ALIGNMENT
    while offset >= from_offset:
        if aio_load_i32(term + offset) != 0:
            return False
        offset -= FRAME_ALIGNMENT
    return True


cdef int unblock_term(char* term, const char* default_header, int32_t blocked_offset,
                      int32_t tail_offset, int32_t term_id, int32_t term_length) noexcept nogil:
    cdef int32_t frame_length
    cdef int32_t offset
    cdef char* frame = term + blocked_offset
    if blocked_offset & (FRAME_ALIGNMENT - 1):
        return UNBLOCK_NO_ACTION  # no frame starts there: a position no reader keeps (shared
    frame_length = aio_load_i32(frame)  # memory another process wrote), never a PAD
    if frame_length < 0 and frame_extent(<int32_t> -(<int64_t> frame_length), blocked_offset,
                                         term_length) <= 0:
        return UNBLOCK_NO_ACTION  # no writer reserved that: a corrupt length stays, never a PAD
    if frame_length < 0:
        # Rewrite the header as a PAD while its length stays negative, then swap the length: a
        # writer that commits late loses the race and learns it (BufferClaim.commit).
        memcpy(frame + VERSION_FIELD_OFFSET, default_header + VERSION_FIELD_OFFSET,
               HEADER_LENGTH - VERSION_FIELD_OFFSET)
        aio_put_i32(frame + TERM_OFFSET_FIELD_OFFSET, blocked_offset)
        aio_put_i32(frame + TERM_ID_FIELD_OFFSET, term_id)
        frame[TYPE_FIELD_OFFSET] = <char> HDR_TYPE_PAD
        frame[TYPE_FIELD_OFFSET + 1] = 0
        if aio_cas_i32(frame, frame_length, -frame_length):
            return UNBLOCK_UNBLOCKED
        return UNBLOCK_NO_ACTION
    if frame_length > 0:
        return UNBLOCK_NO_ACTION
    offset = blocked_offset + FRAME_ALIGNMENT
    while offset < tail_offset:
        if aio_load_i32(term + offset) != 0:
            if _zeroed_between(term, blocked_offset, offset):
                _write_pad(term, blocked_offset, offset - blocked_offset, term_id, default_header)
                return UNBLOCK_UNBLOCKED
            return UNBLOCK_NO_ACTION
        offset += FRAME_ALIGNMENT
    if offset >= term_length and aio_load_i32(term + blocked_offset) == 0:
        _write_pad(term, blocked_offset, term_length - blocked_offset, term_id, default_header)
        return UNBLOCK_UNBLOCKED_TO_END
    return UNBLOCK_NO_ACTION


def unblock_log(MappedLog log, int64_t blocked_position) -> bool:
    """Unblock the log at `blocked_position` (the consumers' position); True if a PAD was written
    or the log rotated past a term that a writer left unfinished."""
    cdef int shift = log.position_bits_to_shift
    cdef int32_t blocked_term_count = <int32_t> (blocked_position >> shift)
    cdef int32_t blocked_offset = <int32_t> (blocked_position & (log.term_length - 1))
    cdef int32_t active_term_count = log.active_term_count()
    cdef int index, status
    cdef int64_t raw_tail
    cdef int32_t term_id
    if active_term_count == blocked_term_count - 1 and blocked_offset == 0:
        raw_tail = aio_load_i64(log.tail_address(index_by_term_count(active_term_count)))
        return log.rotate(active_term_count, tail_term_id(raw_tail))
    index = index_by_term_count(blocked_term_count)
    raw_tail = aio_load_i64(log.tail_address(index))
    term_id = tail_term_id(raw_tail)
    status = unblock_term(log.term(index), log.meta + LOG_DEFAULT_FRAME_HEADER_OFFSET, blocked_offset,
                          tail_term_offset(raw_tail, log.term_length), term_id, log.term_length)
    if status == UNBLOCK_UNBLOCKED_TO_END:
        log.rotate(blocked_term_count, term_id)
    return status != UNBLOCK_NO_ACTION
