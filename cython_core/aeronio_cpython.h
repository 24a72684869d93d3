/* The CPython-specific shortcuts of the per-message paths, kept in one place.
 *
 * Reused fragment views
 *   A poll handler gets a memoryview of each fragment. Slicing a new one per fragment costs more
 *   than the rest of the poll, so the reader keeps one and, when nothing but the reader holds it
 *   (reference count 1, no exports, no weak references, not released), points it at the next
 *   fragment. A view the handler kept is never touched: the reader slices a new one. The view
 *   stays a slice of the whole log's memoryview, so it keeps the mapping alive either way. This
 *   is the reuse CPython's own zip() and dict iterators make of their result tuples; it reads
 *   PyMemoryViewObject's fields, so it is compiled only where their layout is known (CPython
 *   3.11 to 3.14 with the GIL) and slices every time elsewhere.
 *
 * Completed awaitables
 *   `await x` on an object whose am_send slot returns PYGEN_RETURN completes without suspending
 *   the task and without an exception (CPython 3.10 and 3.11 ask am_send). Later versions call
 *   tp_iternext instead, which must report the value as a StopIteration. Making one per await
 *   (an exception object, its args tuple, both tracked by the GC) costs as much as the rest of
 *   the await, so on CPython 3.12 and 3.13 one StopIteration is kept and raised again, its value
 *   and args[0] set to the new value, while nothing but this module holds it (the awaiting
 *   frame took its value and let it go). One that somebody kept, or that gathered a traceback,
 *   context, cause or notes (a `next()` in user code), is left to its holder and a new one is
 *   kept instead: every StopIteration seen is what StopIteration(value) would be.
 *
 * Reused positions
 *   try_offer and `await offer` return the message's new position, an int above CPython's cache
 *   of small ones: making it and freeing it took a sixth of a try_offer on 3.12 here.
 *   A publication keeps two: the one it returned last, which a caller's variable often holds
 *   until the next call, and the one before. When the only references to one are its own (its
 *   field, its reused Completed, the kept StopIteration: the caller let the value go), it
 *   writes the next position into it instead of making an int, the reuse of the fragment views
 *   above. It writes PyLongObject's digits, so it is compiled only where their layout is known
 *   (CPython 3.11 to 3.13, 30-bit digits, the GIL). A kept int is made with room for two digits
 *   and holds only positions from 257 to 2**60 - 1; others are made as usual.
 *
 * Reused messages
 *   `async for message in subscription` hands out the Messages of a batch polled at once. When
 *   the next batch is polled, the Messages of the one before that only its list still holds (the
 *   loop let them go) are filled again instead of made anew: a Message is no GC object, has no
 *   weak references and no other field that holds anything, so nothing can see the change. As
 *   the fragment views, only with the GIL (CPython 3.11 to 3.14). Its data, a bytes object
 *   that only the Message holds and of the new message's length, is written over too (its
 *   cached hash cleared), as CPython's own code fills a bytes object nobody else has seen;
 *   where PyBytesObject's layout is known (CPython 3.11 to 3.13).
 *
 * Member slots
 *   A Cython `cdef readonly object` attribute is a getset descriptor, which the specializing
 *   interpreter of CPython 3.12+ leaves unspecialized: `message.data` costs about 22 ns there
 *   against 2 ns for a __slots__ attribute (a T_OBJECT_EX member descriptor, LOAD_ATTR_SLOT).
 *   The per-message attributes are given such a member descriptor in place of Cython's (read
 *   only, at the field's offset; the object always holds a value there).
 *
 * Reference counts on 3.12+
 *   From CPython 3.12 Py_INCREF stores the low 32 bits of the count and Py_DECREF loads all 64:
 *   a DECREF of an object soon after an INCREF of it waits for the store to complete (no
 *   store-to-load forwarding): about 20 ns an await on 3.12.1 here. The per-message paths
 *   therefore read what they only look at through borrowed pointers (the kept StopIteration's
 *   value when it is the same object again, the pending messages' list) rather than taking and
 *   dropping a reference.
 */
#ifndef AERONIO_CPYTHON_H
#define AERONIO_CPYTHON_H

#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030F0000 && !defined(Py_GIL_DISABLED) \
    && !defined(PYPY_VERSION)
#define AIO_CAN_REWRAP_VIEWS 1
#else
#define AIO_CAN_REWRAP_VIEWS 0
#endif

/* Point `view` (a 1-D byte memoryview) at [buf, buf + len) of the log that `exporter` (the
 * object whose buffer the log's views share) exports, if only its owner holds it and it was cut
 * from that exporter: a view keeps alive only the mapping it was cut from, so one cut from
 * another image's log is never re-pointed here (`exporter` NULL: the caller only ever cuts
 * `view` from that log). The view's own `view.obj` is the exporter (memoryobject.c's
 * mbuf_add_view), so the check reads no other object. Returns 1 if it did, 0 if the caller
 * must make a new view. */
static inline int aio_rewrap_view(PyObject *view, PyObject *exporter, char *buf, Py_ssize_t len) {
#if AIO_CAN_REWRAP_VIEWS
    PyMemoryViewObject *mv = (PyMemoryViewObject *)view;
    if (Py_REFCNT(view) != 1 || mv->exports != 0 || mv->weakreflist != NULL
        || (mv->flags & _Py_MEMORYVIEW_RELEASED) || mv->view.ndim != 1
        || (exporter != NULL && mv->view.obj != exporter)) {
        return 0;
    }
    mv->view.buf = buf;
    mv->view.len = len;
    mv->view.shape[0] = len;
    mv->hash = -1;
    return 1;
#else
    (void)view; (void)exporter; (void)buf; (void)len;
    return 0;
#endif
}

/* A reference count read through a borrowed pointer (Cython may hold temporaries otherwise). */
static inline Py_ssize_t aio_refcount(PyObject *object) { return Py_REFCNT(object); }

/* The value a completed awaitable returns, borrowed (defined by the Cython type that uses these
 * slots). */
typedef PyObject *(*aio_value_getter)(PyObject *self);
static aio_value_getter aio_completed_value;

#if PY_VERSION_HEX >= 0x030A0000
static PySendResult aio_completed_send(PyObject *self, PyObject *arg, PyObject **result) {
    (void)arg;
    *result = Py_NewRef(aio_completed_value(self));
    return PYGEN_RETURN;
}
#endif

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) \
    && !defined(PYPY_VERSION)
#define AIO_REUSES_STOP_ITERATION 1
#else
#define AIO_REUSES_STOP_ITERATION 0
#endif

#if AIO_REUSES_STOP_ITERATION
static PyObject *aio_stop_iteration; /* the StopIteration raised again; NULL until the first */

/* Whether only this module holds `stop` and it is as StopIteration(x) made it. */
static inline int aio_stop_iteration_is_free(PyObject *stop) {
    PyBaseExceptionObject *e = (PyBaseExceptionObject *)stop;
    return Py_REFCNT(stop) == 1 && e->dict == NULL && e->args != NULL && PyTuple_CheckExact(e->args)
        && PyTuple_GET_SIZE(e->args) == 1 && Py_REFCNT(e->args) == 1 && e->traceback == NULL
        && e->context == NULL && e->cause == NULL && e->notes == NULL && !e->suppress_context;
}

/* Raise StopIteration(value) (`value` borrowed) with the kept instance; NULL.
 * The same value as the last time (a reused message) is left in place: from 3.12 an INCREF
 * stores 32 bits and a DECREF loads 64, so a DECREF soon after an INCREF of one object waits for
 * the store to complete (no store-to-load forwarding), and this path did both per await. */
static PyObject *aio_raise_stop_iteration(PyObject *value) {
    PyObject *stop = aio_stop_iteration, *old_value, *old_arg;
    if (stop == NULL || !aio_stop_iteration_is_free(stop)) {
        PyObject *fresh = PyObject_CallOneArg(PyExc_StopIteration, Py_None);
        if (fresh == NULL) {
            return NULL;
        }
        aio_stop_iteration = fresh;
        Py_XDECREF(stop); /* its holder's now (or freed): after the swap, as it may run code */
        stop = fresh;
        if (!aio_stop_iteration_is_free(stop)) { /* not the shape expected: raise it once */
            PyErr_SetString(PyExc_SystemError, "StopIteration(None) has an unexpected shape");
            return NULL;
        }
    }
    Py_INCREF(stop); /* claimed: a re-entrant call (a __del__ run below) keeps a new one */
    old_value = ((PyStopIterationObject *)stop)->value;
    old_arg = PyTuple_GET_ITEM(((PyBaseExceptionObject *)stop)->args, 0);
    if (old_value != value || old_arg != value) {
        Py_INCREF(value);
        Py_INCREF(value);
        ((PyStopIterationObject *)stop)->value = value;
        PyTuple_SET_ITEM(((PyBaseExceptionObject *)stop)->args, 0, value);
        Py_XDECREF(old_value);
        Py_XDECREF(old_arg);
    }
    PyErr_SetRaisedException(stop); /* steals the claim; the frame's fetch lets it go */
    return NULL;
}
#endif

static PyObject *aio_completed_next(PyObject *self) {
    PyObject *value = aio_completed_value(self); /* borrowed */
#if AIO_REUSES_STOP_ITERATION
    return aio_raise_stop_iteration(value);
#else
    if (PyTuple_Check(value) || PyExceptionInstance_Check(value)) {
        PyObject *wrapped = PyObject_CallOneArg(PyExc_StopIteration, value);
        if (wrapped != NULL) {
            PyErr_SetObject(PyExc_StopIteration, wrapped);
            Py_DECREF(wrapped);
        }
    } else {
        PyErr_SetObject(PyExc_StopIteration, value);
    }
    return NULL;
#endif
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && PyLong_SHIFT == 30 \
    && !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION)
#define AIO_REUSES_POSITIONS 1
#else
#define AIO_REUSES_POSITIONS 0
#endif

/* A publication's kept positions: the one it returned last, which the caller may still hold
 * (`result = pub.try_offer(...)` keeps it until the next call), and the other one. */
typedef struct {
    PyObject *last;
    PyObject *spare;
} aio_positions;

static inline void aio_positions_clear(aio_positions *kept) {
    Py_CLEAR(kept->last);
    Py_CLEAR(kept->spare);
}

/* How many references the kept StopIteration holds to `value` that only this module can see
 * (its value and args[0], while nobody else holds it). */
static inline Py_ssize_t aio_stop_iteration_refs(PyObject *value) {
#if AIO_REUSES_STOP_ITERATION
    PyObject *stop = aio_stop_iteration;
    if (stop == NULL || !aio_stop_iteration_is_free(stop)) {
        return 0;
    }
    return (((PyStopIterationObject *)stop)->value == value)
        + (PyTuple_GET_ITEM(((PyBaseExceptionObject *)stop)->args, 0) == value);
#else
    (void)value;
    return 0;
#endif
}

#if AIO_REUSES_POSITIONS
/* Write `value` (257 to 2**60 - 1) into `kept`, an int made with room for two digits. */
static inline void aio_write_position(PyObject *kept, int64_t value) {
    PyLongObject *v = (PyLongObject *)kept;
    Py_ssize_t ndigits = (value >> PyLong_SHIFT) ? 2 : 1;
#if PY_VERSION_HEX >= 0x030C0000
    v->long_value.ob_digit[0] = (digit)(value & PyLong_MASK);
    v->long_value.ob_digit[1] = (digit)(value >> PyLong_SHIFT);
    v->long_value.lv_tag = (uintptr_t)ndigits << _PyLong_NON_SIZE_BITS; /* positive */
#else
    v->ob_digit[0] = (digit)(value & PyLong_MASK);
    v->ob_digit[1] = (digit)(value >> PyLong_SHIFT);
    Py_SET_SIZE(v, ndigits);
#endif
}

/* Whether nobody but the kept ints' owner refers to `kept`: the owner's own field, `extra`
 * (another of its references, or NULL) and the kept StopIteration. */
static inline int aio_position_is_free(PyObject *kept, PyObject *extra) {
    return kept != NULL
        && Py_REFCNT(kept) == 1 + (kept == extra) + aio_stop_iteration_refs(kept);
}
#endif

/* `value` as an int, a new reference (see "Reused positions"): a kept one written over if
 * nobody else refers to it (`extra`: the owner's other reference to one, or NULL), else a new
 * one, kept in place of the older. */
static inline PyObject *aio_position(aio_positions *kept, int64_t value, PyObject *extra) {
#if AIO_REUSES_POSITIONS
    PyObject *fresh;
    if (value > 256 && value < ((int64_t)1 << (2 * PyLong_SHIFT))) {
        if (aio_position_is_free(kept->spare, extra)) {
            fresh = kept->spare;
            kept->spare = kept->last;
            kept->last = fresh;
        } else if (aio_position_is_free(kept->last, extra)) {
            fresh = kept->last;
        } else {
            fresh = (PyObject *)_PyLong_New(2);
            if (fresh == NULL) {
                return NULL;
            }
            Py_XDECREF(kept->spare); /* an int: frees nothing else, runs no code */
            kept->spare = kept->last;
            kept->last = fresh;
        }
        aio_write_position(fresh, value);
        return Py_NewRef(fresh);
    }
#else
    (void)kept; (void)extra;
#endif
    return PyLong_FromLongLong(value);
}

/* The offset in `object` of the pointer-aligned field that holds `value` (an object nothing
 * else there holds), or -1. */
static inline Py_ssize_t aio_field_offset(PyObject *object, PyObject *value) {
    Py_ssize_t offset;
    for (offset = sizeof(PyObject); offset + (Py_ssize_t)sizeof(PyObject *)
            <= Py_TYPE(object)->tp_basicsize; offset += sizeof(PyObject *)) {
        if (*(PyObject **)((char *)object + offset) == value) {
            return offset;
        }
    }
    return -1;
}

/* Make `name` of `type` a read-only T_OBJECT_EX member at `offset` (see "Member slots"), its
 * doc string Cython's. 0, or -1 with an exception set. */
static inline int aio_readonly_member(PyTypeObject *type, const char *name, Py_ssize_t offset) {
    PyObject *old = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    PyMemberDef *member = PyMem_Calloc(1, sizeof(PyMemberDef)); /* kept: the type holds it */
    PyObject *descriptor;
    if (member == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    member->name = name;
    member->type = T_OBJECT_EX;
    member->offset = offset;
    member->flags = READONLY;
    member->doc = old != NULL && Py_IS_TYPE(old, &PyGetSetDescr_Type)
        ? ((PyGetSetDescrObject *)old)->d_getset->doc : NULL;
    descriptor = PyDescr_NewMember(type, member);
    if (descriptor == NULL || PyDict_SetItemString(type->tp_dict, name, descriptor) < 0) {
        Py_XDECREF(descriptor);
        return -1;
    }
    Py_DECREF(descriptor);
    PyType_Modified(type);
    return 0;
}

#if PY_VERSION_HEX < 0x030F0000 && !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION)
#define AIO_REUSES_MESSAGES 1
#else
#define AIO_REUSES_MESSAGES 0
#endif

/* One of `spent` (a list only its owner sees) that nothing else holds, of exactly `type` and
 * with an exact bytes object in the field at `data_offset` (dropping it runs no code), taken
 * from its end with the list's reference; NULL when none is left. Those held elsewhere are
 * dropped on the way (no code runs: not the last reference); at any other item it stops. */
static inline PyObject *aio_take_spent(PyObject *spent, PyTypeObject *type, Py_ssize_t data_offset) {
#if AIO_REUSES_MESSAGES
    PyListObject *list = (PyListObject *)spent;
    while (Py_SIZE(list) > 0) {
        PyObject *item = list->ob_item[Py_SIZE(list) - 1];
        if (!Py_IS_TYPE(item, type)) {
            return NULL;
        }
        if (Py_REFCNT(item) == 1) {
            if (!PyBytes_CheckExact(*(PyObject **)((char *)item + data_offset))) {
                return NULL;
            }
            Py_SET_SIZE(list, Py_SIZE(list) - 1);
            return item;
        }
        Py_SET_SIZE(list, Py_SIZE(list) - 1);
        Py_DECREF(item);
    }
#else
    (void)spent; (void)type; (void)data_offset;
#endif
    return NULL;
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && AIO_REUSES_MESSAGES
#define AIO_REWRITES_BYTES 1
#else
#define AIO_REWRITES_BYTES 0
#endif

/* Copy `length` bytes from `source` into `data` if it is a bytes object of that length that
 * only its holder holds (a reused Message's data); whether it did. */
static inline int aio_rewrite_bytes(PyObject *data, const char *source, Py_ssize_t length) {
#if AIO_REWRITES_BYTES
    if (!PyBytes_CheckExact(data) || Py_REFCNT(data) != 1 || PyBytes_GET_SIZE(data) != length) {
        return 0;
    }
    memcpy(PyBytes_AS_STRING(data), source, (size_t)length);
    _Py_COMP_DIAG_PUSH
    _Py_COMP_DIAG_IGNORE_DEPR_DECLS
    ((PyBytesObject *)data)->ob_shash = -1;
    _Py_COMP_DIAG_POP
    return 1;
#else
    (void)data; (void)source; (void)length;
    return 0;
#endif
}

/* Give a type (with __await__ and __next__ already defined) the completed-awaitable slots. */
static inline void aio_make_completed_type(PyTypeObject *type, aio_value_getter getter) {
    aio_completed_value = getter;
    type->tp_iternext = aio_completed_next;
#if PY_VERSION_HEX >= 0x030A0000
    if (type->tp_as_async != NULL) {
        type->tp_as_async->am_send = aio_completed_send;
    }
#endif
}

#endif
