/*
 * cuda_loader.c - finds libcuda, libnvrtc and libcublas(Lt) at run time and
 * fills the function tables of cuda_api.h.
 *
 * Each table is filled under pthread_once and is read-only afterwards, so
 * threads share it without locks. Libraries are never dlclose'd: the tables
 * point into them for the life of the process, and unloading the CUDA driver
 * while other code may still hold its handles is unsafe.
 */
#include "cuda_api.h"
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Symbols are stored through memcpy from dlsym's void *, which POSIX makes
 * valid only where code and data pointers have one representation. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers must fit void *");
_Static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "cuBLASLt heuristic layout");
_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap layout");

typedef struct sym_spec {
    const char *name;     /* the symbol the library exports              */
    const char *fallback; /* an older name to try when name is missing   */
    size_t offset;        /* where the pointer goes in the table         */
    bool optional;        /* a missing symbol leaves the field NULL      */
} sym_spec;

/* Looks every symbol up; false (with a message, and the table zeroed) when
 * a required one is missing, which means the library is older than we
 * support. */
static bool bind_symbols(void *lib, void *table, size_t table_size, const sym_spec *specs,
                         size_t n, const char *libname, char *msg, size_t msg_len)
{
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(lib, specs[i].name);
        if (!p && specs[i].fallback)
            p = dlsym(lib, specs[i].fallback);
        if (!p && !specs[i].optional) {
            tli_fmt(msg, msg_len, "%s was loaded but lacks %s: it is too old for libtilec; "
                    "install a newer version (CUDA 12 or later)", libname, specs[i].name);
            memset(table, 0, table_size);
            return false;
        }
        memcpy((char *)table + specs[i].offset, &p, sizeof p);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Search paths                                                              */
/* ------------------------------------------------------------------------ */

#define MAX_CANDIDATES 16
#define PATH_LEN 512

typedef struct candidates {
    char path[MAX_CANDIDATES][PATH_LEN];
    int n;
} candidates;

static void add_candidate(candidates *c, const char *dir, const char *base, const char *suffix)
{
    if (c->n >= MAX_CANDIDATES)
        return;
    if (dir)
        tli_fmt(c->path[c->n++], PATH_LEN, "%s/lib64/%s%s", dir, base, suffix);
    else
        tli_fmt(c->path[c->n++], PATH_LEN, "%s%s", base, suffix);
}

/* The places a toolkit library is looked for: the override alone when the
 * variable is set; else the dynamic loader's own path, then the usual
 * toolkit directories. Newer sonames first. */
static void toolkit_candidates(candidates *c, const char *env_override, const char *base)
{
    static const char *const suffixes[] = {".so.13", ".so.12", ".so"};
    c->n = 0;
    const char *override = env_override ? getenv(env_override) : NULL;
    if (override && *override) {
        tli_fmt(c->path[c->n++], PATH_LEN, "%s", override);
        return;
    }
    const char *dirs[] = {NULL, getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        if (d > 0 && (!dirs[d] || !*dirs[d]))
            continue;
        for (size_t s = 0; s < sizeof suffixes / sizeof suffixes[0]; s++)
            add_candidate(c, dirs[d], base, suffixes[s]);
    }
}

/* dlopens the candidates in order, starting at `first`; returns the handle
 * and its index, or NULL with the first dlerror() in err (the first one
 * names the soname the user most likely expects). */
static void *open_candidates(const candidates *c, int first, int *index, char *err, size_t err_len)
{
    err[0] = '\0';
    for (int k = 0; k < c->n; k++) {
        int i = (first + k) % c->n;
        void *h = dlopen(c->path[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            *index = i;
            return h;
        }
        const char *e = dlerror();
        if (!err[0])
            tli_fmt(err, err_len, "%s", e ? e : c->path[i]);
    }
    return NULL;
}

/* What a search left behind: its status and, on failure, the message. */
typedef struct load_state {
    tl_status status;
    char msg[1024];
} load_state;

/* The common tail of the tli_load_* calls: copy the failure message. */
static tl_status report(const load_state *s, char *msg, size_t msg_len)
{
    if (s->status != TL_OK && msg && msg_len)
        tli_fmt(msg, msg_len, "%s", s->msg);
    return s->status;
}

/* ------------------------------------------------------------------------ */
/* The driver                                                                */
/* ------------------------------------------------------------------------ */

#define DRV(field, sym) {sym, NULL, offsetof(tli_driver_api, field), false}
#define DRV_OLD(field, sym, old) {sym, old, offsetof(tli_driver_api, field), false}
#define DRV_OPT(field, sym) {sym, NULL, offsetof(tli_driver_api, field), true}

static const sym_spec driver_syms[] = {
    DRV(cuInit, "cuInit"),
    DRV(cuDriverGetVersion, "cuDriverGetVersion"),
    DRV(cuDeviceGetCount, "cuDeviceGetCount"),
    DRV(cuDeviceGet, "cuDeviceGet"),
    DRV(cuDeviceGetName, "cuDeviceGetName"),
    DRV(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    DRV(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
    DRV_OPT(cuCtxCreate, "cuCtxCreate_v2"),
    DRV_OPT(cuCtxDestroy, "cuCtxDestroy_v2"),
    DRV(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    DRV(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    DRV(cuCtxSetCurrent, "cuCtxSetCurrent"),
    DRV(cuCtxGetCurrent, "cuCtxGetCurrent"),
    DRV(cuCtxGetDevice, "cuCtxGetDevice"),
    DRV(cuCtxPushCurrent, "cuCtxPushCurrent_v2"),
    DRV(cuCtxPopCurrent, "cuCtxPopCurrent_v2"),
    DRV(cuCtxSynchronize, "cuCtxSynchronize"),
    DRV(cuMemAlloc, "cuMemAlloc_v2"),
    DRV(cuMemFree, "cuMemFree_v2"),
    DRV(cuMemGetInfo, "cuMemGetInfo_v2"),
    DRV(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    DRV(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    DRV(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    DRV(cuMemsetD8Async, "cuMemsetD8Async"),
    DRV(cuStreamSynchronize, "cuStreamSynchronize"),
    DRV(cuModuleLoadData, "cuModuleLoadData"),
    DRV(cuModuleUnload, "cuModuleUnload"),
    DRV(cuModuleGetFunction, "cuModuleGetFunction"),
    DRV(cuFuncGetAttribute, "cuFuncGetAttribute"),
    DRV(cuFuncSetAttribute, "cuFuncSetAttribute"),
    DRV(cuLaunchKernel, "cuLaunchKernel"),
    DRV(cuEventCreate, "cuEventCreate"),
    DRV(cuEventDestroy, "cuEventDestroy_v2"),
    DRV(cuEventRecord, "cuEventRecord"),
    DRV(cuEventSynchronize, "cuEventSynchronize"),
    /* cuda.h of CUDA 12.8+ maps the name to _v2; older drivers have only
     * the unversioned symbol, with the same signature. */
    DRV_OLD(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    DRV(cuGetErrorName, "cuGetErrorName"),
    DRV(cuGetErrorString, "cuGetErrorString"),
    DRV_OPT(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled"),
    DRV_OPT(cuMemAllocAsync, "cuMemAllocAsync"),
    DRV_OPT(cuMemFreeAsync, "cuMemFreeAsync"),
    DRV_OPT(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    DRV_OPT(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel"),
};

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static tli_driver_api driver_api;
static load_state driver_state;

static void driver_init(void)
{
    const char *override = getenv("TILEC_LIBCUDA");
    bool overridden = override && *override;
    const char *path = overridden ? override : "libcuda.so.1";
    driver_state.status = TL_ERR_NO_DRIVER;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        char from[PATH_LEN + 32] = "";
        if (overridden)
            tli_fmt(from, sizeof from, " from %s (TILEC_LIBCUDA)", path);
        tli_fmt(driver_state.msg, sizeof driver_state.msg,
                "cannot load the CUDA driver library libcuda.so.1%s (%s). Install the NVIDIA "
                "driver, or set TILEC_LIBCUDA to the path of libcuda.so.1; a context created with "
                "device TL_NO_DEVICE needs no driver", from, e ? e : "unknown error");
        return;
    }
    if (bind_symbols(lib, &driver_api, sizeof driver_api, driver_syms,
                     sizeof driver_syms / sizeof driver_syms[0], path, driver_state.msg,
                     sizeof driver_state.msg))
        driver_state.status = TL_OK;
}

tl_status tli_load_driver(const tli_driver_api **out, char *msg, size_t msg_len)
{
    pthread_once(&driver_once, driver_init);
    if (out)
        *out = driver_state.status == TL_OK ? &driver_api : NULL;
    return report(&driver_state, msg, msg_len);
}

/* ------------------------------------------------------------------------ */
/* NVRTC                                                                     */
/* ------------------------------------------------------------------------ */

#define RTC(field) {#field, NULL, offsetof(tli_nvrtc_api, field), false}

static const sym_spec nvrtc_syms[] = {
    RTC(nvrtcVersion),           RTC(nvrtcCreateProgram),  RTC(nvrtcDestroyProgram),
    RTC(nvrtcCompileProgram),    RTC(nvrtcGetProgramLogSize), RTC(nvrtcGetProgramLog),
    RTC(nvrtcGetPTXSize),        RTC(nvrtcGetPTX),         RTC(nvrtcGetCUBINSize),
    RTC(nvrtcGetCUBIN),          RTC(nvrtcGetErrorString),
    {"nvrtcGetNumSupportedArchs", NULL, offsetof(tli_nvrtc_api, nvrtcGetNumSupportedArchs), true},
    {"nvrtcGetSupportedArchs", NULL, offsetof(tli_nvrtc_api, nvrtcGetSupportedArchs), true},
};

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static tli_nvrtc_api nvrtc_api;
static load_state nvrtc_state;

static void nvrtc_init(void)
{
    static candidates c; /* large; only ever used under the once */
    char err[512];
    int index = 0;
    toolkit_candidates(&c, "TILEC_NVRTC", "libnvrtc");
    void *lib = open_candidates(&c, 0, &index, err, sizeof err);
    nvrtc_state.status = TL_ERR_NO_NVRTC;
    if (!lib) {
        tli_fmt(nvrtc_state.msg, sizeof nvrtc_state.msg,
                "cannot load NVRTC (%s). Tried %s%s. Install the CUDA toolkit's NVRTC "
                "(libnvrtc.so.13 or .12), or set TILEC_NVRTC to its path",
                err, c.path[0], c.n > 1 ? ", other sonames and $CUDA_HOME, $CUDA_PATH, "
                                          "/usr/local/cuda/lib64" : "");
        return;
    }
    if (bind_symbols(lib, &nvrtc_api, sizeof nvrtc_api, nvrtc_syms,
                     sizeof nvrtc_syms / sizeof nvrtc_syms[0], c.path[index], nvrtc_state.msg,
                     sizeof nvrtc_state.msg))
        nvrtc_state.status = TL_OK;
}

tl_status tli_load_nvrtc(const tli_nvrtc_api **out, char *msg, size_t msg_len)
{
    pthread_once(&nvrtc_once, nvrtc_init);
    if (out)
        *out = nvrtc_state.status == TL_OK ? &nvrtc_api : NULL;
    return report(&nvrtc_state, msg, msg_len);
}

/* ------------------------------------------------------------------------ */
/* cuBLAS and cuBLASLt                                                       */
/* ------------------------------------------------------------------------ */

#define BLAS(field, sym) {sym, NULL, offsetof(tli_cublas_api, field), false}
#define BLAS_OPT(field, sym) {sym, NULL, offsetof(tli_cublas_api, field), true}
#define LT(field) {#field, NULL, offsetof(tli_cublas_api, field), false}

static const sym_spec cublas_syms[] = {
    BLAS(cublasCreate, "cublasCreate_v2"),
    BLAS(cublasDestroy, "cublasDestroy_v2"),
    BLAS(cublasSetStream, "cublasSetStream_v2"),
    BLAS(cublasSetMathMode, "cublasSetMathMode"),
    BLAS(cublasGemmEx, "cublasGemmEx"),
    BLAS_OPT(cublasGetStatusString, "cublasGetStatusString"),
    BLAS_OPT(cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx"),
    BLAS_OPT(cublasGemmBatchedEx, "cublasGemmBatchedEx"),
};

static const sym_spec cublaslt_syms[] = {
    LT(cublasLtCreate),
    LT(cublasLtDestroy),
    LT(cublasLtMatmulDescCreate),
    LT(cublasLtMatmulDescDestroy),
    LT(cublasLtMatmulDescSetAttribute),
    LT(cublasLtMatrixLayoutCreate),
    LT(cublasLtMatrixLayoutDestroy),
    LT(cublasLtMatrixLayoutSetAttribute),
    LT(cublasLtMatmulPreferenceCreate),
    LT(cublasLtMatmulPreferenceDestroy),
    LT(cublasLtMatmulPreferenceSetAttribute),
    LT(cublasLtMatmulAlgoGetHeuristic),
    LT(cublasLtMatmul),
};

static pthread_once_t cublas_once = PTHREAD_ONCE_INIT;
static tli_cublas_api cublas_api;
static load_state cublas_state;

/* Opens one library of the pair and binds its symbols; `first` makes
 * cuBLASLt start at the directory and soname where cuBLAS was found, since
 * the two must come from one release. */
static void *open_blas_lib(const char *base, const sym_spec *syms, size_t n_syms, int first,
                           int *index)
{
    static candidates c; /* large; only ever used under the once */
    char err[512];
    toolkit_candidates(&c, NULL, base);
    void *lib = open_candidates(&c, first, index, err, sizeof err);
    if (!lib) {
        tli_fmt(cublas_state.msg, sizeof cublas_state.msg,
                "cannot load %s (%s). Tried %s.so.13, .so.12, .so and $CUDA_HOME, $CUDA_PATH, "
                "/usr/local/cuda/lib64. Install cuBLAS from the CUDA toolkit",
                base, err, base);
        return NULL;
    }
    if (!bind_symbols(lib, &cublas_api, sizeof cublas_api, syms, n_syms, c.path[*index],
                      cublas_state.msg, sizeof cublas_state.msg))
        return NULL;
    return lib;
}

static void cublas_init(void)
{
    int index = 0;
    cublas_state.status = TL_ERR_NO_CUBLAS;
    if (!open_blas_lib("libcublas", cublas_syms, sizeof cublas_syms / sizeof cublas_syms[0], 0,
                       &index) ||
        !open_blas_lib("libcublasLt", cublaslt_syms,
                       sizeof cublaslt_syms / sizeof cublaslt_syms[0], index, &index)) {
        memset(&cublas_api, 0, sizeof cublas_api);
        return;
    }
    cublas_state.status = TL_OK;
}

tl_status tli_load_cublas(const tli_cublas_api **out, char *msg, size_t msg_len)
{
    pthread_once(&cublas_once, cublas_init);
    if (out)
        *out = cublas_state.status == TL_OK ? &cublas_api : NULL;
    return report(&cublas_state, msg, msg_len);
}
