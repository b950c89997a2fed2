"""kbstudy-triton candidate for DLRM-Bench problem 4 (EmbeddingBag sum backward to a dense weight gradient).

The dense gradient (num_embeddings x dim, 2 GB at full size) is written exactly once, with no sort, no float atomics
and no zero-fill pass over it:

1. ``last`` (int32 per table row, 16 MB) is zero-filled: the only non-Triton work.
2. Triton ``_link_kernel``, one pass over the (int64, unconverted) lookups: lookup ``j`` of row ``r`` swaps
   ``j + 1`` into ``last[r]`` (one int32 ``atomic_xchg``, acq_rel) and links itself after the lookup it displaced
   (``next[prev] = j + 1``, ``next[j] = 0`` published before the swap), so each touched row's lookups form one list
   that starts at the lookup that found ``last[r] == 0`` (``first[j] = 1``). Which lookup comes first is the GPU's
   order, so the fp32 summation order of a repeated row may differ from eager (within the verifiers' relative-L2
   thresholds: a row has 1.1 lookups on average).
3. Triton ``_dense_grad_kernel``, one launch with two kinds of programs:

   * *touched rows*: a program takes ``BLOCK_P`` lookups; each one that is its row's first is one touched row, whose
     gradient is its bag's ``grad_output`` row plus those of the rest of its list (0.1 more lookups on average, in a
     loop that ends when no lane's list continues; grad_output is 4 MB and stays in L2), stored as one 512-byte row;
   * *untouched rows*: a program takes ``BLOCK_R`` consecutive rows, reads their ``last`` words and stores zeros to
     the rows not looked up (82 % of them).

   Every row is written by exactly one program; the zero stores need one small load and no gather. The two kinds
   alternate in the grid (while both last), so the latency-bound touched rows run beside the bandwidth-bound zero
   stores rather than before them.

Why it should approach the floor (2 GB of compulsory writes, 487 us): the former version ran a 4 MB flag fill, an
int64 -> int32 conversion, a flag kernel and ``torch.sort`` (819k keys with a permutation: several CUB launches and
their passes) before the dense kernel could start, 0.69 ms per call back to back against 0.49 ms of writes. The sort
is replaced by one pass of 819k independent int32 exchanges on a 16 MB array that stays in L2, and the dense
kernel's touched rows find their lookups by position (``j // bag_size``) instead of through a permutation; the call is
one memset and two Triton launches. ``triton.autotune`` picks the block sizes and warps on the GPU (one config under
``TRITON_INTERPRET=1``); the dense kernel only reads its inputs, so its tuning runs need no state restored.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers, no spills: [16 lookups / 64 rows, 4 warps] 56, [16 / 128, 4] 56,
#: [32 / 128, 8] 48, [32 / 256, 8] 54, [64 / 256, 16] 64 (8 bytes of stack); the zero stores are 16-byte vectors
_CONFIGS = [
    triton.Config({"BLOCK_P": 16, "BLOCK_R": 64}, num_warps=4),
    triton.Config({"BLOCK_P": 16, "BLOCK_R": 128}, num_warps=4),
    triton.Config({"BLOCK_P": 32, "BLOCK_R": 128}, num_warps=8),
    triton.Config({"BLOCK_P": 32, "BLOCK_R": 256}, num_warps=8),
    triton.Config({"BLOCK_P": 64, "BLOCK_R": 256}, num_warps=16),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_P": 16, "BLOCK_R": 64}, num_warps=4)]


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
def _link_kernel(idx_ptr, last_ptr, next_ptr, first_ptr, n, BLOCK: tl.constexpr):
    """Per lookup j of row r: chain j after the previous lookup of r (``last[r]``, swapped atomically), so every
    touched row's lookups form one forward list from its first lookup (``first[j]`` = 1) through ``next``."""
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(idx_ptr + j, mask=m, other=0)
    # the list's end mark, published before j becomes visible to a later lookup of r (the exchange is acq_rel)
    tl.store(next_ptr + j, tl.zeros([BLOCK], dtype=tl.int32), mask=m)
    prev = tl.atomic_xchg(last_ptr + r, (j + 1).to(tl.int32), mask=m, sem="acq_rel")
    tl.store(next_ptr + (prev - 1).to(tl.int64), (j + 1).to(tl.int32), mask=m & (prev != 0))
    tl.store(first_ptr + j, (prev == 0).to(tl.int8), mask=m)


@triton.autotune(configs=_CONFIGS, key=["N", "D", "BAG"], do_bench=_bench)
@triton.jit
def _dense_grad_kernel(idx_ptr, first_ptr, next_ptr, grad_ptr, last_ptr, out_ptr, n, N, D,
                       BAG: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    # the two kinds of programs alternate (while both last), so the latency-bound touched rows run beside the
    # bandwidth-bound zero stores instead of before them
    n_touch = tl.cdiv(n, BLOCK_P)
    n_zero = tl.cdiv(N, BLOCK_R)
    both = tl.minimum(n_touch, n_zero)
    if pid < 2 * both:
        touched = (pid % 2) == 0
        idx = pid // 2
    else:
        touched = n_touch > n_zero
        idx = pid - both
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    if touched:
        # touched rows: one per first lookup of a row; its list gives the row's other lookups (0.1 on average)
        j = idx.to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
        valid = j < n
        head = tl.load(first_ptr + j, mask=valid, other=0) != 0
        row = tl.load(idx_ptr + j, mask=head, other=0)
        nxt = tl.load(next_ptr + j, mask=head, other=0)
        hmask = head[:, None] & dmask[None, :]
        acc = tl.load(grad_ptr + (j // BAG)[:, None] * D + d[None, :], mask=hmask, other=0.0).to(tl.float32)
        cont = nxt != 0
        while tl.sum(cont.to(tl.int32), axis=0) > 0:
            k = nxt.to(tl.int64) - 1
            acc += tl.load(grad_ptr + (k // BAG)[:, None] * D + d[None, :], mask=cont[:, None] & dmask[None, :],
                           other=0.0).to(tl.float32)
            nxt = tl.load(next_ptr + k, mask=cont, other=0)
            cont = nxt != 0
        tl.store(out_ptr + row[:, None] * D + d[None, :], acc.to(out_ptr.dtype.element_ty), mask=hmask)
    else:
        # untouched rows: zeros
        r = idx.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
        rmask = r < N
        last = tl.load(last_ptr + r, mask=rmask, other=1)
        zero = rmask & (last == 0)
        tl.store(out_ptr + r[:, None] * D + d[None, :], tl.zeros([BLOCK_R, BLOCK_D], dtype=out_ptr.dtype.element_ty),
                 mask=zero[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    """No parameters, like the problem's ``Model``; forward is a 16 MB zero fill and two Triton launches."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings = num_embeddings

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        n_rows = self.num_embeddings
        dim = grad_output.shape[1]
        n = indices.numel()
        if n_rows >= 2**31 or n >= 2**31 - 1:
            raise ValueError("this kernel indexes rows and lookups with int32 (< 2**31)")
        dev = grad_output.device
        out = torch.empty(n_rows, dim, device=dev, dtype=grad_output.dtype)
        if n_rows == 0:
            return out
        last = torch.zeros(n_rows, dtype=torch.int32, device=dev)
        nxt = torch.empty(max(n, 1), dtype=torch.int32, device=dev)
        first = torch.empty(max(n, 1), dtype=torch.int8, device=dev)
        flat = indices.reshape(-1).contiguous()
        if n:
            block = 1024
            _launch(_link_kernel, None, (triton.cdiv(n, block),), flat, last, nxt, first, n, BLOCK=block,
                    num_warps=4)
        _launch(_dense_grad_kernel, (n_rows, dim, bag, grad_output.dtype, flat.dtype, dev),
                lambda meta: (triton.cdiv(n, meta["BLOCK_P"]) + triton.cdiv(n_rows, meta["BLOCK_R"]),),
                flat, first, nxt, grad_output.contiguous(), last, out, n, n_rows, dim, BAG=bag,
                BLOCK_D=triton.next_power_of_2(dim))
        return out
