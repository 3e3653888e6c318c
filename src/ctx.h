/*
 * ctx.h - the context: the device (or none), the loaded driver and NVRTC
 * tables, the cubin cache, the last error message of each thread and the
 * programs the prebuilt ops keep.
 *
 * Several threads may use one context at once (tilec.h says for what), so
 * what they share is guarded: `lock` covers the message slots and the
 * kernel tags (nothing that fails is called under it), `ops_lock` the op
 * programs (held while one is built, so each is compiled once) and the
 * timing scratch buffer, and the cubin cache has its own lock.
 */
#ifndef TILEC_CTX_H
#define TILEC_CTX_H

#include "cuda_api.h"
#include "internal.h"

#include <pthread.h>

typedef struct tli_cache tli_cache;
typedef struct tli_tune_db tli_tune_db;

/* One compiled program of a prebuilt op, kept for reuse (ops.c). */
typedef struct tli_op_entry {
    char key[128];
    tl_program *prog;
    struct tli_op_entry *next;
} tli_op_entry;

#define TLI_MSG_MAX 4096

/* The last failure message of one thread on a context: a failing call
 * writes only its own thread's slot, so a message a thread holds is never
 * rewritten by another. */
typedef struct tli_msg_slot {
    pthread_t thread;
    struct tli_msg_slot *next;
    char msg[TLI_MSG_MAX];
} tli_msg_slot;

struct tl_ctx {
    const tli_driver_api *cu;   /* NULL on an offline context            */
    CUdevice dev;
    CUcontext cuctx;
    bool owns_primary;          /* we retained the primary context       */
    bool has_device;
    tl_device_info info;        /* filled at creation when has_device    */
    char target[16];            /* compile target, e.g. "sm_90a"         */
    tli_cache *cache;
    tl_log_fn log;
    void *log_user;
    uint32_t next_kernel_tag;   /* tags handles of kernels made here     */
    tli_op_entry *ops;          /* programs of prebuilt ops              */
    struct tli_sk_ws *sk_ws;    /* stream-K workspaces, one a stream (under lock) */
    uint64_t scratch;           /* device scratch for L2 flushes (lazy)  */
    size_t scratch_bytes;
    struct tli_baseline *baseline; /* cuBLAS(Lt) handles, workspace, plans
                                      of tl_baseline_gemm (baseline.c; lazy) */
    tli_tune_db *tunedb;        /* the tuning database as read (tune_db.c;
                                   lazy; under ops_lock)                  */
    pthread_mutex_t lock;       /* msgs, next_kernel_tag                 */
    pthread_mutex_t ops_lock;   /* ops, scratch, tunedb (recursive)      */
    tli_msg_slot *msgs;         /* one per thread that failed a call     */
    char err[TLI_MSG_MAX];      /* a thread's message when no slot could
                                   be allocated for it (out of memory)   */
};

/* The stream-K workspace of stream (tl_use_stream_k): at least `bytes`,
 * zero when first handed out (zeroed on the stream, ahead of whatever the
 * caller launches on it next), kept for the stream until the context is
 * destroyed. Errors: TL_ERR_OUT_OF_MEMORY, TL_ERR_CUDA. */
tl_status tli_ctx_sk_workspace(tl_ctx *ctx, void *stream, size_t bytes, uint64_t *ptr);

/* Records msg as the calling thread's last error on the context and
 * returns st (for `return tli_fail(ctx, TL_ERR_X, "...")`). ctx may be
 * NULL. */
tl_status tli_fail(tl_ctx *ctx, tl_status st, const char *fmt, ...) TLI_PRINTF(3, 4);
/* Failures recorded by the calling thread so far (on any context): taken
 * before a call, it tells whether the call left a message of its own. */
unsigned tli_fail_count(void);
/* For a public call `api` that failed with st (TL_OK: nothing to do) after
 * the thread's fail count was `since`: makes the thread's message start
 * with "api: " (a leading "tl_other: " is replaced, as the inner call is a
 * detail of api; any other message is prefixed), or, when the call left
 * none, says that api failed with st. Returns st. */
tl_status tli_fail_as(tl_ctx *ctx, tl_status st, const char *api, unsigned since);
/* The calling thread's message buffer on ctx (TLI_MSG_MAX bytes), made on
 * first use: only this thread writes it. */
char *tli_ctx_msg(tl_ctx *ctx);
/* The next kernel tag of ctx (never 0). */
uint32_t tli_ctx_next_tag(tl_ctx *ctx);
/* Sends a message to the context's log callback, if any. */
void tli_log(tl_ctx *ctx, tl_log_level level, const char *fmt, ...) TLI_PRINTF(3, 4);
/* Makes the context's CUcontext current on this thread. TL_ERR_NO_DEVICE
 * for an offline context. */
tl_status tli_ctx_bind(tl_ctx *ctx);
/* Turns a failed driver call into TL_ERR_CUDA with the call's name and the
 * driver's error string on ctx; TL_OK when r == CUDA_SUCCESS. */
tl_status tli_cu_check(tl_ctx *ctx, CUresult r, const char *what);
/* A device buffer of bytes that lives in stream order on stream: usable by
 * work queued on stream after this call, until tli_free_async queues its
 * release there. Errors (messages start with api): those of the context's
 * device binding, TL_ERR_UNSUPPORTED (a driver without the stream-ordered
 * allocator), TL_ERR_OUT_OF_MEMORY, TL_ERR_CUDA. */
tl_status tli_malloc_async(tl_ctx *ctx, size_t bytes, void *stream, uint64_t *dptr, const char *api);
tl_status tli_free_async(tl_ctx *ctx, uint64_t dptr, void *stream);

/* The GPU's SMs, or `offline` for a context without one. From the context
 * itself: tl_ctx_get_device_info fails offline, which would replace the
 * thread's last error message inside a call that succeeds. */
static inline int tli_ctx_sms(const tl_ctx *c, int offline)
{
    return c && c->has_device && c->info.sm_count > 0 ? c->info.sm_count : offline;
}

#endif
