"""Issue 3, part 1: the calibration nulls, the recorded metrics, degenerate references and `kbstudy calibrate`."""

from __future__ import annotations

import json
import math

import pytest
import torch
from support.committed import RECORDS, committed_records
from support.helpers import cpu_config
from typer.testing import CliRunner

from kbstudy.analysis.calibration import MUST_FAIL, PROBES, calibration_findings
from kbstudy.cli.app import app
from kbstudy.harness.candidates import CALIBRATION_NULLS, null_candidates
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import make_problem
from kbstudy.records.store import RecordStore
from kbstudy.verdict import checks as verify
from kbstudy.verdict.combine import combine

H200_CALIBRATION = RECORDS / "kernelbench" / "h200" / "calibration"

_DEGENERATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """min(x, 0) then clamp to [0, 1] (KernelBench level2/83's structure): always zero; y has no effect either."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.clamp(torch.minimum(x, torch.zeros_like(x)), 0, 1) + 0 * y.sum()


def get_inputs():
    return [torch.rand(64, 32), torch.rand(64, 32)]


def get_init_inputs():
    return []
'''

_IGNORES_AN_INPUT = _DEGENERATE.replace("torch.clamp(torch.minimum(x, torch.zeros_like(x)), 0, 1) + 0 * y.sum()",
                                        "torch.relu(x) + 0 * y.sum()")


def test_calibration_nulls_are_listed():
    assert set(MUST_FAIL) | set(PROBES) == set(CALIBRATION_NULLS)
    assert "reference" not in CALIBRATION_NULLS


@pytest.fixture(scope="module")
def calibration(problem_by_name, tmp_path_factory):
    """Every null on 19_ReLU (O(1) outputs) and 23_Softmax (outputs far below KernelBench's atol), fp32 and bf16,
    plus the two synthetic degenerate problems at fp32."""
    tmp = tmp_path_factory.mktemp("calibration")
    out = {}
    degenerate = make_problem(_DEGENERATE, level=90, problem_id=1, name="1_AlwaysZero.py")
    ignores = make_problem(_IGNORES_AN_INPUT, level=90, problem_id=2, name="2_IgnoresY.py")
    for precision in ("fp32", "bf16"):
        problems = [problem_by_name["19_ReLU.py"], problem_by_name["23_Softmax.py"]]
        if precision == "fp32":
            problems += [degenerate, ignores]
        cands = [c for p in problems for c in null_candidates(p, ("reference",) + CALIBRATION_NULLS)]
        store = RecordStore(tmp / precision)
        evaluate_batch(problems, cands, store, cpu_config(size_scale=0.02, precision=precision, trials=3,
                                                          time_candidates=False, eager_baseline=False,
                                                          cache_dir=str(tmp / "cache")))
        rows = store.evaluations()
        out[precision] = {(r["problem_name"], r["model_config"][5:]): r for r in rows}
        out[precision + "_refs"] = {r["problem_name"]: r for r in store.references().values()}
    return out


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("problem", ["19_ReLU.py", "23_Softmax.py"])
def test_must_fail_nulls_fail_kbstudy_and_reference_passes(calibration, precision, problem):
    rows = calibration[precision]
    assert calibration[precision + "_refs"][problem]["degenerate"] is False
    ref = rows[(problem, "reference")]
    assert ref["outcome"] == "evaluated" and ref["kbstudy_correct"] is True
    for kind in MUST_FAIL:
        row = rows[(problem, kind)]
        assert row["outcome"] == "evaluated", (kind, row["error_message"])
        assert row["kbstudy_correct"] is False, kind
    for k in ("0.3", "10", "50", "90"):
        row = rows[(problem, f"partial{k}")]
        assert row["kbstudy_failure"] == "coverage"
        assert row["coverage"] == pytest.approx(float(k) / 100, abs=0.01)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_noise_passes_kernelbench_and_is_judged_by_scale(calibration, precision):
    rows = calibration[precision]
    for problem in ("19_ReLU.py", "23_Softmax.py"):
        assert rows[(problem, "noise")]["kernelbench_correct"] is True  # |noise| <= atol by construction
    # ReLU's outputs are O(1): noise of 1e-4 (fp32) or 1e-2 (bf16) is accurate; softmax's are far below atol
    assert rows[("19_ReLU.py", "noise")]["kbstudy_correct"] is True
    assert rows[("23_Softmax.py", "noise")]["kbstudy_correct"] is False
    assert rows[("23_Softmax.py", "noise")]["rel_l2_error"] > 0.1


def test_lowprec_is_rejected_at_bf16(calibration):
    for problem in ("19_ReLU.py", "23_Softmax.py"):
        row = calibration["bf16"][(problem, "lowprec")]
        assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "rel_l2"
        # at fp32 it is fp16 arithmetic: within kbstudy's TF32-admitting threshold, outside KernelBench's 1e-4
        fp32 = calibration["fp32"][(problem, "lowprec")]
        assert 1e-5 < fp32["rel_l2_error"] < verify.REL_L2_THRESHOLD["fp32"]


def test_zeros_on_softmax_bf16_is_the_known_hole(calibration):
    row = calibration["bf16"][("23_Softmax.py", "zeros")]
    assert row["kernelbench_correct"] is True and row["kbstudy_correct"] is False


def test_metrics_are_recorded(calibration):
    rows = calibration["fp32"]
    ref = rows[("19_ReLU.py", "reference")]
    assert ref["max_abs_error_normalized"] == 0.0 and ref["elementwise_rel_error_max"] == 0.0
    zeros = rows[("19_ReLU.py", "zeros")]
    assert zeros["elementwise_rel_error_max"] == pytest.approx(1.0)  # |0 - r| / |r| where |r| >= floor
    assert zeros["max_abs_error_normalized"] > 1.0  # max |r| / RMS(r) for r = relu(U[0, 1))
    noise = rows[("23_Softmax.py", "noise")]
    assert noise["max_abs_error_normalized"] > 0.1


def test_degenerate_references_are_flagged(calibration):
    refs = calibration["fp32_refs"]
    zero = refs["1_AlwaysZero.py"]
    assert zero["degenerate"] is True and zero["degenerate_constant"] is True and zero["output_rms"] == 0.0
    assert zero["degenerate_inputs"] == [0, 1]
    ignores = refs["2_IgnoresY.py"]
    assert ignores["degenerate"] is True and ignores["degenerate_constant"] is False
    assert ignores["degenerate_inputs"] == [1]
    for name in ("19_ReLU.py", "23_Softmax.py"):
        assert refs[name]["degenerate"] is False and refs[name]["degenerate_inputs"] == []
    # on the always-zero problem the zeros null is honestly correct: the problem is the finding
    assert calibration["fp32"][("1_AlwaysZero.py", "zeros")]["kbstudy_correct"] is True


# ------------------------------------------------------------------------------------------------ unit level


def test_elementwise_floor_and_metrics():
    r = torch.tensor([1.0, -1.0, 1e-9, 2.0], dtype=torch.float64)
    rms = math.sqrt(float((r * r).mean()))
    floor = verify.elementwise_floor(rms, torch.float32)
    assert floor == pytest.approx(math.sqrt(torch.finfo(torch.float32).eps) * rms)
    out = r.to(torch.float32).clone()
    out[2] = 1e-3  # wrong at a near-zero element: relative to the floor, not to 1e-9
    t = verify.kbstudy_trial([r.float()], [r], [out], "fp32")
    assert t.elem_rel == pytest.approx((1e-3 - 1e-9) / floor, rel=1e-4)
    assert t.max_abs_norm == pytest.approx((1e-3 - 1e-9) / rms, rel=1e-4)
    # rel L2 ~ 7e-4, elementwise ~2.4, normalized max ~8e-4: within every fp32 bound (1e-3 of a near-zero element)
    assert t.passed and t.max_abs_norm < verify.MAX_ABS_THRESHOLD["fp32"]
    assert t.elem_rel < verify.ELEMENTWISE_THRESHOLD["fp32"]
    assert combine([], [t], "fp32")["elementwise_rel_error_max"] == t.elem_rel


def test_calibrate_command(levels_file, tmp_path):
    out = tmp_path / "calib"
    args = ["calibrate", "--problems", str(levels_file), "--level", "1", "--problem-id", "19", "--precision",
            "fp32", "--precision", "bf16", "--size-scale", "0.01", "--device", "cpu", "--trials", "2", "--out",
            str(out), "--no-progress", "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "0 null candidates pass kbstudy's check on a problem not flagged" in result.output
    assert "PASS: kbstudy's verdict rejects every must-fail null" in result.output
    for precision in ("fp32", "bf16"):
        folder = tmp_path / f"calib-{precision}"
        rows = [json.loads(line) for line in (folder / "evaluations.jsonl").read_text().splitlines()]
        assert sorted(r["model_config"] for r in rows) == sorted(
            f"null:{k}" for k in ("reference",) + CALIBRATION_NULLS)
        assert {r["precision"] for r in rows} == {precision}
        assert all(r["candidate_ms_median"] is None for r in rows)  # calibration times nothing
    assert CliRunner().invoke(app, args[:-5] + ["--out", str(out), "--precision", "fp64"]).exit_code == 2


def test_skip_complete_finishes_a_calibration_begun_under_older_checks(levels_file, tmp_path):
    out = tmp_path / "calib"
    args = ["calibrate", "--problems", str(levels_file), "--level", "1", "--problem-id", "19", "--problem-id", "20",
            "--precision", "fp32", "--size-scale", "0.01", "--device", "cpu", "--trials", "2", "--out", str(out),
            "--no-progress", "--cache-dir", str(tmp_path / "cache")]
    folder = tmp_path / "calib-fp32"
    first = CliRunner().invoke(app, args[:7] + args[9:])  # problem 19 only
    assert first.exit_code == 0, first.output
    # make its records look like an older checks version's: another settings key, the same measurements
    path = folder / "evaluations.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "key": "older" + r["key"][5:]}) + "\n" for r in rows))

    result = CliRunner().invoke(app, args + ["--skip-complete"])
    assert result.exit_code == 0, result.output
    assert "1 problems already complete, 1 to calibrate" in result.output
    after = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(after) == 2 * len(rows) and {r["problem_id"] for r in after[len(rows):]} == {20}

    # without it, problem 19 is measured again under the current key; the findings keep the latest record of each null
    assert CliRunner().invoke(app, args).exit_code == 0
    store = RecordStore(folder)
    assert len(store.evaluations()) == 3 * len(rows)
    findings = calibration_findings(store.evaluations_frame(), store.references_frame(), ("created_utc",))
    assert len(findings) == 2 * len(rows) and not findings.duplicated(["problem_id", "null"]).any()
    older = max(r["created_utc"] for r in rows)
    rerun = findings[findings.problem_id == 19]
    assert len(rerun) == len(rows) and (rerun.created_utc > older).all()


_DEPENDS_ON_THE_PROCESS = """
import torch
import torch.nn as nn

# every process that loads this problem gets the next number: the reference process and a candidate's worker differ
with open({counter!r}, "a+") as _f:
    _f.write("x")
    _f.seek(0)
    _LOADS = len(_f.read())


class Model(nn.Module):
    \"\"\"x times the number of processes that loaded the problem so far: a reference no other process reproduces.\"\"\"

    def forward(self, x):
        return x * float(_LOADS)


def get_inputs():
    return [torch.rand(64, 64)]


def get_init_inputs():
    return []
"""


def test_calibrate_fails_when_the_rule_is_broken(tmp_path):
    # the reference process and the worker have different process ids, so null:reference is rejected on a problem that
    # is neither degenerate nor unjudgeable: a breach of the rule, which must make the command fail
    problems = tmp_path / "problems.jsonl"
    source = _DEPENDS_ON_THE_PROCESS.format(counter=str(tmp_path / "loads"))
    problems.write_text(json.dumps({"code": source, "level": 90, "problem_id": 3,
                                    "name": "3_DependsOnTheProcess.py"}) + "\n")
    result = CliRunner().invoke(app, ["calibrate", "--problems", str(problems), "--precision", "fp32", "--nulls",
                                      "zeros", "--device", "cpu", "--trials", "2", "--out", str(tmp_path / "c"),
                                      "--no-progress", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 1, result.output
    assert "VIOLATION: null:reference on 3_DependsOnTheProcess.py" in result.output
    assert "FAIL: kbstudy's verdict breaks the calibration rule" in result.output


def test_zeros_and_mean_reach_every_output_of_a_tuple_returning_problem(tmp_path, problem_by_name):
    """DLRM-Bench 5 returns ``(rows, new_weight)``: its ``zeros`` and ``mean`` nulls map over the outputs (before this
    they raised on the tuple, a ``runtime_error`` on every machine) and are rejected; single-output problems keep the
    original sources, so their record keys do not move."""
    from kbstudy.harness import candidates
    from kbstudy.suites.dlrm_bench import load_dlrm_problems

    (problem,) = load_dlrm_problems(1.0, [5])
    assert candidates._returns_sequence(problem.source)
    nulls = null_candidates(problem, ("reference", "zeros", "mean"))
    store = RecordStore(tmp_path / "records")
    evaluate_batch([problem], nulls, store, cpu_config(size_scale=1 / 512, trials=2, time_candidates=False,
                                                       eager_baseline=False, cache_dir=str(tmp_path / "cache")))
    rows = {r["model_config"]: r for r in store.evaluations()}
    assert rows["null:reference"]["kbstudy_correct"] is True
    for kind in ("null:zeros", "null:mean"):
        assert rows[kind]["outcome"] == "evaluated", rows[kind]["error_message"]
        assert rows[kind]["kbstudy_correct"] is False and rows[kind]["kernelbench_correct"] is False

    softmax = problem_by_name["23_Softmax.py"]
    assert not candidates._returns_sequence(softmax.source)
    zeros = null_candidates(softmax, ["zeros"])[0]
    assert zeros.source == softmax.source.rstrip() + "\n\n\n" + (candidates.NULL_SOURCES / "zeros.py").read_text()


def test_null_candidates_of_a_scaled_problem_see_its_scaled_module_sizes(all_problems, tmp_path):
    """Level-3 33_VanillaRNNHidden reads ``batch_size`` from its module in ``__init__``: at 1/64 size every null once
    failed with a shape mismatch (the candidate's copy of the constant was unscaled). Now the honest reference passes
    and zeros is rejected."""
    rnn = next(p for p in all_problems if p.level == 3 and p.name.startswith("33_"))
    store = RecordStore(tmp_path / "records")
    evaluate_batch([rnn], null_candidates(rnn, ("reference", "zeros")), store,
                   cpu_config(size_scale=1 / 64, trials=2, time_candidates=False, eager_baseline=False,
                              cache_dir=str(tmp_path / "cache")))
    rows = {r["model_config"]: r for r in store.evaluations()}
    assert rows["null:reference"]["outcome"] == "evaluated", rows["null:reference"]["error_message"]
    assert rows["null:reference"]["kbstudy_correct"] is True
    assert rows["null:zeros"]["kbstudy_correct"] is False


def test_calibrate_names_the_records_it_could_not_evaluate(tmp_path):
    """A problem whose reference cannot run at all: no verdict, so no violation, but the PASS line says how many
    records have none and a 'not evaluated' line gives each one's outcome and error."""
    problems = tmp_path / "problems.jsonl"
    source = _DEPENDS_ON_THE_PROCESS.format(counter=str(tmp_path / "loads")).replace(
        "return x * float(_LOADS)", "raise RuntimeError('this reference cannot run')")
    problems.write_text(json.dumps({"code": source, "level": 90, "problem_id": 4, "name": "4_CannotRun.py"}) + "\n")
    result = CliRunner().invoke(app, ["calibrate", "--problems", str(problems), "--precision", "fp32", "--nulls",
                                      "zeros", "--device", "cpu", "--trials", "2", "--out", str(tmp_path / "c"),
                                      "--no-progress", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert "not evaluated: null:reference on 4_CannotRun.py: reference_error" in result.output
    assert "this reference cannot run" in result.output
    assert "2 null records were not evaluated and have no verdict" in result.output
    # the table's header fits on one line of a log (120 columns), with the new column
    assert any("not evaluated" in line and "kbstudy passes" in line for line in result.output.splitlines())


def test_calibrate_report_judges_old_records_as_the_audit_does():
    """``kbstudy calibrate``'s report (``folder_findings``) applies the audit's rule: the H200 bf16 record of
    ``null:reference`` on 89_cumsum, rejected under checks v3, is excused (its problem is unjudgeable at bf16, a flag
    its older reference record lacks), where the recorded flags alone (``calibration_findings``) would call it a
    violation of the calibration rule."""
    from kbstudy.analysis.audit import folder_findings

    folder = committed_records(H200_CALIBRATION / "level1-bf16", file="evaluations.jsonl")
    store = RecordStore(folder)
    recorded = calibration_findings(store.evaluations_frame(), store.references_frame())
    resolved = folder_findings(store)
    assert len(resolved) == len(recorded) and "error_message" in resolved.columns
    cumsum = resolved[(resolved.problem_name == "89_cumsum.py") & (resolved["null"] == "reference")].iloc[0]
    assert cumsum.excused and not cumsum.violation and cumsum.unjudgeable
    was = recorded[(recorded.problem_name == "89_cumsum.py") & (recorded["null"] == "reference")].iloc[0]
    assert was.violation
    assert int(resolved.violation.sum()) == 0


_STOCHASTIC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A noisy map: its float64 run draws other normal values than its float32 run (as KernelBench level-2
    66_Matmul_Dropout_Softmax's training-mode dropout draws another mask on the H200), so the reference's own relative
    L2 error (~0.07) is above the output's relative spread (~0.05) but far from 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 1.0 + 0.1 * {inner} + 0.05 * torch.randn_like(x)


def get_inputs():
    return [torch.rand(128, 64)]


def get_init_inputs():
    return []
'''


def test_unjudgeable_when_the_adaptive_bound_admits_a_constant():
    # all-zeros test: 4 e >= 1, whatever the spread
    assert verify.is_unjudgeable(0.3) and verify.is_unjudgeable(0.3, 0.9, rescued=True)
    # the spread test: 4 x 0.24 = 0.96 admits the mean (0.37), not zeros (1): level-2 66 on the H200 at fp32
    assert verify.is_unjudgeable(0.24, 0.37) and not verify.is_unjudgeable(0.24)
    assert not verify.is_unjudgeable(0.24, 0.37, rescued=True)  # a variant applies where a constant fails
    assert not verify.is_unjudgeable(0.05, 0.37)
    # unknown, zero (constant output: degenerate instead) or NaN spread: the all-zeros test alone
    for spread in (None, 0.0, math.nan):
        assert not verify.is_unjudgeable(0.1, spread)
    assert not verify.is_unjudgeable(None, 0.01) and not verify.is_unjudgeable(math.nan, 0.01)
    x = torch.tensor([1.0, 3.0], dtype=torch.float64)
    assert verify.relative_spread([torch.arange(3), x]) == pytest.approx(1.0 / math.sqrt(5.0))
    assert verify.relative_spread([torch.ones(1, dtype=torch.float64)]) is None  # one element: no spread
    assert verify.relative_spread([torch.zeros(4, dtype=torch.float64)]) is None
    assert verify.relative_spread([torch.arange(3)]) is None


def test_a_stochastic_reference_is_unjudgeable_not_a_violation(tmp_path):
    """Two noisy problems whose reference's own error (a float64 run that draws other random values) is above the
    output's spread, so the adaptive bound admits the mean null on KernelBench's inputs. ``x + noise``: the large
    variant spreads the output, the mean fails there, so the verdict is evidence and the problem is not flagged.
    ``sigmoid(x) + noise``: no variant spreads it (both are not applicable: rule 5), so the problem is flagged
    unjudgeable, the mean's acceptance is excused, and the command passes. Before the spread test the flag asked only
    whether an all-zeros output passes (4 e >= 1), and this was a violation (as the H200 run of level-2 66 was)."""
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({"code": _STOCHASTIC.format(inner=inner), "level": 90, "problem_id": pid,
                                            "name": name}) + "\n"
                                for pid, name, inner in [(5, "5_NoisyAffine.py", "x"),
                                                         (6, "6_NoisySigmoid.py", "torch.sigmoid(x)")]))
    result = CliRunner().invoke(app, ["calibrate", "--problems", str(problems), "--precision", "fp32", "--nulls",
                                      "zeros", "--nulls", "mean", "--device", "cpu", "--trials", "2", "--out",
                                      str(tmp_path / "c"), "--no-progress", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert "VIOLATION" not in result.output
    store = RecordStore(tmp_path / "c-fp32")
    refs = {r["problem_name"]: r for r in store.references().values()}
    rows = {(r["problem_name"], r["model_config"]): r for r in store.evaluations()}
    for name in refs:
        spread = refs[name]["metadata"]["output_rel_std"]
        assert 1.0 > verify.REFERENCE_FACTOR * refs[name]["reference_rel_l2_error"] >= spread > 0
        assert rows[(name, "null:zeros")]["kbstudy_correct"] is False
    rescued, flagged = refs["5_NoisyAffine.py"], refs["6_NoisySigmoid.py"]
    assert rescued["unjudgeable"] is False and "applies" in rescued["metadata"]["variants"].values()
    assert rows[("5_NoisyAffine.py", "null:mean")]["kbstudy_failure"] == "variant_large"
    assert flagged["unjudgeable"] is True and flagged["degenerate"] is False
    assert "applies" not in flagged["metadata"]["variants"].values(), flagged["metadata"]["variants"]
    mean = rows[("6_NoisySigmoid.py", "null:mean")]
    assert mean["kbstudy_correct"] is True and mean["problem_flags"] == ["unjudgeable"]
    findings = calibration_findings(store.evaluations_frame(), store.references_frame()).set_index(
        ["problem_name", "null"])
    assert findings.loc[("6_NoisySigmoid.py", "mean")].excused and not findings.violation.any()


def test_h200_level2_dropout_problem_is_unjudgeable_on_its_committed_records():
    """The H200 records of level-2 66_Matmul_Dropout_Softmax at fp32 (commit 8f2f9f8) carry ``unjudgeable: false``
    (the all-zeros test alone); the current rule, applied to what they hold, flags the problem and excuses the mean
    null's acceptance, so the level-2/3 calibration has no violation."""
    from kbstudy.analysis.audit import folder_findings

    folder = committed_records(H200_CALIBRATION / "level23-fp32", file="evaluations.jsonl")
    store = RecordStore(folder)
    findings = folder_findings(store)
    dropout = findings[(findings.level == 2) & (findings.problem_id == 66)].set_index("null")
    assert dropout.loc["mean"].kbstudy_correct and dropout.loc["mean"].excused
    assert dropout.loc["mean"].unjudgeable and not dropout.loc["mean"].violation
    assert dropout.loc["zeros"].kbstudy_correct is False or not dropout.loc["zeros"].kbstudy_correct
    refs = store.references_frame()
    recorded = refs[(refs.level == 2) & (refs.problem_id == 66)].iloc[-1]
    assert recorded.unjudgeable is False or not recorded.unjudgeable  # what the record says
    assert int(findings.violation.sum()) == 0


def test_calibration_report_reads_existing_folders(tmp_path):
    """``kbstudy calibration-report`` prints the report of committed folders without evaluating: the H200 level-2/3 fp32
    calibration passes (0 violations, 13 excused), and the same records with one must-fail null edited to pass on an
    unflagged problem fail with exit code 1."""
    folder = committed_records(H200_CALIBRATION / "level23-fp32", file="evaluations.jsonl")
    result = CliRunner().invoke(app, ["calibration-report", str(folder)])
    assert result.exit_code == 0, result.output
    assert "0 violations, 13 excused, 0 null records not evaluated" in result.output
    assert "unjudgeable problem: 66_Matmul_Dropout_Softmax.py" in result.output

    edited = tmp_path / "level23-fp32"
    edited.mkdir()
    (edited / "references.jsonl").write_text((folder / "references.jsonl").read_text())
    lines = []
    for line in (folder / "evaluations.jsonl").read_text().splitlines():
        row = json.loads(line)
        if (row["level"], row["problem_id"], row["model_config"]) == (2, 1, "null:zeros"):
            row.update(kbstudy_correct=True, kbstudy_failure=None)
        lines.append(json.dumps(row))
    (edited / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["calibration-report", str(edited)])
    assert result.exit_code == 1, result.output
    assert "VIOLATION: null:zeros on 1_Conv2D_ReLU_BiasAdd.py" in result.output
    missing = CliRunner().invoke(app, ["calibration-report", str(folder), str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert "PASS" not in missing.output  # every folder is checked before any report
    assert "kbstudy_correct=True (nan)" not in result.output and "kbstudy_correct=True\n" in result.output


def test_the_committed_h200_calibration_is_complete_and_its_counts_hold():
    """The H200 calibration (``outputs/records/kernelbench/h200/calibration``) as its README and docs/reference/verifier.md quote
    it: every null evaluated on every problem at fp32 and bf16, but level-3 33_VanillaRNN and 35_LSTM at bf16,
    whose reference raises (a float32 hidden state beside a bf16 model); 0 violations in every folder; all-zeros
    passes KernelBench's check on 2 (fp32) and 4 (bf16) of 100 level-1 problems, 5 and 7 of 100 level-2, none at
    level 3 or on DLRM-Bench."""
    from kbstudy.analysis.audit import folder_findings

    root = committed_records(H200_CALIBRATION)
    zeros_pass = {("level1", "fp32"): 2, ("level1", "bf16"): 4, ("dlrm", "fp32"): 0, ("dlrm", "bf16"): 0}
    for prefix in ("level1", "dlrm", "level23"):
        for precision in ("fp32", "bf16"):
            # the report's reading (kbstudy calibration-report): flags resolved as notebook 02 resolves them
            findings = folder_findings(RecordStore(root / f"{prefix}-{precision}"))
            assert int(findings.violation.sum()) == 0, (prefix, precision)
            missing = findings[findings.outcome.ne("evaluated")]
            if (prefix, precision) == ("level23", "bf16"):
                assert set(zip(missing.level, missing.problem_id)) == {(3, 33), (3, 35)}
                assert missing.outcome.eq("reference_error").all() and len(missing) == 18
                assert missing.error_message.str.contains("dtype").all()
            else:
                assert missing.empty, (prefix, precision, missing[["problem_name", "null", "outcome"]])
            zeros = findings[findings["null"].eq("zeros") & findings.outcome.eq("evaluated")]
            passing = zeros[zeros.kernelbench_correct.eq(True)]
            if prefix == "level23":
                assert passing.level.eq(2).sum() == {"fp32": 5, "bf16": 7}[precision]
                assert not passing.level.eq(3).any()
                assert zeros.problem_id.nunique() > 0 and zeros.level.eq(2).sum() == 100
            else:
                assert len(passing) == zeros_pass[(prefix, precision)], (prefix, precision)
