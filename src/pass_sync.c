/*
 * pass_sync.c - the barriers and waits between the statements of each
 * block-uniform body, placed where a hazard needs them and nowhere else.
 *
 * The walk keeps what is unsettled since the last barrier:
 *   - shared and global buffers written or read by some threads (fragments
 *     and locals belong to one thread each and never need a barrier): a
 *     statement that reads what another wrote, or writes what another read
 *     or wrote, gets a block barrier first;
 *   - shared tiles filled by a standalone cp.async copy not yet waited for:
 *     the first statement that touches one gets the wait, the proxy fence
 *     (when the tensor cores or TMA read shared memory) and a barrier, so
 *     the copy overlaps everything in between;
 *   - wgmma groups in flight, each with the accumulator it writes and the
 *     tiles it reads: a statement that touches that accumulator (other than
 *     the next wgmma into it), or writes one of those tiles, first waits
 *     until the groups issued after the youngest such group are all that is
 *     left in flight.
 * Loop bodies are walked with what may be in flight when any iteration
 * starts (a dry walk first finds what one iteration leaves behind); a
 * hazard between the end of a body and its start gets a barrier at its end.
 *
 * A pipeline's own copies and waits (TLI_X_COPY_MANAGED, mbarriers) are
 * left as the pipeline pass arranged them. In a warp-specialised kernel the
 * producer warpgroup's side needs nothing, and the consumers' barriers are
 * named barriers over their own threads (the producer never joins them).
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

#define MAX_INFLIGHT 32

typedef struct group {
    int32_t acc, acc2; /* the accumulator fragments it writes (acc2: a pair's second, or 0) */
    int32_t a, b, b2;  /* the operands it reads */
} group;

typedef struct state {
    tli_bufset wr, rd; /* visible buffers touched since the last barrier */
    tli_bufset async;  /* tiles of standalone cp.async copies not waited for */
    group fly[MAX_INFLIGHT];
    int nfly;
} state;

/* What a dry walk of a loop made of the states it was entered with (the
 * last MEMO_WAYS of them). A dry walk of a loop walks its body twice, so
 * without it loops nested d deep cost 2^d walks of the innermost body;
 * with it, an inner loop entered again in the same state costs a lookup,
 * which is what the outer loop's second walk does when no wgmma group
 * changes what is in flight. Only dry walks read it: they all happen
 * before the real walk that inserts statements into the same body. */
#define MEMO_WAYS 4
typedef struct memo {
    state in[MEMO_WAYS], out[MEMO_WAYS];
    int used, next;
} memo;

typedef struct syncer {
    tli_lowered *L;
    tli_ir *ir;
    int32_t nbufs;
    bool dry;          /* only compute the end state: insert nothing */
    memo **memo;       /* per loop statement of the lowered body (nmemo of them), made on first use */
    int32_t nmemo;
    int32_t bar_id;    /* barrier inserted here: 0 CTA, else named barrier id expression */
    int bar_threads;
} syncer;

static void state_free(state *s);

static bool state_init(syncer *Y, state *s)
{
    memset(s, 0, sizeof *s);
    if (tli_bufset_init(&s->wr, Y->nbufs) && tli_bufset_init(&s->rd, Y->nbufs) && tli_bufset_init(&s->async, Y->nbufs))
        return true;
    state_free(s); /* what was made before the failure (the rest is NULL) */
    tli_low_fail(Y->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    return false;
}

static void state_free(state *s)
{
    tli_bufset_free(&s->wr);
    tli_bufset_free(&s->rd);
    tli_bufset_free(&s->async);
}

static void state_copy(state *d, const state *s)
{
    memcpy(d->wr.bits, s->wr.bits, (size_t)s->wr.words * sizeof *s->wr.bits);
    memcpy(d->rd.bits, s->rd.bits, (size_t)s->rd.words * sizeof *s->rd.bits);
    memcpy(d->async.bits, s->async.bits, (size_t)s->async.words * sizeof *s->async.bits);
    memcpy(d->fly, s->fly, sizeof s->fly);
    d->nfly = s->nfly;
}

/* d = what may hold after either d or s */
static void state_merge(state *d, const state *s)
{
    tli_bufset_union(&d->wr, &s->wr);
    tli_bufset_union(&d->rd, &s->rd);
    tli_bufset_union(&d->async, &s->async);
    if (s->nfly > d->nfly) { /* the longer history waits for more */
        memcpy(d->fly, s->fly, sizeof s->fly);
        d->nfly = s->nfly;
    }
}

static bool state_equal(const state *a, const state *b)
{
    size_t w = (size_t)a->wr.words * sizeof *a->wr.bits;
    return a->nfly == b->nfly && memcmp(a->fly, b->fly, (size_t)a->nfly * sizeof *a->fly) == 0 &&
           memcmp(a->wr.bits, b->wr.bits, w) == 0 && memcmp(a->rd.bits, b->rd.bits, w) == 0 &&
           memcmp(a->async.bits, b->async.bits, w) == 0;
}

static void memo_free(memo *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->used; i++) {
        state_free(&m->in[i]);
        state_free(&m->out[i]);
    }
    free(m);
}

/* A place in a statement list that survives the statement array growing:
 * the field of `owner` that holds the next statement (owner 0: the body of
 * the kernel). */
typedef struct link {
    int32_t owner;
    enum { L_KERNEL, L_BODY, L_ORELSE, L_NEXT } field;
} link;

static int32_t *at(syncer *Y, link l)
{
    tli_snode *o = &Y->ir->s.v[l.owner];
    switch (l.field) {
    case L_BODY: return &o->body;
    case L_ORELSE: return &o->orelse;
    case L_NEXT: return &o->next;
    default: return &Y->ir->body;
    }
}

static bool visible(const tli_ir *ir, int32_t b)
{
    int sc = tli_B(ir, b)->scope;
    return sc == B_SHARED || sc == B_GLOBAL;
}

/* The statement's reads and writes of visible buffers. */
static void access(syncer *Y, int32_t s, tli_bufset *rd, tli_bufset *wr)
{
    tli_bufset_clear(rd);
    tli_bufset_clear(wr);
    tli_stmt_access(Y->L, s, rd, wr);
}

/* Inserts statement n where *l points (before the statement there) and
 * moves l past it. */
static void insert_at(syncer *Y, link *l, tli_snode n, int32_t parent)
{
    if (Y->dry)
        return;
    n.next = *at(Y, *l);
    n.parent = parent;
    int32_t id = tli_low_stmt(Y->L, &n);
    if (!id)
        return;
    *at(Y, *l) = id;
    *l = (link){id, L_NEXT};
}

/* Whether a plain store to a tile that wgmma reads (a blocked operand) is
 * among the writes a barrier orders: wgmma reads through the async proxy,
 * which sees those stores only after a proxy fence by the threads that made
 * them (then the barrier). */
static bool writes_async_operand(const syncer *Y, const state *st)
{
    if (!Y->L->async_proxy)
        return false;
    for (int32_t b = 1; b < Y->nbufs; b++)
        if (tli_bufset_has(&st->wr, b) && tli_B(Y->ir, b)->scope == B_SHARED && Y->L->smem[b].blocked)
            return true;
    return false;
}

/* A block barrier settles what the threads wrote and read before it, but
 * not the reads of wgmma groups still in flight: those go on until each
 * warpgroup waits for its own. Their shared operand tiles stay read, so a
 * write into one later gets its wait and then a barrier, in that order: a
 * warpgroup that has waited for its group must not overwrite a tile the
 * other warpgroup's group may still be reading (a plain loop's copy into V
 * after the P V gemm of the iteration before). */
static void inflight_reads(syncer *Y, state *st)
{
    for (int i = 0; i < st->nfly; i++) {
        const int32_t ops[] = {st->fly[i].a, st->fly[i].b, st->fly[i].b2};
        for (int j = 0; j < 3; j++)
            if (ops[j] && tli_B(Y->ir, ops[j])->scope == B_SHARED)
                tli_bufset_add(&st->rd, ops[j]);
    }
}

static void settle_at_barrier(syncer *Y, state *st)
{
    tli_bufset_clear(&st->wr);
    tli_bufset_clear(&st->rd);
    inflight_reads(Y, st);
}

static void barrier_before(syncer *Y, link *l, int32_t parent, state *st)
{
    bool fenced = l->field == L_NEXT && tli_S(Y->ir, l->owner)->op == S_FENCE_ASYNC; /* (after a cp.async wait) */
    if (!fenced && writes_async_operand(Y, st)) {
        tli_snode f = {.op = S_FENCE_ASYNC};
        insert_at(Y, l, f, parent);
    }
    tli_snode b = {.op = S_BARRIER, .a0 = Y->bar_id, .a1 = Y->bar_threads};
    insert_at(Y, l, b, parent);
    settle_at_barrier(Y, st);
}

static void op_before(syncer *Y, link *l, int32_t parent, tli_sop op, int32_t a1)
{
    tli_snode n = {.op = (uint8_t)op, .a1 = a1};
    insert_at(Y, l, n, parent);
}

static bool is_wgmma(const tli_snode *n) { return n->op == S_GEMM && n->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16; }

/* The wgmma wait statement s needs: the groups younger than the youngest
 * one it conflicts with may stay in flight. */
static void wgmma_wait_before(syncer *Y, link *l, int32_t parent, state *st, int32_t s, const tli_bufset *frd,
                              const tli_bufset *fwr)
{
    const tli_snode *n = tli_S(Y->ir, s);
    int youngest = -1;
    for (int i = 0; i < st->nfly; i++) {
        const group *g = &st->fly[i];
        bool acc = tli_bufset_has(frd, g->acc) || tli_bufset_has(fwr, g->acc) ||
                   (g->acc2 && (tli_bufset_has(frd, g->acc2) || tli_bufset_has(fwr, g->acc2)));
        /* the next wgmma into the same accumulators is ordered by the tensor
         * cores, unless it reads those registers as its A operand */
        if (is_wgmma(n) && n->gemm[2] == g->acc && tli_gemm_acc2(n) == g->acc2 && n->gemm[0] != g->acc &&
            (!g->acc2 || n->gemm[0] != g->acc2))
            acc = false;
        bool overwrites = tli_bufset_has(fwr, g->a) || tli_bufset_has(fwr, g->b) ||
                          (g->b2 && tli_bufset_has(fwr, g->b2));
        if (acc || overwrites)
            youngest = i;
    }
    if (youngest < 0)
        return;
    int keep = st->nfly - 1 - youngest;
    op_before(Y, l, parent, S_WGMMA_WAIT, keep);
    memmove(st->fly, st->fly + youngest + 1, (size_t)keep * sizeof *st->fly);
    st->nfly = keep;
}

static void walk(syncer *Y, link l, int32_t parent, state *st);

/* Every buffer, fragments included, that s reads and writes. */
static void all_access(syncer *Y, int32_t s, tli_bufset *rd, tli_bufset *wr)
{
    tli_bufset_clear(rd);
    tli_bufset_clear(wr);
    tli_stmt_access(Y->L, s, rd, wr);
}

/* Keeps the buffers of set that threads of the block share: shared
 * memory, and global memory unless `global` is false (the next iteration
 * of a persistent CTA's tile loop is another block, which no barrier
 * orders against this one's global accesses in a launch of one CTA per
 * block either). */
static void keep_visible(syncer *Y, tli_bufset *set, bool global)
{
    for (int32_t b = 1; b < Y->nbufs; b++)
        if (tli_bufset_has(set, b) && !(visible(Y->ir, b) && (global || tli_B(Y->ir, b)->scope == B_SHARED)))
            set->bits[b / 64] &= ~(1ull << (b % 64));
}

/* What the next iteration of loop s touches before a barrier: the
 * statements of its body ahead of the first block barrier at its top
 * level (a pipeline's), or the whole body when there is none. */
static void head_access(syncer *Y, int32_t s, tli_bufset *rd, tli_bufset *wr)
{
    int32_t c = tli_S(Y->ir, s)->body;
    while (c && tli_S(Y->ir, c)->op != S_BARRIER)
        c = tli_S(Y->ir, c)->next;
    if (!c) {
        access(Y, s, rd, wr);
        return;
    }
    tli_bufset_clear(rd);
    tli_bufset_clear(wr);
    for (c = tli_S(Y->ir, s)->body; tli_S(Y->ir, c)->op != S_BARRIER; c = tli_S(Y->ir, c)->next)
        tli_stmt_access(Y->L, c, rd, wr);
}

/* The slot of loop s's memo its dry walk from st has filled, or -1. */
static int memo_find(syncer *Y, int32_t s, const state *st)
{
    memo *m = s < Y->nmemo ? Y->memo[s] : NULL;
    for (int i = 0; m && i < m->used; i++)
        if (state_equal(&m->in[i], st))
            return i;
    return -1;
}

/* Remembers that a dry walk of loop s turned `in` into `out`. */
static void memo_keep(syncer *Y, int32_t s, const state *in, const state *out)
{
    if (s >= Y->nmemo)
        return;
    memo *m = Y->memo[s];
    if (!m && !(m = Y->memo[s] = calloc(1, sizeof *m))) {
        tli_low_fail(Y->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return;
    }
    int i = m->next;
    if (i == m->used) {
        if (!state_init(Y, &m->in[i]))
            return;
        if (!state_init(Y, &m->out[i])) {
            state_free(&m->in[i]);
            return;
        }
        m->used++;
    }
    state_copy(&m->in[i], in);
    state_copy(&m->out[i], out);
    m->next = (i + 1) % MEMO_WAYS;
}

static void walk_loop_once(syncer *Y, int32_t s, state *st);

/* Loop s from state st: a real walk, or a dry one answered from the memo
 * when it can be. */
static void walk_loop(syncer *Y, int32_t s, state *st)
{
    if (!Y->dry) {
        walk_loop_once(Y, s, st);
        return;
    }
    int hit = memo_find(Y, s, st);
    if (hit >= 0) {
        state_copy(st, &Y->memo[s]->out[hit]);
        return;
    }
    state in;
    if (!state_init(Y, &in))
        return;
    state_copy(&in, st);
    walk_loop_once(Y, s, st);
    if (Y->L->st == TL_OK)
        memo_keep(Y, s, &in, st);
    state_free(&in);
}

/* A loop: the body walked from the state it is entered with, except that
 * the wgmma groups one iteration leaves in flight (found by a dry walk)
 * are in flight when the next starts; what the end of an iteration leaves
 * against what the next one touches before its first barrier gets a
 * barrier at the end of the body, and a copy still pending that the body
 * touches anywhere its wait. */
static void walk_loop_once(syncer *Y, int32_t s, state *st)
{
    state probe, run;
    if (!state_init(Y, &probe))
        return;
    if (!state_init(Y, &run)) {
        state_free(&probe);
        return;
    }
    state_copy(&probe, st);
    bool dry = Y->dry;
    Y->dry = true;
    walk(Y, (link){s, L_BODY}, s, &probe);
    Y->dry = dry;
    state_copy(&run, st);
    if (probe.nfly) { /* (their tiles still read: settle_at_barrier) */
        memcpy(run.fly, probe.fly, sizeof probe.fly);
        run.nfly = probe.nfly;
        inflight_reads(Y, &run);
    }
    walk(Y, (link){s, L_BODY}, s, &run);
    tli_bufset rd = {0}, wr = {0};
    if (!tli_bufset_init(&rd, Y->nbufs) || !tli_bufset_init(&wr, Y->nbufs))
        tli_low_fail(Y->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    else {
        access(Y, s, &rd, &wr);
        bool copy = tli_bufset_meets(&run.async, &rd) || tli_bufset_meets(&run.async, &wr);
        head_access(Y, s, &rd, &wr);
        bool global = tli_S(Y->ir, s)->op != S_TILE_LOOP;
        keep_visible(Y, &rd, global);
        keep_visible(Y, &wr, global);
        bool hazard = tli_bufset_meets(&run.wr, &rd) || tli_bufset_meets(&run.wr, &wr) || tli_bufset_meets(&run.rd, &wr);
        if (hazard || copy) {
            link end = {s, L_BODY};
            while (*at(Y, end))
                end = (link){*at(Y, end), L_NEXT};
            if (copy) {
                op_before(Y, &end, s, S_CP_WAIT, 0);
                if (Y->L->async_proxy)
                    op_before(Y, &end, s, S_FENCE_ASYNC, 0);
                tli_bufset_clear(&run.async);
            }
            barrier_before(Y, &end, s, &run);
        }
    }
    tli_bufset_free(&rd);
    tli_bufset_free(&wr);
    state_merge(st, &run); /* the loop may run zero times */
    state_free(&probe);
    state_free(&run);
}

static void walk_branch(syncer *Y, link l, int32_t parent, state *st, state *out)
{
    state b;
    if (!state_init(Y, &b))
        return;
    state_copy(&b, st);
    walk(Y, l, parent, &b);
    state_merge(out, &b);
    state_free(&b);
}

/* The consumer side of a warp-specialised kernel: named barriers over the
 * consumer group's threads. */
static void walk_consumers(syncer *Y, link l, int32_t parent, state *st)
{
    int32_t saved_id = Y->bar_id, saved_n = Y->bar_threads;
    /* barrier 0 is the CTA's; group g of a ping-pong CTA uses 1 + g */
    tli_lowered *L = Y->L;
    bool persistent = L->launch.persistent > 1;
    Y->bar_id = persistent ? tli_low_bin(L, E_ADD, tli_low_thread(L, TH_WG), tli_low_int(L, 1, TL_I32))
                           : tli_low_int(L, 1, TL_I32);
    Y->bar_threads = Y->ir->threads;
    walk(Y, l, parent, st);
    Y->bar_id = saved_id;
    Y->bar_threads = saved_n;
}

static void walk(syncer *Y, link l, int32_t parent, state *st)
{
    tli_bufset rd = {0}, wr = {0}, frd = {0}, fwr = {0}; /* freed at out: even those never made */
    if (!tli_bufset_init(&rd, Y->nbufs) || !tli_bufset_init(&wr, Y->nbufs) || !tli_bufset_init(&frd, Y->nbufs) ||
        !tli_bufset_init(&fwr, Y->nbufs)) {
        tli_low_fail(Y->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    for (; *at(Y, l) && Y->L->st == TL_OK; l = (link){*at(Y, l), L_NEXT}) {
        int32_t s = *at(Y, l);
        tli_snode *n = &Y->ir->s.v[s];
        switch ((tli_sop)n->op) {
        case S_BARRIER: /* the pipeline's own: a barrier of this context */
            if (!Y->dry) {
                n->a0 = Y->bar_id;
                n->a1 = Y->bar_threads;
            }
            settle_at_barrier(Y, st);
            continue;
        case S_CLUSTER_SYNC: /* every thread of the CTA (and of the cluster) arrives: a barrier too */
            settle_at_barrier(Y, st);
            continue;
        case S_CP_WAIT:
            if (n->a1 == 0) { /* the standalone copies landed (for this thread) */
                tli_bufset_union(&st->wr, &st->async);
                tli_bufset_clear(&st->async);
            }
            continue;
        case S_WGMMA_WAIT:
            if (n->a1 < st->nfly) {
                memmove(st->fly, st->fly + st->nfly - n->a1, (size_t)n->a1 * sizeof *st->fly);
                st->nfly = n->a1;
            }
            continue;
        case S_STAGE:
            walk(Y, (link){s, L_BODY}, s, st);
            continue;
        case S_IF:
            if (n->x[TLI_X_IF_ROLES]) { /* producer: managed; consumers: their own barriers */
                walk_consumers(Y, (link){s, L_ORELSE}, s, st);
                continue;
            }
            break;
        case S_LET:
        case S_FENCE_ASYNC:
        case S_CP_COMMIT:
        case S_MBAR_INIT:
        case S_MBAR_WAIT:
        case S_MBAR_ARRIVE:
        case S_MBAR_EXPECT:
        case S_SETMAXNREG:
        case S_WARP_SYNC:
        case S_TMA_STORE: /* a staging tile's store: ordered by the pipeline's barriers and bulk waits */
        case S_BULK_WAIT:
        case S_SK_FIXUP: /* the accumulator is this thread's; the workspace, ordered by its flags */
            continue;
        case S_COPY:
            if (n->x[TLI_X_COPY_MANAGED])
                continue;
            break;
        default: break;
        }
        all_access(Y, s, &frd, &fwr);
        memcpy(rd.bits, frd.bits, (size_t)rd.words * sizeof *rd.bits);
        memcpy(wr.bits, fwr.bits, (size_t)wr.words * sizeof *wr.bits);
        keep_visible(Y, &rd, true);
        keep_visible(Y, &wr, true);
        /* the statement's own waits, then its barrier */
        bool waits_copy = tli_bufset_meets(&st->async, &frd) || tli_bufset_meets(&st->async, &fwr);
        if (waits_copy) {
            op_before(Y, &l, parent, S_CP_WAIT, 0);
            if (Y->L->async_proxy)
                op_before(Y, &l, parent, S_FENCE_ASYNC, 0);
            tli_bufset_union(&st->wr, &st->async);
            tli_bufset_clear(&st->async);
        }
        wgmma_wait_before(Y, &l, parent, st, s, &frd, &fwr);
        bool hazard = tli_bufset_meets(&st->wr, &rd) || tli_bufset_meets(&st->wr, &wr) || tli_bufset_meets(&st->rd, &wr);
        if (hazard || waits_copy)
            barrier_before(Y, &l, parent, st);
        int op = Y->ir->s.v[s].op;
        /* inside: loops and branches */
        if (op == S_SERIAL || op == S_TILE_LOOP) {
            walk_loop(Y, s, st);
        } else if (op == S_IF) {
            state merged;
            if (state_init(Y, &merged)) {
                state_copy(&merged, st);
                walk_branch(Y, (link){s, L_BODY}, s, st, &merged);
                walk_branch(Y, (link){s, L_ORELSE}, s, st, &merged);
                state_copy(st, &merged);
                state_free(&merged);
            }
        }
        /* what it leaves behind */
        n = &Y->ir->s.v[s];
        if (n->op == S_COPY && n->x[TLI_X_COPY_HOW] == CP_ASYNC16) {
            tli_bufset_union(&st->rd, &rd);
            tli_bufset_add(&st->async, tli_copy_buf(Y->ir, n->a1));
        } else if (op != S_SERIAL && op != S_TILE_LOOP && op != S_IF) {
            tli_bufset_union(&st->rd, &rd);
            tli_bufset_union(&st->wr, &wr);
        }
        if (is_wgmma(n)) {
            if (st->nfly == MAX_INFLIGHT) {
                memmove(st->fly, st->fly + 1, (MAX_INFLIGHT - 1) * sizeof *st->fly);
                st->nfly--;
            }
            st->fly[st->nfly++] = (group){n->gemm[2], tli_gemm_acc2(n), n->gemm[0], n->gemm[1], n->x[TLI_X_GEMM_PAIR_B]};
        }
        /* (l still holds s: the loop's step moves to its next) */
    }
out:
    tli_bufset_free(&rd);
    tli_bufset_free(&wr);
    tli_bufset_free(&frd);
    tli_bufset_free(&fwr);
}

void tli_pass_sync(tli_lowered *L)
{
    syncer Y = {.L = L, .ir = &L->ir, .nbufs = L->ir.b.n};
    Y.memo = calloc((size_t)L->ir.s.n + 1, sizeof *Y.memo);
    Y.nmemo = L->ir.s.n;
    state st;
    if (!Y.memo) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return;
    }
    if (!state_init(&Y, &st)) {
        free(Y.memo);
        return;
    }
    walk(&Y, (link){0, L_KERNEL}, 0, &st);
    /* nothing may still be writing when the block ends */
    link end = {0, L_KERNEL};
    while (*at(&Y, end))
        end = (link){*at(&Y, end), L_NEXT};
    if (st.nfly)
        op_before(&Y, &end, 0, S_WGMMA_WAIT, 0);
    if (!tli_bufset_empty(&st.async))
        op_before(&Y, &end, 0, S_CP_WAIT, 0);
    state_free(&st);
    for (int32_t i = 0; i < Y.nmemo; i++)
        memo_free(Y.memo[i]);
    free(Y.memo);
}
