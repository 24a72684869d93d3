# The archive replay's read path (aeronio/archive/replay_session.py holds its rules): a run of a
# recording's blocks offered from a mapped segment file into the replay's exclusive publication,
# with the GIL released over the whole run, so that the replayer's thread copies beside the
# event loop's (the reference's DEDICATED replayer). A block at a time through Python, that
# thread would wait for the event loop's to hand the GIL back after every block, as the
# recorder's did before record_blocks. Whatever needs a decision (a header that is not sound, a
# shut window, a segment's or the replay's end) ends the run: the per-block path (RecordingReader
# .peek and try_offer_block) takes it from there, with its errors and its back-pressure.


from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_WRITABLE
from cpython.exc cimport PyErr_SetFromErrnoWithFilenameObject

cdef extern from "Python.h":
    object PyOS_FSPath(object path)
    bytes PyUnicode_EncodeFSDefault(object text)

cdef extern from "<time.h>" nogil:
    int nanosleep(const timespec* request, timespec* remaining)

cdef extern from "<fcntl.h>" nogil:
    int c_open "open"(const char* path, int flags)
    enum: O_RDONLY
    enum: O_CLOEXEC
    enum: O_NONBLOCK

cdef extern from "<sys/stat.h>" nogil:
    struct stat_size "stat":
        int64_t st_size
    int c_fstat "fstat"(int fd, stat_size* buf)

cdef extern from "<sys/mman.h>" nogil:
    void* mmap(void* address, size_t length, int prot, int flags, int fd, int64_t offset)
    int munmap(void* address, size_t length)
    void* MAP_FAILED
    enum: PROT_READ
    enum: MAP_SHARED

cdef extern from "<unistd.h>" nogil:
    int c_close "close"(int fd)


# A segment mapped without releasing the GIL. The replayer's thread maps each segment as it
# comes to it; mmap.mmap and open() release the GIL around their system calls, and each time the
# thread then waits for the event loop's thread to hand it back: with a subscriber polling on the
# loop a segment switch took 30-180 ms (2026-11-30, a 2-vCPU VM), as long as copying its 128 MiB
# or longer. On a local file open, fstat and mmap take microseconds, and munmap of a 128 MiB
# segment whose pages were all read 0.05-0.14 ms: held through them, the GIL never changes hands.
# (A file on a slow network file system would hold it longer; segments are local files.)


cdef char _NO_BYTES[1]  # where an empty segment's buffer points
cdef char* _BYTE_FORMAT = "B"


@cython.final
cdef class MappedSegment:
    """A file mapped read-only (shared), made by map_segment_file, as a read-only buffer of
    bytes (an empty file: no bytes, nothing mapped). close() unmaps it; while views of it are
    exported it raises BufferError and the close is pending: the segment stays mapped (and
    `closed` False) until the last view is released."""

    cdef char* _address  # NULL while closed
    cdef Py_ssize_t _length
    cdef Py_ssize_t _exports
    cdef bint _closing

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self._address == NULL:
            raise ValueError("the segment is unmapped")
        if flags & PyBUF_WRITABLE:
            raise BufferError("the segment is mapped read-only")
        view.obj = self
        view.buf = self._address
        view.len = self._length
        view.readonly = 1
        view.itemsize = 1
        view.format = _BYTE_FORMAT if flags & PyBUF_FORMAT else NULL
        view.ndim = 1
        view.shape = &self._length if flags & PyBUF_ND else NULL
        view.strides = &view.itemsize if flags & PyBUF_STRIDES == PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL
        self._exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self._exports -= 1
        if self._exports == 0 and self._closing:
            self._unmap()

    def __len__(self):
        return self._length

    @property
    def closed(self) -> bool:
        return self._address == NULL

    def close(self) -> None:
        if self._exports > 0:
            self._closing = True
            raise BufferError(f"{self._exports} exported views of the segment are still held")
        self._unmap()

    cdef void _unmap(self) noexcept:
        if self._address != NULL and self._address != _NO_BYTES:
            munmap(self._address, <size_t> self._length)
        self._address = NULL
        self._length = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __dealloc__(self):
        self._unmap()


def map_segment_file(object path) -> MappedSegment:
    """`path` mapped read-only, the GIL held throughout (see MappedSegment); OSError naming
    the path where it cannot be opened or mapped."""
    cdef object name = PyOS_FSPath(path)  # in C for str and bytes (os.fsencode is Python)
    cdef bytes encoded = name if type(name) is bytes else PyUnicode_EncodeFSDefault(name)
    cdef int fd
    cdef stat_size st
    cdef char* address = _NO_BYTES
    cdef MappedSegment mapped = MappedSegment.__new__(MappedSegment)  # before anything is mapped
    if b"\0" in encoded:
        raise ValueError(f"embedded null byte in the path {path!r}")
    fd = c_open(encoded, O_RDONLY | O_CLOEXEC | O_NONBLOCK)  # a FIFO would not block the GIL
    if fd < 0:
        PyErr_SetFromErrnoWithFilenameObject(OSError, path)
    try:
        if c_fstat(fd, &st) != 0:
            PyErr_SetFromErrnoWithFilenameObject(OSError, path)
        if st.st_size > 0:
            address = <char*> mmap(NULL, <size_t> st.st_size, PROT_READ, MAP_SHARED, fd, 0)
            if <void*> address == MAP_FAILED:
                PyErr_SetFromErrnoWithFilenameObject(OSError, path)
    finally:
        c_close(fd)
    mapped._address = address
    mapped._length = <Py_ssize_t> st.st_size
    return mapped


cdef int64_t _window_open(LogAppender appender, int64_t position, int64_t wanted,
                          int64_t wait_ns) noexcept nogil:
    """The publisher limit once the window from `position` holds `wanted` bytes (a frame of
    the MTU, or what is left to offer), waiting up to `wait_ns` (short sleeps, the GIL released)
    for the driver to move it as the subscribers consume; the limit as it is when the wait ran
    out, or when the log was closed or lost its subscribers meanwhile."""
    cdef int64_t limit = aio_load_i64(appender._limit)
    cdef int64_t deadline
    cdef int64_t frame = wanted
    cdef timespec nap
    if limit - position >= frame or wait_ns <= 0:
        return limit
    deadline = _monotonic_ns() + wait_ns
    nap.tv_sec = 0
    nap.tv_nsec = 20000
    while limit - position < frame and _monotonic_ns() < deadline and not appender.is_closed \
            and aio_load_i32(appender.log.meta + LOG_IS_CONNECTED_OFFSET) == 1:
        nanosleep(&nap, NULL)
        limit = aio_load_i64(appender._limit)
    return limit


cdef inline bint _sound_recorded_frame(const char* segment, Py_ssize_t size, Py_ssize_t offset,
                                       int64_t position, int32_t term_length,
                                       int64_t stop) noexcept nogil:
    """segments.frame_problem's rules as yes or no: the header at `offset` of a mapped segment
    of `size` bytes is a sound recorded frame for stream `position` (the bytes before `stop`
    are recorded): within the file, DATA or PAD, `position`'s term offset, and a length of a
    header at least that keeps the frame within its term, the recorded bytes and the file."""
    cdef int32_t length
    cdef int64_t aligned
    cdef int32_t expected = <int32_t> (position & (term_length - 1))
    cdef int kind
    if offset + HEADER_LENGTH > size:
        return False
    length = aio_get_i32(segment + offset)
    kind = (<uint8_t> segment[offset + TYPE_FIELD_OFFSET]) \
        | (<uint8_t> segment[offset + TYPE_FIELD_OFFSET + 1]) << 8
    if length < HEADER_LENGTH or (kind != HDR_TYPE_DATA and kind != HDR_TYPE_PAD):
        return False
    if aio_get_i32(segment + offset + TERM_OFFSET_FIELD_OFFSET) != expected:
        return False
    aligned = align_frame(length)
    return expected + aligned <= term_length and position + aligned <= stop \
        and offset + aligned <= size


cdef inline void _wake_replay_readers(LogAppender appender) noexcept nogil:
    """After a block: wake whoever waits for data on the log (a subscriber of this process
    parked on its doorbell, or another process parked in a wake slot), the GIL taken only then."""
    aio_fence_full()  # the frame's length store must be visible before these loads
    if (appender.data_doorbell is not None
            and aio_load_i32(<char*> &appender.data_doorbell.waiters) > 0) \
            or _parked_elsewhere(appender.log.meta, False):
        with gil:
            appender._wake_readers()


def offer_recorded(LogAppender appender, object segment, int64_t segment_base, int64_t limit,
                   int64_t stop, int32_t block_length_limit, int64_t max_length,
                   int64_t window_wait_ns) -> int:
    """Offer a recording's frames from `segment` (a mapped segment file whose byte 0 stands for
    stream position `segment_base`) into the exclusive `appender`, from its position on, in
    blocks as a replay's (whole frames of one term, at most `block_length_limit` bytes, within
    the publication's window), up to position `limit` and about `max_length` bytes, with the
    GIL released; the bytes before `stop` are recorded. A shut window is waited for up to
    `window_wait_ns` at a time (the GIL is taken back only at the run's end: while the event
    loop's thread is busy that takes up to the interpreter's switch interval). Returns the
    position reached. Ends the run, before anything is offered, at a header that is not sound
    (segments.frame_problem), a first frame longer than the window or the limit allow, the
    segment's end, a closed or unconnected publication and a log with no term left: the
    per-block path decides those."""
    cdef Py_buffer view
    cdef const char* source
    cdef MappedLog log = appender.log
    cdef int32_t term_length = log.term_length
    cdef int64_t start, position, length, aligned, end, after, term_left, bound
    cdef Py_ssize_t offset
    cdef int32_t resulting
    if not appender.exclusive:
        raise TypeError("offer_recorded needs an exclusive publication")
    if block_length_limit < HEADER_LENGTH:
        raise ValueError(f"block_length_limit {block_length_limit} is below a frame header")
    if appender.is_closed:
        return appender._position()
    PyObject_GetBuffer(segment, &view, PyBUF_SIMPLE)
    source = <const char*> view.buf
    start = position = appender._position()
    try:
        with nogil:
            while position < limit and position - start < max_length:
                if appender._term_offset == term_length:  # the last block filled the term
                    if appender._rotate_exclusive() != ADMIN_ACTION_CODE:
                        break
                offset = <Py_ssize_t> (position - segment_base)
                if offset < 0 or offset >= view.len or appender.is_closed \
                        or aio_load_i32(log.meta + LOG_IS_CONNECTED_OFFSET) != 1:
                    break
                term_left = term_length - (position & (term_length - 1))
                length = min(<int64_t> block_length_limit, limit - position, term_left,
                             _window_open(appender, position,
                                          min(<int64_t> log.mtu_length, limit - position),
                                          window_wait_ns) - position)
                if length < HEADER_LENGTH or not _sound_recorded_frame(
                        source, view.len, offset, position, term_length, stop):
                    break
                end = offset  # whole frames (lengths only, as scan_whole_frames) within length
                bound = min(offset + length, view.len)  # and the segment: it may end short
                while end + HEADER_LENGTH <= bound:
                    aligned = frame_extent(aio_get_i32(source + end), end, bound)
                    if aligned <= 0:
                        break
                    end += aligned
                after = position + end - offset
                if end == offset or (after < min(stop, position + term_left) and
                                     not _sound_recorded_frame(source, view.len, end, after,
                                                               term_length, stop)):
                    break
                resulting = appender._copy_block(source + offset, <int32_t> (end - offset),
                                                 aio_get_i32(source + offset))
                appender._term_offset = resulting
                position = after
                _wake_replay_readers(appender)
    finally:
        PyBuffer_Release(&view)
    if position != start:
        appender._space_found()
    return position
