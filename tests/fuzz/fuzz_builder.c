/* fuzz_builder.c - a libFuzzer target over the builder (`make fuzz`).
 *
 * The input is decoded into builder calls (fuzz_ops.h), on an offline
 * context. The oracle, beyond "no crash, no hang, no leak, no undefined
 * behaviour" (ASan, UBSan, LSan, -timeout):
 *   - a failed kernel's message starts with "tl_" (the call that failed);
 *   - a kernel that built is emitted for sm_90a and sm_80 (source only, no
 *     NVRTC): TL_OK with a source, or an error whose message names
 *     tl_kernel_source; TL_ERR_INTERNAL is a finding;
 *   - it is interpreted with host buffers of exactly the size its tensors
 *     span for the arguments (read from the end of the input), so any
 *     access outside a tensor is an ASan report, under a work budget;
 *   - with TILEC_FUZZ_COMPILE=1 (`make fuzz-compile`, over a corpus), each
 *     source is also compiled by NVRTC: a kernel the builder accepted must
 *     compile, so TL_ERR_COMPILE is a finding (a printer bug: the source
 *     and NVRTC's log are printed).
 * Every kernel that builds is emitted: emission is linear in the DAG, so
 * shared subexpressions and long chains cost their size (-timeout and
 * -rss_limit_mb catch one that is not).
 */
#include "fuzz_ops.h"

#include "args.h"
#include "interp.h"
#include "kernel.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_EXPRS 16384
#define MAX_BUFS 4096
#define WORK_BUDGET 300000         /* interpreter steps per input    */
#define MAX_TENSOR_BYTES (16 << 20) /* all tensors of one input      */

typedef struct fuzz {
    const uint8_t *p;
    size_t n;
    tl_kernel *k;
    tl_expr e[MAX_EXPRS];
    int ne;
    tl_buf b[MAX_BUFS];
    int nb;
    tl_region r[MAX_BUFS];
    int nr;
} fuzz;

static tl_ctx *ctx;
static bool verbose; /* TILEC_FUZZ_VERBOSE=1: what happened to each input */
static bool compile; /* TILEC_FUZZ_COMPILE=1: every source through NVRTC too */

static unsigned byte(fuzz *f)
{
    if (!f->n)
        return 0;
    f->n--;
    return *f->p++;
}

static tl_expr expr(fuzz *f)
{
    unsigned ref = byte(f);
    return ref == REF_NULL || (int)ref >= f->ne ? TL_NONE_EXPR : f->e[f->ne - 1 - (int)ref];
}

static tl_buf buf(fuzz *f)
{
    unsigned ref = byte(f);
    return ref == REF_NULL || (int)ref >= f->nb ? TL_NONE_BUF : f->b[f->nb - 1 - (int)ref];
}

static tl_region region(fuzz *f)
{
    unsigned ref = byte(f);
    tl_region none = {TL_NONE_BUF, 0};
    return ref == REF_NULL || (int)ref >= f->nr ? none : f->r[f->nr - 1 - (int)ref];
}

static void push(fuzz *f, tl_expr x)
{
    if (f->ne < MAX_EXPRS)
        f->e[f->ne++] = x;
}

static void push_buf(fuzz *f, tl_buf x)
{
    if (f->nb < MAX_BUFS)
        f->b[f->nb++] = x;
}

static const char *name(fuzz *f) { return fuzz_names[byte(f) % FUZZ_NAMES]; }

/* Every dtype, and two that are not one. */
static tl_dtype dtype(fuzz *f)
{
    static const tl_dtype all[] = {TL_F32, TL_F16, TL_BF16, TL_I32, TL_I64, TL_F64, TL_BOOL, TL_DTYPE_INVALID, 99,
                                   TL_F8E4M3, TL_F8E5M2};
    return all[byte(f) % (sizeof all / sizeof all[0])];
}

/* A small extent, or now and then one at or past a limit. */
static int64_t extent(fuzz *f)
{
    static const int64_t edges[] = {0, -1, 1 << 20, (1 << 20) + 1, 1 << 24, INT64_MAX, INT64_MIN, 3 << 20};
    unsigned b = byte(f);
    return b >= 248 ? edges[b - 248] : (int64_t)b;
}

static void op_tensor(fuzz *f)
{
    const char *nm = name(f);
    tl_dtype dt = dtype(f);
    int rank = (int)(byte(f) % 6);
    tl_expr shape[TL_MAX_RANK] = {{0, 0}}, strides[TL_MAX_RANK] = {{0, 0}};
    for (int d = 0; d < rank && d < TL_MAX_RANK; d++)
        shape[d] = expr(f);
    bool strided = byte(f) & 1;
    for (int d = 0; strided && d < rank && d < TL_MAX_RANK; d++)
        strides[d] = expr(f);
    push_buf(f, tl_param_tensor(f->k, nm, dt, rank, shape, strided ? strides : NULL));
}

static void op_binary(fuzz *f)
{
    static tl_expr (*const fns[BIN_COUNT])(tl_kernel *, tl_expr, tl_expr) = {
        tl_add, tl_sub, tl_mul, tl_div, tl_mod, tl_ceildiv, tl_max, tl_min,
        tl_lt, tl_le, tl_gt, tl_ge, tl_eq, tl_ne, tl_and, tl_or};
    unsigned which = byte(f) % BIN_COUNT;
    tl_expr a = expr(f), b = expr(f);
    push(f, fns[which](f->k, a, b));
}

static void op_unary(fuzz *f)
{
    static tl_expr (*const fns[UN_COUNT])(tl_kernel *, tl_expr) = {
        tl_neg, tl_abs, tl_not, tl_exp, tl_exp2, tl_log, tl_sqrt, tl_rsqrt, tl_tanh, tl_erf};
    unsigned which = byte(f) % UN_COUNT;
    push(f, fns[which](f->k, expr(f)));
}

static void op_memory(fuzz *f, bool store)
{
    tl_buf b = buf(f);
    tl_expr idx[TL_MAX_RANK];
    for (int d = 0; d < TL_MAX_RANK; d++)
        idx[d] = expr(f);
    if (store)
        tl_store(f->k, b, idx, expr(f));
    else
        push(f, tl_load(f->k, b, idx));
}

static void op_parallel(fuzz *f)
{
    int rank = (int)(byte(f) % 6);
    int64_t ext[TL_MAX_RANK + 1];
    tl_expr vars[TL_MAX_RANK];
    for (int d = 0; d < rank; d++)
        ext[d] = extent(f);
    tl_parallel(f->k, rank, ext, vars);
    for (int d = 0; d < rank && d < TL_MAX_RANK; d++)
        push(f, vars[d]);
}

typedef tl_buf (*alloc_fn)(tl_kernel *, tl_dtype, int, const int64_t *);

/* dtype rank extent[rank], then the allocation */
static void alloc_with(fuzz *f, alloc_fn fn)
{
    tl_dtype dt = dtype(f);
    int rank = (int)(byte(f) % 6);
    int64_t shape[TL_MAX_RANK + 1];
    for (int d = 0; d < rank; d++)
        shape[d] = extent(f);
    push_buf(f, fn(f->k, dt, rank, shape));
}

static void op_alloc(fuzz *f)
{
    static const alloc_fn fns[3] = {tl_alloc_shared, tl_alloc_fragment, tl_alloc_local};
    alloc_with(f, fns[byte(f) % 3]);
}

/* tl_alloc_reducer: an op of its own, so that OP_ALLOC's scope byte keeps
 * the meaning the regression inputs were written with */
static void op_reducer(fuzz *f) { alloc_with(f, tl_alloc_reducer); }

static void op_tile(fuzz *f)
{
    tl_buf b = buf(f);
    int n = (int)(byte(f) % 6);
    tl_expr idx[TL_MAX_RANK + 1];
    for (int d = 0; d < n; d++)
        idx[d] = expr(f);
    if (f->nr < MAX_BUFS)
        f->r[f->nr++] = tl_tile_n(f->k, b, idx, n);
}

static void op_reduce(fuzz *f)
{
    static void (*const fns[4])(tl_kernel *, tl_buf, tl_buf, int, int) = {tl_reduce_max, tl_reduce_sum, tl_reduce_min,
                                                                        tl_reduce_absmax};
    unsigned which = byte(f) % 4;
    tl_buf src = buf(f), dst = buf(f);
    int dim = (int)(int8_t)byte(f);
    fns[which](f->k, src, dst, dim, (int)(byte(f) % 3));
}

static void op_structure(fuzz *f, unsigned op)
{
    switch (op) {
    case OP_SERIAL: push(f, tl_serial(f->k, expr(f))); break;
    case OP_PARALLEL: op_parallel(f); break;
    case OP_IF: tl_if(f->k, expr(f)); break;
    case OP_ELSE: tl_else(f->k); break;
    case OP_END: tl_end(f->k); break;
    case OP_PIPELINED: {
        tl_expr x = expr(f);
        push(f, tl_pipelined(f->k, x, (int)(byte(f) % 10)));
        break;
    }
    default: break;
    }
}

static void op_tiles(fuzz *f, unsigned op)
{
    switch (op) {
    case OP_ALLOC: op_alloc(f); break;
    case OP_TILE: op_tile(f); break;
    case OP_ALL:
        if (f->nr < MAX_BUFS)
            f->r[f->nr++] = tl_all(buf(f));
        break;
    case OP_COPY: {
        tl_region s = region(f);
        tl_copy(f->k, s, region(f));
        break;
    }
    case OP_CLEAR: tl_clear(f->k, buf(f)); break;
    case OP_FILL: {
        tl_buf b = buf(f);
        tl_fill(f->k, b, expr(f));
        break;
    }
    case OP_GEMM: {
        tl_buf a = buf(f), b = buf(f), c = buf(f);
        tl_gemm(f->k, a, b, c, byte(f));
        break;
    }
    case OP_SWIZZLE: tl_use_swizzle(f->k, (int)(int8_t)byte(f)); break;
    case OP_REDUCE: op_reduce(f); break;
    case OP_CLUSTER: {
        int cx = byte(f) % 9, cy = byte(f) % 9, cz = byte(f) % 9;
        tl_cluster(f->k, cx, cy, cz);
        tl_use_min_blocks(f->k, (int)(int8_t)byte(f));
        break;
    }
    case OP_BLOCK_VALUE: push(f, tl_block_value(f->k, expr(f))); break;
    case OP_REDUCER: op_reducer(f); break;
    case OP_FINALIZE: tl_finalize_reducer(f->k, buf(f)); break;
    case OP_CACHE_POLICY: {
        tl_buf b = buf(f);
        tl_use_cache_policy(f->k, b, (tl_cache_policy)(byte(f) % 3));
        break;
    }
    case OP_CLUSTER_REDUCE: {
        static void (*const fns[4])(tl_kernel *, tl_buf) = {tl_cluster_reduce_max, tl_cluster_reduce_sum,
                                                            tl_cluster_reduce_min, tl_cluster_reduce_absmax};
        unsigned which = byte(f) % 5;
        tl_buf b = buf(f);
        if (which < 4)
            fns[which](f->k, b);
        else
            tl_cluster_reduce_sum_to(f->k, b, (int)(int8_t)byte(f));
        break;
    }
    case OP_NAME: {
        tl_buf b = buf(f);
        tl_name(f->k, b, name(f));
        break;
    }
    default: {
        unsigned bits = byte(f);
        tl_use_fast_math(f->k, bits & 1);
        /* modes 0..2 and one out of range (TL_ERR_INVALID_ARG) */
        tl_use_pingpong(f->k, (int)(((bits >> 1) & 1) | ((bits >> 2) & 2)));
        tl_use_warp_specialize(f->k, (bits >> 2) & 1);
        tl_use_persistent(f->k, (int)(((bits >> 4) & 1) | ((bits >> 5) & 2))); /* 0..2, 3 out of range */
        tl_use_stream_k(f->k, (bits >> 5) & 1);
        break;
    }
    }
}

static void op_values(fuzz *f, unsigned op)
{
    switch (op) {
    case OP_DIM: push(f, tl_dim(f->k, name(f))); break;
    case OP_SCALAR: {
        const char *nm = name(f);
        push(f, tl_param_scalar(f->k, nm, dtype(f)));
        break;
    }
    case OP_BLOCK_IDX: push(f, tl_block_idx(f->k, (int)(byte(f) % 4))); break;
    case OP_INT: push(f, tl_int(f->k, (int8_t)byte(f))); break;
    case OP_INT64: {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v |= (uint64_t)byte(f) << (8 * i);
        push(f, tl_int(f->k, (int64_t)v));
        break;
    }
    case OP_I32: push(f, tl_i32(f->k, (int8_t)byte(f))); break;
    case OP_FLOAT: {
        tl_dtype dt = dtype(f);
        push(f, tl_float(f->k, (int8_t)byte(f) / 4.0, dt));
        break;
    }
    case OP_BINARY: op_binary(f); break;
    case OP_UNARY: op_unary(f); break;
    case OP_SELECT: {
        tl_expr c = expr(f), a = expr(f);
        push(f, tl_select(f->k, c, a, expr(f)));
        break;
    }
    default: { /* OP_CAST */
        tl_expr a = expr(f);
        push(f, tl_cast(f->k, a, dtype(f)));
        break;
    }
    }
}

static void op_grid(fuzz *f)
{
    tl_expr g[3];
    for (int i = 0; i < 3; i++)
        g[i] = expr(f);
    tl_grid(f->k, g[0], g[1], g[2], (int)(byte(f) % 40) * 32);
}

/* Decodes operations until the terminator (OP_COUNT up to the later
 * operations, and past them, end the program; what follows are the
 * argument values). */
static void decode(fuzz *f)
{
    while (f->n) {
        unsigned op = byte(f);
        if ((op >= OP_COUNT && op < OP_CLUSTER) || op >= OP_LAST)
            return;
        if (op == OP_TENSOR)
            op_tensor(f);
        else if (op == OP_GRID)
            op_grid(f);
        else if (op == OP_LOAD || op == OP_STORE)
            op_memory(f, op == OP_STORE);
        else if (op == OP_SERIAL || op == OP_PARALLEL || op == OP_IF || op == OP_ELSE || op == OP_END ||
                 op == OP_PIPELINED)
            op_structure(f, op);
        else if (op >= OP_ALLOC)
            op_tiles(f, op);
        else
            op_values(f, op);
    }
}

/* ------------------------------------------------------------ the oracle */

static void expect(bool ok, const char *what, const char *detail)
{
    if (!ok) {
        fprintf(stderr, "fuzz_builder: %s: %s\n", what, detail);
        abort();
    }
}

/* A call handing back text: TL_OK with it, or a message naming the call. */
static void expect_text(tl_status st, char *text, const char *api)
{
    expect(st != TL_ERR_INTERNAL, "TL_ERR_INTERNAL", tl_ctx_error(ctx));
    if (st == TL_OK)
        expect(text != NULL, api, "TL_OK without its text");
    else
        expect(strncmp(tl_ctx_error(ctx), api, strlen(api)) == 0, "a message not naming its call", tl_ctx_error(ctx));
    tl_free_host(text);
}

/* The graph dump and the reproducer of any kernel, and the lowering dump
 * of one that built. */
static void inspect(tl_kernel *k)
{
    char *text = NULL;
    tl_status st = tl_kernel_dump(k, &text); /* before reading text: argument order is unspecified */
    expect_text(st, text, "tl_kernel_dump");
    text = NULL;
    st = tl_kernel_reproducer(k, &text);
    if (tl_kernel_status(k) == TL_OK)
        expect_text(st, text, "tl_kernel_reproducer");
    else
        tl_free_host(text);
}

static void emit(tl_kernel *k)
{
    static const char *const targets[] = {"sm_90a", "sm_80"};
    for (int t = 0; t < 2; t++) {
        char *src = NULL;
        tl_status st = tl_kernel_source(k, targets[t], &src);
        if (verbose)
            fprintf(stderr, "  %s: %s %s\n", targets[t], tl_status_name(st), st == TL_OK ? "" : tl_ctx_error(ctx));
        expect(st != TL_ERR_INTERNAL, "TL_ERR_INTERNAL from tl_kernel_source", tl_ctx_error(ctx));
        if (st == TL_OK)
            expect(src != NULL, "tl_kernel_source", "TL_OK without a source");
        else
            expect(strncmp(tl_ctx_error(ctx), "tl_kernel_source: ", 18) == 0, "message not naming tl_kernel_source",
                   tl_ctx_error(ctx));
        if (st == TL_OK && compile) {
            tl_compile_options opt = {.target = targets[t]};
            tl_program *p = NULL;
            tl_status cst = tl_compile(k, &opt, &p);
            /* (a kernel asking for more blocks an SM than its registers allow: ptxas says so, the user's
             * request, not the printer's) */
            bool too_many_blocks = k->ir.min_blocks > 1 && strstr(tl_ctx_error(ctx), "Insufficient registers");
            if ((cst == TL_ERR_COMPILE && !too_many_blocks) || cst == TL_ERR_INTERNAL)
                fprintf(stderr, "%s\n", src);
            expect((cst != TL_ERR_COMPILE || too_many_blocks) && cst != TL_ERR_INTERNAL, "a source NVRTC rejects",
                   tl_ctx_error(ctx));
            tl_program_destroy(p);
        }
        tl_free_host(src);
    }
    char *text = NULL;
    tl_status lst = tl_kernel_lower_dump(k, "sm_90a", "all", &text);
    expect_text(lst, text, "tl_kernel_lower_dump");
}

/* Arguments from the bytes after the program: dims 0..8, small scalars;
 * tensors get `ptrs` (NULL: a stand-in, aligned, for computing spans). */
static void make_args(fuzz *f, const tli_ir *ir, void *const *ptrs, tl_arg *args)
{
    static double stand_in;
    fuzz vals = *f; /* the same values for both passes */
    for (int i = 1; i < ir->p.n; i++) {
        const tli_param *q = &ir->p.v[i];
        unsigned v = byte(&vals);
        if (q->kind == TL_PARAM_TENSOR)
            args[i - 1] = tl_arg_hptr(ptrs ? ptrs[i] : &stand_in);
        else if (q->kind == TL_PARAM_DIM)
            args[i - 1] = tl_arg_int(v % 9);
        else if (tli_dtype_is_int((tl_dtype)q->dtype))
            args[i - 1] = tl_arg_int((int8_t)v);
        else
            args[i - 1] = tl_arg_float((int8_t)v / 8.0);
    }
}

/* Host buffers of exactly each tensor's span; false when they would be too
 * large (or the arguments are refused: then there is nothing to run). */
static bool make_buffers(const tli_ir *ir, const tl_arg *args, void **ptrs)
{
    tli_bound b;
    char err[256];
    int n = ir->p.n - 1;
    if (tli_bind_args(ir, n, args, TL_ARG_HOST_PTR, &b, err, sizeof err) != TL_OK)
        return false;
    size_t total = 0;
    bool ok = true;
    for (int i = 1; i < ir->p.n && ok; i++) {
        const tli_param *q = &ir->p.v[i];
        if (q->kind != TL_PARAM_TENSOR)
            continue;
        int64_t span = tli_tensor_span(ir, &b, q->buf); /* -1: beyond 64 bits */
        size_t bytes = span < 0 ? 0 : (size_t)span * tl_dtype_size((tl_dtype)q->dtype);
        total += bytes;
        ok = span >= 0 && span <= MAX_TENSOR_BYTES && total <= MAX_TENSOR_BYTES;
        ptrs[i] = ok && bytes ? malloc(bytes) : NULL;
        if (ptrs[i])
            memset(ptrs[i], 0x3c, bytes); /* finite values in every type */
    }
    tli_bound_free(&b);
    return ok;
}

static void interpret(fuzz *f)
{
    const tli_ir *ir = &f->k->ir;
    if (tli_kernel_verify(f->k, "tl_interpret") != TL_OK)
        return;
    tl_arg args[TL_MAX_PARAMS];
    void *ptrs[TL_MAX_PARAMS + 1] = {0};
    make_args(f, ir, NULL, args);
    if (make_buffers(ir, args, ptrs)) {
        make_args(f, ir, ptrs, args);
        tli_bound b;
        char err[256];
        if (tli_bind_args(ir, ir->p.n - 1, args, TL_ARG_HOST_PTR, &b, err, sizeof err) == TL_OK) {
            tl_status st = tli_interp_run_budget(ir, &b, WORK_BUDGET, err, sizeof err);
            if (verbose)
                fprintf(stderr, "  interpreted: %s %s\n", tl_status_name(st), st == TL_OK ? "" : err);
            expect(st == TL_OK || st == TL_ERR_UNSUPPORTED || st == TL_ERR_LAUNCH_ARGS ||
                       st == TL_ERR_OUT_OF_MEMORY,
                   "interpretation", err);
            tli_bound_free(&b);
        }
    }
    for (int i = 0; i <= TL_MAX_PARAMS; i++)
        free(ptrs[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *v = getenv("TILEC_FUZZ_VERBOSE");
    verbose = v && strcmp(v, "1") == 0;
    const char *c = getenv("TILEC_FUZZ_COMPILE");
    compile = c && strcmp(c, "1") == 0;
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 0;
    o.target = "sm_90a";
    return tl_ctx_create(&o, &ctx, NULL, 0) == TL_OK ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fuzz f;
    f.p = data;
    f.n = size;
    f.ne = f.nb = f.nr = 0;
    f.k = tl_kernel_new(ctx, "fuzz");
    decode(&f);
    while (f.k->status == TL_OK && f.k->depth > 0) /* close what the input left open */
        tl_end(f.k);
    if (verbose)
        fprintf(stderr, "kernel: %s %s\n", tl_status_name(tl_kernel_status(f.k)), tl_kernel_error(f.k));
    inspect(f.k);
    if (tl_kernel_status(f.k) != TL_OK)
        expect(strncmp(tl_kernel_error(f.k), "tl_", 3) == 0 && strncmp(tl_ctx_error(ctx), "tl_", 3) == 0,
               "a builder message that does not name its call", tl_kernel_error(f.k));
    else
        emit(f.k);
    if (tl_kernel_status(f.k) == TL_OK)
        interpret(&f);
    tl_kernel_destroy(f.k);
    return 0;
}
