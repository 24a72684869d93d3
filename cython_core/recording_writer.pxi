# The archive recorder's write path (aeronio/archive/recording_writer.py holds its rules): an
# image's blocks (block_poll's: whole frames of one term) copied into a segment file by pwrite,
# with the GIL released over a whole run of blocks. The recorder runs on a thread of its own;
# a block at a time through Python it waited for the event loop's thread to hand the GIL back
# after every write (up to the 5 ms switch interval while that thread is busy), which bounded a
# recording at 1 KiB messages far below what the disk takes.

from libc.errno cimport errno, EINTR, EIO
from posix.time cimport clock_gettime, CLOCK_MONOTONIC
from posix.unistd cimport pwrite, fsync, fdatasync
import os as _os

cdef extern from "<fcntl.h>" nogil:
    int fallocate(int fd, int mode, int64_t offset, int64_t length)
    enum: FALLOC_FL_KEEP_SIZE

cdef extern from "<sys/vfs.h>" nogil:
    struct statfs:
        long f_type
    int fstatfs(int fd, statfs* buf)

cdef enum:
    _TMPFS_MAGIC = 0x01021994


cdef bint _allocates_before_writing(int fd) noexcept nogil:
    """Whether a block's extent is allocated (fallocate) before it is written: on a disk file
    system a buffered write into allocated space skips the delayed allocation's bookkeeping per
    page (ext4 here: 19 instead of 26 ms of CPU per 128 MiB of 2 MiB writes); on tmpfs the
    allocation is the page itself, zeroed first, so there it costs."""
    cdef statfs fs
    return fstatfs(fd, &fs) != 0 or fs.f_type != _TMPFS_MAGIC


cdef inline int64_t _monotonic_ns() noexcept nogil:
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec * 1000000000LL + now.tv_nsec


cdef int _pwrite_all(int fd, const char* data, Py_ssize_t length, int64_t offset) noexcept nogil:
    """0, or the errno of the write that failed."""
    cdef ssize_t written
    while length > 0:
        written = pwrite(fd, data, <size_t> length, offset)
        if written < 0:
            if errno == EINTR:
                continue
            return errno
        if written == 0:
            return EIO
        data += written
        length -= written
        offset += written
    return 0


cdef int _write_block(int fd, const char* block, Py_ssize_t length, int64_t offset,
                      int sync_level) noexcept nogil:
    """Everything but the first frame's length word, then that word (a reader stops at a zero
    length, so it never sees part of a block); then fdatasync (sync level 1) or fsync (2).
    0, or the errno of what failed."""
    cdef int error = _pwrite_all(fd, block + FRAME_LENGTH_FIELD_OFFSET + 4,
                                 length - FRAME_LENGTH_FIELD_OFFSET - 4,
                                 offset + FRAME_LENGTH_FIELD_OFFSET + 4)
    if error == 0:
        error = _pwrite_all(fd, block, FRAME_LENGTH_FIELD_OFFSET + 4, offset)
    if error == 0 and sync_level == 1 and fdatasync(fd) != 0:
        error = errno
    elif error == 0 and sync_level == 2 and fsync(fd) != 0:
        error = errno
    return error


def write_block(int fd, object block, int64_t offset, int sync_level) -> int:
    """Write `block` (whole frames) at file `offset` as a recording does (its length word last,
    then synced per `sync_level`: 0 none, 1 fdatasync, 2 fsync); returns the ns it took.
    OSError when a write fails."""
    cdef const unsigned char[::1] data = block
    cdef int error
    cdef int64_t began
    if data.shape[0] < HEADER_LENGTH:
        raise ValueError(f"a block is whole frames, not {data.shape[0]} bytes")
    with nogil:
        began = _monotonic_ns()
        error = _write_block(fd, <const char*> &data[0], data.shape[0], offset, sync_level)
    if error:
        raise OSError(error, _os.strerror(error))
    return _monotonic_ns() - began


cdef inline bint _consumer_awaited(MappedLog log, Doorbell consumed) noexcept nogil:
    """Whether anyone waits to hear that the image was consumed (what ImageReader._advance
    rings or wakes: the doorbell's waiters, a publisher that wants its limit moved, another
    process parked for space on the log)."""
    aio_fence_full()  # the position's store must be visible before these loads
    if consumed is not None and aio_load_i32(<char*> &consumed.waiters) > 0:
        return True
    if aio_load_i64(log.meta + LOG_LIMIT_WANTED_OFFSET) != 0:
        return True
    return _parked_elsewhere(log.meta, True)


def record_blocks(ImageReader image, int fd, int64_t file_position, int64_t file_end,
                  int block_length_limit, int64_t max_length, AtomicBuffer position_counter,
                  Py_ssize_t position_offset, int sync_level) -> tuple:
    """Write the image's blocks (as block_poll's, at most block_length_limit bytes each) into
    file `fd`, whose offset 0 stands for position `file_position`, up to position `file_end`
    and at most about `max_length` bytes, each as write_block does, the GIL released. After
    each block the image's position, then the counter at `position_offset` of
    `position_counter` (rec-pos), move to its end; a block whose write fails moves neither.
    Stops when no whole frame is left to read. Returns (bytes written, ns spent writing, the
    longest write's ns, the errno of the write that failed or 0). As block_poll, AeronError
    for a corrupt frame found before anything was written."""
    image._settle()
    if image._closed:
        return 0, 0, 0, 0
    cdef char* rec_pos = position_counter._at(position_offset, 8)
    cdef MappedLog log = image.log
    cdef Doorbell consumed = image.consumed_doorbell
    cdef int32_t term_length = log.term_length
    cdef int64_t start = aio_load_i64(image._position)
    cdef int64_t position = start, began, took, total = 0, longest = 0
    cdef int32_t term_offset = 0, limit_offset, end_offset
    cdef char* term = NULL
    cdef int error = 0
    cdef bint allocate
    if block_length_limit < HEADER_LENGTH:
        raise ValueError(f"block_length_limit {block_length_limit} is below a frame header")
    with nogil:
        allocate = _allocates_before_writing(fd)
        while position < file_end and position - start < max_length and not image._closed:
            term_offset = <int32_t> (position & (term_length - 1))
            term = log.term(index_by_position(position, log.position_bits_to_shift))
            limit_offset = <int32_t> min(<int64_t> term_offset + block_length_limit, term_length)
            end_offset = scan_block(term, term_offset, limit_offset, term_length)
            if end_offset == term_offset:
                break
            began = _monotonic_ns()
            if allocate:  # a hint: where it fails (no space, not supported) the write tells
                fallocate(fd, FALLOC_FL_KEEP_SIZE, position - file_position,
                          end_offset - term_offset)
            error = _write_block(fd, term + term_offset, end_offset - term_offset,
                                 position - file_position, sync_level)
            took = _monotonic_ns() - began
            if error:
                break
            total += took
            longest = max(longest, took)
            position += end_offset - term_offset
            aio_store_i64(image._position, position)
            aio_store_i64(rec_pos, position)
            if _consumer_awaited(log, consumed):
                with gil:
                    image._advance(position)
    if position == start and error == 0 and term != NULL and position < file_end:
        image._extent(term_offset, aio_load_i32(term + term_offset), True)  # raises if corrupt
    return position - start, total, longest, error
