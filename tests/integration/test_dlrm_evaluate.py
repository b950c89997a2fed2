"""DLRM-Bench through the project's one evaluation path: ``evaluate_batch`` on a CPU (Triton interpreter) at a tiny
scale, with our kernels for problems 1, 5 and 11 (fp32, fp32, bf16), a deliberately wrong kernel, and an in-place
(mutating) variant of problem 5; and ``measurement_run --candidates`` end to end for problem 8 (variants measured beside our
kernel). Nothing is mocked: worker and reference processes run as in ``kbstudy eval``."""

from __future__ import annotations

import json

import pytest

from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.records.store import RecordStore
from kbstudy.suites.dlrm_bench import (
    DLRM_LEVEL,
    MODEL_CONFIG,
    load_dlrm_candidates,
    load_dlrm_problems,
    problem_precision,
)
from kbstudy.suites.dlrm_bench.measurement_run import CPU_TIMING, PRECISIONS

SCALE = 1 / 512
IDS = (1, 5, 11)

#: Problem 1's kernel, its output scaled by 1.05: wrong by 5 %, every element written.
_WRONG = """

_Ours = ModelNew


class ModelNew(_Ours):
    def forward(self, *args):
        return super().forward(*args) * 1.05
"""

#: Problem 5's kernel, then the update applied to the table and state in place (the former in-place semantics).
_IN_PLACE = """

_Ours = ModelNew


class ModelNew(_Ours):
    def forward(self, indices, grad_output, weight, momentum):
        rows, new_weight, new_momentum = super().forward(indices, grad_output, weight, momentum)
        weight.index_copy_(0, rows, new_weight)
        momentum.index_copy_(0, rows, new_momentum)
        return rows, new_weight, new_momentum
"""


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dlrm_eval")
    problems = load_dlrm_problems(1.0, list(IDS))
    ours = {c.problem_id: c for c in load_dlrm_candidates() if c.problem_id in IDS}
    extra = [make_candidate(ours[1].source + _WRONG, level=DLRM_LEVEL, problem_id=1, model_config="wrong-by-5pct",
                            backend="triton"),
             make_candidate(ours[5].source + _IN_PLACE, level=DLRM_LEVEL, problem_id=5, model_config="in-place",
                            backend="triton")]
    store = RecordStore(tmp / "records")
    for precision in PRECISIONS:
        ps = [p for p in problems if problem_precision(p.problem_id) == precision]
        cs = [c for c in [*ours.values(), *extra] if problem_precision(c.problem_id) == precision]
        cfg = EvalConfig(run="dlrm-test", precision=precision, device="cpu", size_scale=SCALE, compile_baseline=False,
                         timing=dict(CPU_TIMING), progress=False, run_timeout_s=60, load_timeout_s=60,
                         cache_dir=str(tmp / "cache"))
        summary = evaluate_batch(ps, cs, store, cfg)
        assert summary.written == len(cs) and not summary.unmatched
    return {(r["problem_id"], r["model_config"]): r for r in store.evaluations()}, store


def test_our_kernels_pass_both_verdicts(records):
    rows, store = records
    for pid in IDS:
        r = rows[(pid, MODEL_CONFIG)]
        assert r["outcome"] == "evaluated", r["error_message"]
        assert r["precision"] == problem_precision(pid)
        assert r["kernelbench_correct"] and r["kbstudy_correct"], (pid, r["kbstudy_failure"], r["rel_l2_error"])
        assert r["kernelbench_trials"] == 5 and r["size_scale"] == SCALE
        assert r["candidate_ms_median"] > 0 and r["eager_ms_median"] > 0  # timed, eager baseline from the reference
        assert "inputs_mutated" not in r["metadata"] and "global_state_changes" not in r["metadata"]
    assert rows[(11, MODEL_CONFIG)]["precision"] == "bf16" and rows[(1, MODEL_CONFIG)]["precision"] == "fp32"
    # what the kernels' autotuners chose is recorded (kbstudy.harness.child.autotune.autotuned_configs): one config each under the
    # interpreter, so no benchmark
    tuned = rows[(5, MODEL_CONFIG)]["metadata"]["autotuned"]["_update_kernel"]
    assert tuned["configs"] == 1 and not tuned["timings_ms"], tuned
    (config,) = tuned["chosen"].values()
    assert {"BLOCK_P", "STAGES", "num_warps", "num_stages"} <= set(config), config
    assert set(rows[(1, MODEL_CONFIG)]["metadata"]["autotuned"]) == {"_bag_sum_kernel"}
    assert {ref["problem_id"] for ref in store.references().values()} == set(IDS)


def test_wrong_kernel_fails_both_verdicts(records):
    r = records[0][(1, "wrong-by-5pct")]
    assert r["outcome"] == "evaluated"
    assert r["kernelbench_correct"] is False and r["kbstudy_correct"] is False
    assert r["kbstudy_failure"] == "rel_l2" and r["rel_l2_error"] == pytest.approx(0.05, rel=1e-3)


def test_problem5_is_functional_and_an_in_place_variant_is_caught(records):
    rows = records[0]
    ours = rows[(5, MODEL_CONFIG)]
    assert "inputs_mutated" not in ours["metadata"] and ours["kbstudy_correct"]
    in_place = rows[(5, "in-place")]
    assert in_place["kbstudy_correct"] is False and in_place["kbstudy_failure"] == "inputs_mutated"
    # the table (input 2) and the state (input 3) were written, on every trial: KernelBench's 5, then kbstudy's extra
    # trials that apply to the problem
    mutated = in_place["metadata"]["inputs_mutated"]
    ran = list(range(5)) + [r["trial"] for r in in_place["metadata"].get("extra_trial_results", [])]
    assert [t for t, _ in mutated] == ran and all(idx == [2, 3] for _, idx in mutated)
    json.dumps(in_place)  # the record is plain JSON


def test_problem5_reference_does_not_mutate_its_inputs():
    import torch

    from kbstudy.suites.dlrm_bench import exec_source

    p = load_dlrm_problems(SCALE, [5])[0]
    ns = exec_source(p.source, p.name)
    torch.manual_seed(0)
    inputs = ns["get_inputs"]()
    pristine = [x.clone() for x in inputs]
    model = ns["Model"](*ns["get_init_inputs"]())
    first = model(*inputs)
    second = model(*inputs)
    assert all(torch.equal(a, b) for a, b in zip(inputs, pristine))
    assert all(torch.equal(a, b) for a, b in zip(first, second))  # repeated calls are independent
    rows, new_weight, new_momentum = first
    assert torch.equal(rows, torch.unique(inputs[0]))
    assert new_weight.shape == (rows.numel(), inputs[2].shape[1]) and new_momentum.shape == rows.shape
    assert bool((new_momentum > inputs[3][rows]).all())  # the state grew on every touched row


def test_measurement_run_candidates_measured_beside_ours(tmp_path, capsys):
    """``measurement_run --candidates DIR``: the folder's kernels (model configuration = the folder's name) are evaluated in the
    same run as ours, for the problems asked for. An edited copy of our problem-8 kernel is measured on its own; an
    identical copy is measured once with ours and recorded under its own configuration (``measurement_of``). Notebook
    4's table keeps ours; ``dlrm_variants.variants`` lists the other two beside it."""
    from kbstudy.analysis import dlrm as report
    from kbstudy.analysis import dlrm_variants
    from kbstudy.suites.dlrm_bench import KERNELS_DIR, measurement_run

    name = "level_5_problem_8_sample_0_kernel.py"
    source = (KERNELS_DIR / name).read_text()
    edited, copy = tmp_path / "kbstudy-triton-p8-edited", tmp_path / "kbstudy-triton-p8-copy"
    for folder, text in ((edited, source + "\n# a variant: another file, the same kernel\n"), (copy, source)):
        folder.mkdir()
        (folder / name).write_text(text)
    out = tmp_path / "dlrm"
    assert measurement_run.main(["--device", "cpu", "--size-scale", str(SCALE), "--problems", "8", "--out", str(out),
                         "--run-name", "dlrm-variants-test", "--candidates", str(edited), "--candidates", str(copy),
                         "--machine-reps", "1", "--no-progress"]) == 0

    rows = {r["model_config"]: r for r in RecordStore(out).evaluations()}
    assert set(rows) == {MODEL_CONFIG, edited.name, copy.name}
    for config, r in rows.items():
        assert r["problem_id"] == 8 and r["run"] == "dlrm-variants-test" and r["precision"] == "fp32"
        assert r["candidate_id"] == f"{config}/L{DLRM_LEVEL}/8/s0"
        assert r["outcome"] == "evaluated" and r["kernelbench_correct"] and r["kbstudy_correct"], r["error_message"]
        assert r["candidate_ms_median"] > 0
    ours, ed, cp = rows[MODEL_CONFIG], rows[edited.name], rows[copy.name]
    assert ed["candidate_sha256"] != ours["candidate_sha256"] and ed["key"] != ours["key"]
    assert "measurement_of" not in ed["metadata"]  # measured in a worker of its own
    assert cp["candidate_sha256"] == ours["candidate_sha256"] and cp["key"] == ours["key"]
    assert cp["metadata"]["measurement_of"]["model_config"] == MODEL_CONFIG
    assert cp["candidate_ms_median"] == ours["candidate_ms_median"]
    printed = capsys.readouterr().out
    for config in rows:
        assert f'[8, "{config}", "fp32", "evaluated", true, true' in printed

    table, _ = report.load_run(out)
    assert table["problem_id"].tolist() == [8] and table["ours_ms"].iloc[0] == ours["candidate_ms_median"]
    variants = dlrm_variants.variants(out).set_index("model_config")
    assert sorted(variants.index) == sorted([edited.name, copy.name])
    assert (variants["ours_ms"] == ours["candidate_ms_median"]).all() and variants["correct"].all()
    assert variants.loc[edited.name, "variant_ms"] == ed["candidate_ms_median"]
    assert variants.loc[copy.name, "variant_over_ours"] == 1.0
    assert variants["ours_over_floor"].notna().all() and variants["variant_over_floor"].notna().all()
