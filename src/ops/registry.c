/* registry.c - prebuilt ops by name, for tl_op_build and the tilec tool. */
#include "ops.h"

#include "ctx.h"

#include <string.h>

static const char *const op_names[] = {"vadd", NULL};

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
    return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_build: unknown op '%s' (known: vadd)", op);
}
