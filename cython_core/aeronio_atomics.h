/* Atomic access to shared (memory-mapped) words: acquire loads, release stores, CAS and
 * fetch-add with the GCC/Clang __atomic builtins. Every cross-thread or cross-process read or
 * write of a tail counter, frame length or position goes through these. */
#ifndef AERONIO_ATOMICS_H
#define AERONIO_ATOMICS_H

#include <stdint.h>

static inline int64_t aio_load_i64(const char *p) { return __atomic_load_n((const int64_t *)p, __ATOMIC_ACQUIRE); }
static inline int32_t aio_load_i32(const char *p) { return __atomic_load_n((const int32_t *)p, __ATOMIC_ACQUIRE); }
static inline void aio_store_i64(char *p, int64_t v) { __atomic_store_n((int64_t *)p, v, __ATOMIC_RELEASE); }
static inline void aio_store_i32(char *p, int32_t v) { __atomic_store_n((int32_t *)p, v, __ATOMIC_RELEASE); }

static inline int aio_cas_i64(char *p, int64_t expected, int64_t desired)
{
    return __atomic_compare_exchange_n((int64_t *)p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static inline int aio_cas_i32(char *p, int32_t expected, int32_t desired)
{
    return __atomic_compare_exchange_n((int32_t *)p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static inline int64_t aio_fetch_add_i64(char *p, int64_t delta) { return __atomic_fetch_add((int64_t *)p, delta, __ATOMIC_SEQ_CST); }
static inline int32_t aio_fetch_add_i32(char *p, int32_t delta) { return __atomic_fetch_add((int32_t *)p, delta, __ATOMIC_SEQ_CST); }

/* Plain (unordered) access for fields only one party writes before publishing them. */
static inline int64_t aio_get_i64(const char *p) { int64_t v; __builtin_memcpy(&v, p, 8); return v; }
static inline int32_t aio_get_i32(const char *p) { int32_t v; __builtin_memcpy(&v, p, 4); return v; }
static inline void aio_put_i64(char *p, int64_t v) { __builtin_memcpy(p, &v, 8); }
static inline void aio_put_i32(char *p, int32_t v) { __builtin_memcpy(p, &v, 4); }

static inline void aio_fence_full(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* Release: no earlier access moves past a later store; acquire: no later access moves before
 * an earlier load (Aeron's aeron_release() / aeron_acquire()). */
static inline void aio_fence_release(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
static inline void aio_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }

#endif
