"""Our Triton kernels on the code paths the problems' own inputs rarely reach, under the Triton interpreter on CPU:
odd (non-power-of-two) sizes and their masks, empty and full bags, long runs of one row (backward passes: problem
4's per-row lookup lists, one list crossing many blocks), problem 5's scan over the table rows with many blocks and
look-back windows (rows at both ends of the table, a bag hitting one row many times, repeated calls), fewer samples than programs and many row chunks per sample
(problem 8's balanced runs and its one-tile-ahead pipeline), many
scan blocks with repeated calls (problem 7's one-pass look-back: ticket counter and epochs), several reduction groups
(problem 12's last-program reductions), unaligned table offsets (problem 3), and that the scratch counters are left
at zero for the next call.

Each case builds the problem's ``Model`` and our ``ModelNew`` with the same seed, feeds both the same inputs and
compares ours with float64 (relative L2, as kbstudy's verdict) and with eager (KernelBench-style ``allclose``). All
cases run in one child process with ``TRITON_INTERPRET=1`` set before triton is imported.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from kbstudy.dlrm_bench import load_dlrm_candidates, load_dlrm_problems, exec_source

PROBLEMS = {p.problem_id: p for p in load_dlrm_problems(1.0)}
CANDS = {c.problem_id: c for c in load_dlrm_candidates()}
NS = {}


def modules(pid):
    if pid not in NS:
        NS[pid] = (exec_source(PROBLEMS[pid].source, PROBLEMS[pid].name),
                   exec_source(CANDS[pid].source, f"cand_edge_{pid}"))
    return NS[pid]


def flat(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]


def rel_l2(a, b):
    a, b = a.detach().double().reshape(-1), b.detach().double().reshape(-1)
    if a.shape != b.shape:
        return float("inf")
    num, den = float((a - b).norm()), float(b.norm())
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))


def compare(name, pid, init, inputs, ours=None, calls=2):
    ns, cn = modules(pid)
    torch.manual_seed(0); ref = ns["Model"](*init).double()
    torch.manual_seed(0); eager = ns["Model"](*init)
    if ours is None:
        torch.manual_seed(0); ours = cn["ModelNew"](*init)
    inputs64 = [x.double() if x.is_floating_point() else x for x in inputs]
    pristine = [x.clone() for x in inputs]
    with torch.no_grad():
        for _ in range(calls):  # repeated calls: scratch state (counters, epochs) must carry over correctly
            got = flat(ours(*inputs))
        exp, base = flat(ref(*inputs64)), flat(eager(*inputs))
    tol = 1e-2 if base[0].dtype == torch.bfloat16 else 1e-4
    return {"case": name, "pid": pid,
            "shapes": [tuple(g.shape) for g in got] == [tuple(b.shape) for b in base],
            "dtypes": [g.dtype for g in got] == [b.dtype for b in base],
            "rel": max(rel_l2(g, e) for g, e in zip(got, exp)),
            "eager_rel": max(rel_l2(b, e) for b, e in zip(base, exp)),
            "allclose": all(g.shape == b.shape and torch.allclose(g.float(), b.float(), atol=tol, rtol=tol)
                            for g, b in zip(got, base)),
            "unchanged": all(torch.equal(a, b) for a, b in zip(inputs, pristine)), "ours": ours}


rows = []
g = torch.Generator().manual_seed(1)
ri = lambda lo, hi, shape: torch.randint(lo, hi, shape, generator=g)

# 1: odd dimension and bag size (masks on both tile axes)
rows.append(compare("p1 D=24 L=5", 1, [50, 24], [ri(0, 50, (7, 5))]))
# 2: zero-length bags are not in the problem (lengths >= 1) but must give zero rows; B not a multiple of GROUP
lengths = torch.tensor([3, 0, 1, 7, 0, 2, 5, 1, 1, 4, 6])
rows.append(compare("p2 B=11 with empty bags", 2, [40, 20],
                    [ri(0, 40, (int(lengths.sum()),)), lengths, torch.rand(int(lengths.sum()), generator=g)]))
# 3: odd hotness (1 .. 9), odd D, and a table whose start is not 16-byte aligned
ns3, cn3 = modules(3)
init3 = [[5, 70, 3, 11], [1, 9, 2, 4], 20]
idx3 = torch.cat([ri(0, n, (6, h)) for n, h in zip(*init3[:2])], dim=1)
torch.manual_seed(0); ours3 = cn3["ModelNew"](*init3)
big = torch.empty(1 + sum(init3[0]) * 20)
off = 1  # one float past a 16-byte boundary
for bag, n in zip(ours3.bags, init3[0]):
    big[off:off + n * 20] = bag.weight.detach().reshape(-1)
    bag.weight = torch.nn.Parameter(big[off:off + n * 20].view(n, 20))
    off += n * 20
r = compare("p3 odd hotness, unaligned tables", 3, init3, [idx3], ours=ours3)
r["aligned_flag"] = ours3._table_meta(idx3.device)[4]
rows.append(r)
# 4 and 5: a tiny table, so rows repeat in long runs that cross program boundaries
rows.append(compare("p4 long runs", 4, [3, 20], [ri(0, 3, (9, 7)), torch.randn(9, 20, generator=g)]))
# 4: every lookup the same row (one list of 60 lookups crossing blocks), and a table with untouched rows between
rows.append(compare("p4 one row", 4, [1, 16], [torch.zeros(6, 10, dtype=torch.int64), torch.randn(6, 16, generator=g)]))
rows.append(compare("p4 sparse rows", 4, [300, 12], [ri(0, 300, (11, 3)), torch.randn(11, 12, generator=g)]))
rows.append(compare("p5 long runs", 5, [3, 20], [ri(0, 3, (9, 7)), torch.randn(9, 20, generator=g),
                                                  torch.randn(3, 20, generator=g), torch.rand(3, generator=g)]))
rows.append(compare("p5 all one row", 5, [40, 16], [torch.full((5, 6), 17), torch.randn(5, 16, generator=g),
                                                    torch.randn(40, 16, generator=g), torch.rand(40, generator=g)]))
# 5: many scan blocks and look-back windows (small blocks): rows at both ends of the table, one bag hitting one row
# many times, rows repeated across bags, untouched blocks (count 0) between touched ones
ns5, cn5 = modules(5)
idx5 = ri(0, 700, (13, 11))
idx5[0] = 0
idx5[1] = 699
idx5[2, :6] = 350
idx5[3] = torch.tensor([0, 699, 5, 5, 694, 1, 698, 350, 0, 699, 2])
idx5[4:, :] = torch.where(idx5[4:, :] // 16 % 3 == 1, idx5[4:, :] + 16, idx5[4:, :]).clamp(max=699)
torch.manual_seed(0); ours5 = cn5["ModelNew"](700, 24)
ours5.BLOCK_R, ours5.WINDOW = 16, 4  # 44 scan blocks, look-back windows of 4
rows.append(compare("p5 many scan blocks, both ends", 5, [700, 24],
                    [idx5, torch.randn(13, 24, generator=g), torch.randn(700, 24, generator=g),
                     torch.rand(700, generator=g)], ours=ours5, calls=3))
# 5: more lookups than table rows (the outputs' worst-case size is the table), one row per scan block
torch.manual_seed(0); ours5b = cn5["ModelNew"](9, 16)
ours5b.BLOCK_R, ours5b.WINDOW = 1, 2
rows.append(compare("p5 tiny blocks", 5, [9, 16], [ri(0, 9, (8, 12)), torch.randn(8, 16, generator=g),
                                                    torch.randn(9, 16, generator=g), torch.rand(9, generator=g)],
                    ours=ours5b))
# 5: the look-back itself on status words the interpreter's in-order programs never produce: block counts only
# (flag 1) over many windows, the nearest inclusive prefix (flag 2) several windows back, and an unpublished word
# (0) before an inclusive prefix, which must not be waited for
probe_ns = exec_source(CANDS[5].source + '''

@triton.jit
def _lookback_probe(state_ptr, out_ptr, WINDOW: tl.constexpr, MAX_SPIN: tl.constexpr):
    t = tl.program_id(0)
    tl.store(out_ptr + t, _lookback(state_ptr, t, WINDOW, MAX_SPIN))
''', "cand_5_lookback_probe")
cnt = ri(0, 6, (40,))
incl = torch.cumsum(cnt, 0)
words = (1 << 32) | cnt
for i in (0, 3, 18):
    words[i] = (2 << 32) | incl[i]
words[2] = 0
out = torch.full((40,), -1, dtype=torch.int64)
probe_ns["_lookback_probe"][(40,)](words, out, WINDOW=4, MAX_SPIN=8)
rows.append({"case": "p5 look-back windows", "pid": 5,
             "prefix_ok": torch.equal(out[4:], (incl - cnt)[4:]), "got": out.tolist(), "want": (incl - cnt).tolist()})
# 6: D a multiple of 4 but not of 16 words' worth
rows.append(compare("p6 D=20 L=7", 6, [30, 20], [ri(0, 30, (5, 7))]))
# 7: many scan blocks (small blocks), negative ids, empty bags, three calls (epochs 1..3)
ns7, cn7 = modules(7)
ours7 = cn7["ModelNew"](1000)
ours7.BLOCK, ours7.BLOCK_G = 64, 16
len7 = ri(0, 4, (203,))
len7[:20] = 0
ids7 = ri(-2**40, 2**40, (int(len7.sum()),))
r = compare("p7 many blocks, negative ids", 7, [1000], [ids7, len7], ours=ours7, calls=3)
counter, state = ours7._scratch[str(ids7.device)]
r["counter_after"] = int(counter.item())
r["epoch"] = ours7._epoch
rows.append(r)
rows.append(compare("p7 no bags", 7, [97], [torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)]))
# 8: lengths 0 and max_length, B not a multiple of GROUP, odd D
len8 = torch.tensor([0, 6, 6, 1, 0, 3, 6])
rows.append(compare("p8 empty and full samples", 8, [6], [torch.randn(int(len8.sum()), 12, generator=g), len8]))
# 8: fewer samples than programs; many samples per program with lengths 0 .. Lmax over several row chunks
len8 = torch.tensor([5])
rows.append(compare("p8 one sample", 8, [5], [torch.randn(5, 16, generator=g), len8]))
len8 = ri(0, 18, (41,))
len8[:3] = torch.tensor([0, 17, 0])
rows.append(compare("p8 many samples, chunks", 8, [17], [torch.randn(int(len8.sum()), 20, generator=g), len8]))
# 9: fewer features and an odd dimension
rows.append(compare("p9 NS=5 D=24", 9, [5], [torch.randn(3, 24, generator=g), torch.randn(3, 5, 24, generator=g)]))
# 10 and 11: M, N, K not multiples of the tiles
rows.append(compare("p10 odd sizes", 10, [48, 24, 2], [torch.randn(37, 48, generator=g).to(torch.bfloat16)]))
rows.append(compare("p11 odd sizes", 11, [13, 40, 24, 20], [torch.randn(37, 13, generator=g).to(torch.bfloat16)]))
# 12: several first-level reduction groups, B not a multiple of the tile
ns12, cn12 = modules(12)
torch.manual_seed(0); ours12 = cn12["ModelNew"](20)
ours12.GROUP, ours12.PROGRAMS_PER_SM = 2, 3  # 6 programs (2 "SMs" on a CPU) in 3 groups
h12 = torch.randn(101, 20, generator=g)
r = compare("p12 three groups", 12, [20], [h12, ri(0, 2, (101,)).float()], ours=ours12, calls=3)
r["counters_after"] = int(ours12._scratch[(str(h12.device), 22)][0].abs().sum())
rows.append(r)
for r in rows:
    r.pop("ours", None)
print(json.dumps(rows))
"""


@pytest.fixture(scope="module")
def edge_results():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {r["case"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}


CASES = ["p1 D=24 L=5", "p2 B=11 with empty bags", "p3 odd hotness, unaligned tables", "p4 long runs",
         "p4 one row", "p4 sparse rows", "p5 long runs", "p5 all one row",
         "p5 many scan blocks, both ends", "p5 tiny blocks", "p6 D=20 L=7", "p7 many blocks, negative ids", "p7 no bags",
         "p8 empty and full samples", "p8 one sample",
         "p8 many samples, chunks", "p9 NS=5 D=24", "p10 odd sizes", "p11 odd sizes", "p12 three groups"]


@pytest.mark.parametrize("case", CASES)
def test_kernel_edge_case_matches_reference(edge_results, case):
    r = edge_results[case]
    assert r["shapes"] and r["dtypes"] and r["unchanged"], r
    assert r["allclose"], r  # KernelBench-style, against eager
    # kbstudy-style, against float64: bf16 problems within their threshold, fp32 ones within a few times eager's error
    bound = 3e-2 if r["pid"] in (10, 11) else max(4 * r["eager_rel"], 1e-6)
    assert r["rel"] <= bound, r


def test_p5_lookback_walks_windows_to_the_nearest_inclusive_prefix(edge_results):
    r = edge_results["p5 look-back windows"]
    assert r["prefix_ok"], r


def test_scratch_state_is_reset_between_calls(edge_results):
    p7 = edge_results["p7 many blocks, negative ids"]
    assert p7["counter_after"] == 0 and p7["epoch"] == 3  # ticket counter back at zero, one epoch per call
    assert edge_results["p12 three groups"]["counters_after"] == 0
    assert edge_results["p3 odd hotness, unaligned tables"]["aligned_flag"] is False
