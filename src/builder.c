/*
 * builder.c - the public builder API: checks every argument, records the
 * first error on the kernel (libgccjit's model) and appends nodes to the
 * graph. After an error every call returns a null handle and does nothing.
 */
#include "checked.h"
#include "ctx.h"
#include "kernel.h"
#include "lower.h"
#include "names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- errors */

static void vfail(tl_kernel *k, tl_status st, const char *api, const char *fmt, va_list ap)
{
    if (k->status != TL_OK)
        return;
    char what[400];
    vsnprintf(what, sizeof what, fmt, ap);
    k->status = st;
    tli_fmt(k->err, sizeof k->err, "%s: %s", api, what);
    if (k->ctx)
        tli_fail(k->ctx, st, "%s: kernel '%s': %s", api, k->ir.name, what);
}

void tli_kfail(tl_kernel *k, tl_status st, const char *api, const char *fmt, ...) TLI_PRINTF(4, 5);
void tli_kfail(tl_kernel *k, tl_status st, const char *api, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(k, st, api, fmt, ap);
    va_end(ap);
}

/* true when builder calls on k should do work. */
bool tli_klive(tl_kernel *k)
{
    if (!k)
        return false;
    k->ncalls++;
    return k->status == TL_OK;
}

void tli_koom(tl_kernel *k, const char *api) { tli_kfail(k, TL_ERR_OUT_OF_MEMORY, api, "out of host memory"); }

/* ------------------------------------------------------------- handles */

static tl_expr mk_handle(const tl_kernel *k, int32_t id) { return (tl_expr){k->tag, (uint32_t)id}; }

static int stmt_depth(const tli_ir *ir, int32_t s)
{
    int d = 0;
    for (; s; s = tli_S(ir, s)->parent)
        d++;
    return d;
}

bool tli_kscope_open(const tl_kernel *k, int32_t loop)
{
    if (loop == 0)
        return true;
    for (int i = 0; i < k->depth; i++)
        if (k->open[i] == loop)
            return true;
    return false;
}

/* Resolves an expression handle; 0 (and an error on k) when it is null,
 * from another kernel, or a loop variable whose loop has been closed. */
int32_t tli_kexpr(tl_kernel *k, tl_expr e, const char *api, const char *what)
{
    if (e.id == 0) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s is a null expression", what);
        return 0;
    }
    if (e.kid != k->tag || e.id >= (uint32_t)k->ir.e.n) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s is an expression of another kernel", what);
        return 0;
    }
    int32_t id = (int32_t)e.id;
    if (!tli_kscope_open(k, tli_E(&k->ir, id)->scope)) {
        tli_kfail(k, TL_ERR_SCOPE, api, "%s uses a loop variable outside its loop", what);
        return 0;
    }
    return id;
}

int32_t tli_kbuf(tl_kernel *k, tl_buf b, const char *api)
{
    if (b.id == 0) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "null buffer");
        return 0;
    }
    if (b.kid != k->tag || b.id >= (uint32_t)k->ir.b.n) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "buffer of another kernel");
        return 0;
    }
    return (int32_t)b.id;
}

/* The deeper of two open loop scopes (both lie on the open chain). */
int32_t tli_kinner_scope(const tl_kernel *k, int32_t a, int32_t b)
{
    if (!a || !b)
        return a ? a : b;
    return stmt_depth(&k->ir, a) >= stmt_depth(&k->ir, b) ? a : b;
}

/* Whether expression n needs the device to evaluate (a load, the block
 * index, a loop variable), from its own op and its operands' flags: kept
 * per node as it is made, so that asking costs nothing however deep or
 * shared the expression is. */
static bool device_only(const tl_kernel *k, const tli_enode *n)
{
    if (n->op == E_LOAD || n->op == E_BLOCK_IDX || n->op == E_LOOP_VAR)
        return true;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        if (k->device_only[n->a[i]])
            return true;
    return false;
}

static bool mark_device_only(tl_kernel *k, int32_t id, bool dev)
{
    if (id >= k->device_only_cap) {
        int32_t cap = k->device_only_cap ? k->device_only_cap * 2 : 256;
        while (cap <= id)
            cap *= 2;
        uint8_t *d = realloc(k->device_only, (size_t)cap);
        if (!d)
            return false;
        memset(d + k->device_only_cap, 0, (size_t)(cap - k->device_only_cap));
        k->device_only = d;
        k->device_only_cap = cap;
    }
    k->device_only[id] = dev;
    return true;
}

static tl_expr push_expr(tl_kernel *k, tli_enode *n, const char *api)
{
    int32_t next = k->ir.e.n;
    if (!mark_device_only(k, next, device_only(k, n))) {
        tli_koom(k, api);
        return TL_NONE_EXPR;
    }
    int32_t id = tli_ir_add_expr(&k->ir, n);
    if (!id) {
        tli_koom(k, api);
        return TL_NONE_EXPR;
    }
    return mk_handle(k, id);
}

/* ------------------------------------------------------------- kernels */

TL_API tl_kernel *tl_kernel_new(tl_ctx *ctx, const char *name)
{
    if (!ctx)
        return NULL;
    if (!tli_valid_ident(name)) {
        tli_fail(ctx, TL_ERR_INVALID_ARG,
                 "tl_kernel_new: kernel name '%s' is not an identifier of at most 63 characters",
                 name ? name : "(null)");
        return NULL;
    }
    tl_kernel *k = calloc(1, sizeof *k);
    if (!k || !tli_ir_init(&k->ir, name)) {
        free(k);
        tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_kernel_new: out of host memory");
        return NULL;
    }
    k->ctx = ctx;
    /* Tags tell handles of different kernels apart; mixing the context's
     * address in keeps kernels of two contexts apart as well. */
    uint32_t salt = (uint32_t)(((uintptr_t)ctx >> 4) * 2654435761u);
    k->tag = (tli_ctx_next_tag(ctx) * 0x9E3779B1u) ^ salt;
    if (k->tag == 0)
        k->tag = 1;
    return k;
}

TL_API void tl_kernel_destroy(tl_kernel *k)
{
    if (!k)
        return;
    tli_ir_free(&k->ir);
    free(k->device_only);
    free(k);
}

TL_API tl_status tl_kernel_status(const tl_kernel *k) { return k ? k->status : TL_ERR_INVALID_ARG; }
TL_API const char *tl_kernel_error(const tl_kernel *k) { return k ? k->err : "null kernel"; }

/* ---------------------------------------------------------- parameters */

/* Names users give (parameters, buffers) appear verbatim in the generated
 * source: an identifier, not reserved (C++ keywords and the spellings of
 * names.c; the tl_ prefix, which every name the library generates has),
 * and not taken by a parameter or another buffer of the kernel. */
bool tli_kname_free(tl_kernel *k, const char *name, const char *api)
{
    if (!tli_valid_ident(name)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "name '%s' is not an identifier of at most %d characters",
                  name ? name : "(null)", TLI_NAME_MAX);
        return false;
    }
    const char *why = tli_name_reserved(name);
    if (why) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "name '%s' %s; choose another name", name, why);
        return false;
    }
    for (int32_t i = 1; i < k->ir.p.n; i++)
        if (strcmp(k->ir.p.v[i].name, name) == 0) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "name '%s' is already a parameter", name);
            return false;
        }
    for (int32_t i = 1; i < k->ir.b.n; i++)
        if (k->ir.b.v[i].scope != B_GLOBAL && strcmp(k->ir.b.v[i].name, name) == 0) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "name '%s' is already a buffer's", name);
            return false;
        }
    return true;
}

/* A new parameter: a free name, and room for it. */
static bool param_ok(tl_kernel *k, const char *name, const char *api)
{
    if (!tli_kname_free(k, name, api))
        return false;
    if (k->ir.p.n - 1 >= TL_MAX_PARAMS) {
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "'%s' would be parameter %d: a kernel takes at most %d", name,
                  k->ir.p.n, TL_MAX_PARAMS);
        return false;
    }
    return true;
}


static tl_expr scalar_param(tl_kernel *k, const char *name, tl_dtype dt, tl_param_kind kind,
                            const char *api)
{
    if (!param_ok(k, name, api))
        return TL_NONE_EXPR;
    tli_param p = {.kind = (uint8_t)kind, .dtype = (uint8_t)dt};
    tli_fmt(p.name, sizeof p.name, "%s", name);
    int32_t pid = tli_ir_add_param(&k->ir, &p);
    tli_enode n = {.op = E_PARAM, .dtype = (uint8_t)dt};
    n.param = pid;
    tl_expr e = pid ? push_expr(k, &n, api) : TL_NONE_EXPR;
    if (!pid)
        tli_koom(k, api);
    else if (e.id)
        k->ir.p.v[pid].expr = (int32_t)e.id;
    return e;
}

TL_API tl_expr tl_dim(tl_kernel *k, const char *name)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    return scalar_param(k, name, TL_I64, TL_PARAM_DIM, "tl_dim");
}

TL_API tl_expr tl_param_scalar(tl_kernel *k, const char *name, tl_dtype dtype)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    if (dtype != TL_F32 && dtype != TL_F16 && dtype != TL_BF16 && dtype != TL_I32 &&
        dtype != TL_I64 && dtype != TL_F64) {
        tli_kfail(k, TL_ERR_DTYPE, "tl_param_scalar", "'%s' has unsupported dtype %s",
             name ? name : "(null)", tl_dtype_name(dtype));
        return TL_NONE_EXPR;
    }
    return scalar_param(k, name, dtype, TL_PARAM_SCALAR, "tl_param_scalar");
}

static bool tensor_dtype_ok(tl_dtype dt)
{
    return dt == TL_F32 || dt == TL_F16 || dt == TL_BF16 || dt == TL_I32 || dt == TL_I64 || dt == TL_F64 ||
           tli_dtype_is_f8(dt);
}

/* An extent or stride: an integer expression outside every loop, computable
 * on the host from the parameters (no loads, no block index). */
static bool host_int_expr(tl_kernel *k, tl_expr e, const char *api, const char *what)
{
    int32_t id = tli_kexpr(k, e, api, what);
    if (!id)
        return false;
    const tli_enode *n = tli_E(&k->ir, id);
    if (!tli_dtype_is_int((tl_dtype)n->dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "%s must be an integer expression, not %s", what,
             tl_dtype_name((tl_dtype)n->dtype));
        return false;
    }
    if (n->scope != 0) {
        tli_kfail(k, TL_ERR_SCOPE, api, "%s may not depend on a loop variable", what);
        return false;
    }
    return true;
}

static bool host_evaluable(const tl_kernel *k, int32_t id) { return !k->device_only[id]; }

/* A constant extent or stride must not be negative (a dim is checked at
 * launch). */
static bool not_negative(tl_kernel *k, int32_t id, const char *api, const char *what)
{
    int64_t v;
    if (tli_expr_const_int(&k->ir, id, &v) && v < 0) {
        tli_kfail(k, TL_ERR_SHAPE, api, "%s is the constant %lld; extents and strides must be >= 0", what,
                  (long long)v);
        return false;
    }
    return true;
}

static int32_t row_major_stride(tl_kernel *k, int rank, const int32_t *shape, int d);

/* One extent or stride of a tensor: an integer computable on the host,
 * not a negative constant. Its id, or 0 after recording why not. */
static int32_t tensor_dim(tl_kernel *k, tl_expr e, const char *api, const char *kind, int d)
{
    char what[32];
    tli_fmt(what, sizeof what, "%s[%d]", kind, d);
    if (!host_int_expr(k, e, api, what))
        return 0;
    if (!host_evaluable(k, (int32_t)e.id)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s must be computable from the parameters", what);
        return 0;
    }
    return not_negative(k, (int32_t)e.id, api, what) ? (int32_t)e.id : 0;
}

/* Fills b's shape and strides (row-major when strides is NULL). */
static bool tensor_layout(tl_kernel *k, tli_bnode *b, const tl_expr *shape, const tl_expr *strides, const char *api)
{
    for (int d = 0; d < b->rank; d++)
        if (!(b->shape[d] = tensor_dim(k, shape[d], api, "shape", d)))
            return false;
    for (int d = 0; d < b->rank; d++) {
        b->stride[d] = strides ? tensor_dim(k, strides[d], api, "strides", d) : row_major_stride(k, b->rank, b->shape, d);
        if (!b->stride[d])
            return false;
    }
    b->explicit_strides = strides != NULL;
    return true;
}

/* The tensor parameter of tl_param_tensor and tl_param_tensor_array: its
 * buffer id, or 0 after recording why not. */
static int32_t param_tensor(tl_kernel *k, const char *api, const char *name, tl_dtype dtype, int rank,
                            const tl_expr *shape, const tl_expr *strides)
{
    const char *shown = name ? name : "(null)";
    if (!tensor_dtype_ok(dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "'%s': unsupported element type %s", shown, tl_dtype_name(dtype));
        return 0;
    }
    if (rank < 1 || rank > TL_MAX_RANK) {
        tli_kfail(k, TL_ERR_SHAPE, api, "'%s': rank %d is not in 1..%d", shown, rank, TL_MAX_RANK);
        return 0;
    }
    if (!shape) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s': shape is NULL", shown);
        return 0;
    }
    tli_bnode b = {.scope = B_GLOBAL, .dtype = (uint8_t)dtype, .rank = rank, .at = k->ir.e.n};
    if (!param_ok(k, name, api) || !tensor_layout(k, &b, shape, strides, api))
        return 0;
    tli_fmt(b.name, sizeof b.name, "%s", name);
    tli_param p = {.kind = TL_PARAM_TENSOR, .dtype = (uint8_t)dtype};
    tli_fmt(p.name, sizeof p.name, "%s", name);
    int32_t bid = tli_ir_add_buf(&k->ir, &b);
    p.buf = bid;
    int32_t pid = bid ? tli_ir_add_param(&k->ir, &p) : 0;
    if (!pid) {
        tli_koom(k, api);
        return 0;
    }
    k->ir.b.v[bid].param = pid;
    return bid;
}

TL_API tl_buf tl_param_tensor(tl_kernel *k, const char *name, tl_dtype dtype, int rank,
                              const tl_expr *shape, const tl_expr *strides)
{
    if (!tli_klive(k))
        return TL_NONE_BUF;
    int32_t bid = param_tensor(k, "tl_param_tensor", name, dtype, rank, shape, strides);
    return bid ? (tl_buf){k->tag, (uint32_t)bid} : TL_NONE_BUF;
}

TL_API tl_buf tl_param_tensor_array(tl_kernel *k, const char *name, tl_dtype dtype, int rank,
                                    const tl_expr *shape, const tl_expr *strides, tl_expr count, int axis)
{
    static const char api[] = "tl_param_tensor_array";
    if (!tli_klive(k))
        return TL_NONE_BUF;
    if (axis < 0 || axis > 2) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s': axis %d is not a block axis (0, 1 or 2)", name ? name : "(null)",
                  axis);
        return TL_NONE_BUF;
    }
    /* the count first: a failed count leaves no parameter behind */
    if (!host_int_expr(k, count, api, "count"))
        return TL_NONE_BUF;
    int32_t n = (int32_t)count.id;
    if (!host_evaluable(k, n)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "count must be computable from the parameters");
        return TL_NONE_BUF;
    }
    int32_t bid = not_negative(k, n, api, "count") ? param_tensor(k, api, name, dtype, rank, shape, strides) : 0;
    if (!bid)
        return TL_NONE_BUF;
    k->ir.b.v[bid].array_count = n;
    k->ir.b.v[bid].array_axis = axis;
    return (tl_buf){k->tag, (uint32_t)bid};
}

/* ---------------------------------------------------------- launch shape */

TL_API void tl_grid(tl_kernel *k, tl_expr gx, tl_expr gy, tl_expr gz, int threads)
{
    static const char api[] = "tl_grid";
    if (!tli_klive(k))
        return;
    if (k->ir.threads) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "the grid is already set");
        return;
    }
    if (k->ir.body) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "call tl_grid before the first statement");
        return;
    }
    if (threads < 32 || threads > 1024 || threads % 32) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "threads = %d is not a multiple of 32 in 32..1024", threads);
        return;
    }
    tl_expr g[3] = {gx, gy, gz};
    for (int i = 0; i < 3; i++) {
        if (g[i].id == 0)
            continue;
        char what[16];
        tli_fmt(what, sizeof what, "grid[%d]", i);
        if (!host_int_expr(k, g[i], api, what))
            return;
        if (!host_evaluable(k, (int32_t)g[i].id)) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s must be computable from the parameters", what);
            return;
        }
        k->ir.grid[i] = (int32_t)g[i].id;
    }
    k->ir.threads = threads;
}

TL_API void tl_cluster(tl_kernel *k, int cx, int cy, int cz)
{
    static const char api[] = "tl_cluster";
    if (!tli_klive(k))
        return;
    if (k->ir.body) {
        tli_kfail(k, TL_ERR_SCOPE, api, "call tl_cluster before the first statement");
        return;
    }
    if (cx < 1 || cy < 1 || cz < 1 || cx > 8 || cy > 8 || cz > 8 || cx * cy * cz > 8) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "cluster %d x %d x %d: each extent must be 1..8 and their product "
                  "at most 8", cx, cy, cz);
        return;
    }
    k->ir.cluster[0] = cx;
    k->ir.cluster[1] = cy;
    k->ir.cluster[2] = cz;
}

TL_API tl_expr tl_block_idx(tl_kernel *k, int axis)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    if (axis < 0 || axis > 2) {
        tli_kfail(k, TL_ERR_INVALID_ARG, "tl_block_idx", "axis %d is not 0, 1 or 2", axis);
        return TL_NONE_EXPR;
    }
    tli_enode n = {.op = E_BLOCK_IDX, .dtype = TL_I64, .ival = axis};
    return push_expr(k, &n, "tl_block_idx");
}

/* ------------------------------------------------------------- constants */

static tl_expr const_int(tl_kernel *k, int64_t v, tl_dtype dt, const char *api)
{
    tli_enode n = {.op = E_CONST_INT, .dtype = (uint8_t)dt, .ival = v};
    return push_expr(k, &n, api);
}

TL_API tl_expr tl_int(tl_kernel *k, int64_t v) { return tli_klive(k) ? const_int(k, v, TL_I64, "tl_int") : TL_NONE_EXPR; }
TL_API tl_expr tl_i32(tl_kernel *k, int32_t v) { return tli_klive(k) ? const_int(k, v, TL_I32, "tl_i32") : TL_NONE_EXPR; }

static tl_expr const_float(tl_kernel *k, double v, tl_dtype dtype, const char *api)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    if (!tli_dtype_is_float(dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "dtype %s is not a float type", tl_dtype_name(dtype));
        return TL_NONE_EXPR;
    }
    tli_enode n = {.op = E_CONST_FLOAT, .dtype = (uint8_t)dtype, .fval = v};
    return push_expr(k, &n, api);
}

TL_API tl_expr tl_float(tl_kernel *k, double v, tl_dtype dtype) { return const_float(k, v, dtype, "tl_float"); }
TL_API tl_expr tl_f32(tl_kernel *k, float v) { return const_float(k, v, TL_F32, "tl_f32"); }

/* ----------------------------------------------------------- arithmetic */

/* Folds integer constants, so index arithmetic on constants stays short in
 * the generated code and visible to the vectoriser. The fold computes
 * exactly what the operation would at run time (tl_ceildiv as (x+y-1)/y),
 * so a constant result that does not fit the type, or a division by the
 * constant 0, is a bug of the kernel: reported, never wrapped silently. */
typedef enum fold_result { FOLD_OK, FOLD_OVERFLOW, FOLD_DIV_ZERO } fold_result;

static fold_result fold_int(tli_eop op, tl_dtype dt, int64_t x, int64_t y, int64_t *r)
{
    int64_t q, rem, t;
    bool ovf = false;
    switch (op) {
    case E_ADD: ovf = tli_add_overflows(x, y, r); break;
    case E_SUB: ovf = tli_sub_overflows(x, y, r); break;
    case E_MUL: ovf = tli_mul_overflows(x, y, r); break;
    case E_DIV:
    case E_MOD:
        if (y == 0)
            return FOLD_DIV_ZERO;
        ovf = tli_div_overflows(x, y, &q, &rem);
        *r = op == E_DIV ? q : rem;
        break;
    case E_CEILDIV:
        if (y == 0)
            return FOLD_DIV_ZERO;
        ovf = tli_add_overflows(x, y, &t) || tli_sub_overflows(t, 1, &t) || tli_div_overflows(t, y, r, &rem);
        break;
    case E_MAX: *r = x > y ? x : y; break;
    default: *r = x < y ? x : y; break; /* E_MIN */
    }
    if (!ovf && dt == TL_I32 && (*r < INT32_MIN || *r > INT32_MAX))
        ovf = true;
    return ovf ? FOLD_OVERFLOW : FOLD_OK;
}

static bool foldable(tli_eop op) { return op >= E_ADD && op <= E_MIN; }

/* Records why a constant operation cannot be folded. */
static tl_expr fold_failure(tl_kernel *k, fold_result fr, tli_eop op, tl_dtype dt, int64_t x, int64_t y,
                            const char *api)
{
    if (fr == FOLD_DIV_ZERO)
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "division by the constant 0 (%lld %s 0)", (long long)x,
                  tli_eop_name(op));
    else
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s of the constants %lld and %lld overflows %s", tli_eop_name(op),
                  (long long)x, (long long)y, tl_dtype_name(dt));
    return TL_NONE_EXPR;
}

/* The result type of a binary op on operand types da and db; false after
 * recording why they do not combine. */
static bool binary_dtype(tl_kernel *k, tli_eop op, tl_dtype da, tl_dtype db, tl_dtype *dt, const char *api)
{
    if (op == E_AND || op == E_OR) {
        if (da == TL_BOOL && db == TL_BOOL) {
            *dt = TL_BOOL;
            return true;
        }
        tli_kfail(k, TL_ERR_DTYPE, api, "operands must be bool (comparisons), got %s and %s", tl_dtype_name(da),
                  tl_dtype_name(db));
        return false;
    }
    if (tli_dtype_is_int(da) && tli_dtype_is_int(db)) {
        *dt = (da == TL_I64 || db == TL_I64) ? TL_I64 : TL_I32;
        return true;
    }
    if (da != db || !tli_dtype_is_float(da)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "operand dtypes %s and %s differ (use tl_cast)", tl_dtype_name(da),
                  tl_dtype_name(db));
        return false;
    }
    if (op == E_MOD || op == E_CEILDIV) {
        tli_kfail(k, TL_ERR_DTYPE, api, "integer operands required, got %s", tl_dtype_name(da));
        return false;
    }
    *dt = da;
    return true;
}

static tl_expr make_cast(tl_kernel *k, int32_t ia, tl_dtype dtype, const char *api);

/* The operand of an i32/i64 max or min that is i32, converted to i64: the
 * generated tl_max<T>(a, b) takes one type, so the promotion that C++ does
 * for + or < must be explicit here. 0 after an error. */
static int32_t widen_operand(tl_kernel *k, int32_t id, tl_dtype dt, const char *api)
{
    if (tli_E(&k->ir, id)->dtype == dt)
        return id;
    return (int32_t)make_cast(k, id, dt, api).id;
}

static tl_expr binary(tl_kernel *k, tli_eop op, tl_expr a, tl_expr b, const char *api)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t ia = tli_kexpr(k, a, api, "operand a"), ib = ia ? tli_kexpr(k, b, api, "operand b") : 0;
    tl_dtype dt;
    if (!ib || !binary_dtype(k, op, (tl_dtype)tli_E(&k->ir, ia)->dtype, (tl_dtype)tli_E(&k->ir, ib)->dtype, &dt, api))
        return TL_NONE_EXPR;
    if ((op == E_MAX || op == E_MIN) && tli_dtype_is_int(dt)) {
        ia = widen_operand(k, ia, dt, api);
        ib = ia ? widen_operand(k, ib, dt, api) : 0;
        if (!ib)
            return TL_NONE_EXPR;
    }
    const tli_enode *na = tli_E(&k->ir, ia), *nb = tli_E(&k->ir, ib);
    if (na->op == E_CONST_INT && nb->op == E_CONST_INT && foldable(op)) {
        int64_t r;
        fold_result fr = fold_int(op, dt, na->ival, nb->ival, &r);
        return fr == FOLD_OK ? const_int(k, r, dt, api) : fold_failure(k, fr, op, dt, na->ival, nb->ival, api);
    }
    /* x * 1, 1 * x, x + 0, 0 + x, x - 0: keep the generated code short. */
    bool a_const = na->op == E_CONST_INT && tli_dtype_is_int(dt), b_const = nb->op == E_CONST_INT && tli_dtype_is_int(dt);
    int64_t ca = a_const ? na->ival : -1, cb = b_const ? nb->ival : -1;
    if (dt == TL_I64 && ((op == E_MUL && cb == 1) || ((op == E_ADD || op == E_SUB) && b_const && cb == 0)) &&
        na->dtype == TL_I64)
        return mk_handle(k, ia);
    if (dt == TL_I64 && ((op == E_MUL && ca == 1) || (op == E_ADD && a_const && ca == 0)) && nb->dtype == TL_I64)
        return mk_handle(k, ib);
    bool cmp = op >= E_LT && op <= E_NE;
    tli_enode n = {.op = (uint8_t)op, .dtype = (uint8_t)(cmp ? TL_BOOL : dt), .a = {ia, ib}};
    n.scope = tli_kinner_scope(k, na->scope, nb->scope);
    return push_expr(k, &n, api);
}

TL_API tl_expr tl_add(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_ADD, a, b, "tl_add"); }
TL_API tl_expr tl_sub(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_SUB, a, b, "tl_sub"); }
TL_API tl_expr tl_mul(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_MUL, a, b, "tl_mul"); }
TL_API tl_expr tl_div(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_DIV, a, b, "tl_div"); }
TL_API tl_expr tl_mod(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_MOD, a, b, "tl_mod"); }
TL_API tl_expr tl_ceildiv(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_CEILDIV, a, b, "tl_ceildiv"); }
TL_API tl_expr tl_max(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_MAX, a, b, "tl_max"); }
TL_API tl_expr tl_min(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_MIN, a, b, "tl_min"); }
TL_API tl_expr tl_lt(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_LT, a, b, "tl_lt"); }
TL_API tl_expr tl_le(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_LE, a, b, "tl_le"); }
TL_API tl_expr tl_gt(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_GT, a, b, "tl_gt"); }
TL_API tl_expr tl_ge(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_GE, a, b, "tl_ge"); }
TL_API tl_expr tl_eq(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_EQ, a, b, "tl_eq"); }
TL_API tl_expr tl_ne(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_NE, a, b, "tl_ne"); }
TL_API tl_expr tl_and(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_AND, a, b, "tl_and"); }
TL_API tl_expr tl_or(tl_kernel *k, tl_expr a, tl_expr b) { return binary(k, E_OR, a, b, "tl_or"); }

/* Unary ops: `floats` restricts the operand to float types. */
static tl_expr unary(tl_kernel *k, tli_eop op, tl_expr a, bool floats, const char *api)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t ia = tli_kexpr(k, a, api, "operand");
    if (!ia)
        return TL_NONE_EXPR;
    const tli_enode *na = tli_E(&k->ir, ia);
    tl_dtype dt = (tl_dtype)na->dtype;
    bool ok = op == E_NOT ? dt == TL_BOOL
                          : (floats ? tli_dtype_is_float(dt) : (tli_dtype_is_float(dt) || tli_dtype_is_int(dt)));
    if (!ok) {
        tli_kfail(k, TL_ERR_DTYPE, api, "operand of dtype %s is not allowed (%s)", tl_dtype_name(dt),
             op == E_NOT ? "bool required" : floats ? "float required" : "number required");
        return TL_NONE_EXPR;
    }
    if (na->op == E_CONST_INT && (op == E_NEG || (op == E_ABS && na->ival < 0))) {
        int64_t v;
        fold_result fr = fold_int(E_SUB, dt, 0, na->ival, &v);
        if (fr != FOLD_OK) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s of the constant %lld overflows %s", tli_eop_name(op),
                      (long long)na->ival, tl_dtype_name(dt));
            return TL_NONE_EXPR;
        }
        return const_int(k, v, dt, api);
    }
    if (na->op == E_CONST_INT && op == E_ABS)
        return mk_handle(k, ia);
    tli_enode n = {.op = (uint8_t)op, .dtype = (uint8_t)dt, .a = {ia}, .scope = na->scope};
    return push_expr(k, &n, api);
}

TL_API tl_expr tl_neg(tl_kernel *k, tl_expr a) { return unary(k, E_NEG, a, false, "tl_neg"); }
TL_API tl_expr tl_abs(tl_kernel *k, tl_expr a) { return unary(k, E_ABS, a, false, "tl_abs"); }
TL_API tl_expr tl_not(tl_kernel *k, tl_expr a) { return unary(k, E_NOT, a, false, "tl_not"); }
TL_API tl_expr tl_exp(tl_kernel *k, tl_expr a) { return unary(k, E_EXP, a, true, "tl_exp"); }
TL_API tl_expr tl_exp2(tl_kernel *k, tl_expr a) { return unary(k, E_EXP2, a, true, "tl_exp2"); }
TL_API tl_expr tl_log(tl_kernel *k, tl_expr a) { return unary(k, E_LOG, a, true, "tl_log"); }
TL_API tl_expr tl_sqrt(tl_kernel *k, tl_expr a) { return unary(k, E_SQRT, a, true, "tl_sqrt"); }
TL_API tl_expr tl_rsqrt(tl_kernel *k, tl_expr a) { return unary(k, E_RSQRT, a, true, "tl_rsqrt"); }
TL_API tl_expr tl_tanh(tl_kernel *k, tl_expr a) { return unary(k, E_TANH, a, true, "tl_tanh"); }
TL_API tl_expr tl_erf(tl_kernel *k, tl_expr a) { return unary(k, E_ERF, a, true, "tl_erf"); }

TL_API void tl_use_min_blocks(tl_kernel *k, int blocks)
{
    if (!tli_klive(k))
        return;
    if (blocks < 0 || blocks > 32) {
        tli_kfail(k, TL_ERR_INVALID_ARG, "tl_use_min_blocks", "blocks = %d is not in 0..32", blocks);
        return;
    }
    k->ir.min_blocks = blocks;
}

TL_API void tl_use_cache_policy(tl_kernel *k, tl_buf buf, tl_cache_policy policy)
{
    static const char api[] = "tl_use_cache_policy";
    if (!tli_klive(k))
        return;
    int32_t b = tli_kbuf(k, buf, api);
    if (!b)
        return;
    tli_bnode *n = &k->ir.b.v[b];
    if (n->scope != B_GLOBAL) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s' is not a global tensor (a tl_param_tensor)", n->name);
        return;
    }
    if (policy != TL_CACHE_DEFAULT && policy != TL_CACHE_EVICT_FIRST) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "policy %d is not a tl_cache_policy", (int)policy);
        return;
    }
    n->cache = (uint8_t)policy;
}

TL_API void tl_use_fast_math(tl_kernel *k, int on)
{
    if (tli_klive(k))
        k->ir.fast_math = on != 0;
}

/* Converts expression ia to dtype (the checks done). */
static tl_expr make_cast(tl_kernel *k, int32_t ia, tl_dtype dtype, const char *api)
{
    const tli_enode *na = tli_E(&k->ir, ia);
    if (na->dtype == dtype)
        return mk_handle(k, ia);
    /* to i32, an i64 constant keeps its low 32 bits, as the device's cast */
    if (na->op == E_CONST_INT && tli_dtype_is_int(dtype))
        return const_int(k, dtype == TL_I32 ? (int32_t)(uint32_t)(uint64_t)na->ival : na->ival, dtype, api);
    tli_enode n = {.op = E_CAST, .dtype = (uint8_t)dtype, .a = {ia}, .scope = na->scope};
    return push_expr(k, &n, api);
}

TL_API tl_expr tl_cast(tl_kernel *k, tl_expr a, tl_dtype dtype)
{
    static const char api[] = "tl_cast";
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t ia = tli_kexpr(k, a, api, "operand");
    if (!ia)
        return TL_NONE_EXPR;
    if (!tli_dtype_is_float(dtype) && !tli_dtype_is_int(dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "cannot cast to %s", tl_dtype_name(dtype));
        return TL_NONE_EXPR;
    }
    return make_cast(k, ia, dtype, api);
}

TL_API tl_expr tl_select(tl_kernel *k, tl_expr cond, tl_expr a, tl_expr b)
{
    static const char api[] = "tl_select";
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t ic = tli_kexpr(k, cond, api, "cond");
    int32_t ia = ic ? tli_kexpr(k, a, api, "a") : 0;
    int32_t ib = ia ? tli_kexpr(k, b, api, "b") : 0;
    if (!ib)
        return TL_NONE_EXPR;
    const tli_enode *nc = tli_E(&k->ir, ic), *na = tli_E(&k->ir, ia), *nb = tli_E(&k->ir, ib);
    if (nc->dtype != TL_BOOL) {
        tli_kfail(k, TL_ERR_DTYPE, api, "cond must be bool, got %s", tl_dtype_name((tl_dtype)nc->dtype));
        return TL_NONE_EXPR;
    }
    if (na->dtype != nb->dtype) {
        tli_kfail(k, TL_ERR_DTYPE, api, "branches have dtypes %s and %s", tl_dtype_name((tl_dtype)na->dtype),
             tl_dtype_name((tl_dtype)nb->dtype));
        return TL_NONE_EXPR;
    }
    tli_enode n = {.op = E_SELECT, .dtype = na->dtype, .a = {ic, ia, ib}};
    n.scope = tli_kinner_scope(k, tli_kinner_scope(k, nc->scope, na->scope), nb->scope);
    return push_expr(k, &n, api);
}

/* A value of the block: its leaves are constants, parameters and block
 * indices (no loop variable, load or thread), checked over the DAG once a
 * node. */
TL_API tl_expr tl_block_value(tl_kernel *k, tl_expr v)
{
    static const char api[] = "tl_block_value";
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t iv = tli_kexpr(k, v, api, "value");
    if (!iv)
        return TL_NONE_EXPR;
    const tli_enode *nv = tli_E(&k->ir, iv);
    if (nv->scope) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "the value depends on a loop variable (a block's value may use "
                  "constants, parameters and tl_block_idx only)");
        return TL_NONE_EXPR;
    }
    tli_marks m = {0};
    bool ok = tli_marks_begin(&m, &k->ir), load = false;
    if (ok) {
        tli_marks_push(&m, iv);
        for (int32_t e; (e = tli_marks_next(&m));) {
            load |= tli_E(&k->ir, e)->op == E_LOAD;
            tli_marks_push_operands(&m, &k->ir, e);
        }
        ok = !m.oom;
    }
    tli_marks_free(&m);
    if (!ok) {
        tli_kfail(k, TL_ERR_OUT_OF_MEMORY, api, "out of host memory");
        return TL_NONE_EXPR;
    }
    if (load) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "the value reads a buffer (a block's value may use constants, "
                  "parameters and tl_block_idx only)");
        return TL_NONE_EXPR;
    }
    if (nv->op == E_CONST_INT || nv->op == E_CONST_FLOAT || nv->op == E_PARAM || nv->op == E_BLOCK_IDX ||
        nv->op == E_BLOCK_VALUE)
        return mk_handle(k, iv); /* already a name or a constant */
    tli_enode n = {.op = E_BLOCK_VALUE, .dtype = nv->dtype, .a = {iv}};
    return push_expr(k, &n, api);
}

/* ----------------------------------------------------------- memory */

/* Resolves rank index expressions into ids; returns the scope they depend on
 * through *scope, or false after recording an error. */
static bool index_list(tl_kernel *k, const tli_bnode *b, const tl_expr *idx, int32_t *ids,
                       int32_t *scope, const char *api)
{
    if (!idx) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "index list of '%s' is NULL", b->name);
        return false;
    }
    *scope = 0;
    for (int d = 0; d < b->rank; d++) {
        char what[32];
        tli_fmt(what, sizeof what, "index %d of '%s'", d, b->name);
        ids[d] = tli_kexpr(k, idx[d], api, what);
        if (!ids[d])
            return false;
        const tli_enode *n = tli_E(&k->ir, ids[d]);
        if (!tli_dtype_is_int((tl_dtype)n->dtype)) {
            tli_kfail(k, TL_ERR_DTYPE, api, "%s has dtype %s; indices are integers", what,
                 tl_dtype_name((tl_dtype)n->dtype));
            return false;
        }
        *scope = tli_kinner_scope(k, *scope, n->scope);
    }
    return true;
}

TL_API tl_expr tl_load(tl_kernel *k, tl_buf buf, const tl_expr *idx)
{
    static const char api[] = "tl_load";
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t bid = tli_kbuf(k, buf, api);
    if (!bid)
        return TL_NONE_EXPR;
    int32_t ids[TL_MAX_RANK], scope;
    tli_bnode b = *tli_B(&k->ir, bid);
    if (!index_list(k, &b, idx, ids, &scope, api))
        return TL_NONE_EXPR;
    int32_t start = tli_ir_add_indices(&k->ir, ids, b.rank);
    if (start < 0) {
        tli_koom(k, api);
        return TL_NONE_EXPR;
    }
    k->ir.b.v[bid].read = true;
    tli_enode n = {.op = E_LOAD, .dtype = b.dtype, .buf = bid, .idx = start, .scope = scope};
    return push_expr(k, &n, api);
}

/* Appends statement n to the innermost open body; returns its id or 0. */
int32_t tli_kappend(tl_kernel *k, tli_snode *n, const char *api)
{
    if (!k->ir.threads) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "call tl_grid before the first statement");
        return 0;
    }
    n->parent = k->depth ? k->open[k->depth - 1] : 0;
    int32_t id = tli_ir_add_stmt(&k->ir, n);
    if (!id) {
        tli_koom(k, api);
        return 0;
    }
    int32_t last = k->tail[k->depth];
    if (last)
        k->ir.s.v[last].next = id;
    else if (k->depth == 0)
        k->ir.body = id;
    else if (k->in_else[k->depth - 1])
        k->ir.s.v[n->parent].orelse = id;
    else
        k->ir.s.v[n->parent].body = id;
    k->tail[k->depth] = id;
    return id;
}

TL_API void tl_store(tl_kernel *k, tl_buf buf, const tl_expr *idx, tl_expr value)
{
    static const char api[] = "tl_store";
    if (!tli_klive(k))
        return;
    int32_t bid = tli_kbuf(k, buf, api);
    if (!bid)
        return;
    tli_bnode b = *tli_B(&k->ir, bid);
    int32_t ids[TL_MAX_RANK], scope;
    if (!index_list(k, &b, idx, ids, &scope, api))
        return;
    int32_t iv = tli_kexpr(k, value, api, "value");
    if (!iv)
        return;
    tl_dtype vt = (tl_dtype)tli_E(&k->ir, iv)->dtype;
    if (vt != b.dtype) {
        tli_kfail(k, TL_ERR_DTYPE, api, "value of dtype %s stored to '%s' of dtype %s (use tl_cast)",
             tl_dtype_name(vt), b.name, tl_dtype_name((tl_dtype)b.dtype));
        return;
    }
    int32_t start = tli_ir_add_indices(&k->ir, ids, b.rank);
    if (start < 0) {
        tli_koom(k, api);
        return;
    }
    tli_snode n = {.op = S_STORE, .buf = bid, .idx = start, .value = iv};
    if (tli_kappend(k, &n, api))
        k->ir.b.v[bid].written = true;
}

/* ------------------------------------------------------- control flow */

bool tli_kpush_scope(tl_kernel *k, int32_t sid, const char *api)
{
    if (k->depth >= TLI_MAX_DEPTH) {
        tli_kfail(k, TL_ERR_SCOPE, api, "more than %d nested scopes", TLI_MAX_DEPTH);
        return false;
    }
    k->open[k->depth] = sid;
    k->in_else[k->depth] = false;
    k->depth++;
    k->tail[k->depth] = 0;
    return true;
}

bool tli_kinside_parallel(const tl_kernel *k)
{
    for (int i = 0; i < k->depth; i++)
        if (tli_S(&k->ir, k->open[i])->op == S_PARALLEL)
            return true;
    return false;
}

/* Makes the loop variables of loop statement sid. */
bool tli_kloop_vars(tl_kernel *k, int32_t sid, int rank, tl_expr *vars, const char *api)
{
    for (int d = 0; d < rank; d++) {
        tli_enode n = {.op = E_LOOP_VAR, .dtype = TL_I64, .loop = sid, .ival = d, .scope = sid};
        tl_expr v = push_expr(k, &n, api);
        if (!v.id)
            return false;
        k->ir.s.v[sid].vars[d] = (int32_t)v.id;
        vars[d] = v;
    }
    return true;
}

TL_API tl_expr tl_serial(tl_kernel *k, tl_expr extent)
{
    static const char api[] = "tl_serial";
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t ie = tli_kexpr(k, extent, api, "extent");
    if (!ie)
        return TL_NONE_EXPR;
    if (!tli_dtype_is_int((tl_dtype)tli_E(&k->ir, ie)->dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "extent must be an integer");
        return TL_NONE_EXPR;
    }
    tli_snode n = {.op = S_SERIAL, .a0 = ie, .rank = 1};
    int32_t sid = tli_kappend(k, &n, api);
    tl_expr v = TL_NONE_EXPR;
    if (sid && tli_kpush_scope(k, sid, api))
        tli_kloop_vars(k, sid, 1, &v, api);
    return k->status == TL_OK ? v : TL_NONE_EXPR;
}

static void parallel(tl_kernel *k, int rank, const int64_t *extents, tl_expr *vars, const char *api)
{
    if (vars)
        for (int d = 0; d < rank && d < TL_MAX_RANK; d++)
            vars[d] = TL_NONE_EXPR;
    if (!tli_klive(k))
        return;
    if (rank < 1 || rank > TL_MAX_RANK || !extents || !vars) {
        tli_kfail(k, TL_ERR_SHAPE, api, "rank %d must be in 1..%d with extents and vars given", rank, TL_MAX_RANK);
        return;
    }
    if (tli_kinside_parallel(k)) {
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "tl_parallel inside tl_parallel: use one loop of higher rank");
        return;
    }
    tli_snode n = {.op = S_PARALLEL, .rank = rank};
    int64_t total = 1;
    for (int d = 0; d < rank; d++) {
        if (extents[d] < 1 || extents[d] > (1 << 24) || total * extents[d] > (1 << 24)) {
            tli_kfail(k, TL_ERR_SHAPE, api, "extent %d = %lld out of range (1..2^24 iterations in all)", d,
                 (long long)extents[d]);
            return;
        }
        total *= extents[d];
        n.extents[d] = extents[d];
    }
    int32_t sid = tli_kappend(k, &n, api);
    if (sid && tli_kpush_scope(k, sid, api))
        tli_kloop_vars(k, sid, rank, vars, api);
    if (k->status != TL_OK)
        for (int d = 0; d < rank; d++)
            vars[d] = TL_NONE_EXPR;
}

TL_API void tl_parallel(tl_kernel *k, int rank, const int64_t *extents, tl_expr *vars)
{
    parallel(k, rank, extents, vars, "tl_parallel");
}

TL_API tl_expr tl_parallel1(tl_kernel *k, int64_t extent)
{
    tl_expr v = TL_NONE_EXPR;
    parallel(k, 1, &extent, &v, "tl_parallel1");
    return v;
}

TL_API void tl_if(tl_kernel *k, tl_expr cond)
{
    static const char api[] = "tl_if";
    if (!tli_klive(k))
        return;
    int32_t ic = tli_kexpr(k, cond, api, "cond");
    if (!ic)
        return;
    if (tli_E(&k->ir, ic)->dtype != TL_BOOL) {
        tli_kfail(k, TL_ERR_DTYPE, api, "cond must be bool (a comparison), got %s",
             tl_dtype_name((tl_dtype)tli_E(&k->ir, ic)->dtype));
        return;
    }
    tli_snode n = {.op = S_IF, .a0 = ic};
    int32_t sid = tli_kappend(k, &n, api);
    if (sid)
        tli_kpush_scope(k, sid, api);
}

TL_API void tl_else(tl_kernel *k)
{
    if (!tli_klive(k))
        return;
    if (k->depth == 0 || tli_S(&k->ir, k->open[k->depth - 1])->op != S_IF) {
        tli_kfail(k, TL_ERR_SCOPE, "tl_else", "the innermost open scope is not a tl_if");
        return;
    }
    if (k->in_else[k->depth - 1]) {
        tli_kfail(k, TL_ERR_SCOPE, "tl_else", "this tl_if already has an else branch");
        return;
    }
    k->in_else[k->depth - 1] = true;
    k->tail[k->depth] = 0;
}

TL_API void tl_end(tl_kernel *k)
{
    if (!tli_klive(k))
        return;
    if (k->depth == 0) {
        tli_kfail(k, TL_ERR_SCOPE, "tl_end", "no open tl_serial, tl_parallel, tl_pipelined or tl_if to close");
        return;
    }
    k->depth--;
}

/* ------------------------------------------------------------ helpers */

/* Row-major stride of dimension d: the product of the later extents,
 * folded when they are constants. */
static int32_t row_major_stride(tl_kernel *k, int rank, const int32_t *shape, int d)
{
    tl_expr s = const_int(k, 1, TL_I64, "tl_param_tensor");
    for (int j = d + 1; j < rank && s.id; j++)
        s = binary(k, E_MUL, s, mk_handle(k, shape[j]), "tl_param_tensor");
    return (int32_t)s.id;
}

tl_status tli_kernel_verify(tl_kernel *k, const char *api)
{
    if (!k)
        return TL_ERR_INVALID_ARG;
    if (k->status != TL_OK) {
        tli_fail(k->ctx, k->status, "%s: kernel '%s': %s", api, k->ir.name, k->err);
        return k->status;
    }
    if (k->depth != 0) {
        static const char *const what[] = {[S_SERIAL] = "tl_serial", [S_PARALLEL] = "tl_parallel",
                                           [S_IF] = "tl_if", [S_PIPELINED] = "tl_pipelined"};
        int op = tli_S(&k->ir, k->open[k->depth - 1])->op;
        tli_kfail(k, TL_ERR_SCOPE, api, "%d scope(s) still open (innermost: %s); close each with tl_end", k->depth,
                  op < (int)(sizeof what / sizeof what[0]) && what[op] ? what[op] : "a scope");
        return k->status;
    }
    if (!k->ir.threads) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "the kernel has no grid (call tl_grid)");
        return k->status;
    }
    if (!k->ir.body) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "the kernel is empty: it has no statement");
        return k->status;
    }
    return TL_OK;
}
