"""scripts/compare_reports.py: the check that a re-render changed no number of a report's tables."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_reports.py"
spec = importlib.util.spec_from_file_location("compare_reports", SCRIPT)
compare_reports = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_reports)


def _table(folders, values, flags):
    return pd.DataFrame({"records_folder": folders, "value": values, "flag": flags})


def test_moved_folders_and_their_row_order_are_not_a_change():
    old = _table(["outputs/records/h200-smoke", "outputs/records/cpu-dlrm"], [1.5, float("nan")], ["a", None])
    new = _table(["outputs/records/dlrm_bench/cpu/study", "outputs/records/kernelbench/h200/smoke"],
                 [float("nan"), 1.5 * (1 + 1e-12)], [None, "a"])
    assert compare_reports.compare(old, new) == []


def test_a_changed_number_or_label_is_reported():
    old = _table(["outputs/records/a", "outputs/records/b"], [1.5, 2.0], ["a", "b"])
    assert compare_reports.compare(old, old.assign(value=[1.5, 2.01]))
    assert compare_reports.compare(old, old.assign(flag=["a", "c"]))
    assert compare_reports.compare(old, old.iloc[:1])
