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


def _run_copy(tmp_path, launch_triton_ms=None, launch_torch_ms=None) -> Path:
    src = Path(__file__).resolve().parents[2] / "outputs" / "records" / "cpu-dlrm"
    if not (src / "evaluations.jsonl").exists():
        pytest.skip("committed CPU records absent")
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    machine = json.loads((dst / "machine.json").read_text())
    details = machine.setdefault("details", {})
    for key, samples in (("launch_triton_ms", launch_triton_ms), ("launch_torch_ms", launch_torch_ms)):
        details.pop(key, None)
        if samples is not None:
            details[key] = samples
    (dst / "machine.json").write_text(json.dumps(machine))
    return dst


def test_launch_gap_and_floor_notes(tmp_path):
    """``launch_gap``: best ratio reachable with one launch, ``1 + launch / floor``, against the 1.25x target, and the
    gap in launches; ``floor_notes`` states them from the records (the launch latencies from ``machine.json``)."""
    plain, machine = report.load_run(_run_copy(tmp_path / "a"))
    gap = report.launch_gap(plain)
    assert set(gap["problem_id"]) == set(plain.loc[plain["bound"] == "memory", "problem_id"])
    assert gap["best_ratio_one_launch"].isna().all() and gap["target_reachable"].isna().all()
    notes = report.floor_notes(plain, machine)
    assert notes[0].startswith("memory-bound problems within 1.25x of the floor: ")
    assert notes[1] == "launch latency not measured for this machine: the gap to the floor is not split"

    floors = gap.set_index("problem_id")["floor_ms"]
    launch = float(floors.median())
    table, machine = report.load_run(_run_copy(tmp_path / "b", [launch] * 3, [launch / 2] * 3))
    assert report.launch_latencies(machine) == {"triton_ms": launch, "torch_ms": launch / 2}
    gap = report.launch_gap(table).set_index("problem_id")
    assert gap["best_ratio_one_launch"].to_numpy() == pytest.approx((1 + launch / floors).to_numpy())
    assert gap["target_reachable"].to_dict() == {pid: bool(f >= 4 * launch) for pid, f in floors.items()}
    ours = table.set_index("problem_id").loc[gap.index, "ours_ms"]
    assert gap["gap_in_launches"].to_numpy() == pytest.approx(((ours - floors) / launch).to_numpy())
    notes = report.floor_notes(table, machine)
    assert f"an empty Triton kernel {launch * 1e3:.1f} us, a one-element torch op {launch / 2 * 1e3:.1f} us" in notes[1]
    unreachable = [pid for pid, ok in gap["target_reachable"].items() if not ok]
    assert any(n.startswith(f"out of reach for {len(unreachable)} (problems "
                            + ", ".join(map(str, unreachable)) + ")") for n in notes)


def test_compare_runs(tmp_path):
    """Two runs of the same problems: per problem before/after times, correctness, ratio to floor, eager's drift."""
    before, _ = report.load_run(_run_copy(tmp_path / "a"))
    after = before.copy()
    after["ours_ms"] = before["ours_ms"] * 0.5
    after.loc[after["problem_id"] == 1, "ours_ms"] = float(before.loc[before["problem_id"] == 1, "ours_ms"].iloc[0]) * 2
    after = after[after["problem_id"] != 12]
    change = report.compare_runs(before, after).set_index("problem_id")
    assert list(change.index) == list(range(1, 12))
    assert change.loc[1, "after_over_before"] == pytest.approx(2.0)
    assert change.drop(index=1)["after_over_before"].to_numpy() == pytest.approx(0.5)
    assert (change["eager_after_over_before"] == 1).all()
    assert change["before_correct"].tolist() == before.set_index("problem_id").loc[change.index, "correct"].tolist()
