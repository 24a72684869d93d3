# Header: the DATA frame header of the fragment being delivered, and Message, a whole message.


cdef class Header:
    """The 32-byte header of a delivered fragment.

    The poll path reuses one Header per image (valid during the handler call, like Aeron's
    flyweight); copy() detaches it.
    """

    cdef char _bytes[HEADER_LENGTH]
    cdef readonly int32_t initial_term_id
    cdef int _shift

    cdef inline void _wrap(self, const char* frame) noexcept nogil:
        memcpy(self._bytes, frame, HEADER_LENGTH)

    @staticmethod
    def decode(object frame, int32_t initial_term_id=0, int position_bits_to_shift=16) -> Header:
        """A Header from the first 32 bytes of `frame` (for tools and tests)."""
        cdef const unsigned char[::1] view = frame
        if view.shape[0] < HEADER_LENGTH:
            raise ValueError(f"a frame header needs {HEADER_LENGTH} bytes, got {view.shape[0]}")
        cdef Header header = Header.__new__(Header)
        header._wrap(<const char*> &view[0])
        header.initial_term_id = initial_term_id
        header._shift = position_bits_to_shift
        return header

    def copy(self) -> Header:
        cdef Header other = Header.__new__(Header)
        memcpy(other._bytes, self._bytes, HEADER_LENGTH)
        other.initial_term_id = self.initial_term_id
        other._shift = self._shift
        return other

    def to_bytes(self) -> bytes:
        return self._bytes[:HEADER_LENGTH]

    @property
    def frame_length(self) -> int:
        return aio_get_i32(self._bytes + FRAME_LENGTH_FIELD_OFFSET)

    @property
    def version(self) -> int:
        return <uint8_t> self._bytes[VERSION_FIELD_OFFSET]

    @property
    def flags(self) -> int:
        return <uint8_t> self._bytes[FLAGS_FIELD_OFFSET]

    @property
    def type(self) -> int:
        return (<uint8_t> self._bytes[TYPE_FIELD_OFFSET]) | ((<uint8_t> self._bytes[TYPE_FIELD_OFFSET + 1]) << 8)

    @property
    def term_offset(self) -> int:
        return aio_get_i32(self._bytes + TERM_OFFSET_FIELD_OFFSET)

    @property
    def session_id(self) -> int:
        return aio_get_i32(self._bytes + SESSION_ID_FIELD_OFFSET)

    @property
    def stream_id(self) -> int:
        return aio_get_i32(self._bytes + STREAM_ID_FIELD_OFFSET)

    @property
    def term_id(self) -> int:
        return aio_get_i32(self._bytes + TERM_ID_FIELD_OFFSET)

    @property
    def reserved_value(self) -> int:
        return aio_get_i64(self._bytes + RESERVED_VALUE_FIELD_OFFSET)

    @property
    def position(self) -> int:
        """The stream position just after this fragment."""
        cdef int64_t end = aio_get_i32(self._bytes + TERM_OFFSET_FIELD_OFFSET) \
            + align_frame(aio_get_i32(self._bytes))
        return compute_position(aio_get_i32(self._bytes + TERM_ID_FIELD_OFFSET), end, self._shift,
                                self.initial_term_id)

    def __repr__(self):
        return (f"Header(session_id={self.session_id}, stream_id={self.stream_id}, term_id={self.term_id}, "
                f"term_offset={self.term_offset}, frame_length={self.frame_length}, flags=0x{self.flags:02x}, "
                f"type={self.type}, position={self.position})")


@cython.no_gc
cdef class Message(Header):
    """A whole (reassembled) message yielded by `async for`: its data and, being a Header, the
    header of its last fragment (`message.header` is the message itself; `position` is the
    stream position just after it).

    `data` is bytes, except from `subscription.messages(copy=False)`, where it is a read-only
    memoryview into the log that is valid until the iterator's next step."""

    cdef readonly object data

    def __class_getitem__(cls, item):  # Message[bytes], as the stub types it, at run time too
        return _GenericAlias(cls, item)

    def __init__(self, object data, Header header):
        self.data = data
        self._wrap(header._bytes)
        self.initial_term_id = header.initial_term_id
        self._shift = header._shift

    cdef void _become(self, Message other) noexcept:
        """This message made a copy of `other`."""
        self._wrap(other._bytes)
        self.initial_term_id = other.initial_term_id
        self._shift = other._shift
        self.data = other.data

    @property
    def header(self) -> Header:
        return self

    def __repr__(self):
        return f"Message({len(self.data)} bytes, session_id={self.session_id}, position={self.position})"


cdef Header as_unfragmented(Message message):
    """The header a whole message goes to a fragment handler with: its own when it was one
    fragment, else a copy of its END fragment's flagged BEGIN|END (reassembled)."""
    if (<uint8_t> message._bytes[FLAGS_FIELD_OFFSET] & UNFRAGMENTED) == UNFRAGMENTED:
        return message
    cdef Header header = message.copy()
    header._bytes[FLAGS_FIELD_OFFSET] = <char> UNFRAGMENTED
    return header


cdef Py_ssize_t _message_data_offset = -1  # where a Message holds `data`


cdef int _data_as_member() except -1:
    """`message.data` as a member slot, which CPython 3.12+ specializes (aeronio_cpython.h)."""
    global _message_data_offset
    cdef object marker = object()
    cdef Message probe = Message(marker, Header.__new__(Header))
    cdef Py_ssize_t offset = aio_field_offset(<PyObject*> probe, <PyObject*> marker)
    if offset < 0:
        raise RuntimeError("Message.data not found in its object")
    _message_data_offset = offset
    return aio_readonly_member(<PyTypeObject*> Message, "data", offset)


_data_as_member()


cdef inline Message new_message(const char* data, Py_ssize_t length, const char* frame,
                                int32_t initial_term_id, int shift, list spent):
    """A Message of a copy of the `length` bytes at `data`, its header the frame header at
    `frame`: one of `spent` (Messages handed out before) that nothing else holds, its bytes
    written over where nothing else holds them either, or a new one (aeronio_cpython.h, "Reused
    messages")."""
    cdef PyObject* kept = NULL
    if spent is not None:
        kept = aio_take_spent(<PyObject*> spent, <PyTypeObject*> Message, _message_data_offset)
    cdef Message message
    if kept == NULL:
        message = Message.__new__(Message)
        message.data = PyBytes_FromStringAndSize(data, length)
    else:
        message = <Message> kept
        Py_DECREF(message)  # the list's reference, now `message`'s
        if not aio_rewrite_bytes(<PyObject*> message.data, data, length):
            message.data = PyBytes_FromStringAndSize(data, length)
    message._wrap(frame)
    message.initial_term_id = initial_term_id
    message._shift = shift
    return message
