"""kbstudy-triton candidate for DLRM-Bench problem 10 (DCN-v2 low-rank cross network, 3 layers, bf16).

Per layer two Triton GEMMs (bf16 operands, fp32 accumulation, grouped tile order for L2 reuse):
``u = x_l V^T`` and ``x_{l+1} = x_0 * (u W^T + b) + x_l`` with the bias, the multiply by x_0 and the residual add
fused into the second GEMM's epilogue, so the eager path's two elementwise passes over [batch, 3456] per layer vanish.

**Rounding as eager.** Eager PyTorch rounds to bf16 after each of its three steps (``addmm`` with the bias, then
``x0 * y``, then ``+ x``); the epilogue does the same three roundings (``y = bf16(acc + b)``,
``t = bf16(x0 * y)``, ``out = bf16(t + x_l)``) instead of one fp32 ``x0 * acc + x_l``. With one rounding the
result is closer to float64 but differs from eager's by up to a bf16 ulp at most elements, and three layers of that
exceeded KernelBench's bf16 tolerance (atol = rtol = 1e-2, under a few ulps of values near 8): KernelBench compares
against eager, kbstudy against float64, and this way both pass with the remaining differences coming only from the
GEMMs' summation order.

Why it approaches the floor (compute-bound: 174 GFLOP, 224 us at the measured bf16 rate): each GEMM is a
Hopper-friendly tiling picked by ``triton.autotune`` (keyed on M, N, K and the epilogue) among a few configurations
(128x256 for the first GEMM's 512 columns: one wave of 128 tiles; 128x128, 64x256 and 64x128 tiles, whose shared
memory lets 2-3 CTAs share an SM, so one CTA's memory-bound epilogue overlaps another's main loop, which matters for
the second GEMM whose K is only 512); one config under
``TRITON_INTERPRET=1``. Under the interpreter the operands are upcast to fp32 before ``tl.dot`` (the interpreter's
bf16 dot is wrong in Triton 3.9) and fp32 -> bf16 casts are rounded to nearest even by hand (the interpreter
truncates, GPUs round to nearest even); on a GPU the operands stay bf16 and the casts are native.

Measured on the H200: 443.8 us of cold device time, 2.02x the floor (``outputs/records/dlrm_bench/h200/final``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas), registers for the plain / the x0 * y + x epilogue, shared memory: 128x256 184 / 255
#: (spills), 144 KB; 128x128 (8 warps) 109 / 142, 96 KB; 64x256 104 / 144, 120 KB; 64x128 (4 warps) 115 / 145, 72 KB.
#: The two GEMM shapes of a layer are tuned separately (the key includes N, K and the epilogue).
_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=1)]


@triton.jit
def _round(x, out_ty: tl.constexpr, RNE: tl.constexpr):
    """``x.to(out_ty)``; with ``RNE`` (interpreter, bf16) rounded to nearest even by hand first: Triton 3.9's
    interpreter truncates fp32 -> bf16, while GPUs (and eager PyTorch) round to nearest even."""
    if RNE:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = bits.to(tl.float32, bitcast=True)
    return x.to(out_ty)


def _bench(kernel_call, quantiles):
    """Autotuning benchmark: ``triton.testing.do_bench`` with 5 ms of warm-up and 25 ms of timed calls (instead of
    25 / 100) per config, to keep the first call's tuning short."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


#: the autotuner's choice per shape key; the compiled kernel per (kernel, key, keyword arguments, specialisation)
#: (see :func:`_launch`)
_TUNED = {}
_COMPILED = {}
#: direct launches of compiled kernels (off under TRITON_INTERPRET=1, which compiles nothing, or once one has failed)
_DIRECT = [os.environ.get("TRITON_INTERPRET", "0") != "1"]


def _specialization(args):
    """What Triton compiles a launch for, per positional argument (``triton.runtime.jit``, ``specialize_impl``): a
    tensor's dtype and 16-byte alignment; an int's equality to 1, divisibility by 16 and range (int32, uint64 or
    int64); a float's type; any other value itself. Launches with equal specialisations run one compiled kernel."""
    spec = []
    for a in args:
        if isinstance(a, torch.Tensor):
            spec.append((a.dtype, a.data_ptr() % 16 == 0))
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            spec.append(a)
        elif isinstance(a, int):
            spec.append((a == 1, a % 16 == 0, -2**31 <= a < 2**31, a >= 2**63))
        else:
            spec.append(float)
    return tuple(spec)


def _launch(kernel, key, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` at the least host cost; ``kernel`` is a ``triton.jit`` function, or one
    wrapped in ``triton.autotune``; ``grid`` a tuple or a callable of the launch's meta-parameters; ``key`` names what
    the autotuner's choice depends on (shapes, dtypes, device).

    The first launch for ``key`` goes through the autotuner, which benchmarks its configs once and launches the best.
    The first launch with new keyword arguments or argument specialisation (:func:`_specialization`) goes through
    ``JITFunction.run``, which compiles or finds the kernel and returns it. Every later launch calls that compiled
    kernel's launcher directly (``CompiledKernel[grid](*args)``), skipping the JIT's argument binding and cache-key
    hashing and the autotuner's bookkeeping: each timed call pays the host time before its kernel starts (the device
    waits for it), which exceeds the device time of the launch-bound problems. Compiled kernels are kept per current
    device, as the JIT keeps them. If a direct launch raises (a Triton whose launcher takes other arguments), this and
    every later launch go through the JIT."""
    autotuned = hasattr(kernel, "configs")
    jit = kernel.fn if autotuned else kernel
    tuned = _TUNED.get(key) if autotuned else {}
    if tuned is None:
        kernel[grid](*args, **kwargs)
        best = getattr(kernel, "best_config", None)
        if best is not None:
            _TUNED[key] = best.all_kwargs()
        return
    ckey = None
    if _DIRECT[0]:
        try:
            # the JIT's own device (a compiled kernel is loaded into one device's context), then what it compiles for
            device = triton.runtime.driver.active.get_current_device()
            ckey = (device, id(jit), key, tuple(kwargs.items()), _specialization(args))
            compiled = _COMPILED.get(ckey)
            if compiled is not None:
                meta = {**kwargs, **tuned}
                g = grid(meta) if callable(grid) else grid
                g = (g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1)
                compiled[g](*args, *[meta[name] for name in jit.arg_names[len(args):]])
                return
        except (TypeError, KeyError, AttributeError, ValueError):
            _DIRECT[0] = False
    compiled = jit[grid](*args, **kwargs, **tuned)
    if _DIRECT[0] and ckey is not None and compiled is not None and hasattr(compiled, "function"):
        _COMPILED[ckey] = compiled


def _prune(configs, named_args, **kwargs):
    """The 128x256 tile spills with the x0 * y + x epilogue (255 registers on sm_90): tried for the plain GEMM only."""
    if kwargs.get("EPILOGUE") == 2:
        return [c for c in configs if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] < 128 * 256] or configs
    return configs


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K", "EPILOGUE"], do_bench=_bench,
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _linear_kernel(a_ptr, w_ptr, bias_ptr, x0_ptr, xl_ptr, c_ptr, M, N, K, stride_am, stride_wn, stride_cm,
                   HAS_BIAS: tl.constexpr, EPILOGUE: tl.constexpr, UPCAST: tl.constexpr, RNE: tl.constexpr,
                   GROUP_M: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[M, N] = epilogue(A[M, K] @ W[N, K]^T). EPILOGUE 0: (+bias); 2: x0 * bf(+bias) + xl with eager's roundings."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    mmask = offs_m < M
    nmask = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kmask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=mmask[:, None] & kmask[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=kmask[:, None] & nmask[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    out_ty = c_ptr.dtype.element_ty
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    cmask = mmask[:, None] & nmask[None, :]
    if EPILOGUE == 2:
        # eager: y = addmm(...) -> bf16; t = x0 * y -> bf16; out = t + x -> bf16
        y = _round(acc, out_ty, RNE).to(tl.float32)
        x0 = tl.load(x0_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], mask=cmask, other=0.0).to(tl.float32)
        t = _round(x0 * y, out_ty, RNE).to(tl.float32)
        xl = tl.load(xl_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], mask=cmask, other=0.0).to(tl.float32)
        acc = t + xl
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], _round(acc, out_ty, RNE), mask=cmask)


def linear(a, weight, bias=None, epilogue=0, x0=None, xl=None):
    """``epilogue(a @ weight.T + bias)`` for a [M, K] and weight [N, K] (nn.Linear layout), output dtype of ``a``.
    ``a``, ``weight``, ``x0``, ``xl`` must be contiguous (the caller makes them so once)."""
    m, k = a.shape
    n = weight.shape[0]
    c = torch.empty(m, n, device=a.device, dtype=a.dtype)
    key = (m, n, k, epilogue, bias is not None, a.dtype, a.device)
    _launch(_linear_kernel, key, lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),),
            a, weight, bias if bias is not None else c, x0 if x0 is not None else c, xl if xl is not None else c, c,
            m, n, k, a.stride(0), weight.stride(0), c.stride(0), HAS_BIAS=bias is not None, EPILOGUE=epilogue,
            UPCAST=_INTERPRET, RNE=_INTERPRET and a.dtype == torch.bfloat16, GROUP_M=8)
    return c


class ModelNew(nn.Module):
    """Same parameters, in the same order, as the problem's ``Model``; forward is 2 Triton GEMMs per layer."""

    def __init__(self, in_features: int, low_rank: int, num_layers: int):
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(in_features, low_rank, bias=False, dtype=torch.bfloat16) for _ in range(num_layers))
        self.W = nn.ModuleList(nn.Linear(low_rank, in_features, bias=True, dtype=torch.bfloat16) for _ in range(num_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x0 = x.contiguous()
        x = x0
        for v, w in zip(self.V, self.W):
            vw, ww, wb = v.weight, w.weight, w.bias
            if vw.dtype != x.dtype or ww.dtype != x.dtype or not (vw.is_contiguous() and ww.is_contiguous()):
                vw, ww, wb = vw.contiguous().to(x.dtype), ww.contiguous().to(x.dtype), wb.to(x.dtype)
            u = linear(x, vw)
            x = linear(u, ww, wb, epilogue=2, x0=x0, xl=x)
        return x
