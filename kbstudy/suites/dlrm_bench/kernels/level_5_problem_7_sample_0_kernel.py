"""kbstudy-triton candidate for DLRM-Bench problem 7 (ID hashing by modulo + lengths to offsets).

**One launch** writing straight into the single int64 output ``[offsets (num_bags + 1) | hashed ids (total)]``:

* every program hashes one ``BLOCK`` of ids (``id % hash_size``, Python-style sign; ``hash_size`` is a compile-time
  constant, so the 64-bit modulo becomes a multiply-high sequence instead of a division loop);
* the first ``nb = cdiv(num_bags, BLOCK_G)`` programs also scan one block of lengths each, in a single pass with a
  *decoupled look-back* (as CUB's single-pass scan): a program takes a ticket (an atomic counter, so scan blocks are
  numbered in the order programs actually started), sums its block of lengths and publishes the sum at once in a
  status word (``epoch << 32 | sum``, one atomic exchange), hashes its ids block while the others do the same, then
  reads the status words of all earlier blocks (one vector load, re-read while any is not yet published for this
  call's epoch), adds them, and writes its block's offsets; the last block writes the total. Block t waits only on
  blocks with smaller tickets, which have all started, so the wait always ends (it is also capped: a broken GPU
  ordering would give a wrong answer, never a hang). The last ticket resets the counter for the next call; the
  status words need no reset (the epoch changes every call).

Why one launch: the floor is 7 us (31 MB), under one launch on the H200, so the call is launch-bound; a two-pass
scan needs two launches (hash + block sums, then offsets), eager PyTorch five (``remainder``, ``cumsum``, ``pad``,
``cat``). One launch, one allocation, each input byte read once and each output byte written once. The counter and
status words are scratch allocated once per device.

Measured on the H200: 15.1 us of cold device time, 2.10x the floor (7.2 us), where a plain copy of the same 30.7 MB
takes 11.9 us, 1.65x the floor (``outputs/records/dlrm_bench/h200/final``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


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

#: spin-wait cap (loop iterations, ~0.5-1 us each on a GPU): a wrong answer instead of a hang if ever exceeded
MAX_SPINS = 1 << 22


@triton.jit(do_not_specialize=["epoch"])
def _hash_and_offsets_kernel(ids_ptr, len_ptr, out_ptr, counter_ptr, state_ptr, n_ids, n_bags, n_scan, epoch,
                             HASH: tl.constexpr, BLOCK: tl.constexpr, BLOCK_G: tl.constexpr,
                             BLOCK_NB: tl.constexpr, MAX_SPIN: tl.constexpr):
    p = tl.program_id(0)
    scans = p < n_scan
    # 1. scan participants: ticket, block sum, publish (as early as possible)
    t = 0
    if scans:
        t = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    j = (t * BLOCK_G + tl.arange(0, BLOCK_G)).to(tl.int64)
    jmask = (j < n_bags) & ((j * 0 + p) < n_scan)  # (as a vector: the interpreter mis-types scalar & vector masks)
    x = tl.load(len_ptr + j, mask=jmask, other=0).to(tl.int64)
    local = tl.sum(x, axis=0)
    if scans:
        tl.atomic_xchg(state_ptr + t, (epoch.to(tl.int64) << 32) | local, sem="acq_rel", scope="gpu")
        if t == n_scan - 1:
            tl.atomic_xchg(counter_ptr, 0)  # every ticket is taken: ready for the next call
    # 2. every program: hash one block of ids
    i = p.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    imask = i < n_ids
    ids = tl.load(ids_ptr + i, mask=imask, other=0)
    h = ids % HASH
    h = tl.where(h < 0, h + HASH, h)
    tl.store(out_ptr + (n_bags + 1) + i, h, mask=imask)
    # 3. scan participants: look back at every earlier block, then write this block's offsets
    if scans:
        q = tl.arange(0, BLOCK_NB)
        need = q < t
        st = tl.load(state_ptr + q, mask=need, other=0, volatile=True)
        missing = tl.sum((need & ((st >> 32) != epoch)).to(tl.int32), axis=0)
        spins = 0
        while (missing > 0) & (spins < MAX_SPIN):
            st = tl.load(state_ptr + q, mask=need, other=0, volatile=True)
            missing = tl.sum((need & ((st >> 32) != epoch)).to(tl.int32), axis=0)
            spins += 1
        prefix = tl.sum(tl.where(need, st & 0xFFFFFFFF, 0), axis=0)
        tl.store(out_ptr + j, prefix + tl.cumsum(x, axis=0) - x, mask=jmask)
        if t == n_scan - 1:
            tl.store(out_ptr + n_bags, prefix + local)


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is one Triton launch."""

    BLOCK = 4096
    BLOCK_G = 4096

    def __init__(self, hash_size: int):
        super().__init__()
        self.hash_size = hash_size
        self._scratch = {}
        self._epoch = 0

    def _scratch_for(self, device, n_scan: int):
        """(ticket counter int32 [1], status words int64 [>= n_scan]) for ``device``, allocated once (zeros)."""
        key = str(device)
        entry = self._scratch.get(key)
        if entry is None or entry[1].numel() < n_scan:
            entry = (torch.zeros(1, dtype=torch.int32, device=device),
                     torch.zeros(max(16, triton.next_power_of_2(n_scan)), dtype=torch.int64, device=device))
            self._scratch[key] = entry
        return entry

    def forward(self, raw_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n_ids, n_bags = raw_ids.numel(), lengths.numel()
        if n_ids >= 2**31:
            raise ValueError("block sums are published as 32-bit values: fewer than 2**31 ids")
        n_scan = max(1, triton.cdiv(n_bags, self.BLOCK_G))
        block_nb = max(16, triton.next_power_of_2(n_scan))
        if block_nb > 16384:
            raise ValueError(f"{n_bags} bags: at most {16384 * self.BLOCK_G} for the one-pass look-back")
        counter, state = self._scratch_for(raw_ids.device, block_nb)
        self._epoch = self._epoch % (2**31 - 1) + 1  # 1 .. 2**31 - 1, never the zeros of a fresh state buffer
        out = torch.empty(n_bags + 1 + n_ids, device=raw_ids.device, dtype=torch.int64)
        grid = (max(triton.cdiv(n_ids, self.BLOCK), n_scan),)
        _launch(_hash_and_offsets_kernel, None, grid, raw_ids.contiguous(), lengths.contiguous(), out, counter, state,
                n_ids, n_bags, n_scan, self._epoch, HASH=self.hash_size, BLOCK=self.BLOCK, BLOCK_G=self.BLOCK_G,
                BLOCK_NB=block_nb, MAX_SPIN=MAX_SPINS, num_warps=8)
        return out
