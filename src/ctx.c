/*
 * ctx.c - the context (device or offline), its error message and log, the
 * thin device-memory helpers, and the small public lookups (versions,
 * status and dtype names).
 */
#include "ctx.h"

#include "baseline.h"
#include "cache.h"
#include "nvrtc.h"
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Names and sizes                                                           */
/* ------------------------------------------------------------------------ */

const char *tl_version(void) { return TILEC_VERSION_STRING; }

const char *tl_status_name(tl_status st)
{
    switch (st) {
    case TL_OK: return "TL_OK";
    case TL_ERR_INVALID_ARG: return "TL_ERR_INVALID_ARG";
    case TL_ERR_DTYPE: return "TL_ERR_DTYPE";
    case TL_ERR_SHAPE: return "TL_ERR_SHAPE";
    case TL_ERR_SCOPE: return "TL_ERR_SCOPE";
    case TL_ERR_UNSUPPORTED: return "TL_ERR_UNSUPPORTED";
    case TL_ERR_OUT_OF_MEMORY: return "TL_ERR_OUT_OF_MEMORY";
    case TL_ERR_NO_DRIVER: return "TL_ERR_NO_DRIVER";
    case TL_ERR_NO_DEVICE: return "TL_ERR_NO_DEVICE";
    case TL_ERR_NO_NVRTC: return "TL_ERR_NO_NVRTC";
    case TL_ERR_NO_CUBLAS: return "TL_ERR_NO_CUBLAS";
    case TL_ERR_COMPILE: return "TL_ERR_COMPILE";
    case TL_ERR_CUDA: return "TL_ERR_CUDA";
    case TL_ERR_LAUNCH_ARGS: return "TL_ERR_LAUNCH_ARGS";
    case TL_ERR_IO: return "TL_ERR_IO";
    case TL_ERR_INTERNAL: return "TL_ERR_INTERNAL";
    }
    return "TL_ERR_UNKNOWN_STATUS";
}

static const struct dtype_row {
    tl_dtype dt;
    const char *name;
    size_t size;
    bool parsable; /* tl_dtype_from_name accepts it (TL_BOOL is not an element type) */
} dtype_rows[] = {
    {TL_F32, "f32", 4, true},  {TL_F16, "f16", 2, true},   {TL_BF16, "bf16", 2, true},
    {TL_I32, "i32", 4, true},  {TL_I64, "i64", 8, true},   {TL_F64, "f64", 8, true},
    {TL_BOOL, "bool", 1, false}, {TL_F8E4M3, "f8e4m3", 1, true}, {TL_F8E5M2, "f8e5m2", 1, true},
};
#define N_DTYPE_ROWS (sizeof dtype_rows / sizeof dtype_rows[0])

static const struct dtype_row *dtype_row_of(tl_dtype dt)
{
    for (size_t i = 0; i < N_DTYPE_ROWS; i++)
        if (dtype_rows[i].dt == dt)
            return &dtype_rows[i];
    return NULL;
}

size_t tl_dtype_size(tl_dtype dt)
{
    const struct dtype_row *r = dtype_row_of(dt);
    return r ? r->size : 0;
}

const char *tl_dtype_name(tl_dtype dt)
{
    const struct dtype_row *r = dtype_row_of(dt);
    return r ? r->name : "invalid";
}

tl_dtype tl_dtype_from_name(const char *name)
{
    for (size_t i = 0; name && i < N_DTYPE_ROWS; i++)
        if (dtype_rows[i].parsable && strcmp(dtype_rows[i].name, name) == 0)
            return dtype_rows[i].dt;
    return TL_DTYPE_INVALID;
}

/* ------------------------------------------------------------------------ */
/* Errors, log, binding                                                      */
/* ------------------------------------------------------------------------ */

/* This thread's slot, made when `make` (NULL when there is none, or no
 * memory for one). Called with ctx->lock held. */
static tli_msg_slot *find_slot(tl_ctx *ctx, bool make)
{
    pthread_t me = pthread_self();
    for (tli_msg_slot *s = ctx->msgs; s; s = s->next)
        if (pthread_equal(s->thread, me))
            return s;
    tli_msg_slot *s = make ? calloc(1, sizeof *s) : NULL;
    if (s) {
        s->thread = me;
        s->next = ctx->msgs;
        ctx->msgs = s;
    }
    return s;
}

char *tli_ctx_msg(tl_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    tli_msg_slot *s = find_slot(ctx, true);
    pthread_mutex_unlock(&ctx->lock);
    return s ? s->msg : ctx->err;
}

static _Thread_local unsigned fail_count;

unsigned tli_fail_count(void) { return fail_count; }

tl_status tli_fail(tl_ctx *ctx, tl_status st, const char *fmt, ...)
{
    if (!ctx)
        return st;
    fail_count++;
    /* Format aside first: callers may pass the message itself as an
     * argument. */
    char buf[TLI_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&ctx->lock);
    tli_msg_slot *s = find_slot(ctx, true);
    memcpy(s ? s->msg : ctx->err, buf, sizeof buf);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* Length of a leading "tl_name: " in msg (0 when there is none). */
static size_t api_prefix(const char *msg)
{
    size_t n = 0;
    if (strncmp(msg, "tl_", 3) != 0)
        return 0;
    while ((msg[n] >= 'a' && msg[n] <= 'z') || (msg[n] >= '0' && msg[n] <= '9') || msg[n] == '_')
        n++;
    return msg[n] == ':' && msg[n + 1] == ' ' ? n + 2 : 0;
}

tl_status tli_fail_as(tl_ctx *ctx, tl_status st, const char *api, unsigned since)
{
    if (st == TL_OK || !ctx)
        return st;
    if (fail_count == since)
        return tli_fail(ctx, st, "%s: failed with %s", api, tl_status_name(st));
    const char *msg = tli_ctx_msg(ctx);
    size_t n = strlen(api);
    if (strncmp(msg, api, n) == 0 && msg[n] == ':')
        return st;
    return tli_fail(ctx, st, "%s: %s", api, msg + api_prefix(msg));
}

uint32_t tli_ctx_next_tag(tl_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    uint32_t t = ++ctx->next_kernel_tag;
    pthread_mutex_unlock(&ctx->lock);
    return t;
}

void tli_log(tl_ctx *ctx, tl_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user, level, buf);
}

tl_status tli_cu_check(tl_ctx *ctx, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return TL_OK;
    const tli_driver_api *cu = ctx ? ctx->cu : NULL;
    if (!cu)
        tli_load_driver(&cu, NULL, 0);
    const char *name = NULL, *text = NULL;
    if (cu && cu->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (cu && cu->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name)
        return tli_fail(ctx, TL_ERR_CUDA, "%s failed: %s (%s)", what, name,
                        text ? text : "no description");
    return tli_fail(ctx, TL_ERR_CUDA, "%s failed: CUDA error %d", what, r);
}

tl_status tli_ctx_bind(tl_ctx *ctx)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE,
                        "the context has no device (it was created with TL_NO_DEVICE): "
                        "create one with a device ordinal to run on a GPU");
    /* Setting the current context is cheap, but asking first leaves the
     * thread's state untouched when it is already ours. */
    CUcontext cur = NULL;
    if (ctx->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx->cuctx)
        return TL_OK;
    return tli_cu_check(ctx, ctx->cu->cuCtxSetCurrent(ctx->cuctx), "cuCtxSetCurrent");
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

tl_ctx_options tl_ctx_default_options(void)
{
    tl_ctx_options o;
    memset(&o, 0, sizeof o);
    o.device = 0;
    o.disk_cache = 1;
    return o;
}

static tl_status load_driver(tl_ctx *ctx)
{
    char msg[1024];
    tl_status st = tli_load_driver(&ctx->cu, msg, sizeof msg);
    return st == TL_OK ? TL_OK : tli_fail(ctx, st, "%s", msg);
}

/* cuInit's failures that mean "the driver is not usable" rather than "a
 * call failed": a stub library, or a user-mode driver that does not match
 * the kernel module or the GPU. */
static bool driver_unusable(CUresult r)
{
    return r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_INSUFFICIENT_DRIVER ||
           r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || r == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE;
}

static tl_status init_driver(tl_ctx *ctx)
{
    CUresult r = ctx->cu->cuInit(0);
    if (r == CUDA_SUCCESS)
        return TL_OK;
    tli_cu_check(ctx, r, "cuInit");
    if (r == CUDA_ERROR_NO_DEVICE)
        return tli_fail(ctx, TL_ERR_NO_DEVICE,
                        "%s: the CUDA driver found no GPU. Check nvidia-smi and "
                        "CUDA_VISIBLE_DEVICES, or create an offline context (device "
                        "TL_NO_DEVICE) to compile without a GPU", tli_ctx_msg(ctx));
    if (driver_unusable(r))
        return tli_fail(ctx, TL_ERR_NO_DRIVER,
                        "%s: libcuda.so.1 was loaded but cannot be used; install or repair the "
                        "NVIDIA driver (or point TILEC_LIBCUDA at the real libcuda.so.1)", tli_ctx_msg(ctx));
    return TL_ERR_CUDA;
}

/* Device `ordinal` and its primary context, made current on this thread. */
static tl_status open_device(tl_ctx *ctx, int ordinal)
{
    tl_status st = load_driver(ctx);
    if (st == TL_OK)
        st = init_driver(ctx);
    if (st != TL_OK)
        return st;
    const tli_driver_api *cu = ctx->cu;
    int count = 0;
    if ((st = tli_cu_check(ctx, cu->cuDeviceGetCount(&count), "cuDeviceGetCount")) != TL_OK)
        return st;
    if (count == 0)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "the CUDA driver reports no GPU; check nvidia-smi "
                        "and CUDA_VISIBLE_DEVICES, or create an offline context (TL_NO_DEVICE)");
    if (ordinal >= count)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "device %d was asked for, but the driver sees %d "
                        "GPU%s (ordinals 0 to %d)", ordinal, count, count == 1 ? "" : "s", count - 1);
    if ((st = tli_cu_check(ctx, cu->cuDeviceGet(&ctx->dev, ordinal), "cuDeviceGet")) != TL_OK ||
        (st = tli_cu_check(ctx, cu->cuDevicePrimaryCtxRetain(&ctx->cuctx, ctx->dev),
                           "cuDevicePrimaryCtxRetain")) != TL_OK)
        return st;
    ctx->owns_primary = true;
    ctx->has_device = true;
    return tli_ctx_bind(ctx);
}

/* The caller's CUcontext: we use it (current on this thread) but never
 * release it. */
static tl_status adopt_context(tl_ctx *ctx, void *cu_context)
{
    tl_status st = load_driver(ctx);
    if (st == TL_OK)
        st = init_driver(ctx);
    if (st != TL_OK)
        return st;
    ctx->cuctx = (CUcontext)cu_context;
    ctx->has_device = true;
    if ((st = tli_ctx_bind(ctx)) != TL_OK)
        return st;
    return tli_cu_check(ctx, ctx->cu->cuCtxGetDevice(&ctx->dev), "cuCtxGetDevice");
}

typedef struct attr_spec {
    CUdevice_attribute attr;
    size_t offset;  /* an int field of tl_device_info */
    bool may_fail;  /* CUDA 13 deprecates the clock queries: 0 when refused */
} attr_spec;

static const attr_spec device_attrs[] = {
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(tl_device_info, cc_major), false},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(tl_device_info, cc_minor), false},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(tl_device_info, sm_count), false},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, offsetof(tl_device_info, smem_per_block), false},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
     offsetof(tl_device_info, smem_per_block_optin), false},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, offsetof(tl_device_info, smem_per_sm),
     false},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, offsetof(tl_device_info, regs_per_block), false},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(tl_device_info, l2_bytes), false},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(tl_device_info, max_threads_per_block),
     false},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, offsetof(tl_device_info, clock_khz), true},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, offsetof(tl_device_info, mem_clock_khz), true},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, offsetof(tl_device_info, mem_bus_width_bits),
     true},
};

static tl_status fill_device_info(tl_ctx *ctx)
{
    const tli_driver_api *cu = ctx->cu;
    tl_device_info *info = &ctx->info;
    info->ordinal = ctx->dev;
    for (size_t i = 0; i < sizeof device_attrs / sizeof device_attrs[0]; i++) {
        int v = 0;
        CUresult r = cu->cuDeviceGetAttribute(&v, device_attrs[i].attr, ctx->dev);
        if (r != CUDA_SUCCESS && !device_attrs[i].may_fail)
            return tli_cu_check(ctx, r, "cuDeviceGetAttribute");
        if (r != CUDA_SUCCESS || v < 0)
            v = 0;
        memcpy((char *)info + device_attrs[i].offset, &v, sizeof v);
    }
    size_t total = 0;
    tl_status st;
    if ((st = tli_cu_check(ctx, cu->cuDeviceGetName(info->name, (int)sizeof info->name, ctx->dev),
                           "cuDeviceGetName")) != TL_OK ||
        (st = tli_cu_check(ctx, cu->cuDeviceTotalMem(&total, ctx->dev), "cuDeviceTotalMem")) != TL_OK ||
        (st = tli_cu_check(ctx, cu->cuDriverGetVersion(&info->driver_version),
                           "cuDriverGetVersion")) != TL_OK)
        return st;
    info->name[sizeof info->name - 1] = '\0';
    info->global_mem_bytes = total;
    return TL_OK;
}

/* The arch-specific targets ("a") unlock wgmma/TMA on 9.0 and tcgen05 on
 * 10.0; such code runs only on that exact capability, which is the device
 * we are on. */
static void target_for_cc(int major, int minor, char *out, size_t n)
{
    bool arch_specific = (major == 9 || major == 10) && minor == 0;
    tli_fmt(out, n, "sm_%d%d%s", major, minor, arch_specific ? "a" : "");
}

static void choose_target(tl_ctx *ctx, const char *requested)
{
    if (requested)
        tli_fmt(ctx->target, sizeof ctx->target, "%s", requested);
    else if (ctx->has_device)
        target_for_cc(ctx->info.cc_major, ctx->info.cc_minor, ctx->target, sizeof ctx->target);
    else
        tli_fmt(ctx->target, sizeof ctx->target, "sm_90a");
    tli_fmt(ctx->info.target, sizeof ctx->info.target, "%s", ctx->target);
}

static tl_status check_options(tl_ctx *ctx, const tl_ctx_options *opt)
{
    char why[512];
    const char *problem = opt->target ? tli_target_problem(opt->target, why, sizeof why) : NULL;
    if (problem)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_ctx_create: invalid target \"%s\": it %s", opt->target,
                        problem);
    if (!opt->cu_context && opt->device < 0 && opt->device != TL_NO_DEVICE)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_ctx_create: invalid device ordinal %d "
                        "(use 0, 1, ... or TL_NO_DEVICE)", opt->device);
    return TL_OK;
}

static tl_status setup(tl_ctx *ctx, const tl_ctx_options *opt)
{
    tl_status st = check_options(ctx, opt);
    if (st == TL_OK && opt->cu_context)
        st = adopt_context(ctx, opt->cu_context);
    else if (st == TL_OK && opt->device != TL_NO_DEVICE)
        st = open_device(ctx, opt->device);
    if (st == TL_OK && ctx->has_device)
        st = fill_device_info(ctx);
    if (st != TL_OK)
        return st;
    choose_target(ctx, opt->target);
    if (tli_nvrtc_version(&ctx->info.nvrtc_major, &ctx->info.nvrtc_minor) != TL_OK)
        tli_log(ctx, TL_LOG_WARN, "NVRTC was not found: kernels cannot be compiled in this "
                "context (set TILEC_NVRTC to libnvrtc's path)");
    st = tli_cache_open(opt->cache_dir, opt->disk_cache, opt->log, opt->log_user, &ctx->cache);
    if (st == TL_ERR_OUT_OF_MEMORY)
        return tli_fail(ctx, st, "tl_ctx_create: out of host memory for the cubin cache");
    if (st != TL_OK)
        return tli_fail(ctx, st, "tl_ctx_create: cannot set up the cubin cache (%s)", tl_status_name(st));
    return TL_OK;
}

static void log_created(tl_ctx *ctx)
{
    if (ctx->has_device)
        tli_log(ctx, TL_LOG_DEBUG, "device %d: %s, cc %d.%d, %d SMs, target %s, driver %d, "
                "NVRTC %d.%d", ctx->info.ordinal, ctx->info.name, ctx->info.cc_major,
                ctx->info.cc_minor, ctx->info.sm_count, ctx->target, ctx->info.driver_version,
                ctx->info.nvrtc_major, ctx->info.nvrtc_minor);
    else
        tli_log(ctx, TL_LOG_DEBUG, "offline context, target %s", ctx->target);
}

/* The locks, and the creating thread's message slot: a context used by one
 * thread never allocates to report a failure. */
static bool init_locks(tl_ctx *ctx)
{
    pthread_mutexattr_t rec;
    if (pthread_mutex_init(&ctx->lock, NULL) != 0)
        return false;
    /* ops_lock is recursive: building an op's kernel may use another op */
    bool ok = pthread_mutexattr_init(&rec) == 0;
    ok = ok && pthread_mutexattr_settype(&rec, PTHREAD_MUTEX_RECURSIVE) == 0 &&
         pthread_mutex_init(&ctx->ops_lock, &rec) == 0;
    if (ok)
        pthread_mutexattr_destroy(&rec);
    if (ok && !(ctx->msgs = calloc(1, sizeof *ctx->msgs))) {
        pthread_mutex_destroy(&ctx->ops_lock);
        ok = false;
    }
    if (!ok) {
        pthread_mutex_destroy(&ctx->lock);
        return false;
    }
    ctx->msgs->thread = pthread_self();
    return true;
}

tl_status tl_ctx_create(const tl_ctx_options *opt, tl_ctx **out, char *msg, size_t msg_len)
{
    if (msg && msg_len)
        msg[0] = '\0';
    if (!out) {
        tli_fmt(msg, msg_len, "tl_ctx_create: out is NULL");
        return TL_ERR_INVALID_ARG;
    }
    *out = NULL;
    tl_ctx_options defaults = tl_ctx_default_options();
    if (!opt)
        opt = &defaults;
    tl_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx || !init_locks(ctx)) {
        free(ctx);
        tli_fmt(msg, msg_len, "tl_ctx_create: out of memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    ctx->log = opt->log;
    ctx->log_user = opt->log_user;
    ctx->info.ordinal = -1;
    ctx->next_kernel_tag = 1; /* kid 0 would read as a null handle */
    tl_status st = setup(ctx, opt);
    if (st != TL_OK) {
        tli_fmt(msg, msg_len, "%s", tli_ctx_msg(ctx));
        tl_ctx_destroy(ctx);
        return st;
    }
    log_created(ctx);
    *out = ctx;
    return TL_OK;
}

/* One stream's stream-K workspace. A larger request replaces it: the old
 * one is freed after the stream has finished with it. */
typedef struct tli_sk_ws {
    void *stream;
    uint64_t ptr;
    size_t bytes;
    struct tli_sk_ws *next;
} tli_sk_ws;

/* Gives w `bytes` of device memory, zeroed on stream (ctx->lock held).
 * On failure *what names the call and w keeps what it had. */
static CUresult sk_ws_grow(tl_ctx *ctx, tli_sk_ws *w, void *stream, size_t bytes, const char **what)
{
    CUresult r;
    if (w->ptr) { /* the stream's earlier launches may still read it */
        if ((r = ctx->cu->cuStreamSynchronize((CUstream)stream)) != CUDA_SUCCESS) {
            *what = "cuStreamSynchronize";
            return r;
        }
        ctx->cu->cuMemFree(w->ptr);
        w->ptr = 0;
        w->bytes = 0;
    }
    CUdeviceptr d = 0;
    if ((r = ctx->cu->cuMemAlloc(&d, bytes)) != CUDA_SUCCESS) {
        *what = "cuMemAlloc";
        return r;
    }
    if ((r = ctx->cu->cuMemsetD8Async(d, 0, bytes, (CUstream)stream)) != CUDA_SUCCESS) {
        ctx->cu->cuMemFree(d);
        *what = "cuMemsetD8Async";
        return r;
    }
    w->ptr = d;
    w->bytes = bytes;
    return CUDA_SUCCESS;
}

tl_status tli_ctx_sk_workspace(tl_ctx *ctx, void *stream, size_t bytes, uint64_t *ptr)
{
    pthread_mutex_lock(&ctx->lock);
    tli_sk_ws *w = ctx->sk_ws;
    while (w && w->stream != stream)
        w = w->next;
    if (!w && (w = calloc(1, sizeof *w)) != NULL) {
        w->stream = stream;
        w->next = ctx->sk_ws;
        ctx->sk_ws = w;
    }
    CUresult r = CUDA_SUCCESS;
    const char *what = NULL;
    if (w && w->bytes < bytes)
        r = sk_ws_grow(ctx, w, stream, bytes, &what);
    if (w)
        *ptr = w->ptr;
    pthread_mutex_unlock(&ctx->lock); /* (tli_fail takes it) */
    if (!w)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    return what ? tli_cu_check(ctx, r, what) : TL_OK;
}

void tl_ctx_destroy(tl_ctx *ctx)
{
    if (!ctx)
        return;
    /* Programs first: unloading their modules needs the context alive. */
    for (tli_op_entry *e = ctx->ops, *next; e; e = next) {
        next = e->next;
        tl_program_destroy(e->prog);
        free(e);
    }
    tli_baseline_release(ctx);
    bool bound = (ctx->scratch || ctx->sk_ws) && tli_ctx_bind(ctx) == TL_OK;
    if (ctx->scratch && bound)
        ctx->cu->cuMemFree(ctx->scratch);
    for (tli_sk_ws *w = ctx->sk_ws, *next; w; w = next) {
        next = w->next;
        if (w->ptr && bound)
            ctx->cu->cuMemFree(w->ptr);
        free(w);
    }
    tli_cache_close(ctx->cache);
    tli_tune_db_free(ctx->tunedb);
    if (ctx->owns_primary) {
        /* Leave no released context current on the thread. */
        CUcontext cur = NULL;
        if (ctx->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx->cuctx)
            ctx->cu->cuCtxSetCurrent(NULL);
        ctx->cu->cuDevicePrimaryCtxRelease(ctx->dev);
    }
    for (tli_msg_slot *s = ctx->msgs, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->ops_lock);
    free(ctx);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

const char *tl_ctx_error(const tl_ctx *ctx)
{
    if (!ctx)
        return "";
    tl_ctx *c = (tl_ctx *)ctx; /* the lock is not part of the context's value */
    pthread_mutex_lock(&c->lock);
    tli_msg_slot *s = find_slot(c, false);
    pthread_mutex_unlock(&c->lock);
    return s ? s->msg : c->err;
}

int tl_ctx_has_device(const tl_ctx *ctx) { return ctx && ctx->has_device; }

const char *tl_ctx_target(const tl_ctx *ctx) { return ctx ? ctx->target : ""; }

tl_status tl_ctx_get_device_info(tl_ctx *ctx, tl_device_info *out)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!out)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_ctx_get_device_info: out is NULL");
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "tl_ctx_get_device_info: the context has no device "
                        "(it was created with TL_NO_DEVICE)");
    *out = ctx->info;
    return TL_OK;
}

tl_status tl_runtime_versions(int *driver, int *nvrtc_major, int *nvrtc_minor, char *msg,
                              size_t msg_len)
{
    char dmsg[1024] = "", nmsg[1024] = "";
    const tli_driver_api *cu = NULL;
    int dv = 0;
    tl_status dst = tli_load_driver(&cu, dmsg, sizeof dmsg);
    if (dst == TL_OK && cu->cuDriverGetVersion(&dv) != CUDA_SUCCESS)
        dv = 0;
    if (driver)
        *driver = dv;
    tl_status nst = tli_load_nvrtc(NULL, nmsg, sizeof nmsg);
    tli_nvrtc_version(nvrtc_major, nvrtc_minor);
    if (dmsg[0] || nmsg[0])
        tli_fmt(msg, msg_len, "tl_runtime_versions: %s%s%s", dmsg, dmsg[0] && nmsg[0] ? "; " : "", nmsg);
    else
        tli_fmt(msg, msg_len, "%s", "");
    return dst != TL_OK ? dst : nst;
}

/* ------------------------------------------------------------------------ */
/* Device memory                                                             */
/* ------------------------------------------------------------------------ */

/* The common prologue: the context has a device and it is current. */
static tl_status begin_device_call(tl_ctx *ctx, const char *fn)
{
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "%s: the context has no device (it was created "
                        "with TL_NO_DEVICE); create it with a device ordinal to use GPU memory", fn);
    return tli_ctx_bind(ctx);
}

tl_status tl_malloc(tl_ctx *ctx, size_t bytes, uint64_t *dptr)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!dptr)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_malloc: dptr is NULL");
    *dptr = 0;
    tl_status st = begin_device_call(ctx, "tl_malloc");
    if (st != TL_OK || bytes == 0) /* zero bytes: the null pointer, like tl_free's 0 */
        return st;
    CUdeviceptr p = 0;
    CUresult r = ctx->cu->cuMemAlloc(&p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_malloc: out of device memory for %zu bytes",
                        bytes);
    if ((st = tli_cu_check(ctx, r, "cuMemAlloc")) == TL_OK)
        *dptr = p;
    return st;
}

tl_status tli_malloc_async(tl_ctx *ctx, size_t bytes, void *stream, uint64_t *dptr, const char *api)
{
    *dptr = 0;
    tl_status st = begin_device_call(ctx, api);
    if (st != TL_OK)
        return st;
    if (!ctx->cu->cuMemAllocAsync || !ctx->cu->cuMemFreeAsync)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "%s: the driver has no stream-ordered allocator", api);
    CUdeviceptr p = 0;
    CUresult r = ctx->cu->cuMemAllocAsync(&p, bytes, (CUstream)stream);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "%s: out of device memory for a %zu-byte workspace", api, bytes);
    if ((st = tli_cu_check(ctx, r, "cuMemAllocAsync")) == TL_OK)
        *dptr = p;
    return st;
}

tl_status tli_free_async(tl_ctx *ctx, uint64_t dptr, void *stream)
{
    return dptr ? tli_cu_check(ctx, ctx->cu->cuMemFreeAsync(dptr, (CUstream)stream), "cuMemFreeAsync") : TL_OK;
}

tl_status tl_free(tl_ctx *ctx, uint64_t dptr)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (dptr == 0)
        return TL_OK;
    tl_status st = begin_device_call(ctx, "tl_free");
    return st != TL_OK ? st : tli_cu_check(ctx, ctx->cu->cuMemFree(dptr), "cuMemFree");
}

/* Argument checks shared by the copies: a null side is an error unless
 * nothing is copied. */
static tl_status check_copy(tl_ctx *ctx, const char *fn, bool dst_ok, bool src_ok, size_t bytes)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (bytes && (!dst_ok || !src_ok))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s is NULL", fn, dst_ok ? "src" : "dst");
    return begin_device_call(ctx, fn);
}

tl_status tl_memcpy_htod(tl_ctx *ctx, uint64_t dst, const void *src, size_t bytes)
{
    tl_status st = check_copy(ctx, "tl_memcpy_htod", dst != 0, src != NULL, bytes);
    if (st != TL_OK || bytes == 0)
        return st;
    return tli_cu_check(ctx, ctx->cu->cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

tl_status tl_memcpy_dtoh(tl_ctx *ctx, void *dst, uint64_t src, size_t bytes)
{
    tl_status st = check_copy(ctx, "tl_memcpy_dtoh", dst != NULL, src != 0, bytes);
    if (st != TL_OK || bytes == 0)
        return st;
    return tli_cu_check(ctx, ctx->cu->cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}

tl_status tl_memcpy_dtod(tl_ctx *ctx, uint64_t dst, uint64_t src, size_t bytes, void *stream)
{
    tl_status st = check_copy(ctx, "tl_memcpy_dtod", dst != 0, src != 0, bytes);
    if (st != TL_OK || bytes == 0)
        return st;
    return tli_cu_check(ctx, ctx->cu->cuMemcpyDtoDAsync(dst, src, bytes, (CUstream)stream),
                        "cuMemcpyDtoDAsync");
}

tl_status tl_memset_u8(tl_ctx *ctx, uint64_t dst, uint8_t value, size_t bytes, void *stream)
{
    tl_status st = check_copy(ctx, "tl_memset_u8", dst != 0, true, bytes);
    if (st != TL_OK || bytes == 0)
        return st;
    return tli_cu_check(ctx, ctx->cu->cuMemsetD8Async(dst, value, bytes, (CUstream)stream),
                        "cuMemsetD8Async");
}

tl_status tl_synchronize(tl_ctx *ctx)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_status st = begin_device_call(ctx, "tl_synchronize");
    return st != TL_OK ? st : tli_cu_check(ctx, ctx->cu->cuCtxSynchronize(), "cuCtxSynchronize");
}

/* ------------------------------------------------------------------------ */
/* The cache                                                                 */
/* ------------------------------------------------------------------------ */

tl_status tl_cache_get_stats(tl_ctx *ctx, tl_cache_stats *out)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!out)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_cache_get_stats: out is NULL");
    tl_status st = tli_cache_stats(ctx->cache, out);
    if (st != TL_OK)
        return tli_fail(ctx, st, "tl_cache_get_stats: cannot read the cache statistics (%s)",
                        tl_status_name(st));
    return TL_OK;
}

tl_status tl_cache_clear(tl_ctx *ctx)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_status st = tli_cache_clear(ctx->cache);
    tl_cache_stats s;
    if (st != TL_OK && tli_cache_stats(ctx->cache, &s) == TL_OK)
        return tli_fail(ctx, st, "tl_cache_clear: some entries of the cache in \"%s\" could not "
                        "be removed (%s)", s.dir, tl_status_name(st));
    return st == TL_OK ? TL_OK : tli_fail(ctx, st, "tl_cache_clear: %s", tl_status_name(st));
}
