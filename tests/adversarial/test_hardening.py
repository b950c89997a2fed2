"""Issue 3, items 3 and 4, and the significance rule: input variety (fresh seeds, signed and large inputs, decided per
problem from the reference's own outputs), fresh inputs for every timed call with a check of the timed outputs, the
host-synchronised cross-check's decision function, the custom-kernel share, and verified speedups.

The end-to-end cases run real KernelBench problems at scaled sizes through ``evaluate_batch`` (worker and reference
processes, nothing of kbstudy mocked); the variant rules are exercised on real problems through the reference
process's own class (``ReferenceSession``) in this process; the GPU-only counterparts live in ``test_gpu_checks.py``.
"""

from __future__ import annotations

import csv
import math
import random
import statistics

import pytest
import torch
from support.adversarial import load_candidates
from support.helpers import REPO, cpu_config, records_by_config

from kbstudy.harness import assemble, fresh_inputs, tensors, timing, timing_stats
from kbstudy.harness.child.reference import ReferenceSession
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.kernel_share import custom_kernel_share, kernel_origin
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import scale_source
from kbstudy.records.schema import EvaluationRecord
from kbstudy.records.store import RecordStore
from kbstudy.verdict import checks as verify
from kbstudy.verdict import trials as variants
from kbstudy.verdict.combine import combine_extra

#: KernelBench's 5 trials + 2 fresh seeds + signed + large + the structural variants that apply to ReLU (3 shapes, 2
#: layouts): the calls a candidate gets before it is timed on ReLU.
CORRECTNESS_CALLS = 14
#: fresh seeds, signed, large, then the seven structural variants
EXTRA_SEEDS = [1111, 2222, 3333, 4444, *range(5555, 5562)]
#: The structural variants on ReLU: every shape and the two layouts of a 2-D input apply; channels-last (no 4-D input)
#: and the parameter variant (no parameters) do not.
RELU_STRUCTURAL = {"shape_prime": "passed", "shape_batch1": "passed", "shape_larger": "passed",
                   "layout_transposed": "passed", "layout_strided": "passed", "layout_channels_last": "n.a.",
                   "params_random": "n.a."}


@pytest.fixture(scope="module")
def hardened(problem_by_name, tmp_path_factory):
    """19_ReLU at 1/100 size: honest controls, nonnegative-only cheats, a seed-overfitter and two caches (the
    files ``candidates/<name>.py``)."""
    tmp = tmp_path_factory.mktemp("hardening")
    relu = problem_by_name["19_ReLU.py"]
    cands = load_candidates("honest", "reuses_output_buffer", "identity", "abs", "knows_the_seeds", "counter_cache",
                            "pointer_cache")
    for cand in cands[-2:]:  # honest exactly while judged
        assert f"_CORRECTNESS_CALLS = {CORRECTNESS_CALLS} " in cand.source, cand.model_config
    store = RecordStore(tmp / "records")
    cfg = cpu_config(size_scale=0.01, cache_dir=str(tmp / "cache"), extra_seeds=list(EXTRA_SEEDS),
                     timing={"warmup_ms": 1, "budget_ms": 20, "min_reps": 6, "max_reps": 8})
    summary = evaluate_batch([relu], cands, store, cfg)
    assert summary.written == len(cands)
    return {"rows": records_by_config(store), "refs": list(store.references().values())}


def _evaluated(row: dict) -> dict:
    assert row["outcome"] == "evaluated", f"{row['candidate_id']}: {row['outcome']}: {row['error_message']}"
    return row


@pytest.mark.parametrize("name", ["honest", "reuses_output_buffer"])
def test_honest_candidates_pass_every_extra_trial_and_the_timing_check(hardened, name):
    row = _evaluated(hardened["rows"][name])
    assert row["kernelbench_correct"] is True and row["kbstudy_correct"] is True, row["metadata"]
    assert row["kbstudy_variants"] == {"fresh_seeds": "passed", "signed": "passed", "large": "passed",
                                       **RELU_STRUCTURAL}
    assert row["correct_default_only"] is False
    assert row["timing_output_ok"] is True and row["timing_pool_size"] == timing.TIMING_POOL_MAX_SETS
    check = row["metadata"]["timing_output_check"]
    assert check["mismatches"] == [] and check["checked"] == timing.TIMED_CHECKED_CALLS  # drawn timed calls (CPU)
    # the seeds of the extra trials are on the record (replayable with EvalConfig.extra_seeds)
    assert [t["seed"] for t in row["metadata"]["extra_trials"]] == EXTRA_SEEDS
    assert [t["trial"] for t in row["metadata"]["extra_trials"]] == list(range(5, 5 + len(EXTRA_SEEDS)))
    # CPU: the host cross-check, the device time and the kernel share do not apply
    assert row["timing_discrepancy"] is None and row["candidate_host_ms"] is None
    assert row["candidate_device_ms_median"] is None and row["candidate_device_ms_samples"] is None
    assert "device_time" not in row["metadata"]
    assert row["custom_kernel_share"] is None and row["top_kernels"] is None
    # raw samples, and the speedup's bootstrap interval around the point estimate
    assert len(row["candidate_ms_samples"]) == row["candidate_timing_trials"] >= 6
    assert row["speedup_vs_eager_ci_low"] <= row["speedup_vs_eager"] <= row["speedup_vs_eager_ci_high"]
    assert isinstance(row["speedup_significant"], bool)
    assert row["speedup_vs_compile"] is None and row["speedup_vs_compile_significant"] is None  # no compile baseline


def test_reference_record_keeps_its_samples_and_variant_report(hardened):
    (ref,) = hardened["refs"]
    assert ref["timing_pool_size"] == timing.TIMING_POOL_MAX_SETS
    assert len(ref["eager_ms_samples"]) == ref["eager_timing_trials"] >= 6
    assert ref["metadata"]["variants"] == {"7": "applies", "8": "applies"}


@pytest.mark.parametrize("name", ["identity", "abs"])
def test_correct_only_for_nonnegative_inputs_is_caught(hardened, name):
    row = _evaluated(hardened["rows"][name])
    # KernelBench's verdict is unchanged: every one of its inputs is in [0, 1)
    assert row["kernelbench_correct"] is True and row["kernelbench_trials_passed"] == 5
    assert row["rel_l2_error"] == 0.0  # the metrics cover KernelBench's trials
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "variant_signed"
    assert row["correct_default_only"] is True
    # correct on nonnegative inputs at every size and layout: only the signed trial catches it
    assert row["kbstudy_variants"] == {"fresh_seeds": "passed", "signed": "failed", "large": "passed",
                                       **RELU_STRUCTURAL}
    assert "seed 3333" in row["metadata"]["kbstudy_detail"] and "rel_l2" in row["metadata"]["kbstudy_detail"]
    signed = [r for r in row["metadata"]["extra_trial_results"] if r["name"] == "signed"]
    assert signed[0]["passed"] is False and signed[0]["rel_l2"] > 0.5


def test_a_candidate_that_knows_kernelbench_seeds_fails_on_fresh_ones(hardened):
    row = _evaluated(hardened["rows"]["knows_the_seeds"])
    assert row["kernelbench_correct"] is True
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "variant_fresh_seeds"
    assert row["kbstudy_variants"]["fresh_seeds"] == "failed" and row["correct_default_only"] is True


@pytest.mark.parametrize("name", ["counter_cache", "pointer_cache"])
def test_cached_results_are_caught_in_the_timed_calls(hardened, name):
    row = _evaluated(hardened["rows"][name])
    # honest during every correctness trial ...
    assert row["kernelbench_correct"] is True and row["kbstudy_variants"]["signed"] == "passed"
    # ... and stale while timed
    assert row["timing_output_ok"] is False
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "timing_output_mismatch"
    check = row["metadata"]["timing_output_check"]
    assert check["check"] == "kbstudy" and check["mismatches"]
    assert all(m["detail"].startswith("rel_l2") for m in check["mismatches"])
    # a cached answer's time is no kernel's time: the speedups are withdrawn
    assert row["candidate_ms_median"] is not None
    assert row["speedup_vs_eager"] is None and row["speedup_significant"] is None


# ------------------------------------------------------------------------------------------------ applicability


@pytest.fixture()
def session_factory(all_problems):
    """ReferenceSession (the reference process's class) in this process on a real problem, grad mode restored."""
    by_key = {(p.level, p.problem_id): p for p in all_problems}
    grad = torch.is_grad_enabled()

    def make(level: int, problem_id: int, precision: str, scale: float, names=("signed", "large")):
        extra = variants.plan_extra_trials(1, 0, names, seeds=[7 + i for i in range(len(names))])
        problem = by_key[(level, problem_id)]
        job = {"source": scale_source(problem.source, scale), "filename": f"<{problem.name}>", "device": "cpu",
               "precision": precision, "trials": 1, "seed": 42, "extra_trials": [e.as_dict() for e in extra]}
        return ReferenceSession(job), {e.name: e.trial for e in extra}

    yield make
    torch.set_grad_enabled(grad)


def test_variants_apply_where_the_reference_stays_accurate(session_factory):
    session, trial = session_factory(1, 19, "fp32", 0.01)  # ReLU
    assert session.variant_applicability() == {trial["signed"]: None, trial["large"]: None}


def test_signed_inputs_do_not_apply_to_a_log_of_probabilities(session_factory):
    session, trial = session_factory(1, 98, "fp32", 0.01)  # KLDivLoss: kl_div(log(predictions), targets)
    report = session.variant_applicability()
    assert report[trial["signed"]] == "the float64 reference output is not finite"
    assert report[trial["large"]] is None


def test_large_inputs_do_not_apply_where_fp16_overflows(session_factory):
    # a 1/50-size square matmul of [0, 64) entries: sums of ~82 products up to 4096 exceed fp16's 65504
    session, trial = session_factory(1, 1, "fp16", 0.02)
    report = session.variant_applicability()
    assert report[trial["large"]].startswith("the reference at fp16 fails kbstudy's check")
    assert report[trial["signed"]] is None
    fp32, trial32 = session_factory(1, 1, "fp32", 0.02)
    assert fp32.variant_applicability()[trial32["large"]] is None


def test_integer_targets_are_never_altered(session_factory):
    session, trial = session_factory(1, 95, "fp32", 0.01)  # CrossEntropyLoss: float logits, int64 class targets
    for name in ("signed", "large"):
        original = session._make_inputs(session.extra_trials[trial[name]].seed)  # get_inputs() under that seed
        changed, _, _ = session.trial(trial[name])
        assert original[1].dtype == torch.int64 and torch.equal(changed[1], original[1])
        if name == "signed":
            assert torch.equal(changed[0].abs(), original[0].abs()) and bool((changed[0] < 0).any())
        else:
            assert torch.equal(changed[0], original[0] * 64)
    assert set(session.variant_applicability().values()) == {None}


def test_transform_inputs_unit():
    x = torch.rand(1000)
    idx = torch.arange(10)
    flags = torch.rand(10) > 0.5
    signed = variants.transform_inputs([x, idx, flags, 2.5, 3], "signed", seed=5)
    assert torch.equal(signed[0].abs(), x) and 400 < int((signed[0] < 0).sum()) < 600
    assert signed[1] is idx and signed[2] is flags and signed[3:] == [2.5, 3]
    assert torch.equal(variants.transform_inputs([x], "signed", seed=5)[0], signed[0])  # seeded
    assert not torch.equal(variants.transform_inputs([x], "signed", seed=6)[0], signed[0])
    half = x.to(torch.float16)
    assert torch.equal(variants.transform_inputs([half], "large", 0)[0], half * 64)  # a power of two: exact
    assert variants.transform_inputs([x], variants.FRESH, 0)[0] is x
    with pytest.raises(ValueError):
        variants.transform_inputs([x], "huge", 0)


def test_plan_extra_trials_unit():
    plan = variants.plan_extra_trials(5, 2, ("signed", "large"), seeds=[1, 2, 3, 4])
    assert [(t.trial, t.seed, t.name) for t in plan] == [(5, 1, "fresh_seeds"), (6, 2, "fresh_seeds"),
                                                          (7, 3, "signed"), (8, 4, "large")]
    drawn = variants.plan_extra_trials(3, 1, ("large",))
    assert [t.trial for t in drawn] == [3, 4] and all(0 <= t.seed < 2**32 - 1 for t in drawn)
    with pytest.raises(ValueError):
        variants.plan_extra_trials(5, 2, ("signed",), seeds=[1])
    with pytest.raises(ValueError):
        variants.plan_extra_trials(5, 0, ("negated",))


def test_applicability_rules_unit():
    x = torch.rand(100)
    ref = [torch.relu(x)]
    assert variants.applicability([x], [x], ref, [r.double() for r in ref], "fp32") == \
        "no floating-point tensor input changed"
    y = -x
    nan = [torch.full((4,), float("nan"), dtype=torch.float64)]
    assert "not finite" in variants.applicability([x], [y], [torch.zeros(4)], nan, "fp32")
    const = [torch.zeros(100, dtype=torch.float64)]
    assert "constant" in variants.applicability([x], [y], [torch.zeros(100)], const, "fp32")
    good64 = [y.double().exp()]
    assert variants.applicability([x], [y], [y.exp()], good64, "fp32") is None
    # checks v4: the reference 1 % off float64 on these inputs widens its own bounds (4 %), and the variant applies
    assert variants.applicability([x], [y], [y.exp() * 1.01], good64, "fp32") is None
    # ... unless it has no correct digit there (4 x 0.3 >= 1: unjudgeable) or overflows where float64 does not
    assert variants.applicability([x], [y], [y.exp() * 1.3], good64, "fp32").startswith("unjudgeable at fp32")
    overflow = y.exp()
    overflow[3] = float("inf")
    assert "fails kbstudy's check" in variants.applicability([x], [y], [overflow], good64, "fp32")
    assert variants.is_constant(torch.tensor([3, 3, 3])) and not variants.is_constant(torch.tensor([1, 2]))


def test_combine_extra_unit():
    ok = verify.KbstudyTrial(True, None, 0.0, 1.0)
    bad = verify.KbstudyTrial(False, "rel_l2", 0.9, 1.0, "relative L2 error 0.9 > 0.001")
    mutated = verify.KbstudyTrial(False, "inputs_mutated", 0.0, 1.0, "inputs [0] changed")
    plan = variants.plan_extra_trials(5, 1, ("signed", "large"), seeds=[1, 2, 3])
    names = [t.name for t in plan]
    fields = combine_extra({"kbstudy_correct": True, "kbstudy_failure": None, "metadata_verdict": {}},
                                  [(plan[0], ok), (plan[1], bad)], names, {"large": "no floating input"})
    assert fields["kbstudy_variants"] == {"fresh_seeds": "passed", "signed": "failed", "large": "n.a."}
    assert fields["kbstudy_correct"] is False and fields["kbstudy_failure"] == "variant_signed"
    assert fields["correct_default_only"] is True and "seed 2" in fields["metadata_verdict"]["kbstudy_detail"]
    # an integrity failure on an extra trial keeps its own name
    fields = combine_extra({"kbstudy_correct": True, "kbstudy_failure": None}, [(plan[1], mutated)],
                                  names, {})
    assert fields["kbstudy_failure"] == "inputs_mutated"
    # a failure on KernelBench's trials stays the reported one
    fields = combine_extra({"kbstudy_correct": False, "kbstudy_failure": "coverage"}, [(plan[1], bad)],
                                  names, {})
    assert fields["kbstudy_failure"] == "coverage" and fields["correct_default_only"] is False
    assert combine_extra({"kbstudy_correct": True}, [], [], {})["kbstudy_variants"] is None


# ------------------------------------------------------------------------------------------------ timing pool


def test_pool_size_respects_the_byte_cap():
    assert timing.pool_size(1) == timing.TIMING_POOL_MAX_SETS
    assert timing.pool_size(0) == timing.TIMING_POOL_MAX_SETS
    assert timing.pool_size(timing.TIMING_POOL_BYTES // 3) == 3
    assert timing.pool_size(timing.TIMING_POOL_BYTES * 10) == timing.TIMING_POOL_MIN_SETS == 2
    with pytest.raises(ValueError):
        timing.pool_size(1, min_sets=3, max_sets=2)


def test_time_pool_fresh_values_in_the_same_buffers():
    pool = [[torch.full((8,), e + 0.5), 7] for e in range(3)]  # not whole numbers: whole ones are not mixed
    seen = []

    def fn(x, k):
        seen.append((x.data_ptr(), float(x[0]), k, torch.initial_seed()))
        return x * 2

    result = timing.time_pool(fn, pool, device="cpu", seeds=[10, 11, 12], keep_outputs=True, warmup_ms=0,
                              min_warmup=2, budget_ms=1000, min_reps=7, max_reps=7, mix_rng=random.Random(0),
                              pick_rng=random.Random(1))
    assert result.pool_size == 3 and len(result.samples) == 7 and result.host_ms is None
    assert len({ptr for ptr, *_ in seen}) == 1  # one buffer ...
    # ... new values every call, warm-up too: entries g and g + 1 mixed with the call's own weight
    draws = random.Random(0)
    weights = [fresh_inputs.draw_mix(draws) for _ in range(9)]
    a32 = lambda v: torch.tensor(v, dtype=torch.float32)  # noqa: E731 - the mix in float32, op by op
    expected = [float(a32(g % 3 + 0.5) + (a32((g + 1) % 3 + 0.5) - a32(g % 3 + 0.5)) * weights[g]) for g in range(9)]
    assert [v for _, v, _, _ in seen] == expected and len(set(expected)) == 9
    assert all(fresh_inputs.MIX_RANGE[0] <= w <= fresh_inputs.MIX_RANGE[1] for w in weights)
    assert [s for *_, s in seen] == [10 + g % 3 for g in range(9)] and {k for _, _, k, _ in seen} == {7}
    assert all(p[0][0] == e + 0.5 for e, p in enumerate(pool))  # the pool itself is only read
    # TIMED_CHECKED_CALLS distinct timed calls, each with its entry and weight; the reference's copy of its inputs
    # (fresh_inputs.mixed) is bit-identical to what the call saw
    assert len(result.checked) == timing.TIMED_CHECKED_CALLS == len({j for _, j, _, _ in result.checked})
    for entry, j, outputs, mix in result.checked:
        assert 0 <= j < 7 and entry == (2 + j) % 3 and mix == weights[2 + j]
        inputs = fresh_inputs.mixed(pool[entry], pool[(entry + 1) % 3], mix)
        assert torch.equal(outputs[0], inputs[0] * 2) and inputs[1] == 7


def test_time_pool_exposes_a_pointer_cache():
    cache = {}

    def cached(x):
        return cache.setdefault(x.data_ptr(), x * 2)

    pool = [[torch.full((4,), e + 0.5)] for e in range(2)]
    result = timing.time_pool(cached, pool, device="cpu", keep_outputs=True, warmup_ms=0, min_warmup=1,
                              budget_ms=1000, min_reps=4, max_reps=4)
    # the warm-up call filled the cache; every timed call's values are new, so every checked answer is stale
    stale = [entry for entry, _, outputs, mix in result.checked
             if not torch.equal(outputs[0], fresh_inputs.mixed(pool[entry], pool[1 - entry], mix)[0] * 2)]
    assert len(stale) == len(result.checked) == timing.TIMED_CHECKED_CALLS
    with pytest.raises(ValueError):
        timing.time_pool(cached, [], device="cpu")
    with pytest.raises(ValueError):
        timing.time_pool(cached, pool, device="cpu", seeds=[1])


# ------------------------------------------------------------------------------------------------ decisions


def test_timing_discrepancy_decision():
    # honest: host block at or below the event median (pipelined, warm L2)
    assert timing_stats.timing_discrepancy(1.0, 0.95) is False
    assert timing_stats.timing_discrepancy(1.0, 1.45) is False  # 1.45 <= 1.5 + 0.02
    assert timing_stats.timing_discrepancy(0.004, 0.015) is False  # launch overhead on a microsecond call
    # work hidden on a side stream: the events saw 5 us, the host 0.35 ms
    assert timing_stats.timing_discrepancy(0.005, 0.35) is True
    assert timing_stats.timing_discrepancy(1.0, 1.6) is True
    assert timing_stats.timing_discrepancy(None, 1.0) is None and timing_stats.timing_discrepancy(1.0, None) is None
    assert timing_stats.timing_discrepancy(float("nan"), 1.0) is None
    with pytest.raises(ValueError):
        timing_stats.timing_discrepancy(-1.0, 1.0)


def test_a_discrepant_record_gets_no_speedup():
    """A record whose event timing disagrees with its host-synchronised time is written with no speedup (ratio and
    interval missing, significance false), whatever its samples say; an agreeing one keeps its speedup."""
    base = [2.0 + 0.01 * k for k in range(20)]
    faster = [1.0 + 0.01 * k for k in range(20)]
    ref_row = {"eager_ms_samples": base, "compile_ms_samples": base}
    for discrepancy in (True, False):
        rec = EvaluationRecord(key="k", run="r", level=1, problem_id=1, problem_name="p", category="c",
                               problem_version="current", problem_sha256="p", candidate_sha256="c", sample_id=0,
                               backend="torch", precision="fp32", size_scale=1.0, device="cuda", hardware="h",
                               timing_method="cuda_event",
                               candidate_id="c", model_config="m", outcome="evaluated", timing_discrepancy=discrepancy,
                               candidate_ms_median=statistics.median(faster), eager_ms_median=statistics.median(base),
                               compile_ms_median=statistics.median(base))
        assemble._speedups(rec, ref_row, faster)
        if discrepancy:
            assert rec.speedup_vs_eager is None and rec.speedup_vs_compile is None
            assert rec.speedup_vs_eager_ci_low is None and rec.speedup_vs_eager_ci_high is None
            assert rec.speedup_significant is False and rec.speedup_vs_compile_significant is False
        else:
            assert rec.speedup_vs_eager == pytest.approx(2.095 / 1.095) and rec.speedup_significant is True


def test_speedup_interval_and_significance():
    rng = torch.Generator().manual_seed(0)
    noise = lambda n: (1 + 0.02 * torch.randn(n, generator=rng)).tolist()  # noqa: E731
    base = [2.0 * v for v in noise(50)]
    faster = [1.0 * v for v in noise(50)]
    same = [2.0 * v for v in noise(50)]
    interval = timing_stats.speedup_interval(base, faster)
    assert interval[0] < 2.0 < interval[1] and interval[0] > 1.8
    assert timing_stats.speedup_interval(base, faster) == interval  # seeded: a function of the samples
    assert timing_stats.speedup_significant(interval, 2.0) is True
    tie = timing_stats.speedup_interval(base, same)
    assert tie[0] < 1.0 < tie[1] and timing_stats.speedup_significant(tie, 1.001) is False
    slower = timing_stats.speedup_interval(faster, base)
    assert timing_stats.speedup_significant(slower, 0.5) is True and slower[1] < 1.0
    assert timing_stats.speedup_interval(base[:4], faster) is None and timing_stats.speedup_significant(None) is None
    assert timing_stats.speedup_interval(base, [math.nan] * 3 + faster[:4]) is None  # non-finite samples dropped
    with pytest.raises(ValueError):
        timing_stats.speedup_interval(base, faster, confidence=1.5)


# ------------------------------------------------------------------------------------------------ kernel share


def _fixture_names() -> list[tuple[str, str]]:
    rows = []
    for name in ("h200_kernel_names.csv", "kernel_names.csv"):
        with open(REPO / "tests" / "profiling" / "fixtures" / name, newline="") as fh:
            rows += [(r["name"], r["expected_category"]) for r in csv.DictReader(fh)]
    return rows


def test_real_vendor_and_aten_kernel_names_are_not_custom():
    for name, category in _fixture_names():
        origin, library = kernel_origin(name)
        if name.startswith("triton_"):
            assert origin == "inductor", name
        elif name == "some_unknown_custom_kernel_v2":  # the fixture's stand-in for an unknown kernel
            assert origin == "custom"
        else:
            assert origin == "vendor", (name, category)
            if category == "memcpy":
                assert library == "runtime"


@pytest.mark.parametrize("name", ["relu_kernel", "_attn_fwd", "matmul_kernel_0d1d2d", "fused_gelu_kernel",
                                  "void relu_kernel(float const*, float*, int)",
                                  "void (anonymous namespace)::tiled_matmul<32>(float const*, float const*, float*)"])
def test_candidate_kernel_names_are_custom(name):
    assert kernel_origin(name) == ("custom", None)


def test_custom_kernel_share():
    gemm = "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT"
    copy = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    share = custom_kernel_share([("relu_kernel", 30.0), (gemm, 60.0), (copy, 5.0), ("relu_kernel", 5.0),
                                 ("triton_poi_fused_add_0", 0.0), ("Memset (Device)", float("nan"))])
    assert share["custom_kernel_share"] == pytest.approx(35.0 / 100.0)
    assert [k["name"] for k in share["top_kernels"]][:3] == [gemm, "relu_kernel", copy]
    assert share["top_kernels"][0] == {"name": gemm, "us": 60.0, "origin": "vendor", "library": "cublas",
                                       "category": "gemm"}
    assert share["time_us_by_origin"] == {"custom": 35.0, "inductor": 0.0, "vendor": 65.0}
    assert custom_kernel_share([("triton_red_fused_sum_0", 4.0)])["custom_kernel_share"] == 1.0
    assert custom_kernel_share([])["custom_kernel_share"] is None


# ------------------------------------------------------------------------------------------------ settings


def test_settings_key_names_the_new_checks():
    key = EvalConfig().settings_key()
    assert "checks=v4" in key and "fresh_trials=2" in key and "variants=signed,large" in key
    assert EvalConfig(fresh_trials=0).settings_key() != key
    assert EvalConfig(extra_seeds=[1, 2, 3, 4]).settings_key() == key  # seeds are per run, on the records


def test_set_seed_is_what_the_timing_pool_uses():
    tensors.set_seed(1234)
    assert torch.initial_seed() == 1234


def test_reference_cache_makes_room_before_building_a_trial(session_factory, monkeypatch):
    """A full-size input set can be as large as the reference's whole cache (45_Average_Pooling_2D: 16 GiB at fp32):
    the old entry is evicted *before* the next trial and its float64 copies are built, so the process never holds two,
    while a cache with room for several keeps as many as before (ReLU at 1/100 size, four fixed-seed trials)."""
    session, _ = session_factory(1, 19, "fp32", 0.01)  # ReLU
    session.trial_seeds = [42, 43, 44, 45]
    built_beside: list[int] = []
    make_inputs = session._make_inputs

    def spy(seed, variant=None):
        built_beside.append(sum(session._entry_bytes(e) for e in session.cache.values()))
        return make_inputs(seed, variant)

    monkeypatch.setattr(session, "_make_inputs", spy)
    entry = session._entry_bytes(session.trial(0))
    session.cache_bytes = entry + entry // 2  # room for one entry, not two
    session.trial(1)
    assert built_beside == [0, 0] and list(session.cache) == [1]
    session.cache.clear()
    session.cache_bytes = 3 * entry  # room for three: the steady state keeps three, as evicting after the build did
    for t in range(3):
        session.trial(t)
    assert list(session.cache) == [0, 1, 2] and built_beside[-1] == 2 * entry
    session.trial(3)  # full: the oldest goes before the build, and three stay
    assert list(session.cache) == [1, 2, 3] and built_beside[-1] == 2 * entry
