"""How fast can any kernel read rows of R bytes gathered at random from a large table? Device time and achieved
bandwidth of a pure row-reading kernel as a function of the row size R.

**Why.** DLRM-Bench problem 6 gathers 819,200 int8 rows (8192 bags x 100 lookups, ``torch.randint`` over 4,000,000
rows) of 136 bytes (128 codes + fp32 scale + fp32 bias, FBGEMM's layout: rows back to back, so 8-byte aligned and each
one starting 0, 8, 16 or 24 bytes into a 32-byte sector). Our kernel takes 44 us of device time; its byte floor
(compulsory bytes at the 4 GiB copy's rate) is 26.3 us, and a streaming copy of the bytes its rows' 32-byte sectors
hold takes 32.9 us. Problem 1 gathers the same lookups as fp32 rows of 512 bytes, and its kernel comes within 1.12x of
its floor. Is the gap of problem 6 its kernel's, or the machine's for 136-byte random rows? This script measures the
machine's side: a kernel that does nothing but read every lookup's full row, for R = 136 (problem 6), 144, 160, 192,
256 and 512 (problem 1) bytes, each on the same lookups into a table of the same 4,000,000 rows (so the touched
fraction is problem 6's), and the same number of rows read *in order* as a control (how fast the same kernel streams).

**The kernel** (:func:`_read_rows`, :func:`read_rows`). The table is a uint8 buffer of N rows of R bytes (R a multiple
of 8) back to back from a 256-byte-aligned base (problem 6's ``qweight`` layout); the kernel reads it as int64 words
with 8-byte loads only (the row length is not specialised, so Triton cannot prove a 16-byte alignment and vectorise R =
256 or 512 further: every R is read the way a 136-byte row must be; SASS ``LDG.E.64``), and xors every word it loads
into one int64 per program, stored at the end (so no load is dead; the stores are at most 17 KB). A lookup's row is one
*unit* of up to 32 words (256 bytes; a longer row is ``S`` consecutive units, e.g. two for R = 512); a warp reads one
unit per load instruction, one word per lane (17 of 32 lanes at R = 136). A persistent grid (``PPS`` programs per SM,
all resident) walks the units in order, ``ROWS`` units per program per step, program ``p`` taking steps ``p, p + P,
...``. Each program keeps two steps of rows in flight in registers: the loop takes two steps per iteration and issues
step k + 1's loads before it consumes step k's and step k + 2's before step k + 1's, each into the registers just
consumed (no register moves at the loop's end, which would wait for loads still in flight: checked in the SASS), with
the row ids loaded two steps ahead. Configs with ``PF = 2`` also ``prefetch.global.L2`` the words of steps k + 3 and k +
4 (two steps before their register loads; SASS ``CCTL.E.PF2``, one instruction per unit and warp like the load, no
register): more rows in flight than the registers hold, at ~1.8x the instructions per row. ``triton.autotune`` ranks
:data:`_CONFIGS` per (R, lookups, pattern) in the state the project judges a kernel in (:func:`_bench`:
``kbstudy.harness.timing.time_device``, L2 flushed by a read, host hidden behind a spin); every config's median is printed and
kept.

**What is timed.** Per R and pattern (``random``: the problems' ``torch.randint`` lookups, a fixed seed on the GPU;
``sequential``: rows 0 .. n - 1), one call of the kernel by ``kbstudy.harness.timing.time_device`` (the project's judged device
time: L2 flushed by a read before each call, a 2 ms spin hides the host, CUDA events; 20 calls), after a check that the
programs' xors combine to the xor of every gathered word (torch). Reported per row: median, first and third quartile
(us); distinct rows (``kbstudy.suites.dlrm_bench.roofline.expected_unique``; and the count in the lookups drawn) and their
bytes (*touched bytes*, what a floor charges: distinct rows x R); *sector bytes*, the 32-byte DRAM sectors those rows
span (``expected_sectors`` x 32: 155.6 bytes per distinct 136-byte row at these lookups, 1.144x its bytes, adjacent
drawn rows sharing sectors; R bytes for R a multiple of 32);
*requested bytes* (every lookup's row, repeats included: what the kernel loads); achieved GB/s (10^9 bytes/s) of each
(bytes / median). Rows only: the kernel also reads the 8-byte indices (6.6 MB at 819,200 lookups, ``index_bytes``,
not in the GB/s). For comparison, the H200's 4 GiB copy moves ~4.27 TB/s (reads + writes).

GPU only (a CUDA GPU; on a CPU the script says so and stops; the kernel itself runs under ``TRITON_INTERPRET=1`` on
CPU tensors, which ``tests/dlrm_bench/test_random_rows_bench.py`` does). About 30-60 s on an H200 with a cold Triton
cache (12 compilations: 6 configs x rows of one unit or two; the configs' ranking; tables of up to 2 GB). Other row
sizes: ``--row-bytes 136,200`` (multiples of 8); the sequential control needs ``--lookups`` <= ``--rows``::

    python3 scripts/bench_random_rows.py --out $OUT/random_rows.csv
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repository's kbstudy (imported
# where used)
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: problem 6's lookups (8192 bags x 100) and table rows; the default row sizes (136: problem 6, 512: problem 1)
LOOKUPS = 8192 * 100
TABLE_ROWS = 4_000_000
ROW_BYTES = (136, 144, 160, 192, 256, 512)
PATTERNS = ("random", "sequential")
#: words (8 bytes) per unit: a warp reads one unit per load instruction, one word per lane
UNIT_WORDS = 32
#: the table's base alignment (bytes) the benchmark asks for (problem 6's ``qweight`` starts on the allocator's 512)
BASE_ALIGN = 256
COLUMNS = ("row_bytes", "pattern", "lookups", "table_rows", "table_bytes", "distinct_rows", "distinct_rows_drawn",
           "touched_bytes", "sector_bytes", "sector_bytes_drawn", "requested_bytes", "index_bytes", "median_us",
           "q1_us", "q3_us", "touched_gbps", "sector_gbps", "requested_gbps", "reps", "host_overran", "config",
           "programs", "config_medians_us", "check")

#: ROWS units per program per step, PPS programs per SM (all resident: registers x 32 x num_warps x PPS <= 65536),
#: PF > 0: the units PF steps before their register loads prefetched into the L2. Units in registers per SM: PPS x
#: ROWS to 2 PPS x ROWS (128-256; 160-320 for the two-warp config), twice that with PF = 2. Registers per thread
#: (Triton 3.6, sm_90, ptxas via ``cuobjdump --dump-resource-usage``; no stack, no local memory; S = 1 / S = 2), and
#: the main loop's SASS instructions per unit and warp at S = 1:
#:
#: | config                | maxnreg | registers | warps/SM | instructions/unit |
#: | --- | --- | --- | --- | --- |
#: | rows16_w4_pps8_pf0    | 64      | 56 / 56   | 32       | 13.4              |
#: | rows16_w4_pps8_pf2    | 64      | 56 / 64   | 32       | 24.1              |
#: | rows32_w4_pps4_pf0    | 128     | 91 / 96   | 16       | 12.9              |
#: | rows32_w4_pps4_pf2    | 128     | 112 / 116 | 16       | 22.1              |
#: | rows8_w4_pps16_pf0    | 32      | 32 / 32   | 64       | 15.3              |
#: | rows16_w2_pps10_pf0   | 96      | 80 / 94   | 20       | 12.5              |
#:
#: (rows16_w2_pps10 with PF = 2 used 40 bytes of stack at S = 2 and is not listed.)
_CONFIGS = [
    triton.Config({"ROWS": 16, "PPS": 8, "PF": 0}, num_warps=4, num_stages=1, maxnreg=64),
    triton.Config({"ROWS": 16, "PPS": 8, "PF": 2}, num_warps=4, num_stages=1, maxnreg=64),
    triton.Config({"ROWS": 32, "PPS": 4, "PF": 0}, num_warps=4, num_stages=1, maxnreg=128),
    triton.Config({"ROWS": 32, "PPS": 4, "PF": 2}, num_warps=4, num_stages=1, maxnreg=128),
    triton.Config({"ROWS": 8, "PPS": 16, "PF": 0}, num_warps=4, num_stages=1, maxnreg=32),
    triton.Config({"ROWS": 16, "PPS": 10, "PF": 0}, num_warps=2, num_stages=1, maxnreg=96),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"ROWS": 4, "PPS": 2, "PF": 0}, num_warps=1, num_stages=1)]
#: the most programs per SM any config launches (sizes the per-program output)
MAX_PPS = max(c.kwargs["PPS"] for c in _CONFIGS)


def _bench(kernel_call, quantiles=None):
    """Autotuning benchmark, timed as the project judges a kernel: :func:`kbstudy.harness.timing.time_device` (before each of
    20 calls the L2 flushed by *reading* a buffer twice its size, the host hidden behind a spin kernel, CUDA events;
    two warm-up calls). Returns the quantiles asked (in that order; a number for one) of the calls, in ms, as
    ``triton.testing.do_bench`` does."""
    from kbstudy.harness.timing import time_device

    times = sorted(time_device(kernel_call, device="cuda", reps=20).samples)
    n = len(times)
    ret = [times[min(n - 1, max(0, int(round(q * (n - 1)))))] for q in (quantiles or (0.5,))]
    return ret[0] if len(ret) == 1 else ret


@triton.jit
def _load_idx(idx_ptr, u, n, S: tl.constexpr):
    """The raw (int64) table row of each unit ``u`` (lookup ``u // S``); 0 for units past the last."""
    if S == 1:
        look = u
    else:
        look = u // S
    return tl.load(idx_ptr + look, mask=look < n, other=0)


@triton.jit
def _unit_start(r, u, row_words, S: tl.constexpr, CW: tl.constexpr, OFF64: tl.constexpr):
    """The word offset of each unit's first word: row ``r`` times the row's words, plus the unit's segment."""
    if OFF64:
        start = r * row_words
    else:
        start = r.to(tl.int32) * row_words  # row ids and offsets below 2^31 (read_rows checks)
    if S > 1:
        start += (u % S) * CW
    return start


@triton.jit
def _unit_words(u, row_words, S: tl.constexpr, CW: tl.constexpr):
    """The words of each unit: the row's, or up to CW of them for a segment of a row of more than CW words."""
    if S == 1:
        words = u * 0 + row_words
    else:
        words = tl.minimum(row_words - (u % S) * CW, CW)
    return words


@triton.jit
def _load_rows(table_ptr, r, u, n, row_words, col, S: tl.constexpr, CW: tl.constexpr, OFF64: tl.constexpr):
    """A step's units (rows, or segments of rows) as a [ROWS, CW] tile of int64 words, 0 where masked."""
    start = _unit_start(r, u, row_words, S, CW, OFF64)
    words = _unit_words(u, row_words, S, CW)
    mask = (u < n * S)[:, None] & (col[None, :] < words[:, None])
    return tl.load(table_ptr + start[:, None] + col[None, :], mask=mask, other=0)


@triton.jit
def _prefetch_l2(ptr, live):
    """Per element: if ``live`` is not zero, ``prefetch.global.L2`` the word at ``ptr``: the L2 fetches its sector
    from DRAM as a load would, but no register waits for it (a hint: no completion, no destination)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.u32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, live], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _prefetch_rows(table_ptr, r, u, n, row_words, col, S: tl.constexpr, CW: tl.constexpr, OFF64: tl.constexpr):
    """A step's units into the L2: the words :func:`_load_rows` would load, prefetched (one instruction per unit and
    warp, as the load)."""
    start = _unit_start(r, u, row_words, S, CW, OFF64)
    words = _unit_words(u, row_words, S, CW)
    live = (u < n * S)[:, None] & (col[None, :] < words[:, None])
    _prefetch_l2(table_ptr + start[:, None] + col[None, :], live.to(tl.int32))


@triton.autotune(configs=_CONFIGS, key=["row_words", "n", "tag"], do_bench=_bench)
@triton.jit(do_not_specialize=["row_words", "tag"])
def _read_rows(table_ptr, idx_ptr, out_ptr, n, row_words, tag,
               CW: tl.constexpr, S: tl.constexpr, OFF64: tl.constexpr,
               ROWS: tl.constexpr, PPS: tl.constexpr, PF: tl.constexpr):
    # table_ptr: the table as int64 words; idx_ptr: int64 row ids; out_ptr: one int64 per program. n lookups, each
    # S units of up to CW words (row_words in all); tag (random 0 / sequential 1) only keys the autotuner; PPS only
    # sizes the grid (read_rows). Program p takes steps p, p + P, ... of ROWS consecutive units: its step k holds units
    # lr + k STEP.
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    col = tl.arange(0, CW)
    STEP = P * ROWS
    lr = pid * ROWS + tl.arange(0, ROWS)  # units of this program's step 0
    n_steps = tl.cdiv(n * S - pid * ROWS, STEP)
    # the loop takes two steps per iteration (k, k + 1), so each loaded tile is written into a variable whose old value
    # is already consumed: no register moves at the loop's end, whose sources would be loads still in flight (a move
    # waits for its source, and the warp would wait for step k + 1's rows at the end of each step: one step in flight
    # instead of two). At the top of an iteration: step k's rows in flight (rows_a), the indices of steps k + 1 (rb)
    # and k + 2 (rc) loaded, and with PF > 0 those of steps k + 1 + PF and k + 2 + PF (qa, qb).
    ra = _load_idx(idx_ptr, lr, n, S)
    rb = _load_idx(idx_ptr, lr + STEP, n, S)
    rc = _load_idx(idx_ptr, lr + 2 * STEP, n, S)
    if PF > 0:
        qa = _load_idx(idx_ptr, lr + (1 + PF) * STEP, n, S)
        qb = _load_idx(idx_ptr, lr + (2 + PF) * STEP, n, S)
    rows_a = _load_rows(table_ptr, ra, lr, n, row_words, col, S, CW, OFF64)
    acc = tl.zeros([ROWS, CW], dtype=tl.int64)
    kb = STEP  # first unit offset of step k + 1
    for _ in range(0, n_steps, 2):
        ub = lr + kb
        uc = ub + STEP
        if PF > 0:
            # steps k + 1 + PF and k + 2 + PF into the L2 (their register loads come PF steps later), and the
            # indices of the next iteration's prefetches
            _prefetch_rows(table_ptr, qa, ub + PF * STEP, n, row_words, col, S, CW, OFF64)
            _prefetch_rows(table_ptr, qb, uc + PF * STEP, n, row_words, col, S, CW, OFF64)
            qa = _load_idx(idx_ptr, ub + (2 + PF) * STEP, n, S)
            qb = _load_idx(idx_ptr, uc + (2 + PF) * STEP, n, S)
        rows_b = _load_rows(table_ptr, rb, ub, n, row_words, col, S, CW, OFF64)  # step k + 1
        rb = _load_idx(idx_ptr, ub + 2 * STEP, n, S)  # step k + 3
        acc ^= rows_a  # step k (waits for it, with step k + 1 in flight)
        rows_a = _load_rows(table_ptr, rc, uc, n, row_words, col, S, CW, OFF64)  # step k + 2
        rc = _load_idx(idx_ptr, uc + 2 * STEP, n, S)  # step k + 4
        acc ^= rows_b  # step k + 1 (with step k + 2 in flight)
        kb += 2 * STEP
    tl.store(out_ptr + pid, tl.xor_sum(tl.xor_sum(acc, axis=1), axis=0))


def unit_shape(row_bytes: int) -> tuple[int, int]:
    """``(CW, S)`` for rows of ``row_bytes``: words per unit (a power of two, at most :data:`UNIT_WORDS`) and units per
    row. Raises ``ValueError`` unless ``row_bytes`` is a positive multiple of 8."""
    if row_bytes < 8 or row_bytes % 8:
        raise ValueError(f"row_bytes must be a positive multiple of 8, not {row_bytes}")
    words = row_bytes // 8
    cw = min(triton.next_power_of_2(words), UNIT_WORDS)
    return cw, -(-words // cw)


def sm_count(device) -> int:
    """Streaming multiprocessors of ``device`` (CUDA); 2 on a CPU (the interpreter's grid)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def grid_programs(n: int, row_bytes: int, rows: int, pps: int, sms: int) -> int:
    """Programs launched for ``n`` lookups: ``pps`` per SM, at most one per step of ``rows`` units (at least 1)."""
    _, s = unit_shape(row_bytes)
    return max(1, min(sms * pps, -(-(n * s) // rows)))


def chosen_config() -> dict:
    """The meta-parameters of the config the last :func:`read_rows` launched (``ROWS``, ``PPS``, ``PF``,
    ``num_warps``, ``maxnreg``, ...)."""
    best = getattr(_read_rows, "best_config", None) or _CONFIGS[0]
    return {**best.kwargs, "num_warps": best.num_warps, "maxnreg": best.maxnreg}


def config_name(cfg) -> str:
    """A config as ``rows16_w4_pps8_pf0`` (a ``triton.Config`` or :func:`chosen_config`'s dict)."""
    if isinstance(cfg, triton.Config):
        cfg = {**cfg.kwargs, "num_warps": cfg.num_warps}
    return f"rows{cfg['ROWS']}_w{cfg['num_warps']}_pps{cfg['PPS']}_pf{cfg['PF']}"


def _prepare(table_u8, indices, row_bytes, out, sms, rows_max, pps_max):
    """:func:`read_rows`'s checks; returns ``(CW, S, n, sms, out, OFF64)``."""
    cw, s = unit_shape(row_bytes)
    if table_u8.dtype not in (torch.uint8, torch.int8) or not table_u8.is_contiguous():
        raise ValueError("table_u8 must be a contiguous uint8 (or int8) tensor")
    if table_u8.numel() % row_bytes or table_u8.numel() == 0:
        raise ValueError(f"table of {table_u8.numel()} bytes is not a whole number of {row_bytes}-byte rows")
    if table_u8.data_ptr() % 16:
        raise ValueError("the table's base must be 16-byte aligned")
    if indices.dtype != torch.int64 or indices.dim() != 1 or not indices.is_contiguous():
        raise ValueError("indices must be a contiguous 1-D int64 tensor")
    if indices.device != table_u8.device:
        raise ValueError(f"indices on {indices.device}, table on {table_u8.device}")
    n = indices.numel()
    sms = sm_count(table_u8.device) if sms is None else sms
    # unit numbers are int32: the last program's units, up to 6 steps past the end (index loads ahead, masked)
    if n * s + 8 * sms * pps_max * rows_max >= 2**31:
        raise ValueError(f"{n} lookups of {s} units do not fit the kernel's int32 unit numbers")
    if out is None:
        out = torch.empty(sms * pps_max, dtype=torch.int64, device=table_u8.device)
    elif out.dtype != torch.int64 or out.numel() < sms * pps_max or out.device != table_u8.device:
        raise ValueError(f"out must be int64 with at least {sms * pps_max} elements on {table_u8.device}")
    return cw, s, n, sms, out, table_u8.numel() // 8 + UNIT_WORDS >= 2**31


def read_rows(table_u8: torch.Tensor, indices: torch.Tensor, row_bytes: int, *, tag: int = 0,
              out: torch.Tensor | None = None, sms: int | None = None) -> torch.Tensor:
    """Read row ``indices[i]`` (all ``row_bytes`` of it, as int64 words) of the table ``table_u8`` for every ``i`` and
    xor every word into one int64 per program: returns those (int64 [programs], a view of ``out``; their xor is the
    xor of every gathered word, :func:`reference_xor`). The autotuned config (:func:`chosen_config`) sets the grid.

    Args:
        table_u8: uint8 (or int8), contiguous, a whole number of ``row_bytes`` rows, 16-byte-aligned base (the
            benchmark's is 256-byte aligned).
        indices: int64 row ids in ``[0, rows)`` (1-D, contiguous, on the table's device); not checked (an id out of
            range reads out of bounds).
        row_bytes: a multiple of 8.
        tag: keys the autotuner (0: random lookups, 1: sequential), so each pattern gets its own config.
        out: int64 with at least ``sms x`` :data:`MAX_PPS` elements to write into (else allocated).
        sms: SMs to size the grid for (default the device's; 2 on a CPU).

    Raises ``ValueError`` for a table, indices or ``out`` that break these rules."""
    cw, s, n, sms, out, off64 = _prepare(table_u8, indices, row_bytes, out, sms,
                                         max(c.kwargs["ROWS"] for c in _CONFIGS), MAX_PPS)
    if n == 0:
        return out[:0]

    def grid(meta):
        return (grid_programs(n, row_bytes, meta["ROWS"], meta["PPS"], sms),)

    _read_rows[grid](table_u8.view(torch.int64), indices, out, n, row_bytes // 8, tag, CW=cw, S=s, OFF64=off64)
    cfg = chosen_config()
    return out[:grid_programs(n, row_bytes, cfg["ROWS"], cfg["PPS"], sms)]


def read_rows_config(table_u8: torch.Tensor, indices: torch.Tensor, row_bytes: int, *, rows: int, programs: int,
                     pf: int = 0, num_warps: int = 4, off64: bool | None = None) -> torch.Tensor:
    """:func:`read_rows` under one given config, bypassing the autotuner: ``rows`` units per step, exactly
    ``programs`` programs (more than the steps leaves some with none: they write 0), L2 prefetch distance ``pf`` (0:
    none; GPU only, an inline-asm instruction), ``off64`` forcing the 64-bit offsets (default: as :func:`read_rows`).
    For tests; returns the ``programs`` results."""
    cw, s, n, _, out, auto64 = _prepare(table_u8, indices, row_bytes, None, programs, rows, 1)
    _read_rows.fn[(programs,)](table_u8.view(torch.int64), indices, out, n, row_bytes // 8, 0, CW=cw, S=s,
                               OFF64=auto64 if off64 is None else off64, ROWS=rows, PPS=1, PF=pf,
                               num_warps=num_warps, num_stages=1)
    return out[:programs]


def xor_reduce(t: torch.Tensor) -> int:
    """The xor of all elements of an integer tensor (0 if empty), folded on its device."""
    t = t.reshape(-1)
    while t.numel() > 1:
        if t.numel() % 2:
            t = torch.cat([t, t.new_zeros(1)])
        half = t.numel() // 2
        t = t[:half] ^ t[half:]
    return int(t.item()) if t.numel() else 0


def reference_xor(table_u8: torch.Tensor, indices: torch.Tensor, row_bytes: int) -> int:
    """What the programs of :func:`read_rows` xor to: the xor of every word of every gathered row (torch)."""
    return xor_reduce(table_u8.reshape(-1, row_bytes).view(torch.int64)[indices])


def expected_per_program(table_u8: torch.Tensor, indices: torch.Tensor, row_bytes: int, rows: int,
                         programs: int) -> list[int]:
    """Each program's result under a config of ``rows`` units per step on ``programs`` programs: program ``p`` xors
    the units of steps ``p, p + programs, ...`` (unit ``j``: words ``(j % S) CW ..`` of row ``indices[j // S]``)."""
    cw, s = unit_shape(row_bytes)
    words = table_u8.reshape(-1, row_bytes).view(torch.int64)[indices]  # [n, row_words]
    res = [0] * programs
    for j in range(indices.numel() * s):
        p = (j // rows) % programs
        res[p] ^= xor_reduce(words[j // s, (j % s) * cw:(j % s + 1) * cw])
    return res


def sequential_sectors(n: int, row_bytes: int, sector: int = 32) -> int:
    """Sectors of ``n`` rows of ``row_bytes`` read in order from a sector-aligned base."""
    return -(-(n * row_bytes) // sector)


def drawn_sectors(indices: torch.Tensor, row_bytes: int, sector: int = 32) -> int:
    """Distinct ``sector``-byte sectors the rows ``indices`` span (rows back to back from a sector-aligned base)."""
    first = indices * row_bytes // sector
    last = (indices * row_bytes + row_bytes - 1) // sector
    span = int((last - first).max().item()) + 1 if indices.numel() else 0
    ids = first[:, None] + torch.arange(span, device=indices.device)[None, :]
    return int(torch.unique(ids[ids <= last[:, None]]).numel())


def measure(table: torch.Tensor, r: int, patterns: dict, *, out: torch.Tensor, sms: int, reps: int,
            timer=None, log=print) -> list[tuple]:
    """The table's rows for each pattern: ``patterns`` maps a name (:data:`PATTERNS`) to its indices. Per pattern:
    the first call ranks the configs, its xor is checked against :func:`reference_xor`, then ``timer(fn, reps)``
    (default ``kbstudy.harness.timing.time_device``: a ``DeviceTiming``, ms) times it. Returns one :data:`COLUMNS` tuple per
    pattern and prints a line each through ``log``."""
    from kbstudy.harness.timing_stats import summarize
    from kbstudy.suites.dlrm_bench.roofline import SECTOR_BYTES, expected_sectors, expected_unique

    if timer is None:
        from kbstudy.harness.timing import time_device

        def timer(fn, reps):
            return time_device(fn, device=str(table.device), reps=reps)

    N = table.numel() // r
    rows = []
    for pattern, idx in patterns.items():
        n = idx.numel()
        tag = PATTERNS.index(pattern)

        def call(idx=idx, tag=tag):
            return read_rows(table, idx, r, tag=tag, out=out, sms=sms)

        got = xor_reduce(call())  # the first call for this (R, lookups, pattern) ranks the configs
        cfg = chosen_config()
        timings = getattr(_read_rows, "configs_timings", None) or {}
        medians = ";".join(f"{config_name(c)}={(t[0] if isinstance(t, (list, tuple)) else t) * 1e3:.1f}"
                           for c, t in timings.items())
        check = got == reference_xor(table, idx, r)
        dev = timer(call, reps)
        stats = summarize([ms * 1e3 for ms in dev.samples])
        if pattern == "random":
            distinct = expected_unique(N, n)
            sect = expected_sectors(N, r, n) * SECTOR_BYTES
        else:
            distinct = n
            sect = sequential_sectors(n, r) * SECTOR_BYTES
        touched, requested = distinct * r, n * r
        gbps = [b / (stats.median * 1e-6) / 1e9 for b in (touched, sect, requested)]
        rows.append((r, pattern, n, N, N * r, distinct, int(torch.unique(idx).numel()), touched, sect,
                     drawn_sectors(idx, r) * SECTOR_BYTES, requested, n * 8, stats.median, stats.q1, stats.q3, *gbps,
                     stats.n, dev.host_overran, config_name(cfg), grid_programs(n, r, cfg["ROWS"], cfg["PPS"], sms),
                     medians, bool(check)))
        log(f"{r:>4} {pattern:>10} {stats.median:7.1f} {stats.q1:7.1f} {stats.q3:7.1f} {distinct:8.0f} "
            f"{touched / 1e6:8.1f} {sect / 1e6:8.1f} {gbps[0]:10.0f} {gbps[1]:9.0f} {gbps[2]:8.0f}  {config_name(cfg)}"
            f"{'' if check else '  CHECK FAILED'}{f'  overran={dev.host_overran}' if dev.host_overran else ''}")
        if medians:
            log(f"{'':>16}configs ranked (median us, judged state): {medians}")
    return rows


#: the printed table's header (one line per row size and pattern; times in us, bytes in MB, rates in GB/s)
HEADER = (f"{'R':>4} {'pattern':>10} {'median':>7} {'q1':>7} {'q3':>7} {'distinct':>8} {'touch MB':>8} "
          f"{'sect MB':>8} {'touch GB/s':>10} {'sect GB/s':>9} {'req GB/s':>8}  config")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row-bytes", default=",".join(map(str, ROW_BYTES)),
                        help="row sizes in bytes, multiples of 8, comma-separated (default %(default)s)")
    parser.add_argument("--rows", type=int, default=TABLE_ROWS, help="table rows (default %(default)s)")
    parser.add_argument("--lookups", type=int, default=LOOKUPS, help="lookups (default %(default)s)")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per measurement (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the lookups and the tables (default 0)")
    parser.add_argument("--out", help="write the table as CSV here")
    args = parser.parse_args()

    if not torch.cuda.is_available():
        sys.exit("bench_random_rows.py needs a CUDA GPU (it times a Triton kernel with CUDA events and a spin kernel)")
    row_sizes = [int(x) for x in args.row_bytes.split(",") if x.strip()]
    for r in row_sizes:
        unit_shape(r)  # a multiple of 8, or ValueError
    n, N = args.lookups, args.rows
    if n > N:
        sys.exit(f"--lookups {n} > --rows {N}: the sequential control reads each of n rows once")
    device = "cuda"
    torch.set_grad_enabled(False)
    sms = sm_count(device)
    props = torch.cuda.get_device_properties(device)
    print(f"{props.name}: {sms} SMs, L2 {props.L2_cache_size / 2**20:.0f} MiB; triton {triton.__version__}, torch "
          f"{torch.__version__}; {n} lookups into {N} rows; {args.reps} calls each; us, MB, GB/s", flush=True)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    patterns = {"random": torch.randint(0, N, (n,), device=device, generator=gen),
                "sequential": torch.arange(n, device=device, dtype=torch.int64)}
    out = torch.empty(sms * MAX_PPS, dtype=torch.int64, device=device)
    rows = []
    print(HEADER, flush=True)
    for r in row_sizes:
        table = torch.empty(N * r, dtype=torch.uint8, device=device)
        if table.data_ptr() % BASE_ALIGN:
            sys.exit(f"the table's base is not {BASE_ALIGN}-byte aligned")
        table.view(torch.int64).random_(generator=gen)  # any bits: the xor must see every word
        rows += measure(table, r, patterns, out=out, sms=sms, reps=args.reps, log=lambda s: print(s, flush=True))
        table = None  # freed before the next size
        torch.cuda.empty_cache()
    if args.out:
        import pandas as pd

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows, columns=COLUMNS).to_csv(args.out, index=False)
    if not all(row[COLUMNS.index("check")] for row in rows):
        sys.exit("a kernel's xor did not match the reference (CHECK FAILED above)")


if __name__ == "__main__":
    main()
