/* ptxas_log_probe.c - why NVRTC's -Xptxas=-v log comes back empty for one
 * program on the device machine: the op's GEMM default at MxNxK (NT and NN)
 * through tl_kernel_ptxas_report, then the same source straight through
 * libnvrtc with a few option sets, printing each result and log size.
 *   ptxas_log_probe [M N K] */
#define _GNU_SOURCE
#include "tilec.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*compile_fn)(void *, int, const char *const *);
typedef int (*size_fn)(void *, size_t *);
typedef int (*log_fn)(void *, char *);
typedef int (*destroy_fn)(void **);
typedef int (*version_fn)(int *, int *);

static void direct(void *lib, const char *src, const char *name, const char *const *opts, int n)
{
    create_fn create = (create_fn)dlsym(lib, "nvrtcCreateProgram");
    compile_fn compile = (compile_fn)dlsym(lib, "nvrtcCompileProgram");
    size_fn logsize = (size_fn)dlsym(lib, "nvrtcGetProgramLogSize");
    log_fn getlog = (log_fn)dlsym(lib, "nvrtcGetProgramLog");
    size_fn cubinsize = (size_fn)dlsym(lib, "nvrtcGetCUBINSize");
    destroy_fn destroy = (destroy_fn)dlsym(lib, "nvrtcDestroyProgram");
    void *prog = NULL;
    int r = create(&prog, src, name, 0, NULL, NULL);
    int rc = compile(prog, n, opts);
    size_t ls = 0, cs = 0;
    int rl = logsize(prog, &ls);
    cubinsize(prog, &cs);
    char *log = malloc(ls + 1);
    getlog(prog, log);
    log[ls] = 0;
    printf("  direct [");
    for (int i = 0; i < n; i++)
        printf("%s%s", i ? " " : "", opts[i]);
    printf("] create %d compile %d logsize(%d) %zu cubin %zu\n", r, rc, rl, ls, cs);
    printf("  log head: %.400s\n", log);
    free(log);
    destroy(&prog);
}

int main(int argc, char **argv)
{
    long long m = argc > 3 ? atoll(argv[1]) : 1024, n = argc > 3 ? atoll(argv[2]) : 1024,
              kk = argc > 3 ? atoll(argv[3]) : 1024;
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 0;
    o.target = "sm_90a";
    tl_ctx *ctx = NULL;
    char msg[256];
    if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK) {
        fprintf(stderr, "ctx: %s\n", msg);
        return 1;
    }
    const char *libname = getenv("TILEC_NVRTC") ? getenv("TILEC_NVRTC") : "libnvrtc.so.13";
    void *lib = dlopen(libname, RTLD_NOW);
    if (!lib)
        lib = dlopen("libnvrtc.so", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int ma = 0, mi = 0;
    ((version_fn)dlsym(lib, "nvrtcVersion"))(&ma, &mi);
    Dl_info info;
    dladdr(dlsym(lib, "nvrtcVersion"), &info);
    printf("libnvrtc %d.%d at %s\n", ma, mi, info.dli_fname);
    for (int tb = 1; tb >= 0; tb--) {
        tl_gemm_desc d = {.m = m, .n = n, .k = kk, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = tb};
        tl_kernel *k = NULL;
        if (tl_op_gemm_build(ctx, &d, &k) != TL_OK) {
            printf("build: %s\n", tl_ctx_error(ctx));
            return 1;
        }
        char *src = NULL;
        tl_kernel_source(k, "sm_90a", &src);
        printf("gemm %lldx%lldx%lld %s: source %zu bytes\n", m, n, kk, tb ? "NT" : "NN", strlen(src));
        for (int rep = 0; rep < 2; rep++) {
            char *log = NULL;
            tl_status st = tl_kernel_ptxas_report(k, "sm_90a", &log);
            printf("  report %d: %s, %zu bytes: %.300s\n", rep, tl_status_name(st), log ? strlen(log) : 0,
                   log ? log : "");
            tl_free_host(log);
        }
        const char *o1[] = {"--gpu-architecture=sm_90a", "-Isrc/device", "-std=c++17", "-default-device", "-diag-suppress=177,550",
                            "-Xptxas=-v"};
        direct(lib, src, "k.cu", o1, 6);
        const char *o2[] = {"--gpu-architecture=sm_90a", "-Isrc/device", "-std=c++17", "-default-device", "--ptxas-options=-v"};
        direct(lib, src, "k.cu", o2, 5);
        const char *o3[] = {"--gpu-architecture=sm_90a", "-Isrc/device", "-std=c++17", "-default-device", "-Xptxas=-v",
                            "-diag-suppress=177,550", "--no-cache"};
        direct(lib, src, "k.cu", o3, 7);
        if (tb && getenv("PROBE_SRC")) {
            FILE *f = fopen(getenv("PROBE_SRC"), "w");
            fputs(src, f);
            fclose(f);
        }
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
    tl_ctx_destroy(ctx);
    return 0;
}
