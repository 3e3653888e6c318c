/*
 * interp.c - the golden model: runs a kernel graph on the CPU, block after
 * block (cluster after cluster), each parallel loop's iterations in order.
 *
 * It computes what the generated CUDA computes: f32 operations rounded to
 * f32, f16/bf16 operations done in f32 and rounded back, loads outside a
 * tensor reading 0 and stores outside it dropped. Integer arithmetic is
 * defined everywhere: + - * neg abs wrap around (two's complement, 32 or 64
 * bits), MIN / -1 wraps to MIN, and division or remainder by zero gives 0.
 *
 * Expressions form a DAG that users build with shared subexpressions
 * (x = x + x, twenty times over), and chains as deep as they like. So an
 * expression is evaluated without recursion, by an explicit stack, and each
 * node once per statement: its value is kept, stamped with the statement's
 * evaluation, until the next statement (a store may change what a load
 * reads, and loop variables move between statements).
 *
 * Clusters (tl_cluster): the blocks of a cluster run in lockstep, statement
 * by statement, each statement for each block in rank order, so that a
 * tl_cluster_reduce_* sees every block arrive at it and can combine their
 * fragments. A condition splits the blocks into those that take the then
 * branch and those that take the other; a loop's iteration v runs for the
 * blocks whose trip count exceeds v. A cluster reduction reached by only
 * some of the blocks of its cluster is an error (the GPU would hang).
 * Without clusters each block runs alone, as it always did.
 */
#include "interp.h"

#include "checked.h"
#include "half.h"
#include "lower.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A buffer as the interpreter sees it: global tensors in their own element
 * type, block-local tiles (shared, fragment, local) as doubles holding
 * values already rounded to the tile's type. */
typedef struct tensor_view {
    void *base;
    bool tile;
    int64_t dim[TL_MAX_RANK], st[TL_MAX_RANK];
} tensor_view;

/* Memory of one evaluation context (see tli_evalmem_new). */
struct tli_evalmem {
    tli_value *val;   /* value of each expression node ...              */
    uint64_t *stamp;  /* ... valid while stamp[e] == now                 */
    uint64_t now;
    int32_t *stack;   /* pending nodes: a path down the DAG, so at most one
                         entry per node                                  */
};

/* Blocks per cluster at most (tl_cluster's limit, checked again here). */
#define MAX_CLUSTER 8

/* What the blocks of a run share: the work budget, and why it stopped. */
typedef struct run_state {
    uint64_t steps, budget; /* work done; budget 0: unlimited             */
    bool exhausted;         /* the budget ran out                         */
    bool stop;              /* unwind: the budget ran out, or an error    */
    tl_status st;           /* the error (TL_OK: none; not the budget's)  */
    char *err;              /* ... explained here                         */
    size_t errlen;
    int cluster[3];         /* the cluster's extents, each >= 1           */
    int csize;              /* blocks per cluster                         */
} run_state;

/* One block: where it is, its loop variables and its tiles. The blocks of
 * a cluster share mem (each statement of each block starts with
 * new_statement, so one block never sees another's cached values) and the
 * run state. */
typedef struct interp {
    const tli_ir *ir;
    const tli_bound *b;
    tli_evalmem *mem;
    run_state *w;
    int64_t block[3];
    int64_t *var;        /* value of each loop-variable node, by expr id */
    tensor_view *t;      /* by buffer id */
} interp;

tli_evalmem *tli_evalmem_new(const tli_ir *ir)
{
    tli_evalmem *m = calloc(1, sizeof *m);
    size_t n = (size_t)ir->e.n;
    if (m) {
        m->val = calloc(n, sizeof *m->val);
        m->stamp = calloc(n, sizeof *m->stamp);
        m->stack = calloc(n, sizeof *m->stack);
        m->now = 1; /* stamps start at 0: nothing is valid */
    }
    if (m && (!m->val || !m->stamp || !m->stack)) {
        tli_evalmem_free(m);
        m = NULL;
    }
    return m;
}

void tli_evalmem_free(tli_evalmem *m)
{
    if (!m)
        return;
    free(m->val);
    free(m->stamp);
    free(m->stack);
    free(m);
}

/* Counts work against the budget (statements, and the elements that tile
 * operations touch). */
static void charge(interp *I, uint64_t work)
{
    run_state *w = I->w;
    w->steps += work;
    if (w->budget && w->steps > w->budget)
        w->exhausted = w->stop = true;
}

/* Forgets every value: the next statement sees memory and loop variables
 * as they are now. */
static void new_statement(interp *I)
{
    I->mem->now++;
    charge(I, 1);
}

/* ------------------------------------------------------------ rounding */

static double round_float(tl_dtype dt, double x)
{
    switch (dt) {
    case TL_F32: return (double)(float)x;
    case TL_F16: return (double)tl_f16_to_f32(tli_f64_to_f16(x));
    case TL_BF16: return (double)tl_bf16_to_f32(tli_f64_to_bf16(x));
    case TL_F8E4M3: return (double)tl_f8e4m3_to_f32(tli_f64_to_f8(dt, x));
    case TL_F8E5M2: return (double)tl_f8e5m2_to_f32(tli_f64_to_f8(dt, x));
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

static double as_double(const tli_ir *ir, int32_t e, tli_value v)
{
    tl_dtype dt = (tl_dtype)tli_E(ir, e)->dtype;
    return tli_dtype_is_float(dt) ? v.f : (double)v.i;
}

/* x / y and x % y as the interpreter defines them (see the top). */
static int64_t int_divide(tl_dtype dt, int64_t x, int64_t y, bool rem)
{
    if (y == 0)
        return 0;
    if (y == -1) /* x % -1 is 0; x / -1 is -x, wrapping at MIN */
        return rem ? 0 : wrap_int(dt, 0 - (uint64_t)x);
    return rem ? x % y : x / y;
}

static int64_t int_binary(tli_eop op, tl_dtype dt, int64_t x, int64_t y)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case E_ADD: return wrap_int(dt, ux + uy);
    case E_SUB: return wrap_int(dt, ux - uy);
    case E_MUL: return wrap_int(dt, ux * uy);
    case E_DIV: return int_divide(dt, x, y, false);
    case E_MOD: return int_divide(dt, x, y, true);
    case E_CEILDIV: return int_divide(dt, wrap_int(dt, ux + uy - 1), y, false);
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
    r.f = round_float(dt, r.f);
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
    /* The launch checks made every in-bounds offset fit in int64_t. */
    *off = 0;
    for (int d = 0; d < rank; d++) {
        if ((uint64_t)idx[d] >= (uint64_t)t->dim[d])
            return false;
        *off += idx[d] * t->st[d];
    }
    return true;
}

/* Integer elements of a tile keep their exact 64-bit value in the tile's
 * 8-byte slots (a double would round values beyond 2^53). */
static int64_t tile_int(const tensor_view *t, int64_t off)
{
    int64_t v;
    memcpy(&v, (const double *)t->base + off, sizeof v);
    return v;
}

static void set_tile_int(const tensor_view *t, int64_t off, int64_t v) { memcpy((double *)t->base + off, &v, sizeof v); }

static const int32_t *load_indices(const interp *I, const tli_enode *n) { return &I->ir->pool.v[n->idx]; }

static tli_value load(interp *I, const tli_enode *n)
{
    const tli_evalmem *m = I->mem;
    const int32_t *ids = load_indices(I, n);
    int64_t idx[TL_MAX_RANK], off;
    tli_value r = {0, 0};
    int rank = tli_B(I->ir, n->buf)->rank;
    for (int d = 0; d < rank; d++)
        idx[d] = m->val[ids[d]].i;
    const tensor_view *t = I->t ? &I->t[n->buf] : NULL;
    if (!t || !in_bounds(t, rank, idx, &off))
        return r;
    tl_dtype dt = (tl_dtype)n->dtype;
    if (t->tile && tli_dtype_is_int(dt))
        r.i = tile_int(t, off);
    else if (t->tile)
        r.f = ((const double *)t->base)[off];
    else if (dt == TL_I64)
        memcpy(&r.i, (const char *)t->base + off * 8, 8);
    else if (dt == TL_I32)
        r.i = (int64_t)((const int32_t *)t->base)[off];
    else
        r.f = tli_load_as_double(dt, t->base, off);
    return r;
}

/* An operand of e whose value is still needed, or 0 when all that e uses
 * are known. A select needs its condition, then only the chosen branch. */
static int32_t missing_operand(const interp *I, int32_t e)
{
    const tli_evalmem *m = I->mem;
    const tli_enode *n = tli_E(I->ir, e);
    if (n->op == E_SELECT) {
        if (m->stamp[n->a[0]] != m->now)
            return n->a[0];
        int32_t pick = m->val[n->a[0]].i ? n->a[1] : n->a[2];
        return m->stamp[pick] != m->now ? pick : 0;
    }
    if (n->op == E_LOAD) {
        const int32_t *ids = load_indices(I, n);
        for (int d = 0; d < tli_B(I->ir, n->buf)->rank; d++)
            if (m->stamp[ids[d]] != m->now)
                return ids[d];
        return 0;
    }
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        if (m->stamp[n->a[i]] != m->now)
            return n->a[i];
    return 0;
}

/* The value of e, whose operands are known. */
static tli_value compute(interp *I, int32_t e)
{
    const tli_ir *ir = I->ir;
    const tli_enode *n = tli_E(ir, e);
    const tli_value *val = I->mem->val;
    tl_dtype dt = (tl_dtype)n->dtype;
    tli_eop op = (tli_eop)n->op;
    tli_value r = {0, 0};
    switch (op) {
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
    case E_SELECT: return val[n->a[0]].i ? val[n->a[1]] : val[n->a[2]];
    case E_CAST: return cast(ir, n, val[n->a[0]]);
    case E_BLOCK_VALUE: return val[n->a[0]];
    case E_NOT: r.i = !val[n->a[0]].i; return r;
    default: break;
    }
    if (tli_eop_arity(op) == 2) {
        tl_dtype at = (tl_dtype)tli_E(ir, n->a[0])->dtype;
        tli_value a = val[n->a[0]], b = val[n->a[1]];
        if (tli_dtype_is_float(at))
            return float_binary(op, dt == TL_BOOL ? at : dt, a.f, b.f);
        r.i = int_binary(op, dt == TL_BOOL ? TL_I64 : dt, a.i, b.i);
        return r;
    }
    tli_value a = val[n->a[0]];
    if (tli_dtype_is_int(dt)) {
        uint64_t u = (uint64_t)a.i;
        r.i = wrap_int(dt, op == E_NEG || (op == E_ABS && a.i < 0) ? 0 - u : u);
        return r;
    }
    r.f = math1(op, dt, as_double(ir, n->a[0], a));
    return r;
}

/* The value of expression root in the current statement: operands first,
 * by a stack rather than recursion, each node computed once. */
static tli_value eval(interp *I, int32_t root)
{
    tli_evalmem *m = I->mem;
    uint64_t nodes = 0;
    int32_t sp = 0;
    m->stack[sp++] = root;
    while (sp > 0) {
        int32_t e = m->stack[sp - 1];
        if (m->stamp[e] == m->now) {
            sp--;
            continue;
        }
        int32_t need = missing_operand(I, e);
        if (need) {
            m->stack[sp++] = need;
            continue;
        }
        m->val[e] = compute(I, e);
        m->stamp[e] = m->now;
        nodes++;
        sp--;
    }
    I->w->steps += nodes; /* against the budget, checked at the next statement */
    return m->val[root];
}

tli_value tli_interp_eval_host(const tli_ir *ir, const tli_bound *b, int32_t e)
{
    run_state w = {0};
    interp I = {.ir = ir, .b = b, .mem = b->mem, .w = &w};
    return eval(&I, e);
}

/* --------------------------------------------------------- statements */

static void run_block(interp *I, int32_t first);
static void run_stmts(interp *const *set, int n, int32_t first);

/* A statement's own expressions: evaluated once, before it acts. */
static int64_t eval_int(interp *I, int32_t e) { return eval(I, e).i; }

static void store(interp *I, const tli_snode *s)
{
    const tli_bnode *b = tli_B(I->ir, s->buf);
    int64_t idx[TL_MAX_RANK], off;
    for (int d = 0; d < b->rank; d++)
        idx[d] = eval_int(I, I->ir->pool.v[s->idx + d]);
    tli_value v = eval(I, s->value);
    const tensor_view *t = &I->t[s->buf];
    if (!in_bounds(t, b->rank, idx, &off))
        return;
    tl_dtype dt = (tl_dtype)b->dtype;
    if (t->tile && tli_dtype_is_int(dt))
        set_tile_int(t, off, v.i);
    else if (t->tile)
        ((double *)t->base)[off] = v.f;
    else if (dt == TL_I64)
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
    for (int64_t f = 0; f < total && !I->w->stop; f++) {
        charge(I, 1); /* an empty body still costs its iterations */
        int64_t rem = f;
        for (int d = s->rank - 1; d >= 0; d--) {
            I->var[s->vars[d]] = rem % s->extents[d];
            rem /= s->extents[d];
        }
        run_block(I, s->body); /* this block alone: no cluster reduction inside */
    }
}

/* ---------------------------------------------------------------- tiles */

/* Where a region starts: tile indices times the tile's extents for a tile
 * of a global tensor (wrapping like the device's 64-bit registers; a tile
 * beyond the tensor is then masked), 0 for a whole buffer. A tile of a
 * tensor of higher rank has extents of 1 in the tensor's leading
 * dimensions: origin[] covers all of the operand buffer's dimensions. */
static void region_origin(interp *I, int32_t operand, const int64_t *ext, int rank, int64_t *origin)
{
    int32_t buf = tli_copy_buf(I->ir, operand);
    int grank = tli_B(I->ir, buf)->rank, lead = grank - rank;
    for (int d = 0; d < grank; d++)
        origin[d] = operand > 0 ? tli_wrap_mul(eval_int(I, tli_R(I->ir, operand)->idx[d]), d < lead ? 1 : ext[d - lead])
                                : 0;
}

/* Element (flat index e of a tile of the given extents) of a region: its
 * offset in the buffer, false when it falls outside a global tensor. */
static bool region_elem(interp *I, int32_t buf, const int64_t *origin, const int64_t *ext, int rank, int64_t e,
                        int64_t *off)
{
    int grank = tli_B(I->ir, buf)->rank, lead = grank - rank;
    int64_t idx[TL_MAX_RANK];
    for (int d = grank - 1; d >= 0; d--) {
        idx[d] = d < lead ? origin[d] : tli_wrap_add(origin[d], e % ext[d - lead]);
        if (d >= lead)
            e /= ext[d - lead];
    }
    return in_bounds(&I->t[buf], grank, idx, off);
}

static double read_elem(interp *I, int32_t buf, int64_t off)
{
    const tensor_view *t = &I->t[buf];
    return t->tile ? ((const double *)t->base)[off] : tli_load_as_double((tl_dtype)tli_B(I->ir, buf)->dtype, t->base, off);
}

static void write_elem(interp *I, int32_t buf, int64_t off, double v)
{
    const tensor_view *t = &I->t[buf];
    tl_dtype dt = (tl_dtype)tli_B(I->ir, buf)->dtype;
    if (t->tile)
        ((double *)t->base)[off] = round_float(dt, v);
    else
        tli_store_from_double(dt, t->base, off, v);
}

static void run_copy(interp *I, const tli_snode *s)
{
    const tli_ir *ir = I->ir;
    int32_t sb = tli_copy_buf(ir, s->a0), db = tli_copy_buf(ir, s->a1);
    const tli_bnode *tile = tli_B(ir, tli_B(ir, sb)->scope == B_GLOBAL ? db : sb);
    int64_t n = tli_buf_elems(tile), soff, doff, so[TL_MAX_RANK], dor[TL_MAX_RANK];
    region_origin(I, s->a0, tile->cshape, tile->rank, so);
    region_origin(I, s->a1, tile->cshape, tile->rank, dor);
    charge(I, (uint64_t)n);
    for (int64_t e = 0; e < n; e++) {
        bool in = region_elem(I, sb, so, tile->cshape, tile->rank, e, &soff);
        double v = in ? read_elem(I, sb, soff) : 0.0;
        if (region_elem(I, db, dor, tile->cshape, tile->rank, e, &doff))
            write_elem(I, db, doff, v);
    }
}

static void run_fill(interp *I, const tli_snode *s)
{
    const tli_bnode *b = tli_B(I->ir, s->buf);
    const tensor_view *t = &I->t[s->buf];
    tli_value x = {0, 0};
    if (s->value)
        x = eval(I, s->value);
    int64_t n = tli_buf_elems(b);
    charge(I, (uint64_t)n);
    bool ints = tli_dtype_is_int((tl_dtype)b->dtype);
    for (int64_t e = 0; e < n; e++) {
        if (ints)
            set_tile_int(t, e, x.i);
        else
            ((double *)t->base)[e] = x.f;
    }
}

/* C += A B with the transposes of the flags, each product summed in double
 * and the result rounded to f32 once: the tensor cores' f32 accumulation
 * differs from it only by rounding. */
static void run_gemm(interp *I, const tli_snode *s)
{
    const tli_ir *ir = I->ir;
    const tli_bnode *a = tli_B(ir, s->gemm[0]), *c = tli_B(ir, s->gemm[2]);
    const double *A = I->t[s->gemm[0]].base, *B = I->t[s->gemm[1]].base;
    double *C = I->t[s->gemm[2]].base;
    bool ta = s->a1 & TL_GEMM_TRANS_A, tb = s->a1 & TL_GEMM_TRANS_B;
    int64_t M = c->cshape[0], N = c->cshape[1], K = ta ? a->cshape[0] : a->cshape[1];
    charge(I, (uint64_t)M * (uint64_t)N * (uint64_t)K);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = C[i * N + j];
            for (int64_t k = 0; k < K; k++)
                acc += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            C[i * N + j] = (double)(float)acc;
        }
}

/* dst[rest] = op over src[.., i, ..] along dimension s->rank, folded from
 * the op's identity or from dst's old value (TLI_REDUCE_ACCUM). max, min
 * and absmax skip NaN as fmaxf/fminf do; the sum is exact in double and
 * rounded once to f32 (the GPU adds in f32, in an order of its own), then
 * to dst's type as the device converts its f32 result. */
static void run_reduce(interp *I, const tli_snode *s)
{
    const tli_bnode *src = tli_B(I->ir, s->gemm[0]);
    const double *S = I->t[s->gemm[0]].base;
    double *D = I->t[s->gemm[1]].base;
    tli_redop op = (tli_redop)(s->a1 & TLI_REDUCE_OP_MASK);
    int64_t n = src->cshape[s->rank], outer = 1, inner = 1;
    for (int d = 0; d < s->rank; d++)
        outer *= src->cshape[d];
    for (int d = s->rank + 1; d < src->rank; d++)
        inner *= src->cshape[d];
    static const double identity[] = {[R_MAX] = -INFINITY, [R_SUM] = 0, [R_MIN] = INFINITY, [R_ABSMAX] = 0};
    charge(I, (uint64_t)outer * (uint64_t)inner * (uint64_t)n);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double acc = s->a1 & TLI_REDUCE_ACCUM ? D[o * inner + in] : identity[op];
            for (int64_t i = 0; i < n; i++) {
                double x = S[(o * n + i) * inner + in];
                acc = op == R_MAX   ? fmax(acc, x)
                      : op == R_MIN ? fmin(acc, x)
                      : op == R_SUM ? acc + x
                                    : fmax(acc, fabs(x));
            }
            D[o * inner + in] = round_float((tl_dtype)tli_B(I->ir, s->gemm[1])->dtype, (float)acc);
        }
}

/* A statement that acts on its block alone (any but a condition, a serial
 * loop or a cluster reduction). */
static inline void run_one(interp *I, const tli_snode *s)
{
    new_statement(I);
    switch ((tli_sop)s->op) {
    case S_STORE: store(I, s); break;
    case S_COPY: run_copy(I, s); break;
    case S_FILL: run_fill(I, s); break;
    case S_GEMM: run_gemm(I, s); break;
    case S_REDUCE: run_reduce(I, s); break;
    case S_PARALLEL: run_parallel(I, s); break;
    default: break;
    }
}

static void run_cluster_reduce(interp *const *set, int n, const tli_snode *s);

/* The body of a serial (or pipelined: the pipelining changes only timing)
 * loop of n iterations, for one block. */
static void run_loop(interp *I, const tli_snode *s, int64_t n)
{
    for (int64_t v = 0; v < n && !I->w->stop; v++) {
        charge(I, 1);
        I->var[s->vars[0]] = v;
        run_block(I, s->body);
    }
}

/* Runs a body for one block: the whole kernel without clusters, and the
 * stretches a block of a cluster runs on its own. run_stmts hands every set
 * of one block here: its loops over the set cost a few percent on kernels
 * of many small statements, and without clusters the interpreter should be
 * as fast as before. Statement bodies nest at most TLI_MAX_DEPTH deep (the
 * builder's limit), so this recursion (and run_stmts') is bounded whatever
 * the kernel. */
static void run_block(interp *I, int32_t first)
{
    for (int32_t sid = first; sid && !I->w->stop; sid = tli_S(I->ir, sid)->next) {
        const tli_snode *s = tli_S(I->ir, sid);
        switch ((tli_sop)s->op) {
        case S_IF:
            new_statement(I);
            run_block(I, eval_int(I, s->a0) ? s->body : s->orelse);
            break;
        case S_PIPELINED:
        case S_SERIAL:
            new_statement(I);
            run_loop(I, s, eval_int(I, s->a0));
            break;
        case S_CLUSTER_REDUCE: run_cluster_reduce(&I, 1, s); break;
        default: run_one(I, s); break;
        }
    }
}

/* tl_if for the blocks of set: those whose condition holds run the then
 * branch, then the others the else branch (each in rank order: set's order
 * is kept). */
static void run_if_set(interp *const *set, int n, const tli_snode *s)
{
    interp *then[MAX_CLUSTER], *other[MAX_CLUSTER];
    int nt = 0, no = 0;
    for (int j = 0; j < n; j++) {
        new_statement(set[j]);
        if (eval_int(set[j], s->a0))
            then[nt++] = set[j];
        else
            other[no++] = set[j];
    }
    if (nt)
        run_stmts(then, nt, s->body);
    if (no)
        run_stmts(other, no, s->orelse);
}

/* A serial loop for the blocks of set: each block's trip count; iteration
 * v runs for the blocks with more than v. */
static void run_loop_set(interp *const *set, int n, const tli_snode *s)
{
    int64_t count[MAX_CLUSTER], most = 0, least = INT64_MAX;
    for (int j = 0; j < n; j++) {
        new_statement(set[j]);
        count[j] = eval_int(set[j], s->a0);
        most = count[j] > most ? count[j] : most;
        least = count[j] < least ? count[j] : least;
    }
    interp *some[MAX_CLUSTER];
    for (int64_t v = 0; v < most && !set[0]->w->stop; v++) {
        interp *const *active = set; /* every block, while v < least */
        int m = n;
        if (v >= least) {
            m = 0;
            for (int j = 0; j < n; j++)
                if (v < count[j])
                    some[m++] = set[j];
            active = some;
        }
        for (int j = 0; j < m; j++) {
            charge(active[j], 1);
            active[j]->var[s->vars[0]] = v;
        }
        run_stmts(active, m, s->body);
    }
}

/* tl_cluster_reduce_*: buf[i] = op over the cluster's blocks of their
 * buf[i], folded in rank order from the op's identity in f32 arithmetic
 * (each step rounded to f32, as the device combines), max / min / absmax
 * skipping NaN as fmaxf / fminf do, then rounded to buf's type; every
 * block gets the same value. set holds the blocks that reached it, in rank
 * order: fewer than the whole cluster is an error, which stops the run
 * with TL_ERR_LAUNCH_ARGS (what this launch did is wrong, like a bad grid;
 * the GPU would wait at the cluster barrier forever). A statement that is
 * not a reduction of a float tile (never made by the builder) does
 * nothing. */
static void run_cluster_reduce(interp *const *set, int n, const tli_snode *s)
{
    static const char *const api[] = {[R_MAX] = "tl_cluster_reduce_max", [R_SUM] = "tl_cluster_reduce_sum",
                                      [R_MIN] = "tl_cluster_reduce_min", [R_ABSMAX] = "tl_cluster_reduce_absmax"};
    static const float identity[] = {[R_MAX] = -INFINITY, [R_SUM] = 0, [R_MIN] = INFINITY, [R_ABSMAX] = 0};
    const tli_ir *ir = set[0]->ir;
    run_state *w = set[0]->w;
    for (int j = 0; j < n; j++)
        new_statement(set[j]);
    int32_t buf = s->buf;
    int32_t op = s->a1 & TLI_REDUCE_OP_MASK;
    if (buf <= 0 || buf >= ir->b.n || !set[0]->t[buf].tile || op > R_ABSMAX ||
        !tli_dtype_is_float((tl_dtype)tli_B(ir, buf)->dtype))
        return;
    if (n < w->csize) {
        const int64_t *bi = set[0]->block;
        tli_fmt(w->err, w->errlen,
                "%s reached by %d of the %d blocks of cluster (%lld, %lld, %lld): its blocks must take the same path",
                api[op], n, w->csize, (long long)(bi[0] / w->cluster[0]), (long long)(bi[1] / w->cluster[1]),
                (long long)(bi[2] / w->cluster[2]));
        w->st = TL_ERR_LAUNCH_ARGS;
        w->stop = true;
        return;
    }
    tl_dtype dt = (tl_dtype)tli_B(ir, buf)->dtype;
    int64_t elems = tli_buf_elems(tli_B(ir, buf));
    charge(set[0], (uint64_t)elems * (uint64_t)n);
    for (int64_t i = 0; i < elems; i++) {
        float acc = identity[op];
        for (int j = 0; j < n; j++) {
            float x = (float)((const double *)set[j]->t[buf].base)[i]; /* exact: the tile holds buf's type */
            acc = op == R_MAX   ? fmaxf(acc, x)
                  : op == R_MIN ? fminf(acc, x)
                  : op == R_SUM ? acc + x
                                : fmaxf(acc, fabsf(x));
        }
        double r = round_float(dt, acc);
        for (int j = 0; j < n; j++) /* every block, or only the root (tl_cluster_reduce_sum_to) */
            if (!s->a0 || j == s->a0 - 1)
                ((double *)set[j]->t[buf].base)[i] = r;
    }
}

/* Runs a body for the blocks of set (n >= 1, in rank order), statement by
 * statement, each for each block. */
static void run_stmts(interp *const *set, int n, int32_t first)
{
    if (n == 1) {
        run_block(set[0], first);
        return;
    }
    const tli_ir *ir = set[0]->ir;
    const run_state *w = set[0]->w;
    for (int32_t sid = first; sid && !w->stop; sid = tli_S(ir, sid)->next) {
        const tli_snode *s = tli_S(ir, sid);
        switch ((tli_sop)s->op) {
        case S_IF: run_if_set(set, n, s); break;
        case S_PIPELINED:
        case S_SERIAL: run_loop_set(set, n, s); break;
        case S_CLUSTER_REDUCE: run_cluster_reduce(set, n, s); break;
        default:
            for (int j = 0; j < n && !w->stop; j++)
                run_one(set[j], s);
            break;
        }
    }
}

/* Global tensors point at the caller's memory; tiles get their own. */
static bool bind_view(const tli_ir *ir, const tli_bound *b, int32_t i, tensor_view *v)
{
    const tli_bnode *t = tli_B(ir, i);
    if (t->scope != B_GLOBAL) {
        v->tile = true;
        int64_t st = 1;
        for (int d = t->rank - 1; d >= 0; d--) {
            v->dim[d] = t->cshape[d];
            v->st[d] = st;
            st *= t->cshape[d];
        }
        v->base = calloc((size_t)st, sizeof(double));
        return v->base != NULL;
    }
    v->base = t->array_count ? NULL : (void *)(uintptr_t)b->ptr[t->param]; /* arrays: per block */
    for (int d = 0; d < t->rank; d++) {
        v->dim[d] = tli_eval_host_int(ir, b, t->shape[d]);
        v->st[d] = tli_eval_host_int(ir, b, t->stride[d]);
    }
    return true;
}

/* The tensors of tl_param_tensor_array for the block at I->block: the
 * pointer of its index along the array's axis (tli_eval_grid checked that
 * the array holds it). */
static void bind_arrays(interp *I)
{
    for (int32_t i = 1; i < I->ir->b.n; i++) {
        const tli_bnode *t = tli_B(I->ir, i);
        if (t->scope == B_GLOBAL && t->array_count) {
            const uint64_t *ptrs = (const uint64_t *)(uintptr_t)I->b->ptr[t->param];
            I->t[i].base = (void *)(uintptr_t)ptrs[I->block[t->array_axis]];
        }
    }
}

/* Zeroes every tile; returns the elements cleared. */
static uint64_t clear_tiles(const tli_ir *ir, tensor_view *t)
{
    uint64_t n = 0;
    for (int32_t i = 1; i < ir->b.n; i++)
        if (t[i].tile) {
            int64_t e = tli_buf_elems(tli_B(ir, i));
            memset(t[i].base, 0, sizeof(double) * (size_t)e);
            n += (uint64_t)e;
        }
    return n;
}

static void free_views(const tli_ir *ir, tensor_view *t)
{
    for (int32_t i = 1; t && i < ir->b.n; i++)
        if (t[i].tile)
            free(t[i].base);
    free(t);
}

tl_status tli_interp_run(const tli_ir *ir, const tli_bound *b, char *err, size_t errlen)
{
    return tli_interp_run_budget(ir, b, 0, err, errlen);
}

/* Frees the blocks' loop variables and tiles, and the array. */
static void free_blocks(const tli_ir *ir, interp *blocks, int n)
{
    for (int j = 0; blocks && j < n; j++) {
        free_views(ir, blocks[j].t);
        free(blocks[j].var);
    }
    free(blocks);
}

/* n blocks, each with its own loop variables and tiles; NULL on OOM. */
static interp *new_blocks(const tli_ir *ir, const tli_bound *b, run_state *w, int n)
{
    interp *blocks = calloc((size_t)n, sizeof *blocks);
    bool ok = blocks != NULL;
    for (int j = 0; ok && j < n; j++) {
        interp *I = &blocks[j];
        *I = (interp){.ir = ir, .b = b, .mem = b->mem, .w = w};
        I->var = calloc((size_t)ir->e.n, sizeof *I->var);
        I->t = calloc((size_t)ir->b.n, sizeof *I->t);
        ok = I->var && I->t;
        for (int32_t i = 1; ok && i < ir->b.n; i++)
            ok = bind_view(ir, b, i, &I->t[i]);
    }
    if (!ok) {
        free_blocks(ir, blocks, n);
        return NULL;
    }
    return blocks;
}

tl_status tli_interp_run_budget(const tli_ir *ir, const tli_bound *b, uint64_t budget, char *err, size_t errlen)
{
    int64_t grid[3];
    if (!tli_eval_grid(ir, b, grid, err, errlen)) /* also: the grid is whole clusters */
        return TL_ERR_LAUNCH_ARGS;
    run_state w = {.budget = budget, .err = err, .errlen = errlen, .csize = 1};
    for (int a = 0; a < 3; a++) {
        w.cluster[a] = ir->cluster[a] > 0 ? ir->cluster[a] : 1;
        w.csize *= w.cluster[a];
    }
    if (w.csize > MAX_CLUSTER) { /* tl_cluster refuses it */
        tli_fmt(err, errlen, "a cluster of %d blocks is more than %d", w.csize, MAX_CLUSTER);
        return TL_ERR_UNSUPPORTED;
    }
    interp *blocks = new_blocks(ir, b, &w, w.csize);
    if (!blocks) {
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    interp *set[MAX_CLUSTER]; /* the cluster's blocks in rank order */
    for (int j = 0; j < w.csize; j++)
        set[j] = &blocks[j];
    const int *cl = w.cluster;
    int64_t c[3]; /* the cluster's index */
    for (c[2] = 0; c[2] < grid[2] / cl[2] && !w.stop; c[2]++)
        for (c[1] = 0; c[1] < grid[1] / cl[1] && !w.stop; c[1]++)
            for (c[0] = 0; c[0] < grid[0] / cl[0] && !w.stop; c[0]++) {
                for (int j = 0; j < w.csize; j++) { /* rank j = x + cx (y + cy z) */
                    interp *I = &blocks[j];
                    I->block[0] = c[0] * cl[0] + j % cl[0];
                    I->block[1] = c[1] * cl[1] + j / cl[0] % cl[1];
                    I->block[2] = c[2] * cl[2] + j / (cl[0] * cl[1]);
                    charge(I, 1 + clear_tiles(ir, I->t)); /* tiles start undefined: zero here */
                    bind_arrays(I);
                }
                run_stmts(set, w.csize, ir->body);
            }
    free_blocks(ir, blocks, w.csize);
    if (w.st != TL_OK)
        return w.st; /* err says why */
    if (w.exhausted) {
        tli_fmt(err, errlen, "the work budget of %llu steps ran out", (unsigned long long)budget);
        return TL_ERR_UNSUPPORTED;
    }
    return TL_OK;
}
