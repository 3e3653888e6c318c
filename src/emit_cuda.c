/*
 * emit_cuda.c - prints a lowered kernel as CUDA C.
 *
 * The output includes only "tl_device.cuh" (the library's embedded device
 * runtime) and is meant to be read: one extern "C" kernel, buffers under
 * their names, every lowered loop with a comment saying how it maps onto
 * the threads. Every identifier the printer makes starts with "tl_", which
 * the builder refuses in user names, so generated names can never shadow a
 * user's. The printer decides nothing: barriers, waits, copy engines,
 * layouts and the launch shape all come from the passes.
 */
#include "emit.h"
#include "emit_internal.h"

#include "half.h"
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

char *tli_e_fmt(emitter *E, const char *fmt, ...)
{
    /* exactly as large as the text: the emitter keeps every one of them
     * until the end, a few per expression node */
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (s && (size_t)n < sizeof small) {
        memcpy(s, small, (size_t)n + 1);
    } else if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return tli_e_keep(E, s);
}

/* Frees the strings made since E->strs held `mark` of them. */
static void release_strs(emitter *E, int mark)
{
    while (E->nstrs > mark)
        free(E->strs[--E->nstrs]);
}

char *tli_e_take(emitter *E, tli_str *s)
{
    char *t = tli_str_take(s);
    char *fit = t ? realloc(t, strlen(t) + 1) : NULL; /* kept to the end: no spare room */
    return tli_e_keep(E, fit ? fit : t);
}

void tli_e_line(emitter *E, const char *fmt, ...)
{
    for (int i = 0; i < E->indent; i++)
        tli_str_append(&E->out, "    ");
    va_list ap;
    va_start(ap, fmt);
    tli_str_vappendf(&E->out, fmt, ap);
    va_end(ap);
    tli_str_append(&E->out, "\n");
    E->oom |= E->out.oom; /* latched: the emitter stops at its next expression or statement */
}

void tli_e_fail(emitter *E, const char *fmt, ...)
{
    if (E->st != TL_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(E->err, sizeof E->err, fmt, ap);
    va_end(ap);
    E->st = TL_ERR_INTERNAL;
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
    case TL_F8E4M3: return "tl_f8e4m3";
    case TL_F8E5M2: return "tl_f8e5m2";
    default: return "void";
    }
}

static bool is_number(const char *s, long long *v)
{
    char *end;
    long long x = strtoll(s, &end, 10);
    if (end == s || (*end && strcmp(end, "LL") != 0))
        return false;
    *v = x;
    return true;
}

const char *tli_e_add(emitter *E, const char *a, const char *b)
{
    long long x;
    if (is_number(b, &x) && x == 0)
        return a;
    if (is_number(a, &x) && x == 0)
        return b;
    return tli_e_fmt(E, "%s + %s", a, b);
}

const char *tli_e_mul(emitter *E, const char *a, int64_t k)
{
    long long x;
    if (k == 1)
        return a;
    if (k == 0 || (is_number(a, &x) && x == 0))
        return "0";
    return tli_e_fmt(E, "(%s) * %lld", a, (long long)k);
}

/* ------------------------------------------------------------- names */

const char *tli_e_buf(emitter *E, int32_t buf) { return tli_B(E->ir, buf)->name; }

const char *tli_e_dim(emitter *E, int32_t buf, int d) { return tli_e_fmt(E, "tl_%s_d%d", tli_e_buf(E, buf), d); }

const char *tli_e_stride(emitter *E, int32_t buf, int d)
{
    int64_t st;
    if (tli_expr_const_int(E->ir, tli_B(E->ir, buf)->stride[d], &st) && st == 1)
        return "1";
    return tli_e_fmt(E, "tl_%s_s%d", tli_e_buf(E, buf), d);
}

const char *tli_e_policy(emitter *E, int32_t buf)
{
    const tli_bnode *b = tli_B(E->ir, buf);
    return b->scope == B_GLOBAL && b->cache == TL_CACHE_EVICT_FIRST ? "_ef" : "";
}

/* The name of let statement s: its own, with the statement's id for names
 * that end in '#' (lets made once per pipeline or block). */
static const char *let_name(emitter *E, int32_t s)
{
    const char *n = tli_str_at(E->ir, tli_S(E->ir, s)->name);
    size_t len = strlen(n);
    if (len && n[len - 1] == '#')
        return tli_e_fmt(E, "%.*s%d", (int)(len - 1), n, s);
    return n;
}

static const char *thread_name(int v)
{
    static const char *const names[] = {[TH_TID] = "tl_tid",         [TH_WARP] = "tl_warp",    [TH_LANE] = "tl_lane",
                                        [TH_WG] = "tl_wg",           [TH_RAW_TID] = "threadIdx.x",
                                        [TH_RAW_BX] = "blockIdx.x",  [TH_RAW_BY] = "blockIdx.y",
                                        [TH_RAW_BZ] = "blockIdx.z",  [TH_GRID_X] = "gridDim.x",
                                        [TH_GRID_Y] = "gridDim.y",   [TH_TILE] = "tl_t",
                                        [TH_SK_J0] = "tl_j0",        [TH_SK_J1] = "tl_j1",
                                        [TH_SK_BASE] = "tl_sk_base", [TH_RUN] = "tl_run",
                                        [TH_RUN_BLOCKS] = "tl_run_blocks"};
    return v >= 0 && v <= TLI_TH_LAST ? names[v] : "?";
}

/* ---------------------------------------------------------- constants */

static char *float_literal(emitter *E, double v, tl_dtype dt)
{
    if (tli_dtype_is_f8(dt)) {
        uint8_t bits;
        tli_store_from_double(dt, &bits, 0, v);
        return tli_e_fmt(E, "tl_%s_bits(0x%02Xu) /* %g */", tl_dtype_name(dt), bits, v);
    }
    if (tli_dtype_is_narrow_float(dt)) {
        uint16_t bits;
        tli_store_from_double(dt, &bits, 0, v);
        return tli_e_fmt(E, "%s(0x%04Xu) /* %g */", dt == TL_F16 ? "tl_f16_bits" : "tl_bf16_bits", bits, v);
    }
    if (dt != TL_F64) /* the value the f32 literal has: one past FLT_MAX is an infinity */
        v = (double)(float)v;
    if (isnan(v))
        return tli_e_fmt(E, dt == TL_F64 ? "__longlong_as_double(0x7ff8000000000000LL)" : "__int_as_float(0x7fffffff)");
    if (isinf(v))
        return tli_e_fmt(E, dt == TL_F64 ? "__longlong_as_double(0x%s)" : "__int_as_float(0x%s)",
                         dt == TL_F64 ? (v > 0 ? "7ff0000000000000LL" : "fff0000000000000LL")
                                      : (v > 0 ? "7f800000" : "ff800000"));
    char buf[64];
    tli_fmt(buf, sizeof buf, dt == TL_F64 ? "%.17g" : "%.9g", v);
    if (!strpbrk(buf, ".en"))
        strcat(buf, ".0");
    return tli_e_fmt(E, "%s%s", buf, dt == TL_F64 ? "" : "f");
}

/* -------------------------------------------------------- expressions */

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
    return tli_e_fmt(E, "tl_to_%s(%s)", tl_dtype_name(dt), f32);
}

static char *cast_text(emitter *E, const char *x, tl_dtype from, tl_dtype to)
{
    if (tli_dtype_is_narrow_float(from)) {
        x = tli_e_fmt(E, "tl_f32(%s)", x);
        from = TL_F32;
        if (to == TL_F32)
            return (char *)x;
    }
    if (tli_dtype_is_narrow_float(to)) /* integers whole: through f32 they could round twice (tl_f32_odd) */
        return round_to(E, to, from == TL_F64 ? x : tli_e_fmt(E, from == TL_I32 || from == TL_I64 ? "(long long)(%s)" : "(float)(%s)", x));
    return tli_e_fmt(E, "(%s)(%s)", tli_dtype_ctype(to), x);
}

/* A comparison pass_threads marked run_mask, while the copy of a run loop
 * for runs that pass their masks is printed. */
static bool run_passed(const emitter *E, const tli_enode *n)
{
    return E->run_inside && n->op == E_LT && n->run_mask;
}

/* Whether node e prints as an in-tile coordinate declared int (VAR_INT). */
static bool is_int_var(const emitter *E, int32_t e)
{
    return tli_E(E->ir, e)->op == E_LOOP_VAR && E->var_int[e] == VAR_INT;
}

static char *binary_text(emitter *E, const tli_enode *n)
{
    tl_dtype at = (tl_dtype)tli_E(E->ir, n->a[0])->dtype;
    const char *a = tli_e_expr(E, n->a[0]), *b = tli_e_expr(E, n->a[1]);
    tli_eop op = (tli_eop)n->op;
    const tli_enode *x = tli_E(E->ir, n->a[0]);
    if (run_passed(E, n))
        return "true"; /* the run passed this comparison at its last column */
    if (op == E_LT && x->op == E_LOOP_VAR && E->var_int[n->a[0]] && at == TL_I64) /* a mask of an in-tile column */
        return tli_e_fmt(E, E->var_int[n->a[0]] == VAR_INT ? "tl_lt_i32(%s, %s)" : "tl_lt_i32((int)%s, %s)", a, b);
    if (at == TL_I64) { /* in-tile coordinates printed as int (run loops) in their IR type where C++ would not
                         * widen them: int with int (j * j wrapped at 2^31), tl_min / tl_max (one type) */
        bool ia = is_int_var(E, n->a[0]), ib = is_int_var(E, n->a[1]);
        bool widen = op == E_MAX || op == E_MIN || (ia && ib);
        if (widen && ia)
            a = tli_e_fmt(E, "((long long)%s)", a);
        if (widen && ib)
            b = tli_e_fmt(E, "((long long)%s)", b);
    }
    if (tli_dtype_is_narrow_float(at)) {
        a = tli_e_fmt(E, "tl_f32(%s)", a);
        b = tli_e_fmt(E, "tl_f32(%s)", b);
    }
    char *r;
    if (op == E_CEILDIV)
        r = tli_e_fmt(E, "((%s + %s - 1) / %s)", a, b, b);
    else if (op == E_MAX || op == E_MIN)
        r = tli_dtype_is_int(at) ? tli_e_fmt(E, "tl_%s(%s, %s)", op == E_MAX ? "max" : "min", a, b)
                                 : tli_e_fmt(E, "%s(%s, %s)", math_fn(op, at == TL_F64, false), a, b);
    else if (op == E_DIV && E->ir->fast_math && (at == TL_F32 || tli_dtype_is_narrow_float(at)))
        r = tli_e_fmt(E, "tl_div_approx(%s, %s)", a, b);
    else
        r = tli_e_fmt(E, "(%s %s %s)", a, infix(op), b);
    bool arith = !(op >= E_LT && op <= E_OR);
    return (tli_dtype_is_narrow_float(at) && arith) ? round_to(E, at, r) : r;
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
    /* (a negative literal negated: "-(-1.5f)", never "--1.5f", a decrement) */
    const char *neg = a[0] == '-' ? "(-(%s))" : "(-%s)";
    if (tli_dtype_is_int(dt))
        return op == E_NEG ? tli_e_fmt(E, neg, a) : tli_e_fmt(E, "tl_iabs(%s)", a);
    if (tli_dtype_is_narrow_float(dt))
        a = tli_e_fmt(E, "tl_f32(%s)", a);
    char *r = op == E_NEG ? tli_e_fmt(E, neg, a) : tli_e_fmt(E, "%s(%s)", math_fn(op, dt == TL_F64, E->ir->fast_math), a);
    return tli_dtype_is_narrow_float(dt) ? round_to(E, dt, r) : r;
}

void tli_e_global_access(emitter *E, int32_t buf, const char *const *idx, char **off, char **ok)
{
    const tli_bnode *b = tli_B(E->ir, buf);
    tli_str o, c;
    tli_str_init(&o);
    tli_str_init(&c);
    for (int d = 0; d < b->rank; d++) {
        const char *st = tli_e_stride(E, buf, d);
        if (strcmp(st, "1") == 0)
            tli_str_appendf(&o, "%s%s", d ? " + " : "", idx[d]);
        else /* index texts need not be parenthesised: they may be sums */
            tli_str_appendf(&o, "%s(%s) * %s", d ? " + " : "", idx[d], st);
        tli_str_appendf(&c, "%stl_in(%s, %s)", d ? " && " : "", idx[d], tli_e_dim(E, buf, d));
    }
    *off = tli_e_take(E, &o);
    *ok = tli_e_take(E, &c);
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
    return tli_e_fmt(E, "tl_ld(%s + (%s), %s)", tli_e_buf(E, n->buf), off, ok);
}

static const char *loop_var_name(emitter *E, const tli_enode *n)
{
    const tli_snode *l = tli_S(E->ir, n->loop);
    if (l->op == S_TILE_LOOP)
        return "tl_p";
    return l->rank > 1 ? tli_e_fmt(E, "tl_i%d_%d", n->loop, (int)n->ival) : tli_e_fmt(E, "tl_i%d", n->loop);
}

static char *expr_text(emitter *E, int32_t id)
{
    const tli_enode *n = tli_E(E->ir, id);
    switch ((tli_eop)n->op) {
    case E_CONST_INT: /* (the most negative values as expressions: C++ reads the literal 2147483648 as a long, and
                       * 9223372036854775808LL as unsigned) */
        if (n->dtype == TL_I32)
            return (int)n->ival == INT32_MIN ? "(-2147483647 - 1)" : tli_e_fmt(E, "%d", (int)n->ival);
        return n->ival == INT64_MIN ? "(-9223372036854775807LL - 1)" : tli_e_fmt(E, "%lldLL", (long long)n->ival);
    case E_CONST_FLOAT: return float_literal(E, n->fval, (tl_dtype)n->dtype);
    case E_PARAM: return E->ir->p.v[n->param].name;
    case E_BLOCK_IDX: return tli_e_fmt(E, "tl_b%c", "xyz"[n->ival]);
    case E_LOOP_VAR: return E->var_text[id] ? E->var_text[id] : (char *)loop_var_name(E, n);
    case E_LET: return (char *)let_name(E, n->loop);
    case E_BLOCK_VALUE: return (char *)tli_e_expr(E, n->a[0]); /* not made a let: the value itself */
    case E_THREAD: /* blockIdx and gridDim are unsigned: products of them in 64 bits */
        return n->dtype == TL_I64 && n->ival < TH_TILE ? tli_e_fmt(E, "(long long)%s", thread_name((int)n->ival))
                                                       : (char *)thread_name((int)n->ival);
    case E_LOAD:
        if (E->load_text[id])
            return E->load_text[id];
        return tli_B(E->ir, n->buf)->scope == B_GLOBAL ? load_text(E, n) : tli_e_tile_load(E, n);
    case E_SELECT: { /* operands in order (settle_all declares their temporaries so) */
        if (run_passed(E, tli_E(E->ir, n->a[0]))) /* a mask the run passed: its value */
            return (char *)tli_e_expr(E, n->a[1]);
        const char *c = tli_e_expr(E, n->a[0]), *a = tli_e_expr(E, n->a[1]), *b = tli_e_expr(E, n->a[2]);
        return tli_e_fmt(E, "(%s ? %s : %s)", c, a, b);
    }
    default:
        return tli_eop_arity((tli_eop)n->op) == 2 ? binary_text(E, n) : unary_text(E, n);
    }
}

static bool is_leaf(const tli_enode *n)
{
    return n->op == E_CONST_INT || n->op == E_CONST_FLOAT || n->op == E_PARAM || n->op == E_BLOCK_IDX ||
           n->op == E_LOOP_VAR || n->op == E_LET || n->op == E_THREAD;
}

static void touch(emitter *E, int32_t id)
{
    if (E->ntouched == E->captouched) {
        int32_t cap = E->captouched ? E->captouched * 2 : 256;
        int32_t *t = realloc(E->touched, (size_t)cap * sizeof *t);
        if (!t) {
            E->oom = true;
            return;
        }
        E->touched = t;
        E->captouched = cap;
    }
    E->touched[E->ntouched++] = id;
}

/* The operands whose texts the text of node id contains, in the order
 * expr_text prints them (a fragment's registers are found by the loop, not
 * by its indices). */
static int printed_operands(emitter *E, int32_t id, int32_t *ops)
{
    const tli_enode *n = tli_E(E->ir, id);
    if (is_leaf(n) || E->load_text[id])
        return 0;
    if (n->op != E_LOAD) {
        for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
            ops[i] = n->a[i];
        return tli_eop_arity((tli_eop)n->op);
    }
    const tli_bnode *b = tli_B(E->ir, n->buf);
    if (b->scope == B_FRAGMENT)
        return 0;
    for (int d = 0; d < b->rank; d++)
        ops[d] = E->ir->pool.v[n->idx + d];
    return b->rank;
}

/* Operators a text may nest before its subexpression becomes a temporary:
 * deeper than any expression written by hand, shallow enough that a chain
 * of any length costs text and stack in proportion to its length. */
#define MAX_NEST 64

/* Settles node id once its operands are: its nesting depth, and a `const`
 * temporary when it is used more than once in the statement or nests too
 * deep (declared in E->pre, before the statement). */
static void settle(emitter *E, int32_t id)
{
    const tli_enode *n = tli_E(E->ir, id);
    int32_t ops[TL_MAX_RANK > 3 ? TL_MAX_RANK : 3];
    int nops = printed_operands(E, id, ops);
    int64_t depth = 0;
    for (int i = 0; i < nops; i++) {
        int64_t d = E->temp[ops[i]] ? 1 : E->done.val[ops[i]] + 1;
        depth = d > depth ? d : depth;
    }
    tli_marks_set(&E->done, id);
    E->done.val[id] = depth;
    if (E->load_text[id] || is_leaf(n) || (E->uses[id] < 2 && depth < MAX_NEST))
        return;
    int mark = E->nstrs;
    E->printing++;
    char *text = expr_text(E, id);
    E->printing--;
    for (int i = 0; i < E->indent; i++)
        tli_str_append(E->pre, "    ");
    tli_str_appendf(E->pre, "const %s tl_t%d = %s;\n", tli_dtype_ctype((tl_dtype)n->dtype), ++E->ntemp, text);
    /* the text's pieces are single uses inside it: only the name is used
     * from now on, so a long chain keeps no more than MAX_NEST levels */
    release_strs(E, mark);
    E->temp[id] = tli_e_fmt(E, "tl_t%d", E->ntemp); /* fresh: statements share scopes */
}

static bool push_pending(emitter *E, int32_t id)
{
    if (E->npending == E->cappending) {
        int32_t cap = E->cappending ? E->cappending * 2 : 64;
        int32_t(*p)[2] = realloc(E->pending, (size_t)cap * sizeof *p);
        if (!p) {
            E->oom = true;
            return false;
        }
        E->pending = p;
        E->cappending = cap;
    }
    E->pending[E->npending][0] = id;
    E->pending[E->npending++][1] = 0; /* operands settled so far */
    return true;
}

/* Settles every node of the text of `root`, operands first, in the order
 * the text prints them: the temporaries come out as a recursive printer
 * would declare them, without recursion. */
static void settle_all(emitter *E, int32_t root)
{
    if (!push_pending(E, root))
        return;
    while (E->npending) {
        int32_t *top = E->pending[E->npending - 1], id = top[0];
        int32_t ops[TL_MAX_RANK > 3 ? TL_MAX_RANK : 3];
        int nops = printed_operands(E, id, ops);
        if (top[1] == 0 && (E->temp[id] || tli_marks_seen(&E->done, id))) {
            E->npending--; /* settled earlier in the statement */
            continue;
        }
        if (top[1] < nops) {
            int32_t next = ops[top[1]++];
            if (!E->temp[next] && !tli_marks_seen(&E->done, next) && !push_pending(E, next))
                return;
            continue;
        }
        E->npending--;
        settle(E, id);
    }
}

/* The text of expression id; a subexpression used more than once in the
 * statement (or nested too deep) is a named temporary declared before it. */
const char *tli_e_expr(emitter *E, int32_t id)
{
    if (E->oom)
        return ""; /* the source is lost: print nothing more */
    if (E->temp[id])
        return E->temp[id];
    if (E->pre && !E->printing) {
        settle_all(E, id);
        if (E->temp[id])
            return E->temp[id];
    }
    E->printing++;
    char *text = expr_text(E, id);
    E->printing--;
    return text;
}

/* Counts how often each node is reached from expression id (each node's
 * operands counted at its first visit) to find the shared subexpressions. */
static void count_uses(emitter *E, int32_t id)
{
    E->npending = 0;
    if (!push_pending(E, id))
        return;
    while (E->npending) {
        int32_t e = E->pending[--E->npending][0];
        if (E->uses[e]++ > 0)
            continue;
        touch(E, e);
        const tli_enode *n = tli_E(E->ir, e);
        for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
            if (!push_pending(E, n->a[i]))
                return;
        if (n->op == E_LOAD && !E->load_text[e])
            for (int d = 0; d < tli_B(E->ir, n->buf)->rank; d++)
                if (!push_pending(E, E->ir->pool.v[n->idx + d]))
                    return;
    }
}

static void reset_temps(emitter *E)
{
    for (int32_t i = 0; i < E->ntouched; i++) {
        E->uses[E->touched[i]] = 0;
        E->temp[E->touched[i]] = NULL;
    }
    E->ntouched = 0;
}

/* Prepares temporaries for the expressions of one statement: exprs[0..n). */
static void begin_statement(emitter *E, const int32_t *exprs, int n, tli_str *pre)
{
    reset_temps(E);
    for (int i = 0; i < n; i++)
        count_uses(E, exprs[i]);
    if (!tli_marks_begin(&E->done, E->ir))
        E->oom = true;
    E->pre = pre;
}

/* Flushes the temporaries declared for a statement into the output. */
static void flush_pre(emitter *E, tli_str *pre)
{
    if (pre->oom)
        E->oom = true;
    if (pre->len)
        tli_str_append(&E->out, pre->data);
    tli_str_free(pre);
    E->pre = NULL;
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

/* The indices of an access as texts (idx), their temporaries printed
 * first: for the statements whose lines take their indices alone. */
static void single_indices(emitter *E, int32_t buf, int32_t idx, const char **out)
{
    tli_str pre;
    tli_str_init(&pre);
    begin_statement(E, &E->ir->pool.v[idx], tli_B(E->ir, buf)->rank, &pre);
    index_texts(E, buf, idx, out);
    flush_pre(E, &pre);
}

/* An expression for a comment, which can declare no temporaries: its text
 * when it is a small tree, else only its size. */
static const char *comment_expr(emitter *E, int32_t id)
{
    reset_temps(E);
    E->pre = NULL;
    count_uses(E, id);
    bool tree = E->ntouched <= MAX_NEST;
    for (int32_t i = 0; i < E->ntouched && tree; i++)
        tree = E->uses[E->touched[i]] < 2 || is_leaf(tli_E(E->ir, E->touched[i]));
    const char *t = tree ? tli_e_expr(E, id) : tli_e_fmt(E, "(an expression of %d nodes)", (int)E->ntouched);
    reset_temps(E);
    return t;
}

/* --------------------------------------------------------- statements */

static int store_exprs(const tli_ir *ir, const tli_snode *s, int32_t *out)
{
    int rank = tli_B(ir, s->buf)->rank, n = 0;
    for (int d = 0; d < rank; d++)
        out[n++] = ir->pool.v[s->idx + d];
    out[n++] = s->value;
    return n;
}

/*   if (tl_in(i, tl_C_d0)) C[i] = value;   (by thread 0 alone outside loops) */
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
    tli_e_line(E, "if (%s%s) %s[%s] = %s;", who, ok, tli_e_buf(E, s->buf), off, val);
}

/*   for (long long tl_iS = 0; tl_iS < extent; ++tl_iS) { ... } */
static void emit_serial(emitter *E, int32_t sid, const tli_snode *s)
{
    const char *ext = tli_e_single(E, s->a0);
    const char *v = loop_var_name(E, tli_E(E->ir, s->vars[0]));
    int64_t n;
    if (tli_expr_const_int(E->ir, s->a0, &n) && n == 1) { /* one iteration: no loop */
        tli_e_line(E, "{");
        E->indent++;
        tli_e_line(E, "const long long %s = 0;", v);
        tli_e_stmts(E, s->body);
        E->indent--;
        tli_e_line(E, "}");
        return;
    }
    if (s->x[TLI_X_SERIAL_UNROLL])
        tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (long long %s = 0; %s < %s; ++%s) {", v, v, ext, v);
    E->indent++;
    tli_e_stmts(E, s->body);
    E->indent--;
    tli_e_line(E, "}");
    (void)sid;
}

/* A condition text without the parentheses its outermost operator added. */
static const char *bare(emitter *E, const char *t)
{
    size_t n = strlen(t);
    if (n < 2 || t[0] != '(' || t[n - 1] != ')')
        return t;
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        depth += t[i] == '(' ? 1 : t[i] == ')' ? -1 : 0;
        if (depth == 0 && i + 1 < n)
            return t; /* "(a) + (b)": the first parenthesis closes early */
    }
    return tli_e_fmt(E, "%.*s", (int)(n - 2), t + 1);
}

static void emit_if(emitter *E, const tli_snode *s)
{
    const char *cond = bare(E, tli_e_single(E, s->a0));
    if (s->x[TLI_X_IF_ROLES])
        tli_e_line(E, "if (%s) { // the producer warpgroup: every copy of the pipelined loop", cond);
    else
        tli_e_line(E, "if (%s) {", cond);
    E->indent++;
    tli_e_stmts(E, s->body);
    E->indent--;
    if (s->orelse) {
        tli_e_line(E, s->x[TLI_X_IF_ROLES] ? "} else { // the consumers: everything else" : "} else {");
        E->indent++;
        tli_e_stmts(E, s->orelse);
        E->indent--;
    }
    tli_e_line(E, "}");
}

/* Declares the loop variables of parallel loop sid for flat index `flat`,
 * naming them as loop_var_name does with `suffix` appended. */
static void decompose(emitter *E, int32_t sid, const char *flat, const char *suffix)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int64_t inner = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        const char *v = loop_var_name(E, tli_E(E->ir, s->vars[d]));
        const char *q = inner == 1 ? flat : tli_e_fmt(E, "%s / %lldLL", flat, (long long)inner);
        if (d > 0)
            tli_e_line(E, "const long long %s%s = %s %% %lldLL;", v, suffix, q, (long long)s->extents[d]);
        else
            tli_e_line(E, "const long long %s%s = %s;", v, suffix, q);
        inner *= s->extents[d];
    }
}

/*   for (long long tl_f = tl_tid; tl_f < TOTAL; tl_f += THREADS) { ... } */
static void emit_parallel_scalar(emitter *E, int32_t sid, int threads)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int64_t total = 1;
    for (int d = 0; d < s->rank; d++)
        total *= s->extents[d];
    if (s->x[TLI_X_PAR_PER_THREAD] <= 16 && total > threads) /* (a pragma before the `if` below: ignored) */
        tli_e_line(E, "#pragma unroll");
    if (total <= threads)
        tli_e_line(E, "if (tl_tid < %lld) {", (long long)total);
    else
        tli_e_line(E, "for (long long tl_f%d = tl_tid; tl_f%d < %lldLL; tl_f%d += %d) {", sid, sid, (long long)total, sid,
                   threads);
    E->indent++;
    decompose(E, sid, total <= threads ? "(long long)tl_tid" : tli_e_fmt(E, "tl_f%d", sid), "");
    tli_e_stmts(E, s->body);
    E->indent--;
    tli_e_line(E, "}");
}

/* Index texts of an access for one lane of chunk u: the last loop variable
 * becomes (its chunk value + lane). */
static void set_lane_vars(emitter *E, int32_t sid, int u, int lane)
{
    const tli_snode *s = tli_S(E->ir, sid);
    for (int d = 0; d < s->rank; d++) {
        int32_t v = s->vars[d];
        const char *name = tli_e_fmt(E, "%s_c%d", loop_var_name(E, tli_E(E->ir, v)), u);
        E->var_text[v] = (d == s->rank - 1 && lane > 0) ? tli_e_fmt(E, "(%s + %d)", name, lane) : (char *)name;
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
    tli_str c;
    tli_str_init(&c);
    tli_str_appendf(&c, "%s + (%s), %s, %s, %s, ", tli_e_buf(E, buf), off, tli_e_stride(E, buf, last), idx[last],
                    tli_e_dim(E, buf, last));
    tli_str_append(&c, live ? live : "true");
    for (int d = 0; d < last; d++)
        tli_str_appendf(&c, " && tl_in(%s, %s)", idx[d], tli_e_dim(E, buf, d));
    return tli_e_take(E, &c);
}

#define MAX_VLOADS 32

/* The loads of the loop's store values that pass_threads marked as whole
 * chunks, each once. */
/* Adds e to list (n entries, at most max) unless it is there. */
static void add_once(int32_t e, int32_t *list, int *n, int max)
{
    for (int i = 0; i < *n; i++)
        if (list[i] == e)
            return;
    if (*n < max)
        list[(*n)++] = e;
}

/* The vector loads (pass_threads) under root into list, and when masks is
 * not NULL the comparisons marked run_mask into masks (nmasks entries). */
static void vector_loads(emitter *E, int32_t root, int32_t *list, int *n, int32_t *masks, int *nmasks)
{
    tli_marks *m = &E->walk;
    if (!tli_marks_begin(m, E->ir)) {
        E->oom = true;
        return;
    }
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        const tli_enode *nd = tli_E(E->ir, e);
        if (nd->scope == 0)
            continue;
        if (nd->op == E_LOAD && nd->vec)
            add_once(e, list, n, MAX_VLOADS);
        if (nd->run_mask && masks)
            add_once(e, masks, nmasks, TLI_MAX_RUN_MASKS);
        tli_marks_push_operands(m, E->ir, e);
    }
    E->oom |= m->oom;
}

/*   tl_vec<float, 4> tl_L7_c0;
 *   tl_ld_chunk(tl_L7_c0, A + (off), 1, i, tl_A_d0, tl_live_c0);   one chunk of a load */
static void emit_chunk_loads(emitter *E, int32_t sid, int u, const int32_t *loads, int nloads, int lanes,
                             bool need_live)
{
    const char *live = need_live ? tli_e_fmt(E, "tl_live_c%d", u) : NULL;
    set_lane_vars(E, sid, u, 0);
    for (int i = 0; i < nloads; i++) {
        const tli_enode *n = tli_E(E->ir, loads[i]);
        const char *vname = tli_e_fmt(E, "tl_L%d_c%d", loads[i], u);
        const char *idx[TL_MAX_RANK];
        single_indices(E, n->buf, n->idx, idx);
        tli_e_line(E, "tl_vec<%s, %d> %s;", tli_dtype_ctype((tl_dtype)tli_B(E->ir, n->buf)->dtype), lanes, vname);
        tli_e_line(E, "tl_ld_chunk%s(%s, %s);", tli_e_policy(E, n->buf), vname, chunk_args(E, n->buf, idx, live));
    }
}

/* Values of store st for every lane of chunk u, then one chunk store (or,
 * for a store pass_threads did not mark, lane-by-lane stores). */
static void emit_chunk_store(emitter *E, int32_t sid, int u, int32_t stid, int lanes, const int32_t *loads, int nloads)
{
    const tli_snode *st = tli_S(E->ir, stid);
    const tli_bnode *b = tli_B(E->ir, st->buf);
    int32_t ex[TL_MAX_RANK + 1];
    int nex = store_exprs(E->ir, st, ex);
    const char *sname = tli_e_fmt(E, "tl_S%d_c%d", stid, u);
    tli_e_line(E, "tl_vec<%s, %d> %s;", tli_dtype_ctype((tl_dtype)b->dtype), lanes, sname);
    for (int v = 0; v < lanes; v++) {
        set_lane_vars(E, sid, u, v);
        for (int i = 0; i < nloads; i++)
            E->load_text[loads[i]] = tli_e_fmt(E, "tl_L%d_c%d.e[%d]", loads[i], u, v);
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
    if (st->x[TLI_X_STORE_VEC]) {
        set_lane_vars(E, sid, u, 0);
        single_indices(E, st->buf, st->idx, idx);
        tli_e_line(E, "tl_st_chunk%s(%s, %s);", tli_e_policy(E, st->buf), chunk_args(E, st->buf, idx, NULL), sname);
        return;
    }
    for (int v = 0; v < lanes; v++) {
        set_lane_vars(E, sid, u, v);
        single_indices(E, st->buf, st->idx, idx);
        tli_e_global_access(E, st->buf, idx, &off, &ok);
        tli_e_line(E, "if (%s) %s[%s] = %s.e[%d];", ok, tli_e_buf(E, st->buf), off, sname, v);
    }
}

static void emit_parallel_vector(emitter *E, int32_t sid, int threads)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int lanes = s->x[TLI_X_PAR_LANES], group = s->x[TLI_X_PAR_GROUP];
    int64_t per_thread = s->x[TLI_X_PAR_PER_THREAD], total = 1;
    for (int d = 0; d < s->rank; d++)
        total *= s->extents[d];
    int64_t chunks = total / lanes;
    int32_t loads[MAX_VLOADS];
    int nloads = 0;
    for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next)
        vector_loads(E, tli_S(E->ir, st)->value, loads, &nloads, NULL, NULL);
    bool one_group = per_thread == group;
    if (!one_group) {
        tli_e_line(E, "#pragma unroll 1");
        tli_e_line(E, "for (long long tl_g = 0; tl_g < %lldLL; tl_g += %d) {", (long long)per_thread, group);
        E->indent++;
    }
    bool ragged_threads = chunks % threads != 0;
    bool ragged_groups = per_thread % group != 0;
    bool need_live = ragged_threads || ragged_groups;
    for (int u = 0; u < group; u++) {
        const char *c = one_group ? tli_e_add(E, tli_e_fmt(E, "%dLL", u * threads), "tl_tid")
                                  : tli_e_fmt(E, "(tl_g + %d) * %dLL + tl_tid", u, threads);
        tli_e_line(E, "const long long tl_c%d = %s;", u, c);
        if (need_live) {
            tli_str live;
            tli_str_init(&live);
            if (ragged_groups)
                tli_str_appendf(&live, "tl_g + %d < %lldLL", u, (long long)per_thread);
            if (ragged_threads)
                tli_str_appendf(&live, "%stl_c%d < %lldLL", live.len ? " && " : "", u, (long long)chunks);
            tli_e_line(E, "const bool tl_live_c%d = %s;", u, tli_e_take(E, &live));
        }
        decompose(E, sid, tli_e_fmt(E, "tl_c%d * %dLL", u, lanes), tli_e_fmt(E, "_c%d", u));
    }
    for (int u = 0; u < group; u++)
        emit_chunk_loads(E, sid, u, loads, nloads, lanes, need_live);
    for (int u = 0; u < group; u++) {
        if (need_live) {
            tli_e_line(E, "if (tl_live_c%d) {", u);
            E->indent++;
        }
        for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next)
            emit_chunk_store(E, sid, u, st, lanes, loads, nloads);
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

/* for (tl_e < v) { the body of loop s for one register of the run } */
static void run_body(emitter *E, const tli_snode *s, const int32_t *loads, int nloads)
{
    int v = s->x[TLI_X_PAR_LANES], last = s->rank - 1;
    const char *lastv = loop_var_name(E, tli_E(E->ir, s->vars[last]));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_e = 0; tl_e < %d; ++tl_e) {", v);
    E->indent++;
    tli_e_line(E, "const int tl_r = tl_q * %d + tl_e;", v);
    tli_e_line(E, "const int %s = %s_run + tl_e;", lastv, lastv);
    for (int i = 0; i < nloads; i++) {
        int ln = tli_E(E->ir, loads[i])->vec;
        E->load_text[loads[i]] = tli_e_fmt(E, "tl_L%d[tl_q][tl_e / %d].e[tl_e %% %d]", loads[i], ln, ln);
    }
    E->inside_parallel = true;
    for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next) {
        const tli_snode *x = tli_S(E->ir, st);
        if (!x->x[TLI_X_STORE_VEC]) {
            emit_store(E, x);
            continue;
        }
        int32_t ex[TL_MAX_RANK + 1];
        int nex = store_exprs(E->ir, x, ex);
        tli_str pre;
        tli_str_init(&pre);
        begin_statement(E, ex, nex, &pre);
        bool packed = x->x[TLI_X_STORE_PACKED];
        const char *val = tli_e_expr(E, packed ? tli_E(E->ir, x->value)->a[0] : x->value);
        flush_pre(E, &pre);
        int ln = x->x[TLI_X_STORE_VEC];
        if (packed)
            tli_e_line(E, "tl_F%d[tl_e] = %s;", st, val);
        else
            tli_e_line(E, "tl_S%d[tl_e / %d].e[tl_e %% %d] = %s;", st, ln, ln, val);
    }
    E->inside_parallel = false;
    for (int i = 0; i < nloads; i++)
        E->load_text[loads[i]] = NULL;
    E->indent--;
    tli_e_line(E, "}");
}

/* A loop over a blocked-rows fragment, a run of v registers (consecutive
 * columns) at a time:
 *   for (tl_q ...) { row, first column of the run;
 *                    tl_vec loads of the run for each marked load;
 *                    for (tl_e < v) { the body, marked loads read from the vectors,
 *                                     marked stores fill vectors }
 *                    tl_st_chunk of each stored vector } */
/* Opens `for (tl_q ...) {` over the runs of fragment loop s: the loop
 * variables of the run, then `if (guard) {` when the layout pads. Returns
 * whether it opened the guard; *live is the guard as an operand (NULL:
 * none). */
static bool open_run_loop(emitter *E, const tli_snode *s, int64_t runs, const char *comment, const char **live)
{
    int32_t f = s->x[TLI_X_PAR_FRAG];
    int v = s->x[TLI_X_PAR_LANES], last = s->rank - 1;
    const char *idx[TL_MAX_RANK], *guard = NULL;
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_q = 0; tl_q < %lld; ++tl_q) {%s", (long long)runs, comment);
    E->indent++;
    tli_e_frag_coords(E, f, tli_e_fmt(E, "tl_q * %d", v), idx, &guard);
    for (int d = 0; d < last; d++)
        tli_e_line(E, "const int %s = %s;", loop_var_name(E, tli_E(E->ir, s->vars[d])), idx[d]);
    tli_e_line(E, "const int %s_run = %s;", loop_var_name(E, tli_E(E->ir, s->vars[last])), idx[last]);
    *live = guard ? tli_e_fmt(E, "(%s)", guard) : NULL;
    if (guard) {
        tli_e_line(E, "if (%s) {", guard);
        E->indent++;
    }
    return guard != NULL;
}

static void close_brace(emitter *E)
{
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_frag_runs(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int32_t f = s->x[TLI_X_PAR_FRAG];
    int v = s->x[TLI_X_PAR_LANES], last = s->rank - 1;
    int64_t count = s->x[TLI_X_PAR_PER_THREAD];
    const char *lastv = loop_var_name(E, tli_E(E->ir, s->vars[last]));
    int64_t runs = count / v;
    for (int d = 0; d < s->rank; d++) /* in-tile coordinates, declared int below */
        E->var_int[s->vars[d]] = VAR_INT;
    tli_e_line(E, "{ // tl_parallel over fragment %s: %lld registers per thread, in runs of %d columns", tli_e_buf(E, f),
               (long long)count, v);
    E->indent++;
    int32_t loads[MAX_VLOADS], masks[TLI_MAX_RUN_MASKS];
    int nloads = 0, nmasks = 0;
    for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next)
        vector_loads(E, tli_S(E->ir, st)->value, loads, &nloads, masks, &nmasks);
    /* Every run's loads first, in a loop of their own, then the arithmetic:
     * a load sits behind a branch (vector or lane by lane), and the compiler
     * waits for it where the branches join, so loads interleaved with their
     * uses would go one run at a time. */
    for (int i = 0; i < nloads; i++) {
        const tli_enode *n = tli_E(E->ir, loads[i]);
        tli_e_line(E, "tl_vec<%s, %d> tl_L%d[%lld][%d];", tli_dtype_ctype((tl_dtype)tli_B(E->ir, n->buf)->dtype), n->vec,
                   loads[i], (long long)runs, v / n->vec);
    }
    const char *live;
    if (nloads) {
        bool load_guard = open_run_loop(E, s, runs, " // the loads", &live);
        for (int i = 0; i < nloads; i++) {
            const tli_enode *n = tli_E(E->ir, loads[i]);
            for (int c = 0; c < v / n->vec; c++) {
                E->var_text[s->vars[last]] =
                    c ? tli_e_fmt(E, "(%s_run + %d)", lastv, c * n->vec) : tli_e_fmt(E, "%s_run", lastv);
                const char *li[TL_MAX_RANK];
                single_indices(E, n->buf, n->idx, li);
                if (tli_B(E->ir, n->buf)->scope == B_SHARED) { /* a whole piece in one place (pass_threads) */
                    char *off, *ok;
                    tli_e_smem_access(E, n->buf, li, NULL, &off, &ok);
                    tli_e_line(E, "tl_ld_vec(tl_L%d[tl_q][%d], %s + (%s));", loads[i], c, tli_e_buf(E, n->buf), off);
                } else {
                    tli_e_line(E, "tl_ld_chunk%s(tl_L%d[tl_q][%d], %s);", tli_e_policy(E, n->buf), loads[i], c,
                               chunk_args(E, n->buf, li, live));
                }
            }
        }
        E->var_text[s->vars[last]] = NULL;
        if (load_guard)
            close_brace(E);
        close_brace(E);
    }
    /* the arithmetic, in a loop of the same shape (closed further down) */
    bool guarded = open_run_loop(E, s, runs, "", &live);
    for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next) {
        const tli_snode *x = tli_S(E->ir, st);
        if (!x->x[TLI_X_STORE_VEC])
            continue;
        tli_e_line(E, "tl_vec<%s, %d> tl_S%d[%d];", tli_dtype_ctype((tl_dtype)tli_B(E->ir, x->buf)->dtype),
                   x->x[TLI_X_STORE_VEC], st, v / x->x[TLI_X_STORE_VEC]);
        if (x->x[TLI_X_STORE_PACKED])
            tli_e_line(E, "float tl_F%d[%d];", st, v);
    }
    if (nmasks) { /* the masks hold at the run's last column: they hold for all of it */
        tli_str all;
        tli_str_init(&all);
        E->var_text[s->vars[last]] = tli_e_fmt(E, "(%s_run + %d)", lastv, v - 1);
        for (int i = 0; i < nmasks; i++)
            tli_str_appendf(&all, "%s%s", i ? " && " : "", tli_e_single(E, masks[i]));
        E->var_text[s->vars[last]] = NULL;
        tli_e_line(E, "if (%s) { // the whole run passes its masks", tli_e_take(E, &all));
        E->indent++;
        E->run_inside = true;
        run_body(E, s, loads, nloads);
        E->run_inside = false;
        E->indent--;
        tli_e_line(E, "} else {");
        E->indent++;
        run_body(E, s, loads, nloads);
        close_brace(E);
    } else {
        run_body(E, s, loads, nloads);
    }
    for (int32_t st = s->body; st; st = tli_S(E->ir, st)->next) {
        const tli_snode *x = tli_S(E->ir, st);
        int ln = x->x[TLI_X_STORE_VEC];
        for (int c = 0; ln && c < v / ln; c++) {
            E->var_text[s->vars[last]] = c ? tli_e_fmt(E, "(%s_run + %d)", lastv, c * ln) : tli_e_fmt(E, "%s_run", lastv);
            const char *si[TL_MAX_RANK];
            single_indices(E, x->buf, x->idx, si);
            if (x->x[TLI_X_STORE_PACKED])
                tli_e_line(E, "tl_pack(tl_S%d[%d], tl_F%d + %d);", st, c, st, c * ln);
            tli_e_line(E, "tl_st_chunk%s(%s, tl_S%d[%d]);", tli_e_policy(E, x->buf), chunk_args(E, x->buf, si, live), st,
                       c);
        }
    }
    E->var_text[s->vars[last]] = NULL;
    for (int d = 0; d < s->rank; d++)
        E->var_int[s->vars[d]] = VAR_I64;
    if (guarded)
        close_brace(E);
    close_brace(E);
    close_brace(E);
}

static void emit_parallel(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    if (s->x[TLI_X_PAR_MODE] == PAR_FRAGMENT) {
        tli_e_frag_parallel(E, sid);
        return;
    }
    tli_str ext;
    tli_str_init(&ext);
    for (int d = 0; d < s->rank; d++)
        tli_str_appendf(&ext, "%s%lld", d ? ", " : "", (long long)s->extents[d]);
    bool vec = s->x[TLI_X_PAR_MODE] == PAR_VECTOR;
    const char *extents = tli_e_take(E, &ext);
    if (vec)
        tli_e_line(E, "{ // tl_parallel [%s]: chunks of %d along the last axis, %d per thread, %d loaded ahead", extents,
                   s->x[TLI_X_PAR_LANES], s->x[TLI_X_PAR_PER_THREAD], s->x[TLI_X_PAR_GROUP]);
    else
        tli_e_line(E, "{ // tl_parallel [%s]: one iteration at a time, %d per thread", extents,
                   s->x[TLI_X_PAR_PER_THREAD]);
    E->indent++;
    E->inside_parallel = true;
    if (vec)
        emit_parallel_vector(E, sid, E->ir->threads);
    else
        emit_parallel_scalar(E, sid, E->ir->threads);
    E->inside_parallel = false;
    E->indent--;
    tli_e_line(E, "}");
}

/* ------------------------------------------ lowered synchronisation */

const char *tli_e_mbar(emitter *E, int32_t buf, int32_t idx)
{
    return tli_e_fmt(E, "&%s[%s]", tli_e_buf(E, buf), tli_e_single(E, idx));
}

static void emit_stage(emitter *E, const tli_snode *s)
{
    const char *st = tli_e_single(E, s->a0);
    const char *saved[TL_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        saved[i] = E->stage[s->vars[i]];
        E->stage[s->vars[i]] = st;
    }
    tli_e_stmts(E, s->body);
    for (int i = 0; i < s->rank; i++)
        E->stage[s->vars[i]] = saved[i];
}

/* The end of a stream-K unit (S_SK_FIXUP, lowered.h), in the consumers. */
static void emit_sk_fixup(emitter *E, const tli_snode *s)
{
    const char *acc = tli_e_buf(E, s->buf);
    long long regs = E->L->frag[s->buf].per_thread, slot = (long long)E->L->launch.sk_slot_floats;
    int threads = E->ir->threads;
    tli_e_line(E, "if (tl_j0 > 0) { // a later part of block tl_t: its partial sum to this CTA's slot, for the CTA "
                  "that finishes the block");
    tli_e_line(E, "    tl_sk_put<%lld>(tl_sk_ws + (long long)blockIdx.x * %lldLL, %s, threadIdx.x, %d);", regs, slot, acc,
               threads);
    tli_e_line(E, "    __threadfence();");
    tli_e_line(E, "    tl_bar_sync(1, %d);", threads);
    tli_e_line(E, "    if (threadIdx.x == 0)");
    tli_e_line(E, "        tl_sk_raise(tl_sk_flags + blockIdx.x);");
    tli_e_line(E, "    continue;");
    tli_e_line(E, "}");
    tli_e_line(E, "if (tl_j1 < tl_sk_nk) { // the first part: add the later parts, CTA by CTA (a fixed order)");
    tli_e_line(E, "    for (long long tl_c = blockIdx.x + 1; tl_c < gridDim.x && tl_sk_w0 + tl_c * tl_sk_w / gridDim.x < "
                  "(tl_t + 1) * tl_sk_nk; ++tl_c) {");
    tli_e_line(E, "        if ((tl_c + 1) * tl_sk_w / gridDim.x == tl_c * tl_sk_w / gridDim.x)");
    tli_e_line(E, "            continue; // a CTA without steps");
    tli_e_line(E, "        if (threadIdx.x == 0)");
    tli_e_line(E, "            tl_sk_await(tl_sk_flags + tl_c);");
    tli_e_line(E, "        tl_bar_sync(1, %d);", threads);
    tli_e_line(E, "        tl_sk_add<%lld>(%s, tl_sk_ws + tl_c * %lldLL, threadIdx.x, %d);", regs, acc, slot, threads);
    tli_e_line(E, "    }");
    tli_e_line(E, "}");
}

static void emit_tile_loop(emitter *E, const tli_snode *s)
{
    int k = s->x[TLI_X_TILE_PERSIST];
    bool run = s->x[TLI_X_TILE_RUN];
    if (run) {
        tli_e_line(E, "{ // the blocks' loops run different trip counts: the ring's positions are running sums");
        E->indent++;
        tli_e_line(E, "long long tl_run_sum = 0, tl_run_nonempty = 0;");
    }
    tli_e_line(E, "for (long long tl_p = %s;; tl_p += %d) { // this CTA's blocks, %d at a time", tli_e_single(E, s->a0),
               s->a1, k);
    E->indent++;
    /* (the body starts with its block number and the exit past the last: pass_launch) */
    if (run) {
        tli_e_line(E, "const long long tl_run = tl_run_sum, tl_run_blocks = tl_run_nonempty;");
        tli_e_stmts(E, s->body);
        /* (the body's block indices are in scope: the trip count is theirs) */
        tli_e_line(E, "{ const long long tl_run_n = %s; tl_run_sum += tl_run_n; tl_run_nonempty += tl_run_n > 0; }",
                   tli_e_single(E, s->value));
    } else {
        tli_e_stmts(E, s->body);
    }
    E->indent--;
    tli_e_line(E, "}");
    if (run) {
        E->indent--;
        tli_e_line(E, "}");
    }
}

static void emit_let(emitter *E, int32_t sid, const tli_snode *s)
{
    tli_str pre;
    tli_str_init(&pre);
    begin_statement(E, &s->a0, 1, &pre);
    const char *v = tli_e_expr(E, s->a0);
    flush_pre(E, &pre);
    bool uniform = s->x[TLI_X_LET_WARP_UNIFORM];
    tli_e_line(E, "const %s %s = %s%s%s;", tli_dtype_ctype((tl_dtype)tli_E(E->ir, s->a0)->dtype), let_name(E, sid),
               uniform ? "tl_warp_uniform(" : "", v, uniform ? ")" : "");
}

/* S_ATOMIC (ir.h): the block counter's word; named, a let of its old value. */
static void emit_atomic(emitter *E, int32_t sid, const tli_snode *s)
{
    const char *fn = s->a1 ? "atomicExch" : "atomicAdd", *v = tli_e_single(E, s->a0);
    const char *call = tli_e_fmt(E, "%s(tl_block_counter + %d, (unsigned)(%s))", fn, s->x[0], v);
    if (s->name && s->x[1])
        call = tli_e_fmt(E, "(long long)%s + %s", call, tli_e_single(E, s->x[1]));
    else if (s->name)
        call = tli_e_fmt(E, "(long long)%s", call);
    if (s->value) {
        const char *orelse = s->x[2] ? tli_e_single(E, s->x[2]) : "0LL";
        call = tli_e_fmt(E, "(%s ? %s : %s)", tli_e_single(E, s->value), call, orelse);
    }
    if (s->name)
        tli_e_line(E, "const long long %s = %s;", let_name(E, sid), call);
    else
        tli_e_line(E, "%s;", call);
}

static void emit_lowered(emitter *E, int32_t sid, const tli_snode *s)
{
    switch ((tli_sop)s->op) {
    case S_BARRIER:
        if (!s->a0)
            tli_e_line(E, "__syncthreads();");
        else
            tli_e_line(E, "tl_bar_sync(%s, %d);", tli_e_single(E, s->a0), s->a1);
        break;
    case S_FENCE_ASYNC: tli_e_line(E, "tl_fence_proxy_async();"); break;
    case S_CP_COMMIT: tli_e_line(E, "tl_cp_async_commit();"); break;
    case S_CP_WAIT: tli_e_line(E, "tl_cp_async_wait<%d>();", s->a1); break;
    case S_WGMMA_WAIT: tli_e_line(E, "tl_wgmma_wait<%d>();", s->a1); break;
    case S_MBAR_INIT:
        tli_e_line(E, "if (threadIdx.x == 0) {");
        tli_e_line(E, "    for (int tl_s = 0; tl_s < %lld; ++tl_s)", (long long)tli_B(E->ir, s->buf)->cshape[0]);
        tli_e_line(E, "        tl_mbar_init(&%s[tl_s], %d);", tli_e_buf(E, s->buf), s->a1);
        if (s->x[TLI_X_MBAR_FENCE])
            tli_e_line(E, "    tl_mbar_init_fence();");
        tli_e_line(E, "}");
        break;
    case S_MBAR_WAIT:
        tli_e_line(E, "tl_mbar_wait(%s, (unsigned)(%s));", tli_e_mbar(E, s->buf, s->a0), tli_e_single(E, s->value));
        break;
    case S_MBAR_ARRIVE:
        if (s->x[TLI_X_MBAR_CLUSTER])
            tli_e_line(E, "tl_mbar_arrive_remote(%s, (unsigned)(%s));", tli_e_mbar(E, s->buf, s->a0),
                       tli_e_single(E, s->value));
        else
            tli_e_line(E, "%s(%s);", s->a1 ? "tl_cp_async_mbar_arrive" : "tl_mbar_arrive", tli_e_mbar(E, s->buf, s->a0));
        break;
    case S_MBAR_EXPECT: tli_e_line(E, "tl_mbar_expect(%s, %d);", tli_e_mbar(E, s->buf, s->a0), s->a1); break;
    case S_SETMAXNREG: tli_e_line(E, "tl_setmaxnreg_%s<%d>();", s->a0 ? "inc" : "dec", s->a1); break;
    case S_WARP_SYNC: tli_e_line(E, "__syncwarp();"); break;
    case S_LET: emit_let(E, sid, s); break;
    case S_STAGE: emit_stage(E, s); break;
    case S_TILE_LOOP: emit_tile_loop(E, s); break;
    case S_TMA_STORE: tli_e_tma_store(E, s); break;
    case S_BULK_WAIT: tli_e_line(E, "%s<0>();", s->a1 ? "tl_bulk_wait_read" : "tl_bulk_wait"); break;
    case S_ATOMIC: emit_atomic(E, sid, s); break;
    case S_BREAK: tli_e_line(E, "break;"); break;
    case S_CLUSTER_SYNC: tli_e_line(E, "tl_cluster_sync();"); break;
    case S_SK_FIXUP: emit_sk_fixup(E, s); break;
    case S_ARRAY_BASE: {
        const tli_bnode *b = tli_B(E->ir, s->buf);
        tli_e_line(E, "%s%s *const %s = tl_arr_%s[%s];", b->written ? "" : "const ", tli_dtype_ctype((tl_dtype)b->dtype),
                   b->name, b->name, tli_e_single(E, s->a0));
        break;
    }
    default: tli_e_fail(E, "statement %d of unknown kind %d", sid, s->op); break;
    }
}

void tli_e_stmts(emitter *E, int32_t first)
{
    for (int32_t sid = first; sid && E->st == TL_OK && !E->oom; sid = tli_S(E->ir, sid)->next) {
        const tli_snode *s = tli_S(E->ir, sid);
        int mark = E->nstrs;
        if (s->op != S_LET && s->op != S_ATOMIC && s->name) /* what a pass made of it */
            tli_e_line(E, "// %s", tli_str_at(E->ir, s->name));
        switch ((tli_sop)s->op) {
        case S_STORE: emit_store(E, s); break;
        case S_SERIAL: emit_serial(E, sid, s); break;
        case S_IF: emit_if(E, s); break;
        case S_PARALLEL: emit_parallel(E, sid); break;
        case S_COPY: tli_e_copy(E, sid); break;
        case S_FILL: tli_e_fill(E, sid); break;
        case S_GEMM: tli_e_gemm(E, sid); break;
        case S_REDUCE: tli_e_reduce(E, sid); break;
        case S_CLUSTER_REDUCE: tli_e_cluster_reduce(E, sid); break;
        case S_FINALIZE: /* the reduce pass left it: each element has one holder */
            tli_e_line(E, "// tl_finalize_reducer %s: one holder an element, whole already", tli_e_buf(E, s->buf));
            break;
        case S_PIPELINED: tli_e_fail(E, "a tl_pipelined loop the pipeline pass did not lower"); break;
        default: emit_lowered(E, sid, s); break;
        }
        /* what a statement printed is in the output: its strings go (the
         * state it leaves, loop variables and stages, came before it), so
         * memory follows the deepest statement, not the kernel */
        reset_temps(E);
        release_strs(E, mark);
    }
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
            /* an array of pointers: S_ARRAY_BASE names the block's tensor */
            tli_str_appendf(sig, "%s%s%s *%s%s", sep, b->written ? "" : "const ", tli_dtype_ctype((tl_dtype)p->dtype),
                            b->array_count ? "const *tl_arr_" : "", p->name);
        } else {
            tli_str_appendf(sig, "%s%s %s", sep, tli_dtype_ctype((tl_dtype)p->dtype), p->name);
        }
    }
    for (int i = 0; i < E->L->launch.nmaps; i++)
        tli_str_appendf(sig, "%sconst __grid_constant__ tl_tmap tl_map%d", sig->len ? ", " : "", i);
    if (E->L->launch.sk_slot_floats)
        tli_str_appendf(sig, "%sfloat *__restrict__ tl_sk_ws, unsigned *tl_sk_flags", sig->len ? ", " : "");
    if (E->L->launch.block_counter)
        tli_str_appendf(sig, "%sunsigned *tl_block_counter", sig->len ? ", " : "");
}

/*   const long long tl_A_d0 = N, tl_A_s0 = K;  (extents and non-unit strides of tensors) */
static void emit_tensor_meta(emitter *E)
{
    const tli_ir *ir = E->ir;
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        if (b->scope != B_GLOBAL)
            continue;
        for (int d = 0; d < b->rank; d++) {
            tli_e_line(E, "const long long %s = %s;", tli_e_dim(E, i, d), tli_e_single(E, b->shape[d]));
            const char *st = tli_e_stride(E, i, d);
            if (strcmp(st, "1") != 0)
                tli_e_line(E, "const long long %s = %s;", st, tli_e_single(E, b->stride[d]));
        }
    }
}

static void emit_comment_header(emitter *E, tli_str *h, const char *kname)
{
    const tli_ir *ir = E->ir;
    const tli_launch_plan *lp = &E->L->launch;
    tli_str_appendf(h, "// Generated by libtilec %s for %s: kernel '%s'.\n", tl_version(), E->L->target.name, ir->name);
    tli_str_appendf(h, "// Launch: grid (");
    for (int i = 0; i < 3; i++)
        tli_str_appendf(h, "%s%s", i ? ", " : "", lp->grid[i] ? comment_expr(E, lp->grid[i]) : "1");
    tli_str_appendf(h, ") blocks of %d threads", lp->block_threads);
    if (lp->persistent)
        tli_str_appendf(h, ", run by min(ceil(blocks / %d), SMs) persistent CTAs of %d threads%s", lp->persistent,
                        lp->threads, lp->block_counter ? " taking blocks from a counter" : "");
    else if (lp->threads != lp->block_threads)
        tli_str_appendf(h, ", in CTAs of %d threads", lp->threads);
    if (E->L->warp_specialized)
        tli_str_appendf(h, " (a producer warpgroup and %d consumer thread%s)", lp->threads - 128,
                        lp->threads - 128 > 1 ? "s" : "");
    tli_str_appendf(h, ".\n// Arguments:");
    for (int32_t i = 1; i < ir->p.n; i++) {
        const tli_param *p = &ir->p.v[i];
        static const char *kinds[] = {"tensor", "dim", "scalar"};
        tli_str_appendf(h, "%s %s (%s %s)", i > 1 ? "," : "", p->name, tl_dtype_name((tl_dtype)p->dtype),
                        kinds[p->kind]);
    }
    if (lp->nmaps)
        tli_str_appendf(h, ", then %d TMA descriptor%s", lp->nmaps, lp->nmaps > 1 ? "s" : "");
    if (lp->sk_slot_floats)
        tli_str_appendf(h, ", then the stream-K workspace (%lld floats a CTA) and flags (one a CTA)",
                        (long long)lp->sk_slot_floats);
    if (lp->block_counter)
        tli_str_appendf(h, ", then the block counter (two words, zero)");
    if (lp->smem_bytes)
        tli_str_appendf(h, "\n// Shared memory: %lld bytes per CTA (dynamic)", (long long)lp->smem_bytes);
    tli_str_appendf(h, ".\n#include \"" TLI_DEVICE_HEADER_NAME "\"\n\n%s", E->helpers.data ? E->helpers.data : "");
    tli_str_appendf(h, "extern \"C\" __global__ void __launch_bounds__(%d", lp->threads);
    if (lp->min_blocks)
        tli_str_appendf(h, ", %d", lp->min_blocks);
    tli_str_append(h, ")");
    if (tli_cluster_size(ir) > 1)
        tli_str_appendf(h, " __cluster_dims__(%d, %d, %d)", ir->cluster[0], ir->cluster[1], ir->cluster[2]);
    tli_str_appendf(h, "\n%s(", kname);
}

/* The halves of the exchange tile the kernel's cluster reductions take in
 * turn (pass_reduce gives all of them the same): 0 when it has none (its
 * blocks exchange nothing). */
static int cluster_halves(const tli_ir *ir)
{
    for (int32_t i = 1; i < ir->s.n; i++)
        if (ir->s.v[i].op == S_CLUSTER_REDUCE)
            return ir->s.v[i].x[TLI_X_RED_GROUP] > 1 ? 2 : 1;
    return 0;
}

static bool emitter_init(emitter *E, const tli_lowered *L)
{
    memset(E, 0, sizeof *E);
    E->L = L;
    E->ir = &L->ir;
    size_t n = (size_t)L->ir.e.n;
    E->var_text = calloc(n, sizeof(char *));
    E->var_int = calloc(n, sizeof *E->var_int);
    E->stage = calloc((size_t)L->ir.b.n, sizeof(char *));
    E->load_text = calloc(n, sizeof(char *));
    E->temp = calloc(n, sizeof(char *));
    E->uses = calloc(n, sizeof(int));
    tli_str_init(&E->out);
    tli_str_init(&E->helpers);
    return E->var_text && E->var_int && E->load_text && E->temp && E->uses && E->stage;
}

static void emitter_free(emitter *E)
{
    for (int i = 0; i < E->nstrs; i++)
        free(E->strs[i]);
    free(E->strs);
    free(E->var_text);
    free(E->var_int);
    free(E->load_text);
    free(E->temp);
    free(E->uses);
    free(E->stage);
    free(E->touched);
    free(E->pending);
    tli_marks_free(&E->done);
    tli_marks_free(&E->walk);
    tli_str_free(&E->helpers);
    tli_str_free(&E->out);
}

tl_status tli_emit_cuda(const tli_lowered *L, char **src, char *kname, size_t kname_len, char *err, size_t errlen)
{
    emitter E;
    *src = NULL;
    if (!emitter_init(&E, L)) {
        emitter_free(&E);
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    /* body first: the kernel's name carries a hash of what it does */
    E.indent = 1;
    emit_tensor_meta(&E);
    if (L->launch.smem_bytes)
        tli_e_line(&E, "extern __shared__ __align__(1024) unsigned char tl_smem[];");
    tli_e_tile_decls(&E);
    int halves = cluster_halves(&L->ir);
    if (halves > 1)
        tli_e_line(&E, "unsigned tl_cluster_turn = 0; // the half of the exchange slots the next cluster reduction takes");
    if (tli_cluster_size(&L->ir) > 1) /* in the name's hash: the dims are printed outside the body */
        tli_e_line(&E, "// cluster %d x %d x %d", L->ir.cluster[0], L->ir.cluster[1], L->ir.cluster[2]);
    tli_e_stmts(&E, L->ir.body);
    if (halves) /* the other blocks may still read this one's slots */
        tli_e_line(&E, "tl_cluster_sync(); // no block leaves while another may still read its slots");
    if (E.st != TL_OK) {
        tli_fmt(err, errlen, "%s", E.err);
        tl_status st = E.st;
        emitter_free(&E);
        return st;
    }
    tli_str sig;
    tli_str_init(&sig);
    emit_signature_params(&E, &sig);
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
    /* the hash whole: a kernel name of up to 63 characters is cut to make room */
    int keep = (int)kname_len - 1 - 1 - (int)strlen(hex);
    tli_fmt(kname, kname_len, "%.*s_%s", keep > 0 ? keep : 0, L->ir.name, hex);
    tli_str full;
    tli_str_init(&full);
    emit_comment_header(&E, &full, kname);
    /* appended, not formatted: the body can be megabytes */
    tli_str_append(&full, sig.data ? sig.data : "");
    tli_str_append(&full, ")\n{\n");
    tli_str_append(&full, E.out.data ? E.out.data : "");
    tli_str_append(&full, "}\n");
    bool oom = E.oom || E.done.oom || E.out.oom || full.oom || sig.oom || E.helpers.oom;
    tli_str_free(&sig);
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
