/*
 * check.c - relative-error checks: ||out - ref|| / ||ref||, the largest
 * absolute error, the first bad element; NaN and Inf never pass. Also the
 * whole-program check against the interpreter or a caller's reference.
 */
#include "args.h"
#include "half.h"
#include "interp.h"
#include "program.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool span_ok(const tl_span *s)
{
    return s && s->n >= 0 && tl_dtype_size(s->dtype) > 0 && s->dtype != TL_BOOL &&
           (s->host != NULL || s->dptr != 0 || s->n == 0);
}

/* The span's elements on the host: its own pointer, or a copy (*owned). */
static tl_status host_view(tl_ctx *ctx, const tl_span *s, const void **data, void **owned)
{
    *owned = NULL;
    *data = s->host;
    if (s->host || s->n == 0)
        return TL_OK;
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    size_t bytes = (size_t)s->n * tl_dtype_size(s->dtype);
    *owned = malloc(bytes);
    if (!*owned)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_check: out of host memory");
    tl_status st = tl_memcpy_dtoh(ctx, *owned, s->dptr, bytes);
    if (st != TL_OK) {
        free(*owned);
        *owned = NULL;
    }
    *data = *owned;
    return st;
}

static double elem(const tl_span *s, const void *data, int64_t i)
{
    if (s->dtype == TL_I64) {
        int64_t v;
        memcpy(&v, (const char *)data + i * 8, 8);
        return (double)v;
    }
    return tli_load_as_double(s->dtype, data, i);
}

static void compare(const tl_span *o, const void *od, const tl_span *r, const void *rd, double tol,
                    tl_check_result *res)
{
    double ref2 = 0, diff2 = 0;
    for (int64_t i = 0; i < r->n; i++) {
        double x = elem(r, rd, i);
        ref2 += x * x;
    }
    double rms = r->n ? sqrt(ref2 / (double)r->n) : 0;
    for (int64_t i = 0; i < o->n; i++) {
        double x = elem(o, od, i), y = elem(r, rd, i);
        if (!isfinite(x)) {
            res->nonfinite++;
            if (res->first_bad < 0)
                res->first_bad = i;
            continue;
        }
        double d = fabs(x - y);
        diff2 += d * d;
        if (d > res->max_abs_err)
            res->max_abs_err = d;
        if (d > tol * fmax(fabs(y), rms) && res->first_bad < 0)
            res->first_bad = i;
    }
    res->rel_err = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    if (res->nonfinite)
        res->rel_err = INFINITY;
    res->pass = res->nonfinite == 0 && res->rel_err <= tol;
}

TL_API tl_status tl_check(tl_ctx *ctx, const tl_span *out, const tl_span *ref, double tol, tl_check_result *res)
{
    if (!span_ok(out) || !span_ok(ref) || !res || out->n != ref->n || !(tol >= 0))
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG,
                              "tl_check: spans must be non-NULL, of one length and a numeric dtype; tol >= 0")
                   : TL_ERR_INVALID_ARG;
    memset(res, 0, sizeof *res);
    res->first_bad = -1;
    const void *od, *rd;
    void *oown, *rown = NULL;
    unsigned since = tli_fail_count();
    tl_status st = host_view(ctx, out, &od, &oown);
    if (st == TL_OK)
        st = host_view(ctx, ref, &rd, &rown);
    if (st == TL_OK)
        compare(out, od, ref, rd, tol, res);
    free(oown);
    free(rown);
    return tli_fail_as(ctx, st, "tl_check", since);
}

/* ------------------------------------------------------ program check */

typedef struct check_state {
    tli_bound b;
    tl_arg *host_args;
    void **host;        /* host copies of tensor arguments, by param */
    int64_t *span;      /* their element counts                       */
} check_state;

static void state_free(check_state *s, int nparams)
{
    if (s->host)
        for (int i = 0; i < nparams; i++)
            free(s->host[i]);
    free(s->host);
    free(s->span);
    free(s->host_args);
    tli_bound_free(&s->b);
}

/* Copies every tensor argument to the host (before the device run, so the
 * reference sees the inputs even when the kernel works in place). */
static tl_status copy_inputs(const tl_program *p, int nargs, const tl_arg *args, check_state *s)
{
    const tli_ir *ir = &p->ir;
    s->host = calloc((size_t)ir->p.n, sizeof *s->host);
    s->span = calloc((size_t)ir->p.n, sizeof *s->span);
    s->host_args = calloc((size_t)(nargs ? nargs : 1), sizeof *s->host_args);
    if (!s->host || !s->span || !s->host_args)
        return tli_fail(p->ctx, TL_ERR_OUT_OF_MEMORY, "tl_program_check: out of host memory");
    for (int i = 1; i < ir->p.n; i++) {
        s->host_args[i - 1] = args[i - 1];
        const tli_param *q = &ir->p.v[i];
        if (q->kind != TL_PARAM_TENSOR)
            continue;
        s->span[i] = tli_tensor_span(ir, &s->b, q->buf);
        size_t bytes = (size_t)s->span[i] * tl_dtype_size((tl_dtype)q->dtype);
        s->host[i] = malloc(bytes ? bytes : 1);
        if (!s->host[i])
            return tli_fail(p->ctx, TL_ERR_OUT_OF_MEMORY, "tl_program_check: out of host memory");
        if (bytes) {
            tl_status st = tl_memcpy_dtoh(p->ctx, s->host[i], s->b.ptr[i], bytes);
            if (st != TL_OK)
                return st;
        }
        s->host_args[i - 1] = tl_arg_hptr(s->host[i]);
    }
    return TL_OK;
}

/* Compares each written tensor on the device with its reference copy and
 * keeps the worst result. */
static tl_status compare_outputs(const tl_program *p, check_state *s, double tol, tl_check_result *res)
{
    const tli_ir *ir = &p->ir;
    bool first = true;
    for (int i = 1; i < ir->p.n; i++) {
        const tli_param *q = &ir->p.v[i];
        if (q->kind != TL_PARAM_TENSOR || !tli_B(ir, q->buf)->written)
            continue;
        tl_span out = {.dtype = (tl_dtype)q->dtype, .n = s->span[i], .dptr = s->b.ptr[i]};
        tl_span ref = {.dtype = (tl_dtype)q->dtype, .n = s->span[i], .host = s->host[i]};
        tl_check_result r;
        tl_status st = tl_check(p->ctx, &out, &ref, tol, &r);
        if (st != TL_OK)
            return st;
        bool worse = first || (!r.pass && res->pass) || (r.pass == res->pass && r.rel_err > res->rel_err);
        if (worse)
            *res = r;
        first = false;
    }
    if (first)
        return tli_fail(p->ctx, TL_ERR_INVALID_ARG, "tl_program_check: the kernel writes no tensor");
    return TL_OK;
}

TL_API tl_status tl_program_check(const tl_program *p, void *stream, int nargs, const tl_arg *args,
                                  tl_ref_fn ref, void *ref_user, double tol, tl_check_result *res)
{
    if (!p)
        return TL_ERR_INVALID_ARG;
    if (!res || !p->has_ir)
        return tli_fail(p->ctx, TL_ERR_INVALID_ARG, "tl_program_check: %s",
                        !res ? "res is NULL" : "the program has no kernel graph");
    memset(res, 0, sizeof *res);
    const char *array = tli_array_param(&p->ir);
    if (array)
        return tli_fail(p->ctx, TL_ERR_UNSUPPORTED, "tl_program_check: '%s' is an array of pointers "
                        "(tl_param_tensor_array), which the host copies cannot follow", array);
    unsigned since = tli_fail_count();
    check_state s;
    memset(&s, 0, sizeof s);
    char err[256];
    tl_status st = tli_bind_args(&p->ir, nargs, args, TL_ARG_DEVICE_PTR, &s.b, err, sizeof err);
    if (st != TL_OK)
        return tli_fail(p->ctx, st, "tl_program_check: %s", err);
    st = copy_inputs(p, nargs, args, &s);
    if (st == TL_OK)
        st = ref ? ref(ref_user, nargs, s.host_args) : tl_program_interpret(p, nargs, s.host_args);
    if (st == TL_OK)
        st = tl_launch(p, stream, nargs, args);
    if (st == TL_OK)
        st = tl_synchronize(p->ctx);
    if (st == TL_OK)
        st = compare_outputs(p, &s, tol, res);
    state_free(&s, p->ir.p.n);
    return tli_fail_as(p->ctx, st, "tl_program_check", since);
}
