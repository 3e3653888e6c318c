/*
 * tune_custom.c - the problem of a custom kernel for the tuner: the
 * caller's launch arguments, and a reference computed once, before any
 * candidate runs, from host copies of the tensors (by the caller's ref, or
 * by the interpreter of the first candidate that compiled; every candidate
 * computes the same function, so any one of them is the golden model).
 *
 * Before each check the tensors the kernel writes are reset: poisoned
 * (0xFF bytes, NaN in every float type) when the kernel only writes them,
 * restored to their original contents when it reads them too (in place).
 */
#include "tune.h"

#include "args.h"
#include "program.h"

#include <stdlib.h>
#include <string.h>

typedef struct tensor {
    int param;             /* index into the program's parameters       */
    uint64_t dptr;
    tl_dtype dtype;
    int64_t n;             /* elements spanned                           */
    size_t bytes;
    void *original;        /* host copy before any run (written + read)  */
    void *expected;        /* host: what the reference wrote             */
    bool read;             /* the kernel reads it too: restore, not poison */
} tensor;

typedef struct custom_problem {
    tli_tune_problem base;
    tl_ctx *ctx;
    int nargs;
    const tl_arg *args;
    double tol;
    tensor *out;           /* the tensors the kernel writes               */
    int nout;
} custom_problem;

static tl_status run_custom(tli_tune_problem *pb, const tl_program *p, void *stream)
{
    custom_problem *c = (custom_problem *)pb;
    return tl_launch(p, stream, c->nargs, c->args);
}

static tl_status reset_outputs(custom_problem *c)
{
    tl_status st = TL_OK;
    for (int i = 0; i < c->nout && st == TL_OK; i++) {
        tensor *t = &c->out[i];
        st = t->read ? tl_memcpy_htod(c->ctx, t->dptr, t->original, t->bytes)
                     : tl_memset_u8(c->ctx, t->dptr, 0xFF, t->bytes, NULL);
    }
    return st;
}

static tl_status check_custom(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res)
{
    custom_problem *c = (custom_problem *)pb;
    tl_status st = reset_outputs(c);
    if (st == TL_OK)
        st = tl_launch(p, stream, c->nargs, c->args);
    if (st == TL_OK)
        st = tl_synchronize(c->ctx);
    for (int i = 0; i < c->nout && st == TL_OK; i++) {
        tl_span out = {.dtype = c->out[i].dtype, .n = c->out[i].n, .dptr = c->out[i].dptr};
        tl_span ref = {.dtype = c->out[i].dtype, .n = c->out[i].n, .host = c->out[i].expected};
        tl_check_result r;
        st = tl_check(c->ctx, &out, &ref, c->tol, &r);
        if (st == TL_OK && (i == 0 || (!r.pass && res->pass) || (r.pass == res->pass && r.rel_err > res->rel_err)))
            *res = r; /* the worst tensor's */
    }
    /* leave in-place tensors as the caller gave them */
    if (st == TL_OK)
        st = reset_outputs(c);
    return st;
}

static void destroy_custom(tli_tune_problem *pb)
{
    custom_problem *c = (custom_problem *)pb;
    for (int i = 0; i < c->nout; i++) {
        free(c->out[i].original);
        free(c->out[i].expected);
    }
    free(c->out);
    free(c);
}

/* Host copies of every tensor argument (the reference's inputs) and the
 * list of written ones. */
static tl_status snapshot(custom_problem *c, const tl_program *p, const tli_bound *b, void **host, tl_arg *hargs)
{
    const tli_ir *ir = &p->ir;
    for (int i = 1; i < ir->p.n; i++) {
        const tli_param *q = &ir->p.v[i];
        hargs[i - 1] = c->args[i - 1];
        if (q->kind != TL_PARAM_TENSOR)
            continue;
        const tli_bnode *buf = tli_B(ir, q->buf);
        int64_t n = tli_tensor_span(ir, b, q->buf);
        size_t bytes = (size_t)n * tl_dtype_size((tl_dtype)q->dtype);
        if (!(host[i] = malloc(bytes ? bytes : 1)))
            return tli_fail(c->ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
        tl_status st = tl_memcpy_dtoh(c->ctx, host[i], b->ptr[i], bytes);
        if (st != TL_OK)
            return st;
        hargs[i - 1] = tl_arg_hptr(host[i]);
        if (buf->written)
            c->out[c->nout++] = (tensor){.param = i, .dptr = b->ptr[i], .dtype = (tl_dtype)q->dtype, .n = n,
                                         .bytes = bytes, .read = buf->read};
    }
    return TL_OK;
}

/* After the reference ran on the host copies: keep what it wrote, and the
 * original contents of tensors that are read and written. */
static tl_status keep_expected(custom_problem *c, void **host)
{
    for (int j = 0; j < c->nout; j++) {
        tensor *t = &c->out[j];
        t->expected = host[t->param];
        host[t->param] = NULL;
        if (!t->read)
            continue;
        if (!(t->original = malloc(t->bytes ? t->bytes : 1)))
            return tli_fail(c->ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
        tl_status st = tl_memcpy_dtoh(c->ctx, t->original, t->dptr, t->bytes);
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

static tl_status compute_reference(custom_problem *c, const tl_program *p, const tl_tune_request *req)
{
    tli_bound b;
    char err[256];
    const char *array = tli_array_param(&p->ir);
    if (array)
        return tli_fail(c->ctx, TL_ERR_UNSUPPORTED, "tl_autotune: '%s' of candidate '%s' is an array of pointers "
                        "(tl_param_tensor_array), which the reference's host copies cannot follow", array, p->kname);
    tl_status st = tli_bind_args(&p->ir, c->nargs, c->args, TL_ARG_DEVICE_PTR, &b, err, sizeof err);
    if (st != TL_OK)
        return tli_fail(c->ctx, st, "tl_autotune: the arguments do not fit candidate '%s': %s", p->kname, err);
    int np = p->ir.p.n;
    void **host = calloc((size_t)np, sizeof *host);
    tl_arg *hargs = calloc((size_t)(c->nargs ? c->nargs : 1), sizeof *hargs);
    c->out = calloc((size_t)np, sizeof *c->out);
    st = host && hargs && c->out ? snapshot(c, p, &b, host, hargs)
                                 : tli_fail(c->ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    if (st == TL_OK && c->nout == 0)
        st = tli_fail(c->ctx, TL_ERR_INVALID_ARG, "tl_autotune: kernel '%s' writes no tensor: nothing to check",
                      p->kname);
    if (st == TL_OK)
        st = req->ref ? req->ref(req->ref_user, c->nargs, hargs) : tl_program_interpret(p, c->nargs, hargs);
    if (st == TL_OK)
        st = keep_expected(c, host);
    for (int i = 0; host && i < np; i++)
        free(host[i]);
    free(host);
    free(hargs);
    tli_bound_free(&b);
    return st;
}

tl_status tli_tune_custom_problem(tl_ctx *ctx, const tl_program *p, const tl_tune_request *req,
                                  tli_tune_problem **out)
{
    *out = NULL;
    custom_problem *c = calloc(1, sizeof *c);
    if (!c)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    c->base = (tli_tune_problem){.run = run_custom, .check = check_custom, .destroy = destroy_custom};
    c->ctx = ctx;
    c->nargs = req->nargs;
    c->args = req->args;
    c->tol = req->tol > 0 ? req->tol : 1e-2;
    c->base.work = req->flop > 0 ? req->flop : req->bytes;
    c->base.unit = req->flop > 0 ? "TFLOP/s" : req->bytes > 0 ? "GB/s" : "";
    tli_fmt(c->base.shape, sizeof c->base.shape, "%d arguments", req->nargs);
    if (!p) { /* nothing compiled: nothing will run */
        *out = &c->base;
        return TL_OK;
    }
    tl_status st = compute_reference(c, p, req);
    if (st != TL_OK) {
        destroy_custom(&c->base);
        return st;
    }
    *out = &c->base;
    return TL_OK;
}
