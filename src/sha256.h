/*
 * sha256.h - SHA-256 (FIPS 180-4) for the cache keys and entry checksums.
 *
 * It is in-house on purpose: an embeddable library should not pull in a link
 * dependency on libcrypto (and its version churn) for about 150 lines of
 * well-specified code that is not used for anything secret.
 */
#ifndef TILEC_SHA256_H
#define TILEC_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct tli_sha256 {
    uint32_t h[8];     /* chaining state                          */
    uint64_t nbytes;   /* message length so far, in bytes         */
    uint8_t buf[64];   /* a partial block waiting for more input  */
    size_t nbuf;       /* bytes used in buf (always < 64)         */
} tli_sha256;

void tli_sha256_init(tli_sha256 *s);
void tli_sha256_update(tli_sha256 *s, const void *data, size_t n);
/* Writes the digest; s must be initialised again before reuse. */
void tli_sha256_final(tli_sha256 *s, uint8_t out[32]);
/* One-shot digest of n bytes. C gives typedefs and functions one namespace,
 * so the type tli_sha256 and a function tli_sha256 cannot both exist; the
 * function is tli_sha256_oneshot and tli_sha256(data, n, out) is a
 * function-like macro for it. The macro only expands before '(', so
 * `tli_sha256 s;` and `sizeof(tli_sha256)` still name the type. */
void tli_sha256_oneshot(const void *data, size_t n, uint8_t out[32]);
#define tli_sha256(data, n, out) tli_sha256_oneshot((data), (n), (out))
/* Lower-case hex of n bytes into out, which holds 2n+1 chars (NUL-ended). */
void tli_hex(const uint8_t *bytes, size_t n, char *out);

#endif
