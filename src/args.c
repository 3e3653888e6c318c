/* args.c - launch arguments: checked against the parameters, then used to
 * evaluate the grid and tensor shapes on the host. */
#include "args.h"

#include "checked.h"
#include "interp.h"

#include <stdlib.h>
#include <string.h>

static const char *kind_name(tl_arg_kind k)
{
    switch (k) {
    case TL_ARG_DEVICE_PTR: return "a device pointer";
    case TL_ARG_HOST_PTR: return "a host pointer";
    case TL_ARG_INT: return "an integer";
    case TL_ARG_FLOAT: return "a float";
    default: return "an argument of unknown kind";
    }
}

static tl_status bad(char *err, size_t n, int i, const tli_param *p, const char *want, tl_arg_kind got)
{
    tli_fmt(err, n, "argument %d ('%s') must be %s, got %s", i, p->name, want, kind_name(got));
    return TL_ERR_LAUNCH_ARGS;
}

static tl_status bind_one(const tli_param *p, int i, const tl_arg *a, tl_arg_kind ptr_kind,
                          tli_bound *b, int slot, char *err, size_t n)
{
    if (p->kind == TL_PARAM_TENSOR) {
        if (a->kind != ptr_kind)
            return bad(err, n, i, p, kind_name(ptr_kind), a->kind);
        b->ptr[slot] = ptr_kind == TL_ARG_HOST_PTR ? (uint64_t)(uintptr_t)a->v.hptr : a->v.dptr;
        return TL_OK;
    }
    bool is_int = tli_dtype_is_int((tl_dtype)p->dtype);
    if (is_int && a->kind != TL_ARG_INT)
        return bad(err, n, i, p, "an integer", a->kind);
    if (!is_int && a->kind != TL_ARG_FLOAT)
        return bad(err, n, i, p, "a float", a->kind);
    if (p->kind == TL_PARAM_DIM && a->v.i < 0) {
        tli_fmt(err, n, "argument %d ('%s') is a size and may not be negative (%lld)", i, p->name,
                (long long)a->v.i);
        return TL_ERR_LAUNCH_ARGS;
    }
    if (p->dtype == TL_I32 && (a->v.i < INT32_MIN || a->v.i > INT32_MAX)) {
        tli_fmt(err, n, "argument %d ('%s') does not fit in i32", i, p->name);
        return TL_ERR_LAUNCH_ARGS;
    }
    if (is_int)
        b->i[slot] = a->v.i;
    else
        b->f[slot] = a->v.f;
    return TL_OK;
}

/* The argument of a tl_param_tensor_array: a count >= 0 and an array of
 * whole 8-byte pointers (its tensors are in device memory: unchecked). */
static tl_status check_array(const tli_ir *ir, const tli_bound *b, int i, char *err, size_t n)
{
    const tli_param *p = &ir->p.v[i];
    int64_t count = tli_eval_host_int(ir, b, tli_B(ir, p->buf)->array_count);
    if (count < 0) {
        tli_fmt(err, n, "argument %d ('%s'): its count of pointers evaluates to %lld", i - 1, p->name,
                (long long)count);
        return TL_ERR_LAUNCH_ARGS;
    }
    if (b->ptr[i] % 8) {
        tli_fmt(err, n, "argument %d ('%s') = 0x%llx is not aligned to its 8-byte pointers", i - 1, p->name,
                (unsigned long long)b->ptr[i]);
        return TL_ERR_LAUNCH_ARGS;
    }
    return TL_OK;
}

/* Checks, for this launch, that tensor i (parameter slot) has extents and
 * strides >= 0, that every offset it spans fits in int64_t in bytes, and
 * that its pointer is non-null (unless it is empty) and holds whole
 * elements. The interpreter and the generated code index with these
 * values, so a negative extent (which an unsigned bounds test lets
 * through) or an overflowing offset would reach outside the tensor. */
static tl_status check_tensor(const tli_ir *ir, const tli_bound *b, int i, char *err, size_t n)
{
    const tli_param *p = &ir->p.v[i];
    const tli_bnode *t = tli_B(ir, p->buf);
    int64_t size = (int64_t)tl_dtype_size((tl_dtype)t->dtype), last = 0, dims[TL_MAX_RANK], strides[TL_MAX_RANK];
    bool empty = false, big = false;
    for (int d = 0; d < t->rank; d++) {
        dims[d] = tli_eval_host_int(ir, b, t->shape[d]);
        strides[d] = tli_eval_host_int(ir, b, t->stride[d]);
        if (dims[d] < 0 || strides[d] < 0) {
            tli_fmt(err, n, "argument %d ('%s'): %s %d evaluates to %lld; extents and strides must be >= 0", i - 1,
                    p->name, dims[d] < 0 ? "extent" : "stride", d, (long long)(dims[d] < 0 ? dims[d] : strides[d]));
            return TL_ERR_LAUNCH_ARGS;
        }
        int64_t bytes;
        big = big || tli_mul_overflows(strides[d], size, &bytes);
        empty = empty || dims[d] == 0;
    }
    for (int d = 0; d < t->rank && !empty && !big; d++) {
        int64_t part;
        big = tli_mul_overflows(dims[d] - 1, strides[d], &part) || tli_add_overflows(last, part, &last);
    }
    int64_t span_bytes;
    if (big || (!empty && (tli_add_overflows(last, 1, &last) || tli_mul_overflows(last, size, &span_bytes)))) {
        tli_fmt(err, n, "argument %d ('%s'): its extents and strides reach beyond 2^63 bytes", i - 1, p->name);
        return TL_ERR_LAUNCH_ARGS;
    }
    uint64_t ptr = b->ptr[i];
    if (t->array_count) /* an array of pointers: the grid's check (tli_eval_grid) covers its use */
        return check_array(ir, b, i, err, n);
    if (!empty && ptr == 0) {
        tli_fmt(err, n, "argument %d ('%s') is a null pointer", i - 1, p->name);
        return TL_ERR_LAUNCH_ARGS;
    }
    if (ptr % (uint64_t)size) {
        tli_fmt(err, n, "argument %d ('%s') = 0x%llx is not aligned to its %lld-byte elements", i - 1, p->name,
                (unsigned long long)ptr, (long long)size);
        return TL_ERR_LAUNCH_ARGS;
    }
    return TL_OK;
}

static tl_status bind_all(const tli_ir *ir, int nargs, const tl_arg *args, tl_arg_kind ptr_kind, tli_bound *b,
                          char *err, size_t errlen)
{
    int want = ir->p.n - 1;
    if (nargs > 0 && !args) {
        tli_fmt(err, errlen, "kernel '%s': args is NULL but nargs is %d", ir->name, nargs);
        return TL_ERR_LAUNCH_ARGS;
    }
    if (nargs != want) {
        tli_fmt(err, errlen, "kernel '%s' takes %d arguments, got %d", ir->name, want, nargs);
        return TL_ERR_LAUNCH_ARGS;
    }
    for (int i = 0; i < want; i++) {
        tl_status st = bind_one(&ir->p.v[i + 1], i, &args[i], ptr_kind, b, i + 1, err, errlen);
        if (st != TL_OK)
            return st;
    }
    /* Tensors after every scalar: extents may use any dim. */
    for (int i = 1; i <= want; i++) {
        tl_status st = ir->p.v[i].kind == TL_PARAM_TENSOR ? check_tensor(ir, b, i, err, errlen) : TL_OK;
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

tl_status tli_bind_args(const tli_ir *ir, int nargs, const tl_arg *args, tl_arg_kind ptr_kind,
                        tli_bound *b, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    b->n = ir->p.n;
    b->i = calloc((size_t)ir->p.n, sizeof *b->i);
    b->f = calloc((size_t)ir->p.n, sizeof *b->f);
    b->ptr = calloc((size_t)ir->p.n, sizeof *b->ptr);
    b->mem = tli_evalmem_new(ir);
    if (!b->i || !b->f || !b->ptr || !b->mem) {
        tli_bound_free(b);
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    tl_status st = bind_all(ir, nargs, args, ptr_kind, b, err, errlen);
    if (st != TL_OK)
        tli_bound_free(b);
    return st;
}

void tli_bound_free(tli_bound *b)
{
    free(b->i);
    free(b->f);
    free(b->ptr);
    tli_evalmem_free(b->mem);
    b->i = NULL;
    b->f = NULL;
    b->ptr = NULL;
    b->mem = NULL;
}

int64_t tli_eval_host_int(const tli_ir *ir, const tli_bound *b, int32_t e)
{
    tli_value v = tli_interp_eval_host(ir, b, e);
    return v.i;
}

bool tli_eval_grid(const tli_ir *ir, const tli_bound *b, int64_t grid[3], char *err, size_t errlen)
{
    static const int64_t limit[3] = {2147483647LL, 65535, 65535};
    for (int a = 0; a < 3; a++) {
        grid[a] = ir->grid[a] ? tli_eval_host_int(ir, b, ir->grid[a]) : 1;
        if (grid[a] < 0 || grid[a] > limit[a]) {
            tli_fmt(err, errlen, "grid dimension %c = %lld is outside 0..%lld", "xyz"[a],
                    (long long)grid[a], (long long)limit[a]);
            return false;
        }
    }
    /* a cluster's blocks are launched together: whole clusters only */
    int c[3] = {ir->cluster[0] > 0 ? ir->cluster[0] : 1, ir->cluster[1] > 0 ? ir->cluster[1] : 1,
                ir->cluster[2] > 0 ? ir->cluster[2] : 1};
    if (grid[0] % c[0] || grid[1] % c[1] || grid[2] % c[2]) {
        tli_fmt(err, errlen, "grid (%lld, %lld, %lld) is not a multiple of the cluster (%d, %d, %d)",
                (long long)grid[0], (long long)grid[1], (long long)grid[2], c[0], c[1], c[2]);
        return false;
    }
    /* every block's pointer is in its array, and the array is there */
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *t = tli_B(ir, i);
        if (t->scope != B_GLOBAL || !t->array_count)
            continue;
        int64_t count = tli_eval_host_int(ir, b, t->array_count), g = grid[t->array_axis];
        const char *name = ir->p.v[t->param].name;
        bool blocks = grid[0] && grid[1] && grid[2];
        if (blocks && g > count) {
            tli_fmt(err, errlen, "grid dimension %c = %lld is more than the %lld pointers of '%s'",
                    "xyz"[t->array_axis], (long long)g, (long long)count, name);
            return false;
        }
        if (blocks && !b->ptr[t->param]) {
            tli_fmt(err, errlen, "'%s' is a null array of pointers", name);
            return false;
        }
    }
    return true;
}

const char *tli_array_param(const tli_ir *ir)
{
    for (int32_t i = 1; i < ir->p.n; i++)
        if (ir->p.v[i].kind == TL_PARAM_TENSOR && tli_B(ir, ir->p.v[i].buf)->array_count)
            return ir->p.v[i].name;
    return NULL;
}

int64_t tli_tensor_span(const tli_ir *ir, const tli_bound *b, int32_t buf)
{
    const tli_bnode *t = tli_B(ir, buf);
    int64_t last = 0;
    for (int d = 0; d < t->rank; d++) {
        int64_t dim = tli_eval_host_int(ir, b, t->shape[d]);
        if (dim <= 0)
            return 0;
        int64_t part;
        if (tli_mul_overflows(dim - 1, tli_eval_host_int(ir, b, t->stride[d]), &part) ||
            tli_add_overflows(last, part, &last))
            return -1;
    }
    return tli_add_overflows(last, 1, &last) ? -1 : last;
}
