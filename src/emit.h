/* emit.h - printing a lowered kernel as CUDA C. */
#ifndef TILEC_EMIT_H
#define TILEC_EMIT_H

#include "lowered.h"

/* Prints the lowered kernel L. *src is malloc'ed; kname receives the
 * kernel's extern "C" name: the kernel's name and 8 hex digits of a hash of
 * the generated code. Errors (explained in err): TL_ERR_OUT_OF_MEMORY,
 * TL_ERR_INTERNAL (a lowered kernel the printer does not understand). */
tl_status tli_emit_cuda(const tli_lowered *L, char **src, char *kname, size_t kname_len, char *err, size_t errlen);

/* The CUDA type of a dtype in generated code ("float", "tl_bf16", ...). */
const char *tli_dtype_ctype(tl_dtype dt);

/* The embedded device runtime header (src/device/tl_device.cuh). */
extern const char tli_device_header[];
extern const size_t tli_device_header_len;
#define TLI_DEVICE_HEADER_NAME "tl_device.cuh"

#endif
