/*
 * interp.c - the golden model: runs a kernel graph on the CPU, block after
 * block, each parallel loop's iterations in order.
 *
 * It computes what the generated CUDA computes: f32 operations rounded to
 * f32, f16/bf16 operations done in f32 and rounded back, i32 wrapping,
 * loads outside a tensor reading 0 and stores outside it dropped. Integer
 * division by zero gives 0 instead of trapping.
 */
#include "interp.h"

#include "half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct tensor_view {
    void *base;
    int64_t dim[TL_MAX_RANK], st[TL_MAX_RANK];
} tensor_view;

typedef struct interp {
    const tli_ir *ir;
    const tli_bound *b;
    int64_t block[3];
    int64_t *var;        /* value of each loop-variable node, by expr id */
    tensor_view *t;      /* by buffer id */
} interp;

/* ------------------------------------------------------------ rounding */

static double round_float(tl_dtype dt, double x)
{
    switch (dt) {
    case TL_F32: return (double)(float)x;
    case TL_F16: return (double)tl_f16_to_f32(tli_f64_to_f16(x));
    case TL_BF16: return (double)tl_bf16_to_f32(tli_f64_to_bf16(x));
    default: return x;
    }
}

static int64_t wrap_int(tl_dtype dt, uint64_t x)
{
    return dt == TL_I32 ? (int64_t)(int32_t)(uint32_t)x : (int64_t)x;
}

/* Float to integer as cvt.rzi: truncate, saturate, NaN to 0. */
static int64_t float_to_int(tl_dtype dt, double x)
{
    double lo = dt == TL_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dt == TL_I32 ? 2147483647.0 : 9223372036854775807.0;
    if (isnan(x))
        return 0;
    if (x <= lo)
        return dt == TL_I32 ? INT32_MIN : INT64_MIN;
    if (x >= hi)
        return dt == TL_I32 ? INT32_MAX : INT64_MAX;
    return (int64_t)x;
}

/* ---------------------------------------------------------- evaluation */

static tli_value eval(interp *I, int32_t e);

static double as_double(const tli_ir *ir, int32_t e, tli_value v)
{
    tl_dtype dt = (tl_dtype)tli_E(ir, e)->dtype;
    return tli_dtype_is_float(dt) ? v.f : (double)v.i;
}

static int64_t int_binary(tli_eop op, tl_dtype dt, int64_t x, int64_t y)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    bool bad_div = y == 0 || (y == -1 && x == (dt == TL_I32 ? INT32_MIN : INT64_MIN));
    switch (op) {
    case E_ADD: return wrap_int(dt, ux + uy);
    case E_SUB: return wrap_int(dt, ux - uy);
    case E_MUL: return wrap_int(dt, ux * uy);
    case E_DIV: return bad_div ? 0 : x / y;
    case E_MOD: return bad_div ? 0 : x % y;
    case E_CEILDIV: return y == 0 ? 0 : wrap_int(dt, (ux + uy - 1)) / y;
    case E_MAX: return x > y ? x : y;
    case E_MIN: return x < y ? x : y;
    case E_LT: return x < y;
    case E_LE: return x <= y;
    case E_GT: return x > y;
    case E_GE: return x >= y;
    case E_EQ: return x == y;
    case E_NE: return x != y;
    case E_AND: return x && y;
    case E_OR: return x || y;
    default: return 0;
    }
}

static tli_value float_binary(tli_eop op, tl_dtype dt, double x, double y)
{
    tli_value r = {0, 0};
    switch (op) {
    case E_ADD: r.f = x + y; break;
    case E_SUB: r.f = x - y; break;
    case E_MUL: r.f = x * y; break;
    case E_DIV: r.f = x / y; break;
    case E_MAX: r.f = fmax(x, y); break;
    case E_MIN: r.f = fmin(x, y); break;
    case E_LT: r.i = x < y; return r;
    case E_LE: r.i = x <= y; return r;
    case E_GT: r.i = x > y; return r;
    case E_GE: r.i = x >= y; return r;
    case E_EQ: r.i = x == y; return r;
    case E_NE: r.i = x != y; return r;
    default: break;
    }
    /* f32 arithmetic in double then rounded once is exactly f32 arithmetic
     * for + - * / (double holds more than twice f32's precision). */
    r.f = round_float(dt == TL_F64 ? TL_F64 : (dt == TL_F32 ? TL_F32 : dt), r.f);
    return r;
}

static double math1(tli_eop op, tl_dtype dt, double x)
{
    if (dt == TL_F64) {
        switch (op) {
        case E_EXP: return exp(x);
        case E_EXP2: return exp2(x);
        case E_LOG: return log(x);
        case E_SQRT: return sqrt(x);
        case E_RSQRT: return 1.0 / sqrt(x);
        case E_TANH: return tanh(x);
        case E_ERF: return erf(x);
        case E_ABS: return fabs(x);
        case E_NEG: return -x;
        default: return 0;
        }
    }
    float f = (float)x; /* f16/bf16 are computed in f32, like the device */
    switch (op) {
    case E_EXP: f = expf(f); break;
    case E_EXP2: f = exp2f(f); break;
    case E_LOG: f = logf(f); break;
    case E_SQRT: f = sqrtf(f); break;
    case E_RSQRT: f = 1.0f / sqrtf(f); break;
    case E_TANH: f = tanhf(f); break;
    case E_ERF: f = erff(f); break;
    case E_ABS: f = fabsf(f); break;
    case E_NEG: f = -f; break;
    default: f = 0; break;
    }
    return round_float(dt, f);
}

static tli_value cast(const tli_ir *ir, const tli_enode *n, tli_value a)
{
    tl_dtype to = (tl_dtype)n->dtype, from = (tl_dtype)tli_E(ir, n->a[0])->dtype;
    tli_value r = {0, 0};
    if (tli_dtype_is_int(to))
        r.i = tli_dtype_is_float(from) ? float_to_int(to, a.f) : wrap_int(to, (uint64_t)a.i);
    else if (tli_dtype_is_float(from))
        r.f = round_float(to, a.f);
    else
        r.f = round_float(to, (double)a.i);
    return r;
}

static bool in_bounds(const tensor_view *t, int rank, const int64_t *idx, int64_t *off)
{
    *off = 0;
    for (int d = 0; d < rank; d++) {
        if ((uint64_t)idx[d] >= (uint64_t)t->dim[d])
            return false;
        *off += idx[d] * t->st[d];
    }
    return true;
}

static void eval_indices(interp *I, int32_t buf, int32_t idx, int64_t *out)
{
    for (int d = 0; d < tli_B(I->ir, buf)->rank; d++)
        out[d] = eval(I, I->ir->pool.v[idx + d]).i;
}

static tli_value load(interp *I, const tli_enode *n)
{
    int64_t idx[TL_MAX_RANK], off;
    tli_value r = {0, 0};
    eval_indices(I, n->buf, n->idx, idx);
    const tensor_view *t = &I->t[n->buf];
    if (!in_bounds(t, tli_B(I->ir, n->buf)->rank, idx, &off))
        return r;
    tl_dtype dt = (tl_dtype)n->dtype;
    if (dt == TL_I64)
        memcpy(&r.i, (const char *)t->base + off * 8, 8);
    else if (dt == TL_I32)
        r.i = (int64_t)((const int32_t *)t->base)[off];
    else
        r.f = tli_load_as_double(dt, t->base, off);
    return r;
}

static tli_value eval(interp *I, int32_t e)
{
    const tli_ir *ir = I->ir;
    const tli_enode *n = tli_E(ir, e);
    tl_dtype dt = (tl_dtype)n->dtype;
    tli_value r = {0, 0};
    switch ((tli_eop)n->op) {
    case E_CONST_INT: r.i = n->ival; return r;
    case E_CONST_FLOAT: r.f = round_float(dt, n->fval); return r;
    case E_PARAM:
        if (tli_dtype_is_int(dt))
            r.i = I->b->i[n->param];
        else
            r.f = round_float(dt, I->b->f[n->param]);
        return r;
    case E_BLOCK_IDX: r.i = I->block[n->ival]; return r;
    case E_LOOP_VAR: r.i = I->var ? I->var[e] : 0; return r;
    case E_LOAD: return load(I, n);
    case E_SELECT: return eval(I, n->a[0]).i ? eval(I, n->a[1]) : eval(I, n->a[2]);
    case E_CAST: return cast(ir, n, eval(I, n->a[0]));
    case E_NOT: r.i = !eval(I, n->a[0]).i; return r;
    default: break;
    }
    tli_eop op = (tli_eop)n->op;
    if (tli_eop_arity(op) == 2) {
        tl_dtype at = (tl_dtype)tli_E(ir, n->a[0])->dtype;
        tli_value a = eval(I, n->a[0]), b = eval(I, n->a[1]);
        if (tli_dtype_is_float(at))
            return float_binary(op, dt == TL_BOOL ? at : dt, a.f, b.f);
        r.i = int_binary(op, dt == TL_BOOL ? TL_I64 : dt, a.i, b.i);
        return r;
    }
    tli_value a = eval(I, n->a[0]);
    if (tli_dtype_is_int(dt)) {
        uint64_t u = (uint64_t)a.i;
        r.i = wrap_int(dt, op == E_NEG || (op == E_ABS && a.i < 0) ? 0 - u : u);
        return r;
    }
    r.f = math1(op, dt, as_double(ir, n->a[0], a));
    return r;
}

tli_value tli_interp_eval_host(const tli_ir *ir, const tli_bound *b, int32_t e)
{
    interp I = {.ir = ir, .b = b};
    return eval(&I, e);
}

/* --------------------------------------------------------- statements */

static void run_stmts(interp *I, int32_t first);

static void store(interp *I, const tli_snode *s)
{
    int64_t idx[TL_MAX_RANK], off;
    eval_indices(I, s->buf, s->idx, idx);
    tli_value v = eval(I, s->value);
    const tensor_view *t = &I->t[s->buf];
    if (!in_bounds(t, tli_B(I->ir, s->buf)->rank, idx, &off))
        return;
    tl_dtype dt = (tl_dtype)tli_B(I->ir, s->buf)->dtype;
    if (dt == TL_I64)
        memcpy((char *)t->base + off * 8, &v.i, 8);
    else if (dt == TL_I32)
        ((int32_t *)t->base)[off] = (int32_t)v.i;
    else
        tli_store_from_double(dt, t->base, off, v.f);
}

static void run_parallel(interp *I, const tli_snode *s)
{
    int64_t total = 1;
    for (int d = 0; d < s->rank; d++)
        total *= s->extents[d];
    for (int64_t f = 0; f < total; f++) {
        int64_t rem = f;
        for (int d = s->rank - 1; d >= 0; d--) {
            I->var[s->vars[d]] = rem % s->extents[d];
            rem /= s->extents[d];
        }
        run_stmts(I, s->body);
    }
}

static void run_stmts(interp *I, int32_t first)
{
    for (int32_t sid = first; sid; sid = tli_S(I->ir, sid)->next) {
        const tli_snode *s = tli_S(I->ir, sid);
        switch ((tli_sop)s->op) {
        case S_STORE: store(I, s); break;
        case S_IF:
            run_stmts(I, eval(I, s->a0).i ? s->body : s->orelse);
            break;
        case S_SERIAL: {
            int64_t n = eval(I, s->a0).i;
            for (int64_t v = 0; v < n; v++) {
                I->var[s->vars[0]] = v;
                run_stmts(I, s->body);
            }
            break;
        }
        case S_PARALLEL: run_parallel(I, s); break;
        default: break;
        }
    }
}

tl_status tli_interp_run(const tli_ir *ir, const tli_bound *b, char *err, size_t errlen)
{
    int64_t grid[3];
    if (!tli_eval_grid(ir, b, grid, err, errlen))
        return TL_ERR_LAUNCH_ARGS;
    interp I = {.ir = ir, .b = b};
    I.var = calloc((size_t)ir->e.n, sizeof *I.var);
    I.t = calloc((size_t)ir->b.n, sizeof *I.t);
    if (!I.var || !I.t) {
        free(I.var);
        free(I.t);
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *t = tli_B(ir, i);
        I.t[i].base = (void *)(uintptr_t)b->ptr[t->param];
        for (int d = 0; d < t->rank; d++) {
            I.t[i].dim[d] = tli_eval_host_int(ir, b, t->shape[d]);
            I.t[i].st[d] = tli_eval_host_int(ir, b, t->stride[d]);
        }
    }
    for (I.block[2] = 0; I.block[2] < grid[2]; I.block[2]++)
        for (I.block[1] = 0; I.block[1] < grid[1]; I.block[1]++)
            for (I.block[0] = 0; I.block[0] < grid[0]; I.block[0]++)
                run_stmts(&I, ir->body);
    free(I.var);
    free(I.t);
    return TL_OK;
}
