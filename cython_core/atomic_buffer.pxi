# AtomicBuffer: a writable buffer (usually a numpy.memmap over a shared file) with atomic,
# bounds-checked access for Python code: counters, log metadata, tests.


# Pins
# An address kept past the call that took it must be pinned: its holder keeps a memoryview of
# the buffer (where an owner reference was, or last in its struct: never among the hot
# fields), which holds the buffer's export, so the owner cannot free or move the memory under
# it: an mmap's close or a bytearray's resize raise BufferError until the holder goes (a
# memoryview the holder was given may be released by its user: the pin's own view of the same
# buffer keeps the memory).


cdef char* buffer_address(object buffer, Py_ssize_t* length) except NULL:
    """The address and length of a writable, C-contiguous byte buffer (ValueError for an empty
    one): valid for the call, or for as long as a pin of it is kept."""
    cdef unsigned char[::1] view = buffer
    length[0] = view.shape[0]
    if view.shape[0] == 0:
        raise ValueError("buffer is empty")
    return <char*> &view[0]


cdef class AtomicBuffer:
    """Atomic views on a writable byte buffer shared between threads or processes.

    Loads are acquire, stores are release, CAS and get_and_add are sequentially consistent.
    Offsets must be naturally aligned for the width accessed. The buffer stays pinned while
    this lives (its export held: closing or resizing it raises BufferError).
    """

    cdef readonly object owner
    cdef char* address
    cdef readonly Py_ssize_t capacity
    cdef object _pin

    def __cinit__(self, object buffer):
        self.owner = buffer
        self._pin = memoryview(buffer)
        self.address = buffer_address(self._pin, &self.capacity)

    cdef inline char* _at(self, Py_ssize_t offset, Py_ssize_t width) except NULL:
        if offset < 0 or offset + width > self.capacity:
            raise IndexError(f"offset {offset} (+{width}) outside buffer of {self.capacity} bytes")
        if offset % width != 0:
            raise ValueError(f"offset {offset} not aligned to {width} bytes")
        return self.address + offset

    def get_int64_volatile(self, Py_ssize_t offset) -> int:
        return aio_load_i64(self._at(offset, 8))

    def get_int32_volatile(self, Py_ssize_t offset) -> int:
        return aio_load_i32(self._at(offset, 4))

    def fence_release(self) -> None:
        """No access before it is seen after a store that follows it (Aeron's release())."""
        aio_fence_release()

    def fence_acquire(self) -> None:
        """No access after it is made before a load that precedes it (Aeron's acquire())."""
        aio_fence_acquire()

    def put_int64_ordered(self, Py_ssize_t offset, int64_t value) -> None:
        aio_store_i64(self._at(offset, 8), value)

    def put_int32_ordered(self, Py_ssize_t offset, int32_t value) -> None:
        aio_store_i32(self._at(offset, 4), value)

    def compare_and_set_int64(self, Py_ssize_t offset, int64_t expected, int64_t value) -> bool:
        return aio_cas_i64(self._at(offset, 8), expected, value)

    def compare_and_set_int32(self, Py_ssize_t offset, int32_t expected, int32_t value) -> bool:
        return aio_cas_i32(self._at(offset, 4), expected, value)

    def get_and_add_int64(self, Py_ssize_t offset, int64_t delta) -> int:
        return aio_fetch_add_i64(self._at(offset, 8), delta)

    def get_and_add_int32(self, Py_ssize_t offset, int32_t delta) -> int:
        return aio_fetch_add_i32(self._at(offset, 4), delta)

    def get_int64(self, Py_ssize_t offset) -> int:
        return aio_get_i64(self._at(offset, 8))

    def get_int32(self, Py_ssize_t offset) -> int:
        return aio_get_i32(self._at(offset, 4))

    def put_int64(self, Py_ssize_t offset, int64_t value) -> None:
        aio_put_i64(self._at(offset, 8), value)

    def put_int32(self, Py_ssize_t offset, int32_t value) -> None:
        aio_put_i32(self._at(offset, 4), value)

    def __len__(self):
        return self.capacity


cdef char* counter_address(object counter) except NULL:
    """The address of a position's 8 bytes (anything with an AtomicBuffer `buffer` and `offset`)."""
    cdef AtomicBuffer buffer = counter.buffer
    return buffer._at(counter.offset, 8)
