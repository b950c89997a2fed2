"""Anti-cheat checks that need no GPU (issue 3, part 4): inputs mutated, global state changed, results cached across
calls, and the second coverage sentinel on a CPU. Each cheat is a candidate file (``candidates/<name>.py``) that must
be caught; the honest controls beside them must not be flagged."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from support.adversarial import CANDIDATES_DIR, load_candidates
from support.helpers import cpu_config, records_by_config

from kbstudy.harness import fresh_inputs, timing
from kbstudy.harness.assemble import note_integrity
from kbstudy.harness.child import integrity
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.records.store import RecordStore
from kbstudy.verdict import checks as verify


@pytest.fixture(scope="module")
def cheats(problem_by_name, tmp_path_factory):
    """19_ReLU at 1/100 size: the honest controls and one cheat per check (``candidates/<name>.py``)."""
    tmp = tmp_path_factory.mktemp("anticheat")
    relu = problem_by_name["19_ReLU.py"]
    cands = load_candidates("honest", "honest_reads_pointer", "mutates_input", "zeroes_input_after", "sets_tf32",
                            "sets_matmul_precision", "patches_at_import", "patches_at_call", "switches_nan_fill_off",
                            "cache_by_pointer", "cache_by_shape", "memo_pointer_and_samples", "partial")
    store = RecordStore(tmp / "records")
    summary = evaluate_batch([relu], cands, store, cpu_config(size_scale=0.01, cache_dir=str(tmp / "cache"),
                                                              time_candidates=False))
    assert summary.written == len(cands)
    return records_by_config(store)


def _evaluated(row: dict) -> dict:
    assert row["outcome"] == "evaluated", f"{row['candidate_id']}: {row['outcome']}: {row['error_message']}"
    return row


@pytest.mark.parametrize("name", ["honest", "honest_reads_pointer"])
def test_honest_candidates_are_not_flagged(cheats, name):
    row = _evaluated(cheats[name])
    assert row["kbstudy_correct"] is True and row["kbstudy_failure"] is None
    for key in ("inputs_mutated", "global_state_changes", "stale_output_trials"):
        assert key not in row["metadata"], (key, row["metadata"].get(key))
    assert row["metadata"]["storage_reuse_trial"] == 1
    assert row["coverage_sentinels"] == sorted(["nan", repr(verify.FLOAT_SENTINEL)])
    assert row["max_abs_error_normalized"] == 0.0 and row["elementwise_rel_error_max"] == 0.0


@pytest.mark.parametrize("name", ["mutates_input", "zeroes_input_after"])
def test_mutated_inputs_fail(cheats, name):
    row = _evaluated(cheats[name])
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "inputs_mutated"
    # KernelBench's 5 trials, then the 4 extra trials (2 fresh seeds, signed, large: all apply to ReLU), then the 5
    # structural trials that apply to ReLU (3 shapes, 2 layouts; channels-last and parameters do not)
    assert [trial for trial, _ in row["metadata"]["inputs_mutated"]] == list(range(14))
    assert all(indices == [0] for _, indices in row["metadata"]["inputs_mutated"])
    # the values were right: only the integrity check tells (KernelBench regenerates inputs, so it passes)
    assert row["kernelbench_correct"] is True and row["rel_l2_error"] < 1e-6


@pytest.mark.parametrize("name, expected", [
    ("sets_tf32", "torch.backends.cuda.matmul.allow_tf32: False -> True"),
    ("sets_matmul_precision", "torch.get_float32_matmul_precision(): 'highest' -> 'medium'"),
    ("patches_at_import", "torch.allclose replaced"),
    ("patches_at_call", "torch.Tensor.__eq__ replaced"),
    ("switches_nan_fill_off", "fill_uninitialized_memory switched off during the call"),
])
def test_global_state_changes_fail(cheats, name, expected):
    row = _evaluated(cheats[name])
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "global_state"
    changes = row["metadata"]["global_state_changes"]
    assert changes["trial"] == 0
    assert any(expected in line for line in changes["changes"]), changes


@pytest.mark.parametrize("name", ["cache_by_pointer", "cache_by_shape", "memo_pointer_and_samples"])
def test_cached_results_fail_on_the_storage_reuse_trial(cheats, name):
    row = _evaluated(cheats[name])
    assert row["kbstudy_correct"] is False and row["kbstudy_failure"] == "stale_output"
    assert 1 in row["metadata"]["stale_output_trials"]


def _candidate_module(name: str):
    """The candidate file ``candidates/<name>.py`` imported in this process (its module globals readable)."""
    spec = importlib.util.spec_from_file_location(f"kbstudy_test_candidate_{name}", CANDIDATES_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_storage_reuse_trial_keeps_what_a_sampling_memo_looks_at():
    """Issue 27, item 4: the memo keyed on pointer plus sampled values hits on the reuse trial's inputs (so it
    returns trial 0's answer: ``stale_output`` above) only because those inputs keep some of trial 0's elements; a
    full redraw in the same storage (what the trial did before) would have made it recompute."""
    memo = _candidate_module("memo_pointer_and_samples")
    gen = torch.Generator().manual_seed(0)
    trial0, trial1 = torch.rand(16, 163, generator=gen), torch.rand(16, 163, generator=gen)
    storage = trial0.clone()
    key0 = memo._key(storage)
    kept = fresh_inputs.keep_some([trial0], [trial1.clone()], seed=7)[0]  # written into its second argument
    storage.copy_(kept)  # the candidate process copies the reuse trial's values into trial 0's tensors
    assert memo._key(storage) == key0
    changed = (kept != trial0).float().mean()
    assert 0.35 < float(changed) < 0.55  # about half the values are new: the stale answer is far off
    storage.copy_(trial1)
    assert memo._key(storage) != key0


def test_a_memo_of_input_contents_never_hits_in_the_timing_loop():
    """Issue 27, item 5: no call of the timing loop (warm-up, timed) sees values an earlier call saw, so the memo
    keyed on the inputs' full contents never hits and gains nothing; with one pool entry (values repeated, as in
    a loop that reuses its input set) it hits on every call after the first, so the assertion can fail."""
    for entries, expect_hits in ((timing.TIMING_POOL_MIN_SETS, False), (timing.TIMING_POOL_MAX_SETS, False),
                                 (1, True)):
        memo = _candidate_module("memo_by_contents")
        model = memo.ModelNew()
        pool = [[torch.rand(16, 163, generator=torch.Generator().manual_seed(e))] for e in range(entries)]
        result = timing.time_pool(lambda x: model(x), pool, device="cpu", keep_outputs=True, warmup_ms=0,
                                  min_warmup=3, budget_ms=1000, min_reps=12, max_reps=12)
        calls = 3 + len(result.samples)
        if expect_hits:
            assert memo._HITS == calls - 1
        else:
            assert memo._HITS == 0 and len(memo._MEMO) == calls
            for entry, _, outputs, mix in result.checked:  # and its timed answers are right for their inputs
                inputs = fresh_inputs.mixed(pool[entry], pool[(entry + 1) % entries], mix)
                assert torch.equal(outputs[0], torch.relu(inputs[0]))


def test_partial_writer_is_caught_under_both_sentinels(cheats):
    row = _evaluated(cheats["partial"])
    assert row["kbstudy_failure"] == "coverage" and row["coverage"] == pytest.approx(0.5, abs=0.02)
    assert row["coverage_sentinels"] == sorted(["nan", repr(verify.FLOAT_SENTINEL)])


# ------------------------------------------------------------------------------------------------ unit level


def test_global_state_snapshot_is_stable_and_sees_changes():
    before = integrity.global_state_snapshot()
    assert integrity.global_state_diff(before, integrity.global_state_snapshot()) == []
    saved = torch.nn.functional.relu
    try:
        torch.nn.functional.relu = lambda x, inplace=False: x
        assert integrity.global_state_diff(before, integrity.global_state_snapshot()) == ["torch.nn.functional.relu replaced"]
    finally:
        torch.nn.functional.relu = saved
    assert integrity.global_state_diff(before, integrity.global_state_snapshot()) == []


def test_fill_fresh_mode_fills_fresh_allocations_only():
    x = torch.rand(8)
    with integrity.FillFreshMode(verify.FLOAT_SENTINEL):
        a = torch.empty_like(x)
        b = torch.empty(3, dtype=torch.float64)
        c = x.new_empty((2, 2))
        d = torch.relu(x)
        e = torch.empty(4, dtype=torch.int64)  # integers keep what they hold (their coverage uses NaN trials)
    for t in (a, b, c):
        assert bool((t == torch.tensor(verify.FLOAT_SENTINEL, dtype=t.dtype)).all())
    assert torch.equal(d, torch.relu(x)) and e.shape == (4,)


def test_inputs_equal():
    x = torch.tensor([1.0, float("nan"), 3.0])
    assert integrity.inputs_equal(x, x.clone())
    assert not integrity.inputs_equal(x, x * 2)
    assert not integrity.inputs_equal(x, x.double())
    assert integrity.inputs_equal(3, 3) and not integrity.inputs_equal(3, 4)


def test_inputs_equal_across_devices_compares_chunk_by_chunk(monkeypatch):
    """The host-copy comparison (:func:`kbstudy.harness.child.integrity._equal_across_devices`) slices both tensors; here both are on
    the CPU and a chunk is 8 float32 elements, so a change is found in the first, a middle and the last chunk."""
    monkeypatch.setattr(integrity, "COMPARE_CHUNK_BYTES", 32)
    x = torch.randn(6, 7)  # 42 elements: 5 full chunks and a 2-element tail
    x[3, 3] = float("nan")
    assert integrity._equal_across_devices(x.clone(), x)
    for flat_index in (0, 20, 41):
        y = x.clone()
        y.view(-1)[flat_index] += 1.0
        assert not integrity._equal_across_devices(y, x) and not integrity._equal_across_devices(x, y)
    # a non-contiguous tensor is compared whole
    t = x.t()
    assert integrity._equal_across_devices(t.clone(), t)
    u = t.clone()
    u[0, 5] = -99.0
    assert not integrity._equal_across_devices(u, t)
    ints = torch.arange(42)
    assert integrity._equal_across_devices(ints.clone(), ints) and not integrity._equal_across_devices(ints + 1, ints)


def test_pristine_copies_go_to_the_host_only_when_large_and_the_device_cannot_spare_them(monkeypatch):
    monkeypatch.setattr(integrity, "PRISTINE_HOST_BYTES", 1000)
    monkeypatch.setattr(integrity, "PRISTINE_DEVICE_FREE_FRACTION", 0.25)
    assert not integrity.pristine_on_host(1000, 0)  # small: always beside the input
    assert not integrity.pristine_on_host(2000, 8000)  # a quarter of free memory
    assert integrity.pristine_on_host(2001, 8000)
    assert integrity.pristine_on_host(2000, None)  # free memory unknown


def test_pristine_copy_is_an_exact_private_copy():
    x = torch.tensor([1.0, float("nan"), 3.0])
    copy = integrity.pristine_copy(x)
    assert copy.data_ptr() != x.data_ptr() and integrity.inputs_equal(copy, x)
    x[0] = 2.0
    assert not integrity.inputs_equal(copy, x)
    assert integrity.pristine_copy(7) == 7


def test_integrity_notes_say_where_pristine_copies_went():
    """The worker's per-trial report of host-held pristine copies lands in the record's metadata, per trial."""
    meta: dict = {}
    note_integrity(meta, 0, {"inputs_mutated": [], "global_state": [], "reused_inputs": False,
                              "pristine_on_host": [0]})
    note_integrity(meta, 1, {"inputs_mutated": [], "global_state": [], "reused_inputs": True, "pristine_on_host": []})
    note_integrity(meta, 2, {"inputs_mutated": [1], "global_state": [], "reused_inputs": False,
                              "pristine_on_host": [0, 1]})
    assert meta == {"pristine_on_host": [[0, [0]], [2, [0, 1]]], "storage_reuse_trial": 1, "inputs_mutated": [[2, [1]]]}
