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
 * vectors and everything else lane by lane.
 */
#include "lower.h"

static void mark_vector_loads(tli_lowered *L, int32_t loop, int32_t root, int lanes)
{
    tli_ir *ir = &L->ir;
    int32_t stack[256];
    int sp = 0;
    stack[sp++] = root;
    while (sp) {
        int32_t e = stack[--sp];
        tli_enode *n = &ir->e.v[e];
        if (!e || n->scope == 0 || n->vec)
            continue;
        if (n->op == E_LOAD && tli_access_vectorizable(ir, loop, n->buf, n->idx, lanes, true))
            n->vec = (uint8_t)lanes;
        for (int i = 0; i < tli_eop_arity((tli_eop)n->op) && sp < 256; i++)
            stack[sp++] = n->a[i];
    }
}

static void map_loop(tli_lowered *L, int32_t s)
{
    tli_ir *ir = &L->ir;
    int32_t owner = ir->s.v[s].x[TLI_X_PAR_FRAG];
    if (owner) {
        ir->s.v[s].x[TLI_X_PAR_MODE] = PAR_FRAGMENT;
        ir->s.v[s].x[TLI_X_PAR_PER_THREAD] = (int32_t)L->frag[owner].per_thread;
        return;
    }
    tli_par_plan p;
    tli_plan_parallel(ir, s, ir->threads, &p);
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
        x->x[TLI_X_STORE_VEC] = tli_access_vectorizable(ir, s, x->buf, x->idx, p.lanes, false);
        mark_vector_loads(L, s, x->value, p.lanes);
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
