"""Notebook 4's tables: the launch-aware view (launch latency, launch-bound flags, ours / (floor + one launch)) read
from a copy of the committed CPU records, with and without a launch latency in ``machine.json``; variants, kernel
moves and the gather bandwidth; and the device-time view and the variants' intervals, on the committed H200 records
of the lean and the JIT launch (``outputs/records/dlrm_bench/h200/launch-paths``) and on synthetic edits of the CPU
records."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from support.committed import RECORDS, committed_records

from kbstudy.analysis import dlrm as report
from kbstudy.analysis import dlrm_device, dlrm_variants

CPU_RECORDS = RECORDS / "dlrm_bench" / "cpu" / "study"


def test_report_launch_aware_view(tmp_path):
    """A machine with a launch latency: launch-bound flags, ours / (floor + one launch) and the summary's three rows;
    without one (the committed records predate it) the same columns are empty and the rest is unchanged."""
    src = committed_records(CPU_RECORDS, file="evaluations.jsonl")
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
    src = committed_records(CPU_RECORDS, file="evaluations.jsonl")
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


def _rewrite_records(folder: Path, edit) -> None:
    """Apply ``edit(rows) -> rows`` to the folder's evaluation records."""
    path = folder / "evaluations.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(r) + "\n" for r in edit(rows)))


def _with_variant_and_changed_kernel(rows):
    """Problem 3's kernel replaced (another file, half the time); a variant of problem 1 at twice ours' time."""
    out = []
    for r in rows:
        if r["problem_id"] == 3:
            r = {**r, "candidate_sha256": "c" * 64, "candidate_ms_median": r["candidate_ms_median"] / 2}
        out.append(r)
        if r["problem_id"] == 1:
            v = {**r, "model_config": "variant-x", "candidate_id": "variant-x/L5/1/s0", "candidate_sha256": "v" * 64}
            for key in ("candidate_ms_median", "candidate_ms_q1", "candidate_ms_q3"):
                v[key] = r[key] * 2
            v["speedup_vs_eager"] = r["speedup_vs_eager"] / 2
            out.append(v)
    return out


def test_variants_and_kernel_moves(tmp_path):
    """Variant records (``measurement_run --candidates``) stay out of ``load_run``'s table and are listed beside ours by
    ``variants``; ``kernel_moves`` marks the kernel files both runs hold and ``move_notes`` judges a changed kernel
    against how far those moved."""
    before_dir = _run_copy(tmp_path / "a")
    after_dir = _run_copy(tmp_path / "b")
    _rewrite_records(after_dir, _with_variant_and_changed_kernel)
    before, _ = report.load_run(before_dir)
    after, _ = report.load_run(after_dir)
    assert len(after) == 12  # ours only: the variant is not a thirteenth problem
    pd.testing.assert_frame_equal(after[after["problem_id"] != 3].reset_index(drop=True),
                                  before[before["problem_id"] != 3].reset_index(drop=True))
    assert dlrm_variants.variants(before_dir).empty
    assert dlrm_variants.variant_notes(dlrm_variants.variants(before_dir))[0].startswith("no variant candidates")

    v = dlrm_variants.variants(after_dir)
    assert v["model_config"].tolist() == ["variant-x"] and v["correct"].tolist() == [True]
    ours1 = before.set_index("problem_id").loc[1]
    assert v["ours_ms"].iloc[0] == ours1["ours_ms"] and v["variant_over_ours"].iloc[0] == pytest.approx(2.0)
    assert v["variant_over_floor"].iloc[0] == pytest.approx(2 * ours1["ours_over_floor"])
    assert v["iqr_disjoint"].iloc[0] == bool(2 * ours1["ours_q1_ms"] > ours1["ours_q3_ms"])
    assert dlrm_variants.variant_notes(v)[0].startswith("problem 1 variant-x (correct): ")

    moves = report.kernel_moves(before_dir, after_dir).set_index(["problem_id", "model_config"])
    assert len(moves) == 13
    changed = moves[~moves["same_file"]]
    assert sorted(changed.index) == [(1, "variant-x"), (3, "kbstudy-triton")]
    assert (moves[moves["same_file"]]["delta_us"] == 0).all()
    assert moves.loc[(3, "kbstudy-triton"), "after_over_before"] == pytest.approx(0.5)
    assert moves.loc[(1, "variant-x"), "after_over_before"] == pytest.approx(2.0)  # against ours there
    notes = report.move_notes(moves.reset_index())
    assert notes[0].startswith("kernel files in both runs: 11 (problems 1, 2, 4, ")
    assert "moved +0 to +0 us" in notes[0]
    assert notes[1].startswith("changed kernel 1 (variant-x): ") and notes[1].endswith(": above the band")
    assert notes[2].startswith("changed kernel 3: ") and notes[2].endswith(": below the band")
    # a run with no file in common: no band
    assert report.move_notes(moves.reset_index().assign(same_file=False))[0].startswith("no kernel file is in both")


def test_achieved_and_gather_bandwidth(tmp_path):
    """Compulsory bytes over our median as a bandwidth, against the copy's and the measured gather bandwidth; a
    machine measured before the gather measurement existed (the committed CPU machine without its gather keys) has a
    view that says so."""
    run = _run_copy(tmp_path / "a")
    machine = json.loads((run / "machine.json").read_text())
    for key in [k for k in machine["details"] if k.startswith("gather_")]:
        del machine["details"][key]
    (run / "machine.json").write_text(json.dumps(machine))
    table, machine = report.load_run(run)
    bw = report.achieved_bandwidth(run)
    assert bw["problem_id"].tolist() == table.loc[table["bound"] == "memory", "problem_id"].tolist()
    assert bw["over_gather"].isna().all()
    not_measured = "gather bandwidth not measured for this machine (machine.json predates it)"
    assert report.gather_notes(bw, machine) == [not_measured]
    floors = report.load_floors(run).set_index("problem_id")
    mem = table[table["bound"] == "memory"].set_index("problem_id")
    achieved = floors.loc[mem.index, "bytes"] / (mem["ours_ms"] * 1e-3)
    assert bw["achieved_bytes_per_s"].to_numpy() == pytest.approx(achieved.to_numpy())
    # over_copy is floor / ours for a memory-bound problem (the floor is bytes / copy bandwidth)
    assert bw["over_copy"].to_numpy() == pytest.approx((1 / mem["ours_over_floor"]).to_numpy())
    assert bw.set_index("problem_id")["gathers"].to_dict() == {i: i <= 6 for i in mem.index}

    gather = float(achieved.loc[3]) / 2  # our problem-3 kernel at twice the gather bandwidth
    machine["details"].update(gather_bytes_per_s=gather, gather_n=100, gather_rows=1000, gather_row_bytes=512)
    (run / "machine.json").write_text(json.dumps(machine))
    bw = report.achieved_bandwidth(run).set_index("problem_id")
    assert bw.loc[3, "over_gather"] == pytest.approx(2.0) and bw.loc[3, "ours_over_gather_floor"] == pytest.approx(0.5)
    notes = report.gather_notes(bw.reset_index(), machine)
    assert notes[0].startswith("gather bandwidth (index_select of 100 random 512-byte rows of a 1,000-row table")
    assert "3: " in notes[1] and "(2.00x the gather bandwidth)" in notes[1]
    above = [str(i) for i in bw.index if bw.loc[i, "gathers"] and bw.loc[i, "over_gather"] > 1]
    assert notes[2].startswith("above the gather bandwidth: " + ", ".join(above) + ", so index_select's rate")


# ------------------------------------------------------------------------------------------------ device-time view

#: One H200 run of all twelve kernels twice: the shipped files (lean launch) and the same kernels launched through
#: Triton's JIT (``kbstudy-triton-jit``), each problem's two records against the same reference timing.
S7_RECORDS = RECORDS / "dlrm_bench" / "h200" / "launch-paths"
needs_s7 = pytest.mark.usefixtures("s7_records_committed")


@pytest.fixture
def s7_records_committed():
    committed_records(S7_RECORDS, file="evaluations.jsonl")


def _raw_records(folder: Path, model_config: str = "kbstudy-triton") -> dict:
    rows = [json.loads(line) for line in (folder / "evaluations.jsonl").read_text().splitlines() if line.strip()]
    return {r["problem_id"]: r for r in rows if r["model_config"] == model_config}


@needs_s7
def test_device_time_view_on_the_s7_records():
    """Ours in the launch-paths run (a quiet host): device time = the profiled call's kernel durations (every kernel,
    and here also the sum of ``top_kernels``: no call had more than five kernel names), per-call time and floor as
    ``load_run`` gives them, the gap between the two, and the 1.25x target by device time (1, 3, 4, 8) against per-call
    time (none)."""
    view = dlrm_device.device_time_view(S7_RECORDS)
    assert list(view.columns) == list(dlrm_device.DEVICE_COLUMNS)
    assert view["problem_id"].tolist() == list(range(1, 13)) and set(view["model_config"]) == {"kbstudy-triton"}
    raw = _raw_records(S7_RECORDS)
    top_sum = {pid: sum(k["us"] for k in r["top_kernels"]) / 1e3 for pid, r in raw.items()}
    by_origin = {pid: sum(r["metadata"]["kernel_time_us_by_origin"].values()) / 1e3 for pid, r in raw.items()}
    v = view.set_index("problem_id")
    assert v["device_ms"].to_dict() == pytest.approx(by_origin)
    assert v["device_ms"].to_dict() == pytest.approx(top_sum, abs=1e-5)
    assert v["n_kernels"].to_dict() == {pid: len(r["top_kernels"]) for pid, r in raw.items()}
    table, machine = report.load_run(S7_RECORDS)
    t = table.set_index("problem_id")
    assert v["per_call_ms"].to_dict() == t["ours_ms"].to_dict() and v["floor_ms"].to_dict() == t["floor_ms"].to_dict()
    assert v["bound"].to_dict() == t["bound"].to_dict()
    assert v["per_call_over_floor"].to_numpy() == pytest.approx(t["ours_over_floor"].to_numpy())
    assert v["device_over_floor"].to_numpy() == pytest.approx((v["device_ms"] / v["floor_ms"]).to_numpy())
    assert v["gap_us"].to_numpy() == pytest.approx(((v["per_call_ms"] - v["device_ms"]) * 1e3).to_numpy())
    assert (v["gap_us"] > 0).all()
    assert v["target_gap_us"].to_numpy() == pytest.approx(((1.25 * v["floor_ms"] - v["device_ms"]) * 1e3).to_numpy())
    assert ((v["target_gap_us"] >= 0) == v["device_within_target"]).all()
    mem = v[v["bound"] == "memory"]
    assert sorted(mem.index[mem["device_within_target"]]) == [1, 3, 4, 8]
    assert not (mem["per_call_over_floor"] <= report.FLOOR_TARGET).any()
    notes = dlrm_device.device_notes(view, machine)
    assert notes[0] == ("memory-bound problems within 1.25x of the floor, of 10 with a device time: by device time "
                        "4: 1 (1.24x), 3 (1.14x), 4 (1.20x), 8 (1.12x); by per-call time none")
    assert notes[2] == ("the most gap the per-call target leaves at these device times (the measured gap in "
                        "brackets): 1: 1 us (37 us), 3: 21 us (72 us), 4: 25 us (52 us), 8: 19 us (38 us)")
    assert notes[3].startswith("per-call median minus device time: 34-109 us over 12 problems (median 47 us; "
                               "largest: problem 5, 109 us, 5 kernel names profiled); one empty Triton launch here "
                               "takes 14.9 us")

    # the lean launch changes the host's part of a call, not the kernels: same device time as the JIT-launched files
    jit = dlrm_device.device_time_view(S7_RECORDS, model_config="kbstudy-triton-jit").set_index("problem_id")
    assert set(jit["model_config"]) == {"kbstudy-triton-jit"}
    assert (jit["device_ms"] / v["device_ms"]).to_numpy() == pytest.approx([1.0] * 12, abs=0.02)
    assert jit.loc[7, "gap_us"] - v.loc[7, "gap_us"] > 40


def _with_device_times(rows):
    """Problem 1: a call with six kernel names (``top_kernels`` keeps five, ``kernel_time_us_by_origin`` has all);
    problem 3: ``top_kernels`` only; every other problem: no profiled call (as on a CPU)."""
    out = []
    for r in rows:
        r = dict(r)
        floor_us = r.pop("_floor_us")
        if r["problem_id"] == 1:  # six kernels of 0.2 floor each: 1.2 x floor in all, 1.0 x floor in the top five
            r["top_kernels"] = [{"name": f"k{i}", "us": 0.2 * floor_us, "origin": "custom", "library": None,
                                 "category": "other"} for i in range(5)]
            r["metadata"] = {**r["metadata"], "kernel_time_us_by_origin": {"custom": 1.2 * floor_us, "inductor": 0.0,
                                                                           "vendor": 0.0}}
        elif r["problem_id"] == 3:
            r["top_kernels"] = [{"name": "k", "us": 1.3 * floor_us, "origin": "custom", "library": None,
                                 "category": "other"}]
        out.append(r)
    return out


def test_device_time_view_sources_and_target(tmp_path):
    """Device time from ``kernel_time_us_by_origin`` (every kernel) before ``top_kernels`` (five names at most);
    records without a profiled call (the committed CPU run) leave the device columns empty and the notes say so; the
    target flag is ``device / floor <= 1.25``."""
    run = _run_copy(tmp_path / "a")
    plain = dlrm_device.device_time_view(run)
    table, machine = report.load_run(run)
    assert plain["device_ms"].isna().all() and plain["gap_us"].isna().all()
    assert plain["device_within_target"].isna().all() and plain["n_kernels"].isna().all()
    assert plain["per_call_ms"].tolist() == table["ours_ms"].tolist()
    assert dlrm_device.device_notes(plain, machine) == [
        ("no device times in these records (no profiled call: a CPU run has no device kernels to profile): the "
         "per-call time is the only view")]
    assert dlrm_device.device_time_view(run, model_config="nothing-here").empty

    floors = table.set_index("problem_id")["floor_ms"] * 1e3
    _rewrite_records(run, lambda rows: _with_device_times([{**r, "_floor_us": floors[r["problem_id"]]}
                                                           for r in rows]))
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert view.loc[1, "device_over_floor"] == pytest.approx(1.2) and view.loc[1, "n_kernels"] == 5
    assert view.loc[3, "device_over_floor"] == pytest.approx(1.3) and view.loc[3, "n_kernels"] == 1
    assert view.loc[1, "device_within_target"] is True and view.loc[3, "device_within_target"] is False
    assert view.drop(index=[1, 3])["device_ms"].isna().all()
    ours = table.set_index("problem_id")["ours_ms"]
    assert view.loc[1, "gap_us"] == pytest.approx((ours[1] - 1.2 * floors[1] / 1e3) * 1e3)
    notes = dlrm_device.device_notes(view.reset_index(), machine)
    assert notes[0] == ("memory-bound problems within 1.25x of the floor, of 2 with a device time: by device time "
                        "1: 1 (1.20x); by per-call time none")
    assert view.loc[1, "target_gap_us"] == pytest.approx(0.05 * floors[1])  # (1.25 - 1.2) x floor, in us
    assert view.loc[3, "target_gap_us"] == pytest.approx(-0.05 * floors[3])
    assert notes[2] == ("the most gap the per-call target leaves at these device times (the measured gap in "
                        f"brackets): 1: {0.05 * floors[1]:.0f} us ({view.loc[1, 'gap_us']:.0f} us)")
    assert "Triton launch" not in notes[-2]  # the CPU machine has no Triton launch latency
    assert notes[-1].startswith("device time: the kernels' summed durations in one profiled, warm call")
    assert set(view["device_source"].dropna()) == {"profiled"} and view["device_q1_ms"].isna().all()
    assert view["profiled_ms"].equals(view["device_ms"])
    launch_us = 10.0
    notes = dlrm_device.device_notes(view.reset_index(), {"details": {"launch_triton_ms": [launch_us / 1e3]}})
    gap = view["gap_us"].dropna()
    assert notes[-2].endswith(f"one empty Triton launch here takes {launch_us:.1f} us, so the gap is "
                              f"{gap.min() / launch_us:.1f}-{gap.max() / launch_us:.1f} launches' worth")

    # a record with a cold device time (kbstudy.harness.timing.time_device) is judged by it; the profiled call stays beside
    def with_cold(rows):
        out = []
        for r in rows:
            if r["problem_id"] == 3:
                cold = [1.1 * floors[3] / 1e3 * (1 + 0.01 * i) for i in range(20)]
                r = {**r, "candidate_device_ms_median": cold[10], "candidate_device_ms_q1": cold[5],
                     "candidate_device_ms_q3": cold[15], "candidate_device_ms_samples": cold}
            out.append(r)
        return out

    _rewrite_records(run, with_cold)
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert view.loc[3, "device_source"] == "cold" and view.loc[1, "device_source"] == "profiled"
    assert view.loc[3, "device_ms"] == pytest.approx(1.1 * floors[3] / 1e3 * 1.10)
    assert view.loc[3, "profiled_ms"] == pytest.approx(1.3 * floors[3] / 1e3)  # the profiled call, kept beside
    assert view.loc[3, "device_q1_ms"] < view.loc[3, "device_ms"] < view.loc[3, "device_q3_ms"]
    assert view.loc[3, "device_within_target"] is True  # 1.21x by its cold device time, 1.3x by the profiled call
    notes = dlrm_device.device_notes(view.reset_index(), machine)
    assert notes[-1].startswith("device time: cold where the record has")
    assert view["copy_ms"].isna().all() and view["device_over_copy"].isna().all()  # no copy timed on a CPU

    # a GPU run's floors carry the device time of a copy of the compulsory bytes (roofline.copy_at_size)
    path = run / "floors.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps({**r, "copy_ms": (1.3 if r["problem_id"] == 3 else 1.1) * r["floor_ms"]})
                            + "\n" for r in rows))
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert view.loc[3, "copy_over_floor"] == pytest.approx(1.3)
    assert view.loc[3, "device_over_copy"] == pytest.approx(1.1 * 1.10 / 1.3)
    notes = dlrm_device.device_notes(view.reset_index(), machine)
    note = [n for n in notes if n.startswith("a copy of the compulsory")]
    assert note == [f"a copy of the compulsory bytes at each memory-bound problem's size (device time) takes "
                    f"1.10-1.30x the floor; above 1.25x on 1: 3 (1.30x); ours / copy: 1 "
                    f"{view.loc[1, 'device_over_copy']:.2f}x, 3 0.93x"]
    assert pd.isna(view.loc[3, "device_flush"])  # a cold device time without metadata.device_time: unknown flush
    assert set(view["copy_flush"].dropna()) == {"write"}  # copies older than the key (floors of commit 1856ef6) wrote

    # how the flush left the L2 (kbstudy.harness.timing.l2_flusher): from metadata.device_time.flush; records made
    # before the key (commit 1856ef6) have metadata.device_time without it, and their flush wrote its buffer
    def with_flush(flush):
        def rewrite(rows):
            out = []
            for r in rows:
                if r["problem_id"] == 3:
                    dt = {"calls": 20, "host_overran": 0, "spin_us": 2000.0}
                    r = {**r, "metadata": {**r["metadata"], "device_time": {**dt, **({"flush": flush} if flush
                                                                                     else {})}}}
                out.append(r)
            return out
        return rewrite

    _rewrite_records(run, with_flush(None))
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert view.loc[3, "device_flush"] == "write" and pd.isna(view.loc[1, "device_flush"])  # 1: profiled only
    _rewrite_records(run, lambda rows: [{**r, "metadata": {**r["metadata"], "device_time": {
        **r["metadata"]["device_time"], "flush": None}}} if r["problem_id"] == 3 else r for r in rows])
    assert pd.isna(dlrm_device.device_time_view(run).set_index("problem_id").loc[3, "device_flush"])  # warm: no flush
    notes = dlrm_device.device_notes(view.reset_index(), machine)
    assert dlrm_device.DEVICE_FLUSHES["write"] in notes
    _rewrite_records(run, with_flush("read"))
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert view.loc[3, "device_flush"] == "read"
    notes = dlrm_device.device_notes(view.reset_index(), machine)
    assert dlrm_device.DEVICE_FLUSHES["read"] in notes
    assert notes[-1] == "the copies' L2 flush (write) differs from the kernels' (read)"
    path.write_text("".join(json.dumps({**r, "copy_ms": r["floor_ms"], "copy_flush": "read"}) + "\n" for r in rows))
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert set(view["copy_flush"]) == {"read"}
    assert dlrm_device.device_notes(view.reset_index(), machine)[-1] == dlrm_device.DEVICE_FLUSHES["read"]
    assert view["sector_over_bytes"].isna().all()  # floors older than sector counts (commit a4d968a) have none
    assert view["dram_copy_ms"].equals(view["copy_ms"]) and not view["target_below_copy"].any()

    # floors since commit a4d968a count DRAM sectors; where they exceed the bytes (unaligned gathers) a copy of them is
    # timed too, and the target is judged against the larger copy: problem 3 at 1.2x its bytes, its sector copy 1.4x
    path.write_text("".join(json.dumps({**r, "copy_ms": r["floor_ms"], "copy_flush": "read",
                                        "sector_bytes": r["bytes"] * (1.2 if r["problem_id"] == 3 else 1.0),
                                        **({"sector_copy_ms": 1.4 * r["floor_ms"]} if r["problem_id"] == 3 else {})})
                            + "\n" for r in rows))
    view = dlrm_device.device_time_view(run).set_index("problem_id")
    assert view.loc[3, "sector_over_bytes"] == pytest.approx(1.2) and view.loc[1, "sector_over_bytes"] == 1.0
    assert view.loc[3, "dram_copy_over_floor"] == pytest.approx(1.4)
    assert view.loc[1, "dram_copy_ms"] == view.loc[1, "copy_ms"]
    memory = view["bound"] == "memory"
    assert view.loc[memory, "target_below_copy"].tolist() == [p == 3 for p in view.index[memory]]
    assert view.loc[~memory, "target_below_copy"].isna().all()  # the target is stated for memory-bound problems
    notes = dlrm_device.device_notes(view.reset_index(), machine)
    assert ("counted in whole 32-byte DRAM sectors, the compulsory traffic is 1.200x the floor's bytes on 3 "
            "(unaligned gathered rows); a copy of that many bytes at size takes 1.40x the floor on 3") in notes
    assert ("the 1.25x target is below a plain copy of what the DRAM must move, at the problem's size, on 1: 3 "
            "(1.40x): a kernel within it there would have to move those bytes faster than the copy") in notes


def _with_two_timed_variants(rows):
    """Twenty per-call samples for ours on problems 1 and 2; a variant at twice ours' times on 1 and half on 2."""
    out = []
    for r in rows:
        if r["problem_id"] in (1, 2):
            samples = [r["candidate_ms_median"] * (1 + 0.01 * i) for i in range(20)]
            r = {**r, "candidate_ms_samples": samples}
            factor = 2.0 if r["problem_id"] == 1 else 0.5
            v = {**r, "model_config": "variant-y", "candidate_id": f"variant-y/L5/{r['problem_id']}/s0",
                 "candidate_sha256": "y" * 64, "candidate_ms_samples": [s * factor for s in samples]}
            for key in ("candidate_ms_median", "candidate_ms_q1", "candidate_ms_q3"):
                v[key] = r[key] * factor
            out += [r, v]
        else:
            out.append(r)
    return out


def test_variant_interval_and_summary(tmp_path):
    """``variants``: the bootstrap interval of variant / ours from the two records' samples (NaN with the CPU run's
    three samples); ``variant_notes`` opens with one summary per model configuration that covers several problems."""
    run = _run_copy(tmp_path / "a")
    _rewrite_records(run, _with_two_timed_variants)
    v = dlrm_variants.variants(run).set_index("problem_id")
    assert v.loc[1, "variant_over_ours"] == pytest.approx(2.0) and v.loc[2, "variant_over_ours"] == pytest.approx(0.5)
    assert 1 < v.loc[1, "variant_over_ours_ci_low"] <= 2.0 <= v.loc[1, "variant_over_ours_ci_high"]
    assert v.loc[2, "variant_over_ours_ci_low"] <= 0.5 <= v.loc[2, "variant_over_ours_ci_high"] < 1
    notes = dlrm_variants.variant_notes(v.reset_index())
    assert notes[0] == ("variant-y beside ours on 2 problems (same run, same eager timing): variant / ours median "
                        "time 0.50-2.00x (median 1.25x); 95 % interval of variant / ours above 1 (ours faster) on 1: "
                        "1 (2.00x); below 1 (the variant faster) on 1: 2 (0.50x); containing 1 on 0: none")
    assert notes[1].startswith("problem 1 variant-y (correct): ") and len(notes) == 3
    assert f"2.00x ours' time [{v.loc[1, 'variant_over_ours_ci_low']:.2f}, " in notes[1]

    assert v["variant_device_ms"].isna().all() and v["variant_over_ours_device_ci_low"].isna().all()

    # device-time samples on both records of problem 2 (variant twice as fast): the device columns and interval
    def with_device(rows):
        out = []
        for r in rows:
            if r["problem_id"] == 2:
                factor = 0.5 if r["model_config"] == "variant-y" else 1.0
                dev = [0.02 * factor * (1 + 0.01 * i) for i in range(20)]
                r = {**r, "candidate_device_ms_median": dev[10], "candidate_device_ms_samples": dev}
            out.append(r)
        return out

    _rewrite_records(run, with_device)
    v = dlrm_variants.variants(run).set_index("problem_id")
    assert v.loc[2, "variant_over_ours_device"] == pytest.approx(0.5) and v.loc[1, "variant_device_ms"] != \
        v.loc[1, "variant_device_ms"]
    assert v.loc[2, "variant_over_ours_device_ci_low"] <= 0.5 <= v.loc[2, "variant_over_ours_device_ci_high"] < 1
    notes = dlrm_variants.variant_notes(v.reset_index())
    assert "; device time 11.0 us against ours 22.0 us, 0.50x [" in notes[2] and "device time" not in notes[1]
    # a variant whose timed outputs failed their check has no device time, and no device-time interval either
    _rewrite_records(run, lambda rows: [{**r, "timing_output_ok": False} if r["model_config"] == "variant-y"
                                        and r["problem_id"] == 2 else r for r in rows])
    v = dlrm_variants.variants(run).set_index("problem_id")
    assert pd.isna(v.loc[2, "variant_device_ms"]) and pd.isna(v.loc[2, "variant_over_ours_device_ci_low"])

    plain = _run_copy(tmp_path / "b")  # three samples per record: too few for an interval
    _rewrite_records(plain, lambda rows: [r for r in _with_two_timed_variants(rows)
                                          if r["model_config"] == "kbstudy-triton" or r["problem_id"] == 1]
                     + [{**r, "model_config": "variant-z", "candidate_sha256": "z" * 64}
                        for r in rows if r["problem_id"] in (3, 4)])
    z = dlrm_variants.variants(plain)
    z = z[z["model_config"] == "variant-z"]
    assert len(z) == 2 and z["variant_over_ours_ci_low"].isna().all()
    assert any(n.startswith("variant-z beside ours on 2 problems")
               and n.endswith("; no interval (too few samples) on 2") for n in dlrm_variants.variant_notes(z))


@needs_s7
def test_variants_on_the_s7_records():
    """The twelve JIT-launched files beside the lean-launch ones in the same run: the interval of variant / ours is
    ``speedup_interval(jit samples, lean samples)``, and the summary sorts the problems by it."""
    from kbstudy.harness.timing_stats import speedup_interval

    v = dlrm_variants.variants(S7_RECORDS).set_index("problem_id")
    assert len(v) == 12 and set(v["model_config"]) == {"kbstudy-triton-jit"} and v["correct"].all()
    lean, jit = _raw_records(S7_RECORDS), _raw_records(S7_RECORDS, "kbstudy-triton-jit")
    for pid in range(1, 13):
        low, high = speedup_interval(jit[pid]["candidate_ms_samples"], lean[pid]["candidate_ms_samples"])
        assert (v.loc[pid, "variant_over_ours_ci_low"], v.loc[pid, "variant_over_ours_ci_high"]) == (low, high)
        assert jit[pid]["candidate_sha256"] != lean[pid]["candidate_sha256"]
    summary = dlrm_variants.variant_notes(v.reset_index())[0]
    assert summary.startswith("kbstudy-triton-jit beside ours on 12 problems (same run, same eager timing): variant / "
                              "ours median time 0.95-1.77x (median 1.05x); 95 % interval of variant / ours above 1 "
                              "(ours faster) on 10: 1 (1.04x), 2 (1.06x), 4 (1.01x), 6 (1.06x), 7 (1.77x), ")
    assert summary.endswith("below 1 (the variant faster) on 1: 3 (0.95x); containing 1 on 1: 5 (1.00x)")
