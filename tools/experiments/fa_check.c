/* fa_check.c - an experiment tool: tl_op_flash_attn (bf16; D and causal from argv; bench_attention's
 * B x H heads as one batch) at each S keys, on fresh random inputs with O poisoned, against a float64
 * reference on 128 sampled query rows; prints the largest row's relative error (||o - r|| / ||r||) and
 * exits 1 when it reaches 1e-2. With TILEC_CACHE_DIR holding a cubin_override edit it checks the edit.
 *   fa_check D CAUSAL S...
 * Build: cc -std=c11 -O2 -Iinclude -o /tmp/fa_check tools/experiments/fa_check.c lib/libtilec.a
 *        -ldl -lpthread -lm */
#include "tilec.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static float bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
int main(int argc, char **argv)
{
    tl_ctx_options o = tl_ctx_default_options();
    tl_ctx *c; char m[256];
    if (tl_ctx_create(&o, &c, m, sizeof m)) { fprintf(stderr, "%s\n", m); return 1; }
    int rc = 0;
    if (argc < 4) { fprintf(stderr, "usage: fa_check D CAUSAL S...\n"); return 2; }
    int D = atoi(argv[1]), causal = atoi(argv[2]);
    for (int a = 3; a < argc; a++) {
        int S = atoi(argv[a]), H = (2048 / D) * (16384 / S > 0 ? 16384 / S : 1); /* the bench's B x H heads, as B = 1 */
        size_t n = (size_t)H * S * D;
        uint16_t *q = malloc(n * 2), *k = malloc(n * 2), *v = malloc(n * 2), *out = malloc(n * 2);
        srand(S);
        for (size_t i = 0; i < n; i++) q[i] = tobf(2.0f * rand() / RAND_MAX - 1), k[i] = tobf(2.0f * rand() / RAND_MAX - 1), v[i] = tobf(2.0f * rand() / RAND_MAX - 1);
        uint64_t dq, dk, dv, dout;
        tl_malloc(c, n * 2, &dq), tl_malloc(c, n * 2, &dk), tl_malloc(c, n * 2, &dv), tl_malloc(c, n * 2, &dout);
        tl_memcpy_htod(c, dq, q, n * 2), tl_memcpy_htod(c, dk, k, n * 2), tl_memcpy_htod(c, dv, v, n * 2);
        tl_memset_u8(c, dout, 0xff, n * 2, NULL); /* poisoned */
        tl_flash_attn_desc d = {.batch = 1, .heads = H, .kv_heads = H, .seq_q = S, .seq_kv = S, .head_dim = D, .dtype = TL_BF16, .causal = causal};
        if (tl_op_flash_attn(c, &d, dq, dk, dv, dout, 0, NULL)) { fprintf(stderr, "%s\n", tl_ctx_error(c)); return 1; }
        tl_synchronize(c);
        tl_memcpy_dtoh(c, out, dout, n * 2);
        double worst = 0, scale = 1.0 / sqrt((double)D);
        double *p = malloc(sizeof(double) * S);
        for (int t = 0; t < 128; t++) {
            int h = (int)((long long)t * 37 % H), r = (int)((long long)t * 7919 % S);
            const uint16_t *qr = q + ((size_t)h * S + r) * D;
            double mx = -1e300, sum = 0;
            int nk = causal ? r + 1 : S; /* causal: keys up to the row's own */
            for (int j = 0; j < nk; j++) {
                double s = 0;
                for (int e = 0; e < D; e++) s += (double)bf(qr[e]) * bf(k[((size_t)h * S + j) * D + e]);
                p[j] = s * scale;
                if (p[j] > mx) mx = p[j];
            }
            for (int j = 0; j < nk; j++) p[j] = exp(p[j] - mx), sum += p[j];
            double num = 0, den = 0;
            for (int e = 0; e < D; e++) {
                double ref = 0;
                for (int j = 0; j < nk; j++) ref += p[j] * bf(v[((size_t)h * S + j) * D + e]);
                ref /= sum;
                double got = bf(out[((size_t)h * S + r) * D + e]);
                num += (got - ref) * (got - ref), den += ref * ref;
            }
            double rel = sqrt(num / den);
            if (!(rel <= worst)) worst = rel; /* NaN counts */
        }
        printf("D %d causal %d S %d: max row rel err %.2e %s\n", D, causal, S, worst, worst < 1e-2 ? "ok" : "BAD");
        if (!(worst < 1e-2)) rc = 1;
        free(p), free(q), free(k), free(v), free(out);
        tl_free(c, dq), tl_free(c, dk), tl_free(c, dv), tl_free(c, dout);
    }
    return rc;
}
