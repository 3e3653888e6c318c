/*
 * baseline.h - the cuBLAS / cuBLASLt GEMM baseline (tl_baseline_gemm): the
 * handles, workspace and matmul plans it keeps in the context.
 */
#ifndef TILEC_BASELINE_H
#define TILEC_BASELINE_H

#include "tilec.h"

/* Destroys what tl_baseline_gemm created in ctx (cuBLAS and cuBLASLt
 * handles, cached cuBLASLt plans, the workspace). Nothing when it created
 * nothing; ctx may be NULL. Called by tl_ctx_destroy while the device
 * context is still alive. */
void tli_baseline_release(tl_ctx *ctx);

#endif
