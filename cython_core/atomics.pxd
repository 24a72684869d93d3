# Declarations of the C atomics in aeronio_atomics.h.
from libc.stdint cimport int32_t, int64_t

cdef extern from "aeronio_atomics.h" nogil:
    int64_t aio_load_i64(const char *p)
    int32_t aio_load_i32(const char *p)
    void aio_store_i64(char *p, int64_t v)
    void aio_store_i32(char *p, int32_t v)
    bint aio_cas_i64(char *p, int64_t expected, int64_t desired)
    bint aio_cas_i32(char *p, int32_t expected, int32_t desired)
    int64_t aio_fetch_add_i64(char *p, int64_t delta)
    int32_t aio_fetch_add_i32(char *p, int32_t delta)
    int64_t aio_get_i64(const char *p)
    int32_t aio_get_i32(const char *p)
    void aio_put_i64(char *p, int64_t v)
    void aio_put_i32(char *p, int32_t v)
    void aio_fence_full()
    void aio_fence_release()
    void aio_fence_acquire()
