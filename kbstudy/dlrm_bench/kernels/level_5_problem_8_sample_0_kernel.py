"""kbstudy-triton candidate for DLRM-Bench problem 8 (jagged values + lengths to padded dense).

**One launch, one balanced run of samples per program.** The grid is ``PER_SM`` programs per SM (fewer if there are
fewer samples), and program ``p`` owns the contiguous samples ``[p B / P, (p + 1) B / P)``: every program writes the
same number of output rows (within one sample), so there is no second partial wave. A program finds where its first
sample's values start by summing the lengths before it (``BLOCK_S`` at a time, from L2, once per program), then walks
its samples' output blocks [max_length, D] in [``BLOCK_L``, D] tiles, software-pipelined: the next tile's values are
loaded *before* the current tile is stored, so every program always has a tile of loads in flight while its stores
drain. Rows below a sample's length come from the values, rows past it are zeros (masked loads issue no memory
traffic, ``other=0``); every output row is stored once with contiguous 16-byte vector stores.

Why it should approach the floor: the call is pure traffic (read T x D values, write B x Lmax x D, half of it zeros).
The former version (``B / GROUP`` = 512-1024 short programs, 1.5 waves, each program's prefix sum and then
load-wait-store per tile) reached ~3.7 TB/s back to back. Here the stream never waits on a load between two stores
(two tiles per program alive: 32-64 KB of loads in flight per SM plus the stores), the grid is one wave by
construction (``PER_SM`` from the sm_90 register counts below), and the offset prefix runs once per program.
``triton.autotune`` picks BLOCK_L / warps / programs per SM on the GPU (one config under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers, no spills: [32 rows, 4 warps] 96 -> 5 programs per SM fit, [32, 8] 64 -> 4,
#: [64, 4] 164 -> 3, [64, 8] 96 -> 2, [128, 16] 102 -> 1; all 16-byte vector loads and stores. PER_SM stays at or
#: below what fits, so the grid is one wave.
_CONFIGS = [
    triton.Config({"BLOCK_L": 32, "PER_SM": 4}, num_warps=4),
    triton.Config({"BLOCK_L": 32, "PER_SM": 4}, num_warps=8),
    triton.Config({"BLOCK_L": 64, "PER_SM": 3}, num_warps=4),
    triton.Config({"BLOCK_L": 64, "PER_SM": 2}, num_warps=8),
    triton.Config({"BLOCK_L": 128, "PER_SM": 1}, num_warps=16),
]
if _INTERPRET:
    # two programs for the tests' CPU "device", two chunks per sample at their max_length 6
    _CONFIGS = [triton.Config({"BLOCK_L": 4, "PER_SM": 1}, num_warps=4)]


def _bench(kernel_call, quantiles):
    """Autotuning benchmark: ``triton.testing.do_bench`` with 5 ms of warm-up and 25 ms of timed calls (instead of
    25 / 100) per config, to keep the first call's tuning short."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


#: the tuned launch arguments per shape key (see :func:`_launch`)
_TUNED = {}


def _launch(kernel, key, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` for the ``triton.autotune``-d ``kernel``. The first call for ``key`` (the
    shapes and dtypes the tuning depends on) goes through the autotuner, which benchmarks its configs once and launches
    the best; later calls launch the underlying ``JITFunction`` with that config's arguments directly, skipping the
    autotuner's per-call bookkeeping (argument dicts, key building: ~9 us of host time per call measured on a
    2-core CPU machine)."""
    tuned = _TUNED.get(key)
    if tuned is None:
        kernel[grid](*args, **kwargs)
        best = getattr(kernel, "best_config", None)
        if best is not None:
            _TUNED[key] = best.all_kwargs()
        return
    kernel.fn[grid](*args, **kwargs, **tuned)


@triton.autotune(configs=_CONFIGS, key=["B", "D", "LMAX"], do_bench=_bench)
@triton.jit
def _jagged_to_padded_kernel(values_ptr, len_ptr, out_ptr, B, D, LMAX: tl.constexpr,
                             BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_L: tl.constexpr,
                             PER_SM: tl.constexpr):
    # a contiguous, balanced run of samples per program: [s0, s1)
    pid = tl.program_id(0).to(tl.int64)
    nprog = tl.num_programs(0).to(tl.int64)
    s0 = pid * B // nprog
    s1 = (pid + 1) * B // nprog
    # where sample s0's values start: the sum of the lengths before it (from L2; once per program)
    part = tl.zeros([BLOCK_S], dtype=tl.int64)
    for c0 in range(0, s0, BLOCK_S):
        i = c0 + tl.arange(0, BLOCK_S)
        part += tl.load(len_ptr + i, mask=i < s0, other=0).to(tl.int64)
    start = tl.sum(part, axis=0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    lo = tl.arange(0, BLOCK_L)
    NCH: tl.constexpr = (LMAX + BLOCK_L - 1) // BLOCK_L
    # software pipeline over (sample, chunk) items: the next item's values are loaded before the current item's
    # tile is stored, so a program always has a tile of loads in flight while it stores
    b = s0
    c = 0
    n = tl.load(len_ptr + b, mask=b < s1, other=0).to(tl.int64)
    vals = tl.load(values_ptr + (start + lo)[:, None] * D + d[None, :], mask=(lo < n)[:, None] & dmask[None, :],
                   other=0.0)
    for _ in range((s1 - s0) * NCH):
        wrap = (c + 1) == NCH
        b_nx = tl.where(wrap, b + 1, b)
        c_nx = tl.where(wrap, 0, c + 1)
        start_nx = tl.where(wrap, start + n, start)
        n_nx = tl.where(wrap, tl.load(len_ptr + b_nx, mask=b_nx < s1, other=0).to(tl.int64), n)
        l_nx = c_nx * BLOCK_L + lo
        vals_nx = tl.load(values_ptr + (start_nx + l_nx)[:, None] * D + d[None, :],
                          mask=(l_nx < n_nx)[:, None] & dmask[None, :], other=0.0)
        l = c * BLOCK_L + lo
        tl.store(out_ptr + (b * LMAX + l)[:, None] * D + d[None, :], vals, mask=(l < LMAX)[:, None] & dmask[None, :])
        b, c, start, n, vals = b_nx, c_nx, start_nx, n_nx, vals_nx


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is one Triton launch."""

    BLOCK_S = 2048

    def __init__(self, max_length: int):
        super().__init__()
        self.max_length = max_length
        self._sms = {}

    def _num_sms(self, device) -> int:
        key = str(device)
        if key not in self._sms:
            self._sms[key] = (torch.cuda.get_device_properties(device).multi_processor_count
                              if device.type == "cuda" else 2)
        return self._sms[key]

    def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch = lengths.shape[0]
        dim = values.shape[1]
        out = torch.empty(batch, self.max_length, dim, device=values.device, dtype=values.dtype)
        if batch == 0 or self.max_length == 0 or dim == 0:
            return out
        sms = self._num_sms(values.device)
        key = (batch, self.max_length, dim, values.dtype, lengths.dtype, values.device)
        _launch(_jagged_to_padded_kernel, key, lambda meta: (min(batch, sms * meta["PER_SM"]),),
                values.contiguous(), lengths.contiguous(), out, batch, dim, LMAX=self.max_length,
                BLOCK_D=triton.next_power_of_2(dim), BLOCK_S=self.BLOCK_S)
        return out
