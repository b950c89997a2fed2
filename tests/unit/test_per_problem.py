"""kbstudy.analysis.per_problem: one row per problem x candidate, read from hand-made records
(tests/fixture_records.py): outcome, both verdicts, the failing check, the speedup with its interval, the CPU label."""

from __future__ import annotations

import dataclasses

import pandas as pd
from support.fixture_records import all_records, record, write_store

from kbstudy.analysis.per_problem import (
    COLUMNS,
    CPU_TIMING_NOTE,
    failing_check,
    per_problem,
    speedup_number,
    speedup_text,
)


def test_one_row_per_record_sorted_by_problem(tmp_path):
    write_store(tmp_path / "r")
    table = per_problem([tmp_path / "r"])
    assert list(table.columns) == COLUMNS
    assert len(table) == len(all_records())
    keys = list(zip(table.level, table.problem_id, table.model_config, table.sample_id))
    assert keys == sorted(keys)
    first = table.iloc[0]
    assert first.problem == "L1/1 1_Square_matrix_multiplication_.py" and first.model_config == "A"


def test_verdicts_failing_check_and_speedup(tmp_path):
    records = [
        record("A", 1, kb=True, kbs=True, eager=2.0),  # both verdicts accept
        dataclasses.replace(record("A", 2, kb=True, kbs=False), kbstudy_failure="coverage"),
        dataclasses.replace(record("A", 3, kb=False, kbs=True), kernelbench_trials_passed=3, kernelbench_trials=5),
        dataclasses.replace(record("A", 4, outcome="compile_error"),
                            error_message="Traceback (most recent call last):\n  x\nRuntimeError: nvcc failed"),
        dataclasses.replace(record("A", 5, kb=True, kbs=True, eager=1.25), device="cuda",
                            speedup_vs_eager_ci_low=1.2, speedup_vs_eager_ci_high=1.3),
    ]
    write_store(tmp_path / "r", records)
    table = per_problem([tmp_path / "r"]).set_index("problem_id")
    assert pd.isna(table.loc[1, "failing_check"])
    assert (table.loc[1, "kernelbench_correct"], table.loc[1, "kbstudy_correct"]) == (True, True)
    assert table.loc[2, "failing_check"] == "coverage"
    assert (table.loc[2, "kernelbench_correct"], table.loc[2, "kbstudy_correct"]) == (True, False)
    assert table.loc[3, "failing_check"] == "allclose (3/5 trials)"
    assert table.loc[4, "outcome"] == "compile_error" and pd.isna(table.loc[4, "failing_check"])
    assert pd.isna(table.loc[4, "kbstudy_correct"]) and table.loc[4, "error"] == "RuntimeError: nvcc failed"
    # a CPU speedup is labelled, a GPU one is not; the interval is printed where recorded
    assert table.loc[1, "timing_note"] == CPU_TIMING_NOTE and pd.isna(table.loc[5, "timing_note"])
    assert speedup_text(table.loc[1]) == f"2.000x ({CPU_TIMING_NOTE})"
    assert speedup_text(table.loc[5]) == "1.250x [1.200, 1.300]"
    assert speedup_text(table.loc[4]) == "-"


def test_tiny_speedups_keep_their_digits():
    assert speedup_number(0.000429) == "0.00043" and speedup_number(0.0123) == "0.012"
    assert speedup_number(1.0) == "1.000" and speedup_number(0.0) == "0.000"


def test_failing_check_of_a_record_without_the_check_name():
    assert failing_check({"outcome": "evaluated", "kernelbench_correct": True, "kbstudy_correct": False,
                          "kbstudy_failure": None}) == "kbstudy (check not recorded)"
    assert failing_check({"outcome": "evaluated", "kernelbench_correct": False, "kbstudy_correct": False,
                          "kbstudy_failure": "rel_l2"}) == "rel_l2"
    assert failing_check({"outcome": "timeout"}) is None


def test_empty_folder_gives_an_empty_table(tmp_path):
    table = per_problem([tmp_path])
    assert list(table.columns) == COLUMNS and table.empty
