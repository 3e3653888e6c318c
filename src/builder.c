/*
 * builder.c - the public builder API: checks every argument, records the
 * first error on the kernel (libgccjit's model) and appends nodes to the
 * graph. After an error every call returns a null handle and does nothing.
 */
#include "ctx.h"
#include "kernel.h"

#include <ctype.h>
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
        tli_fail(k->ctx, st, "kernel '%s': %s", k->ir.name, k->err);
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

static bool scope_open(const tl_kernel *k, int32_t loop)
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
    if (!scope_open(k, tli_E(&k->ir, id)->scope)) {
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

static tl_expr push_expr(tl_kernel *k, tli_enode *n, const char *api)
{
    int32_t id = tli_ir_add_expr(&k->ir, n);
    if (!id) {
        tli_koom(k, api);
        return TL_NONE_EXPR;
    }
    return mk_handle(k, id);
}

/* ------------------------------------------------------------- kernels */

static bool valid_ident(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_') || strlen(s) > 63)
        return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return false;
    return true;
}

/* Names the generated CUDA reserves for itself or C++ keeps. */
static bool reserved_name(const char *s)
{
    static const char *const words[] = {
        "auto", "bool", "break", "case", "char", "class", "const", "continue", "default",
        "delete", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto",
        "if", "inline", "int", "long", "new", "operator", "private", "public", "register",
        "return", "short", "signed", "sizeof", "static", "struct", "switch", "template",
        "this", "true", "typedef", "union", "unsigned", "using", "virtual", "void",
        "volatile", "while", "half", "threadIdx", "blockIdx", "blockDim", "gridDim", NULL};
    if (strncmp(s, "tl_", 3) == 0 || strncmp(s, "__", 2) == 0)
        return true;
    for (int i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return true;
    return false;
}

TL_API tl_kernel *tl_kernel_new(tl_ctx *ctx, const char *name)
{
    if (!ctx)
        return NULL;
    if (!valid_ident(name)) {
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
    k->tag = (++ctx->next_kernel_tag * 0x9E3779B1u) ^ salt;
    if (k->tag == 0)
        k->tag = 1;
    return k;
}

TL_API void tl_kernel_destroy(tl_kernel *k)
{
    if (!k)
        return;
    tli_ir_free(&k->ir);
    free(k);
}

TL_API tl_status tl_kernel_status(const tl_kernel *k) { return k ? k->status : TL_ERR_INVALID_ARG; }
TL_API const char *tl_kernel_error(const tl_kernel *k) { return k ? k->err : "null kernel"; }

/* ---------------------------------------------------------- parameters */

/* Names users give (parameters, buffers) appear verbatim in the generated
 * source: an identifier, not reserved (C++ keywords; the tl_ prefix, which
 * every name the library generates has), and not taken by a parameter or
 * another buffer of the kernel. */
bool tli_kname_free(tl_kernel *k, const char *name, const char *api)
{
    if (!valid_ident(name) || reserved_name(name)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "name '%s' is not a free identifier (names starting with tl_ or __ "
                  "and C++ keywords are reserved)", name ? name : "(null)");
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

static bool param_name_ok(tl_kernel *k, const char *name, const char *api) { return tli_kname_free(k, name, api); }

static tl_expr scalar_param(tl_kernel *k, const char *name, tl_dtype dt, tl_param_kind kind,
                            const char *api)
{
    if (!param_name_ok(k, name, api))
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
    return dt == TL_F32 || dt == TL_F16 || dt == TL_BF16 || dt == TL_I32 || dt == TL_I64 || dt == TL_F64;
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

static bool host_evaluable(const tli_ir *ir, int32_t id)
{
    const tli_enode *n = tli_E(ir, id);
    if (n->op == E_LOAD || n->op == E_BLOCK_IDX || n->op == E_LOOP_VAR)
        return false;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        if (!host_evaluable(ir, n->a[i]))
            return false;
    return true;
}

static int32_t row_major_stride(tl_kernel *k, int rank, const int32_t *shape, int d);

TL_API tl_buf tl_param_tensor(tl_kernel *k, const char *name, tl_dtype dtype, int rank,
                              const tl_expr *shape, const tl_expr *strides)
{
    static const char api[] = "tl_param_tensor";
    if (!tli_klive(k))
        return TL_NONE_BUF;
    if (!tensor_dtype_ok(dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "'%s': unsupported element type %s", name ? name : "(null)",
             tl_dtype_name(dtype));
        return TL_NONE_BUF;
    }
    if (rank < 1 || rank > TL_MAX_RANK) {
        tli_kfail(k, TL_ERR_SHAPE, api, "'%s': rank %d is not in 1..%d", name ? name : "(null)", rank,
             TL_MAX_RANK);
        return TL_NONE_BUF;
    }
    if (!shape) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s': shape is NULL", name ? name : "(null)");
        return TL_NONE_BUF;
    }
    if (!param_name_ok(k, name, api))
        return TL_NONE_BUF;
    tli_bnode b = {.scope = B_GLOBAL, .dtype = (uint8_t)dtype, .rank = rank, .at = k->ir.e.n};
    tli_fmt(b.name, sizeof b.name, "%s", name);
    for (int d = 0; d < rank; d++) {
        char what[32];
        tli_fmt(what, sizeof what, "shape[%d]", d);
        if (!host_int_expr(k, shape[d], api, what) || !host_evaluable(&k->ir, (int32_t)shape[d].id)) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s must be computable from the parameters", what);
            return TL_NONE_BUF;
        }
        b.shape[d] = (int32_t)shape[d].id;
    }
    for (int d = 0; d < rank; d++) {
        if (strides) {
            char what[32];
            tli_fmt(what, sizeof what, "strides[%d]", d);
            if (!host_int_expr(k, strides[d], api, what) ||
                !host_evaluable(&k->ir, (int32_t)strides[d].id)) {
                tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s must be computable from the parameters", what);
                return TL_NONE_BUF;
            }
            b.stride[d] = (int32_t)strides[d].id;
        } else {
            b.stride[d] = row_major_stride(k, rank, b.shape, d);
            if (!b.stride[d])
                return TL_NONE_BUF;
        }
    }
    b.explicit_strides = strides != NULL;
    tli_param p = {.kind = TL_PARAM_TENSOR, .dtype = (uint8_t)dtype};
    tli_fmt(p.name, sizeof p.name, "%s", name);
    int32_t bid = tli_ir_add_buf(&k->ir, &b);
    if (!bid) {
        tli_koom(k, api);
        return TL_NONE_BUF;
    }
    p.buf = bid;
    int32_t pid = tli_ir_add_param(&k->ir, &p);
    if (!pid) {
        tli_koom(k, api);
        return TL_NONE_BUF;
    }
    k->ir.b.v[bid].param = pid;
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
        if (!host_evaluable(&k->ir, (int32_t)g[i].id)) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s must be computable from the parameters", what);
            return;
        }
        k->ir.grid[i] = (int32_t)g[i].id;
    }
    k->ir.threads = threads;
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

TL_API tl_expr tl_float(tl_kernel *k, double v, tl_dtype dtype)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    if (!tli_dtype_is_float(dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, "tl_float", "dtype %s is not a float type", tl_dtype_name(dtype));
        return TL_NONE_EXPR;
    }
    tli_enode n = {.op = E_CONST_FLOAT, .dtype = (uint8_t)dtype, .fval = v};
    return push_expr(k, &n, "tl_float");
}

TL_API tl_expr tl_f32(tl_kernel *k, float v) { return tl_float(k, v, TL_F32); }

/* ----------------------------------------------------------- arithmetic */

/* Folds integer constants, so index arithmetic on constants stays short in
 * the generated code and visible to the vectoriser. */
static bool fold_int(tli_eop op, int64_t x, int64_t y, int64_t *r)
{
    switch (op) {
    case E_ADD: *r = x + y; return true;
    case E_SUB: *r = x - y; return true;
    case E_MUL: *r = x * y; return true;
    case E_DIV: if (y == 0) return false; *r = x / y; return true;
    case E_MOD: if (y == 0) return false; *r = x % y; return true;
    case E_CEILDIV: if (y <= 0 || x < 0) return false; *r = (x + y - 1) / y; return true;
    case E_MAX: *r = x > y ? x : y; return true;
    case E_MIN: *r = x < y ? x : y; return true;
    default: return false;
    }
}

static tl_expr binary(tl_kernel *k, tli_eop op, tl_expr a, tl_expr b, const char *api)
{
    if (!tli_klive(k))
        return TL_NONE_EXPR;
    int32_t ia = tli_kexpr(k, a, api, "operand a"), ib = ia ? tli_kexpr(k, b, api, "operand b") : 0;
    if (!ia || !ib)
        return TL_NONE_EXPR;
    const tli_enode *na = tli_E(&k->ir, ia), *nb = tli_E(&k->ir, ib);
    tl_dtype da = (tl_dtype)na->dtype, db = (tl_dtype)nb->dtype, dt;
    bool logic = op == E_AND || op == E_OR;
    if (logic) {
        if (da != TL_BOOL || db != TL_BOOL) {
            tli_kfail(k, TL_ERR_DTYPE, api, "operands must be bool (comparisons), got %s and %s",
                 tl_dtype_name(da), tl_dtype_name(db));
            return TL_NONE_EXPR;
        }
        dt = TL_BOOL;
    } else if (tli_dtype_is_int(da) && tli_dtype_is_int(db)) {
        dt = (da == TL_I64 || db == TL_I64) ? TL_I64 : TL_I32;
    } else if (da == db && tli_dtype_is_float(da)) {
        dt = da;
        if (op == E_MOD || op == E_CEILDIV) {
            tli_kfail(k, TL_ERR_DTYPE, api, "integer operands required, got %s", tl_dtype_name(da));
            return TL_NONE_EXPR;
        }
    } else {
        tli_kfail(k, TL_ERR_DTYPE, api, "operand dtypes %s and %s differ (use tl_cast)",
             tl_dtype_name(da), tl_dtype_name(db));
        return TL_NONE_EXPR;
    }
    int64_t r;
    if (na->op == E_CONST_INT && nb->op == E_CONST_INT && fold_int(op, na->ival, nb->ival, &r))
        return const_int(k, dt == TL_I32 ? (int32_t)r : r, dt, api);
    /* x * 1, 1 * x, x + 0, 0 + x, x - 0: keep the generated code short. */
    int64_t ca, cb;
    bool a_const = na->op == E_CONST_INT && tli_dtype_is_int(dt), b_const = nb->op == E_CONST_INT && tli_dtype_is_int(dt);
    ca = a_const ? na->ival : -1;
    cb = b_const ? nb->ival : -1;
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
    if (na->op == E_CONST_INT && (op == E_NEG || op == E_ABS)) {
        int64_t v = op == E_NEG ? -na->ival : (na->ival < 0 ? -na->ival : na->ival);
        return const_int(k, v, dt, api);
    }
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

TL_API void tl_use_fast_math(tl_kernel *k, int on)
{
    if (tli_klive(k))
        k->ir.fast_math = on != 0;
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
    const tli_enode *na = tli_E(&k->ir, ia);
    if (na->dtype == dtype)
        return mk_handle(k, ia);
    if (na->op == E_CONST_INT && tli_dtype_is_int(dtype))
        return const_int(k, dtype == TL_I32 ? (int32_t)na->ival : na->ival, dtype, api);
    tli_enode n = {.op = E_CAST, .dtype = (uint8_t)dtype, .a = {ia}, .scope = na->scope};
    return push_expr(k, &n, api);
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

TL_API void tl_parallel(tl_kernel *k, int rank, const int64_t *extents, tl_expr *vars)
{
    static const char api[] = "tl_parallel";
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

TL_API tl_expr tl_parallel1(tl_kernel *k, int64_t extent)
{
    tl_expr v = TL_NONE_EXPR;
    tl_parallel(k, 1, &extent, &v);
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
        tli_fail(k->ctx, k->status, "kernel '%s': %s", k->ir.name, k->err);
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
