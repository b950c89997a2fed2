"""``load_profile_records`` with supplementary folders, on the committed H200 records.

``outputs/records/profiles/h200/eager`` holds complete rows for 10 of the 12 planned runs (``llama_infer@8b`` and
``vit_b16_infer@b16`` were skipped when the device time ran out); ``outputs/records/profiles/h200/eager-kernel-tables``
is an earlier call of the same commit whose ``workloads.jsonl`` was lost, so it holds kernel tables only, for all 12.
The notebook fills the two skipped runs from the earlier call's kernel tables: these tests check that the filled rows
are what the kernel tables say (and what that call's ``gpu_run.log`` printed), that their step times stay missing,
that nothing of the main folder is replaced, and that the two calls agree where both profiled the same run.
"""

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from support.committed import RECORDS, committed_records

from kbstudy.analysis import profiles as report
from kbstudy.records.store import iter_jsonl

REPO = RECORDS.parents[1]
H200, CALL3 = RECORDS / "profiles" / "h200" / "eager", RECORDS / "profiles" / "h200" / "eager-kernel-tables"
CPU = RECORDS / "profiles" / "cpu" / "study"
FILLED = ["llama_infer@8b", "vit_b16_infer@b16"]


@pytest.fixture(autouse=True)
def _h200_profile_records_committed():
    committed_records(H200, file="workloads.jsonl")
    committed_records(CALL3, file="kernels.jsonl")


@pytest.fixture(scope="module")
def loaded():
    return report.load_profile_records(H200, supplementary=[CALL3], root=REPO)


def _logged(folder: Path) -> dict[str, dict]:
    """What gpu_run printed per run in ``gpu_run.log``: addressable fraction, step time (ms), kernel time (ms)."""
    rx = re.compile(r"\] (\S+@\S+): \d+ names, ([\d.]+) ms kernel time/step, step ([\d.]+) ms, addressable ([\d.]+)")
    return {m[1]: {"kernel_ms": float(m[2]), "step_ms": float(m[3]), "f": float(m[4])}
            for m in map(rx.search, (folder / "gpu_run.log").read_text().splitlines()) if m}


def test_without_supplementary_the_two_runs_are_skipped():
    kernels, workloads = report.load_profile_records(H200, root=REPO)
    coverage = report.coverage_table(kernels, workloads)
    assert (coverage.loc[coverage["role"] == "seven", "status"] == "ok").all()
    assert report.missing_runs(coverage) == FILLED
    assert report.missing_runs(coverage, role="sweep") == ["llama_infer@8b"]
    assert set(workloads["source_folder"]) == {"outputs/records/profiles/h200/eager"}
    assert set(workloads["row_from"]) == {report.ROW_FROM_WORKLOADS}
    sweep = report.sweep_table(report.workload_table(kernels, workloads), workloads)
    # Llama has two sizes without the earlier call's 8B kernel table: no sweep (three sizes needed)
    assert sweep.groupby("workload")["size"].apply(list).to_dict() == {"gpt2_train": ["small", "medium", "large"]}


def test_supplementary_fills_only_what_the_main_folder_skipped(loaded):
    kernels, workloads = loaded
    main = pd.DataFrame(list(iter_jsonl(H200 / "workloads.jsonl"))).set_index("workload_key")
    w = workloads.set_index("workload_key")
    assert list(w.index) == list(main.index)  # plan order kept; nothing added or lost
    assert (w["status"] == "ok").all()
    filled = w[w["row_from"] == report.ROW_FROM_KERNELS]
    assert list(filled.index) == FILLED
    assert set(filled["source_folder"]) == {"outputs/records/profiles/h200/eager-kernel-tables"}
    assert set(filled["replaces"]) == {"skipped"} and set(main.loc[FILLED, "status"]) == {"skipped"}
    # never invented: a kernel table holds no step time
    for col in ("step_ms_median", "step_ms_q1", "step_ms_q3"):
        assert filled[col].isna().all()
    assert filled["precision"].isna().all()
    # the main folder's rows are its own, step times included
    kept = w[w["row_from"] == report.ROW_FROM_WORKLOADS]
    assert set(kept["source_folder"]) == {"outputs/records/profiles/h200/eager"} and len(kept) == 10
    pd.testing.assert_series_equal(kept["step_ms_median"], main.loc[kept.index, "step_ms_median"])
    # each run's kernels come from the folder of its workload row, and are that folder's kernel table
    by_key = kernels.groupby("workload_key")["source_folder"].unique()
    assert all(list(by_key[k]) == [w.loc[k, "source_folder"]] for k in w.index)
    call3 = pd.DataFrame(list(iter_jsonl(CALL3 / "kernels.jsonl")))
    for key in FILLED:
        mine = kernels[kernels["workload_key"] == key].set_index("name")["time_us_per_step"].sort_index()
        theirs = call3[call3["workload_key"] == key].set_index("name")["time_us_per_step"].sort_index()
        pd.testing.assert_series_equal(mine, theirs, check_names=False)
        assert w.loc[key, "kernel_us_per_step"] == pytest.approx(theirs.sum())
        assert w.loc[key, "n_names"] == len(theirs)


def test_filled_rows_match_what_their_call_printed(loaded):
    """The addressable fraction and kernel time derived from the kernel table equal those gpu_run logged (3 decimals,
    2 decimals in ms) for the same call; the step time it logged is not used."""
    _, workloads = loaded
    w = workloads.set_index("workload_key")
    logged = _logged(CALL3)
    for key in FILLED:
        assert w.loc[key, "addressable_fraction"] == pytest.approx(logged[key]["f"], abs=5e-4)
        assert w.loc[key, "kernel_us_per_step"] / 1e3 == pytest.approx(logged[key]["kernel_ms"], abs=5e-3)
        assert math.isnan(w.loc[key, "step_ms_median"])
    # and the main folder's rows match its own log
    main_log = _logged(H200)
    for key, row in w[w["row_from"] == report.ROW_FROM_WORKLOADS].iterrows():
        assert row["addressable_fraction"] == pytest.approx(main_log[key]["f"], abs=5e-4)
        assert row["step_ms_median"] == pytest.approx(main_log[key]["step_ms"], abs=5e-3)


def test_parameter_counts_from_the_meta_device_equal_the_recorded_ones(loaded):
    _, workloads = loaded
    w = workloads.set_index("workload_key")
    for key, row in w[w["row_from"] == report.ROW_FROM_WORKLOADS].iterrows():
        assert report._config_facts(row["workload"], row["size"]) == {"model": row["model"], "params": row["params"]}
    assert w.loc["llama_infer@8b", "params"] == 8_030_261_248  # Llama-3.1-8B's published dims
    assert w.loc["vit_b16_infer@b16", "params"] == 86_567_656  # ViT-B/16 with a 1000-class head


def test_two_calls_agree_where_both_profiled(loaded):
    agreement = report.folder_agreement(H200, [CALL3], root=REPO)
    assert len(agreement) == 10 and set(agreement["folder"]) == {"outputs/records/profiles/h200/eager-kernel-tables"}
    assert agreement["abs_diff_f"].max() < 0.01
    # cuDNN picks convolution algorithms per call (some 1x1 convolutions run as cuBLASLt nvjet GEMMs): the
    # GEMM/convolution split of ResNet-50 moves by a few points, the vendor share and f do not
    assert agreement["abs_diff_gemm_attention"].max() < 0.05
    assert (agreement["kernel_ms_other"] / agreement["kernel_ms"]).between(0.95, 1.05).all()


def test_sweep_and_notes_cover_three_sizes_per_transformer(loaded):
    kernels, workloads = loaded
    table = report.workload_table(kernels, workloads)
    sweep = report.sweep_table(table, workloads)
    assert sweep.groupby("workload")["size"].apply(list).to_dict() == {
        "gpt2_train": ["small", "medium", "large"], "llama_infer": ["1b", "3b", "8b"]}
    assert sweep.loc["llama_infer@8b", "row_from"] == report.ROW_FROM_KERNELS
    assert math.isnan(sweep.loc["llama_infer@8b", "step_ms_median"])
    assert (sweep["amdahl_bound"] == 1 / (1 - sweep["addressable_fraction"])).all()
    notes = report.paper_comparison_notes(table, sweep)
    assert notes[0].startswith("Paper: Agarwal, Garg, Singhal (2026)")
    assert any(n.startswith("gpt2_train from small to large (3 sizes): f falls at every size step") for n in notes)
    assert any(n.startswith("llama_infer from 1b to 8b (3 sizes): f falls at every size step") for n in notes)
    assert any("below the paper's 80.0%-86.0%" in n for n in notes)


def test_supplementary_folder_of_another_machine_is_refused():
    with pytest.raises(ValueError, match="differs"):
        report.load_profile_records(H200, supplementary=[CPU], root=REPO)
    with pytest.raises(FileNotFoundError):
        report.load_profile_records(H200, supplementary=[RECORDS / "dlrm_bench" / "h200" / "final"], root=REPO)
