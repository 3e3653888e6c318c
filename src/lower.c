/*
 * lower.c - the lowering pipeline: the passes in order, a dump after any of
 * them on request, and the small constructors the passes build lowered
 * nodes with.
 */
#include "lower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pass {
    const char *name;
    void (*run)(tli_lowered *L);
} pass;

static const pass passes[] = {
    {"verify", tli_pass_verify},     /* whole-kernel checks, each naming its builder call */
    {"layout", tli_pass_layout},     /* which MMA atom each tl_gemm runs on; every fragment's layout */
    {"threads", tli_pass_threads},   /* each tl_parallel onto the threads; vector accesses */
    {"reduce", tli_pass_reduce},     /* reductions: partials, shuffles, a cross-warp step */
    {"pipeline", tli_pass_pipeline}, /* copy engines; tl_pipelined into stages, or producer and consumers */
    {"smem", tli_pass_smem},         /* shared-memory offsets and stages */
    {"sync", tli_pass_sync},         /* barriers, deferred waits of async copies and wgmma */
    {"launch", tli_pass_launch},     /* threads, grid, block indices, TMA maps, launch bounds */
};

#define NPASSES ((int)(sizeof passes / sizeof passes[0]))

const char *const tli_pass_names[] = {"verify", "layout", "threads", "reduce", "pipeline", "smem", "sync", "launch",
                                      NULL};

bool tli_pass_known(const char *name)
{
    if (!name)
        return false;
    if (strcmp(name, "all") == 0)
        return true;
    for (int i = 0; i < NPASSES; i++)
        if (strcmp(name, passes[i].name) == 0)
            return true;
    return false;
}

tl_status tli_lower(const tli_ir *ir, const tli_target *t, const tli_lower_options *opt, tli_lowered *L)
{
    memset(L, 0, sizeof *L);
    L->target = *t;
    L->safe = opt && opt->safe;
    L->smem_limit = opt && opt->smem_limit ? opt->smem_limit : t->smem_limit;
    if (!tli_ir_clone(&L->ir, ir) || !tli_low_plan_bufs(L)) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return L->st;
    }
    const char *dump = opt ? opt->dump : NULL;
    for (int i = 0; i < NPASSES && L->st == TL_OK; i++) {
        passes[i].run(L);
        /* a walk that ran out of memory gave a partial answer the pass may
         * have acted on (even failed on): out of memory is what happened */
        if (L->walk.oom || L->coef.oom)
            L->st = TL_OK;
        if (L->walk.oom || L->coef.oom || (L->st == TL_OK && !tli_low_plan_bufs(L)))
            tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        if (L->st == TL_OK && dump && opt->dump_out && (strcmp(dump, "all") == 0 || strcmp(dump, passes[i].name) == 0)) {
            tli_str_appendf(opt->dump_out, "// ---- kernel '%s' after pass '%s' (%s)\n", ir->name, passes[i].name,
                            t->name);
            tli_dump_ir(&L->ir, L, opt->dump_out);
        }
    }
    return L->st;
}

void tli_lowered_free(tli_lowered *L)
{
    tli_ir_free(&L->ir);
    tli_marks_free(&L->walk);
    tli_marks_free(&L->coef);
    free(L->frag);
    free(L->smem);
    L->frag = NULL;
    L->smem = NULL;
    L->nbufs_planned = 0;
}

void tli_low_fail(tli_lowered *L, tl_status st, const char *fmt, ...)
{
    if (L->st != TL_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, sizeof L->err, fmt, ap);
    va_end(ap);
    L->st = st;
}

void tli_low_note(tli_lowered *L, int32_t s, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    int32_t off = tli_ir_add_str(&L->ir, text);
    if (off < 0)
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    else if (s)
        L->ir.s.v[s].name = off;
}

bool tli_low_plan_bufs(tli_lowered *L)
{
    int32_t n = L->ir.b.n;
    if (n <= L->nbufs_planned)
        return true;
    tli_frag_layout *f = realloc(L->frag, (size_t)n * sizeof *f);
    if (f)
        L->frag = f;
    tli_smem_info *m = realloc(L->smem, (size_t)n * sizeof *m);
    if (m)
        L->smem = m;
    if (!f || !m)
        return false;
    memset(L->frag + L->nbufs_planned, 0, (size_t)(n - L->nbufs_planned) * sizeof *f);
    memset(L->smem + L->nbufs_planned, 0, (size_t)(n - L->nbufs_planned) * sizeof *m);
    L->nbufs_planned = n;
    return true;
}

/* ------------------------------------------------------- constructors */

int32_t tli_low_expr(tli_lowered *L, const tli_enode *n)
{
    int32_t id = tli_ir_add_expr(&L->ir, n);
    if (!id)
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    return id;
}

int32_t tli_low_int(tli_lowered *L, int64_t v, tl_dtype dt)
{
    tli_enode n = {.op = E_CONST_INT, .dtype = (uint8_t)dt, .ival = v};
    return tli_low_expr(L, &n);
}

/* The scope of a value made from a and b: the deeper loop of the two,
 * approximated by the later statement (passes only ask "none or some"). */
static int32_t join_scope(const tli_ir *ir, int32_t a, int32_t b)
{
    int32_t sa = a ? tli_E(ir, a)->scope : 0, sb = b ? tli_E(ir, b)->scope : 0;
    return sa > sb ? sa : sb;
}

int32_t tli_low_bin(tli_lowered *L, tli_eop op, int32_t a, int32_t b)
{
    const tli_enode *na = tli_E(&L->ir, a), *nb = tli_E(&L->ir, b);
    int64_t x, y;
    bool ca = tli_expr_const_int(&L->ir, a, &x), cb = tli_expr_const_int(&L->ir, b, &y);
    tl_dtype dt = (na->dtype == TL_I64 || nb->dtype == TL_I64) ? TL_I64 : (tl_dtype)na->dtype;
    if (op >= E_LT && op <= E_OR)
        dt = TL_BOOL;
    /* the identities that keep generated index arithmetic short */
    if (op == E_ADD && cb && y == 0)
        return a;
    if (op == E_ADD && ca && x == 0)
        return b;
    if (op == E_MUL && cb && y == 1)
        return a;
    if (op == E_MUL && ca && x == 1)
        return b;
    if ((op == E_DIV || op == E_CEILDIV) && cb && y == 1)
        return a;
    if (op == E_SUB && cb && y == 0)
        return a;
    if (ca && cb && dt != TL_BOOL && x >= -(1LL << 40) && x <= (1LL << 40) && y >= -(1LL << 40) && y <= (1LL << 40)) {
        switch (op) {
        case E_ADD: return tli_low_int(L, x + y, dt);
        case E_SUB: return tli_low_int(L, x - y, dt);
        case E_MUL: return tli_low_int(L, x * y, dt);
        default: break;
        }
    }
    tli_enode n = {.op = (uint8_t)op, .dtype = (uint8_t)dt, .a = {a, b}, .scope = join_scope(&L->ir, a, b)};
    return tli_low_expr(L, &n);
}

int32_t tli_low_thread(tli_lowered *L, tli_thread_value v)
{
    tli_enode n = {.op = E_THREAD, .dtype = TL_I32, .ival = v};
    return tli_low_expr(L, &n);
}

int32_t tli_low_let_ref(tli_lowered *L, int32_t let)
{
    const tli_snode *s = tli_S(&L->ir, let);
    tli_enode n = {.op = E_LET, .dtype = tli_E(&L->ir, s->a0)->dtype, .loop = let,
                   .scope = tli_E(&L->ir, s->a0)->scope};
    return tli_low_expr(L, &n);
}

int32_t tli_low_if(tli_lowered *L, int32_t cond, int32_t body, int32_t orelse)
{
    tli_snode n = {.op = S_IF, .a0 = cond, .body = body, .orelse = orelse};
    int32_t id = tli_low_stmt(L, &n);
    tli_set_parent(L, body, id);
    tli_set_parent(L, orelse, id);
    return id;
}

int32_t tli_low_mbar(tli_lowered *L, tli_sop op, int32_t bar, int32_t idx, int32_t parity_or_n)
{
    tli_snode n = {.op = (uint8_t)op, .buf = bar, .a0 = idx};
    if (op == S_MBAR_WAIT)
        n.value = parity_or_n;
    else
        n.a1 = parity_or_n;
    return tli_low_stmt(L, &n);
}

int32_t tli_low_stmt(tli_lowered *L, const tli_snode *n)
{
    int32_t id = tli_ir_add_stmt(&L->ir, n);
    if (!id)
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    return id;
}

int32_t tli_low_let(tli_lowered *L, const char *name, int32_t value)
{
    int32_t off = tli_ir_add_str(&L->ir, name);
    if (off < 0) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return 0;
    }
    tli_snode n = {.op = S_LET, .a0 = value, .name = off};
    return tli_low_stmt(L, &n);
}

int32_t tli_low_buf(tli_lowered *L, const tli_bnode *b)
{
    int32_t id = tli_ir_add_buf(&L->ir, b);
    if (!id || !tli_low_plan_bufs(L)) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return 0;
    }
    return id;
}

void tli_list_add(tli_lowered *L, tli_list *l, int32_t s)
{
    if (!s)
        return;
    /* s may head a chain already linked (its last is followed) */
    int32_t last = s;
    while (L->ir.s.v[last].next)
        last = L->ir.s.v[last].next;
    if (l->last)
        L->ir.s.v[l->last].next = s;
    else
        l->first = s;
    l->last = last;
}

int32_t tli_list_op(tli_lowered *L, tli_list *l, tli_sop op, int32_t a0, int32_t a1)
{
    tli_snode n = {.op = (uint8_t)op, .a0 = a0, .a1 = a1};
    int32_t id = tli_low_stmt(L, &n);
    tli_list_add(L, l, id);
    return id;
}

void tli_set_parent(tli_lowered *L, int32_t first, int32_t parent)
{
    for (int32_t s = first; s; s = L->ir.s.v[s].next)
        L->ir.s.v[s].parent = parent;
}

/* ---------------------------------------------------------- substitution */

typedef struct subst {
    tli_lowered *L;
    int32_t var, with;
    int32_t *memo; /* by expression id: its copy, or 0 */
    int32_t n;
} subst;

static int32_t subst_rec(subst *S, int32_t e, int depth)
{
    if (!e || e >= S->n)
        return e;
    if (S->memo[e])
        return S->memo[e];
    tli_ir *ir = &S->L->ir;
    tli_enode n = ir->e.v[e];
    int32_t out = e;
    if (e == S->var) {
        out = S->with;
    } else if (n.scope != 0 && depth >= 4096) {
        tli_low_fail(S->L, TL_ERR_UNSUPPORTED, "an index expression nested deeper than 4096 operations");
    } else if (n.scope != 0) {
        bool changed = false;
        for (int i = 0; i < tli_eop_arity((tli_eop)n.op); i++) {
            int32_t c = subst_rec(S, n.a[i], depth + 1);
            changed |= c != n.a[i];
            n.a[i] = c;
        }
        if (n.op == E_LOAD) {
            const tli_bnode *b = tli_B(ir, n.buf);
            int32_t idx[TL_MAX_RANK];
            bool moved = false;
            for (int d = 0; d < b->rank; d++) {
                idx[d] = subst_rec(S, ir->pool.v[n.idx + d], depth + 1);
                moved |= idx[d] != ir->pool.v[n.idx + d];
            }
            if (moved) {
                int32_t start = tli_ir_add_indices(ir, idx, b->rank);
                if (start < 0)
                    tli_low_fail(S->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
                n.idx = start < 0 ? n.idx : start;
                changed = true;
            }
        }
        if (changed)
            out = tli_low_expr(S->L, &n);
    }
    S->memo[e] = out;
    return out;
}

int32_t tli_low_subst(tli_lowered *L, int32_t e, int32_t var, int32_t with)
{
    subst S = {L, var, with, calloc((size_t)L->ir.e.n, sizeof(int32_t)), L->ir.e.n};
    if (!S.memo) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return e;
    }
    int32_t r = subst_rec(&S, e, 0);
    free(S.memo);
    return r;
}
