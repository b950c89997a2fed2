"""The structural variants' pieces on real KernelBench problems: the size choice (``variant_inputs.shape_edit_sets``
through ``problems.size_constants``), the layout transforms, the parameter matching, the verdict's classes, the
settings key of ``--correctness-only`` and the analysis of the classes (``kbstudy.analysis.variants``)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from kbstudy.analysis import variants as structural
from kbstudy.harness import variant_inputs
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.loading import load_module
from kbstudy.harness.problems import edit_candidate_sizes, edit_sizes, scale_source, size_constants
from kbstudy.verdict import trials
from kbstudy.verdict.checks import KbstudyTrial
from kbstudy.verdict.combine import combine_extra


def _constants(source: str) -> dict:
    return {name: value for _, _, name, value, _ in size_constants(source)}


# ------------------------------------------------------------------------------------------------ sizes


def test_primes():
    assert [variant_inputs.prime_below(n) for n in (2, 3, 10, 16, 3072)] == [3, 3, 7, 13, 3067]
    assert [variant_inputs.prime_above(n) for n in (8, 14, 5121)] == [11, 17, 5147]


def test_shape_prime_edits_every_size_to_a_smaller_odd_prime(problem_by_name):
    source = problem_by_name["1_Square_matrix_multiplication_.py"].source  # N = 2048 * 2
    (edits,) = variant_inputs.shape_edit_sets(source, "shape_prime")
    assert list(edits) == ["N"] and edits["N"] < 4096 and variant_inputs.is_prime(edits["N"]) and edits["N"] % 2
    assert _constants(edit_sizes(source, edits))["N"] == edits["N"]


def test_hyper_parameters_and_small_counts_are_never_edited(problem_by_name):
    source = problem_by_name["41_Max_Pooling_1D.py"].source  # kernel_size, stride, padding, dilation
    edits = variant_inputs.shape_edit_sets(source, "shape_prime")[0]
    assert set(edits) == {"batch_size", "features", "sequence_length"}
    source = problem_by_name["89_cumsum.py"].source  # dim = 1 is an axis
    edits = variant_inputs.shape_edit_sets(source, "shape_prime")[0]
    assert "dim" not in edits and isinstance(edits["input_shape"], tuple)


def test_batch1_only_where_there_is_a_batch(problem_by_name):
    assert variant_inputs.shape_edit_sets(problem_by_name["19_ReLU.py"].source, "shape_batch1") == [{"batch_size": 1}]
    assert variant_inputs.shape_edit_sets(problem_by_name["1_Square_matrix_multiplication_.py"].source,
                                          "shape_batch1") == []


def test_a_fallback_leaves_channel_counts_alone(problem_by_name):
    name = next(n for n in problem_by_name if n.startswith("73_conv_transposed_3D"))  # groups = 4
    sets = variant_inputs.shape_edit_sets(problem_by_name[name].source, "shape_prime")
    assert len(sets) == 2 and "in_channels" in sets[0] and "in_channels" not in sets[1]


def test_larger_sizes_grow(problem_by_name):
    source = scale_source(problem_by_name["19_ReLU.py"].source, 0.01)
    (edits,) = variant_inputs.shape_edit_sets(source, "shape_larger")
    before = _constants(source)
    assert all(edits[n] > before[n] for n in edits)


def test_the_candidates_copies_of_the_sizes_follow_the_problems(problem_by_name):
    problem = problem_by_name["19_ReLU.py"].source
    candidate = "BLOCK_SIZE = 1024\nbatch_size = 4096\ndim = 999\nclass ModelNew: pass\n"
    edited = edit_candidate_sizes(candidate, problem, {"batch_size": 7, "dim": 11})
    assert _constants(edited) == {"BLOCK_SIZE": 1024, "batch_size": 7, "dim": 999}  # dim differs from the problem's
    assert edit_candidate_sizes("not python (", problem, {"batch_size": 7}) == "not python ("


# ------------------------------------------------------------------------------------------------ layouts


@pytest.mark.parametrize("name", trials.LAYOUT_VARIANTS)
def test_layouts_keep_the_values_and_change_the_strides(name):
    x = torch.randn(2, 3, 4, 5)
    (y,) = variant_inputs.relayout([x], name)
    assert torch.equal(x, y) and y.shape == x.shape
    assert variant_inputs.layout_changed([x], [y])
    assert not y.is_contiguous() or y.storage_offset() > 0


def test_strided_layout_has_a_step_and_an_offset():
    (y,) = variant_inputs.relayout([torch.randn(3, 4)], "layout_strided")
    assert y.stride() == (9, 2) and y.storage_offset() == 1


def test_integer_inputs_and_unsuitable_ranks_are_left_alone():
    ints, vec = torch.arange(6).reshape(2, 3), torch.randn(7)
    out = variant_inputs.relayout([ints, vec, 3.0], "layout_transposed")
    assert out[0] is ints and out[1] is vec and out[2] == 3.0
    assert not variant_inputs.layout_changed([ints, vec], out[:2])
    assert variant_inputs.relayout([vec], "layout_channels_last")[0] is vec


# ------------------------------------------------------------------------------------------------ parameters


def _model(problem, cls_name="Model"):
    module = load_module(scale_source(problem.source, 1 / 64), f"kbstudy_test_{abs(hash(problem.name))}", problem.name)
    torch.manual_seed(42)
    return getattr(module, cls_name)(*module.get_init_inputs())


def test_parameter_spec_of_a_layer_norm(problem_by_name):
    spec = variant_inputs.parameter_spec(_model(problem_by_name["40_LayerNorm.py"]))
    assert [e["name"] for e in spec] == ["ln.weight", "ln.bias"]
    assert spec[0]["scale"] == 1.0 and spec[0]["nonneg"] and spec[1]["scale"] == 1.0 and not spec[1]["nonneg"]


def test_parameters_are_replaced_identically_and_matched_by_name_or_order(problem_by_name):
    problem = problem_by_name["33_BatchNorm.py"]
    model, other = _model(problem), _model(problem)
    spec = variant_inputs.parameter_spec(model)
    assert variant_inputs.replace_parameters(model, spec, 5, torch.float32) is None
    assert not torch.equal(model.bn.weight, torch.ones_like(model.bn.weight))
    assert bool((model.bn.running_var > 0).all())  # a variance stays positive

    class Renamed(torch.nn.Module):  # the same tensors under other names: matched by order and shape
        def __init__(self):
            super().__init__()
            self.norm = other.bn

    renamed = Renamed()
    _, how = variant_inputs.match_parameters(renamed, spec)
    assert how == "by order and shape"
    assert variant_inputs.replace_parameters(renamed, spec, 5, torch.float32) is None
    assert torch.equal(renamed.norm.weight, model.bn.weight) and torch.equal(renamed.norm.bias, model.bn.bias)


def test_unmatched_parameters_and_parameterless_models_are_not_applicable(problem_by_name):
    spec = variant_inputs.parameter_spec(_model(problem_by_name["40_LayerNorm.py"]))
    reason = variant_inputs.replace_parameters(torch.nn.Linear(3, 4), spec, 1, torch.float32)
    assert reason.startswith("ModelNew's floating-point parameters and buffers")
    relu_spec = variant_inputs.parameter_spec(_model(problem_by_name["19_ReLU.py"]))
    assert relu_spec == []
    assert "no floating-point parameters" in variant_inputs.replace_parameters(torch.nn.ReLU(), relu_spec, 1,
                                                                               torch.float32)


def test_draws_are_reproducible_and_of_the_spec_scale():
    spec = [{"name": "w", "shape": [1000], "scale": 3.0, "nonneg": True}]
    a, b = variant_inputs.parameter_draws(spec, 9), variant_inputs.parameter_draws(spec, 9)
    assert torch.equal(a[0], b[0]) and float(a[0].min()) >= 1.5 and float(a[0].max()) < 4.5


# ------------------------------------------------------------------------------------------------ verdict


def _trial(passed: bool) -> KbstudyTrial:
    return KbstudyTrial(passed, None if passed else "rel_l2", 0.0 if passed else 1.0, 1.0, None if passed else "off")


def test_a_candidate_failing_only_a_family_gets_its_class():
    plan = trials.plan_extra_trials(5, 1, ("signed",), seeds=[1, 2, 3, 4, 5],
                                    structural=("shape_prime", "layout_transposed", "params_random"))
    names = [s.name for s in plan]
    outcome = {"fresh_seeds": True, "signed": True, "shape_prime": False, "layout_transposed": True,
               "params_random": False}
    fields = combine_extra({"kbstudy_correct": True}, [(s, _trial(outcome[s.name])) for s in plan], names, {})
    assert fields["kbstudy_correct"] is False and fields["kbstudy_failure"] == "variant_shape_prime"
    assert fields["metadata_verdict"]["variant_classes"] == ["correct_at_benchmark_shape_only",
                                                              "correct_for_initial_parameters_only"]
    # failing a value trial too: wrong at the benchmark's shape already, so no class
    outcome["signed"] = False
    fields = combine_extra({"kbstudy_correct": True}, [(s, _trial(outcome[s.name])) for s in plan], names, {})
    assert "variant_classes" not in fields.get("metadata_verdict", {})


def test_seeds_of_a_record_made_before_the_structural_variants_still_replay():
    plan = trials.plan_extra_trials(5, 2, trials.VARIANTS, seeds=[1, 2, 3, 4],
                                    structural=trials.STRUCTURAL_VARIANTS)
    assert [s.seed for s in plan[:4]] == [1, 2, 3, 4] and len(plan) == 4 + len(trials.STRUCTURAL_VARIANTS)
    with pytest.raises(ValueError):
        trials.plan_extra_trials(5, 2, trials.VARIANTS, seeds=[1, 2, 3], structural=trials.STRUCTURAL_VARIANTS)


def test_settings_keys_of_the_new_modes_are_distinct_and_old_keys_unchanged():
    old = EvalConfig(structural_variants=()).settings_key()
    assert "structural" not in old and "correctness_only" not in old
    default = EvalConfig().settings_key()
    assert default.startswith(old) and default.endswith(";structural=" + ",".join(trials.STRUCTURAL_VARIANTS))
    only = EvalConfig(correctness_only=True)
    assert only.settings_key() == default + ";correctness_only"
    assert not (only.time_candidates or only.eager_baseline or only.compile_baseline)


# ------------------------------------------------------------------------------------------------ analysis


def _frame(rows):
    base = {"outcome": "evaluated", "precision": "fp32", "problem_version": "current", "problem_name": "19_ReLU.py",
            "problem_id": 19, "level": 1, "size_scale": 1.0, "hardware": "H200", "sample_id": 0,
            "candidate_sha256": None}
    return pd.DataFrame([{**base, "candidate_sha256": f"s{i}", **r} for i, r in enumerate(rows)])


def test_the_analysis_counts_the_classes_per_model_configuration():
    passed = {name: "passed" for name in trials.STRUCTURAL_VARIANTS}
    rows = [
        {"model_config": "m1", "candidate_id": "a", "kernelbench_correct": True, "kbstudy_correct": True,
         "kbstudy_variants": passed, "metadata": {}},
        {"model_config": "m1", "candidate_id": "b", "kernelbench_correct": True, "kbstudy_correct": False,
         "kbstudy_variants": {**passed, "shape_prime": "failed"},
         "metadata": {"variant_classes": ["correct_at_benchmark_shape_only"], "kbstudy_detail": "shape_prime ..."}},
        {"model_config": "m2", "candidate_id": "c", "kernelbench_correct": True, "kbstudy_correct": False,
         "kbstudy_variants": {**passed, "layout_strided": "failed", "params_random": "failed"},
         "metadata": {"variant_classes": ["correct_for_contiguous_only", "correct_for_initial_parameters_only"]}},
        {"model_config": "m2", "candidate_id": "old", "kernelbench_correct": True, "kbstudy_correct": True,
         "kbstudy_variants": {"signed": "passed"}, "metadata": {}},  # made before the structural variants
    ]
    frame = _frame(rows)
    assert structural.has_variant_records(frame)
    summary = structural.variant_summary(frame).set_index("model_config")
    assert summary.loc["m1", "correct_at_benchmark_shape_only"] == 1 and summary.loc["m1", "evaluated"] == 2
    assert summary.loc["m2", "evaluated"] == 1 and summary.loc["m2", "any_class"] == 1
    assert summary.loc["m2", "correct_for_contiguous_only"] == 1
    examples = structural.variant_examples(frame)
    assert set(examples["candidate_id"]) == {"b", "c"}
    assert structural.family_status({"signed": "passed"}, "shape") == structural.NOT_RUN


def test_records_without_the_new_fields_say_not_run():
    frame = _frame([{"model_config": "m", "candidate_id": "x", "kernelbench_correct": True, "kbstudy_correct": True,
                     "kbstudy_variants": None, "metadata": {}}])
    assert not structural.has_variant_records(frame)
    assert structural.variant_summary(frame).empty and structural.variant_examples(frame).empty
