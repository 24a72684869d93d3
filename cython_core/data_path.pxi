# DataPath: the driver's per-message work in one C call per duty cycle (Aeron's sender and
# receiver agents in their steady state), and whether the conductor's Python duty cycle is due.

cdef extern from "<poll.h>" nogil:
    cdef struct pollfd:
        int fd
        short events
        short revents
    int c_poll "poll" (pollfd* fds, unsigned long nfds, int timeout)
    enum: POLLIN

cdef extern from "<stdlib.h>" nogil:
    long long llabs(long long value)

cdef enum:
    BOOKKEEPING_BACKLOG = 8192  # bytes the watched positions move before the bookkeeping is due
    BOOKKEEPING_IDLE_CYCLES = 16  # duty cycles without data before the bookkeeping is due


cdef class DataPath:
    """One `do_work(now_ns)`: new data of the publications whose senders allow it sent from
    their logs (PublicationSender); a poll(2) over the sockets; the data sockets with input
    drained (recvmmsg) and their data packets rebuilt into images (ImageRouter). Python is needed
    only for what is left: `conductor_due` says when.

    Due at once: input on a control socket (status messages, NAKs), datagrams the router left
    (`slow_datagrams(fd)`: SETUPs, heartbeats, unknown sessions; their socket is not read again
    until they are taken), an image's data from a sender new to it (`sources_changed`). Due as
    bookkeeping (receiver positions, status messages, NAKs, publisher limits, cleaning) once a
    watched position moved (`pending`: subscriber positions, receiver high-water marks, sender
    positions, producer positions): when they have moved BOOKKEEPING_BACKLOG bytes in all, or after
    BOOKKEEPING_IDLE_CYCLES duty cycles in a row that moved no data. So a stream's bookkeeping
    runs every few KiB, and a lone message (a ping-pong) reaches its subscriber and its reply
    leaves without waiting for it; until `bookkept()` it stays due. Nothing that moved is missed:
    each call compares the positions with what the last one saw.
    """

    cdef pollfd* _fds
    cdef Py_ssize_t _nfds
    cdef Py_ssize_t _ncontrol  # _fds[:_ncontrol] are control sockets, read by Python
    cdef list _receivers  # (DatagramReceiver, ImageRouter) per data socket, after the control ones
    cdef list _rests  # per data socket: what the router left of its last receive
    cdef list _senders  # (PublicationSender, DatagramSender)
    cdef char** _words
    cdef int64_t* _seen_words
    cdef Py_ssize_t _nwords
    cdef list _logs
    cdef int64_t* _seen_logs
    cdef list _owners
    cdef readonly bint pending
    cdef readonly int64_t moved  # bytes the watched positions moved in the last do_work
    cdef int64_t _backlog
    cdef int _idle_cycles
    cdef readonly bint conductor_due

    def __cinit__(self, control_fds, receivers, senders, counters, logs,
                  DataPath previous=None):
        """control_fds: sockets Python reads; receivers: (fd, DatagramReceiver, ImageRouter) per
        data socket; senders: (PublicationSender, DatagramSender) per network publication;
        counters: positions (with `buffer` and `offset`) that give bookkeeping when they move;
        logs: MappedLogs whose producer positions do. A position `previous` (the data path this
        one replaces) watched starts from what it saw, so that a move since is seen; the others
        from where they are."""
        cdef Py_ssize_t i, j
        cdef AtomicBuffer buffer
        control_fds, receivers, counters = list(control_fds), list(receivers), list(counters)
        self._logs = list(logs)
        self._ncontrol = len(control_fds)
        self._nfds = self._ncontrol + len(receivers)
        self._nwords = len(counters)
        self._fds = <pollfd*> malloc(max(1, self._nfds) * sizeof(pollfd))
        self._words = <char**> malloc(max(1, self._nwords) * sizeof(char*))
        self._seen_words = <int64_t*> malloc(max(1, self._nwords) * sizeof(int64_t))
        self._seen_logs = <int64_t*> malloc(max(1, len(self._logs)) * sizeof(int64_t))
        if not self._fds or not self._words or not self._seen_words or not self._seen_logs:
            raise MemoryError()
        self._receivers = []
        self._rests = []
        for i, fd in enumerate(control_fds + [fd for fd, _, _ in receivers]):
            self._fds[i].fd = fd
            self._fds[i].events = POLLIN
            self._fds[i].revents = 0
        for _, receiver, router in receivers:
            self._receivers.append((<DatagramReceiver?> receiver, <ImageRouter?> router))
            self._rests.append([])
        self._senders = []
        for sender, channel in senders:
            self._senders.append((<PublicationSender?> sender, <DatagramSender?> channel))
        self._owners = []
        for i in range(self._nwords):
            buffer = counters[i].buffer
            self._words[i] = buffer._at(counters[i].offset, 8)
            self._seen_words[i] = aio_load_i64(self._words[i])
            self._owners.append(buffer)
            if previous is not None:
                for j in range(previous._nwords):
                    if previous._words[j] == self._words[i]:
                        self._seen_words[i] = previous._seen_words[j]
        for i in range(len(self._logs)):
            if not isinstance(self._logs[i], MappedLog):
                raise TypeError("logs must be MappedLogs")
            self._seen_logs[i] = (<MappedLog> self._logs[i]).producer_position()
            if previous is not None:
                for j in range(len(previous._logs)):
                    if previous._logs[j] is self._logs[i]:
                        self._seen_logs[i] = previous._seen_logs[j]
        self.pending = False
        self.moved = 0
        self._backlog = 0
        self._idle_cycles = 0
        self.conductor_due = False

    def __dealloc__(self):
        free(self._fds)
        free(self._words)
        free(self._seen_words)
        free(self._seen_logs)

    cpdef int do_work(self, int64_t now_ns) except -1:
        """Receive, rebuild and send what needs no Python; returns the datagrams received and
        sent, and sets `conductor_due`."""
        cdef Py_ssize_t i
        cdef int work = 0, count
        cdef bint urgent = False
        cdef int64_t value, moved = 0
        cdef DatagramReceiver receiver
        cdef ImageRouter router
        cdef PublicationSender sender
        for sender, channel in self._senders:
            if sender.new_data_allowed:
                work += sender.send(channel, now_ns)
        if self._nfds > 0 and c_poll(self._fds, self._nfds, 0) < 0:
            for i in range(self._nfds):
                self._fds[i].revents = 0  # interrupted: nothing known, look again next time
        for i in range(self._ncontrol):
            urgent |= self._fds[i].revents != 0
        for i in range(self._ncontrol, self._nfds):
            if self._rests[i - self._ncontrol]:  # Python has not taken them: read no more
                urgent = True
            elif self._fds[i].revents != 0:
                receiver = self._receivers[i - self._ncontrol][0]
                count = receiver.recv(self._fds[i].fd)
                if count:
                    work += count
                    router = self._receivers[i - self._ncontrol][1]
                    rest = router.route_received(receiver, now_ns)
                    self._rests[i - self._ncontrol] = rest
                    urgent |= len(rest) > 0 or router.sources_changed
        for i in range(self._nwords):
            value = aio_load_i64(self._words[i])
            moved += llabs(value - self._seen_words[i])
            self._seen_words[i] = value
        for i in range(len(self._logs)):
            value = (<MappedLog> self._logs[i]).producer_position()
            moved += llabs(value - self._seen_logs[i])
            self._seen_logs[i] = value
        if work:
            self._idle_cycles = 0
        elif self._idle_cycles < BOOKKEEPING_IDLE_CYCLES:
            self._idle_cycles += 1
        self.moved = moved
        self._backlog += moved
        self.pending |= moved > 0
        self.conductor_due = urgent or self.pending and (
            self._backlog >= BOOKKEEPING_BACKLOG or self._idle_cycles >= BOOKKEEPING_IDLE_CYCLES)
        return work

    def bookkept(self) -> None:
        """The conductor's duty cycle ran: nothing is due until something moves again."""
        self.pending = False
        self._backlog = 0
        self.conductor_due = False

    cpdef bint has_input(self, int fd):
        """Whether the last `do_work` found input on control socket `fd` (True for a socket it
        does not watch: one opened since, which must be read to know)."""
        cdef Py_ssize_t i
        for i in range(self._ncontrol):
            if self._fds[i].fd == fd:
                return self._fds[i].revents != 0
        return True

    def slow_datagrams(self, DatagramReceiver receiver) -> list:
        """What the router left of the last receive of `receiver` (its data socket's), as
        (memoryview, source) pairs valid until its next receive; taken once."""
        cdef Py_ssize_t i
        for i in range(len(self._receivers)):
            if self._receivers[i][0] is receiver:
                rest = self._rests[i]
                self._rests[i] = []
                return rest
        return []
