/*
 * abi_layout.c - prints the layout the C compiler gives the structs that
 * bench/tilec_ctypes.py mirrors, and the values of the constants it copies,
 * one fact a line:
 *
 *   struct NAME SIZE ALIGN
 *   field NAME.FIELD OFFSET SIZE
 *   const NAME VALUE
 *
 * `torch_compare.py --check-abi` builds the same lines from its ctypes
 * classes and fails on any difference, a field missing on either side
 * included. Update both together when tilec.h changes.
 */
#include <stddef.h>
#include <stdio.h>

#include "tilec.h"

#define STRUCT(T) printf("struct %s %zu %zu\n", #T, sizeof(T), _Alignof(T))
#define FIELD(T, f) printf("field %s.%s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define CONST(c) printf("const %s %lld\n", #c, (long long)(c))

static void ctx_structs(void)
{
    STRUCT(tl_ctx_options);
    FIELD(tl_ctx_options, device);
    FIELD(tl_ctx_options, cu_context);
    FIELD(tl_ctx_options, target);
    FIELD(tl_ctx_options, cache_dir);
    FIELD(tl_ctx_options, disk_cache);
    FIELD(tl_ctx_options, log);
    FIELD(tl_ctx_options, log_user);

    STRUCT(tl_device_info);
    FIELD(tl_device_info, name);
    FIELD(tl_device_info, ordinal);
    FIELD(tl_device_info, cc_major);
    FIELD(tl_device_info, cc_minor);
    FIELD(tl_device_info, sm_count);
    FIELD(tl_device_info, global_mem_bytes);
    FIELD(tl_device_info, smem_per_block);
    FIELD(tl_device_info, smem_per_block_optin);
    FIELD(tl_device_info, smem_per_sm);
    FIELD(tl_device_info, regs_per_block);
    FIELD(tl_device_info, l2_bytes);
    FIELD(tl_device_info, max_threads_per_block);
    FIELD(tl_device_info, clock_khz);
    FIELD(tl_device_info, mem_clock_khz);
    FIELD(tl_device_info, mem_bus_width_bits);
    FIELD(tl_device_info, driver_version);
    FIELD(tl_device_info, nvrtc_major);
    FIELD(tl_device_info, nvrtc_minor);
    FIELD(tl_device_info, target);
}

static void gemm_structs(void)
{
    STRUCT(tl_gemm_schedule);
    FIELD(tl_gemm_schedule, block_m);
    FIELD(tl_gemm_schedule, block_n);
    FIELD(tl_gemm_schedule, block_k);
    FIELD(tl_gemm_schedule, stages);
    FIELD(tl_gemm_schedule, threads);
    FIELD(tl_gemm_schedule, swizzle);
    FIELD(tl_gemm_schedule, warp_policy);
    FIELD(tl_gemm_schedule, pingpong);
    FIELD(tl_gemm_schedule, split_k);
    FIELD(tl_gemm_schedule, swap_ab);
    FIELD(tl_gemm_schedule, persistent);
    FIELD(tl_gemm_schedule, cluster_m);
    FIELD(tl_gemm_schedule, cluster_n);
    FIELD(tl_gemm_schedule, stream_k);
    FIELD(tl_gemm_schedule, gemv);

    STRUCT(tl_gemm_desc);
    FIELD(tl_gemm_desc, m);
    FIELD(tl_gemm_desc, n);
    FIELD(tl_gemm_desc, k);
    FIELD(tl_gemm_desc, in_dtype);
    FIELD(tl_gemm_desc, out_dtype);
    FIELD(tl_gemm_desc, trans_b);
    FIELD(tl_gemm_desc, has_bias);
    FIELD(tl_gemm_desc, epilogue);
    FIELD(tl_gemm_desc, schedule);

    STRUCT(tl_gemm_args);
    FIELD(tl_gemm_args, a);
    FIELD(tl_gemm_args, b);
    FIELD(tl_gemm_args, bias);
    FIELD(tl_gemm_args, c);
    FIELD(tl_gemm_args, lda);
    FIELD(tl_gemm_args, ldb);
    FIELD(tl_gemm_args, ldc);
    FIELD(tl_gemm_args, batch);
    FIELD(tl_gemm_args, stride_a);
    FIELD(tl_gemm_args, stride_b);
    FIELD(tl_gemm_args, stride_c);
    FIELD(tl_gemm_args, a_array);
    FIELD(tl_gemm_args, b_array);
    FIELD(tl_gemm_args, c_array);
    FIELD(tl_gemm_args, alpha);
    FIELD(tl_gemm_args, beta);
    FIELD(tl_gemm_args, scale_a);
    FIELD(tl_gemm_args, scale_b);
}

static void softmax_structs(void)
{
    STRUCT(tl_softmax_schedule);
    FIELD(tl_softmax_schedule, width);
    FIELD(tl_softmax_schedule, rows);
    FIELD(tl_softmax_schedule, threads);
    FIELD(tl_softmax_schedule, stages);
    FIELD(tl_softmax_schedule, cluster);
    FIELD(tl_softmax_schedule, loader);

    STRUCT(tl_softmax_desc);
    FIELD(tl_softmax_desc, rows);
    FIELD(tl_softmax_desc, cols);
    FIELD(tl_softmax_desc, ld_in);
    FIELD(tl_softmax_desc, ld_out);
    FIELD(tl_softmax_desc, in_dtype);
    FIELD(tl_softmax_desc, out_dtype);
    FIELD(tl_softmax_desc, schedule);
}

static void flash_attn_structs(void)
{
    STRUCT(tl_flash_attn_schedule);
    FIELD(tl_flash_attn_schedule, block_m);
    FIELD(tl_flash_attn_schedule, block_n);
    FIELD(tl_flash_attn_schedule, stages);
    FIELD(tl_flash_attn_schedule, threads);
    FIELD(tl_flash_attn_schedule, warp_specialize);
    FIELD(tl_flash_attn_schedule, pingpong);
    FIELD(tl_flash_attn_schedule, persistent);
    FIELD(tl_flash_attn_schedule, split_kv);
    FIELD(tl_flash_attn_schedule, split_tail);

    STRUCT(tl_flash_attn_desc);
    FIELD(tl_flash_attn_desc, batch);
    FIELD(tl_flash_attn_desc, heads);
    FIELD(tl_flash_attn_desc, kv_heads);
    FIELD(tl_flash_attn_desc, seq_q);
    FIELD(tl_flash_attn_desc, seq_kv);
    FIELD(tl_flash_attn_desc, head_dim);
    FIELD(tl_flash_attn_desc, dtype);
    FIELD(tl_flash_attn_desc, causal);
    FIELD(tl_flash_attn_desc, scale);
    FIELD(tl_flash_attn_desc, q_stride);
    FIELD(tl_flash_attn_desc, k_stride);
    FIELD(tl_flash_attn_desc, v_stride);
    FIELD(tl_flash_attn_desc, o_stride);
    FIELD(tl_flash_attn_desc, lse);
    FIELD(tl_flash_attn_desc, schedule);
}

static void constants(void)
{
    CONST(TL_OK);
    CONST(TL_ERR_INVALID_ARG);
    CONST(TL_ERR_DTYPE);
    CONST(TL_ERR_SHAPE);
    CONST(TL_ERR_SCOPE);
    CONST(TL_ERR_UNSUPPORTED);
    CONST(TL_ERR_OUT_OF_MEMORY);
    CONST(TL_ERR_NO_DRIVER);
    CONST(TL_ERR_NO_DEVICE);
    CONST(TL_ERR_NO_NVRTC);
    CONST(TL_ERR_NO_CUBLAS);
    CONST(TL_ERR_COMPILE);
    CONST(TL_ERR_CUDA);
    CONST(TL_ERR_LAUNCH_ARGS);
    CONST(TL_ERR_IO);
    CONST(TL_ERR_INTERNAL);
    CONST(TL_F32);
    CONST(TL_F16);
    CONST(TL_BF16);
    CONST(TL_F8E4M3);
    CONST(TL_F8E5M2);
    CONST(TL_EPI_NONE);
    CONST(TL_EPI_RELU);
    CONST(TL_EPI_GELU_ERF);
    CONST(TL_EPI_GELU_TANH);
    CONST(TL_NO_DEVICE);
}

int main(void)
{
    ctx_structs();
    gemm_structs();
    softmax_structs();
    flash_attn_structs();
    constants();
    return 0;
}
