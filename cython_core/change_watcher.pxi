# ChangeWatcher: a look, every few milliseconds and without the GIL, at shared memory written by a
# party that rings no doorbell (an Aeron client writing the driver's command ring buffer, Aeron's
# driver writing the clients' broadcast buffer). An idle event loop then sleeps until there is
# something to read, instead of waking to poll.

from posix.time cimport nanosleep, timespec
from posix.unistd cimport write


cdef class ChangeWatcher:
    """Signals `fd` (an eventfd the owner's loop reads) when the 64-bit value at `offset` of
    `buffer` differs from the one at `other` (other >= 0: a ring buffer's tail and head), or from
    the last value the owner acknowledged with `seen` (other < 0: a broadcast buffer's tail).

    Looks every `interval_ns` on a thread of its own that never holds the GIL; signals at each
    look while the values differ (an eventfd coalesces them). `close` stops the thread."""

    cdef AtomicBuffer buffer
    cdef Py_ssize_t offset
    cdef Py_ssize_t other
    cdef int64_t interval_ns
    cdef int fd
    cdef int64_t seen_value
    cdef int running
    cdef object thread

    def __cinit__(
        self, AtomicBuffer buffer, Py_ssize_t offset, Py_ssize_t other, int64_t interval_ns, int fd
    ):
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
        self.thread = None

    def start(self) -> None:
        import threading

        aio_store_i32(<char*> &self.running, 1)
        self.thread = threading.Thread(target=self._run, name="aeronio-change-watcher", daemon=True)
        self.thread.start()

    def seen(self, int64_t value) -> None:
        """The owner read up to `value` (mode other < 0)."""
        aio_store_i64(<char*> &self.seen_value, value)

    def _run(self) -> None:
        cdef timespec pause
        cdef uint64_t one = 1
        cdef int64_t value, reference
        cdef char* at = self.buffer.address + self.offset
        cdef char* other_at = self.buffer.address + self.other if self.other >= 0 else NULL
        pause.tv_sec = self.interval_ns // 1_000_000_000
        pause.tv_nsec = self.interval_ns % 1_000_000_000
        with nogil:
            while aio_load_i32(<char*> &self.running):
                nanosleep(&pause, NULL)
                value = aio_load_i64(at)
                if other_at != NULL:
                    reference = aio_load_i64(other_at)
                else:
                    reference = aio_load_i64(<char*> &self.seen_value)
                if value != reference:
                    write(self.fd, &one, 8)

    def close(self) -> None:
        """Stop looking (returns once the thread ended: within one interval)."""
        aio_store_i32(<char*> &self.running, 0)
        if self.thread is not None:
            self.thread.join()
            self.thread = None
