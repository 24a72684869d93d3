# cython: language_level=3, embedsignature=True, embedsignature.format=python
"""aeronio's Cython core: atomics on mapped memory, the log appender, readers and scanners."""

cimport cython
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBuffer_IsContiguous,
                             PyBUF_SIMPLE, PyBUF_FULL_RO)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MAX
from libc.string cimport memcpy, memset
from cpython.object cimport PyCallable_Check, PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from atomics cimport *
from posix.time cimport timespec

cdef extern from "<poll.h>" nogil:
    cdef struct pollfd:
        int fd
        short events
        short revents
    enum: POLLIN
    int c_poll "poll" (pollfd* fds, unsigned long nfds, int timeout)
    int ppoll(pollfd* fds, unsigned long nfds, const timespec* timeout, const void* sigmask)

cdef extern from "aeronio_cpython.h":
    # See aeronio_cpython.h: reused fragment views, completed awaitables, reused positions,
    # reused messages, member slots.
    bint aio_rewrap_view(PyObject* view, PyObject* exporter, char* buf, Py_ssize_t length) noexcept
    ctypedef struct aio_positions:
        pass
    object aio_position(aio_positions* kept, int64_t value, PyObject* extra)
    void aio_positions_clear(aio_positions* kept) noexcept
    Py_ssize_t aio_refcount(PyObject* object) noexcept
    PyObject* aio_take_spent(PyObject* spent, PyTypeObject* type, Py_ssize_t data_offset) noexcept
    bint aio_rewrite_bytes(PyObject* data, const char* source, Py_ssize_t length) noexcept
    ctypedef PyObject* (*aio_value_getter)(PyObject*) noexcept
    void aio_make_completed_type(PyTypeObject* type, aio_value_getter getter) noexcept
    Py_ssize_t aio_field_offset(PyObject* object, PyObject* value) noexcept
    int aio_readonly_member(PyTypeObject* type, const char* name, Py_ssize_t offset) except -1
    # A list's size and item through a borrowed pointer: Cython takes and drops a reference to
    # a list attribute it reads, which stalls from CPython 3.12 (aeronio_cpython.h, "Reference
    # counts on 3.12+").
    Py_ssize_t aio_list_size "PyList_GET_SIZE" (PyObject* list) noexcept
    PyObject* aio_list_item "PyList_GET_ITEM" (PyObject* list, Py_ssize_t index) noexcept

from asyncio import _get_running_loop
from types import GenericAlias as _GenericAlias

from aeronio.errors import AeronError, ClaimError, MessageTooLargeError

include "frame.pxi"
include "atomic_buffer.pxi"
include "doorbell.pxi"
include "mapped_log.pxi"
include "header.pxi"
include "log_appender.pxi"
include "term_scanner.pxi"
include "term_unblocker.pxi"
include "image_reader.pxi"
include "recording_writer.pxi"
include "recording_reader.pxi"
include "term_rebuilder.pxi"
include "udp_channel.pxi"
include "publication_image.pxi"
include "publication_sender.pxi"
include "control_receiver.pxi"
include "duty_schedule.pxi"
include "data_path.pxi"
include "awaitables.pxi"
include "change_watcher.pxi"
include "file_watch.pxi"

# Constants for Python code (the layout constants of frame.pxi are exported by its cpdef enum).
LOG_WAKE_SPACE_BIT = WAKE_SPACE_BIT
NOT_CONNECTED = NOT_CONNECTED_CODE
BACK_PRESSURED = BACK_PRESSURED_CODE
ADMIN_ACTION = ADMIN_ACTION_CODE
CLOSED = CLOSED_CODE
MAX_POSITION_EXCEEDED = MAX_POSITION_EXCEEDED_CODE
