"""Checks v4: kbstudy's accuracy verdict with three metrics and bounds that adapt to the reference's own error
(``kbstudy.verdict.checks.accuracy_failure``), the problem flags on the reference record, and what they change in the
calibration (``docs/reference/verifier.md``, "kbstudy's check (as implemented)" and "What the calibration found").

Real level-1 problems at 1/64 of their sizes through ``evaluate_batch`` (one bf16 batch), and the reference session
in this process for the reference's own errors; nothing of kbstudy is mocked."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from support.helpers import REPO, cpu_config, torch_candidate

from kbstudy.analysis import audit
from kbstudy.analysis.calibration import calibration_findings
from kbstudy.harness.candidates import null_candidates
from kbstudy.harness.child.reference import ReferenceSession
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import scale_source
from kbstudy.records.frames import load_frames
from kbstudy.records.schema import EvaluationRecord, ReferenceRecord
from kbstudy.records.store import RecordStore
from kbstudy.verdict import checks as verify
from kbstudy.verdict import trials as variants

SCALE = 1 / 64
KL, MATVEC, RELU = "98_KLDivLoss.py", "4_Matrix_vector_multiplication_.py", "19_ReLU.py"

# ReLU, right everywhere but on one element, which is off by half the relative-L2 threshold of the whole output: the
# L2 norm averages one element away, the worst element's error in units of RMS(r) does not
_ONE_ELEMENT_WRONG = """
out = torch.relu(x)
flat = out.view(-1)
flat[flat.numel() // 2] += 0.5 * 2e-2 * torch.linalg.vector_norm(out.float())
return out
"""


# ------------------------------------------------------------------------------------------------ the pure function


@pytest.fixture(scope="module")
def kl_bf16_errors(problem_by_name):
    """``e_ref`` of KLDivLoss at bf16 on each of KernelBench's first 3 trials, from the reference session (the
    reference process's class)."""
    grad = torch.is_grad_enabled()
    problem = problem_by_name[KL]
    session = ReferenceSession({"source": scale_source(problem.source, SCALE), "filename": f"<{KL}>",
                                "device": "cpu", "precision": "bf16", "trials": 3, "seed": 42})
    try:
        yield [session.reference_errors(t) for t in range(3)], [session.bound_errors(t) for t in range(3)]
    finally:
        torch.set_grad_enabled(grad)


def test_bounds_adapt_to_the_reference_own_error(kl_bf16_errors):
    kl_bf16_errors, bound_errors = kl_bf16_errors
    # a loss summed over many terms: how far bf16 lands from float64 depends on the input set
    e_ref = max(kl_bf16_errors, key=lambda e: e["rel_l2_error"])
    assert min(e["rel_l2_error"] for e in kl_bf16_errors) < e_ref["rel_l2_error"]
    # so every set's bound scales the worst of the fixed-seed trials: an honest kernel that rounds like the worst
    # draw is not rejected on the draw where the reference happened to round well
    for own, used in zip(kl_bf16_errors, bound_errors):
        for metric, value in own.items():
            worst = max(e[metric] for e in kl_bf16_errors if e[metric] is not None)
            assert used[metric] == max(value, worst) == worst
    easy = min(range(3), key=lambda t: kl_bf16_errors[t]["rel_l2_error"])
    honest_but_worst = {m: 0.9 * v for m, v in e_ref.items()}
    assert verify.accuracy_failure(honest_but_worst, kl_bf16_errors[easy], "bf16") == "rel_l2"  # own e_ref alone
    assert verify.accuracy_failure(honest_but_worst, bound_errors[easy], "bf16") is None
    # the honest reference at bf16 misses float64 by more than the fixed threshold: ill-conditioned at bf16
    assert e_ref["rel_l2_error"] > verify.REL_L2_THRESHOLD["bf16"]
    assert verify.accuracy_failure(e_ref, None, "bf16") == "rel_l2"  # what checks v1-v3 did
    assert verify.accuracy_failure(e_ref, e_ref, "bf16") is None  # the honest reference passes
    assert verify.accuracy_failure({m: 3.9 * v for m, v in e_ref.items()}, e_ref, "bf16") is None
    assert verify.accuracy_failure({m: 4.1 * v for m, v in e_ref.items()}, e_ref, "bf16") == "rel_l2"
    assert verify.accuracy_bound("rel_l2_error", "bf16", e_ref["rel_l2_error"]) == \
        verify.REFERENCE_FACTOR * e_ref["rel_l2_error"]
    # a zeros output (relative L2 error 1) stays out: the problem is judgeable
    assert not verify.is_unjudgeable(e_ref["rel_l2_error"])
    assert verify.accuracy_failure({"rel_l2_error": 1.0}, e_ref, "bf16") == "rel_l2"


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("failing", verify.ACCURACY_METRICS)
def test_each_metric_can_be_the_failing_one(precision, failing):
    bounds = {m: verify.accuracy_bound(m, precision) for m in verify.ACCURACY_METRICS}
    within = {m: 0.99 * b for m, b in bounds.items()}
    assert verify.accuracy_failure(within, None, precision) is None
    metrics = {**within, failing: 1.01 * bounds[failing]}
    assert verify.accuracy_failure(metrics, None, precision) == verify.ACCURACY_FAILURES[failing]
    # a reference whose own error is above a quarter of the value lifts that bound
    reference = {failing: metrics[failing] / verify.REFERENCE_FACTOR * 1.01}
    assert verify.accuracy_failure(metrics, reference, precision) is None
    # a metric not measured (integer outputs, an all-zero reference) is skipped; an infinite one fails
    assert verify.accuracy_failure({**within, failing: None}, None, precision) is None
    assert verify.accuracy_failure({**within, failing: math.nan}, None, precision) is None
    assert verify.accuracy_failure({**within, failing: math.inf}, None, precision) == verify.ACCURACY_FAILURES[failing]


def test_metrics_are_checked_in_order():
    everything_wrong = {m: 10 * verify.accuracy_bound(m, "bf16") for m in verify.ACCURACY_METRICS}
    assert verify.accuracy_failure(everything_wrong, None, "bf16") == "rel_l2"  # the name checks v1-v3 used
    assert list(verify.ACCURACY_FAILURES) == list(verify.ACCURACY_METRICS)


def test_elementwise_metric_decides_near_zero():
    """One element of a bf16 output wrong near a zero of the output, by less than T_MAX RMS(r): only the elementwise
    relative error (floor sqrt(eps) RMS(r)) sees it."""
    base = torch.rand(4096, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.5
    base[7] = 0.0
    ref = base.to(torch.bfloat16)
    ref64 = ref.to(torch.float64)
    rms = float(ref64.pow(2).mean().sqrt())
    out = ref.clone()
    out[7] = 0.9 * verify.MAX_ABS_THRESHOLD["bf16"] * rms  # reads 0.9 T_MAX / sqrt(eps) = 2.5 elementwise
    trial = verify.kbstudy_trial([ref], [ref64], [out], "bf16")
    assert trial.failure == "elementwise" and "elementwise_rel_error_max" in trial.detail
    assert trial.rel_l2 <= verify.REL_L2_THRESHOLD["bf16"] and trial.max_abs_norm <= verify.MAX_ABS_THRESHOLD["bf16"]
    assert trial.elem_rel > verify.ELEMENTWISE_THRESHOLD["bf16"]
    # an all-zero reference has no scale: the normalized metrics are not applicable, the absolute L2 norm decides
    zero = torch.zeros(16, dtype=torch.bfloat16)
    judged = verify.kbstudy_trial([zero], [zero.double()], [zero.clone()], "bf16")
    assert judged.passed and judged.max_abs_norm is None and judged.elem_rel is None


# ------------------------------------------------------------------------------------------------ end to end


def _batch(problems, cands, folder, **settings) -> dict:
    store = RecordStore(folder / "records")
    summary = evaluate_batch(problems, cands, store, cpu_config(
        size_scale=SCALE, precision="bf16", trials=3, time_candidates=False, eager_baseline=False,
        cache_dir=str(folder / "cache"), **settings))
    assert summary.written == len(cands)
    return {"store": store, "rows": {(r["problem_name"], r["model_config"]): r for r in store.evaluations()},
            "refs": {r["problem_name"]: r for r in store.references().values()}}


@pytest.fixture(scope="module")
def bf16_batch(problem_by_name, tmp_path_factory):
    """At bf16, 1/64 size, with kbstudy's extra trials: the calibration nulls on KLDivLoss (ill-conditioned at
    bf16), the mean constant on the matrix-vector product (low-spread at bf16), and ReLU with a candidate wrong on
    one element."""
    kl, matvec, relu = problem_by_name[KL], problem_by_name[MATVEC], problem_by_name[RELU]
    cands = null_candidates(kl, ("reference", "zeros", "mean", "partial50")) + null_candidates(matvec, ["mean"]) + \
        null_candidates(relu, ["reference"]) + [torch_candidate(_ONE_ELEMENT_WRONG, problem_id=19,
                                                                name="one_element_wrong")]
    return _batch([kl, matvec, relu], cands, tmp_path_factory.mktemp("accuracy_v4"))


@pytest.fixture(scope="module")
def low_spread_batch(problem_by_name, tmp_path_factory):
    """The matrix-vector product (low-spread at bf16 at 1/64) under KernelBench's trials alone, as the committed
    calibration ran: kbstudy's signed-input extra trial rejects the mean constant there on its own (zero-mean inputs
    remove the concentration), which would hide the flag's effect."""
    matvec = problem_by_name[MATVEC]
    return _batch([matvec], null_candidates(matvec, ("reference", "zeros", "mean", "partial50")),
                  tmp_path_factory.mktemp("low_spread_v4"), fresh_trials=0, variants=())


def _row(batch, problem, config):
    row = batch["rows"][(problem, config)]
    assert row["outcome"] == "evaluated", (problem, config, row["error_message"])
    return row


def test_ill_conditioned_problem_accepts_the_honest_reference(bf16_batch):
    ref = bf16_batch["refs"][KL]
    assert ref["reference_rel_l2_error"] > verify.REL_L2_THRESHOLD["bf16"]  # checks v3 rejected null:reference here
    assert ref["unjudgeable"] is False and ref["low_spread"] is False and ref["degenerate"] is False
    honest = _row(bf16_batch, KL, "null:reference")
    assert honest["kbstudy_correct"] is True and honest["problem_flags"] == []
    assert honest["rel_l2_error"] > verify.REL_L2_THRESHOLD["bf16"]
    # every extra trial's input set has its own e_ref (a log of negated probabilities is NaN: signed does not apply)
    value_trials = {k: v for k, v in honest["kbstudy_variants"].items() if k not in variants.STRUCTURAL_VARIANTS}
    assert value_trials == {"fresh_seeds": "passed", "signed": "n.a.", "large": "passed"}
    # and the honest reference passes every structural variant that applies (shape, layout, parameters)
    structural = {k: v for k, v in honest["kbstudy_variants"].items() if k in variants.STRUCTURAL_VARIANTS}
    assert set(structural) == set(variants.STRUCTURAL_VARIANTS) and "passed" in structural.values()
    assert set(structural.values()) <= {"passed", "n.a."}, structural
    assert "x the reference's own" in _row(bf16_batch, KL, "null:zeros")["metadata"]["kbstudy_detail"]
    for kind, failure in (("zeros", "rel_l2"), ("partial50", "coverage")):
        row = _row(bf16_batch, KL, f"null:{kind}")
        assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == failure, kind


def test_low_spread_problem_is_flagged_and_its_constant_excused(low_spread_batch, bf16_batch):
    batch = low_spread_batch
    ref = batch["refs"][MATVEC]
    assert ref["low_spread"] is True and ref["degenerate"] is False
    assert ref["low_spread_default"] is True
    spread = ref["metadata"]["output_rel_std"]
    assert spread <= verify.LOW_SPREAD_FACTOR * verify.REL_L2_THRESHOLD["bf16"]
    # at bf16 the reference's own error is of the spread's size, so the adaptive bound admits the mean itself: with no
    # input variant run, the problem is unjudgeable as well (both are true; the signed trial rescues it below)
    assert verify.REFERENCE_FACTOR * ref["reference_rel_l2_error"] >= spread and ref["unjudgeable"] is True
    mean = _row(batch, MATVEC, "null:mean")
    assert mean["kbstudy_correct"] is True  # reported, not evidence
    assert mean["problem_flags"] == ["low_spread", "unjudgeable"]
    for kind in ("zeros", "partial50"):
        assert _row(batch, MATVEC, f"null:{kind}")["kbstudy_correct"] is False, kind
    assert _row(batch, MATVEC, "null:reference")["kbstudy_correct"] is True
    store = batch["store"]
    findings = calibration_findings(store.evaluations_frame(), store.references_frame()).set_index(
        ["problem_name", "null"])
    assert findings.loc[(MATVEC, "mean")].excused and not findings.loc[(MATVEC, "mean")].violation
    assert int(findings.violation.sum()) == 0
    assert set(findings.index[findings.excused]) == {(MATVEC, "mean")}
    # with kbstudy's extra trials on, the signed inputs (zero-mean) reject the constant on their own: the verdict is
    # evidence again, so the problem is not flagged; the default inputs' answer stays recorded as the finding
    with_extra_trials = _row(bf16_batch, MATVEC, "null:mean")
    assert with_extra_trials["kbstudy_failure"] == "variant_signed" and with_extra_trials["correct_default_only"]
    assert with_extra_trials["problem_flags"] == []
    judged_on_signed = bf16_batch["refs"][MATVEC]
    assert judged_on_signed["low_spread"] is False and judged_on_signed["low_spread_default"] is True
    assert judged_on_signed["unjudgeable"] is False
    # the audit reads the recorded flags
    ev, refs, _ = load_frames([store.folder], label="relative", root=store.folder.parent, settings=True)
    problems = audit.problem_findings(audit.null_findings(ev, refs))
    matvec = problems[problems.problem_name == MATVEC].iloc[0]
    assert matvec.flags_recorded and matvec.low_spread and matvec.unjudgeable


def test_one_wrong_element_is_rejected_where_relative_l2_accepts(bf16_batch):
    row = _row(bf16_batch, RELU, "one_element_wrong")
    assert row["rel_l2_error"] <= verify.REL_L2_THRESHOLD["bf16"]  # the L2 norm alone (checks v1-v3) accepts it
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "max_abs"
    assert row["max_abs_error_normalized"] > verify.MAX_ABS_THRESHOLD["bf16"]
    assert row["elementwise_rel_error_max"] > verify.ELEMENTWISE_THRESHOLD["bf16"]
    assert "max_abs_error_normalized" in row["metadata"]["kbstudy_detail"]
    honest = _row(bf16_batch, RELU, "null:reference")
    assert honest["kbstudy_correct"] is True and honest["problem_flags"] == []
    assert bf16_batch["refs"][RELU]["reference_rel_l2_error"] == 0.0  # ReLU is exact at any precision
    # the audit's recomputation from the recorded metrics is the verifier's verdict
    ev, refs, _ = load_frames([bf16_batch["store"].folder], label="relative", root=bf16_batch["store"].folder.parent,
                              settings=True)
    judged = audit.proposed_verdict(ev, audit.reference_errors(audit.null_findings(ev, refs)))
    assert judged.proposed_correct.tolist() == judged.kbstudy_correct.tolist()
    assert judged.loc[judged.model_config == "one_element_wrong", "proposed_failure"].tolist() == ["max_abs"]


# ------------------------------------------------------------------------------------------------ records


def test_new_fields_round_trip(bf16_batch):
    store = bf16_batch["store"]
    lines = [json.loads(line) for line in store.references_path.read_text().splitlines()]
    assert all(line["schema_version"] == 3 for line in lines)
    for line in lines:
        for name in ("reference_rel_l2_error", "reference_max_abs_error_normalized",
                     "reference_elementwise_rel_error_max"):
            assert isinstance(line[name], float), name
        assert isinstance(line["low_spread"], bool) and isinstance(line["unjudgeable"], bool)
        assert ReferenceRecord(**line).to_json() == json.dumps(line)  # the record, as read back, writes the same line
    for line in (json.loads(x) for x in store.evaluations_path.read_text().splitlines()):
        assert EvaluationRecord(**line).to_json() == json.dumps(line)
        assert isinstance(line["problem_flags"], list)
    store.export_parquet()
    import pandas as pd

    frame = pd.read_parquet(store.folder / "evaluations.parquet")
    assert sorted(json.loads(v) for v in frame.problem_flags) == sorted(r["problem_flags"] for r in store.evaluations())


def test_older_records_still_load():
    """Records made before schema 3 (the CPU calibration as committed before checks v4, kept as a test fixture) load
    with the new fields missing (NaN)."""
    folder = REPO / "tests" / "fixtures" / "cpu-calibration-v1" / "level1-bf16"
    ev, refs, _ = load_frames([folder])
    assert len(ev) and len(refs)
    assert (ev.schema_version < 3).all() and ev.problem_flags.isna().all()
    for name in ("reference_rel_l2_error", "low_spread", "unjudgeable"):
        assert refs[name].isna().all(), name
    assert list(ev.columns[:-1]) == [f.name for f in dataclasses.fields(EvaluationRecord)]
    rows = RecordStore(folder).references().values()
    assert all(ReferenceRecord(**row).low_spread is None for row in rows)
