/* The C entry of a threaded batch, for callers with no Python (e.g. a JAX FFI handler).
 *
 * A batch module's ``Batch.c_api()`` returns a PyCapsule named ``ENVHIVE_BATCH_API_NAME``
 * whose pointer is an ``envhive_batch_api``: plain C functions over the batch, callable from
 * any thread without the GIL. They run the ops written in the pool's buffers the batch was
 * bound to (``ops``, ``actions``; results in ``obs``, ``reward``, the flags, the info columns
 * and ``failed``), exactly as the Python methods of the same names do, but never look for
 * Ctrl-C. One caller at a time: no Python call on the same batch may run meanwhile. The struct
 * lives as long as the capsule (keep a reference to it), and the capsule keeps the batch
 * object alive, not open: after ``close()`` every call returns -1 ("the batch is closed").
 *
 *     envhive_batch_api *api = PyCapsule_GetPointer(capsule, ENVHIVE_BATCH_API_NAME);
 *     int64_t done = api->run(api->handle, ids, count, out);   // -1: api->last_error(handle)
 *
 * Other engines give the same struct: a classic-control kernel's (``kernels/_centry.py``, its
 * compiled op loop as a numba cfunc) has ``run`` only, every other pointer NULL: its ops
 * finish inside ``run``, which returns -2 (nothing ran) when Python must work first (draw
 * more reset noise; the caller's ``CEntry.prepare``).
 */
#ifndef ENVHIVE_BATCH_API_H
#define ENVHIVE_BATCH_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENVHIVE_BATCH_API_NAME "envhive.batch_api"
#define ENVHIVE_BATCH_API_VERSION 1

typedef struct envhive_batch_api {
    uint32_t version; /* ENVHIVE_BATCH_API_VERSION */
    uint32_t size;    /* sizeof(envhive_batch_api) */
    void *handle;     /* the batch (first argument of every function) */
    int64_t num_envs;
    /* The ops of envs ``ids`` (``count`` of them), all finished on return (the calling thread
     * runs ops too); finished ids into ``out`` (num_envs long). How many, or -1. */
    int64_t (*run)(void *handle, const int64_t *ids, int64_t count, int64_t *out);
    /* Queue the ops of ``ids``; returns at once. 0, or -1. */
    int (*start)(void *handle, const int64_t *ids, int64_t count);
    /* Wait until ``min_count`` queued ops finished (fewer when no other is in flight); every
     * finished id into ``out`` (num_envs long). How many, or -1. */
    int64_t (*collect)(void *handle, int64_t min_count, int64_t *out);
    /* Forget every op queued and not collected (running ones stop at their next check). */
    void (*discard)(void *handle);
    /* Wait until no op runs (after a discard, before ops are queued for the same envs). */
    int (*wait_idle)(void *handle);
    /* Why the last call returned -1. */
    const char *(*last_error)(void *handle);
    /* Env ``env_id``'s last op error ("" when its ``failed`` entry is 0). */
    const char *(*env_error)(void *handle, int64_t env_id);
} envhive_batch_api;

#ifdef __cplusplus
}
#endif

#endif /* ENVHIVE_BATCH_API_H */
