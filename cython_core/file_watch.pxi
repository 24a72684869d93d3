# inotify, for the few events the driver needs: who opens and closes cnc.dat.

import os as _os

from libc cimport errno as cerrno


cdef extern from "<sys/inotify.h>" nogil:
    enum: IN_NONBLOCK
    enum: IN_CLOEXEC
    int inotify_init1(int flags)
    int inotify_add_watch(int fd, const char* pathname, uint32_t mask)


def inotify_watch(path: str, uint32_t mask) -> int:
    """A non-blocking inotify descriptor watching `path` for the events of `mask` (the caller
    reads and closes it). Raises OSError where inotify cannot be had (e.g. its per-user limit)."""
    cdef bytes encoded = _os.fsencode(path)
    cdef int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        errno = cerrno.errno
        raise OSError(errno, f"inotify_init1: {_os.strerror(errno)}")
    if inotify_add_watch(fd, encoded, mask) < 0:
        errno = cerrno.errno
        _os.close(fd)
        raise OSError(errno, f"inotify_add_watch {path!r}: {_os.strerror(errno)}", path)
    return fd
