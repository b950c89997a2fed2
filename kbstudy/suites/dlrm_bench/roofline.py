"""Roofline floors of the DLRM-Bench problems: compulsory bytes and FLOPs, the machine's measured ceilings, the floor.

The *floor* of a problem is the shortest time the machine could possibly take:
``t_floor = max(bytes / BW, flops / rate)``, with

* ``bytes``: compulsory DRAM traffic only -- every input byte the output depends on read once, every output byte
  written once (no intermediate, no re-read). For a table lookup only the *distinct* rows touched are compulsory; for
  uniform random indices (``torch.randint``, as every problem generates them) the expected number of distinct rows
  among ``n`` draws from ``N`` is ``E[U] = N (1 - (1 - 1/N)^n)`` (:func:`expected_unique`).
* ``flops``: the arithmetic the output needs (multiply-add = 2 FLOPs), counting only the needed entries (e.g. the
  351 lower-triangle dot products of problem 9, not the full 27 x 27 product).
* ``BW``: achieved DRAM bandwidth measured on the machine by a large device-to-device copy (bytes read + written).
* ``rate``: achieved matrix rate measured on the machine by a large GEMM, in the problem's arithmetic precision:
  bf16 (problems 10, 11) or fp32 with TF32 off (all others).

Measured values, never datasheet values (H200 datasheet: 4.8 TB/s HBM3e, ~990 dense bf16 TFLOP/s). A problem is
*memory-bound* when ``bytes / BW >= flops / rate``.

**Launch latency** (a separate, launch-aware view; the floor's definition does not include it). Every timed call of
the evaluation (:mod:`kbstudy.harness.timing`) synchronises the device and records its start event on an idle GPU, so a
call's time includes the host's work until its kernels are enqueued: at least one launch. :func:`measure_machine`
therefore also times, with the same method (CUDA events, L2 flush, one call per sample), an empty Triton kernel
(one program, one pointer argument) and a one-element ``torch`` op (a minimal CUDA kernel through PyTorch's
dispatcher); :func:`launch_latency_ms` reads the median of the Triton one back. A problem whose floor is below
:data:`LAUNCH_BOUND_FACTOR` such latencies is *launch-bound*: no kernel timed per call can come within 1.25x of its
floor (the report flags it and adds ``ours / (floor + one launch)``; the floor itself is unchanged).

**A copy of the compulsory bytes at the problem's size** (:func:`copy_at_size`, GPU only; a separate column, not the
floor). ``BW`` comes from a 4 GiB copy, where the start-up and the tail of one launch are negligible. At the sizes of
the smaller problems (30-130 MB) they are not: the same copy at that size takes longer than ``bytes / BW``.
:func:`copy_at_size` times ``dst.copy_(src)`` of ``bytes / 2`` each way by the device time a kernel is judged by
(:func:`kbstudy.harness.timing.time_device`: cold L2, the host hidden; ``copy_flush`` says how its flush left the L2, clean
``"read"``; older rows lack the key and were ``"write"``); ``copy_ms / floor_ms`` says how close to
the floor the simplest kernel that moves those bytes comes at that size. It is evidence, not a bound: a kernel whose
bytes are mostly reads may move them faster than a copy does, and a copy whose written half fits the L2 (60 MB on the
H200) need not finish writing it to DRAM within its time.

**DRAM sectors** (``sector_bytes``, a separate column, not the floor). HBM is read and written by the L2 in 32-byte
sectors (:data:`SECTOR_BYTES`; NVIDIA's CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory": a warp's
accesses are served in 32-byte segments), so a gathered row that is not a whole number of aligned sectors costs the
DRAM more than its bytes: problem 6's 136-byte int8 rows span five sectors (160 bytes), and problem 5's 4-byte
row-wise state entries one sector each (eight entries per sector). ``sector_bytes`` counts the expected number of
distinct sectors the gathers touch (:func:`expected_sectors`) where the floor counts bytes; the streams (indices,
outputs) are contiguous and cost their bytes either way. Where it exceeds ``bytes``, ``measurement_run`` also times a
copy of ``sector_bytes`` at size (``sector_copy_ms``): the least a kernel that moves what the DRAM must move takes, by
the same evidence as ``copy_ms``.

Byte and FLOP formulas per problem are in :func:`compulsory_work` (sizes: B batch, L bag size, D dim, N table rows,
s = bytes per element: 4 fp32, 2 bf16, 8 int64 indices).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import statistics
from typing import Sequence

import torch

from kbstudy.harness.timing import time_callable, time_device
from kbstudy.harness.timing_stats import summarize
from kbstudy.records.provenance import cpu_name

#: Problems whose arithmetic runs in bf16 (their FLOPs are charged at the bf16 matrix rate).
BF16_PROBLEMS = frozenset({10, 11})
#: A problem is launch-bound when its floor is below this many launch latencies (:func:`launch_latency_ms`).
LAUNCH_BOUND_FACTOR = 3.0
#: Bytes per DRAM sector, the unit in which the L2 reads and writes HBM (NVIDIA, CUDA C++ Best Practices Guide,
#: "Coalesced Access to Global Memory"; sm_70 to sm_90).
SECTOR_BYTES = 32


@dataclasses.dataclass(frozen=True)
class Machine:
    """Measured ceilings of one device.

    ``bandwidth_bytes_per_s``: achieved DRAM bandwidth (device-to-device copy, read + write bytes / time).
    ``matmul_flops_per_s``: achieved matrix rate per precision (``"bf16"``, ``"fp32"`` with TF32 off).
    ``l2_bytes``: last-level cache size (0 when unknown). ``method``: how it was measured.
    """

    device: str
    name: str
    bandwidth_bytes_per_s: float
    matmul_flops_per_s: dict
    l2_bytes: int
    method: str
    details: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def key(self) -> str:
        """A short content hash of the measurement (24 hex digits of the SHA-256 of :meth:`to_json`): what
        ``floors.jsonl`` rows cite as ``machine_key`` (``machine.json`` carries it as ``key``)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:24]

    @classmethod
    def from_dict(cls, d: dict) -> "Machine":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclasses.dataclass(frozen=True)
class Work:
    """Compulsory work of one problem instance: ``bytes`` (DRAM bytes), ``flops``, the FLOP precision and the formula;
    ``sector_bytes``: the same traffic counted in whole 32-byte DRAM sectors (:data:`SECTOR_BYTES`), ``None`` where it
    equals ``bytes`` (contiguous streams and sector-aligned gathered rows only)."""

    bytes: float
    flops: float
    precision: str
    formula: str
    sector_bytes: float | None = None


def numeric_constants(ns: dict) -> dict:
    """The size constants of an executed problem module (public ints, floats, tuples and lists; no bools)."""
    return {k: v for k, v in ns.items() if not k.startswith("_") and isinstance(v, (int, float, tuple, list))
            and not isinstance(v, bool)}


def expected_unique(n_rows: int, draws: int) -> float:
    """Expected number of distinct rows among ``draws`` uniform draws (with replacement) from ``n_rows`` rows:
    ``N (1 - (1 - 1/N)^n)``. Raises ``ValueError`` for ``n_rows < 1`` or ``draws < 0``."""
    if n_rows < 1 or draws < 0:
        raise ValueError(f"need n_rows >= 1 and draws >= 0, got {n_rows}, {draws}")
    return n_rows * -math.expm1(draws * math.log1p(-1.0 / n_rows)) if n_rows > 1 else float(draws > 0)


def expected_sectors(n_rows: int, row_bytes: int, draws: int, sector: int = SECTOR_BYTES) -> float:
    """Expected number of distinct ``sector``-byte sectors touched by ``draws`` uniform draws (with replacement) of rows
    of ``row_bytes`` bytes from a table of ``n_rows`` rows stored back to back from a sector-aligned base (row ``r`` at
    byte ``r * row_bytes``). A sector overlapped by ``k`` rows is untouched with probability ``(1 - k / N)^n``, so the
    expectation is the sum over the table's sectors of ``1 - (1 - k / N)^n``. The rows repeat their sector pattern every
    ``sector / gcd(row_bytes, sector)`` rows (a pattern ends on a sector boundary); the sum takes the whole patterns
    once, times their number, plus the sectors of a last, partial pattern: exact for every ``N``. For rows of a whole
    number of sectors it is ``expected_unique(N, n) * row_bytes / sector``. Raises ``ValueError`` for ``n_rows < 1``,
    ``row_bytes < 1`` or ``draws < 0``."""
    if n_rows < 1 or row_bytes < 1 or draws < 0:
        raise ValueError(f"need n_rows >= 1, row_bytes >= 1 and draws >= 0, got {n_rows}, {row_bytes}, {draws}")
    if draws == 0:
        return 0.0

    def touched(rows: int) -> float:
        """The expected touched sectors among those of rows 0 .. rows - 1 (a pattern's start)."""
        total = 0.0
        for s in range(-(-rows * row_bytes // sector)):
            lo, hi = s * sector, (s + 1) * sector
            k = sum(1 for r in range(rows) if r * row_bytes < hi and (r + 1) * row_bytes > lo)  # rows overlapping it
            total += 1.0 if k >= n_rows else -math.expm1(draws * math.log1p(-k / n_rows))
        return total

    period = sector // math.gcd(row_bytes, sector)  # rows per repetition of the sector pattern
    whole, rest = divmod(n_rows, period)
    return (whole * touched(period) if whole else 0.0) + (touched(rest) if rest else 0.0)


def compulsory_work(problem_id: int, consts: dict, inputs: Sequence | None = None) -> Work:
    """Compulsory bytes and FLOPs of DLRM-Bench problem ``problem_id``.

    Args:
        problem_id: 1..12.
        consts: the problem module's size constants (``batch_size``, ``embedding_dim``, ... as in its source, after any
            size scaling).
        inputs: the problem's ``get_inputs()`` tensors; needed for problems 2, 7, 8 (their totals are random).

    Formulas (E[U](N, n) = :func:`expected_unique`; idx = 8-byte int64):

    1. EmbeddingBag sum: ``B L 8 + E[U](N, B L) D 4 + B D 4`` bytes; ``B L D`` FLOPs.
    2. weighted var-length: ``T 8 + B 8 + T 4 + E[U](N, T) D 4 + B D 4`` (T = total lookups); ``2 T D``.
    3. 26 tables: ``B sum(L_t) 8 + sum_t E[U](N_t, B L_t) D 4 + B 26 D 4``; ``B sum(L_t) D``.
    4. backward, dense gradient: ``B L 8 + B D 4 + N D 4`` (the whole gradient is written); ``B L D``.
    5. backward + row-wise Adagrad, functional sparse update: ``B L 8 + B D 4 + E[U](N, B L) (2 D 4 + 2 4 + 8)``
       (read each touched row and its state, write its new row, its new state and its row id); ``B L D + 4 E[U] D``.
    6. int8 row-wise: ``B L 8 + E[U](N, B L) (D + 8) + B D 4``; ``2 B L D``.
    7. hash + offsets: ``T 8 + G 8`` read, ``(G + 1 + T) 8`` written (G = bags); ``T + G`` integer ops.
    8. jagged to padded: ``T D 4 + B 8`` read, ``B Lmax D 4`` written; 0 FLOPs.
    9. dot interaction: ``B D 4 + B 26 D 4`` read, ``B (D + 351) 4`` written; ``2 B 351 D`` (only the needed pairs).
    10. DCN-v2, bf16: ``B W 2`` in + ``B W 2`` out + ``3 (2 W r + W) 2`` weights (W = 27 D, r = low rank);
        ``3 * 2 * 2 B W r`` (two GEMMs per layer) + ``3 * 3 B W`` epilogue.
    11. bottom MLP, bf16: ``B 13 2 + B 128 2 + sum(in out + out) 2``; ``2 B sum(in out)``.
    12. loss head: ``B F 4 + B 4 + (F + 1) 4`` read, ``(2 + F + B F) 4`` written; ``5 B F`` (logits ``2 B F``,
        dL/dh ``B F``, dL/dw ``2 B F``; memory-bound by two orders of magnitude either way).

    ``sector_bytes`` (1, 2, 3, 5, 6; :func:`expected_sectors`, S = sectors): each gathered table's ``E[U] row`` term
    becomes ``E[S](N, row, n) 32`` (the same for fp32 rows of D = 128: 512 bytes, 16 sectors), problem 6's rows of
    ``D + 8`` bytes span five sectors at D = 128, and problem 5's state read ``E[U] 4`` becomes ``E[S](N, 4, B L) 32``.

    Raises ``KeyError`` for an unknown problem id or a missing constant, ``ValueError`` if inputs are needed but absent.
    """
    c = consts
    f32, idx = 4, 8
    pid = int(problem_id)
    if pid in (2, 7, 8) and inputs is None:
        raise ValueError(f"problem {pid}: its random totals need the actual inputs")
    if pid == 1:
        B, L, D, N = c["batch_size"], c["bag_size"], c["embedding_dim"], c["num_embeddings"]
        u = expected_unique(N, B * L)
        return Work(B * L * idx + u * D * f32 + B * D * f32, B * L * D, "fp32", "B L 8 + E[U] D 4 + B D 4",
                    B * L * idx + _sector_bytes(N, D * f32, B * L) + B * D * f32)
    if pid == 2:
        B, D, N = c["batch_size"], c["embedding_dim"], c["num_embeddings"]
        T = inputs[0].numel()
        u = expected_unique(N, T)
        return Work(T * idx + B * idx + T * f32 + u * D * f32 + B * D * f32, 2 * T * D, "fp32",
                    "T 8 + B 8 + T 4 + E[U] D 4 + B D 4",
                    T * idx + B * idx + T * f32 + _sector_bytes(N, D * f32, T) + B * D * f32)
    if pid == 3:
        B, D = c["batch_size"], c["embedding_dim"]
        rows = [min(n, c["max_table_rows"]) for n in c["table_rows"]]
        hots = list(c["multi_hot_sizes"])
        table_bytes = sum(expected_unique(n, B * h) * D * f32 for n, h in zip(rows, hots))
        table_sectors = sum(_sector_bytes(n, D * f32, B * h) for n, h in zip(rows, hots))
        return Work(B * sum(hots) * idx + table_bytes + B * len(rows) * D * f32, B * sum(hots) * D, "fp32",
                    "B sum(L_t) 8 + sum_t E[U_t] D 4 + B 26 D 4",
                    B * sum(hots) * idx + table_sectors + B * len(rows) * D * f32)
    if pid == 4:
        B, L, D, N = c["batch_size"], c["bag_size"], c["embedding_dim"], c["num_embeddings"]
        return Work(B * L * idx + B * D * f32 + N * D * f32, B * L * D, "fp32", "B L 8 + B D 4 + N D 4")
    if pid == 5:
        B, L, D, N = c["batch_size"], c["bag_size"], c["embedding_dim"], c["num_embeddings"]
        u = expected_unique(N, B * L)
        return Work(B * L * idx + B * D * f32 + u * (2 * D * f32 + 2 * f32 + idx), B * L * D + 4 * u * D, "fp32",
                    "B L 8 + B D 4 + E[U] (2 D 4 + 2 4 + 8)",
                    B * L * idx + B * D * f32 + _sector_bytes(N, D * f32, B * L) + u * (D * f32 + f32 + idx)
                    + _sector_bytes(N, f32, B * L))
    if pid == 6:
        B, L, D, N = c["batch_size"], c["bag_size"], c["embedding_dim"], c["num_embeddings"]
        u = expected_unique(N, B * L)
        return Work(B * L * idx + u * (D + 8) + B * D * f32, 2 * B * L * D, "fp32", "B L 8 + E[U] (D + 8) + B D 4",
                    B * L * idx + _sector_bytes(N, D + 8, B * L) + B * D * f32)
    if pid == 7:
        T, G = inputs[0].numel(), inputs[1].numel()
        return Work(T * idx + G * idx + (G + 1 + T) * idx, T + G, "fp32", "T 8 + G 8 + (G + 1 + T) 8")
    if pid == 8:
        B, D, Lmax = c["batch_size"], c["embedding_dim"], c["max_length"]
        T = inputs[0].shape[0]
        return Work(T * D * f32 + B * idx + B * Lmax * D * f32, 0.0, "fp32", "T D 4 + B 8 + B Lmax D 4")
    if pid == 9:
        B, D, S = c["batch_size"], c["embedding_dim"], c["num_sparse_features"]
        pairs = (S + 1) * S // 2
        return Work(B * D * f32 + B * S * D * f32 + B * (D + pairs) * f32, 2 * B * pairs * D, "fp32",
                    "B D 4 + B 26 D 4 + B (D + 351) 4")
    if pid == 10:
        B, D, S, r, nl = c["batch_size"], c["embedding_dim"], c["num_sparse_features"], c["low_rank"], c["num_layers"]
        W = (S + 1) * D
        return Work(2 * B * W * 2 + nl * (2 * W * r + W) * 2, nl * (2 * 2 * B * W * r + 3 * B * W), "bf16",
                    "2 B W 2 + 3 (2 W r + W) 2")
    if pid == 11:
        B = c["batch_size"]
        sizes = [c["num_dense_features"], c["hidden1"], c["hidden2"], c["out_features"]]
        pairs = list(zip(sizes[:-1], sizes[1:]))
        return Work(B * sizes[0] * 2 + B * sizes[-1] * 2 + sum(i * o + o for i, o in pairs) * 2,
                    2 * B * sum(i * o for i, o in pairs), "bf16", "B 13 2 + B 128 2 + sum(in out + out) 2")
    if pid == 12:
        B, F = c["batch_size"], c["in_features"]
        return Work(B * F * f32 + B * f32 + (F + 1) * f32 + (2 + F + B * F) * f32, 5 * B * F, "fp32",
                    "B F 4 + B 4 + (F + 1) 4 + (2 + F + B F) 4")
    raise KeyError(f"unknown DLRM-Bench problem id {problem_id}")


def _sector_bytes(n_rows: int, row_bytes: int, draws: int) -> float:
    """Bytes of the distinct DRAM sectors ``draws`` uniform row gathers touch (:func:`expected_sectors`)."""
    return expected_sectors(n_rows, row_bytes, draws) * SECTOR_BYTES


def floor_ms(work: Work, machine: Machine) -> tuple[float, str]:
    """The floor in ms, ``max(bytes / BW, flops / rate)``, and which side binds (``"memory"`` or ``"compute"``).

    Raises ``KeyError`` if the machine has no matrix rate for the work's precision.
    """
    t_mem = work.bytes / machine.bandwidth_bytes_per_s
    t_cmp = work.flops / machine.matmul_flops_per_s[work.precision]
    return 1e3 * max(t_mem, t_cmp), ("memory" if t_mem >= t_cmp else "compute")


def problem_floor(problem_id: int, consts: dict, machine: Machine, inputs: Sequence | None = None) -> dict:
    """Floor of one problem as a flat dict: ``bytes``, ``flops``, ``precision``, ``formula``, ``floor_ms``, ``bound``,
    ``memory_ms`` and ``compute_ms`` (each side alone), ``sector_bytes`` (``bytes`` counted in DRAM sectors, see
    :class:`Work`; equal to ``bytes`` where the problem gathers nothing unaligned) and ``sector_ms`` (``sector_bytes /
    BW``, not the floor)."""
    work = compulsory_work(problem_id, consts, inputs)
    ms, bound = floor_ms(work, machine)
    sector_bytes = work.bytes if work.sector_bytes is None else max(work.sector_bytes, work.bytes)
    return {"bytes": work.bytes, "flops": work.flops, "precision": work.precision, "formula": work.formula,
            "floor_ms": ms, "bound": bound, "memory_ms": 1e3 * work.bytes / machine.bandwidth_bytes_per_s,
            "compute_ms": 1e3 * work.flops / machine.matmul_flops_per_s[work.precision],
            "sector_bytes": sector_bytes, "sector_ms": 1e3 * sector_bytes / machine.bandwidth_bytes_per_s}


def copy_at_size(nbytes: float, device: str, reps: int = 20) -> dict:
    """The device time of a device-to-device copy moving ``nbytes`` (``nbytes / 2`` read, ``nbytes / 2`` written;
    ``torch.Tensor.copy_`` of uint8 buffers) on a CUDA ``device``, by :func:`kbstudy.harness.timing.time_device` (cold L2,
    the host hidden, ``reps`` calls): ``{"copy_ms": median, "copy_q1_ms": ..., "copy_q3_ms": ..., "copy_flush":
    the L2 flush's mode}``, times in ms.
    Raises ``ValueError`` on a CPU device (no device time there) or for ``nbytes`` below 2."""
    if not device.startswith("cuda"):
        raise ValueError(f"a copy's device time needs a CUDA device, not {device!r}")
    half = int(nbytes) // 2
    if half < 1:
        raise ValueError(f"nothing to copy: {nbytes} bytes")
    src = torch.empty(half, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    timing = time_device(lambda: dst.copy_(src), device=device, reps=reps)
    stats = summarize(timing.samples)
    del src, dst
    torch.cuda.empty_cache()
    return {"copy_ms": stats.median, "copy_q1_ms": stats.q1, "copy_q3_ms": stats.q3, "copy_flush": timing.flush}


def launch_latency_ms(machine: "Machine | dict") -> float | None:
    """The median time (ms) of an empty Triton kernel launch timed as candidates are (``details["launch_triton_ms"]``
    of :func:`measure_machine`); ``None`` for a machine measured before launch latencies were recorded, or where no
    Triton launch could be timed."""
    details = machine.details if isinstance(machine, Machine) else (machine or {}).get("details", {})
    samples = (details or {}).get("launch_triton_ms")
    return statistics.median(samples) if samples else None


def launch_bound(floor_ms_value: float | None, launch_ms: float | None, factor: float = LAUNCH_BOUND_FACTOR):
    """``True`` if the floor is below ``factor`` launch latencies, ``False`` if not, ``None`` if either is unknown."""
    if floor_ms_value is None or launch_ms is None or floor_ms_value != floor_ms_value or launch_ms != launch_ms:
        return None
    return bool(floor_ms_value < factor * launch_ms)


# --------------------------------------------------------------------------------------------- machine measurement


def _empty_triton_launcher(device: str):
    """A zero-argument callable launching an empty Triton kernel (grid (1,), one pointer argument) on ``device``, or
    ``None`` where Triton cannot launch (no Triton; a CPU without ``TRITON_INTERPRET=1``)."""
    if not device.startswith("cuda") and os.environ.get("TRITON_INTERPRET") != "1":
        return None
    try:
        import triton  # the triton extra: optional on a CPU machine
    except ImportError:
        return None

    @triton.jit
    def _empty_kernel(x_ptr):
        pass

    buf = torch.zeros(1, device=device)
    return lambda: _empty_kernel[(1,)](buf)



#: Gather measurement defaults: table rows (x GATHER_DIM fp32, 2 GB on a GPU: far above any L2) and rows gathered
#: (the B L = 819,200 lookups of problems 1, 4 and 5).
GATHER_ROWS = {"cuda": 4_000_000, "cpu": 262_144}
GATHER_N = {"cuda": 819_200, "cpu": 65_536}
GATHER_DIM = 128


def _measure_gather(dev, timer, reps: int, gather_rows: int | None, gather_n: int | None) -> dict:
    """The achieved bandwidth of gathering random 512-byte rows: ``torch.index_select(table, 0, idx, out=out)`` of
    ``gather_n`` uniform random row ids (``torch.randint``, with repeats, as the problems draw them; a fixed seed) from
    a ``gather_rows x 128`` fp32 table (default 4M rows = 2 GB on a GPU, far larger than the L2; 256K rows on a CPU),
    timed as the copy is (:func:`kbstudy.harness.timing.time_callable`, ``clear_l2=False``: the table is 40x the H200's L2),
    fastest call, bytes = ``gather_n x 512`` read + the same written (read + write, as the copy counts).

    Why: problems 1-6 are random row gathers (and scatters), and DRAM serves those worse than a stream: each 512-byte
    row opens a DRAM page of its own and is moved as separate 32-byte sectors spread over banks and channels, so
    row-activation and scheduling overheads that a sequential copy amortises are paid per row. What this measures is
    ``index_select``'s achieved rate, a reference point and **not a ceiling**: on the H200 (1663 GB/s, 0.39 of the copy
    bandwidth, ``outputs/archive/h200-dlrm-s6-loaded``) our problem-3 kernel moved its bytes 1.54x faster, since more
    rows in flight per SM hide more of the per-row latency. The floors keep the copy bandwidth (their definition is
    unchanged); this is an extra column a report may show beside them.
    """
    kind = "cuda" if dev.type == "cuda" else "cpu"
    n_rows = gather_rows or GATHER_ROWS[kind]
    n = gather_n or GATHER_N[kind]
    table = torch.empty(n_rows, GATHER_DIM, dtype=torch.float32, device=dev).fill_(1.0)
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, n_rows, (n,), generator=gen).to(dev)
    out = torch.empty(n, GATHER_DIM, dtype=torch.float32, device=dev)
    gather = lambda: torch.index_select(table, 0, idx, out=out)  # noqa: E731
    ms = timer(gather, reps)
    row_bytes = GATHER_DIM * 4
    del table, idx, out
    return {"gather_rows": n_rows, "gather_n": n, "gather_row_bytes": row_bytes, "gather_ms": ms,
            "gather_bytes_per_s": 2.0 * n * row_bytes / (min(ms) * 1e-3)}


def measure_machine(device: str = "cuda", copy_bytes: int | None = None, matmul_n: int | None = None,
                    reps: int = 20, gather_rows: int | None = None, gather_n: int | None = None) -> Machine:
    """Measure the device's achieved DRAM bandwidth and matrix rates.

    Bandwidth: ``dst.copy_(src)`` of ``copy_bytes`` (default 4 GiB on a GPU, 256 MiB on a CPU) counted as
    2 x ``copy_bytes`` (read + write). Matrix rate: ``n x n x n`` GEMMs (default n = 8192 on a GPU, 1024 on a CPU) in
    bf16 and in fp32 with TF32 disabled, ``2 n^3`` FLOPs each. Timed by :func:`kbstudy.harness.timing.time_callable` (the
    project's one timer: CUDA events on a GPU, ``time.perf_counter_ns`` on a CPU) with ``clear_l2=False`` (a 4 GiB
    copy does not fit any L2, and an L2 flush before a GEMM would only add noise), at least 2 warm-up calls, then
    ``reps`` timed calls (``max(3, reps // 4)`` for the slow fp32 GEMM); the *fastest* call is used (a floor must not
    be slower than anything the machine did).

    Launch latency (``details``: ``launch_triton_ms``, ``launch_torch_ms``, ``reps`` samples each): an empty Triton
    kernel and a one-element ``zero_()`` timed exactly as candidates are (``time_callable`` with its L2 flush:
    synchronise, start event on an idle device, the call, end event), so each sample is the host-to-device latency of
    one launch plus an empty kernel. ``launch_triton_ms`` is absent where Triton cannot launch (a CPU without
    ``TRITON_INTERPRET=1``). Raises ``RuntimeError`` if ``device`` is CUDA and none is available.

    Gather bandwidth (``details``: ``gather_bytes_per_s``, ``gather_ms``, ``gather_rows``, ``gather_n``,
    ``gather_row_bytes``): see :func:`_measure_gather`. An extra column for reports; no floor uses it.
    """
    dev = torch.device(device)
    is_cuda = dev.type == "cuda"
    if is_cuda and not torch.cuda.is_available():
        raise RuntimeError("measure_machine: CUDA requested but torch.cuda.is_available() is False")
    copy_bytes = copy_bytes or (4 << 30 if is_cuda else 256 << 20)
    matmul_n = matmul_n or (8192 if is_cuda else 1024)

    def timer(fn, n: int) -> list[float]:
        return time_callable(fn, device=str(dev), warmup_ms=0.0, min_warmup=2, budget_ms=0.0, min_reps=n, max_reps=n,
                             clear_l2=False)

    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    copy = lambda: dst.copy_(src)  # noqa: E731
    copy_ms = timer(copy, reps)
    del src, dst
    rates, details = {}, {"copy_bytes": copy_bytes, "copy_ms": copy_ms, "matmul_n": matmul_n}
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32 if is_cuda else None
    try:
        if is_cuda:
            torch.backends.cuda.matmul.allow_tf32 = False
        for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
            a = torch.randn(matmul_n, matmul_n, device=dev).to(dtype)
            b = torch.randn(matmul_n, matmul_n, device=dev).to(dtype)
            mm = lambda: torch.mm(a, b)  # noqa: E731
            n_reps = reps if name == "bf16" else max(3, reps // 4)
            ms = timer(mm, n_reps)
            rates[name] = 2.0 * matmul_n**3 / (min(ms) * 1e-3)
            details[f"matmul_{name}_ms"] = ms
            del a, b
    finally:
        if is_cuda:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    if is_cuda:
        props = torch.cuda.get_device_properties(dev)
        name, l2 = props.name, int(getattr(props, "L2_cache_size", 0) or 0)
        method = "kbstudy.harness.timing.time_callable(clear_l2=False): cuda_event"
    else:
        name, l2, method = f"CPU: {cpu_name()}", 0, "kbstudy.harness.timing.time_callable: cpu_perf_counter"
    details["copy_ms_median"] = statistics.median(copy_ms)

    def launch_timer(fn) -> list[float]:
        return time_callable(fn, device=str(dev), warmup_ms=0.0, min_warmup=3, budget_ms=0.0, min_reps=reps,
                             max_reps=reps, clear_l2=True)

    details.update(_measure_gather(dev, timer, reps, gather_rows, gather_n))
    one = torch.zeros(1, device=dev)
    details["launch_torch_ms"] = launch_timer(lambda: one.zero_())
    launcher = _empty_triton_launcher(str(dev))
    if launcher is not None:
        details["launch_triton_ms"] = launch_timer(launcher)
    return Machine(device=dev.type, name=name, bandwidth_bytes_per_s=2.0 * copy_bytes / (min(copy_ms) * 1e-3),
                   matmul_flops_per_s=rates, l2_bytes=l2, method=method, details=details)
