"""``scripts/bench_random_rows.py`` (how fast any kernel reads rows of R bytes gathered at random). Its timing needs a
GPU; on a CPU it must say so and stop. Its kernel runs here under the Triton interpreter, on CPU tensors, in a child
process with ``TRITON_INTERPRET=1`` set before triton is imported (as ``test_dlrm_kernels_edge.py``): the programs'
xors must combine to the xor of every gathered word (torch), each program's must be the xor of its own steps' units,
for R = 136 (problem 6's rows: 17 words, a masked unit) and 512 (problem 1's: two units per row), odd lookup counts
that are no multiple of a step, other configs (steps of 2 to 32 units, more programs than steps), the 64-bit offsets,
and the L2-prefetch path (its inline-asm instruction replaced by a recorder: it must ask for exactly the words of the
units of each program's steps from ``1 + PF`` on)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

_SCRIPT = r"""
import json, os, sys
assert os.environ.get("TRITON_INTERPRET") == "1"
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import numpy as np
import torch
import bench_random_rows as b
from kbstudy.harness.timing import DeviceTiming

rows = []
g = torch.Generator().manual_seed(6)


def table(N, R):
    t = torch.empty(N * R, dtype=torch.uint8)
    t.view(torch.int64).random_(generator=g)
    return t


def case(name, t, idx, R, out):
    ref = b.reference_xor(t, idx, R)
    words = t.reshape(-1, R).view(torch.int64)[idx]
    rows.append({"case": name, "n": idx.numel(), "programs": out.numel(), "combined": b.xor_reduce(out) == ref,
                 "numpy": int(np.bitwise_xor.reduce(words.numpy().ravel())) == ref if idx.numel() else ref == 0})
    return rows[-1]


# the autotuned entry point (one interpreter config: 4 units per step, 2 programs per "SM")
for R, N, n in [(136, 50, 37), (136, 50, 1), (136, 50, 4), (512, 40, 29), (512, 40, 3), (144, 30, 23), (264, 30, 19)]:
    t, idx = table(N, R), torch.randint(0, N, (n,), generator=g)
    out = b.read_rows(t, idx, R)
    cfg = b.chosen_config()
    r = case(f"auto R={R} n={n}", t, idx, R, out)
    r["per_program"] = out.tolist() == b.expected_per_program(t, idx, R, cfg["ROWS"], out.numel())
    r["grid"] = out.numel() == b.grid_programs(n, R, cfg["ROWS"], cfg["PPS"], 2)

# every row read in order, and every lookup on the last row (xor of an even count cancels: n odd here)
t = table(41, 136)
r = case("auto R=136 sequential", t, torch.arange(41), 136, b.read_rows(t, torch.arange(41), 136, tag=1))
r["per_program"] = True
idx = torch.full((9,), 40, dtype=torch.int64)
t = table(41, 512)
r = case("auto R=512 last row x9", t, idx, 512, b.read_rows(t, idx, 512))
r["per_program"] = True

# given configs: steps of 2 .. 32 units, more programs than steps (some with none), the 64-bit offsets
for R, N, n, step, P in [(136, 50, 37, 8, 3), (136, 50, 37, 2, 7), (136, 20, 3, 32, 1), (136, 50, 37, 16, 9),
                         (512, 40, 29, 4, 40), (512, 40, 29, 8, 3), (264, 30, 23, 16, 2)]:
    t, idx = table(N, R), torch.randint(0, N, (n,), generator=g)
    for off64 in (False, True):
        out = b.read_rows_config(t, idx, R, rows=step, programs=P, off64=off64)
        r = case(f"config R={R} n={n} rows={step} P={P} off64={off64}", t, idx, R, out)
        r["per_program"] = out.tolist() == b.expected_per_program(t, idx, R, step, P)

# the L2 prefetch path: its instruction recorded instead of issued (the interpreter runs no inline asm)
recorded = []


def record(ptr, live):
    addr = np.asarray(ptr.handle.data).ravel()
    recorded.extend(addr[np.asarray(live.handle.data).ravel() != 0].tolist())


b._prefetch_l2 = record
for R, N, n, step, P, pf in [(136, 50, 37, 2, 3, 2), (136, 50, 37, 2, 3, 1), (512, 40, 29, 4, 2, 2),
                             (264, 30, 23, 2, 2, 4)]:
    t, idx = table(N, R), torch.randint(0, N, (n,), generator=g)
    recorded.clear()
    out = b.read_rows_config(t, idx, R, rows=step, programs=P, pf=pf)
    r = case(f"prefetch R={R} n={n} rows={step} P={P} pf={pf}", t, idx, R, out)
    r["per_program"] = out.tolist() == b.expected_per_program(t, idx, R, step, P)
    cw, s = b.unit_shape(R)
    want = []
    for j in range(n * s):  # unit j: step j // step, that program's (j // step) // P-th
        if (j // step) // P >= 1 + pf:
            w0 = int(idx[j // s]) * (R // 8) + (j % s) * cw
            want += [t.data_ptr() + 8 * (w0 + c) for c in range(min(cw, R // 8 - (j % s) * cw))]
    r["prefetched"] = sorted(recorded) == sorted(want) and len(want) > 0

# the measurement's bookkeeping (a stand-in timer: 1, 2, ... us)
pats = {"random": torch.randint(0, 60, (41,), generator=g), "sequential": torch.arange(41)}
out = torch.empty(2 * b.MAX_PPS, dtype=torch.int64)
meas = []
for R in (136, 512):
    meas += b.measure(table(60, R), R, pats, out=out, sms=2, reps=5, log=lambda s: None,
                      timer=lambda fn, reps: DeviceTiming([1e-3 * (i + 1) for i in range(reps)], 0, 2000.0, "read"))
print(json.dumps({"cases": rows, "measure": [dict(zip(b.COLUMNS, m)) for m in meas]}))
"""


@pytest.fixture(scope="module")
def interpreted():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_interpreted_kernel_matches_torch(interpreted):
    cases = interpreted["cases"]
    assert len(cases) == 7 + 2 + 14 + 4
    for c in cases:
        assert c["combined"] and c["numpy"] and c["per_program"], c
        assert c.get("grid", True) and c.get("prefetched", True), c
    # R = 136 and 512 through the autotuned entry point, odd counts that are no multiple of a step
    names = {c["case"] for c in cases}
    assert {"auto R=136 n=37", "auto R=512 n=29", "auto R=136 n=1"} <= names


def test_measurement_bookkeeping(interpreted):
    """The CSV row of each (R, pattern) from the stand-in timer (1..5 us: median 3, quartiles 2 and 4) and the
    roofline's expectations: distinct rows E[U], sectors (five 32-byte sectors per 136-byte row), rates."""
    from kbstudy.suites.dlrm_bench.roofline import expected_sectors, expected_unique

    meas = {(m["row_bytes"], m["pattern"]): m for m in interpreted["measure"]}
    assert set(meas) == {(136, "random"), (136, "sequential"), (512, "random"), (512, "sequential")}
    for (r, pattern), m in meas.items():
        assert m["check"] and (m["median_us"], m["q1_us"], m["q3_us"], m["reps"]) == (3.0, 2.0, 4.0, 5)
        assert m["lookups"] == 41 and m["table_rows"] == 60 and m["index_bytes"] == 41 * 8
        assert m["requested_bytes"] == 41 * r and m["touched_bytes"] == pytest.approx(m["distinct_rows"] * r)
        assert m["sector_gbps"] == pytest.approx(m["sector_bytes"] / 3e-6 / 1e9)
        if pattern == "random":
            assert m["distinct_rows"] == pytest.approx(expected_unique(60, 41))
            assert m["sector_bytes"] == pytest.approx(expected_sectors(60, r, 41) * 32)
            assert m["sector_bytes_drawn"] <= m["distinct_rows_drawn"] * (5 if r == 136 else 16) * 32
        else:
            assert m["distinct_rows"] == m["distinct_rows_drawn"] == 41
            assert m["sector_bytes"] == m["sector_bytes_drawn"] == -(-41 * r // 32) * 32


def test_unit_shape_and_sectors():
    from bench_random_rows import drawn_sectors, sequential_sectors, unit_shape

    assert unit_shape(136) == (32, 1) and unit_shape(256) == (32, 1) and unit_shape(512) == (32, 2)
    assert unit_shape(264) == (32, 2) and unit_shape(64) == (8, 1) and unit_shape(8) == (1, 1)
    for bad in (0, 4, 132):
        with pytest.raises(ValueError):
            unit_shape(bad)
    # 136-byte rows start 0, 8, 16, 24 bytes into a sector: rows 0..3 span 5 sectors each, 17 in all
    assert drawn_sectors(torch.tensor([0]), 136) == 5 and drawn_sectors(torch.tensor([3]), 136) == 5
    assert drawn_sectors(torch.arange(4), 136) == 17 == sequential_sectors(4, 136)
    assert drawn_sectors(torch.tensor([7, 7, 2]), 512) == 32


def test_configs_fit_the_register_file():
    """Every GPU config keeps its programs resident: maxnreg x 32 lanes x warps x programs per SM <= 65536 registers,
    and a step covers every warp (ROWS >= num_warps, so no unit is loaded twice by replicated lanes)."""
    from bench_random_rows import _CONFIGS, _INTERPRET, MAX_PPS

    if _INTERPRET:
        pytest.skip("the interpreter's one config")
    assert len(_CONFIGS) >= 4 and MAX_PPS == max(c.kwargs["PPS"] for c in _CONFIGS)
    for c in _CONFIGS:
        assert c.maxnreg * 32 * c.num_warps * c.kwargs["PPS"] <= 65536, c
        assert c.kwargs["ROWS"] >= c.num_warps and c.num_stages == 1, c


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_random_rows_benchmark_refuses_to_run_without_a_gpu():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_random_rows.py")],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr


def test_read_rows_rejects_bad_inputs():
    from bench_random_rows import read_rows

    t = torch.zeros(136 * 4, dtype=torch.uint8)
    idx = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError):
        read_rows(t, idx, 132)  # not a multiple of 8
    with pytest.raises(ValueError):
        read_rows(t[:-8], idx, 136)  # not whole rows
    with pytest.raises(ValueError, match="16-byte aligned"):
        read_rows(torch.zeros(136 * 5, dtype=torch.uint8)[136:], idx, 136)  # whole rows, base 8 bytes past 16
    with pytest.raises(ValueError):
        read_rows(t.float(), idx, 136)
    with pytest.raises(ValueError):
        read_rows(t, idx.int(), 136)
