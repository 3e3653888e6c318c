/* emit.h - lowering a kernel graph to CUDA C. */
#ifndef TILEC_EMIT_H
#define TILEC_EMIT_H

#include "ir.h"
#include "lower.h"

/* Lowers ir (verified) for target ("sm_80", "sm_90a", ...) to CUDA C, with
 * at most smem_limit bytes of shared memory per block. *src is malloc'ed;
 * kname receives the kernel's extern "C" name: the kernel's name and 8 hex
 * digits of a hash of the generated code; *smem_bytes the dynamic shared
 * memory it needs. Errors (explained in err): those of tli_plan_tiles,
 * TL_ERR_UNSUPPORTED, TL_ERR_OUT_OF_MEMORY. */
/* The TMA descriptors a kernel takes after its own parameters (then one
 * int, 1 when they are valid: the kernel falls back to cp.async if not). */
typedef struct tli_tma_list {
    int n;
    tli_tma_map map[TLI_MAX_TMA];
} tli_tma_list;

tl_status tli_emit_cuda(const tli_ir *ir, const char *target, int64_t smem_limit, char **src, char *kname,
                        size_t kname_len, int64_t *smem_bytes, tli_tma_list *tma, char *err, size_t errlen);
/* Shared memory per block a target allows (opt-in maximum). */
int64_t tli_target_smem_limit(const char *target);

/* The CUDA type of a dtype in generated code ("float", "tl_bf16", ...). */
const char *tli_dtype_ctype(tl_dtype dt);

/* The embedded device runtime header (src/device/tl_device.cuh). */
extern const char tli_device_header[];
extern const size_t tli_device_header_len;
#define TLI_DEVICE_HEADER_NAME "tl_device.cuh"

#endif
