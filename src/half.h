/*
 * half.h - element access by dtype on the host, for the interpreter, the
 * checker and the random generator. The public float <-> f16/bf16
 * conversions are in tilec.h (tl_f32_to_f16, tl_f32_to_f8e4m3 and
 * friends).
 */
#ifndef TILEC_HALF_H
#define TILEC_HALF_H

#include "internal.h"

/* Element i of an array of `dt` at base, as a double (i64 beyond 2^53 is
 * rounded; TL_BOOL reads one byte as 0/1; TL_DTYPE_INVALID gives 0). */
double tli_load_as_double(tl_dtype dt, const void *base, int64_t i);

/* Stores v into element i of an array of `dt`, rounded the way a CUDA cast
 * from double rounds: f32, f16, bf16 and the 8-bit floats to nearest even
 * (the 8-bit ones saturating), each straight from
 * the double (no double rounding through float); i32 and i64 truncate toward
 * zero and saturate, NaN gives 0 (as cvt.rzi does); TL_BOOL stores v != 0;
 * TL_DTYPE_INVALID stores nothing. */
void tli_store_from_double(tl_dtype dt, void *base, int64_t i, double v);

/* v rounded to nearest even to f16 / bf16 bits, straight from the double. */
uint16_t tli_f64_to_f16(double v);
uint16_t tli_f64_to_bf16(double v);
/* v rounded to nearest even to 8-bit float bits of dt (TL_F8E4M3 or
 * TL_F8E5M2), saturating as tl_f32_to_f8e4m3 does, straight from the
 * double. */
uint8_t tli_f64_to_f8(tl_dtype dt, double v);

#endif
