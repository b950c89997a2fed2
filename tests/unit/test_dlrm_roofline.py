"""Roofline arithmetic: expected unique rows, compulsory bytes/FLOPs formulas, floors, machine measurement on CPU."""

import math

import pytest
import torch

from kbstudy.suites.dlrm_bench import exec_source, load_dlrm_problems
from kbstudy.suites.dlrm_bench.roofline import (
    Machine,
    Work,
    compulsory_work,
    expected_sectors,
    expected_unique,
    floor_ms,
    measure_machine,
    problem_floor,
)
from kbstudy.suites.dlrm_bench.roofline import numeric_constants as _numeric_constants

MACHINE = Machine(device="cuda", name="test", bandwidth_bytes_per_s=4.0e12,
                  matmul_flops_per_s={"bf16": 800e12, "fp32": 50e12}, l2_bytes=60 << 20, method="fixed")


def test_expected_unique_limits():
    assert expected_unique(1000, 0) == 0
    assert expected_unique(1000, 1) == pytest.approx(1.0)
    assert expected_unique(10, 10**6) == pytest.approx(10.0)
    # few draws from a huge table are almost all distinct; 0.2 N draws give N (1 - e^-0.2)
    assert expected_unique(4_000_000, 819_200) == pytest.approx(4e6 * (1 - math.exp(-0.2048)), rel=1e-4)
    with pytest.raises(ValueError):
        expected_unique(0, 5)


def test_expected_unique_matches_sampling():
    torch.manual_seed(0)
    n, draws = 5000, 4000
    observed = sum(torch.randint(0, n, (draws,)).unique().numel() for _ in range(20)) / 20
    assert observed == pytest.approx(expected_unique(n, draws), rel=0.02)


def test_expected_sectors_against_hand_counts_and_sampling():
    """Whole-sector rows: E[U] x sectors per row. One draw of a 136-byte row (row r at byte 136 r): five sectors
    whatever r. Every row of a 4-byte table drawn: all N / 8 sectors. A sampled table of 136-byte rows agrees."""
    assert expected_sectors(4_000_000, 512, 819_200) == pytest.approx(16 * expected_unique(4_000_000, 819_200))
    assert expected_sectors(1000, 136, 1) == pytest.approx(5.0, rel=1e-3)  # 4 start offsets mod 32, 5 sectors each
    assert expected_sectors(800, 4, 10**6) == pytest.approx(100.0)
    assert expected_sectors(8, 4, 1) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        expected_sectors(10, 0, 5)
    # exact for any table size, against a sector-by-sector sum (tables shorter than one sector pattern, a partial last
    # pattern) and zero draws
    for n_rows, row, draws in [(1, 32, 0), (4, 4, 2), (1, 4, 1), (1, 136, 1), (3, 136, 2), (5, 20, 2), (7, 136, 3),
                               (9, 4, 5), (13, 24, 40)]:
        by_sector = sum(1 - (1 - sum(1 for r in range(n_rows) if r * row < (q + 1) * 32 and (r + 1) * row > q * 32)
                             / n_rows) ** draws for q in range(-(-n_rows * row // 32)))
        assert expected_sectors(n_rows, row, draws) == pytest.approx(by_sector, abs=1e-9), (n_rows, row, draws)
    torch.manual_seed(1)
    n, row, draws = 4000, 136, 1500
    observed = []
    for _ in range(20):
        rows = torch.randint(0, n, (draws,)).unique()
        first, last = rows * row // 32, (rows * row + row - 1) // 32  # sectors each drawn row spans
        spans = torch.cat([torch.arange(int(a), int(b) + 1) for a, b in zip(first, last)])
        observed.append(spans.unique().numel())
    assert sum(observed) / 20 == pytest.approx(expected_sectors(n, row, draws), rel=0.01)


def test_sector_bytes_exceed_bytes_only_for_unaligned_gathers():
    """In whole DRAM sectors the fp32 gathers (rows of 512 bytes) cost their bytes; problem 6's 136-byte int8 rows cost
    more (five sectors, less the ones adjacent drawn rows share) and problem 5's 4-byte state entries one sector of
    eight each; the contiguous problems carry no sector count."""
    ratios = {}
    for p in load_dlrm_problems(1.0):
        ns = exec_source(p.source, p.name)
        torch.manual_seed(0)
        inputs = ns["get_inputs"]() if p.problem_id in (2, 7, 8) else None
        row = problem_floor(p.problem_id, _numeric_constants(ns), MACHINE, inputs)
        assert row["sector_ms"] == pytest.approx(1e3 * row["sector_bytes"] / 4.0e12)
        ratios[p.problem_id] = row["sector_bytes"] / row["bytes"]
        del inputs
    assert all(ratios[p] == pytest.approx(1.0) for p in (1, 2, 3, 4, 7, 8, 9, 10, 11, 12)), ratios
    # closed forms, N = 4M rows and n = 819,200 draws: four 136-byte rows span 17 sectors, 14 inside one row and 3
    # shared by two (untouched with probability (1 - 2 / N)^n); eight 4-byte state entries share one sector
    n_rows, n = 4_000_000, 819_200
    u = expected_unique(n_rows, n)
    one, two, eight = (-math.expm1(n * math.log1p(-k / n_rows)) for k in (1, 2, 8))
    c6 = _numeric_constants(exec_source(load_dlrm_problems(problem_ids=[6])[0].source, "p6"))
    w6 = compulsory_work(6, c6)
    assert w6.sector_bytes - w6.bytes == pytest.approx(n_rows / 4 * (14 * one + 3 * two) * 32 - u * 136)
    assert 1.10 < ratios[6] < 1.16  # rows: between 136 and 160 bytes each
    c5 = _numeric_constants(exec_source(load_dlrm_problems(problem_ids=[5])[0].source, "p5"))
    w5 = compulsory_work(5, c5)
    assert w5.sector_bytes - w5.bytes == pytest.approx(n_rows / 8 * eight * 32 - u * 4)


def test_problem1_full_size_bytes():
    consts = exec_source(load_dlrm_problems(problem_ids=[1])[0].source, "p1")
    work = compulsory_work(1, _numeric_constants(consts))
    u = expected_unique(4_000_000, 8192 * 100)
    assert work.bytes == pytest.approx(8192 * 100 * 8 + u * 512 + 8192 * 512)
    assert work.flops == 8192 * 100 * 128
    ms, bound = floor_ms(work, MACHINE)
    assert bound == "memory" and ms == pytest.approx(1e3 * work.bytes / 4.0e12)


def test_dcn_is_compute_bound_and_dense_backward_writes_whole_table():
    c10 = _numeric_constants(exec_source(load_dlrm_problems(problem_ids=[10])[0].source, "p10"))
    w10 = compulsory_work(10, c10)
    assert w10.precision == "bf16"
    assert w10.flops == pytest.approx(3 * (4 * 8192 * 3456 * 512 + 3 * 8192 * 3456))
    assert floor_ms(w10, MACHINE)[1] == "compute"
    c4 = _numeric_constants(exec_source(load_dlrm_problems(problem_ids=[4])[0].source, "p4"))
    assert compulsory_work(4, c4).bytes > 4_000_000 * 128 * 4
    # the fused sparse Adagrad update (5) needs far less traffic than a dense gradient (4)
    c5 = _numeric_constants(exec_source(load_dlrm_problems(problem_ids=[5])[0].source, "p5"))
    assert compulsory_work(5, c5).bytes < 0.5 * compulsory_work(4, c4).bytes


def test_every_problem_has_positive_work_at_small_scale():
    for p in load_dlrm_problems(1 / 64):
        ns = exec_source(p.source, p.name)
        torch.manual_seed(0)
        work = compulsory_work(p.problem_id, _numeric_constants(ns), ns["get_inputs"]())
        assert work.bytes > 0 and work.flops >= 0, p.name
    with pytest.raises(ValueError):
        compulsory_work(7, {})
    with pytest.raises(KeyError):
        compulsory_work(13, {})


def test_floor_takes_the_slower_side():
    w = Work(bytes=4e9, flops=8e14, precision="bf16", formula="x")
    ms, bound = floor_ms(w, MACHINE)
    assert bound == "compute" and ms == pytest.approx(1e3)


def test_measure_machine_on_cpu():
    m = measure_machine("cpu", copy_bytes=16 << 20, matmul_n=256, reps=2)
    assert m.device == "cpu" and m.name.startswith("CPU")
    assert m.bandwidth_bytes_per_s > 1e8
    assert set(m.matmul_flops_per_s) == {"bf16", "fp32"} and all(v > 0 for v in m.matmul_flops_per_s.values())
    assert Machine.from_dict(__import__("json").loads(m.to_json())) == m


def test_problem12_flops_count_forward_and_backward():
    """logits (2 B F) + dL/dh (B F) + dL/dw (2 B F): 5 B F (was 4 B F; the floor, memory-bound, is unchanged)."""
    c12 = _numeric_constants(exec_source(load_dlrm_problems(problem_ids=[12])[0].source, "p12"))
    w12 = compulsory_work(12, c12)
    assert w12.flops == 5 * 65536 * 256
    assert floor_ms(w12, MACHINE)[1] == "memory"


def test_launch_latency_and_launch_bound():
    from kbstudy.suites.dlrm_bench.roofline import LAUNCH_BOUND_FACTOR, launch_bound, launch_latency_ms

    assert launch_latency_ms(MACHINE) is None and launch_latency_ms({}) is None  # measured before launches were
    m = {"details": {"launch_triton_ms": [0.030, 0.010, 0.012], "launch_torch_ms": [0.005]}}
    assert launch_latency_ms(m) == pytest.approx(0.012)  # the median of the Triton samples
    assert LAUNCH_BOUND_FACTOR == 3.0
    assert launch_bound(0.007, 0.012) is True and launch_bound(0.5, 0.012) is False
    assert launch_bound(0.75, 0.25) is False and launch_bound(0.74, 0.25) is True  # below 3 launches, strictly
    assert launch_bound(None, 0.012) is None and launch_bound(0.1, None) is None
    assert launch_bound(float("nan"), 0.012) is None


def test_measure_machine_times_a_launch_on_cpu():
    import os

    m = measure_machine("cpu", copy_bytes=1 << 20, matmul_n=64, reps=3)
    assert len(m.details["launch_torch_ms"]) == 3 and all(t > 0 for t in m.details["launch_torch_ms"])
    if os.environ.get("TRITON_INTERPRET") != "1":  # Triton launches on a CPU only under the interpreter
        assert "launch_triton_ms" not in m.details


def test_measure_machine_gather_bandwidth_on_cpu():
    """The gather ceiling (random 512-byte rows by ``index_select``): read + write bytes over the fastest call, an
    extra ``details`` column; the copy bandwidth (what the floors use) is still the machine's bandwidth."""
    from kbstudy.suites.dlrm_bench.roofline import GATHER_DIM

    m = measure_machine("cpu", copy_bytes=1 << 20, matmul_n=64, reps=3, gather_rows=8192, gather_n=1024)
    d = m.details
    assert d["gather_rows"] == 8192 and d["gather_n"] == 1024 and d["gather_row_bytes"] == GATHER_DIM * 4 == 512
    assert len(d["gather_ms"]) == 3 and all(t > 0 for t in d["gather_ms"])
    assert d["gather_bytes_per_s"] == pytest.approx(2 * 1024 * 512 / (min(d["gather_ms"]) * 1e-3))
    assert m.bandwidth_bytes_per_s == pytest.approx(2 * (1 << 20) / (min(d["copy_ms"]) * 1e-3))
    assert Machine.from_dict(__import__("json").loads(m.to_json())) == m
    # defaults: a table of 512-byte rows far larger than the L2 on a GPU (4M rows = 2 GB), the problems' 819,200 lookups
    m2 = measure_machine("cpu", copy_bytes=1 << 20, matmul_n=64, reps=2)
    assert m2.details["gather_rows"] == 262_144 and m2.details["gather_n"] == 65_536


def test_copy_at_size_needs_a_gpu():
    """The copy of the compulsory bytes is timed by device time, which a CPU does not have: a clear error."""
    from kbstudy.suites.dlrm_bench.roofline import copy_at_size

    with pytest.raises(ValueError, match="CUDA"):
        copy_at_size(1 << 20, "cpu")


def test_gpu_floors_time_a_sector_copy_only_where_sectors_exceed_bytes(monkeypatch):
    """``measurement_run.measure_and_floors`` on a GPU times a copy of each problem's compulsory bytes and, where the DRAM
    sectors exceed them (problems 5 and 6, not 1), a copy of ``sector_bytes`` too, as ``sector_copy_*`` columns
    (without its flush key). ``copy_at_size`` is replaced by a recorder (no GPU here) that returns the bytes it got."""
    import dataclasses

    from kbstudy.suites.dlrm_bench import measurement_run


    asked = []

    def fake_copy(nbytes, device, reps=20):
        asked.append(nbytes)
        return {"copy_ms": nbytes / 1e9, "copy_q1_ms": 0.0, "copy_q3_ms": 0.0, "copy_flush": "read"}

    monkeypatch.setattr(measurement_run, "copy_at_size", fake_copy)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    machine = {**dataclasses.asdict(MACHINE), "device": "cuda"}
    _, rows = measurement_run.measure_and_floors("cuda", 1 / 64, [1, 5, 6], seed=42, reps=1, machine_dict=machine)
    by_id = {r["problem_id"]: r for r in rows}
    assert "sector_copy_ms" not in by_id[1] and by_id[1]["copy_ms"] == by_id[1]["bytes"] / 1e9
    for p in (5, 6):
        r = by_id[p]
        assert r["sector_bytes"] > r["bytes"] and r["sector_copy_ms"] == r["sector_bytes"] / 1e9, r
        assert r["copy_ms"] == r["bytes"] / 1e9 and "sector_copy_flush" not in r and r["copy_flush"] == "read"
    assert asked == [by_id[1]["bytes"], by_id[5]["bytes"], by_id[5]["sector_bytes"], by_id[6]["bytes"],
                     by_id[6]["sector_bytes"]]
