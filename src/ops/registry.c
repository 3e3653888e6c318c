/* registry.c - prebuilt ops by name, for tl_op_build and the tilec tool. */
#include "ops.h"

#include "ctx.h"
#include "ir.h"
#include "tune.h"

#include <string.h>

static const char *const op_names[] = {"vadd", "gemm", "softmax", "rmsnorm", "flash_attn", NULL};

TL_API const char *const *tl_op_names(void) { return op_names; }

TL_API tl_status tl_op_build(tl_ctx *ctx, const char *op, tl_dtype dtype, tl_kernel **out)
{
    if (!ctx || !op || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_build: NULL argument") : TL_ERR_INVALID_ARG;
    *out = NULL;
    if (strcmp(op, "vadd") == 0) {
        tli_vadd_schedule s = tli_vadd_default_schedule(dtype);
        return tli_vadd_build(ctx, dtype, &s, out);
    }
    if (strcmp(op, "gemm") == 0) { /* C = A B, B as [K, N]; no problem, so the schedule for any shape */
        bool f8 = tli_dtype_is_f8(dtype);
        if (dtype != TL_F16 && dtype != TL_BF16 && !f8)
            return tli_fail(ctx, TL_ERR_DTYPE, "tl_op_build: gemm takes bf16, f16, f8e4m3 or f8e5m2, not %s",
                            tl_dtype_name(dtype));
        /* 8-bit inputs: B as [N, K] (their only form), a bf16 C */
        tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = dtype, .out_dtype = f8 ? TL_BF16 : dtype,
                          .trans_b = f8, .schedule = tli_gemm_generic_schedule(tl_ctx_target(ctx), dtype)};
        return tl_op_gemm_build(ctx, &d, out);
    }
    /* the row-wise ops as in and out dtype, with the one-pass program of
     * 1024 columns (their default for rows of 513..1024) */
    if (strcmp(op, "softmax") == 0) {
        tl_softmax_desc d = {.rows = 1, .cols = 1024, .in_dtype = dtype, .out_dtype = dtype};
        return tl_op_softmax_build(ctx, &d, out);
    }
    if (strcmp(op, "rmsnorm") == 0) {
        tl_rmsnorm_desc d = {.rows = 1, .cols = 1024, .in_dtype = dtype, .out_dtype = dtype, .eps = 1e-6};
        return tl_op_rmsnorm_build(ctx, &d, out);
    }
    /* head_dim 128, not causal, 4 x 16 heads of 4096 queries and keys: the default of the long
     * sequences the op is measured on (on sm_90a FlashAttention-3's tile of 176 keys in persistent
     * CTAs), as "gemm" takes the large shapes'; enough heads that no key split applies */
    if (strcmp(op, "flash_attn") == 0) {
        if (dtype != TL_F16 && dtype != TL_BF16)
            return tli_fail(ctx, TL_ERR_DTYPE, "tl_op_build: flash_attn takes bf16 or f16, not %s",
                            tl_dtype_name(dtype));
        tl_flash_attn_desc d = {.batch = 4, .heads = 16, .kv_heads = 16, .seq_q = 4096, .seq_kv = 4096,
                                .head_dim = 128, .dtype = dtype};
        return tl_op_flash_attn_build(ctx, &d, out);
    }
    char known[256] = "";
    for (int i = 0; op_names[i]; i++)
        tli_fmt(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", op_names[i]);
    return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_build: unknown op '%s' (known: %s)", op, known);
}
