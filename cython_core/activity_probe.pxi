# ActivityProbe: whether a driver duty cycle would find work, in one C call (one poll(2) on the
# sockets and a look at the positions that give work when they move).

cdef extern from "<poll.h>" nogil:
    cdef struct pollfd:
        int fd
        short events
        short revents
    int c_poll "poll" (pollfd* fds, unsigned long nfds, int timeout)
    enum: POLLIN

cdef int64_t UNSEEN = -0x7FFFFFFFFFFFFFFF - 1  # no position has this value


cdef class ActivityProbe:
    """Whether anything moved since the last `moved()`: a socket has input, a watched counter
    (a subscriber's position) or a log's producer position changed.

    The first call says True. Each call takes a new snapshot before the duty cycle it gates
    runs, so a change during that duty cycle is seen by the next call: none is missed.
    `has_input(fd)` then tells which sockets to read.
    """

    cdef pollfd* _fds
    cdef Py_ssize_t _nfds
    cdef char** _words
    cdef int64_t* _seen_words
    cdef Py_ssize_t _nwords
    cdef list _logs
    cdef int64_t* _seen_logs
    cdef list _owners

    def __cinit__(self, fds, counters, logs):
        """fds: socket file descriptors; counters: objects with `buffer` (AtomicBuffer) and
        `offset`; logs: MappedLogs."""
        cdef Py_ssize_t i
        cdef AtomicBuffer buffer
        fds, counters, self._logs = list(fds), list(counters), list(logs)
        self._nfds, self._nwords = len(fds), len(counters)
        self._fds = <pollfd*> malloc(max(1, self._nfds) * sizeof(pollfd))
        self._words = <char**> malloc(max(1, self._nwords) * sizeof(char*))
        self._seen_words = <int64_t*> malloc(max(1, self._nwords) * sizeof(int64_t))
        self._seen_logs = <int64_t*> malloc(max(1, len(self._logs)) * sizeof(int64_t))
        if not self._fds or not self._words or not self._seen_words or not self._seen_logs:
            raise MemoryError()
        for i in range(self._nfds):
            self._fds[i].fd = fds[i]
            self._fds[i].events = POLLIN
            self._fds[i].revents = POLLIN  # unknown until polled
        self._owners = []
        for i in range(self._nwords):
            buffer = counters[i].buffer
            self._words[i] = buffer._at(counters[i].offset, 8)
            self._seen_words[i] = UNSEEN
            self._owners.append(buffer)
        for i in range(len(self._logs)):
            if not isinstance(self._logs[i], MappedLog):
                raise TypeError("logs must be MappedLogs")
            self._seen_logs[i] = UNSEEN

    def __dealloc__(self):
        free(self._fds)
        free(self._words)
        free(self._seen_words)
        free(self._seen_logs)

    cpdef bint moved(self):
        cdef Py_ssize_t i
        cdef bint moved = self._nfds > 0 and c_poll(self._fds, self._nfds, 0) > 0
        cdef int64_t value
        for i in range(self._nwords):
            value = aio_load_i64(self._words[i])
            if value != self._seen_words[i]:
                self._seen_words[i] = value
                moved = True
        for i in range(len(self._logs)):
            value = (<MappedLog> self._logs[i]).producer_position()
            if value != self._seen_logs[i]:
                self._seen_logs[i] = value
                moved = True
        return moved

    cpdef bint has_input(self, int fd):
        """Whether the last `moved()` found input on socket `fd` (True for a socket it does not
        watch: one opened since, which must be read to know)."""
        cdef Py_ssize_t i
        for i in range(self._nfds):
            if self._fds[i].fd == fd:
                return self._fds[i].revents != 0
        return True
