"""Substitution measured in separate processes on the tiny workloads (CPU): an adversarial wrong GELU is refused by the
end-to-end check before anything is timed, a correct one is timed against the baseline, and our DLRM-Bench Triton
kernel (problem 3, under ``TRITON_INTERPRET=1``) takes the place of the DLRM model's 26 EmbeddingBags in training."""

from __future__ import annotations

import pytest
from support import substitution as S
from typer.testing import CliRunner

from kbstudy.cli.app import app
from kbstudy.substitution.gpu_run import cases
from kbstudy.substitution.kernels import dlrm_choices
from kbstudy.substitution.measure import measure_case
from kbstudy.substitution.store import load_substitutions

GELU_PROBLEM = S.problem("F.gelu(x, approximate='tanh')", "[torch.rand(2, 32, 256)]")
TIMING_FIELDS = ("baseline_ms_median", "substituted_ms_median", "baseline_ms_samples")


def _measure(workload, choices, source="llm", **kw):
    return measure_case(workload, "eager", source, choices, {}, device="cpu", size="tiny", reps=2, steps=2,
                        warmup=1, **kw)


def test_wrong_gelu_is_refused_before_timing():
    record = _measure("gpt2_train", [S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.WRONG_GELU), shape_generic=True)])
    assert record["outcome"] == "check_failed" and record["e2e_passed"] is False
    assert record["e2e_rel_l2"]["outputs"] > 1e-2
    assert not any(k in record for k in TIMING_FIELDS)
    assert record["places_substituted"][0]["operator"] == "gelu_tanh"


def test_correct_gelu_is_timed_against_the_baseline():
    record = _measure("gpt2_train", [S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH), shape_generic=True)])
    assert record["outcome"] == "timed", record.get("error_message")
    assert record["e2e_passed"] and len(record["baseline_ms_samples"]) == len(record["substituted_ms_samples"]) == 4
    assert record["saving_fraction"] == pytest.approx(1 - record["substituted_ms_median"] / record["baseline_ms_median"])
    assert record["baseline_ms_ci_low"] <= record["baseline_ms_median"] <= record["baseline_ms_ci_high"]
    for field in ("workload", "config", "mode", "kernel_source", "operators", "places_not_applicable", "hardware",
                  "git_commit", "torch_version"):
        assert field in record


def test_fp32_kernel_in_a_place_it_was_not_verified_for_contributes_nothing():
    # the tiny model's GELU input is [2, 32, 256] (the verified shape) -- a different batch is refused by shape
    record = measure_case("gpt2_train", "eager", "llm", [S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH))],
                          {}, device="cpu", size="tiny-l", reps=1, steps=1, warmup=0)
    assert record["outcome"] == "nothing_applicable" and record["saving_fraction"] == 0.0
    assert "not shape-generic" in record["places_not_applicable"][0]["reason"]


@pytest.mark.parametrize("workload", ["dlrm_dcnv2_train", "dlrm_dcnv2_infer"])
def test_dlrm_bench_triton_kernel_replaces_the_embedding_bags(workload, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # inherited by the worker processes
    record = _measure(workload, dlrm_choices(shape_generic=True), source="expert")
    assert record["outcome"] == "timed", record.get("error_message") or record.get("e2e_error")
    assert [p["operator"] for p in record["places_substituted"]] == ["multi_table_embedding_bag"]
    refused = {p["operator"]: p["reason"] for p in record["places_not_applicable"]}
    assert "float32" in refused["dcnv2_cross"] and "float32" in refused["bottom_mlp"]
    assert record["e2e_rel_l2"]["outputs"] < 1e-5
    if workload == "dlrm_dcnv2_train":
        assert record["e2e_rel_l2"]["grads"] < 1e-5  # sparse table gradients, compared row for row


def test_gpu_run_orders_expert_cases_first():
    order = cases(["gpt2_train", "dlrm_dcnv2_train"], ["eager", "production"])
    assert order[0] == ("dlrm_dcnv2_train", "eager", "expert")
    assert ("gpt2_train", "production", "llm") in order and len(order) == 6


def test_substitute_command_writes_one_record_per_case(tmp_path, kernelbench_dir):
    result = CliRunner().invoke(app, ["substitute", "--out", str(tmp_path), "--device", "cpu", "--tiny",
                                      "--workloads", "bert_infer", "--config", "eager", "--sources", "llm",
                                      "--kb-dir", str(kernelbench_dir)])
    assert result.exit_code == 0, result.output
    frame = load_substitutions(tmp_path)
    assert list(frame.outcome) == ["nothing_applicable"] and frame.saving_fraction[0] == 0.0
    assert frame.n_places_not_applicable[0] >= 2  # BERT's GELU and LayerNorm: no verified kernel
