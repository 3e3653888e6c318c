/*
 * program.c - from a verified kernel to a launchable program: emit CUDA C,
 * look the cubin up in the cache or compile it with NVRTC, load it; then
 * launch it with checked arguments.
 */
#include "program.h"

#include "args.h"
#include "cache.h"
#include "emit.h"
#include "interp.h"
#include "kernel.h"
#include "lower.h"
#include "nvrtc.h"
#include "sha256.h"
#include "target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tl_ctx *tli_program_ctx(const tl_program *p) { return p ? p->ctx : NULL; }

/* ------------------------------------------------------------- compile */

/* The text NVRTC compiles: the device header inlined where the source
 * includes it, with #line directives so messages name the right file. */
static char *with_device_header(const char *src, const char *kname)
{
    const char *inc = strstr(src, "#include \"" TLI_DEVICE_HEADER_NAME "\"");
    tli_str s;
    tli_str_init(&s);
    if (inc)
        tli_str_appendf(&s, "%.*s", (int)(inc - src), src);
    tli_str_appendf(&s, "#line 1 \"%s\"\n", TLI_DEVICE_HEADER_NAME);
    tli_str_append(&s, tli_device_header);
    tli_str_appendf(&s, "\n#line 1 \"%s.cu\"\n", kname);
    if (inc) {
        /* keep line numbers of the generated file: blank the include line */
        int before = 1;
        for (const char *p = src; p < inc; p++)
            before += *p == '\n';
        tli_str_appendf(&s, "#line %d \"%s.cu\"\n", before + 1, kname);
        const char *rest = strchr(inc, '\n');
        tli_str_append(&s, rest ? rest + 1 : "");
    } else {
        tli_str_append(&s, src);
    }
    return tli_str_take(&s);
}

static void compile_flags(const tl_compile_options *opt, const char **flags, int *n)
{
    *n = 0;
    if (opt && opt->fast_math)
        flags[(*n)++] = "--use_fast_math";
    if (opt && opt->line_info)
        flags[(*n)++] = "-lineinfo";
}

/* Cache key: what the cubin is made from, never a process-local name and
 * never a run-time size. */
static void cache_key(const char *src, const char *target, const char *const *flags, int nflags,
                      uint8_t key[32])
{
    int maj = 0, min = 0;
    tli_nvrtc_version(&maj, &min);
    char head[128];
    tli_fmt(head, sizeof head, "libtilec %s|nvrtc %d.%d|%s|", tl_version(), maj, min, target);
    tli_sha256 h;
    tli_sha256_init(&h);
    tli_sha256_update(&h, head, strlen(head));
    for (int i = 0; i < nflags; i++)
        tli_sha256_update(&h, flags[i], strlen(flags[i]) + 1);
    tli_sha256_update(&h, tli_device_header, tli_device_header_len);
    tli_sha256_update(&h, src, strlen(src));
    tli_sha256_final(&h, key);
}

/* The cache key of p's cubin under opt. */
void tli_program_cache_key(const tl_program *p, const tl_compile_options *opt, uint8_t key[32])
{
    const char *flags[4];
    int nflags;
    compile_flags(opt, flags, &nflags);
    cache_key(p->source, p->target, flags, nflags, key);
}

bool tli_program_cache_lookup(tl_ctx *ctx, tl_program *p, const tl_compile_options *opt)
{
    if ((opt && opt->no_cache) || !ctx->cache)
        return false;
    uint8_t key[32];
    tli_program_cache_key(p, opt, key);
    int hit = tli_cache_get(ctx->cache, key, &p->cubin, &p->cubin_len);
    p->from_cache = hit;
    return hit != 0;
}

tl_status tli_program_nvrtc(tl_program *p, const tl_compile_options *opt, char **log)
{
    const char *flags[4];
    int nflags;
    compile_flags(opt, flags, &nflags);
    char *full = with_device_header(p->source, p->kname);
    if (!full)
        return TL_ERR_OUT_OF_MEMORY;
    double t0 = tli_now_ms();
    tl_status st = tli_nvrtc_compile(NULL, full, p->kname, p->target, 0, flags, nflags, &p->cubin, &p->cubin_len,
                                     log);
    p->compile_ms += tli_now_ms() - t0;
    free(full);
    return st;
}

void tli_program_cache_store(tl_ctx *ctx, const tl_program *p, const tl_compile_options *opt)
{
    if ((opt && opt->no_cache) || !ctx->cache || !p->cubin)
        return;
    uint8_t key[32];
    tli_program_cache_key(p, opt, key);
    int maj = 0, min = 0;
    tli_nvrtc_version(&maj, &min);
    char meta[256];
    tli_fmt(meta, sizeof meta, "kernel=%s target=%s nvrtc=%d.%d libtilec=%s", p->kname, p->target, maj, min,
            tl_version());
    tli_cache_put(ctx->cache, key, p->cubin, p->cubin_len, meta);
}

/* Cubin of p: from the cache, or NVRTC (then stored). */
static tl_status get_cubin(tl_ctx *ctx, tl_program *p, const tl_compile_options *opt)
{
    if (tli_program_cache_lookup(ctx, p, opt))
        return TL_OK;
    char *full = with_device_header(p->source, p->kname);
    if (!full)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_compile: out of host memory");
    const char *flags[4];
    int nflags;
    compile_flags(opt, flags, &nflags);
    double t0 = tli_now_ms();
    tl_status st = tli_nvrtc_compile(ctx, full, p->kname, p->target, 0, flags, nflags, &p->cubin,
                                     &p->cubin_len, NULL);
    p->compile_ms += tli_now_ms() - t0;
    free(full);
    if (st != TL_OK)
        return st;
    tli_program_cache_store(ctx, p, opt);
    return TL_OK;
}

tl_status tli_program_load(tl_ctx *ctx, tl_program *p)
{
    tli_target t;
    if (!ctx->has_device || !tli_target_get(p->target, &t) || !tli_target_runs_on(&t, ctx->info.cc_major, ctx->info.cc_minor))
        return TL_OK; /* compiled for another GPU: kept, not loaded */
    tl_status st = tli_ctx_bind(ctx);
    if (st != TL_OK)
        return st;
    const tli_driver_api *cu = ctx->cu;
    st = tli_cu_check(ctx, cu->cuModuleLoadData(&p->mod, p->cubin), "cuModuleLoadData");
    if (st == TL_OK)
        st = tli_cu_check(ctx, cu->cuModuleGetFunction(&p->fn, p->mod, p->kname), "cuModuleGetFunction");
    if (st == TL_OK && p->smem_bytes > 48 * 1024)
        st = tli_cu_check(ctx, cu->cuFuncSetAttribute(p->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                      p->smem_bytes),
                          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    if (st == TL_OK)
        cu->cuFuncGetAttribute(&p->regs, CU_FUNC_ATTRIBUTE_NUM_REGS, p->fn);
    if (st == TL_OK && cu->cuOccupancyMaxActiveBlocksPerMultiprocessor &&
        cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&p->blocks_per_sm, p->fn, p->threads,
                                                         (size_t)p->smem_bytes) != CUDA_SUCCESS)
        p->blocks_per_sm = 0;
    return st;
}

/* Shared memory a block may use: the device's opt-in limit when compiling
 * for it, else what the target architecture allows. */
static int64_t smem_limit(tl_ctx *ctx, const tli_target *t)
{
    if (ctx->has_device && strcmp(t->name, ctx->info.target) == 0 && ctx->info.smem_per_block_optin > 0)
        return ctx->info.smem_per_block_optin;
    return t->smem_limit;
}

static const char *pick_target(tl_ctx *ctx, const char *want)
{
    return want ? want : ctx->target;
}

TL_API void tl_program_destroy(tl_program *p)
{
    if (!p)
        return;
    tl_program_destroy(p->safe_variant);
    if (p->has_lock)
        pthread_mutex_destroy(&p->safe_lock);
    if (p->mod && p->ctx && p->ctx->cu && tli_ctx_bind(p->ctx) == TL_OK)
        p->ctx->cu->cuModuleUnload(p->mod);
    if (p->has_ir)
        tli_ir_free(&p->ir);
    free(p->source);
    free(p->cubin);
    free(p);
}

/* Shared tail of tl_compile and tli_program_from_source: cubin, module. */
static tl_status finish_program(tl_ctx *ctx, tl_program *p, const tl_compile_options *opt,
                                tl_program **out)
{
    tl_status st = get_cubin(ctx, p, opt);
    if (st == TL_OK)
        st = tli_program_load(ctx, p);
    if (st != TL_OK) {
        tl_program_destroy(p);
        return st;
    }
    *out = p;
    return TL_OK;
}

/* Lowers ir for target t (the safe variant when `safe`) and prints it:
 * p->source, p->kname, p->launch. TILEC_DUMP=<pass>|all prints the kernel
 * after that pass (every pass) on stderr: a debugging switch the user
 * turns on, the one place the library prints. */
static tl_status lower_and_emit(tl_ctx *ctx, const tli_ir *ir, const tli_target *t, bool safe, tl_program *p,
                                const char *api)
{
    tli_lower_options lo = {.smem_limit = smem_limit(ctx, t), .safe = safe};
    tli_str dump;
    tli_str_init(&dump);
    const char *want = getenv("TILEC_DUMP");
    if (want && tli_pass_known(want)) {
        lo.dump = want;
        lo.dump_out = &dump;
    }
    tli_lowered L;
    tl_status st = tli_lower(ir, t, &lo, &L);
    char err[512];
    tli_fmt(err, sizeof err, "%s", L.err);
    if (dump.len)
        fputs(dump.data, stderr);
    tli_str_free(&dump);
    if (st == TL_OK)
        st = tli_emit_cuda(&L, &p->source, p->kname, sizeof p->kname, err, sizeof err);
    if (st == TL_OK) {
        p->launch = L.launch;
        p->threads = L.launch.threads;
        p->smem_bytes = (int)L.launch.smem_bytes;
    }
    tli_lowered_free(&L);
    if (st != TL_OK)
        return tli_fail(ctx, st, "%s: kernel '%s': %s", api, ir->name, err);
    return TL_OK;
}

/* A program of graph ir (copied) for target t, lowered and printed. */
static tl_status new_program(tl_ctx *ctx, const tli_ir *ir, const tli_target *t, bool safe,
                             const tl_compile_options *opt, const char *api, tl_program **out)
{
    *out = NULL;
    tl_program *p = calloc(1, sizeof *p);
    if (!p || !tli_ir_clone(&p->ir, ir)) {
        free(p);
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "%s: out of host memory", api);
    }
    p->has_ir = true;
    p->ctx = ctx;
    p->safe = safe;
    if (opt)
        p->opt = *opt;
    p->opt.target = NULL; /* p->target holds it */
    p->has_lock = pthread_mutex_init(&p->safe_lock, NULL) == 0;
    tli_fmt(p->target, sizeof p->target, "%s", t->name);
    double t0 = tli_now_ms();
    tl_status st = lower_and_emit(ctx, &p->ir, t, safe, p, api);
    p->compile_ms = tli_now_ms() - t0;
    if (st != TL_OK) {
        tl_program_destroy(p);
        return st;
    }
    *out = p;
    return TL_OK;
}

/* The description of target `name`, which NVRTC must compile for and the
 * library generate code for (sm_70 or later). */
static tl_status resolve_target(tl_ctx *ctx, const char *name, const char *api, tli_target *t)
{
    char why[512];
    const char *problem = name ? tli_target_problem(name, why, sizeof why) : "is missing";
    if (problem)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: target '%s' %s", api, name ? name : "(null)", problem);
    if (!tli_target_get(name, t))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: target '%s' is older than sm_70, which the library does not "
                        "generate code for", api, name);
    return TL_OK;
}

tl_status tli_program_prepare(tl_kernel *k, const tl_compile_options *opt, const char *api, tl_program **out)
{
    *out = NULL;
    tl_ctx *ctx = k->ctx;
    tl_status st = tli_kernel_verify(k, api);
    if (st != TL_OK)
        return st;
    tli_target t;
    if ((st = resolve_target(ctx, pick_target(ctx, opt ? opt->target : NULL), api, &t)) != TL_OK)
        return st;
    return new_program(ctx, &k->ir, &t, false, opt, api, out);
}

tl_status tli_program_prepare_safe(const tl_program *p, const char *api, tl_program **out)
{
    *out = NULL;
    tli_target t;
    if (p->safe || p->launch.nalign == 0)
        return TL_OK;
    if (!tli_target_get(p->target, &t))
        return tli_fail(p->ctx, TL_ERR_INTERNAL, "%s: target '%s' vanished", api, p->target);
    return new_program(p->ctx, &p->ir, &t, true, &p->opt, api, out);
}

TL_API tl_status tl_compile(tl_kernel *k, const tl_compile_options *opt, tl_program **out)
{
    if (out)
        *out = NULL;
    if (!k || !out)
        return k ? tli_fail(k->ctx, TL_ERR_INVALID_ARG, "tl_compile: out is NULL") : TL_ERR_INVALID_ARG;
    tl_program *p;
    tl_status st = tli_program_prepare(k, opt, "tl_compile", &p);
    if (st != TL_OK)
        return st;
    unsigned since = tli_fail_count();
    st = finish_program(k->ctx, p, opt, out);
    if (st == TL_OK && (*out)->from_cache)
        (*out)->compile_ms = 0;
    return tli_fail_as(k->ctx, st, "tl_compile", since); /* NVRTC's and the driver's messages name tl_compile */
}

tl_status tli_program_from_source(tl_ctx *ctx, const char *src, const char *kname, int threads,
                                  tl_program **out)
{
    tl_program *p = calloc(1, sizeof *p);
    if (!p || !(p->source = tli_strdup(src))) {
        free(p);
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    p->ctx = ctx;
    p->threads = threads;
    p->launch.threads = p->launch.block_threads = threads;
    tli_fmt(p->kname, sizeof p->kname, "%s", kname);
    tli_fmt(p->target, sizeof p->target, "%s", ctx->target);
    return finish_program(ctx, p, NULL, out);
}

/* ---------------------------------------------------------- accessors */

TL_API const char *tl_program_source(const tl_program *p) { return p ? p->source : NULL; }

TL_API const void *tl_program_cubin(const tl_program *p, size_t *size)
{
    if (size)
        *size = p ? p->cubin_len : 0;
    return p ? p->cubin : NULL;
}

TL_API tl_status tl_program_get_info(const tl_program *p, tl_program_info *out)
{
    if (!p || !out)
        return p ? tli_fail(p->ctx, TL_ERR_INVALID_ARG, "tl_program_get_info: out is NULL") : TL_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    tli_fmt(out->name, sizeof out->name, "%s", p->kname);
    tli_fmt(out->target, sizeof out->target, "%s", p->target);
    out->loaded = p->fn != NULL;
    out->from_cache = p->from_cache;
    out->compile_ms = p->compile_ms;
    out->num_params = p->has_ir ? p->ir.p.n - 1 : 0;
    out->threads = p->threads;
    out->smem_bytes = p->smem_bytes;
    out->regs = p->regs;
    out->blocks_per_sm = p->blocks_per_sm;
    return TL_OK;
}

TL_API tl_status tl_program_param(const tl_program *p, int i, tl_param_info *out)
{
    if (!p || !out || !p->has_ir || i < 0 || i >= p->ir.p.n - 1)
        return p ? tli_fail(p->ctx, TL_ERR_INVALID_ARG, "tl_program_param: %s", !out ? "out is NULL" :
                            !p->has_ir ? "the program has no parameter list" : "no parameter of that index")
                 : TL_ERR_INVALID_ARG;
    const tli_param *q = &p->ir.p.v[i + 1];
    out->name = q->name;
    out->kind = (tl_param_kind)q->kind;
    out->dtype = (tl_dtype)q->dtype;
    out->rank = q->kind == TL_PARAM_TENSOR ? tli_B(&p->ir, q->buf)->rank : 0;
    out->written = q->kind == TL_PARAM_TENSOR && tli_B(&p->ir, q->buf)->written;
    out->pointer_array = q->kind == TL_PARAM_TENSOR && tli_B(&p->ir, q->buf)->array_count != 0;
    return TL_OK;
}

TL_API tl_status tl_kernel_source(tl_kernel *k, const char *target, char **src)
{
    if (!k || !src)
        return k ? tli_fail(k->ctx, TL_ERR_INVALID_ARG, "tl_kernel_source: src is NULL") : TL_ERR_INVALID_ARG;
    *src = NULL;
    tl_status st = tli_kernel_verify(k, "tl_kernel_source");
    if (st != TL_OK)
        return st;
    tli_target t;
    if ((st = resolve_target(k->ctx, pick_target(k->ctx, target), "tl_kernel_source", &t)) != TL_OK)
        return st;
    tl_program *p;
    if ((st = new_program(k->ctx, &k->ir, &t, false, NULL, "tl_kernel_source", &p)) != TL_OK)
        return st;
    *src = p->source;
    p->source = NULL;
    tl_program_destroy(p);
    return TL_OK;
}

/* k's generated source for *target (NULL: the context's, written back),
 * with the device header inlined as NVRTC compiles it; failures named as
 * api's. */
static tl_status full_source(tl_kernel *k, const char **target, const char *api, unsigned since, char **full)
{
    char *src;
    tl_status st = tl_kernel_source(k, *target, &src);
    if (st != TL_OK)
        return tli_fail_as(k->ctx, st, api, since);
    *target = pick_target(k->ctx, *target);
    *full = with_device_header(src, k->ir.name);
    free(src);
    return *full ? TL_OK : tli_fail(k->ctx, TL_ERR_OUT_OF_MEMORY, "%s: out of host memory", api);
}

TL_API tl_status tl_kernel_ptx(tl_kernel *k, const char *target, char **ptx)
{
    if (!k || !ptx)
        return k ? tli_fail(k->ctx, TL_ERR_INVALID_ARG, "tl_kernel_ptx: ptx is NULL") : TL_ERR_INVALID_ARG;
    *ptx = NULL;
    unsigned since = tli_fail_count();
    char *full;
    tl_status st = full_source(k, &target, "tl_kernel_ptx", since, &full);
    if (st != TL_OK)
        return st;
    size_t len;
    st = tli_nvrtc_compile(k->ctx, full, k->ir.name, target, 1, NULL, 0, (void **)ptx, &len, NULL);
    free(full);
    return tli_fail_as(k->ctx, st, "tl_kernel_ptx", since);
}

TL_API tl_status tl_kernel_ptxas_report(tl_kernel *k, const char *target, char **report)
{
    if (!k || !report)
        return k ? tli_fail(k->ctx, TL_ERR_INVALID_ARG, "tl_kernel_ptxas_report: report is NULL")
                 : TL_ERR_INVALID_ARG;
    *report = NULL;
    unsigned since = tli_fail_count();
    char *full;
    tl_status st = full_source(k, &target, "tl_kernel_ptxas_report", since, &full);
    if (st != TL_OK)
        return st;
    /* NVRTC from 12.9 keeps compiled PTX and cubins in the driver's compute cache
     * (~/.nv/ComputeCache) where a driver is installed, and a hit returns the cubin
     * without running ptxas: no report. --no-cache, which older NVRTCs refuse, makes
     * it compile. */
    const char *flags[] = {"-Xptxas=-v", "--no-cache"};
    int major = 0, minor = 0;
    tli_nvrtc_version(&major, &minor);
    int nflags = major > 12 || (major == 12 && minor >= 9) ? 2 : 1;
    void *cubin = NULL;
    size_t len = 0;
    char *log = NULL;
    st = tli_nvrtc_compile(k->ctx, full, k->ir.name, target, 0, flags, nflags, &cubin, &len, &log);
    free(full);
    free(cubin);
    if (st == TL_OK && !log && !(log = strdup("")))
        st = tli_fail(k->ctx, TL_ERR_OUT_OF_MEMORY, "tl_kernel_ptxas_report: out of host memory");
    if (st != TL_OK) {
        free(log);
        return tli_fail_as(k->ctx, st, "tl_kernel_ptxas_report", since);
    }
    *report = log;
    return TL_OK;
}

TL_API void tl_free_host(void *p) { free(p); }

/* -------------------------------------------------------------- launch */

tl_status tli_launch_raw(const tl_program *p, const int64_t grid[3], void **params, void *stream)
{
    tl_ctx *ctx = p->ctx;
    if (!p->fn)
        return tli_fail(ctx, TL_ERR_NO_DEVICE,
                        "kernel '%s' (%s) is not loaded: the context has no device of that architecture",
                        p->kname, p->target);
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
        return TL_OK;
    tl_status st = tli_ctx_bind(ctx);
    if (st != TL_OK)
        return st;
    if (p->launch.sk_slot_floats && ctx->cu->cuLaunchCooperativeKernel) /* every CTA resident: the flags need it */
        return tli_cu_check(ctx,
                            ctx->cu->cuLaunchCooperativeKernel(p->fn, (unsigned)grid[0], (unsigned)grid[1],
                                                               (unsigned)grid[2], (unsigned)p->threads, 1, 1,
                                                               (unsigned)p->smem_bytes, (CUstream)stream, params),
                            "cuLaunchCooperativeKernel");
    CUresult r = ctx->cu->cuLaunchKernel(p->fn, (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
                                         (unsigned)p->threads, 1, 1, (unsigned)p->smem_bytes,
                                         (CUstream)stream, params, NULL);
    return tli_cu_check(ctx, r, "cuLaunchKernel");
}

/* Kernel-parameter storage: one slot per parameter, in the C type the
 * kernel declares. */
typedef union arg_slot {
    uint64_t ptr;
    long long i64;
    int i32;
    float f32;
    double f64;
    uint16_t h;
} arg_slot;

static void fill_slot(const tli_param *q, const tli_bound *b, int i, arg_slot *s)
{
    if (q->kind == TL_PARAM_TENSOR) {
        s->ptr = b->ptr[i];
        return;
    }
    switch ((tl_dtype)q->dtype) {
    case TL_I64: s->i64 = b->i[i]; break;
    case TL_I32: s->i32 = (int)b->i[i]; break;
    case TL_F32: s->f32 = (float)b->f[i]; break;
    case TL_F64: s->f64 = b->f[i]; break;
    case TL_F16: s->h = tl_f32_to_f16((float)b->f[i]); break;
    case TL_BF16: s->h = tl_f32_to_bf16((float)b->f[i]); break;
    default: break;
    }
}

/* Encodes the TMA descriptor of map m for this launch's tensor (a box of
 * box_outer x box_inner elements of its last two dimensions, 1 in the
 * others, 128-byte swizzle); false when TMA cannot take it. */
static bool encode_tma(const tl_program *p, const tli_bound *b, const tli_tma_map *m, CUtensorMap *out)
{
    const tli_driver_api *cu = p->ctx->cu;
    const tli_bnode *t = tli_B(&p->ir, m->buf);
    uint64_t ptr = b->ptr[t->param];
    int r = t->rank;
    size_t esz = tl_dtype_size((tl_dtype)t->dtype);
    uint64_t dims[TL_MAX_RANK], strides[TL_MAX_RANK];
    uint32_t box[TL_MAX_RANK], estr[TL_MAX_RANK];
    if (!cu || !cu->cuTensorMapEncodeTiled || ptr % 16 || r < 2)
        return false;
    for (int d = 0; d < r; d++) { /* innermost first */
        int64_t ext = tli_eval_host_int(&p->ir, b, t->shape[r - 1 - d]);
        if (ext < 1 || ext > UINT32_MAX)
            return false;
        dims[d] = (uint64_t)ext;
        box[d] = d == 0 ? (uint32_t)m->box_inner : d == 1 ? (uint32_t)m->box_outer : 1;
        estr[d] = 1;
        if (d > 0) {
            int64_t st = tli_eval_host_int(&p->ir, b, t->stride[r - 1 - d]) * (int64_t)esz;
            if (st % 16 || st < 16 || st >= (1LL << 40))
                return false;
            strides[d - 1] = (uint64_t)st;
        }
    }
    if (tli_eval_host_int(&p->ir, b, t->stride[r - 1]) != 1)
        return false;
    /* TMA has no 8-bit float type; it moves bytes, so UINT8 copies them */
    int dt = t->dtype == TL_BF16                   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
             : tli_dtype_is_f8((tl_dtype)t->dtype) ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                                   : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return cu->cuTensorMapEncodeTiled(out, dt, (unsigned)r, (void *)(uintptr_t)ptr, dims, strides, box, estr,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == 0;
}

/* Whether this launch's tensors have the alignment the program assumes
 * (lowered.h, tli_align_req). */
static bool aligned_enough(const tl_program *p, const tli_bound *b)
{
    for (int i = 0; i < p->launch.nalign; i++) {
        const tli_bnode *t = tli_B(&p->ir, p->launch.align[i].buf);
        int64_t esz = (int64_t)tl_dtype_size((tl_dtype)t->dtype), per = 16 / esz;
        if (b->ptr[t->param] % 16 || tli_eval_host_int(&p->ir, b, t->stride[t->rank - 1]) != 1)
            return false;
        for (int d = 0; d + 1 < t->rank; d++)
            if (tli_eval_host_int(&p->ir, b, t->stride[d]) % per)
                return false;
        if ((p->launch.align[i].kind & TLI_ALIGN_CHUNKS) && tli_eval_host_int(&p->ir, b, t->shape[t->rank - 1]) % per)
            return false;
    }
    return true;
}

tl_status tli_program_safe_variant(const tl_program *cp, const tl_program **out)
{
    tl_program *p = (tl_program *)cp; /* the variant is a cache: the program stays immutable to callers */
    if (p->has_lock)
        pthread_mutex_lock(&p->safe_lock);
    tl_status st = TL_OK;
    if (!p->safe_variant) {
        tl_program *s = NULL;
        st = tli_program_prepare_safe(p, "tl_launch", &s);
        if (st == TL_OK && s)
            st = finish_program(p->ctx, s, &p->opt, &s);
        if (st == TL_OK)
            p->safe_variant = s;
    }
    /* a program that assumes no alignment is its own safe variant */
    *out = p->safe_variant ? p->safe_variant : p;
    if (p->has_lock)
        pthread_mutex_unlock(&p->safe_lock);
    return st;
}

/* The CTAs of a launch: the kernel's grid, or for a persistent program
 * min(ceil(blocks / persistent), SMs) CTAs along x (stream-K: one an SM,
 * each with a share of the blocks' steps). */
static void cta_grid(const tl_program *p, int64_t grid[3])
{
    if (!p->launch.persistent)
        return;
    int64_t blocks = grid[0] * grid[1] * grid[2], per = p->launch.persistent;
    int64_t ctas = (blocks + per - 1) / per;
    int64_t sms = tli_ctx_sms(p->ctx, 1);
    grid[0] = ctas < sms && !p->launch.sk_slot_floats ? ctas : sms;
    grid[1] = grid[2] = blocks ? 1 : 0;
}

TL_API tl_status tl_launch(const tl_program *p, void *stream, int nargs, const tl_arg *args)
{
    if (!p)
        return TL_ERR_INVALID_ARG;
    tl_ctx *ctx = p->ctx;
    if (!p->has_ir)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_launch: program has no parameter list");
    tli_bound b;
    char err[256];
    tl_status st = tli_bind_args(&p->ir, nargs, args, TL_ARG_DEVICE_PTR, &b, err, sizeof err);
    if (st != TL_OK)
        return tli_fail(ctx, st, "tl_launch: %s", err);
    int64_t grid[3];
    if (!tli_eval_grid(&p->ir, &b, grid, err, sizeof err)) {
        tli_bound_free(&b);
        return tli_fail(ctx, TL_ERR_LAUNCH_ARGS, "tl_launch: %s", err);
    }
    int n = p->ir.p.n - 1;
    if (n > 64) {
        tli_bound_free(&b);
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_launch: more than 64 parameters");
    }
    arg_slot slots[64];
    void *params[64 + TLI_MAX_TMA + 2]; /* the arguments, TMA maps, the stream-K workspace and flags */
    CUtensorMap maps[TLI_MAX_TMA];
    bool fits = aligned_enough(p, &b);
    for (int i = 0; fits && i < p->launch.nmaps; i++) {
        memset(&maps[i], 0, sizeof maps[i]);
        fits = encode_tma(p, &b, &p->launch.maps[i], &maps[i]);
        params[n + i] = &maps[i];
    }
    if (!fits) { /* this launch's tensors miss the alignment p assumes */
        tli_bound_free(&b);
        const tl_program *s;
        st = tli_program_safe_variant(p, &s);
        return st != TL_OK ? st : tl_launch(s, stream, nargs, args);
    }
    for (int i = 0; i < n; i++) {
        fill_slot(&p->ir.p.v[i + 1], &b, i + 1, &slots[i]);
        params[i] = &slots[i];
    }
    tli_bound_free(&b);
    cta_grid(p, grid);
    /* The stream's workspace. Stream-K: a flag per CTA at the start, where
     * every stream-K program finds its flags, all lowered again by the
     * launch that raised them (a program of smaller slots must not take
     * stale partial sums of an earlier launch for flags); then a slot per
     * CTA. A block counter (tl_use_persistent(k, 2)): the first two words,
     * which its launches leave zero as stream-K's leave their flags, the
     * stream running its launches one after another. */
    uint64_t ws = 0;
    size_t flags = 0, bytes = 0;
    if (p->launch.sk_slot_floats) {
        flags = ((size_t)grid[0] * sizeof(unsigned) + 255) / 256 * 256;
        bytes = flags + (size_t)grid[0] * (size_t)p->launch.sk_slot_floats * sizeof(float);
    } else if (p->launch.block_counter) {
        bytes = 256;
    }
    if (bytes && grid[0] * grid[1] * grid[2] > 0) { /* (an empty grid launches nothing) */
        st = tli_ctx_bind(ctx);
        if (st == TL_OK)
            st = tli_ctx_sk_workspace(ctx, stream, bytes, &ws);
        if (st != TL_OK)
            return st;
    }
    /* the kernel's extra parameters: stream-K's slots (past the flags; a
     * counter program has none) and the workspace's start (flags or counter) */
    uint64_t sk_ws = ws ? ws + flags : 0;
    params[n + p->launch.nmaps] = &sk_ws;
    params[n + p->launch.nmaps + 1] = &ws;
    return tli_launch_raw(p, grid, params, stream);
}

/* ----------------------------------------------------------- interpret */

static tl_status interpret_ir(tl_ctx *ctx, const tli_ir *ir, int nargs, const tl_arg *args, const char *api)
{
    tli_bound b;
    char err[256];
    tl_status st = tli_bind_args(ir, nargs, args, TL_ARG_HOST_PTR, &b, err, sizeof err);
    if (st == TL_OK) {
        st = tli_interp_run(ir, &b, err, sizeof err);
        tli_bound_free(&b);
    }
    return st == TL_OK ? TL_OK : tli_fail(ctx, st, "%s: %s", api, err);
}

TL_API tl_status tl_interpret(tl_kernel *k, int nargs, const tl_arg *args)
{
    if (!k)
        return TL_ERR_INVALID_ARG;
    tl_status st = tli_kernel_verify(k, "tl_interpret");
    return st != TL_OK ? st : interpret_ir(k->ctx, &k->ir, nargs, args, "tl_interpret");
}

TL_API tl_status tl_program_interpret(const tl_program *p, int nargs, const tl_arg *args)
{
    if (!p || !p->has_ir)
        return TL_ERR_INVALID_ARG;
    return interpret_ir(p->ctx, &p->ir, nargs, args, "tl_program_interpret");
}

/* ------------------------------------------------------------ op cache */

static tl_status remember(tl_ctx *ctx, const char *key, tl_program *p, const tl_program **out)
{
    tli_op_entry *e = calloc(1, sizeof *e);
    if (!e) {
        tl_program_destroy(p);
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    tli_fmt(e->key, sizeof e->key, "%s", key);
    e->prog = p;
    e->next = ctx->ops;
    ctx->ops = e;
    *out = p;
    return TL_OK;
}

static const tl_program *find_op(tl_ctx *ctx, const char *key)
{
    for (tli_op_entry *e = ctx->ops; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e->prog;
    return NULL;
}

/* Both hold ctx->ops_lock from the lookup to the insertion, so threads
 * asking for one op at once compile it once. */
tl_status tli_op_program(tl_ctx *ctx, const char *key, tli_build_fn build, const void *user,
                         const tl_program **out)
{
    pthread_mutex_lock(&ctx->ops_lock);
    tl_status st = TL_OK;
    if (!(*out = find_op(ctx, key))) {
        tl_kernel *k = NULL;
        tl_program *p = NULL;
        st = build(ctx, user, &k);
        if (st == TL_OK)
            st = tl_compile(k, NULL, &p);
        tl_kernel_destroy(k);
        if (st == TL_OK)
            st = remember(ctx, key, p, out);
    }
    pthread_mutex_unlock(&ctx->ops_lock);
    return st;
}

tl_status tli_op_program_source(tl_ctx *ctx, const char *key, const char *src, const char *kname,
                                int threads, const tl_program **out)
{
    pthread_mutex_lock(&ctx->ops_lock);
    tl_status st = TL_OK;
    if (!(*out = find_op(ctx, key))) {
        tl_program *p = NULL;
        st = tli_program_from_source(ctx, src, kname, threads, &p);
        if (st == TL_OK)
            st = remember(ctx, key, p, out);
    }
    pthread_mutex_unlock(&ctx->ops_lock);
    return st;
}
