/*
 * repro.c - tl_kernel_reproducer: a kernel written back as the public
 * builder calls that make it, inside a C program that prints the kernel's
 * generated source (or its dump). A bug report is then one file that needs
 * nothing but libtilec, after libgccjit's reproducers.
 *
 * The rebuilt kernel must be the same graph to the last id, because the
 * generated code takes names from ids (tl_smem<buffer>, tl_i<statement>,
 * tl_L<expression> for a vector load) and the dump prints them. So the
 * replay makes every node the builder made, in the order it made them
 * (regions, which give no name, are made by the copy that takes them):
 *   - expressions in id order, each by the one call that makes it (the
 *     builder's folding made nodes only where the result is new, so the
 *     same call on the same operands makes the same node again), nodes that
 *     nothing uses included, as calls whose result is dropped;
 *   - statements in body order, which is the order they were appended;
 *   - parameters in declaration order and buffers in id order, each at the
 *     point of the expression sequence where it was made (tli_bnode.at; a
 *     dim's or scalar's own node says where it was declared).
 * The expression ids are the replay's clock. Some calls make nodes of
 * their own (a dim its parameter node, a loop its variables, a tensor its
 * row-major strides): they run exactly when the clock reaches those nodes.
 * The other calls may run anywhere between the nodes they take and those
 * that take them; statements run as early as the nodes they take allow, so
 * that expressions come just before the first call that needs them, and a
 * loop's tl_end waits for the last expression made inside it. The program
 * has no C blocks, so a variable stays visible after its loop; the builder
 * checked that the original used a loop's values only inside it, and the
 * replay makes and uses each value inside the same loops.
 *
 * One pass over the arrays, no recursion on expressions (their depth is
 * the user's); statement nesting is bounded by TLI_MAX_DEPTH.
 */
#include "ctx.h"
#include "kernel.h"
#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most expressions one builder call takes: a store's indices and
 * value, or the tile indices of both regions of a copy. */
#define MAX_ROOTS (2 * TL_MAX_RANK + 1)

/* Who makes an expression node: its own call, or a call that makes it on
 * the side. */
enum { OWN_CALL = 0, OWN_DECL, OWN_LOOP };

/* A parameter or tile buffer declaration, in the order the builder made
 * them. */
typedef struct decl {
    int32_t at;    /* the clock when it was made */
    int32_t last;  /* the last node it makes itself (at - 1: none) */
    int32_t param; /* its parameter (0: a tile buffer) */
    int32_t buf;   /* its buffer (0: a dim or scalar) */
} decl;

typedef struct repro {
    const tl_kernel *k;
    const tli_ir *ir;
    tli_str *out;
    uint8_t *owner;      /* per expression: OWN_* */
    uint8_t *named;      /* per expression: a later call takes it (a C variable) */
    uint8_t *used_buf;   /* per buffer: a later call takes it */
    int32_t *scope_last; /* per loop statement: the last node made inside it */
    decl *decls;
    int32_t *decl_of;    /* per buffer: its declaration */
    int32_t ndecls, next_decl;
    int32_t clock;       /* the next expression id to make */
    bool grid_done;
    int depth;           /* nesting of the calls being written */
    tl_status st;        /* first internal failure */
    char err[256];
} repro;

/* The enum's names, indexed by value: a new dtype needs its row here. */
static const char *dtype_enum(int dt)
{
    static const char *const names[] = {"TL_DTYPE_INVALID", "TL_F32", "TL_F16",    "TL_BF16",  "TL_I32",
                                        "TL_I64",           "TL_F64", "TL_BOOL",   "TL_F8E4M3", "TL_F8E5M2"};
    _Static_assert(sizeof names / sizeof names[0] == TL_F8E5M2 + 1, "a row per tl_dtype");
    return dt >= 0 && dt <= TL_F8E5M2 ? names[dt] : "TL_DTYPE_INVALID";
}

/* The public call that makes each operator node (consts, casts, selects,
 * loads and leaves are written by hand). */
static const char *expr_call(tli_eop op)
{
    static const char *const calls[E_COUNT] = {
        [E_ADD] = "tl_add", [E_SUB] = "tl_sub", [E_MUL] = "tl_mul", [E_DIV] = "tl_div",
        [E_MOD] = "tl_mod", [E_CEILDIV] = "tl_ceildiv", [E_MAX] = "tl_max", [E_MIN] = "tl_min",
        [E_LT] = "tl_lt", [E_LE] = "tl_le", [E_GT] = "tl_gt", [E_GE] = "tl_ge",
        [E_EQ] = "tl_eq", [E_NE] = "tl_ne", [E_AND] = "tl_and", [E_OR] = "tl_or",
        [E_NEG] = "tl_neg", [E_ABS] = "tl_abs", [E_NOT] = "tl_not", [E_EXP] = "tl_exp",
        [E_EXP2] = "tl_exp2", [E_LOG] = "tl_log", [E_SQRT] = "tl_sqrt", [E_RSQRT] = "tl_rsqrt",
        [E_TANH] = "tl_tanh", [E_ERF] = "tl_erf", [E_BLOCK_VALUE] = "tl_block_value",
    };
    return op < E_COUNT ? calls[op] : NULL;
}

/* Records a broken invariant of the graph (a bug: TL_ERR_INTERNAL). */
static void internal(repro *R, const char *fmt, ...) TLI_PRINTF(2, 3);
static void internal(repro *R, const char *fmt, ...)
{
    if (R->st != TL_OK)
        return;
    R->st = TL_ERR_INTERNAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->err, sizeof R->err, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------- names */

/* A tile buffer's name is the user's unless the library made it (tl_). */
static bool user_named(const tli_bnode *n) { return n->scope != B_GLOBAL && strncmp(n->name, "tl_", 3) != 0; }

/* Names the user gave keep a prefix that no other variable of the program
 * has, so that a parameter called k or main cannot clash. */
static void put_buf(repro *R, int32_t b)
{
    const tli_bnode *n = tli_B(R->ir, b);
    if (n->scope == B_GLOBAL)
        tli_str_appendf(R->out, "p_%s", n->name);
    else if (user_named(n))
        tli_str_appendf(R->out, "b_%s", n->name);
    else
        tli_str_appendf(R->out, "b%d", b);
}

/* A loop's variables are named after its statement, as the dump's i<s>.<d>:
 * one variable for a loop of rank 1, an array for tl_parallel of more. */
static void put_expr(repro *R, int32_t e)
{
    const tli_enode *n = tli_E(R->ir, e);
    if (n->op == E_PARAM)
        tli_str_appendf(R->out, "p_%s", R->ir->p.v[n->param].name);
    else if (n->op == E_LOOP_VAR && tli_S(R->ir, n->loop)->rank > 1)
        tli_str_appendf(R->out, "i%d[%d]", n->loop, (int)n->ival);
    else if (n->op == E_LOOP_VAR)
        tli_str_appendf(R->out, "i%d", n->loop);
    else
        tli_str_appendf(R->out, "e%d", e);
}

/* "(tl_expr[]){e4, i9}" */
static void put_list(repro *R, const int32_t *ids, int n)
{
    tli_str_append(R->out, "(tl_expr[]){");
    for (int i = 0; i < n; i++) {
        tli_str_append(R->out, i ? ", " : "");
        put_expr(R, ids[i]);
    }
    tli_str_append(R->out, "}");
}

/* "tl_load(k, p_A, (tl_expr[]){e4, i9}": a call on one element of buf,
 * its indices at idx in the pool. */
static void put_access(repro *R, const char *call, int32_t buf, int32_t idx)
{
    tli_str_appendf(R->out, "%s(k, ", call);
    put_buf(R, buf);
    tli_str_append(R->out, ", ");
    put_list(R, R->ir->pool.v + idx, tli_B(R->ir, buf)->rank);
}

static void indent(repro *R)
{
    for (int i = 0; i <= R->depth; i++)
        tli_str_append(R->out, "    ");
}

/* ------------------------------------------------------- expressions */

static void put_int(repro *R, const tli_enode *n)
{
    if (n->dtype == TL_I32)
        tli_str_appendf(R->out, n->ival == INT32_MIN ? "tl_i32(k, INT32_MIN)" : "tl_i32(k, %d)", (int)n->ival);
    else if (n->ival == INT64_MIN)
        tli_str_append(R->out, "tl_int(k, INT64_MIN)");
    else
        tli_str_appendf(R->out, "tl_int(k, %lld)", (long long)n->ival);
}

/* A hexadecimal float gives back the exact double; the decimal beside it
 * is for the reader. */
static void put_float(repro *R, const tli_enode *n)
{
    double v = n->fval;
    tli_str_append(R->out, "tl_float(k, ");
    if (isnan(v))
        tli_str_append(R->out, signbit(v) ? "-NAN" : "NAN");
    else if (isinf(v))
        tli_str_append(R->out, v > 0 ? "INFINITY" : "-INFINITY");
    else
        tli_str_appendf(R->out, "%a /* %.9g */", v, v);
    tli_str_appendf(R->out, ", %s)", dtype_enum(n->dtype));
}

/* The right-hand side of one node's variable. */
static void put_node(repro *R, int32_t e)
{
    const tli_enode *n = tli_E(R->ir, e);
    const char *call = expr_call((tli_eop)n->op);
    switch ((tli_eop)n->op) {
    case E_CONST_INT: put_int(R, n); return;
    case E_CONST_FLOAT: put_float(R, n); return;
    case E_BLOCK_IDX: tli_str_appendf(R->out, "tl_block_idx(k, %d)", (int)n->ival); return;
    case E_CAST:
        tli_str_append(R->out, "tl_cast(k, ");
        put_expr(R, n->a[0]);
        tli_str_appendf(R->out, ", %s)", dtype_enum(n->dtype));
        return;
    case E_SELECT: call = "tl_select"; break;
    case E_LOAD:
        put_access(R, "tl_load", n->buf, n->idx);
        tli_str_append(R->out, ")");
        return;
    default: break;
    }
    if (!call) {
        internal(R, "expression %d has op %d, which no builder call makes", e, n->op);
        return;
    }
    tli_str_appendf(R->out, "%s(k", call);
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++) {
        tli_str_append(R->out, ", ");
        put_expr(R, n->a[i]);
    }
    tli_str_append(R->out, ")");
}

/* ---------------------------------------------- what each call takes */

/* The expressions builder call s takes (0 for none). */
static int stmt_roots(const tli_ir *ir, const tli_snode *n, int32_t roots[MAX_ROOTS])
{
    int r = 0;
    switch ((tli_sop)n->op) {
    case S_STORE:
        for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
            roots[r++] = ir->pool.v[n->idx + d];
        roots[r++] = n->value;
        break;
    case S_SERIAL:
    case S_PIPELINED:
    case S_IF: roots[r++] = n->a0; break;
    case S_FILL: roots[r++] = n->value; break;
    case S_COPY:
        for (int side = 0; side < 2; side++) {
            int32_t operand = side ? n->a1 : n->a0;
            for (int d = 0; operand > 0 && d < tli_B(ir, tli_R(ir, operand)->buf)->rank; d++)
                roots[r++] = tli_R(ir, operand)->idx[d];
        }
        break;
    default: break;
    }
    return r;
}

/* The expressions a tensor parameter's declaration takes: its shape, and
 * its strides when they were given (the builder makes row-major ones). */
static int tensor_roots(const tli_bnode *b, int32_t roots[MAX_ROOTS])
{
    int r = 0;
    for (int d = 0; d < b->rank; d++)
        roots[r++] = b->shape[d];
    for (int d = 0; b->explicit_strides && d < b->rank; d++)
        roots[r++] = b->stride[d];
    if (b->array_count)
        roots[r++] = b->array_count;
    return r;
}

/* ---------------------------------------------------------- the plan */

static decl param_decl(repro *R, int32_t p)
{
    const tli_param *pp = &R->ir->p.v[p];
    if (pp->kind != TL_PARAM_TENSOR)
        return (decl){.at = pp->expr, .last = pp->expr, .param = p};
    const tli_bnode *b = tli_B(R->ir, pp->buf);
    /* Row-major strides are nodes of the declaration's own, the last
     * dimension's (the constant 1) made last. */
    int32_t last = b->explicit_strides ? b->at - 1 : b->stride[b->rank - 1];
    if (last < b->at - 1 || (!b->explicit_strides && last < b->at))
        internal(R, "tensor '%s' made at %d has a stride made at %d", pp->name, b->at, last);
    return (decl){.at = b->at, .last = last, .param = p, .buf = pp->buf};
}

static void add_decl(repro *R, decl d)
{
    if (d.buf)
        R->decl_of[d.buf] = R->ndecls;
    if (R->ndecls && d.at < R->decls[R->ndecls - 1].at)
        internal(R, "declarations made at %d and then %d", R->decls[R->ndecls - 1].at, d.at);
    R->decls[R->ndecls++] = d;
}

/* The tile buffers from *t on made before declaration pd (before every
 * later one when pd is NULL): by buffer id against a tensor, by clock
 * against a dim or scalar, which makes its node after them. */
static void add_tiles_before(repro *R, int32_t *t, const decl *pd)
{
    for (; *t < R->ir->b.n; ++*t) {
        const tli_bnode *b = tli_B(R->ir, *t);
        if (b->scope == B_GLOBAL)
            continue;
        if (pd && (pd->buf ? *t > pd->buf : b->at > pd->at))
            return;
        add_decl(R, (decl){.at = b->at, .last = b->at - 1, .buf = *t});
    }
}

/* Parameters in declaration order with the tile buffers merged in where
 * the builder made them; which nodes come from which call. */
static void plan_decls(repro *R)
{
    const tli_ir *ir = R->ir;
    int32_t t = 1;
    for (int32_t p = 1; p < ir->p.n; p++) {
        decl pd = param_decl(R, p);
        add_tiles_before(R, &t, &pd);
        add_decl(R, pd);
    }
    add_tiles_before(R, &t, NULL);
    for (int32_t i = 0; i < R->ndecls; i++)
        for (int32_t e = R->decls[i].at; e <= R->decls[i].last && e < ir->e.n; e++)
            R->owner[e] = OWN_DECL;
    for (int32_t s = 1; s < ir->s.n; s++) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_SERIAL || n->op == S_PIPELINED || n->op == S_PARALLEL)
            for (int d = 0; d < n->rank; d++)
                R->owner[n->vars[d]] = OWN_LOOP;
    }
}

static void name_all(repro *R, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        R->named[ids[i]] = 1;
}

static void mark_stmt_bufs(repro *R, const tli_snode *n)
{
    switch ((tli_sop)n->op) {
    case S_STORE:
    case S_CLUSTER_REDUCE:
    case S_FINALIZE:
    case S_FILL: R->used_buf[n->buf] = 1; break;
    case S_COPY: R->used_buf[tli_copy_buf(R->ir, n->a0)] = R->used_buf[tli_copy_buf(R->ir, n->a1)] = 1; break;
    case S_GEMM: R->used_buf[n->gemm[2]] = 1; /* fall through */
    case S_REDUCE: R->used_buf[n->gemm[0]] = R->used_buf[n->gemm[1]] = 1; break;
    default: break;
    }
}

/* Which nodes and buffers a later call takes (they get C variables; the
 * others are made by calls whose result is dropped, so the program
 * compiles without unused-variable warnings), and the last node made
 * inside each loop (its tl_end comes after it). */
static void plan_names(repro *R)
{
    const tli_ir *ir = R->ir;
    int32_t roots[MAX_ROOTS];
    for (int32_t e = 1; e < ir->e.n; e++) {
        const tli_enode *n = tli_E(ir, e);
        if (n->scope > 0 && n->scope < ir->s.n && e > R->scope_last[n->scope])
            R->scope_last[n->scope] = e;
        if (R->owner[e] == OWN_DECL)
            continue; /* a stride's operands: the declaration takes them */
        name_all(R, n->a, tli_eop_arity((tli_eop)n->op));
        if (n->op == E_LOAD) {
            name_all(R, ir->pool.v + n->idx, tli_B(ir, n->buf)->rank);
            R->used_buf[n->buf] = 1;
        }
    }
    for (int32_t s = 1; s < ir->s.n; s++) {
        name_all(R, roots, stmt_roots(ir, tli_S(ir, s), roots));
        mark_stmt_bufs(R, tli_S(ir, s));
    }
    for (int32_t b = 1; b < ir->b.n; b++) {
        if (tli_B(ir, b)->scope == B_GLOBAL)
            name_all(R, roots, tensor_roots(tli_B(ir, b), roots));
        if (user_named(tli_B(ir, b)))
            R->used_buf[b] = 1; /* tl_name takes it */
    }
    for (int d = 0; d < 3; d++)
        R->named[ir->grid[d]] = 1; /* [0] (none) is never printed */
}

/* ----------------------------------------------------- declarations */

/* "tl_buf b4 = " when a later call names the buffer. */
static void assign_buf(repro *R, int32_t b)
{
    indent(R);
    if (!R->used_buf[b])
        return;
    tli_str_append(R->out, "tl_buf ");
    put_buf(R, b);
    tli_str_append(R->out, " = ");
}

static void declare_tile(repro *R, int32_t b)
{
    static const char *const calls[] = {[B_SHARED] = "tl_alloc_shared", [B_FRAGMENT] = "tl_alloc_fragment",
                                        [B_LOCAL] = "tl_alloc_local"};
    const tli_bnode *n = tli_B(R->ir, b);
    if (n->scope != B_SHARED && n->scope != B_FRAGMENT && n->scope != B_LOCAL) {
        internal(R, "buffer %d has scope %d, which no builder call makes", b, n->scope);
        return;
    }
    assign_buf(R, b);
    tli_str_appendf(R->out, "%s(k, %s, %d, (int64_t[]){", n->reducer ? "tl_alloc_reducer" : calls[n->scope],
                    dtype_enum(n->dtype), n->rank);
    for (int d = 0; d < n->rank; d++)
        tli_str_appendf(R->out, "%s%lld", d ? ", " : "", (long long)n->cshape[d]);
    tli_str_append(R->out, "});\n");
    if (user_named(n)) {
        indent(R);
        tli_str_append(R->out, "tl_name(k, ");
        put_buf(R, b);
        tli_str_appendf(R->out, ", \"%s\");\n", n->name);
    }
}

static void declare_tensor(repro *R, const tli_param *p)
{
    const tli_bnode *b = tli_B(R->ir, p->buf);
    assign_buf(R, p->buf);
    tli_str_appendf(R->out, "tl_param_tensor%s(k, \"%s\", %s, %d, ", b->array_count ? "_array" : "", p->name,
                    dtype_enum(p->dtype), b->rank);
    put_list(R, b->shape, b->rank);
    tli_str_append(R->out, ", ");
    if (b->explicit_strides)
        put_list(R, b->stride, b->rank);
    else
        tli_str_append(R->out, "NULL");
    if (b->array_count) {
        tli_str_append(R->out, ", ");
        put_expr(R, b->array_count);
        tli_str_appendf(R->out, ", %d", b->array_axis);
    }
    tli_str_append(R->out, ");\n");
    if (b->cache == TL_CACHE_EVICT_FIRST) {
        indent(R);
        tli_str_append(R->out, "tl_use_cache_policy(k, ");
        put_buf(R, p->buf);
        tli_str_append(R->out, ", TL_CACHE_EVICT_FIRST);\n");
    }
}

static void declare_scalar(repro *R, const tli_param *p)
{
    indent(R);
    if (R->named[p->expr])
        tli_str_appendf(R->out, "tl_expr p_%s = ", p->name);
    if (p->kind == TL_PARAM_DIM)
        tli_str_appendf(R->out, "tl_dim(k, \"%s\");\n", p->name);
    else
        tli_str_appendf(R->out, "tl_param_scalar(k, \"%s\", %s);\n", p->name, dtype_enum(p->dtype));
}

/* Makes the next declaration, at its point of the clock; a dim, a scalar
 * or a tensor with row-major strides makes its own nodes there. */
static void declare_next(repro *R)
{
    const decl *d = &R->decls[R->next_decl++];
    if (R->clock != d->at) {
        internal(R, "a declaration made at %d comes at %d", d->at, R->clock);
        return;
    }
    if (!d->buf)
        declare_scalar(R, &R->ir->p.v[d->param]);
    else if (d->param)
        declare_tensor(R, &R->ir->p.v[d->param]);
    else
        declare_tile(R, d->buf);
    R->clock = d->last + 1;
}

static void declare_flags(repro *R)
{
    const tli_ir *ir = R->ir;
    const struct { bool on; const char *call; } flags[] = {
        {ir->fast_math, "tl_use_fast_math(k, 1)"},
        {ir->warp_specialize, "tl_use_warp_specialize(k, 1)"},
        {ir->persistent == 1, "tl_use_persistent(k, 1)"},
        {ir->persistent == 2, "tl_use_persistent(k, 2)"},
        {ir->pingpong == 1, "tl_use_pingpong(k, 1)"},
        {ir->pingpong == 2, "tl_use_pingpong(k, 2)"},
    };
    if (tli_cluster_size(ir) > 1) {
        indent(R);
        tli_str_appendf(R->out, "tl_cluster(k, %d, %d, %d);\n", ir->cluster[0], ir->cluster[1], ir->cluster[2]);
    }
    if (ir->min_blocks) {
        indent(R);
        tli_str_appendf(R->out, "tl_use_min_blocks(k, %d);\n", ir->min_blocks);
    }
    if (ir->swizzle) {
        indent(R);
        tli_str_appendf(R->out, "tl_use_swizzle(k, %d);\n", ir->swizzle);
    }
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].on) {
            indent(R);
            tli_str_appendf(R->out, "%s;\n", flags[i].call);
        }
}

/* ------------------------------------------------------- the clock */

/* Makes the node at the clock by its own call; a variable holds it when a
 * later call takes it. */
static void make_node(repro *R)
{
    int32_t e = R->clock;
    if (e >= R->ir->e.n || R->owner[e] != OWN_CALL) {
        internal(R, "expression %d is made by a call the replay has not reached", e);
        return;
    }
    indent(R);
    if (R->named[e])
        tli_str_appendf(R->out, "tl_expr e%d = ", e);
    put_node(R, e);
    tli_str_append(R->out, ";\n");
    R->clock++;
}

/* Replays everything the builder made before node `until`: the nodes
 * below it and the declarations made before them. A declaration made at
 * `until` itself runs now too when it makes no node (either order gives
 * the same graph); one that makes node `until` waits for the clock. */
static void catch_up(repro *R, int32_t until)
{
    while (R->st == TL_OK) {
        const decl *d = R->next_decl < R->ndecls ? &R->decls[R->next_decl] : NULL;
        bool due = d && (d->at < until || (d->at == until && d->last < d->at));
        if (due && R->clock == d->at)
            declare_next(R);
        else if ((due && R->clock < d->at) || (!due && R->clock < until))
            make_node(R);
        else if (due)
            internal(R, "buffer or parameter made at %d, after the replay's clock passed it", d->at);
        else
            return;
    }
}

/* Replays up to and including declaration di (a statement takes it). */
static void declare_through(repro *R, int32_t di)
{
    while (R->st == TL_OK && R->next_decl <= di) {
        int32_t target = R->next_decl;
        catch_up(R, R->decls[target].at);
        /* catch_up makes a declaration that makes no node itself (a tile
         * made at the clock); the next one may be due later on the clock */
        if (R->next_decl == target && R->st == TL_OK)
            declare_next(R);
    }
}

/* tl_grid, after its expressions, and the kernel's switches: before the
 * first statement, or at the end of a kernel without one. */
static void declare_grid(repro *R)
{
    const tli_ir *ir = R->ir;
    R->grid_done = true;
    if (ir->threads) { /* else never called: tl_kernel_source says so, as it did for the original */
        int32_t until = 0;
        for (int d = 0; d < 3; d++)
            until = ir->grid[d] >= until ? ir->grid[d] + 1 : until;
        catch_up(R, until);
        indent(R);
        tli_str_append(R->out, "tl_grid(k");
        for (int d = 0; d < 3; d++) {
            tli_str_append(R->out, ", ");
            if (ir->grid[d])
                put_expr(R, ir->grid[d]);
            else
                tli_str_append(R->out, "TL_NONE_EXPR");
        }
        tli_str_appendf(R->out, ", %d);\n", ir->threads);
    }
    declare_flags(R);
}

/* --------------------------------------------------------- statements */

/* Where statement s is in the kernel's open scopes (-1: closed), for a
 * kernel whose builder left scopes open: the replay leaves them open too,
 * and tl_kernel_source says so as it did for the original. */
static int open_slot(const tl_kernel *k, int32_t s)
{
    for (int i = 0; i < k->depth; i++)
        if (k->open[i] == s)
            return i;
    return -1;
}

static void put_region(repro *R, int32_t operand)
{
    if (operand < 0) {
        tli_str_append(R->out, "tl_all(");
        put_buf(R, -operand);
        tli_str_append(R->out, ")");
        return;
    }
    const tli_rnode *r = tli_R(R->ir, operand);
    tli_str_append(R->out, "tl_tile(k, ");
    put_buf(R, r->buf);
    for (int d = 0; d < tli_B(R->ir, r->buf)->rank; d++) {
        tli_str_append(R->out, ", ");
        put_expr(R, r->idx[d]);
    }
    tli_str_append(R->out, ")");
}

static void put_gemm_flags(repro *R, unsigned flags)
{
    static const struct { unsigned bit; const char *name; } names[] = {
        {TL_GEMM_TRANS_A, "TL_GEMM_TRANS_A"}, {TL_GEMM_TRANS_B, "TL_GEMM_TRANS_B"},
        {TL_GEMM_WARP_ROWS, "TL_GEMM_WARP_ROWS"}, {TL_GEMM_WARP_COLS, "TL_GEMM_WARP_COLS"},
    };
    const char *sep = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (flags & names[i].bit) {
            tli_str_appendf(R->out, "%s%s", sep, names[i].name);
            flags &= ~names[i].bit;
            sep = " | ";
        }
    if (flags || !*sep)
        tli_str_appendf(R->out, "%s%#x", sep, flags);
}

/* The line that opens loop s: its variables, when some call takes them. */
static void open_loop(repro *R, const tli_snode *n, int32_t s)
{
    bool named = R->named[n->vars[0]];
    if (n->op == S_PARALLEL && n->rank > 1) {
        tli_str_appendf(R->out, "tl_expr i%d[%d];\n", s, n->rank);
        indent(R);
        tli_str_appendf(R->out, "tl_parallel(k, %d, (int64_t[]){", n->rank);
        for (int d = 0; d < n->rank; d++)
            tli_str_appendf(R->out, "%s%lld", d ? ", " : "", (long long)n->extents[d]);
        tli_str_appendf(R->out, "}, i%d);\n", s);
        return;
    }
    if (named)
        tli_str_appendf(R->out, "tl_expr i%d = ", s);
    if (n->op == S_PARALLEL) {
        tli_str_appendf(R->out, "tl_parallel1(k, %lld);\n", (long long)n->extents[0]);
        return;
    }
    tli_str_append(R->out, n->op == S_SERIAL ? "tl_serial(k, " : "tl_pipelined(k, ");
    put_expr(R, n->a0);
    if (n->op == S_PIPELINED)
        tli_str_appendf(R->out, ", %d", n->a1);
    tli_str_append(R->out, ");\n");
}

static void write_body(repro *R, int32_t first);

/* The body (and else branch) of scope s, and the tl_end that closes it
 * once every node made inside the loop is made. */
static void write_scope(repro *R, const tli_snode *n, int32_t s)
{
    int slot = open_slot(R->k, s);
    R->depth++;
    write_body(R, n->body);
    R->depth--;
    if (n->orelse || (slot >= 0 && R->k->in_else[slot])) {
        indent(R);
        tli_str_append(R->out, "tl_else(k);\n");
        R->depth++;
        write_body(R, n->orelse);
        R->depth--;
    }
    if (slot >= 0)
        return;
    R->depth++;
    catch_up(R, R->scope_last[s] + 1);
    R->depth--;
    indent(R);
    tli_str_append(R->out, "tl_end(k);\n");
}

/* The builder calls of the tile statements: copy, fill, gemm, reduce. */
static void write_tile_op(repro *R, const tli_snode *n, int32_t s)
{
    static const char *const reduce_calls[] = {[R_MAX] = "tl_reduce_max", [R_SUM] = "tl_reduce_sum",
                                               [R_MIN] = "tl_reduce_min", [R_ABSMAX] = "tl_reduce_absmax"};
    tli_str *o = R->out;
    switch ((tli_sop)n->op) {
    case S_COPY:
        tli_str_append(o, "tl_copy(k, ");
        put_region(R, n->a0);
        tli_str_append(o, ", ");
        put_region(R, n->a1);
        break;
    case S_FILL:
        tli_str_append(o, n->value ? "tl_fill(k, " : "tl_clear(k, ");
        put_buf(R, n->buf);
        if (n->value) {
            tli_str_append(o, ", ");
            put_expr(R, n->value);
        }
        break;
    case S_GEMM:
        tli_str_append(o, "tl_gemm(k");
        for (int i = 0; i < 3; i++) {
            tli_str_append(o, ", ");
            put_buf(R, n->gemm[i]);
        }
        tli_str_append(o, ", ");
        put_gemm_flags(R, (unsigned)n->a1);
        break;
    case S_REDUCE: {
        int op = n->a1 & TLI_REDUCE_OP_MASK;
        if (op > R_ABSMAX) {
            internal(R, "reduction %d has op %d, which no builder call makes", s, op);
            return;
        }
        tli_str_appendf(o, "%s(k, ", reduce_calls[op]);
        put_buf(R, n->gemm[0]);
        tli_str_append(o, ", ");
        put_buf(R, n->gemm[1]);
        tli_str_appendf(o, ", %d, %d", n->rank, n->a1 & TLI_REDUCE_ACCUM ? 0 : 1);
        break;
    }
    case S_CLUSTER_REDUCE: {
        int op = n->a1 & TLI_REDUCE_OP_MASK;
        if (op > R_ABSMAX) {
            internal(R, "cluster reduction %d has op %d, which no builder call makes", s, op);
            return;
        }
        if (n->a0 && op != R_SUM) {
            internal(R, "cluster reduction %d to one rank has op %d, which no builder call makes", s, op);
            return;
        }
        tli_str_appendf(o, "tl_cluster_%s%s(k, ", reduce_calls[op] + 3, n->a0 ? "_to" : "");
        put_buf(R, n->buf);
        if (n->a0)
            tli_str_appendf(o, ", %d", n->a0 - 1);
        break;
    }
    case S_FINALIZE:
        tli_str_append(o, "tl_finalize_reducer(k, ");
        put_buf(R, n->buf);
        break;
    default: internal(R, "statement %d has op %d, which no builder call makes", s, n->op); return;
    }
    tli_str_append(o, ");\n");
}

/* Replays what statement s needs: the nodes it takes (for a loop, every
 * node before its variables), the buffers it names, and the grid before
 * the first statement. */
static void before_stmt(repro *R, int32_t s)
{
    const tli_snode *n = tli_S(R->ir, s);
    if (!R->grid_done)
        declare_grid(R);
    int32_t roots[MAX_ROOTS], until = 0;
    int nroots = stmt_roots(R->ir, n, roots);
    for (int i = 0; i < nroots; i++)
        until = roots[i] >= until ? roots[i] + 1 : until;
    bool loop = n->op == S_SERIAL || n->op == S_PIPELINED || n->op == S_PARALLEL;
    catch_up(R, loop ? n->vars[0] : until);
    int32_t bufs[4] = {0}, di = -1;
    switch ((tli_sop)n->op) {
    case S_STORE:
    case S_CLUSTER_REDUCE:
    case S_FINALIZE:
    case S_FILL: bufs[0] = n->buf; break;
    case S_COPY: bufs[0] = tli_copy_buf(R->ir, n->a0), bufs[1] = tli_copy_buf(R->ir, n->a1); break;
    case S_GEMM:
    case S_REDUCE: memcpy(bufs, n->gemm, sizeof n->gemm); break;
    default: break;
    }
    for (int i = 0; i < 4; i++)
        di = bufs[i] && R->decl_of[bufs[i]] > di ? R->decl_of[bufs[i]] : di;
    declare_through(R, di);
    if (loop && R->clock != n->vars[0])
        internal(R, "the variables of loop %d are nodes %d.., but the replay is at %d", s, n->vars[0], R->clock);
}

static void write_stmt(repro *R, int32_t s)
{
    const tli_snode *n = tli_S(R->ir, s);
    before_stmt(R, s);
    if (R->st != TL_OK)
        return;
    indent(R);
    switch ((tli_sop)n->op) {
    case S_STORE:
        put_access(R, "tl_store", n->buf, n->idx);
        tli_str_append(R->out, ", ");
        put_expr(R, n->value);
        tli_str_append(R->out, ");\n");
        return;
    case S_SERIAL:
    case S_PIPELINED:
    case S_PARALLEL:
        open_loop(R, n, s);
        R->clock += n->rank;
        write_scope(R, n, s);
        return;
    case S_IF:
        tli_str_append(R->out, "tl_if(k, ");
        put_expr(R, n->a0);
        tli_str_append(R->out, ");\n");
        write_scope(R, n, s);
        return;
    default: write_tile_op(R, n, s); return;
    }
}

static void write_body(repro *R, int32_t first)
{
    for (int32_t s = first; s && R->st == TL_OK; s = tli_S(R->ir, s)->next)
        write_stmt(R, s);
}

/* ------------------------------------------------------------ program */

static void write_program(repro *R)
{
    const char *name = R->ir->name, *target = tl_ctx_target(R->k->ctx);
    tli_str_appendf(R->out,
                    "/*\n"
                    " * Reproducer of the libtilec kernel '%s', written by tl_kernel_reproducer\n"
                    " * (libtilec %s). It rebuilds the kernel with the builder calls that made\n"
                    " * it and prints the CUDA C that tl_kernel_source generates for it, or, with\n"
                    " * the argument \"dump\", the kernel's graph (tl_kernel_dump). No GPU needed.\n"
                    " *\n"
                    " *   cc -std=c11 -o repro repro.c -ltilec -ldl -lpthread -lm\n"
                    " *   ./repro [target] [dump]        (target: %s unless given)\n"
                    " */\n"
                    "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n\n"
                    "#include <tilec.h>\n\n"
                    "static void build(tl_kernel *k)\n{\n",
                    name, tl_version(), target);
    write_body(R, R->ir->body);
    catch_up(R, R->ir->e.n);
    declare_through(R, R->ndecls - 1);
    if (!R->grid_done)
        declare_grid(R);
    tli_str_appendf(R->out,
                    "}\n\n"
                    "int main(int argc, char **argv)\n{\n"
                    "    const char *target = \"%s\";\n"
                    "    int dump = 0;\n"
                    "    for (int i = 1; i < argc; i++) {\n"
                    "        if (strcmp(argv[i], \"dump\") == 0)\n"
                    "            dump = 1;\n"
                    "        else\n"
                    "            target = argv[i];\n"
                    "    }\n"
                    "    tl_ctx_options opt = tl_ctx_default_options();\n"
                    "    opt.device = TL_NO_DEVICE;\n"
                    "    opt.target = target;\n"
                    "    opt.disk_cache = 0;\n"
                    "    tl_ctx *ctx = NULL;\n"
                    "    char msg[512];\n"
                    "    tl_status st = tl_ctx_create(&opt, &ctx, msg, sizeof msg);\n"
                    "    if (st != TL_OK) {\n"
                    "        fprintf(stderr, \"tl_ctx_create: %%s: %%s\\n\", tl_status_name(st), msg);\n"
                    "        return 1;\n"
                    "    }\n"
                    "    tl_kernel *k = tl_kernel_new(ctx, \"%s\");\n"
                    "    char *text = NULL;\n"
                    "    if (!k) {\n"
                    "        st = TL_ERR_OUT_OF_MEMORY;\n"
                    "    } else {\n"
                    "        build(k);\n"
                    "        st = dump ? tl_kernel_dump(k, &text) : tl_kernel_source(k, NULL, &text);\n"
                    "    }\n"
                    "    if (st == TL_OK)\n"
                    "        fputs(text, stdout);\n"
                    "    else\n"
                    "        fprintf(stderr, \"%%s: %%s\\n\", tl_status_name(st), tl_ctx_error(ctx));\n"
                    "    tl_free_host(text);\n"
                    "    tl_kernel_destroy(k);\n"
                    "    tl_ctx_destroy(ctx);\n"
                    "    return st == TL_OK ? 0 : 1;\n"
                    "}\n",
                    target, name);
}

/* ------------------------------------------------------------ public API */

static tl_status run(repro *R)
{
    const tli_ir *ir = R->ir;
    size_t ne = (size_t)ir->e.n, ns = (size_t)ir->s.n, nb = (size_t)ir->b.n, np = (size_t)ir->p.n;
    R->owner = calloc(ne, 1);
    R->named = calloc(ne, 1);
    R->used_buf = calloc(nb, 1);
    R->scope_last = calloc(ns, sizeof *R->scope_last);
    R->decls = calloc(nb + np, sizeof *R->decls);
    R->decl_of = calloc(nb, sizeof *R->decl_of);
    R->clock = 1;
    if (R->owner && R->named && R->used_buf && R->scope_last && R->decls && R->decl_of) {
        plan_decls(R);
        plan_names(R);
        if (R->st == TL_OK)
            write_program(R);
        if (R->st == TL_OK && R->out->oom)
            R->st = TL_ERR_OUT_OF_MEMORY;
    } else {
        R->st = TL_ERR_OUT_OF_MEMORY;
    }
    free(R->owner);
    free(R->named);
    free(R->used_buf);
    free(R->scope_last);
    free(R->decls);
    free(R->decl_of);
    return R->st;
}

TL_API tl_status tl_kernel_reproducer(tl_kernel *k, char **c_source)
{
    static const char api[] = "tl_kernel_reproducer";
    if (!k)
        return TL_ERR_INVALID_ARG;
    if (!c_source)
        return tli_fail(k->ctx, TL_ERR_INVALID_ARG, "%s: c_source is NULL", api);
    *c_source = NULL;
    if (k->status != TL_OK)
        return tli_fail(k->ctx, k->status, "%s: kernel '%s' has a recorded error, so it has no reproducer: %s", api,
                        k->ir.name, k->err);
    tli_str s;
    tli_str_init(&s);
    repro R = {.k = k, .ir = &k->ir, .out = &s};
    tl_status st = run(&R);
    if (st == TL_OK && !(*c_source = tli_str_take(&s)))
        st = TL_ERR_OUT_OF_MEMORY;
    tli_str_free(&s);
    if (st == TL_ERR_OUT_OF_MEMORY)
        return tli_fail(k->ctx, st, "%s: out of host memory", api);
    if (st != TL_OK)
        return tli_fail(k->ctx, st, "%s: kernel '%s': %s", api, k->ir.name, R.err);
    return TL_OK;
}
