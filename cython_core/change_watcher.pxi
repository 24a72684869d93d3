# ChangeWatcher: a look, every few milliseconds and without the GIL, at shared memory written by a
# party that rings no doorbell (an Aeron client writing the driver's command ring buffer, Aeron's
# driver writing the clients' broadcast buffer). An idle event loop then sleeps until there is
# something to read, instead of waking to poll. Paused, the thread sleeps until resumed: no
# wake-ups at all while nobody who rings no doorbell is there.

from posix.unistd cimport read, write, close as close_fd


cdef extern from "<sys/eventfd.h>" nogil:
    enum: EFD_CLOEXEC
    enum: EFD_NONBLOCK
    int eventfd(unsigned int initval, int flags)


cdef class ChangeWatcher:
    """Signals `fd` (an eventfd the owner's loop reads) when the 64-bit value at `offset` of
    `buffer` differs from the one at `other` (other >= 0: a ring buffer's tail and head), or from
    the last value the owner acknowledged with `seen` (other < 0: a broadcast buffer's tail).

    Looks every `interval_ns` on a thread of its own that never holds the GIL; signals at each
    look while the values differ (an eventfd coalesces them). `pause` stops the looks (the thread
    sleeps until `resume`, which looks at once); `close` stops the thread."""

    cdef AtomicBuffer buffer
    cdef Py_ssize_t offset
    cdef Py_ssize_t other
    cdef int64_t interval_ns
    cdef int fd
    cdef int control_fd  # wakes the thread: resumed, or closed
    cdef int64_t seen_value
    cdef int running
    cdef int active
    cdef object thread

    def __cinit__(
        self, AtomicBuffer buffer, Py_ssize_t offset, Py_ssize_t other, int64_t interval_ns, int fd
    ):
        self.control_fd = -1
        buffer._at(offset, 8)
        if other >= 0:
            buffer._at(other, 8)
        if interval_ns <= 0:
            raise ValueError(f"interval_ns must be positive, got {interval_ns}")
        self.buffer = buffer
        self.offset = offset
        self.other = other
        self.interval_ns = interval_ns
        self.fd = fd
        self.seen_value = aio_load_i64(buffer.address + offset)
        self.running = 0
        self.active = 1
        self.thread = None
        self.control_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
        if self.control_fd < 0:
            raise OSError("eventfd failed")

    def __dealloc__(self):
        if self.control_fd >= 0:
            close_fd(self.control_fd)

    def start(self) -> None:
        import threading

        aio_store_i32(<char*> &self.running, 1)
        self.thread = threading.Thread(target=self._run, name="aeronio-change-watcher", daemon=True)
        self.thread.start()

    @property
    def active(self) -> bool:
        """Whether it looks (not paused)."""
        return aio_load_i32(<char*> &self.active) != 0

    def pause(self) -> None:
        """Stop looking after the look under way; the thread sleeps until `resume` or `close`."""
        aio_store_i32(<char*> &self.active, 0)

    def resume(self) -> None:
        """Look at once, then every interval again."""
        aio_store_i32(<char*> &self.active, 1)
        self._wake_thread()

    def seen(self, int64_t value) -> None:
        """The owner read up to `value` (mode other < 0)."""
        aio_store_i64(<char*> &self.seen_value, value)

    cdef void _wake_thread(self) noexcept nogil:
        cdef uint64_t one = 1
        write(self.control_fd, &one, 8)

    def _run(self) -> None:
        cdef timespec pause
        cdef pollfd control
        cdef uint64_t one = 1, drained
        cdef int64_t value, reference
        cdef int woken
        cdef char* at = self.buffer.address + self.offset
        cdef char* other_at = self.buffer.address + self.other if self.other >= 0 else NULL
        pause.tv_sec = self.interval_ns // 1_000_000_000
        pause.tv_nsec = self.interval_ns % 1_000_000_000
        control.fd = self.control_fd
        control.events = POLLIN
        with nogil:
            while aio_load_i32(<char*> &self.running):
                if aio_load_i32(<char*> &self.active):
                    woken = ppoll(&control, 1, &pause, NULL)
                else:
                    woken = ppoll(&control, 1, NULL, NULL)
                if woken > 0:
                    read(self.control_fd, &drained, 8)
                if not aio_load_i32(<char*> &self.active) or not aio_load_i32(<char*> &self.running):
                    continue
                value = aio_load_i64(at)
                if other_at != NULL:
                    reference = aio_load_i64(other_at)
                else:
                    reference = aio_load_i64(<char*> &self.seen_value)
                if value != reference:
                    write(self.fd, &one, 8)

    def close(self) -> None:
        """Stop looking and end the thread (returns once it ended)."""
        aio_store_i32(<char*> &self.running, 0)
        self._wake_thread()
        if self.thread is not None:
            self.thread.join()
            self.thread = None
