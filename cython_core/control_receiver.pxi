# The sender side's control input (status messages, NAKs, RTT measurements), read by the DataPath.
# An idle stream's receivers send the same status message every 200 ms; it changes nothing but
# the time each receiver was last heard, so it needs no Python: a status message that repeats,
# byte for byte, the last one its receiver sent for its session within REPEAT_WINDOW is counted
# and its time kept here, and Python takes those times at its timer (`take_repeats`), before it
# decides which receivers went silent. Everything else goes to Python (SendChannelEndpoint). A
# status message with flags (a setup request, or a receiver's farewell) makes every receiver's
# next status message of its session (of every session, for session 0 and stream 0) Python's
# again: a receiver back after its farewell, or set up anew, is news at once, not at the timer.

from libc.string cimport memcmp

cdef class ControlReceiver:
    """Absorbs repeated status messages from what a send endpoint's socket received.

    Per (receiver address, session, stream): the last status message seen, when it was last
    heard, and when Python last saw it (itself, or through `take_repeats`). A repeat comes more
    than `repeat_window_ns` after the last is Python's again (a receiver back after a silence);
    so is any status message with flags (one eliciting a SETUP, a farewell), any other frame,
    and any datagram of more than one frame. At most `capacity` are remembered: one more makes
    the one heard longest ago forgotten (its next status message is Python's), so that status
    messages from ever new ports or of ever new sessions take no more memory."""

    cdef dict _last  # key -> [bytes, heard_ns, seen_by_python_ns, (host, port)], oldest heard first
    cdef readonly int64_t repeat_window_ns
    cdef readonly Py_ssize_t capacity
    cdef object _counter  # kept alive: sms_received points into it
    cdef char* sms_received

    def __cinit__(self, object status_messages_received, int64_t repeat_window_ns,
                  Py_ssize_t capacity):
        if capacity < 1:
            raise ValueError(f"capacity {capacity} must be at least 1")
        self._last = {}
        self.repeat_window_ns = repeat_window_ns
        self.capacity = capacity
        self._counter = status_messages_received
        self.sms_received = counter_address(status_messages_received)

    cdef bint absorb(self, DatagramReceiver receiver, int i, const char* packet, int32_t length,
                     int64_t now_ns) except -1:
        """True if datagram i is a repeat (counted, its time kept); False: Python's (noted as
        the last its receiver sent, when it is a status message)."""
        cdef sockaddr_in* sin = <sockaddr_in*> &receiver._addrs[i]
        cdef list entry
        cdef bytes last
        cdef int32_t session_id, stream_id
        if length < SM_HEADER_LENGTH or aio_get_i32(packet) > length \
                or (<const uint16_t*> (packet + TYPE_FIELD_OFFSET))[0] != SM_FRAME_TYPE:
            return False
        session_id = aio_get_i32(packet + SM_SESSION_ID_OFFSET)
        stream_id = aio_get_i32(packet + SM_STREAM_ID_OFFSET)
        if packet[FLAGS_FIELD_OFFSET] != 0:  # a setup request or a farewell
            self.forget(session_id, stream_id)
            return False
        if aio_get_i32(packet) != length or packet[VERSION_FIELD_OFFSET] != 0:
            return False
        key = (sin.sin_addr.s_addr, sin.sin_port, session_id, stream_id)
        entry = self._last.pop(key, None)  # put back last: the one heard longest ago is first
        if entry is not None:
            last = entry[0]
            if now_ns - <int64_t> entry[1] <= self.repeat_window_ns and len(last) == length \
                    and memcmp(<const char*> last, packet, length) == 0:
                entry[1] = now_ns
                self._last[key] = entry
                aio_fetch_add_i64(self.sms_received, 1)
                return True
        elif len(self._last) >= self.capacity:
            del self._last[next(iter(self._last))]
        self._last[key] = [PyBytes_FromStringAndSize(packet, length), now_ns, now_ns,
                           receiver.address(i)]
        return False

    cdef void forget(self, int32_t session_id, int32_t stream_id):
        """Forget the status messages of a session (of every session: 0 and 0)."""
        for key in list(self._last):
            if session_id == stream_id == 0 or (key[2] == session_id and key[3] == stream_id):
                del self._last[key]

    def absorb_received(self, DatagramReceiver receiver, int64_t now_ns) -> list:
        """What `receiver` just received less the repeats, as (memoryview, (host, port)) pairs
        for Python."""
        cdef list rest = []
        cdef int i
        cdef int32_t length
        cdef const char* packet
        for i in range(receiver.count):
            packet = receiver.datagram(i, &length)
            if not self.absorb(receiver, i, packet, length, now_ns):
                rest.append((receiver.data(i), receiver.address(i)))
        return rest

    def take_repeats(self, int64_t now_ns, int64_t forget_after_ns) -> list:
        """The status messages repeated since Python last saw them, as (frame, (host, port),
        heard_ns) with the time of the latest repeat; those not heard for `forget_after_ns` are
        forgotten."""
        cdef list repeats = []
        cdef list entry
        for key in list(self._last):
            entry = self._last[key]
            if <int64_t> entry[1] > <int64_t> entry[2]:
                entry[2] = entry[1]
                repeats.append((entry[0], entry[3], entry[1]))
            elif now_ns - <int64_t> entry[1] > forget_after_ns:
                del self._last[key]
        return repeats
