/*
 * emit_cuda.c - lowers a verified kernel graph to CUDA C.
 *
 * The output includes only "tl_device.cuh" (the library's embedded device
 * runtime) and is meant to be read: one extern "C" kernel, tensor shapes and
 * strides named after their tensors, loops named after their statements,
 * a comment on every lowered loop saying how it was mapped onto threads.
 */
#include "emit.h"
#include "emit_internal.h"

#include "half.h"
#include "lower.h"
#include "sha256.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* ------------------------------------------------------------ strings */

char *tli_e_keep(emitter *E, char *s)
{
    if (!s) {
        E->oom = true;
        return "";
    }
    if (E->nstrs == E->capstrs) {
        int cap = E->capstrs ? E->capstrs * 2 : 256;
        char **n = realloc(E->strs, (size_t)cap * sizeof *n);
        if (!n) {
            free(s);
            E->oom = true;
            return "";
        }
        E->strs = n;
        E->capstrs = cap;
    }
    E->strs[E->nstrs++] = s;
    return s;
}

char *tli_e_fmt(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
char *tli_e_fmt(emitter *E, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tli_str s;
    tli_str_init(&s);
    tli_str_vappendf(&s, fmt, ap);
    va_end(ap);
    return tli_e_keep(E, tli_str_take(&s));
}

void tli_e_line(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
void tli_e_line(emitter *E, const char *fmt, ...)
{
    for (int i = 0; i < E->indent; i++)
        tli_str_append(&E->out, "    ");
    va_list ap;
    va_start(ap, fmt);
    tli_str_vappendf(&E->out, fmt, ap);
    va_end(ap);
    tli_str_append(&E->out, "\n");
}

const char *tli_dtype_ctype(tl_dtype dt)
{
    switch (dt) {
    case TL_F32: return "float";
    case TL_F16: return "tl_f16";
    case TL_BF16: return "tl_bf16";
    case TL_I32: return "int";
    case TL_I64: return "long long";
    case TL_F64: return "double";
    case TL_BOOL: return "bool";
    default: return "void";
    }
}

static bool is_half(tl_dtype dt) { return dt == TL_F16 || dt == TL_BF16; }

/* ---------------------------------------------------------- constants */

static char *float_literal(emitter *E, double v, tl_dtype dt)
{
    if (is_half(dt)) {
        uint16_t bits;
        tli_store_from_double(dt, &bits, 0, v);
        return tli_e_fmt(E, "%s(0x%04Xu) /* %g */", dt == TL_F16 ? "tl_f16_bits" : "tl_bf16_bits", bits, v);
    }
    if (isnan(v))
        return tli_e_fmt(E, dt == TL_F64 ? "__longlong_as_double(0x7ff8000000000000LL)" : "__int_as_float(0x7fffffff)");
    if (isinf(v))
        return tli_e_fmt(E, dt == TL_F64 ? "__longlong_as_double(0x%s)" : "__int_as_float(0x%s)",
                    dt == TL_F64 ? (v > 0 ? "7ff0000000000000LL" : "fff0000000000000LL")
                                 : (v > 0 ? "7f800000" : "ff800000"));
    char buf[64];
    tli_fmt(buf, sizeof buf, dt == TL_F64 ? "%.17g" : "%.9g", dt == TL_F64 ? v : (double)(float)v);
    if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    return tli_e_fmt(E, "%s%s", buf, dt == TL_F64 ? "" : "f");
}

/* -------------------------------------------------------- expressions */

const char *tli_e_expr(emitter *E, int32_t id);

/* The name the parameter, tensor or loop variable has in the source. */
static const char *param_name(emitter *E, int32_t p) { return E->ir->p.v[p].name; }

/* The device function computing op; fast: the approximate f32 form
 * (tl_use_fast_math), for the functions that have one. */
static const char *math_fn(tli_eop op, bool dbl, bool fast)
{
    if (fast && !dbl)
        switch (op) {
        case E_EXP: return "tl_exp_approx";
        case E_EXP2: return "tl_exp2_approx";
        case E_LOG: return "tl_log_approx";
        case E_TANH: return "tl_tanh_approx";
        case E_ERF: return "tl_erf_approx";
        default: break;
        }
    switch (op) {
    case E_EXP: return dbl ? "exp" : "expf";
    case E_EXP2: return dbl ? "exp2" : "exp2f";
    case E_LOG: return dbl ? "log" : "logf";
    case E_SQRT: return dbl ? "sqrt" : "sqrtf";
    case E_RSQRT: return dbl ? "rsqrt" : "rsqrtf";
    case E_TANH: return dbl ? "tanh" : "tanhf";
    case E_ERF: return dbl ? "erf" : "erff";
    case E_ABS: return dbl ? "fabs" : "fabsf";
    case E_MAX: return dbl ? "fmax" : "fmaxf";
    case E_MIN: return dbl ? "fmin" : "fminf";
    default: return "?";
    }
}

static const char *infix(tli_eop op)
{
    switch (op) {
    case E_ADD: return "+";
    case E_SUB: return "-";
    case E_MUL: return "*";
    case E_DIV: return "/";
    case E_MOD: return "%";
    case E_LT: return "<";
    case E_LE: return "<=";
    case E_GT: return ">";
    case E_GE: return ">=";
    case E_EQ: return "==";
    case E_NE: return "!=";
    case E_AND: return "&&";
    case E_OR: return "||";
    default: return NULL;
    }
}

/* Wraps an f32 computation back into a 16-bit type. */
static char *round_to(emitter *E, tl_dtype dt, const char *f32)
{
    return tli_e_fmt(E, "%s(%s)", dt == TL_F16 ? "tl_to_f16" : "tl_to_bf16", f32);
}

static char *cast_text(emitter *E, const char *x, tl_dtype from, tl_dtype to)
{
    if (is_half(from)) {
        x = tli_e_fmt(E, "tl_f32(%s)", x);
        from = TL_F32;
        if (to == TL_F32)
            return (char *)x;
    }
    if (is_half(to))
        return round_to(E, to, from == TL_F64 ? x : tli_e_fmt(E, "(float)(%s)", x));
    return tli_e_fmt(E, "(%s)(%s)", tli_dtype_ctype(to), x);
}

static char *binary_text(emitter *E, const tli_enode *n)
{
    tl_dtype at = (tl_dtype)tli_E(E->ir, n->a[0])->dtype;
    const char *a = tli_e_expr(E, n->a[0]), *b = tli_e_expr(E, n->a[1]);
    tli_eop op = (tli_eop)n->op;
    if (is_half(at)) {
        a = tli_e_fmt(E, "tl_f32(%s)", a);
        b = tli_e_fmt(E, "tl_f32(%s)", b);
    }
    char *r;
    if (op == E_CEILDIV)
        r = tli_e_fmt(E, "((%s + %s - 1) / %s)", a, b, b);
    else if (op == E_MAX || op == E_MIN)
        r = tli_dtype_is_int(at) ? tli_e_fmt(E, "tl_%s(%s, %s)", op == E_MAX ? "max" : "min", a, b)
                                 : tli_e_fmt(E, "%s(%s, %s)", math_fn(op, at == TL_F64, false), a, b);
    else if (op == E_DIV && E->ir->fast_math && (at == TL_F32 || is_half(at)))
        r = tli_e_fmt(E, "tl_div_approx(%s, %s)", a, b);
    else
        r = tli_e_fmt(E, "(%s %s %s)", a, infix(op), b);
    bool arith = !(op >= E_LT && op <= E_OR);
    return (is_half(at) && arith) ? round_to(E, at, r) : r;
}

static char *unary_text(emitter *E, const tli_enode *n)
{
    tl_dtype dt = (tl_dtype)n->dtype, at = (tl_dtype)tli_E(E->ir, n->a[0])->dtype;
    const char *a = tli_e_expr(E, n->a[0]);
    tli_eop op = (tli_eop)n->op;
    if (op == E_CAST)
        return cast_text(E, a, at, dt);
    if (op == E_NOT)
        return tli_e_fmt(E, "(!%s)", a);
    if (tli_dtype_is_int(dt))
        return op == E_NEG ? tli_e_fmt(E, "(-%s)", a) : tli_e_fmt(E, "tl_iabs(%s)", a);
    if (is_half(dt))
        a = tli_e_fmt(E, "tl_f32(%s)", a);
    char *r = op == E_NEG ? tli_e_fmt(E, "(-%s)", a) : tli_e_fmt(E, "%s(%s)", math_fn(op, dt == TL_F64, E->ir->fast_math), a);
    return is_half(dt) ? round_to(E, dt, r) : r;
}

/* Offset and in-bounds test of a tensor access, given index texts. */
void tli_e_global_access(emitter *E, int32_t buf, const char *const *idx, char **off, char **ok)
{
    const tli_bnode *b = tli_B(E->ir, buf);
    tli_str o, c;
    tli_str_init(&o);
    tli_str_init(&c);
    for (int d = 0; d < b->rank; d++) {
        int64_t st;
        bool unit = tli_expr_const_int(E->ir, b->stride[d], &st) && st == 1;
        if (unit)
            tli_str_appendf(&o, "%s%s", d ? " + " : "", idx[d]);
        else /* index texts need not be parenthesised: they may be sums */
            tli_str_appendf(&o, "%s(%s) * %s_s%d", d ? " + " : "", idx[d], b->name, d);
        tli_str_appendf(&c, "%stl_in(%s, %s_d%d)", d ? " && " : "", idx[d], b->name, d);
    }
    *off = tli_e_keep(E, tli_str_take(&o));
    *ok = tli_e_keep(E, tli_str_take(&c));
}

static void index_texts(emitter *E, int32_t buf, int32_t idx, const char **out)
{
    for (int d = 0; d < tli_B(E->ir, buf)->rank; d++)
        out[d] = tli_e_expr(E, E->ir->pool.v[idx + d]);
}

static char *load_text(emitter *E, const tli_enode *n)
{
    const char *idx[TL_MAX_RANK];
    char *off, *ok;
    index_texts(E, n->buf, n->idx, idx);
    tli_e_global_access(E, n->buf, idx, &off, &ok);
    return tli_e_fmt(E, "tl_ld(%s + (%s), %s)", tli_B(E->ir, n->buf)->name, off, ok);
}

static char *expr_text(emitter *E, int32_t id)
{
    const tli_enode *n = tli_E(E->ir, id);
    switch ((tli_eop)n->op) {
    case E_CONST_INT:
        return n->dtype == TL_I32 ? tli_e_fmt(E, "%d", (int)n->ival) : tli_e_fmt(E, "%lldLL", (long long)n->ival);
    case E_CONST_FLOAT: return float_literal(E, n->fval, (tl_dtype)n->dtype);
    case E_PARAM: return (char *)param_name(E, n->param);
    case E_BLOCK_IDX: return tli_e_fmt(E, "tl_b%c", "xyz"[n->ival]);
    case E_LOOP_VAR:
        if (E->var_text[id])
            return E->var_text[id];
        return tli_e_fmt(E, "i%d_%d", n->loop, (int)n->ival);
    case E_LOAD:
        if (E->load_text[id])
            return E->load_text[id];
        return tli_B(E->ir, n->buf)->scope == B_GLOBAL ? load_text(E, n) : tli_e_tile_load(E, n);
    case E_SELECT:
        return tli_e_fmt(E, "(%s ? %s : %s)", tli_e_expr(E, n->a[0]), tli_e_expr(E, n->a[1]), tli_e_expr(E, n->a[2]));
    default:
        return tli_eop_arity((tli_eop)n->op) == 2 ? binary_text(E, n) : unary_text(E, n);
    }
}

static bool is_leaf(const tli_enode *n)
{
    return n->op == E_CONST_INT || n->op == E_CONST_FLOAT || n->op == E_PARAM ||
           n->op == E_BLOCK_IDX || n->op == E_LOOP_VAR;
}

/* The text of expression id; a subexpression used more than once in the
 * statement becomes a named temporary declared just before it. */
const char *tli_e_expr(emitter *E, int32_t id)
{
    const tli_enode *n = tli_E(E->ir, id);
    if (E->temp[id])
        return E->temp[id];
    if (E->load_text[id] || is_leaf(n) || E->uses[id] < 2 || !E->pre)
        return expr_text(E, id);
    char *text = expr_text(E, id);
    /* every temporary gets a fresh name: statements share scopes */
    char *name = tli_e_fmt(E, "t%d", ++E->ntemp);
    for (int i = 0; i < E->indent; i++)
        tli_str_append(E->pre, "    ");
    tli_str_appendf(E->pre, "const %s %s = %s;\n", tli_dtype_ctype((tl_dtype)n->dtype), name, text);
    E->temp[id] = name;
    return name;
}

/* Counts how often each node is reached from expression id (first visit
 * recurses), to find the shared subexpressions. */
static void count_uses(emitter *E, int32_t id)
{
    if (E->uses[id]++ > 0)
        return;
    const tli_enode *n = tli_E(E->ir, id);
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        count_uses(E, n->a[i]);
    if (n->op == E_LOAD && !E->load_text[id])
        for (int d = 0; d < tli_B(E->ir, n->buf)->rank; d++)
            count_uses(E, E->ir->pool.v[n->idx + d]);
}

static void reset_temps(emitter *E)
{
    memset(E->uses, 0, sizeof(int) * (size_t)E->ir->e.n);
    memset(E->temp, 0, sizeof(char *) * (size_t)E->ir->e.n);
}

/* Prepares temporaries for the expressions of one statement: exprs[0..n). */
static void begin_statement(emitter *E, const int32_t *exprs, int n, tli_str *pre)
{
    reset_temps(E);
    for (int i = 0; i < n; i++)
        count_uses(E, exprs[i]);
    E->pre = pre;
}

/* Flushes the temporaries declared for a statement into the output. */
static void flush_pre(emitter *E, tli_str *pre)
{
    if (pre->len)
        tli_str_append(&E->out, pre->data);
    tli_str_free(pre);
    E->pre = NULL;
}

/* --------------------------------------------------------- statements */

void tli_e_stmts(emitter *E, int32_t first);

static int store_exprs(const tli_ir *ir, const tli_snode *s, int32_t *out)
{
    int rank = tli_B(ir, s->buf)->rank, n = 0;
    for (int d = 0; d < rank; d++)
        out[n++] = ir->pool.v[s->idx + d];
    out[n++] = s->value;
    return n;
}

/*   if (tl_in(i, C_d0)) C[i] = value;   (by thread 0 alone outside loops) */
static void emit_store(emitter *E, const tli_snode *s)
{
    int32_t ex[TL_MAX_RANK + 1];
    int n = store_exprs(E->ir, s, ex);
    tli_str pre;
    tli_str_init(&pre);
    begin_statement(E, ex, n, &pre);
    const char *idx[TL_MAX_RANK];
    index_texts(E, s->buf, s->idx, idx);
    const char *val = tli_e_expr(E, s->value);
    flush_pre(E, &pre);
    if (tli_B(E->ir, s->buf)->scope != B_GLOBAL) {
        tli_e_tile_store(E, s, val, idx);
        return;
    }
    char *off, *ok;
    tli_e_global_access(E, s->buf, idx, &off, &ok);
    const char *who = E->inside_parallel ? "" : "tl_tid == 0 && ";
    tli_e_line(E, "if (%s%s) %s[%s] = %s;", who, ok, tli_B(E->ir, s->buf)->name, off, val);
}

const char *tli_e_single(emitter *E, int32_t id)
{
    tli_str pre;
    tli_str_init(&pre);
    begin_statement(E, &id, 1, &pre);
    const char *t = tli_e_expr(E, id);
    flush_pre(E, &pre);
    return t;
}

/*   for (long long iS_0 = 0; iS_0 < extent; ++iS_0) { ... } */
static void emit_serial(emitter *E, int32_t sid, const tli_snode *s)
{
    const char *ext = tli_e_single(E, s->a0);
    tli_e_line(E, "for (long long i%d_0 = 0; i%d_0 < %s; ++i%d_0) {", sid, sid, ext, sid);
    E->indent++;
    tli_e_stmts(E, s->body);
    /* The next iteration may read what this one stored: a barrier at the end
     * of the body too (the loop is uniform over the block here). */
    if (!E->inside_parallel && tli_stmt_stores(E->ir, sid))
        tli_e_sync(E);
    E->indent--;
    tli_e_line(E, "}");
}

static void emit_if(emitter *E, const tli_snode *s)
{
    tli_e_line(E, "if (%s) {", tli_e_single(E, s->a0));
    E->indent++;
    tli_e_stmts(E, s->body);
    E->indent--;
    if (s->orelse) {
        tli_e_line(E, "} else {");
        E->indent++;
        tli_e_stmts(E, s->orelse);
        E->indent--;
    }
    tli_e_line(E, "}");
}

/* Declares the loop variables of parallel loop sid for flat index `flat`
 * (text), naming them i<sid>_<d><suffix>. */
void tli_e_decompose(emitter *E, int32_t sid, const char *flat, const char *suffix)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int64_t inner = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        const char *q = inner == 1 ? flat : tli_e_fmt(E, "(%s / %lldLL)", flat, (long long)inner);
        if (d > 0)
            tli_e_line(E, "const long long i%d_%d%s = %s %% %lldLL;", sid, d, suffix, q, (long long)s->extents[d]);
        else
            tli_e_line(E, "const long long i%d_%d%s = %s;", sid, d, suffix, q);
        inner *= s->extents[d];
    }
}

/*   for (long long tl_f = tl_tid; tl_f < TOTAL; tl_f += THREADS) { ... } */
static void emit_parallel_scalar(emitter *E, int32_t sid, const tli_par_plan *p, int threads)
{
    const tli_snode *s = tli_S(E->ir, sid);
    if (p->per_thread <= 16)
        tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (long long tl_f%d = tl_tid; tl_f%d < %lldLL; tl_f%d += %d) {", sid, sid,
         (long long)p->total, sid, threads);
    E->indent++;
    tli_e_decompose(E, sid, tli_e_fmt(E, "tl_f%d", sid), "");
    tli_e_stmts(E, s->body);
    E->indent--;
    tli_e_line(E, "}");
}

/* Index texts of an access for one lane of chunk u: the last loop variable
 * becomes (i<sid>_<last>_c<u> + lane). */
static void set_lane_vars(emitter *E, int32_t sid, int u, int lane)
{
    const tli_snode *s = tli_S(E->ir, sid);
    for (int d = 0; d < s->rank; d++) {
        int32_t v = s->vars[d];
        bool last = d == s->rank - 1;
        E->var_text[v] = (last && lane > 0) ? tli_e_fmt(E, "(i%d_%d_c%d + %d)", sid, d, u, lane)
                                            : tli_e_fmt(E, "i%d_%d_c%d", sid, d, u);
    }
}

/* Arguments of tl_ld_chunk / tl_st_chunk for an access whose lane-0
 * indices are idx:  base, stride, i, n, ok  (see tl_device.cuh). */
static char *chunk_args(emitter *E, int32_t buf, const char **idx, const char *live)
{
    const tli_bnode *b = tli_B(E->ir, buf);
    int last = b->rank - 1;
    char *off, *ok;
    tli_e_global_access(E, buf, idx, &off, &ok);
    int64_t st;
    bool unit = tli_expr_const_int(E->ir, b->stride[last], &st) && st == 1;
    tli_str c;
    tli_str_init(&c);
    tli_str_appendf(&c, "%s + (%s), %s, %s, %s_d%d, ", b->name, off,
                    unit ? "1" : tli_e_fmt(E, "%s_s%d", b->name, last), idx[last], b->name, last);
    tli_str_append(&c, live ? live : "true");
    for (int d = 0; d < last; d++)
        tli_str_appendf(&c, " && tl_in(%s, %s_d%d)", idx[d], b->name, d);
    return tli_e_keep(E, tli_str_take(&c));
}

/* Collects the loads of parallel loop sid that load whole chunks. */
static void collect_vector_loads(emitter *E, int32_t sid, int32_t e, int lanes, int32_t *list, int *n, int max)
{
    const tli_enode *nd = tli_E(E->ir, e);
    if (nd->scope == 0)
        return;
    for (int i = 0; i < tli_eop_arity((tli_eop)nd->op); i++)
        collect_vector_loads(E, sid, nd->a[i], lanes, list, n, max);
    if (nd->op != E_LOAD || !tli_access_vectorizable(E->ir, sid, nd->buf, nd->idx, lanes, true))
        return;
    for (int i = 0; i < *n; i++)
        if (list[i] == e)
            return;
    if (*n < max)
        list[(*n)++] = e;
}

#define MAX_VLOADS 32

/*   tl_vec<float, 4> L7_c0;
 *   tl_ld_chunk(L7_c0, A + (off), 1, i, A_d0, tl_live_c0);   one chunk of a load */
static void emit_chunk_loads(emitter *E, int32_t sid, int u, const int32_t *loads, int nloads, int lanes,
                             bool need_live)
{
    const char *live = need_live ? tli_e_fmt(E, "tl_live_c%d", u) : NULL;
    set_lane_vars(E, sid, u, 0);
    reset_temps(E);
    E->pre = NULL;
    for (int i = 0; i < nloads; i++) {
        const tli_enode *n = tli_E(E->ir, loads[i]);
        const tli_bnode *b = tli_B(E->ir, n->buf);
        const char *vname = tli_e_fmt(E, "L%d_c%d", loads[i], u);
        const char *idx[TL_MAX_RANK];
        index_texts(E, n->buf, n->idx, idx);
        tli_e_line(E, "tl_vec<%s, %d> %s;", tli_dtype_ctype((tl_dtype)b->dtype), lanes, vname);
        tli_e_line(E, "tl_ld_chunk(%s, %s);", vname, chunk_args(E, n->buf, idx, live));
    }
}

/* Values of store st for every lane of chunk u, then one chunk store (or,
 * for an access that cannot move whole chunks, lane-by-lane stores). */
static void emit_chunk_store(emitter *E, int32_t sid, int u, const tli_snode *st, int lanes,
                             const int32_t *loads, int nloads)
{
    const tli_bnode *b = tli_B(E->ir, st->buf);
    int32_t ex[TL_MAX_RANK + 1];
    int nex = store_exprs(E->ir, st, ex);
    const char *sname = tli_e_fmt(E, "S%d_c%d", (int)(st - E->ir->s.v), u);
    tli_e_line(E, "tl_vec<%s, %d> %s;", tli_dtype_ctype((tl_dtype)b->dtype), lanes, sname);
    for (int v = 0; v < lanes; v++) {
        set_lane_vars(E, sid, u, v);
        for (int i = 0; i < nloads; i++)
            E->load_text[loads[i]] = tli_e_fmt(E, "L%d_c%d.e[%d]", loads[i], u, v);
        tli_str pre;
        tli_str_init(&pre);
        begin_statement(E, ex, nex, &pre);
        const char *val = tli_e_expr(E, st->value);
        flush_pre(E, &pre);
        tli_e_line(E, "%s.e[%d] = %s;", sname, v, val);
    }
    for (int i = 0; i < nloads; i++)
        E->load_text[loads[i]] = NULL;
    const char *idx[TL_MAX_RANK];
    char *off, *ok;
    reset_temps(E);
    E->pre = NULL;
    if (tli_access_vectorizable(E->ir, sid, st->buf, st->idx, lanes, false)) {
        set_lane_vars(E, sid, u, 0);
        index_texts(E, st->buf, st->idx, idx);
        tli_e_line(E, "tl_st_chunk(%s, %s);", chunk_args(E, st->buf, idx, NULL), sname);
        return;
    }
    for (int v = 0; v < lanes; v++) {
        set_lane_vars(E, sid, u, v);
        index_texts(E, st->buf, st->idx, idx);
        tli_e_global_access(E, st->buf, idx, &off, &ok);
        tli_e_line(E, "if (%s) %s[%s] = %s.e[%d];", ok, b->name, off, sname, v);
    }
}

static void emit_parallel_vector(emitter *E, int32_t sid, const tli_par_plan *p, int threads)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int32_t loads[MAX_VLOADS];
    int nloads = 0;
    for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next)
        collect_vector_loads(E, sid, tli_S(E->ir, st)->value, p->lanes, loads, &nloads, MAX_VLOADS);
    bool one_group = p->per_thread == p->group;
    if (!one_group) {
        tli_e_line(E, "#pragma unroll 1");
        tli_e_line(E, "for (long long tl_g = 0; tl_g < %lldLL; tl_g += %d) {", (long long)p->per_thread, p->group);
        E->indent++;
    }
    bool ragged_threads = p->chunks % threads != 0;
    bool ragged_groups = p->per_thread % p->group != 0;
    bool need_live = ragged_threads || ragged_groups;
    for (int u = 0; u < p->group; u++) {
        if (one_group)
            tli_e_line(E, "const long long tl_c%d = %dLL + tl_tid;", u, u * threads);
        else
            tli_e_line(E, "const long long tl_c%d = (tl_g + %d) * %dLL + tl_tid;", u, u, threads);
        if (need_live) {
            tli_str live;
            tli_str_init(&live);
            tli_str_append(&live, "true");
            if (ragged_groups)
                tli_str_appendf(&live, " && tl_g + %d < %lldLL", u, (long long)p->per_thread);
            if (ragged_threads)
                tli_str_appendf(&live, " && tl_c%d < %lldLL", u, (long long)p->chunks);
            tli_e_line(E, "const bool tl_live_c%d = %s;", u, live.data);
            tli_str_free(&live);
        }
        tli_e_decompose(E, sid, tli_e_fmt(E, "tl_c%d * %dLL", u, p->lanes), tli_e_fmt(E, "_c%d", u));
    }
    for (int u = 0; u < p->group; u++)
        emit_chunk_loads(E, sid, u, loads, nloads, p->lanes, need_live);
    for (int u = 0; u < p->group; u++) {
        if (need_live) {
            tli_e_line(E, "if (tl_live_c%d) {", u);
            E->indent++;
        }
        for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next)
            emit_chunk_store(E, sid, u, tli_S(E->ir, st), p->lanes, loads, nloads);
        if (need_live) {
            E->indent--;
            tli_e_line(E, "}");
        }
    }
    for (int d = 0; d < s->rank; d++)
        E->var_text[s->vars[d]] = NULL;
    if (!one_group) {
        E->indent--;
        tli_e_line(E, "}");
    }
}

static void emit_parallel(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    tli_par_plan p;
    tli_plan_parallel(E->ir, sid, E->ir->threads, &p);
    tli_str ext;
    tli_str_init(&ext);
    for (int d = 0; d < s->rank; d++)
        tli_str_appendf(&ext, "%s%lld", d ? ", " : "", (long long)s->extents[d]);
    if (p.vector)
        tli_e_line(E, "{ // tl_parallel [%s]: chunks of %d along the last axis, %lld per thread, %d loaded ahead",
             ext.data, p.lanes, (long long)p.per_thread, p.group);
    else
        tli_e_line(E, "{ // tl_parallel [%s]: one iteration at a time, %lld per thread", ext.data,
             (long long)p.per_thread);
    tli_str_free(&ext);
    E->indent++;
    E->inside_parallel = true;
    if (p.vector)
        emit_parallel_vector(E, sid, &p, E->ir->threads);
    else
        emit_parallel_scalar(E, sid, &p, E->ir->threads);
    E->inside_parallel = false;
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_sync(emitter *E)
{
    if (E->pingpong)
        tli_e_line(E, "tl_wg_sync(tl_wg);");
    else
        tli_e_line(E, "__syncthreads();");
}

/* A body. Outside tl_parallel, a statement that stores is followed by a
 * block barrier when more statements come, so that every thread sees its
 * stores (conditions there are uniform over the block, so this is safe);
 * emit_serial adds one at the end of a loop body that stores. A standalone
 * cp.async copy into shared memory is waited for (wait, barrier) just
 * before the first later statement of the body that touches its buffer,
 * or at the end of the body. */
void tli_e_stmts(emitter *E, int32_t first)
{
    const int base = E->npending; /* copies of this body start here */
    bool barrier = false;          /* the previous statement needs one */
    for (int32_t sid = first; sid; sid = tli_S(E->ir, sid)->next) {
        const tli_snode *s = tli_S(E->ir, sid);
        bool touched = false;
        for (int i = base; i < E->npending && !touched; i++)
            touched = tli_stmt_uses_buf(E->ir, sid, E->pending[i]);
        if (touched) /* its barrier serves the previous statement too */
            tli_e_flush_pending(E, base);
        else if (barrier)
            tli_e_sync(E);
        const int before = E->npending;
        switch ((tli_sop)s->op) {
        case S_STORE: emit_store(E, s); break;
        case S_SERIAL: emit_serial(E, sid, s); break;
        case S_IF: emit_if(E, s); break;
        case S_PARALLEL:
            if (!tli_e_frag_parallel(E, sid))
                emit_parallel(E, sid);
            break;
        case S_COPY: tli_e_copy(E, sid); break;
        case S_FILL: tli_e_fill(E, sid); break;
        case S_GEMM: tli_e_gemm(E, sid); break;
        case S_PIPELINED: tli_e_pipelined(E, sid); break;
        default: break;
        }
        /* a deferred copy gets its barrier when it is waited for */
        barrier = !E->inside_parallel && s->next && tli_stmt_stores(E->ir, sid) && E->npending == before;
    }
    if (E->npending > base)
        tli_e_flush_pending(E, base);
}

/* ------------------------------------------------------------- kernel */

static void emit_signature_params(emitter *E, tli_str *sig)
{
    const tli_ir *ir = E->ir;
    for (int32_t i = 1; i < ir->p.n; i++) {
        const tli_param *p = &ir->p.v[i];
        const char *sep = i > 1 ? ", " : "";
        if (p->kind == TL_PARAM_TENSOR) {
            const tli_bnode *b = tli_B(ir, p->buf);
            tli_str_appendf(sig, "%s%s%s *%s", sep, b->written ? "" : "const ",
                            tli_dtype_ctype((tl_dtype)p->dtype), p->name);
        } else {
            tli_str_appendf(sig, "%s%s %s", sep, tli_dtype_ctype((tl_dtype)p->dtype), p->name);
        }
    }
}

/*   const long long A_d0 = N, A_s0 = 1LL;  (shape and strides of tensors) */
static void emit_tensor_meta(emitter *E)
{
    const tli_ir *ir = E->ir;
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        if (b->scope != B_GLOBAL)
            continue;
        for (int d = 0; d < b->rank; d++) {
            tli_e_line(E, "const long long %s_d%d = %s;", b->name, d, tli_e_single(E, b->shape[d]));
            int64_t st;
            if (!(tli_expr_const_int(ir, b->stride[d], &st) && st == 1))
                tli_e_line(E, "const long long %s_s%d = %s;", b->name, d, tli_e_single(E, b->stride[d]));
        }
    }
}

/* An expression as plain text, with no temporaries (for comments). */
static const char *plain_expr(emitter *E, int32_t id)
{
    reset_temps(E);
    E->pre = NULL;
    return tli_e_expr(E, id);
}

static void emit_comment_header(emitter *E, tli_str *h, const char *kname)
{
    const tli_ir *ir = E->ir;
    tli_str_appendf(h, "// Generated by libtilec %s for %s: kernel '%s'.\n", tl_version(), E->target, ir->name);
    tli_str_appendf(h, "// Launch: grid (");
    for (int i = 0; i < 3; i++)
        tli_str_appendf(h, "%s%s", i ? ", " : "", ir->grid[i] ? plain_expr(E, ir->grid[i]) : "1");
    if (ir->pingpong)
        tli_str_appendf(h, ") blocks of %d threads, run by min(ceil(blocks / 2), SMs) persistent CTAs of 384 "
                           "threads (tl_use_pingpong).\n// Arguments:", ir->threads);
    else
        tli_str_appendf(h, "), %d threads per block.\n// Arguments:", ir->threads);
    for (int32_t i = 1; i < ir->p.n; i++) {
        const tli_param *p = &ir->p.v[i];
        static const char *kinds[] = {"tensor", "dim", "scalar"};
        tli_str_appendf(h, "%s %s (%s %s)", i > 1 ? "," : "", p->name, tl_dtype_name((tl_dtype)p->dtype),
                        kinds[p->kind]);
    }
    if (E->plan.smem_bytes)
        tli_str_appendf(h, "\n// Shared memory: %lld bytes per block (dynamic)", (long long)E->plan.smem_bytes);
    tli_str_appendf(h, ".\n#include \"tl_device.cuh\"\n\n%s", E->helpers.data ? E->helpers.data : "");
    /* wgmma kernels: as many blocks per SM as their shared memory allows (at
     * most 2, so that one block's copies and barriers overlap the other's
     * tensor-core work); the register cap follows from it */
    int min_blocks = 0;
    if (E->plan.wgmma)
        min_blocks = E->plan.smem_bytes * 2 <= 227 * 1024 && ir->threads <= 512 ? 2 : 1;
    if (ir->pingpong) /* persistent: one CTA of three warpgroups per SM */
        tli_str_appendf(h, "extern \"C\" __global__ void __launch_bounds__(384, 1)\n%s(", kname);
    else if (min_blocks)
        tli_str_appendf(h, "extern \"C\" __global__ void __launch_bounds__(%d, %d)\n%s(", ir->threads, min_blocks,
                        kname);
    else
        tli_str_appendf(h, "extern \"C\" __global__ void __launch_bounds__(%d)\n%s(", ir->threads, kname);
}

static bool uses_block_axis(const tli_ir *ir, int axis)
{
    if (ir->swizzle && axis < 2)
        return false; /* tli_e_tile_prologue defines the remapped tl_bx, tl_by */
    for (int32_t i = 1; i < ir->e.n; i++)
        if (ir->e.v[i].op == E_BLOCK_IDX && ir->e.v[i].ival == axis)
            return true;
    return false;
}

static bool emitter_init(emitter *E, const tli_ir *ir, const char *target)
{
    memset(E, 0, sizeof *E);
    E->ir = ir;
    E->target = target;
    size_t n = (size_t)ir->e.n;
    E->var_text = calloc(n, sizeof(char *));
    E->stage = calloc((size_t)ir->b.n, sizeof(char *));
    E->load_text = calloc(n, sizeof(char *));
    E->temp = calloc(n, sizeof(char *));
    E->uses = calloc(n, sizeof(int));
    tli_str_init(&E->out);
    tli_str_init(&E->helpers);
    return E->var_text && E->load_text && E->temp && E->uses && E->stage;
}

static void emitter_free(emitter *E)
{
    for (int i = 0; i < E->nstrs; i++)
        free(E->strs[i]);
    free(E->strs);
    free(E->var_text);
    free(E->load_text);
    free(E->temp);
    free(E->uses);
    free(E->stage);
    tli_str_free(&E->helpers);
    tli_tile_plan_free(&E->plan);
    tli_str_free(&E->out);
}

tl_status tli_emit_cuda(const tli_ir *ir, const char *target, int64_t smem_limit, char **src, char *kname,
                        size_t kname_len, int64_t *smem_bytes, tli_tma_list *tma, char *err, size_t errlen)
{
    emitter E;
    *src = NULL;
    tma->n = 0;
    if (!emitter_init(&E, ir, target)) {
        emitter_free(&E);
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    if (ir->pingpong && strcmp(target, "sm_90a") != 0) { /* before the sizes: they are sm_90a's */
        emitter_free(&E);
        tli_fmt(err, errlen, "tl_use_pingpong: it needs the sm_90a target (wgmma, TMA, setmaxnreg), not %s", target);
        return TL_ERR_UNSUPPORTED;
    }
    tl_status st = tli_plan_tiles(ir, target, smem_limit, &E.plan, err, errlen);
    if (st != TL_OK) {
        emitter_free(&E);
        return st;
    }
    *smem_bytes = E.plan.smem_bytes;
    E.tma = tma;
    /* Body first: the kernel's name carries a hash of what it does. */
    E.indent = 1;
    char why[256];
    if (ir->pingpong && !tli_pingpong_ok(&E, why, sizeof why)) {
        tli_fmt(err, errlen, "tl_use_pingpong: %s", why);
        emitter_free(&E);
        return TL_ERR_UNSUPPORTED;
    }
    if (ir->pingpong) {
        /* three warpgroups; the block body sees its own warpgroup's threads */
        tli_e_line(&E, "const int tl_wg = threadIdx.x / 128, tl_tid = threadIdx.x %% 128;");
        emit_tensor_meta(&E);
        tli_e_tile_prologue(&E);
        tli_e_pingpong_body(&E);
    } else {
        tli_e_line(&E, "const int tl_tid = threadIdx.x;");
        for (int a = 0; a < 3; a++)
            if (uses_block_axis(ir, a))
                tli_e_line(&E, "const long long tl_b%c = blockIdx.%c;", "xyz"[a], "xyz"[a]);
        emit_tensor_meta(&E);
        tli_e_tile_prologue(&E);
        tli_e_stmts(&E, ir->body);
    }
    if (E.st != TL_OK) {
        tli_fmt(err, errlen, "%s", E.err);
        st = E.st;
        emitter_free(&E);
        return st;
    }
    tli_str sig;
    tli_str_init(&sig);
    emit_signature_params(&E, &sig);
    for (int i = 0; i < tma->n; i++)
        tli_str_appendf(&sig, ", const __grid_constant__ tl_tmap tl_map%d", i);
    if (tma->n)
        tli_str_append(&sig, ", int tl_tma");
    uint8_t h[32];
    tli_sha256 hs;
    tli_sha256_init(&hs);
    if (sig.data)
        tli_sha256_update(&hs, sig.data, sig.len);
    if (E.out.data)
        tli_sha256_update(&hs, E.out.data, E.out.len);
    tli_sha256_final(&hs, h);
    char hex[65];
    tli_hex(h, 4, hex);
    tli_fmt(kname, kname_len, "%s_%s", ir->name, hex);
    tli_str full;
    tli_str_init(&full);
    emit_comment_header(&E, &full, kname);
    tli_str_appendf(&full, "%s)\n{\n%s}\n", sig.data ? sig.data : "", E.out.data ? E.out.data : "");
    tli_str_free(&sig);
    bool oom = E.oom || E.out.oom || full.oom;
    emitter_free(&E);
    *src = tli_str_take(&full);
    if (oom || !*src) {
        free(*src);
        *src = NULL;
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    return TL_OK;
}
