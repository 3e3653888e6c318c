/*
 * tilec.c - the command-line tool: an environment report, the generated CUDA
 * C and PTX of the prebuilt ops, compiles through the cubin cache, the
 * cache itself, autotuning and its database, and a GEMM schedule sweep
 * against cuBLAS (the tuner without a record). It uses the public API
 * only, like any other program.
 *
 * Exit status: 0 success (also `info` on a machine without a GPU: that is a
 * report, not a failure), 1 a library error (status name and message on
 * stderr), 2 bad usage.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* getopt_long (glibc declares it in getopt.h; other libcs may want this) */
#endif
#include "tilec.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_LIB = 1, EXIT_USAGE = 2 };

/* Options a command accepts (bit mask). */
enum { OPT_ARCH = 1, OPT_DTYPE = 2, OPT_DEVICE = 4, OPT_CACHE_DIR = 8, OPT_SHAPE = 16, OPT_TRANS_B = 32 };
/* ... and those of tune (and bench, which shares its problem options) */
enum { OPT_BIAS = 64, OPT_EPILOGUE = 128, OPT_BUDGET = 256, OPT_NO_SAVE = 512, OPT_LIST = 1024, OPT_CLEAR = 2048 };
/* ... and dump's, and compile's */
enum { OPT_AFTER = 4096, OPT_CUBIN = 8192, OPT_CAUSAL = 16384 };

typedef struct cli {
    const char *arch;      /* NULL: the context's target              */
    tl_dtype dtype;
    int dtype_given;       /* --dtype was on the command line         */
    const char *shape;     /* --shape MxNxK; NULL: the default        */
    int trans_b;           /* --trans-b                               */
    int device;
    int device_given;      /* --device was on the command line        */
    const char *cache_dir; /* NULL: the library's default             */
    int bias;              /* --bias                                  */
    tl_epilogue epilogue;  /* --epilogue                              */
    double budget_s;       /* --budget; 0: none                       */
    int no_save, list, clear; /* --no-save, --list, --clear           */
    const char *after;     /* --after PASS (dump); NULL: the builder graph */
    const char *cubin;     /* --cubin FILE (compile): where the cubin goes */
    int causal;            /* --causal (tune flash_attn)              */
    char **args;           /* positional arguments after the command  */
    int nargs;
} cli;

typedef int (*command_fn)(const cli *c);

typedef struct command {
    const char *name;
    command_fn run;
    int options;           /* OPT_* it accepts                        */
    int nargs;             /* positional arguments it takes (-1: 0 or 1) */
} command;

static const char usage_text[] =
    "usage: tilec <command> [options]\n"
    "\n"
    "commands:\n"
    "  info [--device N]          library, driver and NVRTC versions; the GPU's limits\n"
    "  source <op> [--arch sm_XX] [--dtype T] [--device N]\n"
    "                             print the generated CUDA C of a prebuilt op\n"
    "  dump <op> [--after PASS|all] [--arch sm_XX] [--dtype T]\n"
    "                             the op's builder graph as text, or the kernel\n"
    "                             lowered through pass PASS (verify, layout,\n"
    "                             threads, reduce, pipeline, smem, sync, launch)\n"
    "  ptx <op> [--arch sm_XX] [--dtype T] [--device N]\n"
    "                             print its PTX (compiled with NVRTC)\n"
    "  ptxas <op> [--arch sm_XX] [--dtype T] [--device N]\n"
    "                             ptxas's report on it: registers, spills and\n"
    "                             performance advisories (wgmma serialized, ...)\n"
    "  compile <op> [--arch sm_XX] [--dtype T] [--device N] [--cache-dir DIR] [--cubin FILE]\n"
    "                             compile it through the cubin cache and report;\n"
    "                             --cubin writes the cubin to FILE (for cuobjdump)\n"
    "  cache stats [--cache-dir DIR]   what the cubin cache holds\n"
    "  cache clear [--cache-dir DIR]   remove every entry of the cubin cache\n"
    "  bench gemm [--shape MxNxK] [--dtype bf16|f16|f8e4m3|f8e5m2] [--trans-b] [--device N]\n"
    "                             sweep GEMM schedules against cuBLAS on the GPU\n"
    "                             (default 4096x4096x4096 bf16, B as [K, N])\n"
    "  tune gemm [--shape MxNxK] [--dtype bf16|f16|f8e4m3|f8e5m2] [--trans-b] [--bias]\n"
    "            [--epilogue relu|gelu_erf|gelu_tanh] [--budget SECONDS] [--no-save]\n"
    "            [--device N] [--cache-dir DIR]\n"
    "                             autotune the op for this problem on the GPU and\n"
    "                             record the best schedule for its shape class\n"
    "  tune softmax [--shape ROWSxCOLS] [--dtype f32|f16|bf16] [--budget SECONDS]\n"
    "            [--no-save] [--device N] [--cache-dir DIR]\n"
    "                             the same for the row softmax (default 16384x1024 f16)\n"
    "  tune rmsnorm [--shape ROWSxCOLS] [--dtype f32|f16|bf16] [--budget SECONDS] [--no-save] ...\n"
    "                             the same for RMSNorm (eps 1e-6)\n"
    "  tune flash_attn [--shape BxHxSxD | BxHxSQxSKVxD] [--causal] [--dtype bf16|f16]\n"
    "            [--budget SECONDS] [--no-save] [--device N] [--cache-dir DIR]\n"
    "                             the same for FlashAttention (default 4x16x4096x128 bf16:\n"
    "                             batch, heads, sequence length, head_dim)\n"
    "  tune --list [--cache-dir DIR]   the tuning database's records\n"
    "  tune --clear [--cache-dir DIR]  remove them all\n"
    "  help                       this text\n"
    "\n"
    "options:\n"
    "  --arch sm_XX      compile target, e.g. sm_80 or sm_90a (default: the GPU's,\n"
    "                    or sm_90a without a GPU)\n"
    "  --dtype T         element type: f32, f16 or bf16 (default: f32; bf16 for gemm, flash_attn);\n"
    "                    gemm also f8e4m3, f8e5m2 (B as [N, K], a bf16 C)\n"
    "  --device N        GPU ordinal (default 0)\n"
    "  --cache-dir DIR   cubin cache directory (default: $TILEC_CACHE_DIR,\n"
    "                    $XDG_CACHE_HOME/tilec, ~/.cache/tilec)\n"
    "  --shape MxNxK     GEMM sizes for 'bench gemm'\n"
    "  --trans-b         GEMM with B given as [N, K]\n"
    "  --bias, --epilogue E   a GEMM with a bias and an activation, for 'tune'\n"
    "  --budget SECONDS  time budget of a tuning run (default: none)\n"
    "  --no-save         tune without recording the result\n"
    "  --causal          causal attention, for 'tune flash_attn'\n"
    "\n"
    "Everything but launching works without a GPU ('bench' and 'tune' say they need\n"
    "one and exit 0). The tuning database is tune.db in the cache directory.\n"
    "Exit status: 0 ok, 1 library error (or no candidate passed), 2 bad usage.\n";

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                            */
/* ------------------------------------------------------------------------ */

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tilec: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(try 'tilec help')\n", stderr);
    return EXIT_USAGE;
}

static int lib_error(tl_status st, const char *msg)
{
    fprintf(stderr, "tilec: %s: %s\n", tl_status_name(st), msg && *msg ? msg : "(no message)");
    return EXIT_LIB;
}

static int ctx_error(tl_ctx *ctx, tl_status st)
{
    return lib_error(st, tl_ctx_error(ctx));
}

/* Cache fallbacks and other warnings of the library go to stderr. */
static void log_warning(void *user, tl_log_level level, const char *msg)
{
    (void)user;
    if (level == TL_LOG_WARN)
        fprintf(stderr, "tilec: warning: %s\n", msg);
}

/* A context on the chosen device; without a driver or a GPU, an offline one
 * (unless a device was asked for by number: then its absence is the error). */
static int open_context(const cli *c, int disk_cache, tl_ctx **ctx)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = c->device;
    o.target = c->arch; /* --arch also picks the prebuilt ops' default schedules */
    o.cache_dir = c->cache_dir;
    o.disk_cache = disk_cache;
    o.log = disk_cache ? log_warning : NULL; /* only the cache has warnings worth showing */
    char msg[1024];
    tl_status st = tl_ctx_create(&o, ctx, msg, sizeof msg);
    if (st == TL_OK)
        return 0;
    if ((st == TL_ERR_NO_DRIVER || st == TL_ERR_NO_DEVICE) && !c->device_given) {
        o.device = TL_NO_DEVICE;
        st = tl_ctx_create(&o, ctx, msg, sizeof msg);
        if (st == TL_OK)
            return 0;
    }
    return lib_error(st, msg);
}

static int known_op(const char *op)
{
    for (const char *const *n = tl_op_names(); *n; n++)
        if (strcmp(*n, op) == 0)
            return 1;
    return 0;
}

static void list_ops(FILE *f)
{
    const char *sep = "";
    for (const char *const *n = tl_op_names(); *n; n++, sep = ", ")
        fprintf(f, "%s%s", sep, *n);
}

/* Builds the kernel of op c->args[0] in a new context. On failure the
 * context is destroyed and an exit status returned. */
static int build_op(const cli *c, int disk_cache, tl_ctx **ctx, tl_kernel **k)
{
    const char *op = c->args[0];
    if (!known_op(op)) {
        fprintf(stderr, "tilec: unknown op '%s' (known: ", op);
        list_ops(stderr);
        fputs(")\n", stderr);
        return EXIT_USAGE;
    }
    int rc = open_context(c, disk_cache, ctx);
    if (rc)
        return rc;
    /* each op's natural element type unless --dtype says otherwise */
    /* the ops on tensor cores default to bf16, the rest to f32 */
    bool tensor_core = strcmp(op, "gemm") == 0 || strcmp(op, "flash_attn") == 0;
    tl_dtype dt = c->dtype_given ? c->dtype : (tensor_core ? TL_BF16 : TL_F32);
    tl_status st = tl_op_build(*ctx, op, dt, k);
    if (st != TL_OK) {
        rc = ctx_error(*ctx, st);
        tl_ctx_destroy(*ctx);
        *ctx = NULL;
    }
    return rc;
}

static void print_text(const char *s)
{
    size_t n = strlen(s);
    fputs(s, stdout);
    if (n == 0 || s[n - 1] != '\n')
        putchar('\n');
}

/* ------------------------------------------------------------------------ */
/* info                                                                      */
/* ------------------------------------------------------------------------ */

static void print_clock(const char *what, int khz)
{
    if (khz > 0)
        printf("  %-20s %d MHz\n", what, khz / 1000);
    else
        printf("  %-20s not reported\n", what);
}

static void print_device(const tl_device_info *d)
{
    printf("device %d:            %s\n", d->ordinal, d->name);
    printf("  %-20s %d.%d\n", "compute capability", d->cc_major, d->cc_minor);
    printf("  %-20s %d\n", "SMs", d->sm_count);
    printf("  %-20s %.1f GiB\n", "global memory", (double)d->global_mem_bytes / (1024.0 * 1024 * 1024));
    printf("  %-20s %d KiB per block (opt-in max %d KiB), %d KiB per SM\n", "shared memory",
           d->smem_per_block / 1024, d->smem_per_block_optin / 1024, d->smem_per_sm / 1024);
    printf("  %-20s %.1f MiB\n", "L2 cache", d->l2_bytes / (1024.0 * 1024));
    print_clock("SM clock", d->clock_khz);
    print_clock("memory clock", d->mem_clock_khz);
    if (d->mem_bus_width_bits > 0)
        printf("  %-20s %d bits\n", "memory bus width", d->mem_bus_width_bits);
    else
        printf("  %-20s not reported\n", "memory bus width");
    printf("  %-20s %s\n", "compile target", d->target);
}

static int cmd_info(const cli *c)
{
    printf("libtilec %s\n", tl_version());
    int drv = 0, maj = 0, min = 0;
    tl_runtime_versions(&drv, &maj, &min, NULL, 0); /* what is missing is said below */
    if (drv)
        printf("CUDA driver:         %d.%d (%d)\n", drv / 1000, drv % 1000 / 10, drv);
    else
        printf("CUDA driver:         not found\n");
    if (maj)
        printf("NVRTC:               %d.%d\n", maj, min);
    else
        printf("NVRTC:               not found: kernels cannot be compiled "
               "(set TILEC_NVRTC to libnvrtc.so's path)\n");

    tl_ctx_options o = tl_ctx_default_options();
    o.device = c->device;
    o.disk_cache = 0;
    tl_ctx *ctx = NULL;
    char msg[1024];
    tl_status st = tl_ctx_create(&o, &ctx, msg, sizeof msg);
    if (st == TL_OK) {
        tl_device_info d;
        st = tl_ctx_get_device_info(ctx, &d);
        if (st == TL_OK)
            print_device(&d);
        int rc = st == TL_OK ? 0 : ctx_error(ctx, st);
        tl_ctx_destroy(ctx);
        return rc;
    }
    /* No driver or no GPU is what this report is for; a device asked for
     * by a number the driver does not have is the caller's error. */
    int absent = st == TL_ERR_NO_DRIVER || (st == TL_ERR_NO_DEVICE && c->device == 0);
    if (!absent)
        return lib_error(st, msg);
    printf("device %d:            none (%s)\n", c->device, tl_status_name(st));
    printf("  %s\n", msg);
    if (maj)
        printf("  Without a GPU, kernels can still be generated and compiled for sm_80 and\n"
               "  sm_90a ('tilec source', 'tilec ptx', 'tilec compile --arch ...'); launching\n"
               "  them needs one.\n");
    else
        printf("  Without a GPU, kernels can still be generated ('tilec source'); compiling\n"
               "  them needs NVRTC as well.\n");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* source, ptx, compile                                                      */
/* ------------------------------------------------------------------------ */

/* What source, ptx and dump print of the op's kernel. */
typedef enum { TEXT_SOURCE, TEXT_PTX, TEXT_PTXAS, TEXT_DUMP } op_text;

static int print_op_text(const cli *c, op_text what)
{
    tl_ctx *ctx;
    tl_kernel *k;
    int rc = build_op(c, 0, &ctx, &k);
    if (rc)
        return rc;
    char *text = NULL;
    tl_status st = what == TEXT_SOURCE ? tl_kernel_source(k, c->arch, &text)
                   : what == TEXT_PTX  ? tl_kernel_ptx(k, c->arch, &text)
                   : what == TEXT_PTXAS ? tl_kernel_ptxas_report(k, c->arch, &text)
                   : c->after          ? tl_kernel_lower_dump(k, c->arch, c->after, &text)
                                       : tl_kernel_dump(k, &text);
    if (st == TL_OK)
        print_text(text);
    else
        rc = ctx_error(ctx, st);
    tl_free_host(text);
    tl_kernel_destroy(k);
    tl_ctx_destroy(ctx);
    return rc;
}

static int cmd_source(const cli *c) { return print_op_text(c, TEXT_SOURCE); }
static int cmd_ptx(const cli *c) { return print_op_text(c, TEXT_PTX); }
static int cmd_ptxas(const cli *c) { return print_op_text(c, TEXT_PTXAS); }
static int cmd_dump(const cli *c) { return print_op_text(c, TEXT_DUMP); }

static const char *origin_text(int from_cache)
{
    switch (from_cache) {
    case 0: return "no (compiled now with NVRTC)";
    case 1: return "memory hit";
    case 2: return "disk hit";
    default: return "unknown";
    }
}

static const char *param_kind_text(tl_param_kind k)
{
    return k == TL_PARAM_TENSOR ? "tensor" : k == TL_PARAM_DIM ? "dim" : "scalar";
}

static void print_program(tl_ctx *ctx, const tl_program *p)
{
    tl_program_info info;
    if (tl_program_get_info(p, &info) != TL_OK)
        return;
    size_t bytes = 0;
    tl_program_cubin(p, &bytes);
    printf("kernel:       %s\n", info.name);
    printf("target:       %s\n", info.target);
    printf("from cache:   %s\n", origin_text(info.from_cache));
    printf("compile ms:   %.1f\n", info.compile_ms);
    printf("cubin bytes:  %zu\n", bytes);
    printf("threads:      %d per block\n", info.threads);
    if (info.loaded)
        printf("loaded:       yes (%d registers per thread)\n", info.regs);
    else
        printf("loaded:       no (%s)\n", tl_ctx_has_device(ctx) ? "the GPU is of another architecture"
                                                                 : "no GPU");
    printf("arguments:   ");
    for (int i = 0; i < info.num_params; i++) {
        tl_param_info q;
        if (tl_program_param(p, i, &q) == TL_OK)
            printf("%s %s (%s %s)", i ? "," : "", q.name, tl_dtype_name(q.dtype), param_kind_text(q.kind));
    }
    putchar('\n');
}

/* Writes p's cubin to path: the code the library launches, which is what
 * to disassemble (nvcc given the same source can make different SASS than
 * NVRTC; bench/NOTES.md, session 24). */
static int write_cubin(const tl_program *p, const char *path)
{
    size_t bytes = 0;
    const void *cubin = tl_program_cubin(p, &bytes);
    FILE *f = fopen(path, "wb");
    int ok = f && cubin && fwrite(cubin, 1, bytes, f) == bytes;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "tilec: cannot write the cubin to %s\n", path);
        return EXIT_LIB;
    }
    printf("cubin file:   %s\n", path);
    return 0;
}

static int cmd_compile(const cli *c)
{
    tl_ctx *ctx;
    tl_kernel *k;
    int rc = build_op(c, 1, &ctx, &k);
    if (rc)
        return rc;
    tl_compile_options o = {.target = c->arch};
    tl_program *p = NULL;
    tl_status st = tl_compile(k, &o, &p);
    if (st == TL_OK) {
        print_program(ctx, p);
        if (c->cubin)
            rc = write_cubin(p, c->cubin);
    } else {
        rc = ctx_error(ctx, st);
    }
    tl_program_destroy(p);
    tl_kernel_destroy(k);
    tl_ctx_destroy(ctx);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* cache                                                                     */
/* ------------------------------------------------------------------------ */

/* The cache needs no GPU: an offline context opens the same directory,
 * without creating it (looking at a cache must not make one). */
static int open_cache_context(const cli *c, tl_ctx **ctx)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.cache_dir = c->cache_dir;
    o.disk_cache = TL_DISK_CACHE_IF_EXISTS;
    o.log = log_warning;
    char msg[1024];
    tl_status st = tl_ctx_create(&o, ctx, msg, sizeof msg);
    return st == TL_OK ? 0 : lib_error(st, msg);
}

static int cache_stats(tl_ctx *ctx)
{
    tl_cache_stats s;
    tl_status st = tl_cache_get_stats(ctx, &s);
    if (st != TL_OK)
        return ctx_error(ctx, st);
    printf("directory:    %s\n", s.disk_enabled ? s.dir : "(none)");
    printf("disk cache:   %s\n", s.disk_enabled ? "enabled" : "no directory (it does not exist yet)");
    printf("entries:      %lld\n", (long long)s.disk_entries);
    printf("bytes:        %lld (%.1f KiB)\n", (long long)s.disk_bytes, s.disk_bytes / 1024.0);
    printf("this process: %lld memory hits, %lld disk hits, %lld misses, %lld stores, "
           "%lld corrupt entries rebuilt\n", (long long)s.mem_hits, (long long)s.disk_hits,
           (long long)s.misses, (long long)s.stores, (long long)s.corrupt_rebuilt);
    return 0;
}

static int cache_clear(tl_ctx *ctx)
{
    tl_cache_stats s;
    tl_status st = tl_cache_get_stats(ctx, &s);
    if (st == TL_OK)
        st = tl_cache_clear(ctx);
    if (st != TL_OK)
        return ctx_error(ctx, st);
    if (s.disk_enabled)
        printf("removed %lld entries (%lld bytes) from %s\n", (long long)s.disk_entries,
               (long long)s.disk_bytes, s.dir);
    else
        printf("there is no cache directory: nothing to remove\n");
    return 0;
}

static int cmd_cache(const cli *c)
{
    const char *sub = c->args[0];
    if (strcmp(sub, "stats") != 0 && strcmp(sub, "clear") != 0)
        return usage_error("unknown cache command '%s' (expected stats or clear)", sub);
    tl_ctx *ctx;
    int rc = open_cache_context(c, &ctx);
    if (rc)
        return rc;
    rc = strcmp(sub, "stats") == 0 ? cache_stats(ctx) : cache_clear(ctx);
    tl_ctx_destroy(ctx);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* tune, bench                                                               */
/* ------------------------------------------------------------------------ */

/* The GEMM of the command line; an exit status when it is wrong, else 0. */
static int gemm_problem(const cli *c, tl_gemm_desc *d)
{
    tl_dtype in = c->dtype_given ? c->dtype : TL_BF16;
    bool f8 = in == TL_F8E4M3 || in == TL_F8E5M2;
    if (in != TL_BF16 && in != TL_F16 && !f8)
        return usage_error("gemm takes --dtype bf16, f16, f8e4m3 or f8e5m2, not %s", tl_dtype_name(in));
    if (f8 && !c->trans_b)
        return usage_error("gemm with --dtype %s needs --trans-b: 8-bit inputs take B as [N, K] only",
                           tl_dtype_name(in));
    int64_t m = 4096, n = 4096, k = 4096;
    long long v[3];
    char tail;
    if (c->shape) {
        if (sscanf(c->shape, "%lldx%lldx%lld%c", &v[0], &v[1], &v[2], &tail) != 3 || v[0] < 1 || v[1] < 1 ||
            v[2] < 1)
            return usage_error("bad shape '%s' (expected MxNxK, e.g. 4096x4096x4096)", c->shape);
        m = v[0], n = v[1], k = v[2];
    }
    *d = (tl_gemm_desc){.m = m, .n = n, .k = k, .in_dtype = in, .out_dtype = f8 ? TL_BF16 : in, .trans_b = c->trans_b,
                        .has_bias = c->bias, .epilogue = c->epilogue};
    return 0;
}

/* A context on the GPU, or *ctx NULL and 0 when there is none, which is
 * no error for these commands: they say so and succeed. */
static int open_gpu_context(const cli *c, const char *what, tl_ctx **ctx)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = c->device;
    o.cache_dir = c->cache_dir;
    o.log = log_warning;
    char msg[1024];
    *ctx = NULL;
    tl_status st = tl_ctx_create(&o, ctx, msg, sizeof msg);
    /* a GPU asked for by number that is not there is the caller's error */
    if (st == TL_ERR_NO_DRIVER || (st == TL_ERR_NO_DEVICE && !c->device_given)) {
        printf("tilec %s: needs a GPU (%s: %s)\n", what, tl_status_name(st), msg);
        *ctx = NULL;
        return 0;
    }
    return st == TL_OK ? 0 : lib_error(st, msg);
}

static void print_entry(const tl_tune_result *r, const char *csv_op, const char *dtype, int rank,
                        const tl_tune_entry *e)
{
    if (e->outcome == TL_TUNE_PASSED)
        printf("  %3d  %-48s %9.4f %9.1f %9.3f %9.1e%s\n", rank, e->text, e->ms, e->rate, e->ratio, e->rel_err,
               e->finalist ? "  final" : "");
    else
        printf("    -  %-48s %s: %s\n", e->text, tl_tune_outcome_name(e->outcome), e->note);
    if (e->outcome == TL_TUNE_PASSED)
        printf("csv,%s,%s,%s,%s,%.4f,%.1f,%s,%.3f,%.2e\n", csv_op, r->shape, dtype, e->text, e->ms, e->rate,
               r->unit, e->ratio, e->rel_err);
}

static void print_result(const tl_tune_result *r, const char *what, const char *csv_op, const char *dtype)
{
    printf("\n%s %s: %d candidates, %d compiled in %.1f s, %d passed; %.1f s in all\n", what, r->shape, r->n,
           r->compiled, r->compile_s, r->passed, r->total_s);
    printf("  %3s  %-48s %9s %9s %9s %9s\n", "#", "configuration", "ms", r->unit, "x base", "rel err");
    if (r->baseline_ms > 0) {
        printf("    =  %-48s %9.4f %9.1f %9.3f\n", r->baseline, r->baseline_ms, r->baseline_rate, 1.0);
        printf("csv,%s,%s,%s,baseline:%s,%.4f,%.1f,%s,1.000,0\n", csv_op, r->shape, dtype, r->baseline,
               r->baseline_ms, r->baseline_rate, r->unit);
    }
    for (int i = 0; i < r->n; i++)
        print_entry(r, csv_op, dtype, i + 1, &r->entries[i]);
    if (r->passed > 0)
        printf("best: %s: %.4f ms, %.1f %s%s%.3f x %s\n", r->entries[0].text, r->entries[0].ms, r->entries[0].rate,
               r->unit, r->baseline_ms > 0 ? " = " : "", r->entries[0].ratio, r->baseline_ms > 0 ? r->baseline : "");
    else
        printf("best: none (no candidate passed its check)\n");
}

/* The softmax of the command line (--shape ROWSxCOLS, default
 * 16384x1024, f16). */
static int softmax_problem(const cli *c, tl_softmax_desc *d)
{
    tl_dtype dt = c->dtype_given ? c->dtype : TL_F16;
    long long v[2] = {16384, 1024};
    char tail;
    if (c->shape && (sscanf(c->shape, "%lldx%lld%c", &v[0], &v[1], &tail) != 2 || v[0] < 1 || v[1] < 1))
        return usage_error("bad shape '%s' for a row op (expected ROWSxCOLS, e.g. 16384x1024)", c->shape);
    if (c->trans_b || c->bias || c->epilogue)
        return usage_error("--trans-b, --bias and --epilogue are GEMM options");
    *d = (tl_softmax_desc){.rows = v[0], .cols = v[1], .in_dtype = dt, .out_dtype = dt};
    return 0;
}

/* Tunes op on desc (title names the problem); save 0: a sweep, nothing
 * recorded. */
static int run_tuning(const cli *c, const char *what, const char *op, const void *desc, const char *title,
                      const char *csv_op, const char *dtype, int save)
{
    tl_ctx *ctx = NULL;
    int rc = open_gpu_context(c, what, &ctx);
    if (rc || !ctx)
        return rc;
    tl_tune_request q = {.op = op, .desc = desc, .budget_s = c->budget_s, .save = save,
                         .progress = tl_tune_progress_stderr};
    tl_tune_result *r = NULL;
    tl_status st = tl_autotune(ctx, &q, &r);
    if (st != TL_OK) {
        rc = ctx_error(ctx, st);
        tl_ctx_destroy(ctx);
        return rc;
    }
    print_result(r, title, csv_op, dtype);
    if (r->saved)
        printf("recorded in %s: the op now runs %s for this problem's class on this GPU\n",
               *tl_tune_db_path(ctx) ? tl_tune_db_path(ctx) : "this process only", r->entries[0].text);
    rc = r->passed > 0 ? 0 : EXIT_LIB;
    tl_tune_result_destroy(r);
    tl_ctx_destroy(ctx);
    return rc;
}

/* Tunes the GEMM of the command line; save 0: a sweep, nothing recorded. */
static int run_gemm_tuning(const cli *c, const char *what, int save)
{
    tl_gemm_desc d;
    int rc = gemm_problem(c, &d);
    if (rc)
        return rc;
    char title[128], csv_op[32];
    snprintf(title, sizeof title, "%s gemm %s %s%s", what, tl_dtype_name(d.in_dtype), d.trans_b ? "nt" : "nn",
             d.has_bias || d.epilogue ? " + epilogue" : "");
    snprintf(csv_op, sizeof csv_op, "gemm_%s%s", d.trans_b ? "nt" : "nn", d.has_bias || d.epilogue ? "_epi" : "");
    return run_tuning(c, what, "gemm", &d, title, csv_op, tl_dtype_name(d.in_dtype), save);
}

/* The attention of the command line (--shape BxHxSxD or BxHxSQxSKVxD,
 * default 4x16x4096x128, bf16; --causal). */
static int attention_problem(const cli *c, tl_flash_attn_desc *d)
{
    tl_dtype dt = c->dtype_given ? c->dtype : TL_BF16;
    long long v[5] = {4, 16, 4096, 4096, 128};
    if (c->shape) { /* BxHxSQxSKVxD, or BxHxSxD: one length for queries and keys */
        char tail;
        bool five = sscanf(c->shape, "%lldx%lldx%lldx%lldx%lld%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) == 5;
        bool four = !five && sscanf(c->shape, "%lldx%lldx%lldx%lld%c", &v[0], &v[1], &v[2], &v[4], &tail) == 4;
        if (four)
            v[3] = v[2];
        bool ok = five || four;
        for (int i = 0; i < 5; i++) /* (past 2^31 no problem has, and the products would overflow) */
            ok = ok && v[i] >= 1 && v[i] <= (1LL << 31);
        if (!ok)
            return usage_error("bad shape '%s' for flash_attn (expected BxHxSxD or BxHxSQxSKVxD, e.g. "
                               "4x16x4096x128)", c->shape);
    }
    if (c->trans_b || c->bias || c->epilogue)
        return usage_error("--trans-b, --bias and --epilogue are GEMM options");
    if (dt != TL_BF16 && dt != TL_F16)
        return usage_error("flash_attn takes bf16 or f16, not %s", tl_dtype_name(dt));
    if (v[4] != 64 && v[4] != 128 && v[4] != 256)
        return usage_error("flash_attn's head_dim is 64, 128 or 256, not %lld", v[4]);
    *d = (tl_flash_attn_desc){.batch = v[0], .heads = v[1], .kv_heads = v[1], .seq_q = v[2], .seq_kv = v[3],
                              .head_dim = v[4], .dtype = dt, .causal = c->causal};
    return 0;
}

static int run_attention_tuning(const cli *c)
{
    tl_flash_attn_desc d;
    int rc = attention_problem(c, &d);
    if (rc)
        return rc;
    char title[64];
    snprintf(title, sizeof title, "tune flash_attn %s%s", tl_dtype_name(d.dtype), d.causal ? " causal" : "");
    return run_tuning(c, "tune", "flash_attn", &d, title, d.causal ? "flash_attn_causal" : "flash_attn",
                      tl_dtype_name(d.dtype), !c->no_save);
}

/* The softmax, or RMSNorm (eps 1e-6) on the same rows. */
static int run_rows_tuning(const cli *c, const char *op)
{
    tl_softmax_desc d;
    int rc = softmax_problem(c, &d);
    if (rc)
        return rc;
    tl_rmsnorm_desc r = {.rows = d.rows, .cols = d.cols, .in_dtype = d.in_dtype, .out_dtype = d.out_dtype,
                         .eps = 1e-6};
    bool rms = strcmp(op, "rmsnorm") == 0;
    char title[64];
    snprintf(title, sizeof title, "tune %s %s", op, tl_dtype_name(d.in_dtype));
    return run_tuning(c, "tune", op, rms ? (const void *)&r : (const void *)&d, title, op,
                      tl_dtype_name(d.in_dtype), !c->no_save);
}

/* The GEMM sweep on the GPU: every schedule of the tuner's space, ranked
 * against cuBLAS, nothing recorded. */
static int cmd_bench(const cli *c)
{
    if (strcmp(c->args[0], "gemm") != 0)
        return usage_error("unknown benchmark '%s' (expected gemm)", c->args[0]);
    if (c->bias || c->epilogue || c->budget_s > 0)
        return usage_error("bench gemm times the plain GEMM (--bias, --epilogue, --budget are for tune)");
    return run_gemm_tuning(c, "bench", 0);
}

static int tune_list(tl_ctx *ctx)
{
    tl_tune_record *recs = NULL;
    int n = 0;
    tl_status st = tl_tune_db_list(ctx, &recs, &n);
    if (st != TL_OK)
        return ctx_error(ctx, st);
    const char *path = tl_tune_db_path(ctx);
    printf("tuning database: %s, %d record%s\n", *path ? path : "(none: the disk cache is off)", n,
           n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        const tl_tune_record *r = &recs[i];
        printf("%s %s %s %s | %s | libtilec %s\n  %s: %.4f ms at %s", r->op, r->dtypes, r->layout, r->shape_class,
               r->gpu, r->version, r->config, r->ms, r->shape);
        if (r->ratio > 0)
            printf(", %.3f x the baseline", r->ratio);
        putchar('\n');
    }
    tl_free_host(recs);
    return 0;
}

static int tune_clear(tl_ctx *ctx)
{
    tl_tune_record *recs = NULL;
    int n = 0;
    tl_status st = tl_tune_db_list(ctx, &recs, &n);
    tl_free_host(recs);
    if (st == TL_OK)
        st = tl_tune_db_clear(ctx);
    if (st != TL_OK)
        return ctx_error(ctx, st);
    const char *path = tl_tune_db_path(ctx);
    printf("removed %d record%s%s%s\n", n, n == 1 ? "" : "s", *path ? " from " : "", path);
    return 0;
}

static int cmd_tune(const cli *c)
{
    if (c->list || c->clear) {
        if (c->nargs || (c->list && c->clear))
            return usage_error("'tune --list' and 'tune --clear' take no op, and not both");
        if (c->shape || c->trans_b || c->bias || c->epilogue || c->budget_s > 0 || c->no_save || c->dtype_given ||
            c->device_given || c->causal)
            return usage_error("'tune --%s' takes only --cache-dir", c->list ? "list" : "clear");
        tl_ctx *ctx;
        int rc = open_cache_context(c, &ctx);
        if (rc)
            return rc;
        rc = c->list ? tune_list(ctx) : tune_clear(ctx);
        tl_ctx_destroy(ctx);
        return rc;
    }
    if (c->nargs != 1)
        return usage_error("'tune' takes an op (gemm, softmax, rmsnorm, flash_attn), or --list, or --clear");
    if (strcmp(c->args[0], "flash_attn") == 0)
        return run_attention_tuning(c);
    if (c->causal)
        return usage_error("--causal is an option of 'tune flash_attn'");
    if (strcmp(c->args[0], "softmax") == 0 || strcmp(c->args[0], "rmsnorm") == 0)
        return run_rows_tuning(c, c->args[0]);
    if (strcmp(c->args[0], "gemm") != 0)
        return usage_error("op '%s' cannot be tuned (tunable: gemm, softmax, rmsnorm, flash_attn)", c->args[0]);
    return run_gemm_tuning(c, "tune", !c->no_save);
}

static int cmd_help(const cli *c)
{
    (void)c;
    fputs(usage_text, stdout);
    fputs("\nops: ", stdout);
    list_ops(stdout);
    putchar('\n');
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static const command commands[] = {
    {"info", cmd_info, OPT_DEVICE, 0},
    {"source", cmd_source, OPT_ARCH | OPT_DTYPE | OPT_DEVICE, 1},
    {"ptx", cmd_ptx, OPT_ARCH | OPT_DTYPE | OPT_DEVICE, 1},
    {"ptxas", cmd_ptxas, OPT_ARCH | OPT_DTYPE | OPT_DEVICE, 1},
    {"dump", cmd_dump, OPT_ARCH | OPT_DTYPE | OPT_DEVICE | OPT_AFTER, 1},
    {"compile", cmd_compile, OPT_ARCH | OPT_DTYPE | OPT_DEVICE | OPT_CACHE_DIR | OPT_CUBIN, 1},
    {"cache", cmd_cache, OPT_CACHE_DIR, 1},
    {"bench", cmd_bench, OPT_DTYPE | OPT_DEVICE | OPT_SHAPE | OPT_TRANS_B, 1},
    {"tune", cmd_tune,
     OPT_DTYPE | OPT_DEVICE | OPT_SHAPE | OPT_TRANS_B | OPT_CACHE_DIR | OPT_BIAS | OPT_EPILOGUE | OPT_BUDGET |
         OPT_NO_SAVE | OPT_LIST | OPT_CLEAR | OPT_CAUSAL,
     -1},
    {"help", cmd_help, 0, 0},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int parse_device(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 1024)
        return 0;
    *out = (int)v;
    return 1;
}

static int parse_epilogue(const char *arg, tl_epilogue *out)
{
    static const char *const names[] = {"none", "relu", "gelu_erf", "gelu_tanh"};
    for (int i = 0; i < 4; i++)
        if (strcmp(arg, names[i]) == 0) {
            *out = (tl_epilogue)i;
            return 0;
        }
    return usage_error("unknown epilogue '%s' (relu, gelu_erf, gelu_tanh)", arg);
}

/* One option into c; an exit status when it is wrong, else 0. */
static int take_option(const command *cmd, int opt, const char *arg, cli *c)
{
    static const struct { int opt, bit; const char *name; } names[] = {
        {'a', OPT_ARCH, "--arch"}, {'t', OPT_DTYPE, "--dtype"},
        {'d', OPT_DEVICE, "--device"}, {'c', OPT_CACHE_DIR, "--cache-dir"},
        {'s', OPT_SHAPE, "--shape"}, {'b', OPT_TRANS_B, "--trans-b"},
        {'B', OPT_BIAS, "--bias"}, {'e', OPT_EPILOGUE, "--epilogue"},
        {'g', OPT_BUDGET, "--budget"}, {'n', OPT_NO_SAVE, "--no-save"},
        {'l', OPT_LIST, "--list"}, {'x', OPT_CLEAR, "--clear"},
        {'A', OPT_AFTER, "--after"}, {'C', OPT_CUBIN, "--cubin"},
        {'K', OPT_CAUSAL, "--causal"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].opt == opt && !(cmd->options & names[i].bit))
            return usage_error("option %s does not apply to '%s'", names[i].name, cmd->name);
    switch (opt) {
    case 'a': c->arch = arg; return 0;
    case 't':
        c->dtype_given = 1;
        c->dtype = tl_dtype_from_name(arg);
        return c->dtype == TL_DTYPE_INVALID ? usage_error("unknown dtype '%s' (f32, f16, bf16)", arg) : 0;
    case 'd':
        c->device_given = 1;
        return parse_device(arg, &c->device) ? 0 : usage_error("bad device ordinal '%s'", arg);
    case 'c': c->cache_dir = arg; return 0;
    case 's': c->shape = arg; return 0;
    case 'b': c->trans_b = 1; return 0;
    case 'B': c->bias = 1; return 0;
    case 'e': return parse_epilogue(arg, &c->epilogue);
    case 'g': {
        char *end;
        c->budget_s = strtod(arg, &end);
        return *arg && !*end && c->budget_s > 0 ? 0 : usage_error("bad budget '%s' (seconds, > 0)", arg);
    }
    case 'n': c->no_save = 1; return 0;
    case 'l': c->list = 1; return 0;
    case 'x': c->clear = 1; return 0;
    case 'A': c->after = arg; return 0;
    case 'C': c->cubin = arg; return 0;
    case 'K': c->causal = 1; return 0;
    default: return EXIT_USAGE;
    }
}

/* Parses argv[1..] as "<command> [options] [args]"; returns an exit status
 * when parsing ends the run (help, an error), else -1 with *cmd set. */
static int parse(int argc, char **argv, const command **cmd, cli *c)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},   {"dtype", required_argument, NULL, 't'},
        {"device", required_argument, NULL, 'd'}, {"cache-dir", required_argument, NULL, 'c'},
        {"shape", required_argument, NULL, 's'},  {"trans-b", no_argument, NULL, 'b'},
        {"bias", no_argument, NULL, 'B'},         {"epilogue", required_argument, NULL, 'e'},
        {"budget", required_argument, NULL, 'g'}, {"no-save", no_argument, NULL, 'n'},
        {"list", no_argument, NULL, 'l'},         {"clear", no_argument, NULL, 'x'},
        {"after", required_argument, NULL, 'A'},  {"cubin", required_argument, NULL, 'C'},
        {"causal", no_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    memset(c, 0, sizeof *c);
    c->dtype = TL_F32;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return cmd_help(c);
    if (!(*cmd = find_command(argv[1])))
        return usage_error("unknown command '%s'", argv[1]);
    /* The command stands in for argv[0], so getopt starts after it. */
    int sub_argc = argc - 1;
    char **sub_argv = argv + 1;
    opterr = 0;
    optind = 1;
    for (int opt; (opt = getopt_long(sub_argc, sub_argv, ":h", longopts, NULL)) != -1;) {
        if (opt == 'h')
            return cmd_help(c);
        if (opt == '?' && optopt) {
            char shortopt[3] = {'-', (char)optopt, '\0'};
            return usage_error("unknown option '%s'", shortopt);
        }
        if (opt == '?')
            return usage_error("unknown option '%s'", sub_argv[optind - 1]);
        if (opt == ':')
            return usage_error("option '%s' needs a value", sub_argv[optind - 1]);
        int rc = take_option(*cmd, opt, optarg, c);
        if (rc)
            return rc;
    }
    c->args = sub_argv + optind;
    c->nargs = sub_argc - optind;
    if ((*cmd)->nargs < 0 ? c->nargs > 1 : c->nargs != (*cmd)->nargs)
        return usage_error("'%s' takes %d argument%s, got %d", (*cmd)->name, (*cmd)->nargs,
                           (*cmd)->nargs == 1 ? "" : "s", c->nargs);
    return -1;
}

int main(int argc, char **argv)
{
    const command *cmd = NULL;
    cli c;
    int rc = parse(argc, argv, &cmd, &c);
    if (rc >= 0)
        return rc;
    rc = cmd->run(&c);
    if (fflush(stdout) != 0) {
        perror("tilec: writing the output");
        return EXIT_LIB;
    }
    return rc;
}
