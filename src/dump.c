/*
 * dump.c - the kernel graph as text: the builder's graph (tl_kernel_dump)
 * or the lowered kernel after any pass (TILEC_DUMP, tilec dump), one
 * statement per line with its id, nested bodies indented, every decision a
 * pass recorded on it in brackets. Meant for people reading why a kernel
 * came out as it did, and for golden files: the same kernel gives the same
 * text.
 */
#include "lower.h"

#include <math.h>
#include <string.h>

typedef struct dumper {
    const tli_ir *ir;
    const tli_lowered *L; /* NULL: the builder's graph */
    tli_str *out;
    int budget;           /* characters left for the expression being printed */
} dumper;

static const char *thread_names[] = {"tid", "warp", "lane", "wg", "threadIdx.x", "blockIdx.x", "blockIdx.y",
                                     "blockIdx.z", "gridDim.x", "gridDim.y", "tile", "sk.j0", "sk.j1",
                                     "sk.base", "run", "run.blocks"};

static void expr(dumper *D, int32_t e, int depth);

static void args(dumper *D, const tli_enode *n, int depth)
{
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++) {
        tli_str_append(D->out, i ? ", " : "");
        expr(D, n->a[i], depth + 1);
    }
}

static void expr(dumper *D, int32_t e, int depth)
{
    if (!e) {
        tli_str_append(D->out, "-");
        return;
    }
    if (D->budget <= 0 || depth > 64) {
        tli_str_appendf(D->out, "e%d", e);
        return;
    }
    D->budget -= 8;
    const tli_enode *n = tli_E(D->ir, e);
    switch ((tli_eop)n->op) {
    case E_CONST_INT: tli_str_appendf(D->out, "%lld%s", (long long)n->ival, n->dtype == TL_I32 ? "i32" : ""); break;
    case E_CONST_FLOAT:
        if (isinf(n->fval) || isnan(n->fval))
            tli_str_appendf(D->out, "%s:%s", isnan(n->fval) ? "nan" : n->fval > 0 ? "inf" : "-inf",
                            tl_dtype_name((tl_dtype)n->dtype));
        else
            tli_str_appendf(D->out, "%.9g:%s", n->fval, tl_dtype_name((tl_dtype)n->dtype));
        break;
    case E_PARAM: tli_str_append(D->out, D->ir->p.v[n->param].name); break;
    case E_BLOCK_IDX: tli_str_appendf(D->out, "block.%c", "xyz"[n->ival]); break;
    case E_LOOP_VAR: tli_str_appendf(D->out, "i%d.%d", n->loop, (int)n->ival); break;
    case E_LET: tli_str_appendf(D->out, "%s@%d", tli_str_at(D->ir, tli_S(D->ir, n->loop)->name), n->loop); break;
    case E_THREAD:
        tli_str_append(D->out, n->ival >= 0 && n->ival <= TLI_TH_LAST ? thread_names[n->ival] : "?");
        break;
    case E_LOAD:
        tli_str_appendf(D->out, "%s[", tli_B(D->ir, n->buf)->name);
        for (int d = 0; d < tli_B(D->ir, n->buf)->rank; d++) {
            tli_str_append(D->out, d ? ", " : "");
            expr(D, D->ir->pool.v[n->idx + d], depth + 1);
        }
        tli_str_append(D->out, n->vec ? "]{chunk}" : "]");
        break;
    case E_CAST:
        tli_str_appendf(D->out, "%s(", tl_dtype_name((tl_dtype)n->dtype));
        expr(D, n->a[0], depth + 1);
        tli_str_append(D->out, ")");
        break;
    default:
        tli_str_appendf(D->out, "%s(", tli_eop_name((tli_eop)n->op));
        args(D, n, depth);
        tli_str_append(D->out, ")");
        break;
    }
}

static void line_expr(dumper *D, int32_t e)
{
    D->budget = 4000;
    expr(D, e, 0);
}

static const char *scope_name(int s)
{
    static const char *const n[] = {"", "global", "shared", "fragment", "local", "mbarriers", "words"};
    return s >= 0 && s <= B_WORDS ? n[s] : "?";
}

static void region(dumper *D, int32_t operand)
{
    int32_t b = tli_copy_buf(D->ir, operand);
    tli_str_append(D->out, tli_B(D->ir, b)->name);
    if (operand > 0 && tli_R(D->ir, operand)->tiled) {
        tli_str_append(D->out, ".tile(");
        for (int d = 0; d < tli_B(D->ir, b)->rank; d++) {
            tli_str_append(D->out, d ? ", " : "");
            line_expr(D, tli_R(D->ir, operand)->idx[d]);
        }
        tli_str_append(D->out, ")");
    }
}

static void indent(dumper *D, int depth)
{
    for (int i = 0; i < depth; i++)
        tli_str_append(D->out, "  ");
}

static const char *copy_how(int h)
{
    static const char *const n[] = {"", "elements", "cp.async16", "tma", "registers", "row runs", "tma store"};
    return h >= 0 && h <= CP_TMA_STORE ? n[h] : "?";
}

static void stmts(dumper *D, int32_t first, int depth);

/* A reduction's op (tli_redop) for the dump. */
static const char *red_op(int op)
{
    static const char *const ops[] = {"max", "sum", "min", "absmax"};
    return op >= 0 && op < 4 ? ops[op] : "?";
}

static void stmt(dumper *D, int32_t s, int depth)
{
    const tli_snode *n = tli_S(D->ir, s);
    tli_str *o = D->out;
    indent(D, depth);
    tli_str_appendf(o, "s%d: ", s);
    switch ((tli_sop)n->op) {
    case S_STORE:
        tli_str_appendf(o, "%s[", tli_B(D->ir, n->buf)->name);
        for (int d = 0; d < tli_B(D->ir, n->buf)->rank; d++) {
            tli_str_append(o, d ? ", " : "");
            line_expr(D, D->ir->pool.v[n->idx + d]);
        }
        tli_str_append(o, "] = ");
        line_expr(D, n->value);
        if (D->L && n->x[TLI_X_STORE_VEC])
            tli_str_append(o, " [chunks]");
        break;
    case S_SERIAL:
    case S_PIPELINED:
        tli_str_appendf(o, "%s i%d.0 < ", n->op == S_SERIAL ? "serial" : "pipelined", s);
        line_expr(D, n->a0);
        if (n->op == S_PIPELINED)
            tli_str_appendf(o, " stages %d", n->a1);
        if (D->L && n->op == S_SERIAL && n->x[TLI_X_SERIAL_UNROLL])
            tli_str_append(o, " [unrolled]");
        break;
    case S_PARALLEL:
        tli_str_append(o, "parallel [");
        for (int d = 0; d < n->rank; d++)
            tli_str_appendf(o, "%s%lld", d ? ", " : "", (long long)n->extents[d]);
        tli_str_append(o, "]");
        if (D->L && n->x[TLI_X_PAR_MODE] == PAR_FRAGMENT)
            tli_str_appendf(o, " [registers of %s]", tli_B(D->ir, n->x[TLI_X_PAR_FRAG])->name);
        else if (D->L && n->x[TLI_X_PAR_MODE])
            tli_str_appendf(o, " [%s, %d lanes, %d per thread, %d ahead]",
                            n->x[TLI_X_PAR_MODE] == PAR_VECTOR ? "vector" : "scalar", n->x[TLI_X_PAR_LANES],
                            n->x[TLI_X_PAR_PER_THREAD], n->x[TLI_X_PAR_GROUP]);
        break;
    case S_IF:
        tli_str_append(o, n->x[TLI_X_IF_ROLES] && D->L ? "roles if " : "if ");
        line_expr(D, n->a0);
        break;
    case S_COPY:
        tli_str_append(o, "copy ");
        region(D, n->a0);
        tli_str_append(o, " -> ");
        region(D, n->a1);
        if (D->L && n->x[TLI_X_COPY_HOW]) {
            tli_str_appendf(o, " [%s", copy_how(n->x[TLI_X_COPY_HOW]));
            if (n->x[TLI_X_COPY_HOW] == CP_TMA) {
                tli_str_appendf(o, " map %d on %s[", n->x[TLI_X_COPY_MAP], tli_B(D->ir, n->x[TLI_X_COPY_BAR])->name);
                line_expr(D, n->x[TLI_X_COPY_BAR_IDX]);
                tli_str_append(o, "]");
                if (n->x[TLI_X_COPY_MCAST])
                    tli_str_appendf(o, ", multicast over axes %s%s%s", n->x[TLI_X_COPY_MCAST] & 1 ? "x" : "",
                                    n->x[TLI_X_COPY_MCAST] & 2 ? "y" : "", n->x[TLI_X_COPY_MCAST] & 4 ? "z" : "");
            }
            if (n->x[TLI_X_COPY_HOW] == CP_TMA_STORE)
                tli_str_appendf(o, " through %s, round %d, map %d", tli_B(D->ir, n->x[TLI_X_COPY_STAGING])->name,
                                n->x[TLI_X_COPY_ROUND], n->x[TLI_X_COPY_MAP]);
            if (n->x[TLI_X_COPY_THREADS])
                tli_str_appendf(o, " by %d threads", n->x[TLI_X_COPY_THREADS]);
            tli_str_append(o, n->x[TLI_X_COPY_MANAGED] ? ", pipelined]" : "]");
        }
        break;
    case S_FILL:
        tli_str_appendf(o, "fill %s = ", tli_B(D->ir, n->buf)->name);
        if (n->value)
            line_expr(D, n->value);
        else
            tli_str_append(o, "0");
        break;
    case S_GEMM:
        tli_str_appendf(o, "gemm %s += %s%s * %s%s", tli_B(D->ir, n->gemm[2])->name, tli_B(D->ir, n->gemm[0])->name,
                        n->a1 & TL_GEMM_TRANS_A ? "^T" : "", tli_B(D->ir, n->gemm[1])->name,
                        n->a1 & TL_GEMM_TRANS_B ? "^T" : "");
        if (D->L && n->x[TLI_X_GEMM_ATOM])
            tli_str_appendf(o, " [%s%s%s]", n->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16 ? "wgmma" : "mma.sync",
                            n->x[TLI_X_GEMM_A_REGS] ? ", A in registers" : "",
                            n->x[TLI_X_GEMM_ZERO] ? ", from zero (the clear folded in)" : "");
        if (D->L && tli_gemm_acc2(n))
            tli_str_appendf(o, " [paired: %s += %s * %s^T in the same wgmma]", tli_B(D->ir, n->x[TLI_X_GEMM_PAIR_C])->name,
                            tli_B(D->ir, n->gemm[0])->name, tli_B(D->ir, n->x[TLI_X_GEMM_PAIR_B])->name);
        break;
    case S_REDUCE: {
        int op = n->a1 & TLI_REDUCE_OP_MASK;
        if (n->a1 & TLI_REDUCE_FINAL)
            tli_str_appendf(o, "finalize %s (holders' parts summed)", tli_B(D->ir, n->gemm[1])->name);
        else
            tli_str_appendf(o, "reduce_%s %s -> %s%s dim %d%s", red_op(op), tli_B(D->ir, n->gemm[0])->name,
                            tli_B(D->ir, n->gemm[1])->reducer ? "reducer " : "", tli_B(D->ir, n->gemm[1])->name,
                            n->rank, n->a1 & TLI_REDUCE_ACCUM ? " accumulate" : "");
        if (D->L && (n->x[TLI_X_RED_LANES] || n->x[TLI_X_RED_WARPS]))
            tli_str_appendf(o, " [lanes 0x%x, warps 0x%x%s]", n->x[TLI_X_RED_LANES], n->x[TLI_X_RED_WARPS],
                            n->x[TLI_X_RED_PHASE] ? (n->x[TLI_X_RED_PHASE] == 1 ? ", phase 1" : ", phase 2") : "");
        break;
    }
    case S_FINALIZE: tli_str_appendf(o, "finalize %s", tli_B(D->ir, n->buf)->name); break;
    case S_CLUSTER_REDUCE: {
        int op = n->a1 & TLI_REDUCE_OP_MASK;
        tli_str_appendf(o, "cluster_reduce_%s %s", red_op(op), tli_B(D->ir, n->buf)->name);
        if (n->a0)
            tli_str_appendf(o, " to rank %d", n->a0 - 1);
        if (D->L && n->x[TLI_X_RED_SCRATCH])
            tli_str_appendf(o, " [slots %s, writers tid & 0x%x == 0]", tli_B(D->ir, n->x[TLI_X_RED_SCRATCH])->name,
                            n->x[TLI_X_RED_LANES]);
        break;
    }
    case S_LET:
        tli_str_appendf(o, "let %s = ", tli_str_at(D->ir, n->name));
        line_expr(D, n->a0);
        if (D->L && n->x[TLI_X_LET_WARP_UNIFORM])
            tli_str_append(o, " [warp-uniform]");
        break;
    case S_STAGE:
        tli_str_append(o, "stage ");
        line_expr(D, n->a0);
        tli_str_append(o, " of");
        for (int i = 0; i < n->rank; i++)
            tli_str_appendf(o, " %s", tli_B(D->ir, n->vars[i])->name);
        break;
    case S_BARRIER:
        if (n->a0) {
            tli_str_append(o, "barrier ");
            line_expr(D, n->a0);
            tli_str_appendf(o, " of %d threads", n->a1);
        } else {
            tli_str_append(o, "barrier");
        }
        break;
    case S_FENCE_ASYNC: tli_str_append(o, "fence.proxy.async"); break;
    case S_CP_COMMIT: tli_str_append(o, "cp.async.commit"); break;
    case S_CP_WAIT: tli_str_appendf(o, "cp.async.wait %d", n->a1); break;
    case S_WGMMA_WAIT: tli_str_appendf(o, "wgmma.wait %d", n->a1); break;
    case S_MBAR_INIT: tli_str_appendf(o, "mbarrier.init %s, %d arrivals", tli_B(D->ir, n->buf)->name, n->a1); break;
    case S_MBAR_WAIT:
    case S_MBAR_ARRIVE:
    case S_MBAR_EXPECT:
        tli_str_appendf(o, "mbarrier.%s %s[", n->op == S_MBAR_WAIT ? "wait" : n->op == S_MBAR_ARRIVE ? "arrive" : "expect",
                        tli_B(D->ir, n->buf)->name);
        line_expr(D, n->a0);
        tli_str_append(o, "]");
        if (n->op == S_MBAR_WAIT) {
            tli_str_append(o, " parity ");
            line_expr(D, n->value);
        } else if (n->op == S_MBAR_EXPECT) {
            tli_str_appendf(o, " %d bytes", n->a1);
        } else if (n->a1) {
            tli_str_append(o, " when this thread's cp.async land");
        } else if (n->x[TLI_X_MBAR_CLUSTER]) {
            tli_str_append(o, " in block ");
            line_expr(D, n->value);
            tli_str_append(o, " of the cluster");
        }
        break;
    case S_SETMAXNREG: tli_str_appendf(o, "setmaxnreg.%s %d", n->a0 ? "inc" : "dec", n->a1); break;
    case S_WARP_SYNC: tli_str_append(o, "syncwarp"); break;
    case S_ARRAY_BASE:
        tli_str_appendf(o, "%s = pointer ", tli_B(D->ir, n->buf)->name);
        line_expr(D, n->a0);
        tli_str_append(o, " of its array");
        break;
    case S_TMA_STORE:
        tli_str_appendf(o, "tma.store %s, round %d of s%d", tli_B(D->ir, n->buf)->name,
                        tli_S(D->ir, n->a0)->x[TLI_X_COPY_ROUND], n->a0);
        break;
    case S_BULK_WAIT: tli_str_appendf(o, "bulk.wait%s 0", n->a1 ? ".read" : ""); break;
    case S_CLUSTER_SYNC: tli_str_append(o, "barrier.cluster"); break;
    case S_TILE_LOOP:
        if (n->x[TLI_X_TILE_STREAMK]) {
            tli_str_append(o, "stream-k units of ");
            line_expr(D, n->value);
            tli_str_append(o, " steps a tile");
            break;
        }
        tli_str_append(o, "tiles p = ");
        line_expr(D, n->a0);
        tli_str_appendf(o, " step %d, %d per CTA turn", n->a1, n->x[TLI_X_TILE_PERSIST]);
        if (n->x[TLI_X_TILE_RUN]) {
            tli_str_append(o, ", running sums of trip counts ");
            line_expr(D, n->value);
        }
        if (n->x[TLI_X_TILE_COUNTER]) {
            static const char *const roles[] = {"", "taken", "read", "taken by the first thread, read by the others"};
            int r = n->x[TLI_X_TILE_COUNTER];
            tli_str_appendf(o, ", blocks from the counter (%s) through %s, %s / %s", r >= 1 && r <= 3 ? roles[r] : "?",
                            tli_B(D->ir, n->x[TLI_X_TILE_SLOTS])->name, tli_B(D->ir, n->x[TLI_X_TILE_SLOT_FULL])->name,
                            tli_B(D->ir, n->x[TLI_X_TILE_SLOT_EMPTY])->name);
        }
        break;
    case S_SK_FIXUP: tli_str_appendf(o, "stream-k fixup %s", tli_B(D->ir, n->buf)->name); break;
    case S_ATOMIC:
        if (n->name)
            tli_str_appendf(o, "%s = ", tli_str_at(D->ir, n->name));
        tli_str_appendf(o, "atomic.%s counter[%d], ", n->a1 ? "exch" : "add", n->x[0]);
        line_expr(D, n->a0);
        if (n->x[1]) { /* the let: the old value plus this */
            tli_str_append(o, " + ");
            line_expr(D, n->x[1]);
        }
        if (n->value) {
            tli_str_append(o, " when ");
            line_expr(D, n->value);
            tli_str_append(o, ", else ");
            if (n->x[2])
                line_expr(D, n->x[2]);
            else
                tli_str_append(o, "0");
        }
        break;
    case S_BREAK: tli_str_append(o, "break"); break;
    default: tli_str_appendf(o, "? op %d", n->op); break;
    }
    if (n->op != S_LET && n->op != S_ATOMIC && n->name)
        tli_str_appendf(o, "  // %s", tli_str_at(D->ir, n->name));
    bool block = n->body || n->op == S_SERIAL || n->op == S_PARALLEL || n->op == S_IF || n->op == S_PIPELINED;
    if (!block) {
        tli_str_append(o, "\n");
        return;
    }
    tli_str_append(o, " {\n");
    stmts(D, n->body, depth + 1);
    if (n->orelse) {
        indent(D, depth);
        tli_str_append(o, "} else {\n");
        stmts(D, n->orelse, depth + 1);
    }
    indent(D, depth);
    tli_str_append(o, "}\n");
}

static void stmts(dumper *D, int32_t first, int depth)
{
    for (int32_t s = first; s; s = tli_S(D->ir, s)->next)
        stmt(D, s, depth);
}

static void layout(dumper *D, int32_t b)
{
    const tli_frag_layout *f = &D->L->frag[b];
    switch (f->kind) {
    case FRAG_MMA:
    case FRAG_WGMMA:
        tli_str_appendf(D->out, " [%s %dx%d of %lldx%lld, %lld registers]", f->kind == FRAG_MMA ? "mma" : "wgmma",
                        f->w.wgm, f->w.wgn, (long long)f->w.wm, (long long)f->w.wn, (long long)f->per_thread);
        break;
    case FRAG_ROWS:
        tli_str_appendf(D->out, " [rows: runs of %d, %dx%d threads, %lld registers]", f->rows.v, f->rows.tr, f->rows.tc,
                        (long long)f->per_thread);
        break;
    case FRAG_SLICE:
        tli_str_appendf(D->out, " [slice of %s along %d, %lld registers]", tli_B(D->ir, f->parent)->name, f->dim,
                        (long long)f->per_thread);
        break;
    default: break;
    }
}

void tli_dump_ir(const tli_ir *ir, const tli_lowered *L, tli_str *out)
{
    dumper D = {ir, L, out, 0};
    tli_str_appendf(out, "kernel %s: %d threads, grid (", ir->name, ir->threads);
    for (int d = 0; d < 3; d++) {
        tli_str_append(out, d ? ", " : "");
        if (ir->grid[d])
            line_expr(&D, ir->grid[d]);
        else
            tli_str_append(out, "1");
    }
    tli_str_append(out, ")");
    if (tli_cluster_size(ir) > 1)
        tli_str_appendf(out, ", clusters of %d x %d x %d", ir->cluster[0], ir->cluster[1], ir->cluster[2]);
    if (ir->swizzle)
        tli_str_appendf(out, ", swizzle %d", ir->swizzle);
    if (ir->fast_math)
        tli_str_append(out, ", fast math");
    if (ir->pingpong)
        tli_str_append(out, ir->pingpong == 2 ? ", ping-pong with overlap" : ", ping-pong");
    if (ir->warp_specialize)
        tli_str_append(out, ", warp-specialised");
    if (ir->persistent)
        tli_str_append(out, ir->persistent == 2 ? ", persistent (a block counter)" : ", persistent");
    tli_str_append(out, "\n");
    for (int32_t i = 1; i < ir->p.n; i++) {
        const tli_param *p = &ir->p.v[i];
        static const char *kinds[] = {"tensor", "dim", "scalar"};
        tli_str_appendf(out, "  param %s: %s %s", p->name, kinds[p->kind], tl_dtype_name((tl_dtype)p->dtype));
        if (p->kind == TL_PARAM_TENSOR) {
            const tli_bnode *b = tli_B(ir, p->buf);
            tli_str_append(out, " [");
            for (int d = 0; d < b->rank; d++) {
                tli_str_append(out, d ? ", " : "");
                line_expr(&D, b->shape[d]);
            }
            tli_str_append(out, "] strides [");
            for (int d = 0; d < b->rank; d++) {
                tli_str_append(out, d ? ", " : "");
                line_expr(&D, b->stride[d]);
            }
            tli_str_append(out, "]");
            if (b->array_count) {
                tli_str_append(out, ", one per block.");
                tli_str_appendf(out, "%c of an array of ", "xyz"[b->array_axis]);
                line_expr(&D, b->array_count);
            }
        }
        tli_str_append(out, "\n");
    }
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        if (b->scope == B_GLOBAL)
            continue;
        tli_str_appendf(out, "  %s %s: %s [", b->reducer ? "reducer" : scope_name(b->scope), b->name, tl_dtype_name((tl_dtype)b->dtype));
        for (int d = 0; d < b->rank; d++)
            tli_str_appendf(out, "%s%lld", d ? ", " : "", (long long)b->cshape[d]);
        tli_str_append(out, "]");
        if (L && b->scope == B_FRAGMENT)
            layout(&D, i);
        char blk[40];
        const char *blocks = L && b->scope == B_SHARED && L->smem[i].blocked
                                 ? tli_fmt(blk, sizeof blk, "%lld-column blocks", (long long)tli_row128((tl_dtype)b->dtype))
                                 : NULL;
        if (L && (b->scope == B_SHARED || b->scope == B_MBAR || b->scope == B_WORDS) && L->smem[i].stages)
            tli_str_appendf(out, " [offset %lld, %d stage%s%s%s]", (long long)L->smem[i].offset, L->smem[i].stages,
                            L->smem[i].stages > 1 ? "s" : "", blocks ? ", " : "", blocks ? blocks : "");
        else if (blocks)
            tli_str_appendf(out, " [%s]", blocks);
        tli_str_append(out, "\n");
    }
    if (L && L->launch.threads) {
        const tli_launch_plan *lp = &L->launch;
        tli_str_appendf(out, "  launch: %d threads per CTA, bounds (%d, %d), %lld bytes of shared memory", lp->threads,
                        lp->threads, lp->min_blocks, (long long)lp->smem_bytes);
        if (lp->persistent)
            tli_str_appendf(out, ", persistent (%d blocks per CTA turn)", lp->persistent);
        for (int m = 0; m < lp->nmaps; m++)
            tli_str_appendf(out, ", map %d: %s box %lldx%lld", m, tli_B(ir, lp->maps[m].buf)->name,
                            (long long)lp->maps[m].box_outer, (long long)lp->maps[m].box_inner);
        for (int a = 0; a < lp->nalign; a++)
            tli_str_appendf(out, ", %s needs %s", tli_B(ir, lp->align[a].buf)->name,
                            lp->align[a].kind & TLI_ALIGN_CHUNKS ? "16-byte rows" : "16-byte strides");
        tli_str_append(out, "\n");
    }
    stmts(&D, ir->body, 1);
}

/* ------------------------------------------------------------ public API */

#include "ctx.h"
#include "kernel.h"

TL_API tl_status tl_kernel_dump(tl_kernel *k, char **text)
{
    if (!k || !text)
        return k ? tli_fail(k->ctx, TL_ERR_INVALID_ARG, "tl_kernel_dump: text is NULL") : TL_ERR_INVALID_ARG;
    *text = NULL;
    tli_str s;
    tli_str_init(&s);
    tli_dump_ir(&k->ir, NULL, &s);
    if (s.oom) {
        tli_str_free(&s);
        return tli_fail(k->ctx, TL_ERR_OUT_OF_MEMORY, "tl_kernel_dump: out of host memory");
    }
    *text = tli_str_take(&s);
    return *text ? TL_OK : tli_fail(k->ctx, TL_ERR_OUT_OF_MEMORY, "tl_kernel_dump: out of host memory");
}

TL_API tl_status tl_kernel_lower_dump(tl_kernel *k, const char *target, const char *pass, char **text)
{
    static const char api[] = "tl_kernel_lower_dump";
    if (!k || !text)
        return k ? tli_fail(k->ctx, TL_ERR_INVALID_ARG, "%s: text is NULL", api) : TL_ERR_INVALID_ARG;
    *text = NULL;
    if (!tli_pass_known(pass))
        return tli_fail(k->ctx, TL_ERR_INVALID_ARG,
                        "%s: unknown pass '%s' (verify, layout, threads, reduce, pipeline, smem, sync, launch, all)", api,
                        pass ? pass : "(null)");
    tl_status st = tli_kernel_verify(k, api);
    if (st != TL_OK)
        return st;
    tli_target t;
    const char *name = target ? target : tl_ctx_target(k->ctx);
    if (!tli_target_get(name, &t))
        return tli_fail(k->ctx, TL_ERR_INVALID_ARG, "%s: target '%s' is not of the form sm_XY or sm_XYa", api, name);
    tli_str s;
    tli_str_init(&s);
    tli_lower_options lo = {.dump = pass, .dump_out = &s};
    tli_lowered L;
    st = tli_lower(&k->ir, &t, &lo, &L);
    if (st != TL_OK)
        tli_fail(k->ctx, st, "%s: kernel '%s': %s", api, k->ir.name, L.err);
    tli_lowered_free(&L);
    if (st == TL_OK && s.oom)
        st = tli_fail(k->ctx, TL_ERR_OUT_OF_MEMORY, "%s: out of host memory", api);
    if (st == TL_OK)
        *text = tli_str_take(&s);
    tli_str_free(&s);
    return st;
}
