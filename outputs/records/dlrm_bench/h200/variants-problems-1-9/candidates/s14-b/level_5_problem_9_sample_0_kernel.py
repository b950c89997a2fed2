"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction), variant s14-b (the shipped
kernel plus a whole-group L2 prefetch).

The shipped session-13 kernel unchanged in its arithmetic and pipeline: a persistent grid (``PPS`` programs per SM)
walks groups of ``S`` consecutive samples, one warp per sample, an ``[S, 32, D]`` block read ``BLOCK_K`` = 32 columns
at a time in one flattened loop over (group, chunk) that Triton pipelines with 16-byte ``cp.async`` (``num_stages`` -
1 chunks ahead, across group boundaries); each chunk a batched ``tl.dot`` pair of the 2-pass TF32 split (``H`` = T
with the low 13 mantissa bits cleared, ``L = T - H``, ``Z = H H^T + C + C^T``, ``C = H L^T``; emulated max error
3.7e-5 against float64); the strict lower triangle stored in place at a group's last chunk.

What it adds: at chunk ``PFK`` of each group, one thread issues ``cp.async.bulk.prefetch.L2`` (sm_90 TMA: no
destination, no register, nothing to wait for) for the program's NEXT group: one bulk request for its ``S`` samples'
sparse rows (``S`` x 13,312 contiguous bytes) and one for their dense rows (``S`` x 512). The shipped loop asks the
memory for 128-byte column chunks of every 512-byte row, the four chunks of a row ~2.5 us apart (one chunk
iteration each): random 128-byte reads at 512-byte stride as the DRAM sees them, each with a full HBM round trip to
hide. With the prefetch the DRAM streams each group as one contiguous 53 KB range (as a copy does), and the chunk
copies find their lines in the L2 (or in flight there): shorter waits at the top of each iteration for the same
2 chunks ahead per program. Placement: in Triton 3.6's SASS the prefetch sits at the end of the loop body and the
copy of chunk ``kc + num_stages - 1`` in its middle, so the next group's prefetch comes half a chunk iteration
(~1.2 us) before its first chunk's copy with ``PFK`` 1 at 3 stages or ``PFK`` 0 at 4 stages, one and a half with
``PFK`` 0 at 3 stages. L2 held by prefetched, not yet copied lines: ~0.6-0.8 of a group per program, 528 x 0.6-0.8 x
55 KB = 17-23 MB of the 50 MB (copied lines are not needed again and age out first).
Extra work: ~40 instructions per group and 2 TMA requests; registers and shared memory as the shipped configs (the
prefetch pushes the 2-warp config's spill from 16 to 96 bytes at cap 128, so it runs 6 per SM at cap 168).
``triton.autotune`` chooses among prefetching configs and the shipped kernel's two likeliest configs without it
(``PFK`` = -1); under ``TRITON_INTERPRET=1`` one config and no prefetch (no inline assembly there).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_K 32, Triton 3.6 ptxas (registers, stack bytes, shared memory -> programs per SM): S 4 / 4 warps,
#: 3 stages, cap 128: 128, 24, 48 KB -> 4 (as shipped); 4 stages, cap 168: 168, 8, 64 KB -> 3; S 2 / 2 warps,
#: 3 stages, cap 168: 168, 0, 24 KB -> 6; PFK 0 at 3 stages: 128, 16, 48 KB -> 4. PFK -1: no prefetch (the shipped
#: kernel's first two configs, 128, 24, 48 KB -> 4 and 168, 0, 64 KB -> 3).
_CONFIGS = [
    triton.Config({"S": 4, "PPS": 4, "PFK": 1}, num_warps=4, num_stages=3, maxnreg=128),
    triton.Config({"S": 4, "PPS": 3, "PFK": 0}, num_warps=4, num_stages=4, maxnreg=168),
    triton.Config({"S": 2, "PPS": 6, "PFK": 1}, num_warps=2, num_stages=3, maxnreg=168),
    triton.Config({"S": 4, "PPS": 4, "PFK": 0}, num_warps=4, num_stages=3, maxnreg=128),
    triton.Config({"S": 4, "PPS": 4, "PFK": -1}, num_warps=4, num_stages=3, maxnreg=128),
    triton.Config({"S": 4, "PPS": 3, "PFK": -1}, num_warps=4, num_stages=4, maxnreg=168),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"S": 2, "PPS": 2, "PFK": -1}, num_warps=2, num_stages=1)]


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


@triton.jit
def _prefetch_l2(ptr, nbytes):
    """One thread of the program asks the TMA unit to bring ``nbytes`` (a multiple of 16) from ``ptr`` (16-byte
    aligned) into the L2: ``cp.async.bulk.prefetch.L2`` (sm_90), a hint with no destination, no register and no
    completion to wait for."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.autotune(configs=_CONFIGS, key=["B", "D", "NS", "PRECISION", "PREFETCH"], do_bench=_bench)
@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, B, D, NS, OUT_W, DOFF,
                            BLOCK_F: tl.constexpr, BLOCK_K: tl.constexpr, NCHUNK: tl.constexpr,
                            PRECISION: tl.constexpr, PREFETCH: tl.constexpr, S: tl.constexpr, PPS: tl.constexpr,
                            PFK: tl.constexpr):
    # PPS (programs per SM) only sizes the grid; it is a parameter so that the autotuner can vary it.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    my_groups = tl.cdiv(tl.cdiv(B, S) - pid, nprog)  # groups pid, pid + nprog, ... of S samples
    F = NS + 1
    i = tl.arange(0, BLOCK_F)
    j = tl.arange(0, BLOCK_F)
    w = tl.arange(0, S)
    kk = tl.arange(0, BLOCK_K)
    pos = (i * (i - 1)) // 2
    tri = (i[:, None] > j[None, :]) & (i < F)[:, None]
    # Element offset from sparse_ptr of row i of sample s: sparse row i - 1, or for i == 0 the dense row (DOFF =
    # dense - sparse, in elements). Written with a 0/1 factor, not tl.where: both Triton 3.6 and 3.9 then prove the
    # 16-byte alignment (D and DOFF divisible by 16) and issue 16-byte cp.async; a select loses it in one or the other.
    is0 = (i == 0).to(tl.int64)
    s0 = (pid * S + w).to(tl.int64)
    goff = (s0[:, None] * NS + i[None, :] - 1) * D + is0[None, :] * (DOFF + s0[:, None] * (D - NS * D) + D)
    gstep = (nprog * S).to(tl.int64) * D * (NS + is0 * (1 - NS))  # moves every row on by nprog * S samples
    z = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)  # H H^T
    c = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)  # H L^T
    # one flattened loop over (group, chunk): the pipeliner prefetches across group boundaries
    for it in range(0, my_groups * NCHUNK):
        m = it // NCHUNK
        kc = it - m * NCHUNK
        if PREFETCH and PFK >= 0:
            if kc == (PFK if PFK < NCHUNK else NCHUNK - 1):
                # this program's next group into the L2, ahead of its first chunk's cp.async: its S samples' sparse
                # rows (one contiguous range) and dense rows (another), one bulk request each
                gn = pid + (m + 1) * nprog
                if gn * S < B:
                    n_s = tl.minimum(B - gn * S, S)
                    _prefetch_l2(sparse_ptr + gn.to(tl.int64) * (S * NS * D), n_s * (NS * D * 4))
                    _prefetch_l2(dense_ptr + gn.to(tl.int64) * (S * D), n_s * (D * 4))
        s = (pid + m * nprog) * S + w
        smask = s < B
        k = kc * BLOCK_K + kk
        kmask = k < D
        t = tl.load(sparse_ptr + goff[:, :, None] + k[None, None, :],
                    mask=(smask[:, None] & (i < F)[None, :])[:, :, None] & kmask[None, None, :], other=0.0)
        s64 = s.to(tl.int64)
        out_row = out_ptr + s64 * OUT_W
        dmask = smask[:, None] & kmask[None, :]
        dense = tl.load(dense_ptr + s64[:, None] * D + k[None, :], mask=dmask)
        tl.store(out_row[:, None] + k[None, :], dense, mask=dmask)
        # H = T with the low 13 mantissa bits cleared (exact in TF32), L = T - H (exact, |L| < 2^-10 |T|)
        hi = (t.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
        lo = t - hi
        z = tl.dot(hi, tl.permute(hi, (0, 2, 1)), z, input_precision=PRECISION)
        c = tl.dot(hi, tl.permute(lo, (0, 2, 1)), c, input_precision=PRECISION)
        if kc == NCHUNK - 1:
            r = z + c + tl.permute(c, (0, 2, 1))
            tl.store(out_row[:, None, None] + D + (pos[:, None] + j[None, :])[None, :, :], r,
                     mask=smask[:, None, None] & tri[None, :, :])
            z = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)
            c = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)
        goff += (kc == NCHUNK - 1).to(tl.int64) * gstep[None, :]


_PRECISIONS = ["tf32", "ieee"]
#: SMs per device index (the persistent grid's size)
_SMS = {}


def _num_sms(device):
    if device.type != "cuda":
        return 2
    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = _SMS.get(idx)
    if n is None:
        n = _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return n


#: per device index: whether it has ``cp.async.bulk.prefetch.L2`` (sm_90 and later; never under the interpreter)
_BULK = {}


def _bulk_prefetch(device):
    if _INTERPRET or device.type != "cuda":
        return False
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ok = _BULK.get(idx)
    if ok is None:
        ok = _BULK[idx] = torch.cuda.get_device_capability(idx)[0] >= 9
    return ok


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is one Triton launch."""

    def __init__(self, num_sparse_features: int):
        super().__init__()
        self.num_sparse_features = num_sparse_features

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        batch, dim = dense.shape
        ns = self.num_sparse_features
        f = ns + 1
        out_w = dim + f * (f - 1) // 2
        out = torch.empty(batch, out_w, device=dense.device, dtype=dense.dtype)
        dense, sparse = dense.contiguous(), sparse.contiguous()
        block_f = max(16, triton.next_power_of_2(f))
        block_k = min(32, max(16, triton.next_power_of_2(dim)))
        doff = (dense.data_ptr() - sparse.data_ptr()) // dense.element_size()  # dense row 0 = sparse_ptr + doff
        sms = _num_sms(dense.device)
        # the bulk L2 prefetch (sm_90 and later) needs 16-byte aligned sample starts in both tensors
        prefetch = (_bulk_prefetch(dense.device) and dim % 4 == 0 and dense.data_ptr() % 16 == 0
                    and sparse.data_ptr() % 16 == 0)

        def grid(meta):
            return (max(1, min(triton.cdiv(batch, meta["S"]), meta["PPS"] * sms)),)

        while True:
            try:
                precision = _PRECISIONS[0]
                _launch(_dot_interaction_kernel, (batch, dim, ns, precision, prefetch, dense.dtype, dense.device),
                        grid, dense, sparse, out, batch, dim, ns, out_w, doff, BLOCK_F=block_f, BLOCK_K=block_k,
                        NCHUNK=triton.cdiv(dim, block_k), PRECISION=precision, PREFETCH=prefetch)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower TF32 dots here: fall back to IEEE fp32 FMA
