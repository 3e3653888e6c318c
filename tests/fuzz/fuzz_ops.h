/* fuzz_ops.h - the byte language of the builder fuzzer, shared by the
 * decoder (fuzz_builder.c) and the seed writer (make_seeds.c).
 *
 * An input is a sequence of operations, each an opcode byte followed by
 * operand bytes. Expressions, buffers and regions made so far sit in pools;
 * an operand names one by its distance from the newest (0: the newest), so
 * that most byte values pick something that exists, and REF_NULL passes
 * the null handle. Every operation that makes expressions pushes them, null
 * or not, so the seed writer can count positions. The input ends with the
 * values of the scalar parameters for the interpretation (see
 * fuzz_builder.c); missing bytes read as 0.
 */
#ifndef TILEC_FUZZ_OPS_H
#define TILEC_FUZZ_OPS_H

#include "tilec.h"

#include <stdint.h>
#include <string.h>

enum fuzz_op {
    OP_DIM,          /* name                                         -> 1 expr   */
    OP_SCALAR,       /* name dtype                                   -> 1 expr   */
    OP_TENSOR,       /* name dtype rank shape[rank] strided [strides] -> 1 buf    */
    OP_GRID,         /* gx gy gz threads/32-1                                    */
    OP_BLOCK_IDX,    /* axis                                         -> 1 expr   */
    OP_INT,          /* signed byte                                  -> 1 expr   */
    OP_INT64,        /* 8 bytes, little-endian                       -> 1 expr   */
    OP_I32,          /* signed byte                                  -> 1 expr   */
    OP_FLOAT,        /* dtype, signed byte / 4                       -> 1 expr   */
    OP_BINARY,       /* which a b                                    -> 1 expr   */
    OP_UNARY,        /* which a                                      -> 1 expr   */
    OP_SELECT,       /* c a b                                        -> 1 expr   */
    OP_CAST,         /* a dtype                                      -> 1 expr   */
    OP_LOAD,         /* buf idx[4]                                   -> 1 expr   */
    OP_STORE,        /* buf idx[4] value                                         */
    OP_SERIAL,       /* extent                                       -> 1 expr   */
    OP_PARALLEL,     /* rank extent[rank] (bytes)                    -> rank     */
    OP_IF,           /* cond                                                     */
    OP_ELSE,
    OP_END,
    OP_ALLOC,        /* scope dtype rank extent[rank] (bytes)        -> 1 buf    */
    OP_TILE,         /* buf n idx[n]                                 -> 1 region */
    OP_ALL,          /* buf                                          -> 1 region */
    OP_COPY,         /* src dst (regions)                                        */
    OP_CLEAR,        /* buf                                                      */
    OP_FILL,         /* buf value                                                */
    OP_PIPELINED,    /* extent stages                                -> 1 expr   */
    OP_GEMM,         /* A B C flags                                              */
    OP_SWIZZLE,      /* panel                                                    */
    OP_FLAGS,        /* bit 0 fast math, bits 1 + 3 ping-pong mode, bit 2 warp spec.,
                        bit 4 persistent, bit 5 stream-K */
    OP_REDUCE,       /* which src dst dim clear                                  */
    OP_NAME,         /* buf name                                                 */
    OP_COUNT,        /* ends the program (as does any byte up to 0xdf)           */
    /* later operations, numbered apart so that the inputs of tests/fuzz/regress,
     * which end with OP_COUNT, keep their meaning */
    OP_CLUSTER = 0xe0, /* cx cy cz (each byte % 9), then min blocks (signed byte) */
    OP_CLUSTER_REDUCE, /* which buf [root: which 4 is tl_cluster_reduce_sum_to]  */
    OP_BLOCK_VALUE,    /* a                                          -> 1 expr   */
    OP_CACHE_POLICY,   /* buf policy (byte % 3: 2 is out of range)                */
    OP_REDUCER,        /* dtype rank extent[rank] (bytes)            -> 1 buf    */
    OP_FINALIZE,       /* buf                                                    */
    OP_LAST
};

#define REF_NULL 0xFF

/* Binary and unary operations, in the order the decoder's tables have. */
enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_MOD, BIN_CEILDIV, BIN_MAX, BIN_MIN, BIN_LT, BIN_LE, BIN_GT,
       BIN_GE, BIN_EQ, BIN_NE, BIN_AND, BIN_OR, BIN_COUNT };
enum { UN_NEG, UN_ABS, UN_NOT, UN_EXP, UN_EXP2, UN_LOG, UN_SQRT, UN_RSQRT, UN_TANH, UN_ERF, UN_COUNT };

/* Names a parameter can take: ordinary ones, and ones the builder must
 * refuse or that collide with what the generated code declares. */
static const char *const fuzz_names[] = {
    "N", "M", "K", "A", "B", "C", "X", "Y", "alpha", "bias", "S1", "F2", "A_d0", "i1_0_c0",
    "namespace", "NULL", "tl_x", "expf", "a__b", "", "x_very_long_name_that_is_still_fine_0123456789_abcdefghijklmn"};
#define FUZZ_NAMES (int)(sizeof fuzz_names / sizeof fuzz_names[0])

/* ------------------------------------------------------------ the writer */

/* A seed under construction: the bytes and the pool positions. */
typedef struct fuzz_writer {
    uint8_t buf[8192];
    int len;
    int nexpr, nbuf, nregion;
} fuzz_writer;

static inline void fw_byte(fuzz_writer *w, int b)
{
    if (w->len < (int)sizeof w->buf)
        w->buf[w->len++] = (uint8_t)b;
}

/* The operand that names expression (or buffer, region) number i. */
static inline void fw_ref(fuzz_writer *w, int i, int count) { fw_byte(w, i < 0 ? REF_NULL : count - 1 - i); }
static inline void fw_e(fuzz_writer *w, int e) { fw_ref(w, e, w->nexpr); }
static inline void fw_b(fuzz_writer *w, int b) { fw_ref(w, b, w->nbuf); }
static inline void fw_r(fuzz_writer *w, int r) { fw_ref(w, r, w->nregion); }

static inline int fw_name(const char *name)
{
    for (int i = 0; i < FUZZ_NAMES; i++)
        if (strcmp(fuzz_names[i], name) == 0)
            return i;
    return 0;
}

#endif
