# Frame layout (DATA/PAD header, 32 bytes, little-endian) and log buffer metadata layout,
# as in Aeron's DataHeaderFlyweight and LogBufferDescriptor. Defined here once: the enum is
# `cpdef`, so every name is also a Python int of aeronio._core, which aeronio/logbuffer/
# descriptor.py and aeronio/protocol/frames.py re-export for Python code.

cpdef enum:
    HEADER_LENGTH = 32
    FRAME_ALIGNMENT = 32
    FRAME_LENGTH_FIELD_OFFSET = 0
    VERSION_FIELD_OFFSET = 4
    FLAGS_FIELD_OFFSET = 5
    TYPE_FIELD_OFFSET = 6
    TERM_OFFSET_FIELD_OFFSET = 8
    SESSION_ID_FIELD_OFFSET = 12
    STREAM_ID_FIELD_OFFSET = 16
    TERM_ID_FIELD_OFFSET = 20
    RESERVED_VALUE_FIELD_OFFSET = 24

    HDR_TYPE_PAD = 0x00
    HDR_TYPE_DATA = 0x01
    BEGIN_FRAG_FLAG = 0x80
    END_FRAG_FLAG = 0x40
    UNFRAGMENTED = 0xC0
    EOS_FLAG = 0x20
    REVOKED_FLAG = 0x10  # with EOS on a heartbeat: its publication was revoked (Aeron 1.53)

    PARTITION_COUNT = 3
    # The limits of a term and of a message in it (LogBufferDescriptor, FrameDescriptor);
    # aeronio/protocol/limits.py validates against them.
    TERM_MIN_LENGTH = 64 * 1024
    TERM_MAX_LENGTH = 1024 * 1024 * 1024
    MAX_MESSAGE_LENGTH = 16 * 1024 * 1024
    TERM_TAIL_COUNTERS_OFFSET = 0
    LOG_ACTIVE_TERM_COUNT_OFFSET = 24
    LOG_END_OF_STREAM_POSITION_OFFSET = 128
    LOG_IS_CONNECTED_OFFSET = 136
    LOG_ACTIVE_TRANSPORT_COUNT_OFFSET = 140
    LOG_CORRELATION_ID_OFFSET = 256
    LOG_INITIAL_TERM_ID_OFFSET = 264
    LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET = 268
    LOG_MTU_LENGTH_OFFSET = 272
    LOG_TERM_LENGTH_OFFSET = 276
    LOG_PAGE_SIZE_OFFSET = 280
    # Aeron 1.53's aeron_logbuffer_metadata_t goes on (pack 4): how the driver uses the log.
    LOG_PUBLICATION_WINDOW_LENGTH_OFFSET = 284
    LOG_RECEIVER_WINDOW_LENGTH_OFFSET = 288
    LOG_SOCKET_SNDBUF_LENGTH_OFFSET = 292
    LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET = 296
    LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET = 300
    LOG_SOCKET_RCVBUF_LENGTH_OFFSET = 304
    LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET = 308
    LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET = 312
    LOG_MAX_RESEND_OFFSET = 316
    LOG_DEFAULT_FRAME_HEADER_OFFSET = 320
    LOG_ENTITY_TAG_OFFSET = 448
    LOG_RESPONSE_CORRELATION_ID_OFFSET = 456
    LOG_LINGER_TIMEOUT_NS_OFFSET = 464
    LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET = 472
    LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET = 480
    LOG_GROUP_OFFSET = 488
    LOG_IS_RESPONSE_OFFSET = 489
    LOG_REJOIN_OFFSET = 490
    LOG_RELIABLE_OFFSET = 491
    LOG_SPARSE_OFFSET = 492
    LOG_SIGNAL_EOS_OFFSET = 493
    LOG_SPIES_SIMULATE_CONNECTION_OFFSET = 494
    LOG_TETHER_OFFSET = 495
    LOG_IS_PUBLICATION_REVOKED_OFFSET = 496
    LOG_TYPE_OFFSET = 497
    LOG_UNTETHERED_LINGER_TIMEOUT_NS_OFFSET = 500
    LOG_META_DATA_LENGTH = 4096
    # aeronio's use of Aeron's second padding (144-255, not read by Aeron): processes parked
    # on this log, for cross-process wake-ups. A slot holds a parked process's wake id, with
    # WAKE_SPACE_BIT set when it waits for space (a publisher), clear for data.
    # LOG_LIMIT_WANTED is 1 while a publisher found no space and no consumer since woke the
    # conductor (see MappedLog.want_limit). Not in the tail counters' pair of cache lines
    # (bytes 0-127; every offer writes a tail): a subscriber reads these after every poll, and
    # there they cost a round trip two line transfers each way (docs/benchmarks.md).
    LOG_LIMIT_WANTED_OFFSET = 144
    LOG_CONDUCTOR_WAKE_ID_OFFSET = 152
    LOG_WAKE_SLOTS_OFFSET = 160
    LOG_WAKE_SLOT_COUNT = 10


cdef enum:
    # Publication result codes (Aeron's Publication constants).
    NOT_CONNECTED_CODE = -1
    BACK_PRESSURED_CODE = -2
    ADMIN_ACTION_CODE = -3
    CLOSED_CODE = -4
    MAX_POSITION_EXCEEDED_CODE = -5

    # TermUnblocker results.
    UNBLOCK_NO_ACTION = 0
    UNBLOCK_UNBLOCKED = 1
    UNBLOCK_UNBLOCKED_TO_END = 2

    # frame_extent's answer for a frame length no writer wrote.
    FRAME_CORRUPT = -1


# The status message's layout (Aeron's StatusMessageFlyweight), for the C that reads them.
cdef enum:
    SM_HEADER_LENGTH = 36
    SM_FRAME_TYPE = 0x03
    SM_SESSION_ID_OFFSET = 8
    SM_STREAM_ID_OFFSET = 12
    SM_CONSUMPTION_TERM_ID_OFFSET = 16
    SM_CONSUMPTION_TERM_OFFSET_OFFSET = 20
    SM_RECEIVER_WINDOW_OFFSET = 24


cdef inline bint is_plain_status_message(const char* packet, int32_t length) noexcept nogil:
    """Whether a datagram is one version-0 status message without flags (no setup request)."""
    return length >= SM_HEADER_LENGTH and aio_get_i32(packet) == length \
        and (<const uint16_t*> (packet + TYPE_FIELD_OFFSET))[0] == SM_FRAME_TYPE \
        and packet[VERSION_FIELD_OFFSET] == 0 and packet[FLAGS_FIELD_OFFSET] == 0


cdef inline int64_t align_frame(int64_t length) noexcept nogil:
    """`length` rounded up to FRAME_ALIGNMENT, in 64 bits: no int32 overflows here."""
    return (length + (FRAME_ALIGNMENT - 1)) & ~(<int64_t> (FRAME_ALIGNMENT - 1))


cdef inline int64_t frame_extent(int32_t frame_length, int64_t offset, int64_t end) noexcept nogil:
    """What every loop that walks frames asks of a frame length read at `offset`: its aligned
    length when the frame is whole (a header at least) and ends by `end` (the term's or the
    buffer's end); 0 when the length is 0 or negative (not written yet, or being written);
    FRAME_CORRUPT (-1) otherwise: below a header, or running past `end`. In 64-bit arithmetic,
    so any int32 is safe (0x7FFFFFF0 would wrap negative when aligned in 32 bits)."""
    cdef int64_t aligned
    if frame_length <= 0:
        return 0
    aligned = align_frame(frame_length)
    if frame_length < HEADER_LENGTH or aligned > end - offset:
        return FRAME_CORRUPT
    return aligned


cdef inline int32_t tail_term_id(int64_t raw_tail) noexcept nogil:
    return <int32_t> (raw_tail >> 32)


cdef inline int32_t tail_term_offset(int64_t raw_tail, int32_t term_length) noexcept nogil:
    cdef int64_t offset = raw_tail & 0xFFFFFFFFLL
    return <int32_t> (offset if offset < term_length else term_length)


cdef inline int index_by_term_count(int32_t term_count) noexcept nogil:
    """The partition of a term count, 0..2 for any int32: a log's active term count is shared
    memory, and a negative one must not index before the mapping."""
    return <int> ((<uint32_t> term_count) % PARTITION_COUNT)


cdef inline int index_by_position(int64_t position, int shift) noexcept nogil:
    """The partition of a position, 0..2 for any int64 (a position counter is shared memory)."""
    return <int> (((<uint64_t> position) >> shift) % PARTITION_COUNT)


cdef inline int64_t pack_tail(int32_t term_id, int32_t term_offset) noexcept nogil:
    return ((<int64_t> term_id) << 32) + term_offset


cdef inline int64_t compute_position(int32_t term_id, int64_t term_offset, int shift,
                                     int32_t initial_term_id) noexcept nogil:
    # The term count is a 32-bit difference: term ids wrap as signed 32-bit integers.
    cdef int32_t term_count = <int32_t> (<uint32_t> term_id - <uint32_t> initial_term_id)
    return ((<int64_t> term_count) << shift) + term_offset


cdef inline int32_t term_id_for_position(int64_t position, int shift,
                                         int32_t initial_term_id) noexcept nogil:
    return <int32_t> (<uint32_t> (position >> shift) + <uint32_t> initial_term_id)


cdef inline void write_header(char* frame, const char* default_header, int32_t frame_length,
                              uint8_t flags, uint16_t frame_type, int32_t term_offset,
                              int32_t term_id) noexcept nogil:
    """Write a frame header with a NEGATIVE length (released first), then the other fields.

    Readers only trust a positive length, which the writer stores last with release semantics.
    """
    aio_store_i32(frame, -frame_length)
    memcpy(frame + VERSION_FIELD_OFFSET, default_header + VERSION_FIELD_OFFSET,
           HEADER_LENGTH - VERSION_FIELD_OFFSET)
    frame[FLAGS_FIELD_OFFSET] = <char> flags
    aio_put_i32(frame + TERM_OFFSET_FIELD_OFFSET, term_offset)
    aio_put_i32(frame + TERM_ID_FIELD_OFFSET, term_id)
    frame[TYPE_FIELD_OFFSET] = <char> (frame_type & 0xFF)
    frame[TYPE_FIELD_OFFSET + 1] = <char> (frame_type >> 8)


cdef inline bint is_padding(const char* frame) noexcept nogil:
    return frame[TYPE_FIELD_OFFSET] == 0 and frame[TYPE_FIELD_OFFSET + 1] == 0
