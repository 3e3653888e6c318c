/*
 * nvrtc.h - compiling generated CUDA C with NVRTC (loaded at run time).
 *
 * (This is the library's own header; the toolkit's nvrtc.h is never
 * included anywhere.)
 */
#ifndef TILEC_NVRTC_H
#define TILEC_NVRTC_H

#include "internal.h"

/*
 * Compiles `src` (a self-contained translation unit: no include paths are
 * given, generated sources carry the embedded device header themselves) for
 * `target`, "sm_XY" or "sm_XYa".
 *
 * want_ptx 0: a cubin for --gpu-architecture=sm_XY[a]; *out_len is its size.
 * want_ptx 1: PTX for --gpu-architecture=compute_XY[a]; *out is NUL-terminated
 *             and *out_len is strlen(*out) (the NUL is not counted).
 * *out is malloc'ed (the caller frees it). Options always given: the
 * architecture, -std=c++17, -default-device; then extra_opts[0..n_extra-1]
 * (e.g. "--use_fast_math", "-lineinfo").
 *
 * log may be NULL; otherwise *log receives the malloc'ed NVRTC log (warnings
 * on success, errors on failure), or NULL when the log is empty.
 * prog_name names the source in NVRTC's messages (NULL: "tilec.cu").
 * ctx may be NULL; when not, failures are explained in ctx->err (a long log
 * is truncated there; *log has all of it).
 *
 * Errors: TL_ERR_INVALID_ARG (NULL src/out/out_len/target, a malformed
 * target), TL_ERR_NO_NVRTC (not found, or its builtins library missing),
 * TL_ERR_COMPILE (NVRTC rejected the source or an option),
 * TL_ERR_OUT_OF_MEMORY, TL_ERR_INTERNAL.
 */
tl_status tli_nvrtc_compile(tl_ctx *ctx, const char *src, const char *prog_name,
                            const char *target, int want_ptx, const char *const *extra_opts,
                            int n_extra, void **out, size_t *out_len, char **log);

/* NVRTC's version, e.g. 13 and 0. Either pointer may be NULL. Errors:
 * TL_ERR_NO_NVRTC (then both are set to 0). */
tl_status tli_nvrtc_version(int *major, int *minor);

/* 1 when `target` is a name NVRTC targets we accept: "sm_" digits, then an
 * optional "a" (e.g. "sm_80", "sm_90a", "sm_100a"), shorter than 16 chars,
 * whose number the loaded NVRTC compiles for (without NVRTC, or one too old
 * to list them: a real architecture, sm_50 to sm_121), "a" from sm_90 on. */
int tli_target_valid(const char *target);
/* NULL when target is valid; else why not, completing "target X ..."
 * (static text or buf). */
const char *tli_target_problem(const char *target, char *buf, size_t n);

#endif
