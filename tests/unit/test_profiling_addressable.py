"""Amdahl bound, projected speedups and the addressable fraction under a rule."""

import math

import pandas as pd
import pytest

from kbstudy.profiling.addressable import (
    ADDRESSABLE_RULES,
    addressable_fraction,
    amdahl_bound,
    category_shares,
    paper_comparison,
    projected_speedup,
    rule_categories,
    summarize,
)


def test_amdahl_bound_values():
    assert amdahl_bound(0.0) == 1.0
    assert amdahl_bound(0.5) == pytest.approx(2.0)
    assert amdahl_bound(0.582) == pytest.approx(2.392, abs=1e-3)
    assert amdahl_bound(0.089) == pytest.approx(1.0977, abs=1e-4)
    assert math.isinf(amdahl_bound(1.0))
    for bad in (-0.1, 1.1, float("nan")):
        with pytest.raises(ValueError):
            amdahl_bound(bad)


def test_projected_speedup():
    assert projected_speedup(0.3, 1.0) == pytest.approx(1.0)
    assert projected_speedup(0.5, 2.0) == pytest.approx(1 / (0.5 + 0.25))
    assert projected_speedup(0.4, math.inf) == pytest.approx(amdahl_bound(0.4))
    # monotone in s and bounded by Amdahl
    values = [projected_speedup(0.2, s) for s in (1.5, 2, 10, 1000)]
    assert values == sorted(values) and values[-1] < amdahl_bound(0.2)
    with pytest.raises(ValueError):
        projected_speedup(0.2, 0.0)


def test_rules():
    assert "gemm" not in rule_categories("non_vendor") and "embedding" in rule_categories("non_vendor")
    assert "attention" in rule_categories("non_vendor_plus_attention")
    assert rule_categories(["gemm"]) == frozenset({"gemm"})
    with pytest.raises(ValueError):
        rule_categories(["not-a-category"])
    with pytest.raises(KeyError):
        rule_categories("no-such-rule")
    assert ADDRESSABLE_RULES["non_vendor"] < ADDRESSABLE_RULES["all_compute"]


def _kernels():
    return pd.DataFrame({
        "workload_key": ["a", "a", "a", "a", "b", "b"],
        "category": ["gemm", "attention", "elementwise", "other", "embedding", "gemm"],
        "time_us_per_step": [60.0, 20.0, 15.0, 5.0, 30.0, 10.0],
    })


def test_shares_and_summary():
    shares = category_shares(_kernels())
    assert shares.sum(axis=1).tolist() == pytest.approx([1.0, 1.0])
    assert shares.loc["a", "gemm"] == pytest.approx(0.6)
    assert addressable_fraction(shares.loc["a"]) == pytest.approx(0.15)
    assert addressable_fraction(shares.loc["a"], "non_vendor_plus_attention") == pytest.approx(0.35)
    workloads = pd.DataFrame({"workload_key": ["a", "b"], "step_ms_median": [0.2, 0.04]})
    s = summarize(_kernels(), workloads)
    assert s.loc["b", "addressable_fraction"] == pytest.approx(0.75)
    assert s.loc["b", "amdahl_bound"] == pytest.approx(4.0)
    assert s.loc["a", "gemm_attention_share"] == pytest.approx(0.8)
    assert s.loc["a", "other_share"] == pytest.approx(0.05)
    assert s.loc["a", "speedup_at_2x"] == pytest.approx(1 / (0.85 + 0.075))
    assert s.loc["a", "f_of_step"] == pytest.approx(15.0 / 200.0)  # 15 µs addressable in a 0.2 ms step
    cmp = paper_comparison(s, {"a": "transformer", "b": "recommender"})
    assert cmp.loc["paper", "addressable_max"] == pytest.approx(0.582)
    assert cmp.loc["all (ours)", "addressable_max"] == pytest.approx(0.75)
