"""kbstudy-triton candidate for DLRM-Bench problem 3 (26-table batched EmbeddingBag, concatenated output).

One launch for all 26 tables (FBGEMM TBE-style), **bag-parallel**: a program owns ``BLOCK_B`` bags of one table and
walks that table's ``hot`` lookups ``UNROLL`` (1, 2 or 4) at a time. The step's indices sit in named registers,
loaded one step ahead: each step first issues the *next* step's ``UNROLL`` index loads, then its own ``UNROLL``
[BLOCK_B, D] row gathers, all independent (sm_90 register counts show all of them in flight), and only then adds
them to the fp32 accumulator; the [BLOCK_B, D] slice of the concatenated output is written once (no ``cat`` pass).
The tables stay the problem's 26 ``nn.EmbeddingBag`` parameters, addressed from the first table's pointer plus each
table's element offset (no copy); the offsets are multiples of 16 bytes (checked), which the kernel tells Triton so
the row gathers stay 16-byte vector loads. Programs are ordered by descending hotness (longest-processing-time
first), so the 100-hot table's long programs start first instead of forming the tail.

Why it approaches the floor: the floor is random 512-byte row reads, so the rate is bytes in flight over DRAM
latency. A loop that loads each lookup's index and then gathers its row pays one DRAM round trip after the other (70
registers on sm_90: at most about two of a step's gathers in flight). Here a step never waits on an index load,
and every configuration keeps 256-320 rows (128-160 KB) of gathers in flight per SM (register counts with the
configs below); only the compulsory bytes move (indices once, rows, output once; repeated rows of the small tables
hit L2). ``triton.autotune`` picks BLOCK_B / UNROLL / warps on the GPU (one config under ``TRITON_INTERPRET=1``).
The per-table arrays are cached for the current parameter storage.

Measured on the H200: 212.9 us of cold device time, 1.10x the floor (193.9 us;
``outputs/records/dlrm_bench/h200/final``; 209.9 us in ``outputs/records/dlrm_bench/h200/repeat``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers, no spills, all UNROLL row gathers of a step in flight at once:
#: [32 bags x 4, 8 warps] 88 -> 2 programs per SM (256 rows = 128 KB in flight), [16 x 4, 4] 96 -> 5 (320 rows),
#: [64 x 4, 16] 92 -> 1 (256), [32 x 4, 16] 54 -> 2 (256), [16 x 4, 8] 54 -> 4 (256), [32 x 2, 4] 128 -> 4 (256)
_CONFIGS = [
    triton.Config({"BLOCK_B": 32, "UNROLL": 4}, num_warps=8),
    triton.Config({"BLOCK_B": 16, "UNROLL": 4}, num_warps=4),
    triton.Config({"BLOCK_B": 64, "UNROLL": 4}, num_warps=16),
    triton.Config({"BLOCK_B": 32, "UNROLL": 4}, num_warps=16),
    triton.Config({"BLOCK_B": 16, "UNROLL": 4}, num_warps=8),
    triton.Config({"BLOCK_B": 32, "UNROLL": 2}, num_warps=4),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_B": 16, "UNROLL": 4}, num_warps=4)]


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


@triton.autotune(configs=_CONFIGS, key=["B", "D", "num_tables", "total_cols"], do_bench=_bench)
@triton.jit
def _tbe_kernel(idx_ptr, w0_ptr, woff_ptr, hot_ptr, col_ptr, order_ptr, out_ptr, B, total_cols, num_tables, D,
                BLOCK_D: tl.constexpr, ALIGNED: tl.constexpr, BLOCK_B: tl.constexpr, UNROLL: tl.constexpr):
    pid = tl.program_id(0)
    nblk = tl.cdiv(B, BLOCK_B)
    t = tl.load(order_ptr + pid // nblk)  # tables in descending hotness: the long programs first
    blk = pid % nblk
    hot = tl.load(hot_ptr + t)
    col = tl.load(col_ptr + t)
    woff = tl.load(woff_ptr + t)
    if ALIGNED:
        woff = tl.multiple_of(woff, 4)  # 16-byte aligned table starts: keeps the row gathers 16-byte vectors
    b = (blk * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    bmask = b < B
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    idx_row = idx_ptr + b * total_cols + col
    w_row = w0_ptr + woff + d[None, :]
    acc = tl.zeros([BLOCK_B, BLOCK_D], dtype=tl.float32)
    zero_b = tl.zeros([BLOCK_B], dtype=tl.int32)  # (the interpreter mis-types scalar-bool & vector-bool masks)
    # UNROLL (1, 2 or 4) lookups per bag and step, in named registers; each step loads the *next* step's indices
    # before it gathers its own rows, so a step's UNROLL x BLOCK_B row gathers never wait on an index load
    r0 = tl.load(idx_row, mask=bmask & (zero_b < hot), other=0)
    if UNROLL >= 2:
        r1 = tl.load(idx_row + 1, mask=bmask & ((zero_b + 1) < hot), other=0)
    if UNROLL >= 4:
        r2 = tl.load(idx_row + 2, mask=bmask & ((zero_b + 2) < hot), other=0)
        r3 = tl.load(idx_row + 3, mask=bmask & ((zero_b + 3) < hot), other=0)
    for l0 in range(0, hot, UNROLL):
        nx = l0 + UNROLL
        q0 = tl.load(idx_row + nx, mask=bmask & ((zero_b + nx) < hot), other=0)
        if UNROLL >= 2:
            q1 = tl.load(idx_row + (nx + 1), mask=bmask & ((zero_b + (nx + 1)) < hot), other=0)
        if UNROLL >= 4:
            q2 = tl.load(idx_row + (nx + 2), mask=bmask & ((zero_b + (nx + 2)) < hot), other=0)
            q3 = tl.load(idx_row + (nx + 3), mask=bmask & ((zero_b + (nx + 3)) < hot), other=0)
        m0 = bmask & ((zero_b + l0) < hot)
        g = tl.load(w_row + r0[:, None] * D, mask=m0[:, None] & dmask[None, :], other=0.0).to(tl.float32)
        if UNROLL >= 2:
            m1 = bmask & ((zero_b + (l0 + 1)) < hot)
            g1 = tl.load(w_row + r1[:, None] * D, mask=m1[:, None] & dmask[None, :], other=0.0).to(tl.float32)
        if UNROLL >= 4:
            m2 = bmask & ((zero_b + (l0 + 2)) < hot)
            m3 = bmask & ((zero_b + (l0 + 3)) < hot)
            g2 = tl.load(w_row + r2[:, None] * D, mask=m2[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            g3 = tl.load(w_row + r3[:, None] * D, mask=m3[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            g += g2 + g3
            r2 = q2
            r3 = q3
        if UNROLL >= 2:
            g += g1
            r1 = q1
        acc += g
        r0 = q0
    out = out_ptr + b[:, None] * (num_tables * D) + t * D + d[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=bmask[:, None] & dmask[None, :])

class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model`` (26 ``nn.EmbeddingBag``); forward is one Triton launch."""

    def __init__(self, table_rows, multi_hot, embedding_dim: int):
        super().__init__()
        self.multi_hot = list(multi_hot)
        self.bags = nn.ModuleList(nn.EmbeddingBag(int(n), embedding_dim, mode="sum") for n in table_rows)
        self._meta_key = None
        self._meta = None

    def _tables(self):
        """The 26 tables' current weight parameters. Read from the modules' parameter dicts: ``bag.weight`` goes
        through ``nn.Module.__getattr__``, and 26 of those took ~15 us of host time per call (CPU, measured with
        ``timeit``), which a timed call pays before its kernel starts."""
        return [bag._parameters["weight"] for bag in self.bags._modules.values()]

    def _table_meta(self, device, weights=None):
        """(woff, hot, col, order, aligned, dtype) for the current parameter storage: each table's element offset from
        table 0, hotness, first index column, the tables in descending hotness, whether every offset is a multiple
        of 16 bytes, and the common dtype. Raises ``ValueError`` for mixed dtypes or a non-contiguous table."""
        weights = self._tables() if weights is None else weights
        key = tuple(w.data_ptr() for w in weights) + (str(device),)
        if key != self._meta_key:
            dtypes = {w.dtype for w in weights}
            if len(dtypes) != 1 or any(not w.is_contiguous() for w in weights):
                raise ValueError("all 26 tables must share one dtype and be contiguous")
            elem = weights[0].element_size()
            base = weights[0].data_ptr()
            woff = [(w.data_ptr() - base) // elem for w in weights]
            aligned = all((w.data_ptr() - base) % 16 == 0 for w in weights) and base % 16 == 0
            cols = [0]
            for h in self.multi_hot[:-1]:
                cols.append(cols[-1] + h)
            order = sorted(range(len(self.multi_hot)), key=lambda t: -self.multi_hot[t])
            self._meta = (torch.tensor(woff, dtype=torch.int64, device=device),
                          torch.tensor(self.multi_hot, dtype=torch.int32, device=device),
                          torch.tensor(cols, dtype=torch.int32, device=device),
                          torch.tensor(order, dtype=torch.int32, device=device), aligned, weights[0].dtype)
            self._meta_key = key
        return self._meta

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        weights = self._tables()
        w0 = weights[0]
        woff, hot, cols, order, aligned, dtype = self._table_meta(indices.device, weights)
        indices = indices.contiguous()
        batch, total_cols = indices.shape
        dim = w0.shape[1]
        num_tables = len(self.bags)
        out = torch.empty(batch, num_tables * dim, device=w0.device, dtype=dtype)
        key = (batch, total_cols, num_tables, dim, aligned, indices.dtype, dtype, w0.device)
        _launch(_tbe_kernel, key, lambda meta: (num_tables * triton.cdiv(batch, meta["BLOCK_B"]),),
                indices, w0, woff, hot, cols, order, out, batch, total_cols, num_tables, dim,
                BLOCK_D=triton.next_power_of_2(dim), ALIGNED=aligned)
        return out
