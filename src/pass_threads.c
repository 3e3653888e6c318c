/*
 * pass_threads.c - how each tl_parallel runs on the threads of a block.
 *
 * A loop that touches fragments iterates the registers of the fragment the
 * layout pass named (each thread computes the coordinates its registers
 * hold). Any other loop is flattened and spread over the threads, in
 * chunks of V consecutive iterations along the last axis when some global
 * access moves V elements at once (4, 8 or 16 bytes at unit stride), else
 * one iteration at a time (analysis.c, tli_plan_parallel). The accesses
 * that move whole chunks are marked here; the emitter loads those as
 * vectors and everything else lane by lane. In a loop over runs of
 * columns, the comparisons `column < bound` that a whole run passes when
 * its last column does are marked too: the emitter prints such a loop
 * twice, once for the runs wholly inside the bound (the comparisons are
 * `true` there) and once for the rest.
 */
#include "lower.h"

/* Vector mode needs a body of plain stores (no nested control flow). */
static bool straight_stores(const tli_ir *ir, int32_t body)
{
    for (int32_t s = body; s; s = tli_S(ir, s)->next)
        if (tli_S(ir, s)->op != S_STORE)
            return false;
    return body != 0;
}

/* Whether load n of shared tile [R, C] in loop s over blocked-rows runs
 * can read whole pieces of `lanes` elements: its column index is the
 * loop's last variable itself (a run starts at a multiple of v, a piece at
 * a multiple of lanes), its row index does not move with it and stays in
 * the tile, and the loop does not write the tile. A piece then lies in one
 * 16-byte chunk of a row, which the swizzle moves whole, at an offset
 * aligned to its size (rows and stages of whole pieces, buffers aligned to
 * 128 bytes): one ld.shared of 4, 8 or 16 bytes, where element by element
 * a 16-byte run costs eight loads and their address arithmetic. */
static bool shared_piece(const tli_lowered *L, int32_t s, const tli_enode *n, int lanes)
{
    const tli_ir *ir = &L->ir;
    const tli_snode *loop = tli_S(ir, s);
    const tli_bnode *b = tli_B(ir, n->buf);
    int last = loop->rank - 1;
    size_t bytes = tl_dtype_size((tl_dtype)b->dtype) * (size_t)lanes;
    if (b->scope != B_SHARED || b->rank != 2 || L->smem[n->buf].blocked || lanes < 2 ||
        (bytes != 4 && bytes != 8 && bytes != 16) || b->cshape[1] % lanes)
        return false;
    int32_t row = ir->pool.v[n->idx], col = ir->pool.v[n->idx + 1];
    const tli_enode *c = tli_E(ir, col);
    if (c->op != E_LOOP_VAR || c->loop != s || c->ival != last || loop->extents[last] > b->cshape[1])
        return false;
    int64_t lo, hi;
    if (tli_expr_uses_var(ir, row, s, last) || !tli_expr_range(ir, row, &lo, &hi) || lo < 0 || hi >= b->cshape[0])
        return false;
    for (int32_t st = loop->body; st; st = tli_S(ir, st)->next)
        if (tli_S(ir, st)->buf == n->buf)
            return false;
    return true;
}

/* Marks the loads in the value of a store of loop `loop` (each node once)
 * that move `lanes` elements at once; in a loop over blocked-rows runs of
 * `run` registers (lanes 0), global loads and shared pieces (shared_piece)
 * of as many elements as their dtype fits in 16 bytes, at most a run. */
static bool mark_vector_loads(tli_lowered *L, int32_t loop, int32_t root, int lanes, int run)
{
    tli_ir *ir = &L->ir;
    tli_marks *m = &L->walk;
    bool any = false;
    if (!tli_marks_begin(m, ir))
        return false;
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        tli_enode *n = &ir->e.v[e];
        if (n->scope == 0 || n->vec)
            continue;
        int scope = n->op == E_LOAD ? tli_B(ir, n->buf)->scope : 0;
        if (scope == B_GLOBAL || (!lanes && scope == B_SHARED)) {
            int ln = lanes;
            if (!ln) {
                ln = 16 / (int)tl_dtype_size((tl_dtype)tli_B(ir, n->buf)->dtype);
                ln = ln < run ? ln : run;
            }
            if (scope == B_GLOBAL ? tli_access_vectorizable(L, loop, n->buf, n->idx, ln, true)
                                  : shared_piece(L, loop, n, ln)) {
                n->vec = (uint8_t)ln;
                any = true;
            }
        }
        tli_marks_push_operands(m, ir, e);
    }
    return any;
}

/* Whether e keeps its value along a run of loop s (whose last variable
 * walks the run's columns): it reads no memory and not that variable.
 * look bounds the walk (a shared subexpression counts each time). */
static bool run_invariant(const tli_ir *ir, int32_t e, int32_t s, int last, int *look)
{
    const tli_enode *n = tli_E(ir, e);
    if (--*look < 0 || n->op == E_LOAD || n->op == E_LET)
        return false;
    if (n->op == E_LOOP_VAR)
        return n->loop != s || n->ival != last;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        if (!run_invariant(ir, n->a[i], s, last, look))
            return false;
    return true;
}

static bool is_column(const tli_ir *ir, int32_t e, int32_t s, int last)
{
    const tli_enode *n = tli_E(ir, e);
    return n->op == E_LOOP_VAR && n->loop == s && n->ival == last;
}

/* `column (+ c) < bound`, c and bound invariant along a run: true for
 * every column of the run when true for its last (the columns of a run
 * are consecutive). Softmax's mask of the columns past N is one; printed
 * element by element it cost a compare, a move and a select each. */
static bool run_mask(const tli_ir *ir, int32_t s, const tli_enode *n)
{
    int last = tli_S(ir, s)->rank - 1, look = 64;
    if (n->op != E_LT || !tli_dtype_is_int((tl_dtype)tli_E(ir, n->a[0])->dtype) ||
        !run_invariant(ir, n->a[1], s, last, &look))
        return false;
    if (is_column(ir, n->a[0], s, last))
        return true;
    const tli_enode *l = tli_E(ir, n->a[0]);
    if (l->op != E_ADD)
        return false;
    for (int i = 0; i < 2; i++)
        if (is_column(ir, l->a[i], s, last) && run_invariant(ir, l->a[1 - i], s, last, &look))
            return true;
    return false;
}

/* Marks the run masks (run_mask) in the value of a store of loop s, at
 * most TLI_MAX_RUN_MASKS of them. */
static void mark_run_masks(tli_lowered *L, int32_t s, int32_t root, int *marked)
{
    tli_ir *ir = &L->ir;
    tli_marks *m = &L->walk;
    if (!tli_marks_begin(m, ir))
        return;
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        tli_enode *n = &ir->e.v[e];
        if (n->scope == 0)
            continue;
        if (!n->run_mask && *marked < TLI_MAX_RUN_MASKS && run_mask(ir, s, n)) {
            n->run_mask = 1;
            ++*marked;
        }
        tli_marks_push_operands(m, ir, e);
    }
}

/* A loop over a blocked-rows fragment: a thread's registers come in runs
 * of v consecutive columns, so a global access at unit stride along the
 * columns can move a run (in 16-byte pieces) at once, and so can a read of
 * a shared tile along its rows (shared_piece). Marks those accesses and
 * records the run length in TLI_X_PAR_LANES. */
static void vectorize_runs(tli_lowered *L, int32_t s, int32_t owner)
{
    tli_ir *ir = &L->ir;
    const tli_frag_layout *f = &L->frag[owner];
    if (f->kind != FRAG_ROWS || f->rows.v < 2 || !straight_stores(ir, ir->s.v[s].body))
        return;
    int v = f->rows.v;
    bool any = false;
    for (int32_t st = ir->s.v[s].body; st; st = ir->s.v[st].next) {
        tli_snode *x = &ir->s.v[st];
        const tli_bnode *b = tli_B(ir, x->buf);
        int lanes = 16 / (int)tl_dtype_size((tl_dtype)b->dtype);
        lanes = lanes < v ? lanes : v;
        if (b->scope == B_GLOBAL && tli_access_vectorizable(L, s, x->buf, x->idx, lanes, false)) {
            const tli_enode *val = tli_E(ir, x->value);
            x->x[TLI_X_STORE_VEC] = lanes;
            x->x[TLI_X_STORE_PACKED] = lanes >= 2 && (b->dtype == TL_F16 || b->dtype == TL_BF16) &&
                                       val->op == E_CAST && tli_E(ir, val->a[0])->dtype == TL_F32;
            any = true;
        }
        any |= mark_vector_loads(L, s, x->value, 0, v);
    }
    if (!any)
        return;
    ir->s.v[s].x[TLI_X_PAR_LANES] = v;
    int marked = 0;
    for (int32_t st = ir->s.v[s].body; st; st = ir->s.v[st].next)
        mark_run_masks(L, s, ir->s.v[st].value, &marked);
}

/* Whether the `rank` indices at pool position idx are the first `rank`
 * loop variables of s, in order. */
static bool at_vars(const tli_ir *ir, int32_t idx, const tli_snode *s, int rank)
{
    for (int d = 0; d < rank; d++)
        if (ir->pool.v[idx + d] != s->vars[d])
            return false;
    return true;
}

/* Whether expression e loads buffer b there. */
static bool loads_at_vars(const tli_ir *ir, const tli_enode *e, int32_t b, const tli_snode *s, int rank)
{
    return e->op == E_LOAD && e->buf == b && at_vars(ir, e->idx, s, rank);
}

/* A loop over the registers of f32 fragment x whose one statement is
 * x[i, j] = x[i, j] * f[i] (either order), f a 1-D f32 fragment: where
 * every register of f a thread holds is 1, the loop leaves its registers
 * of x as they are (x * 1 is x for every float), so that thread may skip
 * it. FlashAttention's rescale of O by exp2(m_prev - m) is such a loop,
 * and 1 wherever the row maximum stayed. Marked only for long loops: the
 * test and the branch, which also cut the loop off from the code around
 * it, paid at 64 registers a thread (head_dim 128: +3-4 % on the H200)
 * and cost 4 % at 32 (head_dim 64; bench/NOTES.md, session 13). */
static void mark_unit_scale(tli_lowered *L, int32_t s, int32_t x)
{
    tli_ir *ir = &L->ir;
    tli_snode *n = &ir->s.v[s];
    int32_t st = n->body;
    const tli_bnode *xb = tli_B(ir, x);
    if (L->frag[x].per_thread < 64 || xb->dtype != TL_F32 || n->rank != xb->rank || n->x[TLI_X_PAR_LANES] > 1 ||
        !st || ir->s.v[st].next || ir->s.v[st].op != S_STORE || ir->s.v[st].buf != x ||
        !at_vars(ir, ir->s.v[st].idx, n, n->rank))
        return;
    const tli_enode *v = tli_E(ir, ir->s.v[st].value);
    if (v->op != E_MUL)
        return;
    for (int side = 0; side < 2; side++) {
        const tli_enode *a = tli_E(ir, v->a[side]), *f = tli_E(ir, v->a[1 - side]);
        if (!loads_at_vars(ir, a, x, n, n->rank) || f->op != E_LOAD || !loads_at_vars(ir, f, f->buf, n, 1))
            continue;
        const tli_bnode *fb = tli_B(ir, f->buf);
        if (fb->scope == B_FRAGMENT && fb->rank == 1 && fb->dtype == TL_F32 && L->frag[f->buf].per_thread <= 8) {
            n->x[TLI_X_PAR_UNIT_SCALE] = f->buf;
            return;
        }
    }
}

static void map_loop(tli_lowered *L, int32_t s)
{
    tli_ir *ir = &L->ir;
    int32_t owner = ir->s.v[s].x[TLI_X_PAR_FRAG];
    if (owner) {
        ir->s.v[s].x[TLI_X_PAR_MODE] = PAR_FRAGMENT;
        ir->s.v[s].x[TLI_X_PAR_PER_THREAD] = (int32_t)L->frag[owner].per_thread;
        vectorize_runs(L, s, owner);
        mark_unit_scale(L, s, owner);
        return;
    }
    tli_par_plan p;
    tli_plan_parallel(L, s, ir->threads, &p);
    if (p.per_thread > INT32_MAX) {
        tli_low_fail(L, TL_ERR_UNSUPPORTED, "tl_parallel: %lld iterations per thread", (long long)p.per_thread);
        return;
    }
    tli_snode *n = &ir->s.v[s];
    n->x[TLI_X_PAR_MODE] = p.vector ? PAR_VECTOR : PAR_SCALAR;
    n->x[TLI_X_PAR_LANES] = p.lanes;
    n->x[TLI_X_PAR_GROUP] = p.group;
    n->x[TLI_X_PAR_PER_THREAD] = (int32_t)p.per_thread;
    if (!p.vector)
        return;
    for (int32_t st = n->body; st; st = ir->s.v[st].next) {
        tli_snode *x = &ir->s.v[st];
        x->x[TLI_X_STORE_VEC] = tli_access_vectorizable(L, s, x->buf, x->idx, p.lanes, false);
        mark_vector_loads(L, s, x->value, p.lanes, 0);
    }
}

static void walk(tli_lowered *L, int32_t first)
{
    for (int32_t s = first; s && L->st == TL_OK; s = L->ir.s.v[s].next) {
        if (L->ir.s.v[s].op == S_PARALLEL)
            map_loop(L, s);
        walk(L, L->ir.s.v[s].body);
        walk(L, L->ir.s.v[s].orelse);
    }
}

void tli_pass_threads(tli_lowered *L) { walk(L, L->ir.body); }
