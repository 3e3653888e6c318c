/*
 * Reproducer of the libtilec kernel 'vadd_f32', written by tl_kernel_reproducer
 * (libtilec 0.1.0). It rebuilds the kernel with the builder calls that made
 * it and prints the CUDA C that tl_kernel_source generates for it, or, with
 * the argument "dump", the kernel's graph (tl_kernel_dump). No GPU needed.
 *
 *   cc -std=c11 -o repro repro.c -ltilec -ldl -lpthread -lm
 *   ./repro [target] [dump]        (target: sm_90a unless given)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tilec.h>

static void build(tl_kernel *k)
{
    tl_expr p_N = tl_dim(k, "N");
    tl_buf p_A = tl_param_tensor(k, "A", TL_F32, 1, (tl_expr[]){p_N}, NULL);
    tl_buf p_B = tl_param_tensor(k, "B", TL_F32, 1, (tl_expr[]){p_N}, NULL);
    tl_buf p_C = tl_param_tensor(k, "C", TL_F32, 1, (tl_expr[]){p_N}, NULL);
    tl_expr e5 = tl_int(k, 4096);
    tl_expr e6 = tl_ceildiv(k, p_N, e5);
    tl_grid(k, e6, TL_NONE_EXPR, TL_NONE_EXPR, 256);
    tl_expr e7 = tl_block_idx(k, 0);
    tl_expr e8 = tl_mul(k, e7, e5);
    tl_expr i1 = tl_parallel1(k, 4096);
        tl_expr e10 = tl_add(k, e8, i1);
        tl_expr e11 = tl_load(k, p_B, (tl_expr[]){e10});
        tl_expr e12 = tl_load(k, p_A, (tl_expr[]){e10});
        tl_expr e13 = tl_add(k, e12, e11);
        tl_store(k, p_C, (tl_expr[]){e10}, e13);
    tl_end(k);
}

int main(int argc, char **argv)
{
    const char *target = "sm_90a";
    int dump = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "dump") == 0)
            dump = 1;
        else
            target = argv[i];
    }
    tl_ctx_options opt = tl_ctx_default_options();
    opt.device = TL_NO_DEVICE;
    opt.target = target;
    opt.disk_cache = 0;
    tl_ctx *ctx = NULL;
    char msg[512];
    tl_status st = tl_ctx_create(&opt, &ctx, msg, sizeof msg);
    if (st != TL_OK) {
        fprintf(stderr, "tl_ctx_create: %s: %s\n", tl_status_name(st), msg);
        return 1;
    }
    tl_kernel *k = tl_kernel_new(ctx, "vadd_f32");
    char *text = NULL;
    if (!k) {
        st = TL_ERR_OUT_OF_MEMORY;
    } else {
        build(k);
        st = dump ? tl_kernel_dump(k, &text) : tl_kernel_source(k, NULL, &text);
    }
    if (st == TL_OK)
        fputs(text, stdout);
    else
        fprintf(stderr, "%s: %s\n", tl_status_name(st), tl_ctx_error(ctx));
    tl_free_host(text);
    tl_kernel_destroy(k);
    tl_ctx_destroy(ctx);
    return st == TL_OK ? 0 : 1;
}
