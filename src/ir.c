/* ir.c - storage of the kernel graph: flat arrays, append, deep copy. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* Grows a TLI_VEC to hold one more element; false on OOM. */
#define VEC_GROW(vec)                                                              \
    ((vec).n < (vec).cap || vec_grow((void **)&(vec).v, &(vec).cap, sizeof *(vec).v))

static bool vec_grow(void **data, int32_t *cap, size_t elem)
{
    int32_t ncap = *cap ? *cap * 2 : 16;
    void *d = realloc(*data, (size_t)ncap * elem);
    if (!d)
        return false;
    *data = d;
    *cap = ncap;
    return true;
}

#define VEC_PUSH(vec, item) (VEC_GROW(vec) ? ((vec).v[(vec).n] = (item), (vec).n++) : 0)

bool tli_ir_init(tli_ir *ir, const char *name)
{
    memset(ir, 0, sizeof *ir);
    tli_fmt(ir->name, sizeof ir->name, "%s", name ? name : "kernel");
    /* Entry 0 of every array is the "none" entry. */
    tli_enode e = {0};
    tli_snode s = {0};
    tli_bnode b = {0};
    tli_param p = {0};
    int32_t z = 0;
    tli_rnode r = {0};
    char nul = 0;
    /* VEC_PUSH returns the new index, 0 here, so check the counts. */
    VEC_PUSH(ir->e, e);
    VEC_PUSH(ir->s, s);
    VEC_PUSH(ir->b, b);
    VEC_PUSH(ir->p, p);
    VEC_PUSH(ir->pool, z);
    VEC_PUSH(ir->r, r);
    VEC_PUSH(ir->str, nul);
    if (ir->str.n != 1 || ir->e.n != 1 || ir->s.n != 1 || ir->b.n != 1 || ir->p.n != 1 || ir->pool.n != 1 || ir->r.n != 1) {
        tli_ir_free(ir);
        return false;
    }
    return true;
}

void tli_ir_free(tli_ir *ir)
{
    free(ir->e.v);
    free(ir->s.v);
    free(ir->b.v);
    free(ir->p.v);
    free(ir->pool.v);
    free(ir->r.v);
    free(ir->str.v);
    memset(ir, 0, sizeof *ir);
}

static bool copy_array(void **dst, const void *src, int32_t n, size_t elem)
{
    *dst = malloc((size_t)(n ? n : 1) * elem);
    if (!*dst)
        return false;
    memcpy(*dst, src, (size_t)n * elem);
    return true;
}

#define VEC_COPY(d, s) (copy_array((void **)&(d).v, (s).v, (s).n, sizeof *(s).v) ? ((d).n = (d).cap = (s).n, true) : false)

bool tli_ir_clone(tli_ir *dst, const tli_ir *src)
{
    *dst = *src;
    dst->e.v = NULL;
    dst->s.v = NULL;
    dst->b.v = NULL;
    dst->p.v = NULL;
    dst->pool.v = NULL;
    dst->r.v = NULL;
    dst->str.v = NULL;
    if (VEC_COPY(dst->str, src->str) && VEC_COPY(dst->e, src->e) && VEC_COPY(dst->s, src->s) && VEC_COPY(dst->b, src->b) &&
        VEC_COPY(dst->p, src->p) && VEC_COPY(dst->pool, src->pool) && VEC_COPY(dst->r, src->r))
        return true;
    tli_ir_free(dst);
    return false;
}

int32_t tli_ir_add_expr(tli_ir *ir, const tli_enode *n) { return VEC_PUSH(ir->e, *n); }
int32_t tli_ir_add_stmt(tli_ir *ir, const tli_snode *n) { return VEC_PUSH(ir->s, *n); }
int32_t tli_ir_add_buf(tli_ir *ir, const tli_bnode *n) { return VEC_PUSH(ir->b, *n); }
int32_t tli_ir_add_param(tli_ir *ir, const tli_param *n) { return VEC_PUSH(ir->p, *n); }
int32_t tli_ir_add_region(tli_ir *ir, const tli_rnode *n) { return VEC_PUSH(ir->r, *n); }

int32_t tli_ir_add_indices(tli_ir *ir, const int32_t *ids, int count)
{
    int32_t start = ir->pool.n;
    for (int i = 0; i < count; i++)
        if (!VEC_PUSH(ir->pool, ids[i]))
            return -1;
    return start;
}

int32_t tli_ir_add_str(tli_ir *ir, const char *s)
{
    int32_t start = ir->str.n; /* >= 1: entry 0 is the empty string */
    size_t n = strlen(s);
    for (size_t i = 0; i <= n; i++)
        if (!VEC_PUSH(ir->str, s[i])) {
            ir->str.n = start;
            return -1;
        }
    return start;
}

int tli_eop_arity(tli_eop op)
{
    if (op >= E_ADD && op <= E_OR)
        return 2;
    if (op >= E_NEG && op <= E_ERF)
        return 1;
    if (op == E_SELECT)
        return 3;
    if (op == E_BLOCK_VALUE)
        return 1;
    return 0;
}

const char *tli_eop_name(tli_eop op)
{
    static const char *const names[E_COUNT] = {
        [E_NONE] = "none", [E_CONST_INT] = "int", [E_CONST_FLOAT] = "float",
        [E_PARAM] = "param", [E_BLOCK_IDX] = "block_idx", [E_LOOP_VAR] = "loop_var",
        [E_ADD] = "add", [E_SUB] = "sub", [E_MUL] = "mul", [E_DIV] = "div",
        [E_MOD] = "mod", [E_CEILDIV] = "ceildiv", [E_MAX] = "max", [E_MIN] = "min",
        [E_LT] = "lt", [E_LE] = "le", [E_GT] = "gt", [E_GE] = "ge", [E_EQ] = "eq",
        [E_NE] = "ne", [E_AND] = "and", [E_OR] = "or", [E_NEG] = "neg", [E_ABS] = "abs",
        [E_NOT] = "not", [E_CAST] = "cast", [E_EXP] = "exp", [E_EXP2] = "exp2",
        [E_LOG] = "log", [E_SQRT] = "sqrt", [E_RSQRT] = "rsqrt", [E_TANH] = "tanh",
        [E_ERF] = "erf", [E_SELECT] = "select", [E_LOAD] = "load", [E_BLOCK_VALUE] = "block_value",
        [E_LET] = "let", [E_THREAD] = "thread",
    };
    return (op < E_COUNT && names[op]) ? names[op] : "?";
}

static bool uses_var(const tli_ir *ir, int32_t e, int32_t loop, int dim, int *look)
{
    const tli_enode *n = tli_E(ir, e);
    if (n->op == E_LOOP_VAR)
        return n->loop == loop && n->ival == dim;
    /* Values built outside the loop cannot mention its variables. */
    if (n->scope == 0)
        return false;
    if (--*look < 0)
        return true;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        if (uses_var(ir, n->a[i], loop, dim, look))
            return true;
    if (n->op == E_LOAD) {
        int rank = tli_B(ir, n->buf)->rank;
        for (int d = 0; d < rank; d++)
            if (uses_var(ir, ir->pool.v[n->idx + d], loop, dim, look))
                return true;
    }
    return false;
}

bool tli_expr_uses_var(const tli_ir *ir, int32_t e, int32_t loop, int dim)
{
    int look = TLI_EXPR_LOOK;
    return uses_var(ir, e, loop, dim, &look);
}

bool tli_expr_const_int(const tli_ir *ir, int32_t e, int64_t *v)
{
    const tli_enode *n = tli_E(ir, e);
    if (n->op != E_CONST_INT)
        return false;
    *v = n->ival;
    return true;
}

/* Interval arithmetic on integer expressions. Bounds stay within +-2^40 so
 * that sums and products of two of them cannot overflow; anything larger
 * (or not understood) is "unknown". */
#define RANGE_LIMIT ((int64_t)1 << 40)

static bool range_ok(int64_t lo, int64_t hi) { return lo >= -RANGE_LIMIT && hi <= RANGE_LIMIT && lo <= hi; }

static int64_t min4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t m = a < b ? a : b;
    m = m < c ? m : c;
    return m < d ? m : d;
}

static int64_t max4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t m = a > b ? a : b;
    m = m > c ? m : c;
    return m > d ? m : d;
}

static bool range_of(const tli_ir *ir, int32_t e, int64_t *lo, int64_t *hi, int *look)
{
    const tli_enode *n = tli_E(ir, e);
    if ((!tli_dtype_is_int((tl_dtype)n->dtype) && n->op != E_CAST) || --*look < 0)
        return false;
    int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    switch ((tli_eop)n->op) {
    case E_CONST_INT: *lo = *hi = n->ival; break;
    case E_LOOP_VAR: {
        const tli_snode *s = tli_S(ir, n->loop);
        if (s->op == S_PARALLEL) {
            *lo = 0;
            *hi = s->extents[n->ival] - 1;
        } else if ((s->op == S_SERIAL || s->op == S_PIPELINED) && range_of(ir, s->a0, &a0, &a1, look)) {
            *lo = 0; /* the variable runs over [0, extent) */
            *hi = a1 - 1;
        } else
            return false;
        break;
    }
    case E_CAST:
        if (!tli_dtype_is_int((tl_dtype)n->dtype) || !tli_dtype_is_int((tl_dtype)tli_E(ir, n->a[0])->dtype))
            return false;
        return range_of(ir, n->a[0], lo, hi, look) && (n->dtype == TL_I64 || (*lo >= INT32_MIN && *hi <= INT32_MAX));
    case E_ADD: case E_SUB: case E_MUL: case E_DIV: case E_MOD: case E_MAX: case E_MIN:
        if (!range_of(ir, n->a[0], &a0, &a1, look) || !range_of(ir, n->a[1], &b0, &b1, look))
            return false;
        switch ((tli_eop)n->op) {
        case E_ADD: *lo = a0 + b0; *hi = a1 + b1; break;
        case E_SUB: *lo = a0 - b1; *hi = a1 - b0; break;
        case E_MUL: {
            int64_t am = a1 > -a0 ? a1 : -a0, bm = b1 > -b0 ? b1 : -b0;
            if ((double)am * (double)bm > (double)RANGE_LIMIT)
                return false;
            *lo = min4(a0 * b0, a0 * b1, a1 * b0, a1 * b1);
            *hi = max4(a0 * b0, a0 * b1, a1 * b0, a1 * b1);
            break;
        }
        case E_DIV: /* a non-negative value over a positive constant */
            if (b0 != b1 || b0 <= 0 || a0 < 0)
                return false;
            *lo = a0 / b0;
            *hi = a1 / b0;
            break;
        case E_MOD: /* a non-negative value modulo a positive constant */
            if (b0 != b1 || b0 <= 0 || a0 < 0)
                return false;
            *lo = a1 < b0 ? a0 : 0;
            *hi = a1 < b0 ? a1 : b0 - 1;
            break;
        case E_MAX: *lo = a0 > b0 ? a0 : b0; *hi = a1 > b1 ? a1 : b1; break;
        default: *lo = a0 < b0 ? a0 : b0; *hi = a1 < b1 ? a1 : b1; break; /* E_MIN */
        }
        break;
    default: return false;
    }
    return range_ok(*lo, *hi);
}

bool tli_expr_range(const tli_ir *ir, int32_t e, int64_t *lo, int64_t *hi)
{
    int look = TLI_EXPR_LOOK;
    return range_of(ir, e, lo, hi, &look);
}
