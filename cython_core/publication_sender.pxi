# The sender's per-datagram work (Aeron's NetworkPublication.sendData): whole frames from the
# sender position up to the sender limit, at most an MTU per datagram, never across a term end, a
# PAD as its header only. This is the one sender of new data: the driver's DataPath sends the
# datagrams straight from the log (`send`); without sockets (the tests' in-memory networks),
# `collect` hands out the same datagrams as views. The SenderStateMachine, in Python, says when new
# data may go (`allow_new_data`) and sends the rest (SETUPs, retransmits, heartbeats).

cdef enum:
    MAX_DATAGRAMS_PER_SEND = 64


cdef class PublicationSender:
    """Cuts a network publication's log into datagrams from snd-pos up to snd-lmt and moves
    snd-pos over those sent; blocked at snd-lmt with more appended, it counts a flow control
    limit (snd-bpe and the system-wide counter).

    Each piece of state has one writer. `new_data_allowed` is the state machine's (through
    `allow_new_data`: no SETUP is due and no retransmit is scheduled, which go first);
    `time_of_last_data_ns`, when new data was last sent (a heartbeat follows 100 ms without), is
    this sender's."""

    cdef readonly MappedLog log
    cdef list _terms
    cdef object _positions  # kept alive: the addresses below point into them
    cdef char* position
    cdef char* limit
    cdef char* bpe
    cdef char* limits_reached
    cdef char* bytes_sent
    cdef int32_t mtu
    cdef readonly bint new_data_allowed
    cdef readonly int64_t time_of_last_data_ns

    def __cinit__(self, MappedLog log, list terms, object sender_position, object sender_limit,
                  object sender_bpe, object flow_control_limits, object bytes_sent, int32_t mtu,
                  int64_t time_of_last_data_ns):
        """terms: a writable buffer over each of the log's terms (what `collect` slices)."""
        if len(terms) != PARTITION_COUNT or mtu < HEADER_LENGTH:
            raise ValueError(f"{len(terms)} terms or mtu {mtu} invalid")
        self.log = log
        self._terms = terms
        self._positions = (sender_position, sender_limit, sender_bpe, flow_control_limits,
                           bytes_sent)
        self.position = counter_address(sender_position)
        self.limit = counter_address(sender_limit)
        self.bpe = counter_address(sender_bpe)
        self.limits_reached = counter_address(flow_control_limits)
        self.bytes_sent = counter_address(bytes_sent)
        self.mtu = mtu
        self.new_data_allowed = False
        self.time_of_last_data_ns = time_of_last_data_ns

    def allow_new_data(self, bint allowed) -> None:
        """Whether new data may be sent now (the SenderStateMachine decides)."""
        self.new_data_allowed = allowed

    cdef int scan(self, char** buffers, Py_ssize_t* lengths, int64_t* ends) noexcept nogil:
        """Up to MAX_DATAGRAMS_PER_SEND datagrams from snd-pos; ends[i]: the position after
        datagram i (past a PAD's whole length)."""
        cdef int64_t position = aio_load_i64(self.position), limit = aio_load_i64(self.limit)
        cdef int32_t term_length = self.log.term_length, term_offset, available, padding
        cdef int shift = self.log.position_bits_to_shift
        cdef int count = 0
        cdef char* term
        while position < limit and count < MAX_DATAGRAMS_PER_SEND:
            term = self.log.term(<int> ((position >> shift) % PARTITION_COUNT))
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
