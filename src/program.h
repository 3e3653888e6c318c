/* program.h - compiled kernels: the graph they came from, their source and
 * cubin, and the loaded module. */
#ifndef TILEC_PROGRAM_H
#define TILEC_PROGRAM_H

#include "ctx.h"
#include "ir.h"
#include "emit.h"
#include "lowered.h"
#include "program_ctx.h"

#include <pthread.h>

struct tl_program {
    tl_ctx *ctx;
    tli_ir ir;             /* the graph (empty for raw-source programs)   */
    bool has_ir;
    char *source;          /* the generated CUDA C                        */
    void *cubin;
    size_t cubin_len;
    char kname[64];
    char target[16];
    int from_cache;
    double compile_ms;
    int smem_bytes;
    int threads;
    tli_launch_plan launch; /* how to launch it (the launch pass's plan)  */
    tl_compile_options opt; /* what it was compiled with (target: p->target) */
    bool safe;             /* the safe variant itself                     */
    /* The safe variant (no alignment assumed), compiled the first time a
     * launch's tensors miss the alignment this program assumes. */
    pthread_mutex_t safe_lock;
    bool has_lock;
    struct tl_program *safe_variant;
    CUmodule mod;          /* NULL when not loaded                        */
    CUfunction fn;
    int regs;
    int blocks_per_sm;     /* the driver's occupancy (0: not known)        */
};

/* Compiling in phases (tl_compile runs them in order; a batch compile can
 * run the NVRTC phase of many programs on several threads):
 *   prepare  verify k, lower it and emit its source (no cubin yet);
 *   lookup   take the cubin from the context's cache (true on a hit);
 *   nvrtc    compile the source: touches neither the context nor the
 *            cache, so it is safe on any thread; *log (may be NULL) gets
 *            NVRTC's log, which explains a TL_ERR_COMPILE;
 *   store    put the cubin into the cache;
 *   load     load the module when the context's device runs the target.
 * Only nvrtc may run concurrently with other phases of the same context. */
tl_status tli_program_prepare(tl_kernel *k, const tl_compile_options *opt, const char *api, tl_program **out);
/* Prepares the safe variant of a prepared program p (the one tl_launch
 * compiles when a launch's tensors miss the alignment p assumes), for a
 * batch compile to make ahead of time. *out NULL (TL_OK) when p assumes
 * nothing, or is itself a safe variant. */
tl_status tli_program_prepare_safe(const tl_program *p, const char *api, tl_program **out);
bool tli_program_cache_lookup(tl_ctx *ctx, tl_program *p, const tl_compile_options *opt);
tl_status tli_program_nvrtc(tl_program *p, const tl_compile_options *opt, char **log);
void tli_program_cache_store(tl_ctx *ctx, const tl_program *p, const tl_compile_options *opt);
tl_status tli_program_load(tl_ctx *ctx, tl_program *p);
void tli_program_cache_key(const tl_program *p, const tl_compile_options *opt, uint8_t key[32]);

/* The safe variant of p (no alignment assumed: no TMA, no 16-byte
 * cp.async), compiled on first need, once, whichever thread asks first;
 * owned by p. tl_launch takes it when a launch's tensors miss what p
 * assumes; tests compile it offline. p itself when it assumes nothing. */
tl_status tli_program_safe_variant(const tl_program *p, const tl_program **out);

/* Compiles a hand-written CUDA source that includes "tl_device.cuh" (the
 * library's own device kernels, e.g. the random generator) into a program
 * with no graph; launch it with tli_launch_raw. */
tl_status tli_program_from_source(tl_ctx *ctx, const char *src, const char *kname, int threads,
                                  tl_program **out);

/* Launches p with a prepared kernel-parameter array. */
tl_status tli_launch_raw(const tl_program *p, const int64_t grid[3], void **params, void *stream);

/* The program a prebuilt op keeps in its context under `key`, built by
 * build(ctx, user, &kernel) and compiled on first use. */
typedef tl_status (*tli_build_fn)(tl_ctx *ctx, const void *user, tl_kernel **out);
tl_status tli_op_program(tl_ctx *ctx, const char *key, tli_build_fn build, const void *user,
                         const tl_program **out);
/* Same for raw-source programs. */
tl_status tli_op_program_source(tl_ctx *ctx, const char *key, const char *src, const char *kname,
                                int threads, const tl_program **out);

#endif
