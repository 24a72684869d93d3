# The sender's per-datagram work (Aeron's NetworkPublication.sendData): whole frames from the
# sender position up to the sender limit, at most an MTU per datagram, never across a term end, a
# PAD as its header only. This is the one sender of new data: the driver's DataPath sends the
# datagrams straight from the log (`send`); without sockets (the tests' in-memory networks),
# `collect` hands out the same datagrams as views. It also sends the heartbeat that follows a quiet
# spell (Aeron's heartbeatMessageCheck), so that an idle stream needs no Python. The
# SenderStateMachine, in Python, says when new data may go (`allow_new_data`) and sends the rest
# (SETUPs and retransmits, and the heartbeat while they go first). Under unicast flow control a
# status message read by the DataPath moves snd-lmt here at once (`on_status_message`), so that
# the window it opens goes in the same duty cycle; the state machine takes it after, to the same
# limit.

cdef enum:
    MAX_DATAGRAMS_PER_SEND = 64


cdef class PublicationSender:
    """Cuts a network publication's log into datagrams from snd-pos up to snd-lmt and moves
    snd-pos over those sent; blocked at snd-lmt with more appended, it counts a flow control
    limit (snd-bpe and the system-wide counter).

    Each piece of state has one writer. `new_data_allowed` is the state machine's (through
    `allow_new_data`: no SETUP is due and no retransmit is scheduled, which go first);
    `time_of_last_data_ns` and `time_of_last_heartbeat_ns`, when new data and a heartbeat were
    last sent (a heartbeat is due `heartbeat_timeout_ns` after both), are this sender's.

    Heartbeat: a DATA header of length 0 at snd-pos, EOS-flagged once snd-pos reached the log's
    end of stream, EOS- and REVOKED-flagged once the log says its publication was revoked. Sent
    by the DataPath while new data is allowed (`send_heartbeat`), else by the state machine
    after what goes first (`heartbeat`)."""

    cdef readonly MappedLog log
    cdef list _terms
    cdef object _positions  # kept alive: the addresses below point into them
    cdef char* position
    cdef char* limit
    cdef char* bpe
    cdef char* limits_reached
    cdef char* bytes_sent
    cdef char* heartbeats_sent
    cdef int32_t mtu
    cdef int32_t session_id
    cdef int32_t stream_id
    cdef readonly int64_t heartbeat_timeout_ns
    cdef readonly bint new_data_allowed
    cdef readonly bint follows_status_messages
    cdef readonly int64_t time_of_last_data_ns
    cdef readonly int64_t time_of_last_heartbeat_ns

    def __cinit__(self, MappedLog log, list terms, object sender_position, object sender_limit,
                  object sender_bpe, object flow_control_limits, object bytes_sent,
                  object heartbeats_sent, int32_t session_id, int32_t stream_id, int32_t mtu,
                  int64_t heartbeat_timeout_ns, int64_t now_ns):
        """terms: a writable buffer over each of the log's terms (what `collect` slices). A
        heartbeat is due at once (data and a heartbeat count as sent `heartbeat_timeout_ns`
        before `now_ns`)."""
        if len(terms) != PARTITION_COUNT or mtu < HEADER_LENGTH:
            raise ValueError(f"{len(terms)} terms or mtu {mtu} invalid")
        self.log = log
        self._terms = terms
        self._positions = (sender_position, sender_limit, sender_bpe, flow_control_limits,
                           bytes_sent, heartbeats_sent)
        self.position = counter_address(sender_position)
        self.limit = counter_address(sender_limit)
        self.bpe = counter_address(sender_bpe)
        self.limits_reached = counter_address(flow_control_limits)
        self.bytes_sent = counter_address(bytes_sent)
        self.heartbeats_sent = counter_address(heartbeats_sent)
        self.session_id = session_id
        self.stream_id = stream_id
        self.mtu = mtu
        self.heartbeat_timeout_ns = heartbeat_timeout_ns
        self.new_data_allowed = False
        self.follows_status_messages = False
        self.time_of_last_data_ns = now_ns - heartbeat_timeout_ns
        self.time_of_last_heartbeat_ns = now_ns - heartbeat_timeout_ns

    def allow_new_data(self, bint allowed) -> None:
        """Whether new data may be sent now (the SenderStateMachine decides)."""
        self.new_data_allowed = allowed

    def follow_status_messages(self, bint follows) -> None:
        """Whether status messages move snd-lmt here (`on_status_message`): for unicast flow
        control only, whose limit is the receiver's consumption position plus its window."""
        self.follows_status_messages = follows

    cdef bint on_status_message(self, const char* frame) noexcept nogil:
        """A status message without flags (its length checked by the caller): if this sender
        follows them and it is of this stream, snd-lmt moves to its consumption position plus
        its window when that is further (Aeron's UnicastFlowControl.onStatusMessage); True if
        it moved. One out of reach (the SenderStateMachine's rule: consumed more than half a
        term past snd-pos, or more than a term behind it) moves nothing here: Python rejects
        and counts it when it takes the message."""
        cdef int64_t consumed, ahead, limit
        cdef int32_t term_length = self.log.term_length
        if not self.follows_status_messages \
                or aio_get_i32(frame + SM_SESSION_ID_OFFSET) != self.session_id \
                or aio_get_i32(frame + SM_STREAM_ID_OFFSET) != self.stream_id:
            return False
        consumed = compute_position(aio_get_i32(frame + SM_CONSUMPTION_TERM_ID_OFFSET),
                                    aio_get_i32(frame + SM_CONSUMPTION_TERM_OFFSET_OFFSET),
                                    self.log.position_bits_to_shift, self.log.initial_term_id)
        ahead = consumed - aio_load_i64(self.position)
        if ahead < -term_length or ahead > (term_length >> 1):
            return False
        limit = consumed + aio_get_i32(frame + SM_RECEIVER_WINDOW_OFFSET)
        if limit <= aio_load_i64(self.limit):
            return False
        aio_store_i64(self.limit, limit)
        return True

    cdef int scan(self, char** buffers, Py_ssize_t* lengths, int64_t* ends) noexcept nogil:
        """Up to MAX_DATAGRAMS_PER_SEND datagrams from snd-pos; ends[i]: the position after
        datagram i (past a PAD's whole length)."""
        cdef int64_t position = aio_load_i64(self.position), limit = aio_load_i64(self.limit)
        cdef int32_t term_length = self.log.term_length, term_offset, available, padding
        cdef int shift = self.log.position_bits_to_shift
        cdef int count = 0
        cdef char* term
        while position < limit and count < MAX_DATAGRAMS_PER_SEND:
            term = self.log.term(index_by_position(position, shift))
            term_offset = <int32_t> (position & (term_length - 1))
            available = scan_for_availability(term, term_offset,
                                              <int32_t> min(<int64_t> self.mtu, limit - position),
                                              term_length, &padding)
            if available == 0:
                break
            position += available + padding
            buffers[count] = term + term_offset
            lengths[count] = available
            ends[count] = position
            count += 1
        if count == 0 and position >= limit and self.log.producer_position() > position:
            aio_fetch_add_i64(self.bpe, 1)
            aio_fetch_add_i64(self.limits_reached, 1)
        return count

    def collect(self, list out, int64_t now_ns) -> int:
        """`send` without sockets: append the datagrams to send from snd-pos (views of the log,
        valid until the term is cleaned) to `out` and move snd-pos past them; returns how many.
        Only while new data is allowed (none otherwise)."""
        cdef char* buffers[MAX_DATAGRAMS_PER_SEND]
        cdef Py_ssize_t lengths[MAX_DATAGRAMS_PER_SEND]
        cdef int64_t ends[MAX_DATAGRAMS_PER_SEND]
        cdef Py_ssize_t offset
        cdef int64_t total = 0
        cdef int i, count = self.scan(buffers, lengths, ends) if self.new_data_allowed else 0
        if count:
            aio_store_i64(self.position, ends[count - 1])
            self.time_of_last_data_ns = now_ns
        for i in range(count):
            total += lengths[i]
            offset = buffers[i] - self.log.term(0)
            term = self._terms[offset // self.log.term_length]
            offset %= self.log.term_length
            out.append(term[offset:offset + lengths[i]])
        aio_fetch_add_i64(self.bytes_sent, total)
        return count

    cdef int send(self, DatagramSender sender, int64_t now_ns) noexcept nogil:
        """Send the datagrams from snd-pos to `sender`'s destinations and move snd-pos past those
        they all took (as Aeron: a full socket buffer takes the rest next time, no loss); returns
        how many were sent."""
        cdef char* buffers[MAX_DATAGRAMS_PER_SEND]
        cdef Py_ssize_t lengths[MAX_DATAGRAMS_PER_SEND]
        cdef int64_t ends[MAX_DATAGRAMS_PER_SEND]
        cdef int i, count = self.scan(buffers, lengths, ends)
        cdef Py_ssize_t taken
        cdef int64_t total = 0
        if count == 0:
            return 0
        taken = sender.send_all(buffers, lengths, count)
        if taken:
            aio_store_i64(self.position, ends[taken - 1])
            for i in range(taken):
                total += lengths[i]
            aio_fetch_add_i64(self.bytes_sent, total)
            self.time_of_last_data_ns = now_ns
        return <int> taken

    @property
    def heartbeat_deadline_ns(self) -> int:
        """When a heartbeat is due if nothing is sent meanwhile."""
        return self.heartbeat_deadline()

    cdef inline int64_t heartbeat_deadline(self) noexcept nogil:
        return max(self.time_of_last_data_ns, self.time_of_last_heartbeat_ns) \
            + self.heartbeat_timeout_ns

    cdef bint take_heartbeat(self, char* frame, int64_t now_ns) noexcept nogil:
        """If a heartbeat is due, write it to `frame` (HEADER_LENGTH bytes) and count it as sent
        now (as Aeron: a short send is repaired by the next one)."""
        cdef int64_t position
        cdef int shift = self.log.position_bits_to_shift
        cdef uint8_t flags = UNFRAGMENTED
        if now_ns < self.heartbeat_deadline():
            return False
        position = aio_load_i64(self.position)
        if aio_load_i32(self.log.meta + LOG_IS_PUBLICATION_REVOKED_OFFSET) & 0xFF:
            flags |= EOS_FLAG | REVOKED_FLAG  # the stream ends here, revoked (Aeron 1.53)
        elif position >= aio_load_i64(self.log.meta + LOG_END_OF_STREAM_POSITION_OFFSET):
            flags |= EOS_FLAG
        memset(frame, 0, HEADER_LENGTH)
        frame[FLAGS_FIELD_OFFSET] = <char> flags
        frame[TYPE_FIELD_OFFSET] = HDR_TYPE_DATA
        aio_put_i32(frame + TERM_OFFSET_FIELD_OFFSET,
                    <int32_t> (position & (self.log.term_length - 1)))
        aio_put_i32(frame + SESSION_ID_FIELD_OFFSET, self.session_id)
        aio_put_i32(frame + STREAM_ID_FIELD_OFFSET, self.stream_id)
        aio_put_i32(frame + TERM_ID_FIELD_OFFSET,
                    term_id_for_position(position, shift, self.log.initial_term_id))
        self.time_of_last_heartbeat_ns = now_ns
        aio_fetch_add_i64(self.heartbeats_sent, 1)
        aio_fetch_add_i64(self.bytes_sent, HEADER_LENGTH)
        return True

    cdef int send_heartbeat(self, DatagramSender sender, int64_t now_ns) noexcept nogil:
        """Send a heartbeat to `sender`'s destinations if one is due; returns 1 if it went."""
        cdef char frame[HEADER_LENGTH]
        cdef char* buffers[1]
        cdef Py_ssize_t lengths[1]
        if not self.take_heartbeat(frame, now_ns):
            return 0
        buffers[0] = frame
        lengths[0] = HEADER_LENGTH
        sender.send_all(buffers, lengths, 1)
        return 1

    def heartbeat(self, int64_t now_ns) -> bytes | None:
        """The heartbeat to send now, if one is due (counted as sent), else None."""
        cdef char frame[HEADER_LENGTH]
        if not self.take_heartbeat(frame, now_ns):
            return None
        return PyBytes_FromStringAndSize(frame, HEADER_LENGTH)
