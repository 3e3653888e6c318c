"""ctypes bindings of the part of include/tilec.h the PyTorch comparisons use.

Each Structure mirrors its C struct field for field, in order and type;
`python3 bench/torch_compare.py --check-abi` compares them with the layouts
the C compiler gives (bench/abi_layout.c). Tensors are passed as anything
with data_ptr(), stride() and dtype (torch tensors); nothing here imports
torch, so the ABI check runs where torch is absent.
"""
import ctypes
import os
from ctypes import POINTER, c_char, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint, c_uint64, c_void_p

# tl_status
TL_STATUS_NAMES = (
    "TL_OK", "TL_ERR_INVALID_ARG", "TL_ERR_DTYPE", "TL_ERR_SHAPE", "TL_ERR_SCOPE", "TL_ERR_UNSUPPORTED",
    "TL_ERR_OUT_OF_MEMORY", "TL_ERR_NO_DRIVER", "TL_ERR_NO_DEVICE", "TL_ERR_NO_NVRTC", "TL_ERR_NO_CUBLAS",
    "TL_ERR_COMPILE", "TL_ERR_CUDA", "TL_ERR_LAUNCH_ARGS", "TL_ERR_IO", "TL_ERR_INTERNAL",
)
TL_OK = 0

# tl_dtype
TL_F32, TL_F16, TL_BF16 = 1, 2, 3
TL_F8E4M3, TL_F8E5M2 = 8, 9
# tl_epilogue
TL_EPI_NONE, TL_EPI_RELU, TL_EPI_GELU_ERF, TL_EPI_GELU_TANH = 0, 1, 2, 3
TL_NO_DEVICE = -1

# Enumerators and macros checked against the header by --check-abi.
CONSTANTS = dict(
    {name: value for value, name in enumerate(TL_STATUS_NAMES)},
    TL_F32=TL_F32, TL_F16=TL_F16, TL_BF16=TL_BF16, TL_F8E4M3=TL_F8E4M3, TL_F8E5M2=TL_F8E5M2,
    TL_EPI_NONE=TL_EPI_NONE, TL_EPI_RELU=TL_EPI_RELU, TL_EPI_GELU_ERF=TL_EPI_GELU_ERF,
    TL_EPI_GELU_TANH=TL_EPI_GELU_TANH, TL_NO_DEVICE=TL_NO_DEVICE,
)

TL_LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class TlCtxOptions(ctypes.Structure):
    _fields_ = [("device", c_int), ("cu_context", c_void_p), ("target", c_char_p), ("cache_dir", c_char_p),
                ("disk_cache", c_int), ("log", TL_LOG_FN), ("log_user", c_void_p)]


class TlDeviceInfo(ctypes.Structure):
    _fields_ = [("name", c_char * 256), ("ordinal", c_int), ("cc_major", c_int), ("cc_minor", c_int),
                ("sm_count", c_int), ("global_mem_bytes", c_uint64), ("smem_per_block", c_int),
                ("smem_per_block_optin", c_int), ("smem_per_sm", c_int), ("regs_per_block", c_int),
                ("l2_bytes", c_int), ("max_threads_per_block", c_int), ("clock_khz", c_int),
                ("mem_clock_khz", c_int), ("mem_bus_width_bits", c_int), ("driver_version", c_int),
                ("nvrtc_major", c_int), ("nvrtc_minor", c_int), ("target", c_char * 16)]


class TlGemmSchedule(ctypes.Structure):
    _fields_ = [("block_m", c_int), ("block_n", c_int), ("block_k", c_int), ("stages", c_int),
                ("threads", c_int), ("swizzle", c_int), ("warp_policy", c_uint), ("pingpong", c_int),
                ("split_k", c_int), ("swap_ab", c_int),
                ("persistent", c_int), ("cluster_m", c_int), ("cluster_n", c_int), ("stream_k", c_int),
                ("gemv", c_int)]


class TlGemmDesc(ctypes.Structure):
    _fields_ = [("m", c_int64), ("n", c_int64), ("k", c_int64), ("in_dtype", c_int), ("out_dtype", c_int),
                ("trans_b", c_int), ("has_bias", c_int), ("epilogue", c_int), ("schedule", TlGemmSchedule)]


class TlGemmArgs(ctypes.Structure):
    _fields_ = [("a", c_uint64), ("b", c_uint64), ("bias", c_uint64), ("c", c_uint64), ("lda", c_int64),
                ("ldb", c_int64), ("ldc", c_int64), ("batch", c_int64), ("stride_a", c_int64),
                ("stride_b", c_int64), ("stride_c", c_int64), ("a_array", c_uint64), ("b_array", c_uint64),
                ("c_array", c_uint64), ("alpha", c_double), ("beta", c_double), ("scale_a", c_double),
                ("scale_b", c_double)]


class TlSoftmaxSchedule(ctypes.Structure):
    _fields_ = [("width", c_int), ("rows", c_int), ("threads", c_int), ("stages", c_int), ("cluster", c_int),
                ("loader", c_int)]


class TlSoftmaxDesc(ctypes.Structure):
    _fields_ = [("rows", c_int64), ("cols", c_int64), ("ld_in", c_int64), ("ld_out", c_int64),
                ("in_dtype", c_int), ("out_dtype", c_int), ("schedule", TlSoftmaxSchedule)]


class TlFlashAttnSchedule(ctypes.Structure):
    _fields_ = [("block_m", c_int), ("block_n", c_int), ("stages", c_int), ("threads", c_int),
                ("warp_specialize", c_int), ("pingpong", c_int), ("persistent", c_int), ("split_kv", c_int),
                ("split_tail", c_int)]


class TlFlashAttnDesc(ctypes.Structure):
    _fields_ = [("batch", c_int64), ("heads", c_int64), ("kv_heads", c_int64), ("seq_q", c_int64),
                ("seq_kv", c_int64), ("head_dim", c_int64), ("dtype", c_int), ("causal", c_int),
                ("scale", c_double), ("q_stride", c_int64 * 3), ("k_stride", c_int64 * 3),
                ("v_stride", c_int64 * 3), ("o_stride", c_int64 * 3), ("lse", c_int),
                ("schedule", TlFlashAttnSchedule)]


# Every struct bound here, by its C name: what --check-abi compares.
STRUCTS = {
    "tl_ctx_options": TlCtxOptions, "tl_device_info": TlDeviceInfo,
    "tl_gemm_schedule": TlGemmSchedule, "tl_gemm_desc": TlGemmDesc, "tl_gemm_args": TlGemmArgs,
    "tl_softmax_schedule": TlSoftmaxSchedule, "tl_softmax_desc": TlSoftmaxDesc,
    "tl_flash_attn_schedule": TlFlashAttnSchedule, "tl_flash_attn_desc": TlFlashAttnDesc,
}

_ctx_p = c_void_p
# name: (restype, argtypes); every function the comparisons call.
_FUNCTIONS = {
    "tl_version": (c_char_p, []),
    "tl_status_name": (c_char_p, [c_int]),
    "tl_ctx_default_options": (TlCtxOptions, []),
    "tl_ctx_create": (c_int, [POINTER(TlCtxOptions), POINTER(_ctx_p), c_char_p, c_size_t]),
    "tl_ctx_destroy": (None, [_ctx_p]),
    "tl_ctx_error": (c_char_p, [_ctx_p]),
    "tl_ctx_get_device_info": (c_int, [_ctx_p, POINTER(TlDeviceInfo)]),
    "tl_op_softmax": (c_int, [_ctx_p, POINTER(TlSoftmaxDesc), c_uint64, c_uint64, c_void_p]),
    "tl_op_softmax_schedule": (TlSoftmaxSchedule, [_ctx_p, POINTER(TlSoftmaxDesc)]),
    "tl_op_gemm": (c_int, [_ctx_p, POINTER(TlGemmDesc), c_uint64, c_uint64, c_uint64, c_uint64, c_void_p]),
    "tl_op_gemm_schedule": (TlGemmSchedule, [_ctx_p, POINTER(TlGemmDesc)]),
    "tl_gemm_default_args": (TlGemmArgs, []),
    "tl_op_gemm_ex": (c_int, [_ctx_p, POINTER(TlGemmDesc), POINTER(TlGemmArgs), c_void_p]),
    "tl_op_flash_attn": (c_int, [_ctx_p, POINTER(TlFlashAttnDesc), c_uint64, c_uint64, c_uint64, c_uint64,
                                 c_uint64, c_void_p]),
    "tl_op_flash_attn_schedule": (TlFlashAttnSchedule, [_ctx_p, POINTER(TlFlashAttnDesc)]),
}


def default_library_path():
    """$TILEC_SHARED_LIB, else lib/libtilec.so of this checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("TILEC_SHARED_LIB") or os.path.join(here, os.pardir, "lib", "libtilec.so")


def tl_dtype_of(tensor):
    """The tl_dtype of a torch tensor (f32, f16, bf16)."""
    names = {"torch.float32": TL_F32, "torch.float16": TL_F16, "torch.bfloat16": TL_BF16}
    try:
        return names[str(tensor.dtype)]
    except KeyError:
        raise ValueError("libtilec takes f32, f16 or bf16 tensors, not %s" % tensor.dtype) from None


class TilecError(RuntimeError):
    """A libtilec call returned a status other than TL_OK."""


class Tilec:
    """The loaded library and one context on a GPU."""

    def __init__(self, path, device=0):
        self.lib = ctypes.CDLL(path)
        self.path = path
        self.fn = {}  # the functions of _FUNCTIONS this build exports
        for name, (restype, argtypes) in _FUNCTIONS.items():
            fn = getattr(self.lib, name, None)
            if fn is not None:
                fn.restype, fn.argtypes = restype, argtypes
                self.fn[name] = fn
        self.ctx = self._create_context(device)

    def _call(self, name, *args):
        """Calls an op of the library on the context; raises TilecError
        when it fails or this build lacks it."""
        if name not in self.fn:
            raise TilecError("%s: not in this build of libtilec (%s)" % (name, self.path))
        self.check(self.fn[name](self.ctx, *args), name)

    def _create_context(self, device):
        opt = self.fn["tl_ctx_default_options"]()
        opt.device = device
        ctx, msg = _ctx_p(), ctypes.create_string_buffer(512)
        st = self.fn["tl_ctx_create"](ctypes.byref(opt), ctypes.byref(ctx), msg, len(msg))
        if st != TL_OK:
            raise TilecError("tl_ctx_create: %s: %s" % (self.status_name(st), msg.value.decode()))
        return ctx

    def close(self):
        if self.ctx:
            self.fn["tl_ctx_destroy"](self.ctx)
            self.ctx = None

    def has(self, name):
        return name in self.fn

    def status_name(self, st):
        return self.fn["tl_status_name"](st).decode()

    def check(self, st, what):
        if st != TL_OK:
            raise TilecError("%s: %s: %s" % (what, self.status_name(st), self.fn["tl_ctx_error"](self.ctx).decode()))

    def version(self):
        return self.fn["tl_version"]().decode()

    def device_info(self):
        info = TlDeviceInfo()
        self._call("tl_ctx_get_device_info", ctypes.byref(info))
        return info

    # --- the ops, on tensors; `stream` is a CUstream handle (an int) -------

    def softmax(self, desc, x, y, stream):
        self._call("tl_op_softmax", ctypes.byref(desc), x.data_ptr(), y.data_ptr(), stream)

    def gemm(self, desc, a, b, bias, c, stream):
        bias_ptr = bias.data_ptr() if bias is not None else 0
        self._call("tl_op_gemm", ctypes.byref(desc), a.data_ptr(), b.data_ptr(), bias_ptr, c.data_ptr(), stream)

    def gemm_ex(self, desc, args, stream):
        """tl_op_gemm_ex: desc a TlGemmDesc, args a TlGemmArgs (gemm_args)."""
        self._call("tl_op_gemm_ex", ctypes.byref(desc), ctypes.byref(args), stream)

    def flash_attn(self, desc, q, k, v, o, lse, stream):
        lse_ptr = lse.data_ptr() if lse is not None else 0
        self._call("tl_op_flash_attn", ctypes.byref(desc), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                   o.data_ptr(), lse_ptr, stream)

    def schedule_text(self, op, desc):
        """The schedule the library runs for desc ("softmax", "gemm",
        "flash_attn"), in a few characters; "" when this build lacks the op."""
        fn = self.fn.get("tl_op_%s_schedule" % op)
        if fn is None:
            return ""
        sched = fn(self.ctx, ctypes.byref(desc))
        return _SCHEDULE_FORMATS[op].format(**{f: getattr(sched, f) for f, _ in sched._fields_})


_SCHEDULE_FORMATS = {
    "softmax": "w={width} r={rows} t={threads} s={stages} c={cluster}",
    "gemm": "{block_m}x{block_n}x{block_k} s{stages} t{threads} sw{swizzle} pp{pingpong}",
    "flash_attn": "{block_m}x{block_n} s{stages} t{threads} ws{warp_specialize} pp{pingpong} ps{persistent} "
                  "kv{split_kv} tail{split_tail}",
}


# --- descriptors from tensors ----------------------------------------------

def softmax_desc(x, y):
    """Row softmax of x [rows, cols] into y, both with unit column stride."""
    rows, cols = x.shape
    return TlSoftmaxDesc(rows=rows, cols=cols, ld_in=x.stride(0), ld_out=y.stride(0),
                         in_dtype=tl_dtype_of(x), out_dtype=tl_dtype_of(y))


def gemm_desc(a, b, c, trans_b, bias=None, epilogue=TL_EPI_NONE):
    """C [M, N] = epilogue(A [M, K] B [+ bias]), B [K, N] or, with trans_b, [N, K]
    (or one matrix of a batch of them: [batch, M, K] and so on)."""
    m, k = a.shape[-2:]
    n = b.shape[-2] if trans_b else b.shape[-1]
    return TlGemmDesc(m=m, n=n, k=k, in_dtype=tl_dtype_of(a), out_dtype=tl_dtype_of(c), trans_b=int(trans_b),
                      has_bias=int(bias is not None), epilogue=epilogue)


def _bhs_strides(t):
    """Strides of batch, head and sequence of a [B, H, S, D] view with D contiguous."""
    if t.stride(3) != 1:
        raise ValueError("the head_dim stride must be 1, not %d" % t.stride(3))
    return (c_int64 * 3)(t.stride(0), t.stride(1), t.stride(2))


def flash_attn_desc(q, k, v, o, causal, lse=False, scale=0.0):
    """Attention of [B, H, S, D] views (any batch, head, sequence strides)."""
    batch, heads, seq_q, head_dim = q.shape
    return TlFlashAttnDesc(batch=batch, heads=heads, kv_heads=k.shape[1], seq_q=seq_q, seq_kv=k.shape[2],
                           head_dim=head_dim, dtype=tl_dtype_of(q), causal=int(causal), scale=scale,
                           q_stride=_bhs_strides(q), k_stride=_bhs_strides(k), v_stride=_bhs_strides(v),
                           o_stride=_bhs_strides(o), lse=int(lse))


def gemm_args(a, b, c, bias=None, alpha=1.0, beta=0.0):
    """tl_op_gemm_ex's operands for tensors of rank 2 (one GEMM) or 3 (a
    strided batch: the same batch in a, b and c, or 1 in a or b for one
    matrix every entry shares), each with a unit stride in its last
    dimension: row strides become lda, ldb, ldc, batch strides stride_a,
    stride_b, stride_c."""
    def layout(t, batch):
        if t.stride(-1) != 1:
            raise ValueError("gemm_args: the last dimension must be contiguous (stride 1), not %d" % t.stride(-1))
        ld = t.stride(-2)
        stride = t.stride(0) if t.dim() == 3 and t.shape[0] == batch and batch > 1 else 0
        return ld, stride
    batch = c.shape[0] if c.dim() == 3 else 1
    (lda, sa), (ldb, sb), (ldc, sc) = layout(a, batch), layout(b, batch), layout(c, batch)
    return TlGemmArgs(a=a.data_ptr(), b=b.data_ptr(), bias=bias.data_ptr() if bias is not None else 0,
                      c=c.data_ptr(), lda=lda, ldb=ldb, ldc=ldc, batch=batch, stride_a=sa, stride_b=sb,
                      stride_c=sc, alpha=alpha, beta=beta, scale_a=1.0, scale_b=1.0)
