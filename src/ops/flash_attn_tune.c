/*
 * flash_attn_tune.c - FlashAttention forward as a tunable op: its schedules
 * as configurations (bm bn st th ws pp ps), the space the tuner tries, its
 * place in the tuning database, its problem, and the record the op consults
 * for an all-zero schedule.
 *
 * The problem: random Q, K, V in [-1, 1), rotated over copies; the
 * reference is the op's untuned run on the first copy, itself checked
 * first against a float64 attention of sampled rows (seven rows of each of
 * up to four heads, the first and last among them), so that each
 * candidate's whole output is compared with a result known to be right;
 * the baseline is that untuned run (its splits included). Each candidate
 * is one program whose blocks walk all their keys (split_kv = split_tail =
 * 1); a record leaves the splits to the op, and is saved only where the
 * best candidate beat the untuned run (baseline_untuned). Decoding shapes,
 * whose keys the op splits over blocks or whose grouped-query heads it
 * stacks as rows, are refused: the tuner times one program a run.
 */
#include "ops.h"

#include "ctx.h"
#include "half.h"
#include "target.h"
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COPIES 8
#define SAMPLE_HEADS 4 /* (batch, head) pairs whose rows the float64 check samples */
#define SAMPLE_ROWS 7  /* rows of each */
#define REFERENCE_TOL 1e-2 /* the untuned output against float64 on those rows, at least */

static const char *const param_names[] = {"bm", "bn", "st", "th", "ws", "pp", "ps", NULL};

static tl_flash_attn_schedule schedule_of(const tl_tune_config *c)
{
    return (tl_flash_attn_schedule){.block_m = c->v[0], .block_n = c->v[1], .stages = c->v[2], .threads = c->v[3],
                                    .warp_specialize = c->v[4], .pingpong = c->v[5], .persistent = c->v[6]};
}

/* desc's problem on contiguous [B, H, S, D] tensors: what the tuner runs. */
static tl_flash_attn_desc contiguous(const void *desc)
{
    tl_flash_attn_desc d = *(const tl_flash_attn_desc *)desc;
    memset(d.q_stride, 0, sizeof d.q_stride);
    memset(d.k_stride, 0, sizeof d.k_stride);
    memset(d.v_stride, 0, sizeof d.v_stride);
    memset(d.o_stride, 0, sizeof d.o_stride);
    return d;
}

static tl_tune_config config_of(const tl_flash_attn_schedule *s)
{
    return (tl_tune_config){{s->block_m, s->block_n, s->stages, s->threads, s->warp_specialize, s->pingpong,
                             s->persistent}};
}

/* ------------------------------------------------------------------------ */
/* Space, key, record                                                        */
/* ------------------------------------------------------------------------ */

/* The block's K/V ring and Q tile in shared memory, with room for the
 * mbarriers: whether target t holds it. */
static bool smem_fits(const tli_target *t, const tl_flash_attn_desc *d, int bm, int bn, int st)
{
    return tli_flash_attn_smem(d, bm, bn, st) + 1024 <= t->smem_limit;
}

static bool wgmma_target(tl_ctx *ctx, tli_target *t)
{
    return tli_target_get(ctx->target, t) && tli_target_has_mma(t, MMA_WGMMA_M64NNK16);
}

/* Structures of a block: rows, threads and the flags that go with them. */
typedef struct shape {
    int bm, th, ws, pp;
} shape;

/* The block structures of the op's space for d, with wgmma or mma.sync
 * (see space). */
static int shapes_of(bool wgmma, const tl_flash_attn_desc *d, shape *out)
{
    int n = 0;
    if (!wgmma) { /* mma.sync: warps of 32 or 16 rows, no producer */
        out[n++] = (shape){128, 128, 0, 0};
        out[n++] = (shape){128, 256, 0, 0};
        out[n++] = (shape){64, 128, 0, 0};
        return n;
    }
    if (d->seq_q <= 64) { /* one consumer warpgroup: more rows would be padding */
        out[n++] = (shape){64, 128, 1, 0};
        return n;
    }
    /* two consumer warpgroups of 64 rows, taking turns on the tensor cores up
     * to head_dim 128 (at 256 the output accumulator leaves no room for turns) */
    out[n++] = (shape){128, 256, 1, d->head_dim <= 128};
    if (d->head_dim <= 64) /* three groups of 64 rows without turns (D = 64's non-causal default) */
        out[n++] = (shape){192, 384, 1, 0};
    return n;
}

/* Key tiles worth trying for d's head_dim on block structure sh: around
 * the defaults (128 to 192 keys at head_dim 64, 176 at 128, 64 at 256; 64
 * and 128 on mma.sync); three groups of 64 rows hold 128 or 192 (bench/NOTES.md
 * sessions 20-21: their S takes 96 of 160 registers at 192). */
static int key_tiles(bool wgmma, const tl_flash_attn_desc *d, const shape *sh, int *out)
{
    if (sh->bm == 192) {
        out[0] = 128, out[1] = 192;
        return 2;
    }
    static const int w64[] = {128, 160, 176, 192}, w128[] = {128, 144, 160, 176}, w256[] = {48, 64, 80},
                     m64[] = {32, 64, 128}, m256[] = {32, 64};
    const int *v = wgmma ? (d->head_dim <= 64 ? w64 : d->head_dim <= 128 ? w128 : w256)
                         : (d->head_dim <= 128 ? m64 : m256);
    int n = wgmma ? (d->head_dim <= 128 ? 4 : 3) : (d->head_dim <= 128 ? 3 : 2);
    memcpy(out, v, (size_t)n * sizeof *out);
    return n;
}

/* On sm_90a: the block structures above, each key tile, 2 to 4 stages (2
 * and 3 for three groups), and the persistent CTAs dealt blocks in turn
 * (1) or taking them from a counter (2); one consumer group, not
 * persistent, for at most 64 query rows (the op's default there).
 * On mma.sync targets: 4 warps of 32 rows or 8 of 16 on 128 rows, 4 of 16
 * on 64, key tiles of 32 to 128, 2 and 3 stages. Every candidate's ring and
 * Q tile fit in the target's shared memory; what its registers cost is
 * left to the measurement (ptxas spills rather than fails). */
static int space(tl_ctx *ctx, const void *desc, tl_tune_config *out, int max)
{
    const tl_flash_attn_desc *d = desc;
    tli_target t;
    bool wgmma = wgmma_target(ctx, &t);
    if (!wgmma && !tli_target_get(ctx->target, &t))
        return 0;
    shape shapes[4];
    int bns[4], nshape = shapes_of(wgmma, d, shapes), n = 0;
    for (int i = 0; i < nshape; i++) {
        const shape *sh = &shapes[i];
        int nbn = key_tiles(wgmma, d, sh, bns);
        int most = sh->bm == 192 || !wgmma ? 3 : 4;
        bool persistent = wgmma && d->seq_q > 64;
        for (int b = 0; b < nbn; b++)
            for (int st = 2; st <= most; st++)
                for (int ps = persistent ? 1 : 0; ps <= (persistent ? 2 : 0); ps++)
                    if (smem_fits(&t, d, sh->bm, bns[b], st) && n < max)
                        out[n++] = (tl_tune_config){{sh->bm, bns[b], st, sh->th, sh->ws, sh->pp, ps}};
    }
    return n;
}

/* head_dim and the mask in the layout, the lengths of queries and keys
 * (tli_tune_bucket's) and the (batch, head) pairs to the nearest power of
 * two in the class: the block structure depends on the first, the tile's
 * ragged end on the lengths, and how the blocks fill the GPU's waves on
 * the pairs. */
static void key(const void *desc, tli_tune_key *out)
{
    const tl_flash_attn_desc *d = desc;
    memset(out, 0, sizeof *out);
    tli_fmt(out->op, sizeof out->op, "flash_attn");
    tli_fmt(out->dtypes, sizeof out->dtypes, "%s->%s", tl_dtype_name(d->dtype), tl_dtype_name(d->dtype));
    tli_fmt(out->layout, sizeof out->layout, "d%lld%s", (long long)d->head_dim, d->causal ? ",causal" : "");
    char q[32], kv[32];
    tli_tune_bucket('q', d->seq_q, q, sizeof q);
    tli_tune_bucket('k', d->seq_kv, kv, sizeof kv);
    tli_fmt(out->shape_class, sizeof out->shape_class, "%s,%s,bh%lld", q, kv,
            (long long)1 << tli_tune_log2_nearest(d->batch * d->heads));
}

/* Whether a record's schedule is one the op can run for d: the fields in
 * the op's ranges, a block structure of the op's space on this target, a
 * ring that fits. (A record is written by the tuner only for a schedule
 * that compiled and passed; this guards against a file edited by hand.) */
static bool plausible(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s)
{
    tli_target t;
    bool wgmma = wgmma_target(ctx, &t);
    if (!wgmma && !tli_target_get(ctx->target, &t))
        return false;
    if (s->block_n < 16 || s->block_n > 256 || s->block_n % 16 || s->stages < 1 || s->stages > 8 ||
        s->persistent < 0 || s->persistent > 2 || (s->persistent && !s->warp_specialize) ||
        !smem_fits(&t, d, s->block_m, s->block_n, s->stages))
        return false;
    shape shapes[4];
    int n = shapes_of(wgmma, d, shapes);
    for (int i = 0; i < n; i++)
        if (shapes[i].bm == s->block_m && shapes[i].th == s->threads && shapes[i].ws == s->warp_specialize &&
            shapes[i].pp == s->pingpong)
            return true;
    return false;
}

bool tli_flash_attn_pick(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_flash_attn_schedule *out)
{
    tli_tune_key k;
    key(d, &k);
    tl_tune_record rec;
    tl_tune_config c;
    if (!tli_tune_db_find(ctx, &k, &rec))
        return false;
    if (tli_tune_config_parse(param_names, rec.config, &c)) {
        tl_flash_attn_schedule s = schedule_of(&c);
        if (plausible(ctx, d, &s)) {
            *out = s;
            return true;
        }
    }
    tli_tune_db_unusable(ctx, &k, rec.config);
    return false;
}

/* ------------------------------------------------------------------------ */
/* The problem                                                               */
/* ------------------------------------------------------------------------ */

typedef struct attn_problem {
    tli_tune_problem base;
    tl_ctx *ctx;
    tl_flash_attn_desc d;   /* contiguous [B, H, S, D]; schedule zero     */
    double tol;
    uint64_t q[MAX_COPIES], k[MAX_COPIES], v[MAX_COPIES], o[MAX_COPIES], lse[MAX_COPIES];
    uint64_t ref, ref_lse;  /* the untuned op's output on copy 0          */
    int copies, turn;
} attn_problem;

static size_t q_elems(const tl_flash_attn_desc *d) { return (size_t)(d->batch * d->heads * d->seq_q * d->head_dim); }
static size_t kv_elems(const tl_flash_attn_desc *d)
{
    return (size_t)(d->batch * d->kv_heads * d->seq_kv * d->head_dim);
}
static size_t lse_elems(const tl_flash_attn_desc *d) { return (size_t)(d->batch * d->heads * d->seq_q); }

static int next_turn(attn_problem *a)
{
    int i = a->turn;
    a->turn = (a->turn + 1) % a->copies;
    return i;
}

static tl_status launch(attn_problem *a, const tl_program *p, int i, void *stream)
{
    tl_arg args[32];
    const uint64_t ptr[5] = {a->q[i], a->k[i], a->v[i], a->o[i], a->lse[i]};
    return tl_launch(p, stream, tli_flash_attn_args(&a->d, ptr, args), args);
}

static tl_status run_attn(tli_tune_problem *pb, const tl_program *p, void *stream)
{
    attn_problem *a = (attn_problem *)pb;
    return launch(a, p, next_turn(a), stream);
}

/* What the op runs for the problem without a record: its default schedule
 * given explicitly (a record saved by this run is not consulted), the
 * splits its own choice. */
static tl_status untuned(attn_problem *a, int i, uint64_t o, uint64_t lse, void *stream)
{
    tl_flash_attn_desc d = a->d;
    d.schedule = tli_flash_attn_untuned(a->ctx, &a->d);
    return tl_op_flash_attn(a->ctx, &d, a->q[i], a->k[i], a->v[i], o, lse, stream);
}

static tl_status run_untuned(tli_tune_problem *pb, void *stream)
{
    attn_problem *a = (attn_problem *)pb;
    int i = next_turn(a);
    return untuned(a, i, a->o[i], a->lse[i], stream);
}

/* The candidate's log-sum-exp (copy 0) against the reference's, as
 * tl_check measures, except that a row with no key to attend is -inf in
 * both (tl_check counts any infinity as wrong). *res is replaced where it
 * fails. */
static tl_status check_lse(attn_problem *a, tl_check_result *res)
{
    size_t n = lse_elems(&a->d);
    float *got = malloc(n * sizeof *got + 1), *want = malloc(n * sizeof *want + 1);
    tl_status st = got && want ? TL_OK : tli_fail(a->ctx, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    if (st == TL_OK)
        st = tl_memcpy_dtoh(a->ctx, got, a->lse[0], n * sizeof *got);
    if (st == TL_OK)
        st = tl_memcpy_dtoh(a->ctx, want, a->ref_lse, n * sizeof *want);
    double diff2 = 0, ref2 = 0, max_abs = 0;
    int64_t bad = -1, wrong = 0; /* wrong: not finite, or -inf on one side only */
    for (size_t i = 0; st == TL_OK && i < n; i++) {
        bool none = isinf(want[i]) && want[i] < 0; /* the row attends no key */
        if (none ? got[i] == want[i] : isfinite(got[i]) && isfinite(want[i])) {
            double d = none ? 0 : fabs((double)got[i] - want[i]);
            diff2 += d * d, ref2 += none ? 0 : (double)want[i] * want[i];
            max_abs = fmax(max_abs, d);
            if (d > a->tol * fabs(want[i]) && bad < 0)
                bad = (int64_t)i;
            continue;
        }
        wrong++;
        bad = bad < 0 ? (int64_t)i : bad;
    }
    double rel = wrong ? INFINITY : ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    if (st == TL_OK && !(rel <= a->tol))
        *res = (tl_check_result){.rel_err = rel, .max_abs_err = max_abs, .first_bad = bad, .nonfinite = wrong};
    free(got), free(want);
    return st;
}

static tl_status check_attn(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res)
{
    attn_problem *a = (attn_problem *)pb;
    tl_status st = tl_memset_u8(a->ctx, a->o[0], 0xFF, q_elems(&a->d) * tl_dtype_size(a->d.dtype), stream);
    if (st == TL_OK && a->d.lse)
        st = tl_memset_u8(a->ctx, a->lse[0], 0xFF, lse_elems(&a->d) * sizeof(float), stream);
    if (st == TL_OK)
        st = launch(a, p, 0, stream);
    if (st == TL_OK)
        st = tl_synchronize(a->ctx);
    if (st != TL_OK)
        return st;
    tl_span out = {.dtype = a->d.dtype, .n = (int64_t)q_elems(&a->d), .dptr = a->o[0]};
    tl_span ref = {.dtype = a->d.dtype, .n = (int64_t)q_elems(&a->d), .dptr = a->ref};
    st = tl_check(a->ctx, &out, &ref, a->tol, res);
    return st == TL_OK && a->d.lse && res->pass ? check_lse(a, res) : st;
}

static void destroy_attn(tli_tune_problem *pb)
{
    attn_problem *a = (attn_problem *)pb;
    for (int i = 0; i < MAX_COPIES; i++) {
        tl_free(a->ctx, a->q[i]);
        tl_free(a->ctx, a->k[i]);
        tl_free(a->ctx, a->v[i]);
        tl_free(a->ctx, a->o[i]);
        tl_free(a->ctx, a->lse[i]);
    }
    tl_free(a->ctx, a->ref);
    tl_free(a->ctx, a->ref_lse);
    free(a);
}

/* Row i of head (b, h) in float64 from K and V of its K/V head ([S, D]
 * each, 16-bit, on the host) and its query row q: into o [D]; returns its
 * natural-log log-sum-exp. p: seq_kv doubles of scratch. A row with no key
 * to attend is zeros, its log-sum-exp -inf. */
static double reference_row(const tl_flash_attn_desc *d, int64_t i, const uint16_t *q, const uint16_t *K,
                            const uint16_t *V, double *p, double *o)
{
    int64_t D = d->head_dim, last = d->causal ? i + d->seq_kv - d->seq_q : d->seq_kv - 1;
    double scale = d->scale ? d->scale : 1.0 / sqrt((double)D), m = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= last && j < d->seq_kv; j++) {
        double s = 0;
        for (int64_t c = 0; c < D; c++)
            s += tli_load_as_double(d->dtype, q, c) * tli_load_as_double(d->dtype, K, j * D + c);
        p[j] = s * scale;
        m = fmax(m, p[j]);
    }
    memset(o, 0, (size_t)D * sizeof *o);
    for (int64_t j = 0; j <= last && j < d->seq_kv; j++)
        sum += p[j] = exp(p[j] - m);
    for (int64_t j = 0; j <= last && j < d->seq_kv; j++)
        for (int64_t c = 0; c < D; c++)
            o[c] += p[j] / sum * tli_load_as_double(d->dtype, V, j * D + c);
    return sum > 0 ? m + log(sum) : -INFINITY;
}

/* The untuned output a->ref against float64 on sampled rows: up to
 * SAMPLE_HEADS (batch, head) pairs spread over all of them, and in each the
 * first two rows, the last two and three between. Norm-wise relative error
 * over the sample, as tl_check measures it. */
static tl_status check_reference(attn_problem *a)
{
    const tl_flash_attn_desc *d = &a->d;
    int64_t D = d->head_dim, S = d->seq_kv, pairs = d->batch * d->heads, G = d->heads / d->kv_heads;
    size_t esz = tl_dtype_size(d->dtype);
    uint16_t *K = malloc((size_t)(S * D) * esz + 1), *V = malloc((size_t)(S * D) * esz + 1);
    uint16_t *q = malloc((size_t)D * esz), *og = malloc((size_t)D * esz);
    double *p = malloc((size_t)(S ? S : 1) * sizeof *p), *o = malloc((size_t)D * sizeof *o);
    tl_status st = K && V && q && og && p && o ? TL_OK : TL_ERR_OUT_OF_MEMORY;
    double err = 0, norm = 0, lse_err = 0, lse_norm = 0;
    int64_t nh = pairs < SAMPLE_HEADS ? pairs : SAMPLE_HEADS;
    for (int64_t t = 0; st == TL_OK && t < nh; t++) {
        int64_t bh = nh > 1 ? t * (pairs - 1) / (nh - 1) : 0, b = bh / d->heads, h = bh % d->heads;
        size_t kv_off = (size_t)((b * d->kv_heads + h / G) * S * D) * esz;
        st = tl_memcpy_dtoh(a->ctx, K, a->k[0] + kv_off, (size_t)(S * D) * esz);
        if (st == TL_OK)
            st = tl_memcpy_dtoh(a->ctx, V, a->v[0] + kv_off, (size_t)(S * D) * esz);
        int64_t last = d->seq_q - 1;
        const int64_t rows[SAMPLE_ROWS] = {0, 1, last / 4, last / 2, 3 * last / 4, last - 1, last};
        for (int r = 0; st == TL_OK && r < SAMPLE_ROWS; r++) {
            int64_t i = rows[r] < 0 ? 0 : rows[r] > last ? last : rows[r]; /* a row twice when there are few */
            size_t row_off = (size_t)(((b * d->heads + h) * d->seq_q + i) * D) * esz;
            float lg = 0;
            st = tl_memcpy_dtoh(a->ctx, q, a->q[0] + row_off, (size_t)D * esz);
            if (st == TL_OK)
                st = tl_memcpy_dtoh(a->ctx, og, a->ref + row_off, (size_t)D * esz);
            if (st == TL_OK && d->lse)
                st = tl_memcpy_dtoh(a->ctx, &lg, a->ref_lse + (size_t)((b * d->heads + h) * d->seq_q + i) * 4, 4);
            if (st != TL_OK)
                break;
            double lr = reference_row(d, i, q, K, V, p, o);
            if (d->lse) { /* -inf where no key is attended, in both */
                double e = isinf(lr) ? (lg == lr ? 0 : INFINITY) : lg - lr;
                lse_err += e * e, lse_norm += isinf(lr) ? 0 : lr * lr;
            }
            for (int64_t c = 0; c < D; c++) {
                double e = tli_load_as_double(d->dtype, og, c) - o[c];
                err += isfinite(e) ? e * e : INFINITY;
                norm += o[c] * o[c];
            }
        }
    }
    free(K), free(V), free(q), free(og), free(p), free(o);
    if (st == TL_ERR_OUT_OF_MEMORY)
        return tli_fail(a->ctx, st, "out of host memory for the float64 reference");
    if (st != TL_OK)
        return st;
    /* the untuned op's own bound, whatever the request's tol: a 16-bit O and P are about 2e-3 off */
    double rel = norm > 0 ? sqrt(err / norm) : sqrt(err), bound = fmax(a->tol, REFERENCE_TOL);
    double lse_rel = lse_norm > 0 ? sqrt(lse_err / lse_norm) : sqrt(lse_err);
    if (!(rel <= bound) || !(lse_rel <= bound))
        return tli_fail(a->ctx, TL_ERR_INTERNAL, "the op's untuned output is off the float64 reference on "
                        "sampled rows (relative error %.3g, of the log-sum-exp %.3g; bound %.3g)", rel, lse_rel,
                        bound);
    return TL_OK;
}

static tl_status setup(attn_problem *a)
{
    const tl_flash_attn_desc *d = &a->d;
    size_t esz = tl_dtype_size(d->dtype), qb = q_elems(d) * esz, kvb = kv_elems(d) * esz;
    size_t lb = d->lse ? lse_elems(d) * sizeof(float) : 0;
    a->copies = tli_tune_copies(a->ctx, 2 * qb + 2 * kvb + lb, MAX_COPIES);
    tl_status st = tl_malloc(a->ctx, qb, &a->ref);
    if (st == TL_OK && lb)
        st = tl_malloc(a->ctx, lb, &a->ref_lse);
    for (int i = 0; i < a->copies && st == TL_OK; i++) {
        uint64_t seed = 700 + 3 * (uint64_t)i;
        st = tl_malloc(a->ctx, qb, &a->q[i]);
        if (st == TL_OK)
            st = tl_malloc(a->ctx, kvb, &a->k[i]);
        if (st == TL_OK)
            st = tl_malloc(a->ctx, kvb, &a->v[i]);
        if (st == TL_OK)
            st = tl_malloc(a->ctx, qb, &a->o[i]);
        if (st == TL_OK && lb)
            st = tl_malloc(a->ctx, lb, &a->lse[i]);
        if (st == TL_OK)
            st = tl_random_fill(a->ctx, a->q[i], d->dtype, (int64_t)q_elems(d), seed, -1, 1, NULL);
        if (st == TL_OK)
            st = tl_random_fill(a->ctx, a->k[i], d->dtype, (int64_t)kv_elems(d), seed + 1, -1, 1, NULL);
        if (st == TL_OK)
            st = tl_random_fill(a->ctx, a->v[i], d->dtype, (int64_t)kv_elems(d), seed + 2, -1, 1, NULL);
    }
    if (st == TL_OK)
        st = untuned(a, 0, a->ref, a->ref_lse, NULL);
    if (st == TL_OK)
        st = tl_synchronize(a->ctx);
    return st == TL_OK ? check_reference(a) : st;
}

static tl_status problem(tl_ctx *ctx, const void *desc, double tol, tli_tune_problem **out)
{
    *out = NULL;
    attn_problem *a = calloc(1, sizeof *a);
    if (!a)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    a->base = (tli_tune_problem){.run = run_attn, .check = check_attn, .baseline = run_untuned,
                                 .destroy = destroy_attn, .unit = "TFLOP/s"};
    tli_fmt(a->base.baseline_name, sizeof a->base.baseline_name, "untuned tl_op_flash_attn");
    a->ctx = ctx;
    a->d = contiguous(desc);
    memset(&a->d.schedule, 0, sizeof a->d.schedule);
    a->tol = tol > 0 ? tol : 1e-2;
    const tl_flash_attn_desc *d = &a->d;
    a->base.work = 4.0 * (double)d->batch * (double)d->heads * (double)d->seq_q * (double)d->seq_kv *
                   (double)d->head_dim / (d->causal ? 2 : 1);
    tli_fmt(a->base.shape, sizeof a->base.shape, "%lldx%lldx%lldx%lldx%lld%s", (long long)d->batch,
            (long long)d->heads, (long long)d->seq_q, (long long)d->seq_kv, (long long)d->head_dim,
            d->causal ? " causal" : "");
    return tli_tune_problem_done(ctx, setup(a), &a->base, "attention", out);
}

/* ------------------------------------------------------------------------ */
/* The row in the table of tunable ops                                       */
/* ------------------------------------------------------------------------ */

static tl_status check_desc(tl_ctx *ctx, const void *desc, const char *api)
{
    if (!desc)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);
    tl_flash_attn_desc plain = contiguous(desc), *d = &plain; /* the problem the tuner runs */
    memset(&plain.schedule, 0, sizeof plain.schedule);
    tl_kernel *k = NULL;
    tl_status st = tl_op_flash_attn_build(ctx, &plain, &k);
    tl_kernel_destroy(k);
    if (st != TL_OK)
        return st;
    if (d->batch < 1 || d->seq_q < 1 || d->seq_kv < 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: flash_attn with batch %lld, seq_q %lld, seq_kv %lld: "
                        "nothing to time", api, (long long)d->batch, (long long)d->seq_q, (long long)d->seq_kv);
    if (tli_flash_attn_decoding(ctx, d))
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "%s: flash_attn with %lld x %lld heads of %lld query rows runs as "
                        "decoding (the keys split over blocks, or grouped-query heads stacked as rows), which the "
                        "tuner does not measure", api, (long long)d->batch, (long long)d->heads,
                        (long long)d->seq_q);
    return TL_OK;
}

static tl_tune_config fallback(tl_ctx *ctx, const void *desc)
{
    tl_flash_attn_schedule s = tli_flash_attn_untuned(ctx, desc);
    return config_of(&s);
}

/* The candidate's one program: contiguous tensors, the keys not split. */
static tl_status build(tl_ctx *ctx, const void *desc, const tl_tune_config *cfg, tl_kernel **out)
{
    tl_flash_attn_desc d = contiguous(desc);
    d.schedule = schedule_of(cfg);
    d.schedule.split_kv = d.schedule.split_tail = 1;
    return tl_op_flash_attn_build(ctx, &d, out);
}

const tli_tune_op tli_flash_attn_tune_op = {
    .name = "flash_attn",
    .param_names = param_names,
    .check_desc = check_desc,
    .space = space,
    .fallback = fallback,
    .build = build,
    .problem = problem,
    .key = key,
    .unaligned = NULL,
    .baseline_untuned = true,
};
