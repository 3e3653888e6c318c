/* checks.c - argument checks the prebuilt ops share, and the end of their
 * builders. */
#include "ops.h"

#include "ctx.h"

/* A misaligned device pointer makes the kernel fault with
 * CUDA_ERROR_MISALIGNED_ADDRESS, which poisons the whole CUDA context of
 * the process: refuse it before launching. */
tl_status tli_op_check_dptr(tl_ctx *ctx, const char *api, const char *name, uint64_t p, tl_dtype dtype,
                            bool needed)
{
    size_t align = tl_dtype_size(dtype);
    if (!needed)
        return TL_OK;
    if (!p)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s is a null device pointer", api, name);
    if (align && p % align)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s = 0x%llx is not aligned to its %zu-byte elements", api,
                        name, (unsigned long long)p, align);
    return TL_OK;
}

tl_status tli_op_kernel_done(tl_ctx *ctx, const char *api, tl_kernel *k, tl_kernel **out)
{
    tl_status st = tl_kernel_status(k);
    if (st != TL_OK) {
        if (api)
            tli_fail(ctx, st, "%s: %s", api, tl_kernel_error(k));
        tl_kernel_destroy(k);
        return st;
    }
    *out = k;
    return TL_OK;
}
