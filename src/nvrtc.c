/* nvrtc.c - one call from a CUDA C source to a cubin or PTX, through the
 * NVRTC table of cuda_loader.c. */
#include "nvrtc.h"

#include "ctx.h"

#include <stdlib.h>
#include <string.h>

/* How much of a compile log goes into ctx->err (4096 bytes with the rest of
 * the message); the whole log is in *log. */
#define LOG_IN_ERR 3000

/* "sm_" digits and an optional "a", shorter than 16 characters; the
 * number in *arch. */
static bool target_syntax(const char *target, int *arch)
{
    if (!target || strncmp(target, "sm_", 3) != 0 || strlen(target) >= 16)
        return false;
    const char *p = target + 3;
    if (*p < '0' || *p > '9')
        return false;
    *arch = 0;
    while (*p >= '0' && *p <= '9')
        *arch = *arch * 10 + (*p++ - '0');
    if (*p == 'a')
        p++;
    return *p == '\0';
}

/* The architectures NVRTC compiles for: its own list when it can say, else
 * every real architecture from Maxwell to Blackwell. */
static int supported_archs(int *archs, int max)
{
    static const int known[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121};
    const tli_nvrtc_api *rtc;
    int n = 0;
    if (tli_load_nvrtc(&rtc, NULL, 0) == TL_OK && rtc->nvrtcGetNumSupportedArchs && rtc->nvrtcGetSupportedArchs &&
        rtc->nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= max &&
        rtc->nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS)
        return n;
    n = (int)(sizeof known / sizeof known[0]);
    memcpy(archs, known, sizeof known);
    return n;
}

const char *tli_target_problem(const char *target, char *buf, size_t n)
{
    int arch = 0, archs[128];
    if (!target_syntax(target, &arch))
        return "is not sm_ and a number, optionally followed by 'a' (e.g. sm_80, sm_90a)";
    if (target[strlen(target) - 1] == 'a' && arch < 90)
        return "has the 'a' suffix of architecture-specific features, which start at sm_90a";
    int count = supported_archs(archs, (int)(sizeof archs / sizeof archs[0]));
    for (int i = 0; i < count; i++)
        if (archs[i] == arch)
            return NULL;
    tli_fmt(buf, n, "is not an architecture NVRTC compiles for (it knows");
    for (int i = 0; i < count; i++)
        tli_fmt(buf + strlen(buf), n - strlen(buf), "%s sm_%d", i ? "," : "", archs[i]);
    tli_fmt(buf + strlen(buf), n - strlen(buf), ")");
    return buf;
}

int tli_target_valid(const char *target)
{
    char buf[512];
    return tli_target_problem(target, buf, sizeof buf) == NULL;
}

tl_status tli_nvrtc_version(int *major, int *minor)
{
    const tli_nvrtc_api *rtc;
    int ma = 0, mi = 0;
    tl_status st = tli_load_nvrtc(&rtc, NULL, 0);
    if (st == TL_OK && rtc->nvrtcVersion(&ma, &mi) != NVRTC_SUCCESS)
        ma = mi = 0;
    if (major)
        *major = ma;
    if (minor)
        *minor = mi;
    return st;
}

/* Takes the program's log; NULL when it is empty or cannot be read. */
static char *take_log(const tli_nvrtc_api *rtc, nvrtcProgram prog)
{
    size_t n = 0;
    if (rtc->nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1)
        return NULL;
    char *log = malloc(n + 1);
    if (!log)
        return NULL;
    if (rtc->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) {
        free(log);
        return NULL;
    }
    log[n] = '\0';
    return log;
}

/* Copies the compiled code out of the program (PTX keeps its NUL). */
static tl_status take_output(tl_ctx *ctx, const tli_nvrtc_api *rtc, nvrtcProgram prog,
                             int want_ptx, void **out, size_t *out_len)
{
    size_t n = 0;
    nvrtcResult r = want_ptx ? rtc->nvrtcGetPTXSize(prog, &n) : rtc->nvrtcGetCUBINSize(prog, &n);
    if (r != NVRTC_SUCCESS || n == 0)
        return tli_fail(ctx, TL_ERR_INTERNAL, "NVRTC compiled the source but returned no %s (%s)",
                        want_ptx ? "PTX" : "cubin", rtc->nvrtcGetErrorString(r));
    char *buf = malloc(n + 1);
    if (!buf)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte %s", n,
                        want_ptx ? "PTX" : "cubin");
    r = want_ptx ? rtc->nvrtcGetPTX(prog, buf) : rtc->nvrtcGetCUBIN(prog, buf);
    if (r != NVRTC_SUCCESS) {
        free(buf);
        return tli_fail(ctx, TL_ERR_INTERNAL, "NVRTC could not hand over the %s (%s)",
                        want_ptx ? "PTX" : "cubin", rtc->nvrtcGetErrorString(r));
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = want_ptx ? strlen(buf) : n;
    return TL_OK;
}

/* Maps a failed nvrtcCompileProgram to a status and a message with the log. */
static tl_status compile_failure(tl_ctx *ctx, const tli_nvrtc_api *rtc, nvrtcResult r,
                                 const char *name, const char *arch, const char *log)
{
    tl_status st = TL_ERR_COMPILE;
    if (r == NVRTC_ERROR_OUT_OF_MEMORY)
        st = TL_ERR_OUT_OF_MEMORY;
    else if (r == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE)
        st = TL_ERR_NO_NVRTC; /* libnvrtc-builtins is missing or mismatched */
    else if (r != NVRTC_ERROR_COMPILATION && r != NVRTC_ERROR_INVALID_OPTION)
        st = TL_ERR_INTERNAL;
    size_t n = log ? strlen(log) : 0;
    return tli_fail(ctx, st, "NVRTC could not compile %s for %s: %s%s%.*s%s", name, arch,
                    rtc->nvrtcGetErrorString(r), n ? "\n" : "", LOG_IN_ERR, log ? log : "",
                    n > LOG_IN_ERR ? "\n[log truncated]" : "");
}

/* Builds the option list: the architecture and our fixed options first. */
static const char **make_options(const char *arch_opt, const char *const *extra, int n_extra,
                                 int *n_out)
{
    static const char *const fixed[] = {"-std=c++17", "-default-device"};
    int n_fixed = (int)(sizeof fixed / sizeof fixed[0]);
    const char **opts = malloc(sizeof *opts * (size_t)(1 + n_fixed + n_extra));
    if (!opts)
        return NULL;
    int n = 0;
    opts[n++] = arch_opt;
    for (int i = 0; i < n_fixed; i++)
        opts[n++] = fixed[i];
    for (int i = 0; i < n_extra; i++)
        opts[n++] = extra[i];
    *n_out = n;
    return opts;
}

static tl_status check_args(tl_ctx *ctx, const char *src, const char *target,
                            const char *const *extra_opts, int n_extra, void **out,
                            size_t *out_len)
{
    if (!src || !out || !out_len || !target || n_extra < 0 || (n_extra > 0 && !extra_opts))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tli_nvrtc_compile: a required argument is NULL");
    for (int i = 0; i < n_extra; i++)
        if (!extra_opts[i])
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "tli_nvrtc_compile: option %d is NULL", i);
    char why[512];
    const char *problem = tli_target_problem(target, why, sizeof why);
    if (problem)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "invalid target \"%s\": it %s", target, problem);
    return TL_OK;
}

/* Compiles an already created program and collects the output. */
static tl_status run_compile(tl_ctx *ctx, const tli_nvrtc_api *rtc, nvrtcProgram prog,
                             const char *name, const char *target, int want_ptx,
                             const char *const *extra_opts, int n_extra, void **out,
                             size_t *out_len, char **log)
{
    static const char arch_flag[] = "--gpu-architecture=";
    char arch[48];
    tli_fmt(arch, sizeof arch, "%s%s%s", arch_flag, want_ptx ? "compute_" : "sm_", target + 3);
    int n_opts = 0;
    const char **opts = make_options(arch, extra_opts, n_extra, &n_opts);
    if (!opts)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "out of memory for NVRTC options");
    nvrtcResult r = rtc->nvrtcCompileProgram(prog, n_opts, opts);
    free(opts);
    char *text = take_log(rtc, prog);
    tl_status st = r == NVRTC_SUCCESS
                       ? take_output(ctx, rtc, prog, want_ptx, out, out_len)
                       : compile_failure(ctx, rtc, r, name, arch + sizeof arch_flag - 1, text);
    if (r == NVRTC_SUCCESS && text)
        tli_log(ctx, TL_LOG_DEBUG, "NVRTC messages for %s:\n%s", name, text);
    if (text && log)
        *log = text;
    else
        free(text);
    return st;
}

tl_status tli_nvrtc_compile(tl_ctx *ctx, const char *src, const char *prog_name,
                            const char *target, int want_ptx, const char *const *extra_opts,
                            int n_extra, void **out, size_t *out_len, char **log)
{
    if (log)
        *log = NULL;
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    tl_status st = check_args(ctx, src, target, extra_opts, n_extra, out, out_len);
    if (st != TL_OK)
        return st;
    const char *name = prog_name ? prog_name : "tilec.cu";
    const tli_nvrtc_api *rtc;
    char msg[1024];
    if ((st = tli_load_nvrtc(&rtc, msg, sizeof msg)) != TL_OK)
        return tli_fail(ctx, st, "%s", msg);
    nvrtcProgram prog = NULL;
    nvrtcResult r = rtc->nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return tli_fail(ctx, r == NVRTC_ERROR_OUT_OF_MEMORY ? TL_ERR_OUT_OF_MEMORY : TL_ERR_INTERNAL,
                        "nvrtcCreateProgram failed: %s", rtc->nvrtcGetErrorString(r));
    st = run_compile(ctx, rtc, prog, name, target, want_ptx, extra_opts, n_extra, out, out_len,
                     log);
    rtc->nvrtcDestroyProgram(&prog);
    return st;
}
