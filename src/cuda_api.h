/*
 * cuda_api.h - our own declarations of the parts of the CUDA Driver API,
 * NVRTC, cuBLAS and cuBLASLt that libtilec uses, and the tables of function
 * pointers that cuda_loader.c fills with dlopen/dlsym.
 *
 * Why not cuda.h: the library must build on a machine without the CUDA
 * toolkit and load on one without a GPU. Every type, constant and signature
 * below was checked against the CUDA 13.0 headers (cuda.h, nvrtc.h,
 * cublas_api.h, cublasLt.h, library_types.h); enum types are passed as int,
 * which is how the C ABI passes them anyway.
 *
 * Each table is searched for and filled once per process (pthread_once) and
 * never changes afterwards, so any thread may read it without locking. A
 * failed search is remembered too: a library installed later is not picked
 * up by a running process.
 */
#ifndef TILEC_CUDA_API_H
#define TILEC_CUDA_API_H

#include "tilec.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Driver API types and constants                                            */
/* ------------------------------------------------------------------------ */

typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 of cuda.h */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
    CUDA_ERROR_UNKNOWN = 999
};

enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13, /* kHz; may fail or be 0 on CUDA 13 */
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36, /* kHz; likewise */
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
    CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111,
    CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
    CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED = 127
};

enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
    CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
};

enum { CU_EVENT_DEFAULT = 0, CU_EVENT_BLOCKING_SYNC = 1, CU_EVENT_DISABLE_TIMING = 2 };

/* Tensor maps (TMA descriptors, sm_90+): 128 bytes, 128-byte aligned in
 * CUDA 13 (64 in CUDA 12; the larger alignment satisfies both). */
typedef struct CUtensorMap {
    _Alignas(128) uint64_t opaque[16];
} CUtensorMap;

enum { /* CUtensorMapDataType */
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
    CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1,
    CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2,
    CU_TENSOR_MAP_DATA_TYPE_INT32 = 3,
    CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4,
    CU_TENSOR_MAP_DATA_TYPE_INT64 = 5,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT64 = 8,
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9
};
enum { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 };
enum {
    CU_TENSOR_MAP_SWIZZLE_NONE = 0,
    CU_TENSOR_MAP_SWIZZLE_32B = 1,
    CU_TENSOR_MAP_SWIZZLE_64B = 2,
    CU_TENSOR_MAP_SWIZZLE_128B = 3
};
enum {
    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
    CU_TENSOR_MAP_L2_PROMOTION_L2_64B = 1,
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
};
enum {
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA = 1
};

/*
 * The driver table. Field names are the API names of cuda.h; the symbols
 * looked up are the versioned ones cuda.h maps those names to
 * (cuMemAlloc -> cuMemAlloc_v2, cuEventElapsedTime -> cuEventElapsedTime_v2
 * with a fallback to the unversioned symbol on drivers older than 12.8, ...).
 * Fields marked "may be NULL" are optional; all others are present when
 * tli_load_driver succeeds.
 */
typedef struct tli_driver_api {
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);
    CUresult (*cuCtxCreate)(CUcontext *ctx, unsigned flags, CUdevice dev); /* may be NULL */
    CUresult (*cuCtxDestroy)(CUcontext ctx);                               /* may be NULL */
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (*cuCtxGetDevice)(CUdevice *dev);
    CUresult (*cuCtxPushCurrent)(CUcontext ctx);
    CUresult (*cuCtxPopCurrent)(CUcontext *ctx);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *dptr, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr dptr);
    CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
    CUresult (*cuStreamSynchronize)(CUstream s);
    CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*cuModuleUnload)(CUmodule mod);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*cuFuncGetAttribute)(int *value, CUfunction_attribute attr, CUfunction fn);
    CUresult (*cuFuncSetAttribute)(CUfunction fn, CUfunction_attribute attr, int value);
    CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
                               unsigned bx, unsigned by, unsigned bz, unsigned smem_bytes,
                               CUstream s, void **params, void **extra);
    CUresult (*cuEventCreate)(CUevent *ev, unsigned flags);
    CUresult (*cuEventDestroy)(CUevent ev);
    CUresult (*cuEventRecord)(CUevent ev, CUstream s);
    CUresult (*cuEventSynchronize)(CUevent ev);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*cuGetErrorName)(CUresult r, const char **name);
    CUresult (*cuGetErrorString)(CUresult r, const char **text);
    /* may be NULL */
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction fn, int block_size,
                                                           size_t dynamic_smem_bytes);
    /* may be NULL (then stream-K kernels launch as ordinary ones) */
    CUresult (*cuLaunchCooperativeKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned smem_bytes,
                                          CUstream s, void **params);
    /* may be NULL (drivers before 11.2: no stream-ordered allocator) */
    CUresult (*cuMemAllocAsync)(CUdeviceptr *dptr, size_t bytes, CUstream s);
    CUresult (*cuMemFreeAsync)(CUdeviceptr dptr, CUstream s);
    /* may be NULL (drivers before 12.0) */
    CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *map, int data_type, uint32_t rank,
                                       void *global_address, const uint64_t *global_dim,
                                       const uint64_t *global_strides, const uint32_t *box_dim,
                                       const uint32_t *element_strides, int interleave,
                                       int swizzle, int l2_promotion, int oob_fill);
} tli_driver_api;

/* Loads libcuda.so.1 ($TILEC_LIBCUDA, when set and not empty, is the only
 * path tried). Errors: TL_ERR_NO_DRIVER, with a message naming the library,
 * dlerror() and what to do in msg (msg may be NULL). */
tl_status tli_load_driver(const tli_driver_api **out, char *msg, size_t msg_len);

/* ------------------------------------------------------------------------ */
/* NVRTC                                                                      */
/* ------------------------------------------------------------------------ */

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
    NVRTC_SUCCESS = 0,
    NVRTC_ERROR_OUT_OF_MEMORY = 1,
    NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
    NVRTC_ERROR_INVALID_INPUT = 3,
    NVRTC_ERROR_INVALID_PROGRAM = 4,
    NVRTC_ERROR_INVALID_OPTION = 5,
    NVRTC_ERROR_COMPILATION = 6,
    NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
    NVRTC_ERROR_INTERNAL_ERROR = 11
};

typedef struct tli_nvrtc_api {
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name,
                                      int num_headers, const char *const *headers,
                                      const char *const *include_names);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options,
                                       const char *const *options);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
    nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char *ptx);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
    const char *(*nvrtcGetErrorString)(nvrtcResult r);
    /* optional (NVRTC 11.2 and later): the sm_XY numbers it compiles for */
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int *count);
    nvrtcResult (*nvrtcGetSupportedArchs)(int *archs);
} tli_nvrtc_api;

/* Loads NVRTC. Search: $TILEC_NVRTC (when set and not empty, the only path
 * tried); else libnvrtc.so.13, .so.12, .so through the loader's path, then
 * the same names in $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64.
 * Errors: TL_ERR_NO_NVRTC (message in msg). */
tl_status tli_load_nvrtc(const tli_nvrtc_api **out, char *msg, size_t msg_len);

/* ------------------------------------------------------------------------ */
/* cuBLAS / cuBLASLt (benchmark baselines and GPU test references only)       */
/* ------------------------------------------------------------------------ */

typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct { uint64_t data[32]; } cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct { uint64_t data[8]; } cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
};
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1, /* deprecated in the headers; still accepted */
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3
};
enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };
enum { /* cublasComputeType_t */
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
};
enum { /* cudaDataType of library_types.h */
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14,
    CUDA_R_8F_E4M3 = 28,
    CUDA_R_8F_E5M2 = 29
};
enum { /* cublasLtMatmulDescAttributes_t */
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25, /* int8_t, FP8 only; default 0 */
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
};
enum { /* cublasLtEpilogue_t */
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_BIAS = 36
};
enum { /* cublasLtMatrixLayoutAttribute_t */
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,
    CUBLASLT_MATRIX_LAYOUT_LD = 4,
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,          /* int32_t */
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6  /* int64_t, elements */
};
enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 }; /* cublasLtOrder_t */
enum { /* cublasLtMatmulPreferenceAttributes_t */
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1
};

typedef struct tli_cublas_api {
    cublasStatus_t (*cublasCreate)(cublasHandle_t *h);   /* cublasCreate_v2 */
    cublasStatus_t (*cublasDestroy)(cublasHandle_t h);   /* cublasDestroy_v2 */
    cublasStatus_t (*cublasSetStream)(cublasHandle_t h, CUstream s); /* _v2 */
    cublasStatus_t (*cublasSetMathMode)(cublasHandle_t h, int mode);
    cublasStatus_t (*cublasGemmEx)(cublasHandle_t h, int transa, int transb, int m, int n,
                                   int k, const void *alpha, const void *a, int a_type,
                                   int lda, const void *b, int b_type, int ldb,
                                   const void *beta, void *c, int c_type, int ldc,
                                   int compute_type, int algo);
    const char *(*cublasGetStatusString)(cublasStatus_t st); /* may be NULL */
    /* batched forms (CUDA 11+: the compute type is a cublasComputeType_t);
     * may be NULL in a library without them */
    cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t h, int transa, int transb, int m, int n, int k,
                                                 const void *alpha, const void *a, int a_type, int lda,
                                                 long long stride_a, const void *b, int b_type, int ldb,
                                                 long long stride_b, const void *beta, void *c, int c_type,
                                                 int ldc, long long stride_c, int batch, int compute_type,
                                                 int algo);
    cublasStatus_t (*cublasGemmBatchedEx)(cublasHandle_t h, int transa, int transb, int m, int n, int k,
                                          const void *alpha, const void *const *a, int a_type, int lda,
                                          const void *const *b, int b_type, int ldb, const void *beta,
                                          void *const *c, int c_type, int ldc, int batch, int compute_type,
                                          int algo);

    cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *h);
    cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t h);
    cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *d, int compute_type,
                                               int scale_type);
    cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t d);
    cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t d, int attr,
                                                     const void *buf, size_t size);
    cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *l, int type,
                                                 uint64_t rows, uint64_t cols, int64_t ld);
    cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t l);
    /* for row-major layouts (CUBLASLT_MATRIX_LAYOUT_ORDER) */
    cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t l, int attr,
                                                       const void *buf, size_t size);
    cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *p);
    cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t p);
    cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t p,
                                                           int attr, const void *buf,
                                                           size_t size);
    cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(
        cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
        cublasLtMatmulPreference_t pref, int requested,
        cublasLtMatmulHeuristicResult_t *results, int *returned);
    cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                     const void *alpha, const void *a,
                                     cublasLtMatrixLayout_t a_desc, const void *b,
                                     cublasLtMatrixLayout_t b_desc, const void *beta,
                                     const void *c, cublasLtMatrixLayout_t c_desc, void *d,
                                     cublasLtMatrixLayout_t d_desc,
                                     const cublasLtMatmulAlgo_t *algo, void *workspace,
                                     size_t workspace_bytes, CUstream s);
} tli_cublas_api;

/* Loads libcublas and libcublasLt (names and directories as for NVRTC, with
 * the same soname version for both when it can). Errors: TL_ERR_NO_CUBLAS. */
tl_status tli_load_cublas(const tli_cublas_api **out, char *msg, size_t msg_len);

#endif
