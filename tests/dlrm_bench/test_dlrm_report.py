"""Notebook 4's tables: the launch-aware view (launch latency, launch-bound flags, ours / (floor + one launch)) read
from a copy of the committed CPU records, with and without a launch latency in ``machine.json``."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from kbstudy.dlrm_bench import report


def test_report_launch_aware_view(tmp_path):
    """A machine with a launch latency: launch-bound flags, ours / (floor + one launch) and the summary's three rows;
    without one (the committed records predate it) the same columns are empty and the rest is unchanged."""
    src = Path(__file__).resolve().parents[2] / "outputs" / "records" / "cpu-dlrm"
    if not (src / "evaluations.jsonl").exists():
        pytest.skip("committed CPU records absent")
    shutil.copytree(src, tmp_path / "run")
    machine = json.loads((tmp_path / "run" / "machine.json").read_text())
    machine.setdefault("details", {}).pop("launch_triton_ms", None)
    (tmp_path / "run" / "machine.json").write_text(json.dumps(machine))
    plain, _ = report.load_run(tmp_path / "run")
    assert plain["launch_ms"].isna().all() and plain["launch_bound"].isna().all()
    assert plain["ours_over_floor_plus_launch"].isna().all()
    rows = report.summary(plain).set_index("quantity")["ours"]
    assert pd.isna(rows["launch latency, empty Triton kernel (ms)"])

    floors = plain.set_index("problem_id")["floor_ms"]
    launch = float(floors.median())  # half the problems' floors are below 3 launches of this
    machine["details"]["launch_triton_ms"] = [launch, launch, 2 * launch]
    (tmp_path / "run" / "machine.json").write_text(json.dumps(machine))
    table, _ = report.load_run(tmp_path / "run")
    assert (table["launch_ms"] == launch).all()
    expected = {pid: bool(f < 3 * launch) for pid, f in floors.items()}
    assert table.set_index("problem_id")["launch_bound"].to_dict() == expected
    ratio = table["ours_ms"] / (table["floor_ms"] + launch)
    assert table["ours_over_floor_plus_launch"].to_numpy() == pytest.approx(ratio.to_numpy())
    pd.testing.assert_frame_equal(table.drop(columns=["launch_ms", "launch_bound", "ours_over_floor_plus_launch"]),
                                  plain.drop(columns=["launch_ms", "launch_bound", "ours_over_floor_plus_launch"]))
    rows = report.summary(table).set_index("quantity")["ours"]
    assert rows["launch latency, empty Triton kernel (ms)"] == pytest.approx(launch)
    assert rows["launch-bound problems (floor < 3 launches)"] == sum(expected.values())
    view = report.launch_view(table)
    assert view["floor_in_launches"].to_numpy() == pytest.approx((table["floor_ms"] / launch).to_numpy())
