"""kbstudy.analysis.scoring against hand-computed values (fixture rows in tests/support/fixture_records.py)."""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest
from support.fixture_records import all_records, config_a, record, write_store

from kbstudy.analysis import scoring
from kbstudy.analysis.per_problem import per_problem_table
from kbstudy.records.frames import load_evaluations, load_frames, withdraw_event_only_speedups
from kbstudy.records.store import RecordStore


@pytest.fixture()
def frame(tmp_path) -> pd.DataFrame:
    write_store(tmp_path / "run")
    return load_evaluations([tmp_path / "run"])


def _row(table: pd.DataFrame, config: str) -> pd.Series:
    rows = table[table["model_config"] == config]
    assert len(rows) == 1
    return rows.iloc[0]


def test_summarize_kbstudy_eager(frame):
    a = _row(scoring.summarize(frame), "A")
    assert a["n"] == 5 and a["n_records"] == 6 and a["n_skipped"] == 1 and a["n_reference_error"] == 0
    assert a["compiled_pct"] == pytest.approx(80.0)
    assert a["kernelbench_correct_pct"] == pytest.approx(60.0)
    assert a["kbstudy_correct_pct"] == pytest.approx(40.0)
    assert a["correct_pct"] == pytest.approx(40.0)
    assert a["n_correct"] == 2 and a["n_timed"] == 2
    # correct speedups {2.0, 0.5}: fast_p = #(> p) / 5, strict: 2.0 is not > 2
    assert [a["fast_0"], a["fast_1"], a["fast_1.2"], a["fast_1.5"], a["fast_2"]] == pytest.approx([0.4, 0.2, 0.2, 0.2, 0.0])
    assert a["speedup_median"] == pytest.approx(1.25)
    assert a["speedup_geomean"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)


def test_summarize_kernelbench_verdict(frame):
    a = _row(scoring.summarize(frame, correctness="kernelbench"), "A")
    assert a["correct_pct"] == pytest.approx(60.0)
    # correct speedups {2.0, 0.5, 4.0}
    assert [a["fast_0"], a["fast_1"], a["fast_2"]] == pytest.approx([0.6, 0.4, 0.2])
    assert a["speedup_median"] == pytest.approx(2.0)
    assert a["speedup_geomean"] == pytest.approx(4.0 ** (1 / 3))


def test_summarize_compile_baseline(frame):
    a = _row(scoring.summarize(frame, baseline="compile"), "A")
    # kbstudy-correct speedups vs torch.compile {1.0, 0.25}: 1.0 is not > 1
    assert [a["fast_0"], a["fast_1"]] == pytest.approx([0.4, 0.0])
    assert a["speedup_median"] == pytest.approx(0.625)
    assert a["speedup_geomean"] == pytest.approx(0.5)
    assert a["baseline"] == "compile"


def test_multi_sample_rates_are_means_over_samples(frame):
    b = _row(scoring.summarize(frame), "B")
    # 6 attempts (every outcome but skipped/reference_error), 1 correct; compiled: 3 evaluated + 1 crashed-after-build
    assert b["n"] == 6
    assert b["correct_pct"] == pytest.approx(100 / 6)
    assert b["compiled_pct"] == pytest.approx(400 / 6)
    assert b["fast_1"] == pytest.approx(1 / 6)


def test_all_skipped_configuration_has_no_rates(frame):
    c = _row(scoring.summarize(frame), "C")
    assert c["n"] == 0 and c["n_skipped"] == 2
    assert math.isnan(c["correct_pct"]) and math.isnan(c["fast_0"]) and math.isnan(c["speedup_geomean"])


def test_n_problems_counts_missing_problems_as_failures(frame):
    a = _row(scoring.summarize(frame[frame["model_config"] == "A"], n_problems=10), "A")
    assert a["n"] == 10
    assert a["kbstudy_correct_pct"] == pytest.approx(20.0)
    assert a["fast_1"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="more than n_problems"):
        scoring.summarize(frame[frame["model_config"] == "A"], n_problems=3)


def test_reference_error_is_not_an_attempt():
    recs = config_a() + [record("A", 7, outcome="reference_error")]
    frame = pd.DataFrame([r.__dict__ for r in recs])
    a = _row(scoring.summarize(frame), "A")
    assert a["n"] == 5 and a["n_reference_error"] == 1


def test_duplicate_attempts_raise():
    recs = config_a() + [record("A", 1, kb=True, kbs=True, eager=3.0, run="other")]
    frame = pd.DataFrame([r.__dict__ for r in recs])
    with pytest.raises(ValueError, match="repeat an attempt"):
        scoring.summarize(frame)
    by_run = scoring.summarize(frame, by=["run", "model_config"])
    assert list(by_run["run"]) == ["fixture", "other"]


def test_bad_arguments_raise(frame):
    with pytest.raises(ValueError, match="correctness"):
        scoring.summarize(frame, correctness="allclose")
    with pytest.raises(ValueError, match="baseline"):
        scoring.summarize(frame, baseline="cudnn")
    with pytest.raises(ValueError, match="lacks columns"):
        scoring.summarize(frame.drop(columns=["kbstudy_correct"]))


def test_fast_p_function_matches_kernelbench_definition():
    # KernelBench score.fastp: correct-only speedups, strict >, divided by n (all attempts)
    correct = [True, False, True, True, False]
    speedup = [2.0, 0.75, 1.5, 5.0, 1.0]
    assert scoring.fast_p(correct, speedup, 1.0) == pytest.approx(3 / 5)
    assert scoring.fast_p(correct, speedup, 1.5) == pytest.approx(2 / 5)
    assert scoring.fast_p(correct, speedup, 0.0) == pytest.approx(3 / 5)
    assert scoring.fast_p(correct, speedup, 1.0, n=10) == pytest.approx(3 / 10)
    with pytest.raises(ValueError):
        scoring.fast_p(correct, speedup, 1.0, n=2)


def test_geometric_mean():
    # KernelBench's tests/test_score.py case: speedups 0.1/0.2, 0.2/0.3, 0.05/0.01 over the three correct samples
    assert scoring.geometric_mean([0.5, 2 / 3, 5.0]) == pytest.approx(1.185631101, abs=1e-7)
    assert math.isnan(scoring.geometric_mean([]))
    with pytest.raises(ValueError):
        scoring.geometric_mean([1.0, 0.0])


def test_pass_at_k_estimator():
    assert scoring.pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    assert scoring.pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert scoring.pass_at_k(3, 1, 2) == pytest.approx(2 / 3)  # 1 - C(2,2)/C(3,2)
    assert scoring.pass_at_k(5, 0, 3) == 0.0
    assert scoring.pass_at_k(5, 4, 2) == 1.0
    for bad in [(3, 4, 1), (3, 1, 0), (3, 1, 4)]:
        with pytest.raises(ValueError):
            scoring.pass_at_k(*bad)


def test_pass_at_k_table(frame):
    table = scoring.pass_at_k_table(frame, ks=(1, 2, 3, 4))
    b = _row(table, "B")
    assert b["n_problems"] == 2 and b["min_samples"] == 3
    assert b["pass@1"] == pytest.approx((1 / 3 + 0) / 2)
    assert b["pass@2"] == pytest.approx((2 / 3 + 0) / 2)
    assert b["pass@3"] == pytest.approx(0.5)
    assert math.isnan(b["pass@4"])
    a = _row(table, "A")
    assert a["pass@1"] == pytest.approx(0.4)


def test_fast_p_curve_is_consistent_with_summary(frame):
    curve = scoring.fast_p_curve(frame, ps=[0.0, 1.0, 2.0])
    summary = scoring.summarize(frame)
    for config in ("A", "B"):
        got = curve[curve["model_config"] == config].set_index("p")["fast_p"]
        row = _row(summary, config)
        assert list(got) == pytest.approx([row["fast_0"], row["fast_1"], row["fast_2"]])


def test_outcome_table_and_correct_speedups(frame):
    outcomes = scoring.outcome_table(frame).set_index("model_config")
    assert outcomes.loc["A", "evaluated"] == 4 and outcomes.loc["A", "compile_error"] == 1
    assert outcomes.loc["C", "skipped"] == 2
    speeds = scoring.correct_speedups(frame)
    assert sorted(speeds[speeds["model_config"] == "A"]["speedup"]) == [0.5, 2.0]
    assert len(all_records()) == 14


# ------------------------------------------------------------------------------------------------ verified speedups


def _verified_frame(tmp_path) -> pd.DataFrame:
    """Configuration V: four correct kernels. Problem 1: 2.0x but not distinguishable from 1; problem 2: 1.5x,
    verified; problem 3: significantly slower (0.8x); problem 4: 1.2x with no test (too few samples). Configuration
    L: the same four as schema-1 records, made before the rule (no significance recorded)."""
    rows = [record("V", 1, kb=True, kbs=True, eager=2.0, compile=2.0, sig=False, sig_compile=True),
            record("V", 2, kb=True, kbs=True, eager=1.5, compile=0.5, sig=True, sig_compile=True),
            record("V", 3, kb=True, kbs=True, eager=0.8, compile=0.5, sig=True, sig_compile=True),
            record("V", 4, kb=True, kbs=True, eager=1.2, compile=1.2, sig=None, sig_compile=None)]
    legacy = [record("L", pid, kb=True, kbs=True, eager=s, sig=None) for pid, s in ((1, 2.0), (2, 1.5), (3, 0.8))]
    for rec in legacy:
        rec.schema_version = 1
    write_store(tmp_path / "verified", rows + legacy)
    return load_evaluations([tmp_path / "verified"])


def test_fast_p_counts_only_verified_speedups(tmp_path):
    frame = _verified_frame(tmp_path)
    v = _row(scoring.summarize(frame), "V")
    assert v["n_timed"] == 4 and v["n_faster"] == 3 and v["n_verified_faster"] == 1 and v["n_speedup_untested"] == 0
    assert v["fast_0"] == pytest.approx(1.0)  # p < 1: the rule does not apply
    assert [v["fast_1"], v["fast_1.2"], v["fast_1.5"], v["fast_2"]] == pytest.approx([0.25, 0.25, 0.0, 0.0])
    assert v["speedup_median"] == pytest.approx(1.35)  # the speedup statistics keep every correct kernel
    plain = _row(scoring.summarize(frame, significance=False), "V")  # KernelBench's definition
    assert [plain["fast_1"], plain["fast_1.5"]] == pytest.approx([0.75, 0.25])
    curve = scoring.fast_p_curve(frame, [0.5, 1.0, 1.4], by="model_config")
    assert list(curve[curve.model_config == "V"]["fast_p"]) == pytest.approx([1.0, 0.25, 0.25])
    compile_ = _row(scoring.summarize(frame, baseline="compile"), "V")
    # against compile, problems 1 (2.0x, verified) and 4 (1.2x, untested) are faster: only problem 1 counts
    assert compile_["fast_1"] == pytest.approx(0.25)
    assert compile_["n_verified_faster"] == 1 and compile_["n_faster"] == 2


def test_schema_1_records_predate_the_rule(tmp_path):
    legacy = _row(scoring.summarize(_verified_frame(tmp_path)), "L")
    assert legacy["n_speedup_untested"] == 3 and legacy["n_verified_faster"] == 2
    assert legacy["fast_1"] == pytest.approx(2 / 3)  # counted by the point estimate, as KernelBench counts


def test_fast_p_verified_argument():
    correct = [True, True, True]
    speedup = [2.0, 1.5, 0.9]
    assert scoring.fast_p(correct, speedup, 1.0, verified=[False, True, True]) == pytest.approx(1 / 3)
    assert scoring.fast_p(correct, speedup, 0.5, verified=[False, False, False]) == pytest.approx(1.0)
    assert scoring.fast_p(correct, speedup, 1.0) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        scoring.fast_p(correct, speedup, 1.0, verified=[True])


def test_noise_margin_from_null_reference_records(tmp_path):
    """The reference timed as a candidate measures the offset between two processes: a kernel's speedup must clear it
    (per hardware) to be verified, even when its own bootstrap interval excludes 1."""
    rows = [record("null:reference", pid, kb=True, kbs=True, eager=s, hardware="gpu")
            for pid, s in ((1, 0.98), (2, 1.01), (3, 1.03))]  # max |ln s| = ln 1.03: m = 3 %
    rows += [record("K", 1, kb=True, kbs=True, eager=1.02, hardware="gpu"),   # significant, inside the margin
             record("K", 2, kb=True, kbs=True, eager=1.5, hardware="gpu"),    # clears it
             record("K", 1, kb=True, kbs=True, eager=1.02, hardware="cpu")]   # no null:reference on this hardware
    for rec in rows:  # intervals of +-0.5 % around each speedup
        rec.speedup_vs_eager_ci_low, rec.speedup_vs_eager_ci_high = rec.speedup_vs_eager * 0.995, rec.speedup_vs_eager * 1.005
    write_store(tmp_path / "noise", rows)
    frame = load_evaluations([tmp_path / "noise"])
    assert scoring.noise_margins(frame) == {"gpu": pytest.approx(0.03)}
    table = scoring.summarize(frame, by=["model_config", "hardware"])
    gpu = table[(table.model_config == "K") & (table.hardware == "gpu")].iloc[0]
    cpu = table[(table.model_config == "K") & (table.hardware == "cpu")].iloc[0]
    assert gpu["n_faster"] == 2 and gpu["n_verified_faster"] == 1 and gpu["noise_margin"] == pytest.approx(0.03)
    assert cpu["n_verified_faster"] == 1 and cpu["noise_margin"] == 0.0
    off = scoring.summarize(frame, by=["model_config", "hardware"], noise_margin=0)
    assert off[(off.model_config == "K") & (off.hardware == "gpu")].iloc[0]["n_verified_faster"] == 2
    # the reference itself is never a verified speedup under its own margin
    null = table[table.model_config == "null:reference"].iloc[0]
    assert null["n_faster"] == 2 and null["n_verified_faster"] == 0
    with pytest.raises(ValueError):
        scoring.summarize(frame, noise_margin="sometimes")


def test_noise_margin_uses_a_quantile_once_there_are_enough_records(tmp_path):
    speeds = [1.0 + 0.001 * i for i in range(40)] + [3.0]  # one outlier among 41
    rows = [record("null:reference", pid, kb=True, kbs=True, eager=s) for pid, s in enumerate(speeds, start=1)]
    write_store(tmp_path / "many", rows)
    margin = scoring.noise_margins(load_evaluations([tmp_path / "many"]))["fixture-cpu"]
    assert 0.035 < margin < 0.04  # the 95th percentile, not the outlier's 200 %


def test_a_problems_own_null_offset_raises_its_bar(tmp_path):
    """A quantile margin lets the largest null offsets through (the H200's current 68, a 3D transposed convolution,
    timed 1.062x against itself with a tight interval): the null:reference of the same problem, precision and
    hardware raises that problem's bar on its side, so neither it nor a kernel within its offset is verified."""
    rows = [record("null:reference", pid, kb=True, kbs=True, eager=1.0 + 0.0004 * pid) for pid in range(1, 29)]
    rows += [record("null:reference", pid, kb=True, kbs=True, eager=1.0) for pid in range(32, 44)]
    rows += [record("null:reference", 30, kb=True, kbs=True, eager=1.062),
             record("null:reference", 31, kb=True, kbs=True, eager=0.90),
             record("K", 30, kb=True, kbs=True, eager=1.05),   # clears the hardware margin, not problem 30's offset
             record("K", 2, kb=True, kbs=True, eager=1.05),    # same speedup where the null offset is ~0
             record("K", 31, kb=True, kbs=True, eager=0.92),   # "slower" inside problem 31's (slow) offset
             record("L", 30, kb=True, kbs=True, eager=1.20)]   # clears problem 30's offset
    for rec in rows:  # intervals of +-0.5 % around each speedup (+-0.05 % for the nulls, as measured)
        width = 0.0005 if rec.model_config == "null:reference" else 0.005
        rec.speedup_vs_eager_ci_low = rec.speedup_vs_eager * (1 - width)
        rec.speedup_vs_eager_ci_high = rec.speedup_vs_eager * (1 + width)
    write_store(tmp_path / "offsets", rows)
    frame = load_evaluations([tmp_path / "offsets"])
    margin = scoring.noise_margins(frame)["fixture-cpu"]
    assert 0.01 < margin < 0.04  # the 95th percentile of 42 nulls: below 1.062's offset
    att = scoring.attempts(frame).set_index(["model_config", "problem_id"])
    assert att.loc[("K", 30), "null_speedup"] == pytest.approx(1.062)
    assert att.loc[("K", 2), "null_speedup"] == pytest.approx(1.0008)
    assert not att.loc[("K", 30), "verified"] and att.loc[("K", 2), "verified"] and att.loc[("L", 30), "verified"]
    assert not att.loc[("K", 31), "verified"]
    assert not att.loc[("null:reference", 30), "verified"] and not att.loc[("null:reference", 31), "verified"]
    # a margin given as a number keeps the per-problem offsets (a v0 frame has no null of its own: pass m); 0 is off
    fixed = scoring.attempts(frame, noise_margin=0.01).set_index(["model_config", "problem_id"])
    assert not fixed.loc[("K", 30), "verified"] and fixed.loc[("K", 2), "verified"]
    off = scoring.attempts(frame, noise_margin=0).set_index(["model_config", "problem_id"])
    assert off.loc[("K", 30), "verified"] and "null_speedup" not in off.columns


def test_auto_margin_without_null_records_warns(tmp_path):
    """A frame with no null:reference record (a v0-only frame, say) gets m = 0 under "auto": scoring says so with a
    NoNoiseMarginWarning, and says nothing when the margin is given (a number, or 0) or the frame has its nulls."""
    kernels = [record("K", pid, kb=True, kbs=True, eager=1.02) for pid in range(1, 4)]
    nulls = [record("null:reference", pid, kb=True, kbs=True, eager=1.0 + 0.001 * pid) for pid in range(1, 4)]
    for rec in kernels + nulls:
        rec.speedup_vs_eager_ci_low = rec.speedup_vs_eager * 0.999
        rec.speedup_vs_eager_ci_high = rec.speedup_vs_eager * 1.001
    write_store(tmp_path / "bare", kernels)
    write_store(tmp_path / "with_nulls", kernels + nulls)
    bare = load_evaluations([tmp_path / "bare"])
    with pytest.warns(scoring.NoNoiseMarginWarning, match="fixture-cpu"):
        att = scoring.attempts(bare)
    assert (att["noise_margin"] == 0).all() and att["verified"].all()  # 1.02x with a tight interval, m = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", scoring.NoNoiseMarginWarning)
        assert not scoring.attempts(bare, noise_margin=0.03)["verified"].any()  # 1.02x inside a 3 % margin
        scoring.attempts(bare, noise_margin=0)
        scoring.attempts(bare, significance=False)
        scoring.attempts(load_evaluations([tmp_path / "with_nulls"]))


def _discrepant_records() -> list:
    """Config D: two correct kernels timed 2x and 4x faster by their events; the 4x one's host-synchronised time
    disagreed (``timing_discrepancy``: work on a side stream), as a record made before the rule holds it (the ratio
    kept beside ``speedup_significant = false``)."""
    honest = record("D", 1, kb=True, kbs=True, eager=2.0, compile=2.0)
    hidden = record("D", 2, kb=True, kbs=True, eager=4.0, compile=4.0, sig=False, sig_compile=False)
    honest.timing_discrepancy, hidden.timing_discrepancy = False, True
    return [honest, hidden]


def test_an_event_time_the_host_clock_contradicts_gives_no_speedup_anywhere(tmp_path):
    """Issue 27, item 5: a candidate whose event timing disagrees with its host-synchronised time has no speedup in
    any table, median or count: not in the frames the analyses load, not in summarize's statistics, not in the
    speedup distribution, not in the per-problem table, even in a frame built by hand."""
    write_store(tmp_path / "run", _discrepant_records())
    loaded = load_frames([tmp_path / "run"]).evaluations
    hidden = loaded[loaded.problem_id == 2].iloc[0]
    assert hidden["speedup_vs_eager"] is None and hidden["speedup_vs_compile"] is None
    assert hidden["speedup_vs_eager_ci_low"] is None and hidden["speedup_significant"] is False
    assert loaded[loaded.problem_id == 1].iloc[0]["speedup_vs_eager"] == pytest.approx(2.0)
    # a frame that did not come through load_frames (the raw store's) gets the same treatment in every function
    raw = RecordStore(tmp_path / "run").evaluations_frame()
    assert pd.to_numeric(raw["speedup_vs_eager"]).max() == pytest.approx(4.0)  # the record itself keeps its bytes
    for frame in (loaded, raw):
        for baseline in ("eager", "compile"):
            d = _row(scoring.summarize(frame, baseline=baseline, noise_margin=0), "D")
            assert d["n_correct"] == 2 and d["n_timed"] == 1
            assert d["speedup_median"] == pytest.approx(2.0) and d["speedup_geomean"] == pytest.approx(2.0)
            assert d["fast_2"] == pytest.approx(0.0) and d["fast_1.5"] == pytest.approx(0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scoring.NoNoiseMarginWarning)
            assert list(scoring.correct_speedups(frame)["speedup"]) == pytest.approx([2.0])
        table = per_problem_table(frame)
        assert table[table.problem_id == 2]["speedup_vs_eager"].isna().all()
    honest_only = raw[raw.problem_id == 1]
    assert withdraw_event_only_speedups(honest_only) is honest_only  # nothing flagged: the frame as it was
