/*
 * ctx.h - the context: the device (or none), the loaded driver and NVRTC
 * tables, the cubin cache, the last error message and the programs the
 * prebuilt ops keep.
 */
#ifndef TILEC_CTX_H
#define TILEC_CTX_H

#include "cuda_api.h"
#include "internal.h"

typedef struct tli_cache tli_cache;
typedef struct tli_tune_db tli_tune_db;

/* One compiled program of a prebuilt op, kept for reuse (ops.c). */
typedef struct tli_op_entry {
    char key[128];
    tl_program *prog;
    struct tli_op_entry *next;
} tli_op_entry;

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
    uint64_t scratch;           /* device scratch for L2 flushes (lazy)  */
    size_t scratch_bytes;
    struct tli_baseline *baseline; /* cuBLAS(Lt) handles, workspace, plans
                                      of tl_baseline_gemm (baseline.c; lazy) */
    tli_tune_db *tunedb;        /* the tuning database as read (tune_db.c;
                                   lazy)                                  */
    char err[4096];             /* message of the last failed call       */
};

/* Records msg as the context's last error and returns st (for `return
 * tli_fail(ctx, TL_ERR_X, "...")`). ctx may be NULL. */
tl_status tli_fail(tl_ctx *ctx, tl_status st, const char *fmt, ...) TLI_PRINTF(3, 4);
/* Sends a message to the context's log callback, if any. */
void tli_log(tl_ctx *ctx, tl_log_level level, const char *fmt, ...) TLI_PRINTF(3, 4);
/* Makes the context's CUcontext current on this thread. TL_ERR_NO_DEVICE
 * for an offline context. */
tl_status tli_ctx_bind(tl_ctx *ctx);
/* Turns a failed driver call into TL_ERR_CUDA with the call's name and the
 * driver's error string on ctx; TL_OK when r == CUDA_SUCCESS. */
tl_status tli_cu_check(tl_ctx *ctx, CUresult r, const char *what);

#endif
