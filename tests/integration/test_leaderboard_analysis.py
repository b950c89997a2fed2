"""Issue #4's analysis on the committed H200 records (19 gemini-1.5-flash kernels on the current problems, the smoke
run) and the shared KernelBench data: published numbers, baseline timings, the headline table, dtype status,
throughput, the release dataset, the GPU script and the study file. Expected values are computed here independently
(scipy's Spearman, timestamps read by hand) or read from the records and the published files."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from support.committed import RECORDS, committed_records

from kbstudy.analysis import headline, published, scoring
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.records.frames import load_frames
from kbstudy.records.store import RecordStore

REPO = Path(__file__).resolve().parents[2]
KB = resolve_kernelbench_dir(required=False)
H200 = RECORDS / "kernelbench" / "h200" / "level1-fp32"
SMOKE = RECORDS / "kernelbench" / "h200" / "smoke"
FIRST4 = RECORDS / "kernelbench" / "h200" / "level1-fp32-first4"
pytestmark = pytest.mark.skipif(not (KB / "leaderboard_kernels.jsonl").exists(), reason="KernelBench data not found")


@pytest.fixture(autouse=True)
def _h200_records_committed():
    committed_records(H200, SMOKE, FIRST4, file="evaluations.jsonl")


@pytest.fixture(scope="module")
def records():
    evaluations, references, dropped = load_frames([H200, SMOKE], label="name", first_attempts=True)
    assert dropped.empty
    return evaluations, references


@pytest.fixture(scope="module")
def leaderboard():
    return published.load_published(KB)


@pytest.fixture(scope="module")
def changes():
    return published.load_version_changes(KB)


# ------------------------------------------------------------------------------------------------ records


def test_load_records_keeps_one_record_per_attempt():
    evaluations, references, dropped = load_frames([H200, FIRST4, REPO / "outputs/records/none"], label="name",
                                                   first_attempts=True)
    assert len(evaluations) == 19 and len(dropped) == 4  # first4 re-measured the same 4 kernels: the first folder wins
    assert set(dropped["kept_from"]) == {H200.name} and set(dropped["records_folder"]) == {FIRST4.name}
    assert references["key"].is_unique and set(evaluations["records_folder"]) == {H200.name}


# ------------------------------------------------------------------------------------------------ published


def test_published_numbers_and_largest_configurations(leaderboard):
    assert len(leaderboard) == 264
    assert published.largest_configurations(leaderboard) == [
        "claude-3.5-sonnet", "gpt-o1", "llama-3.1-405b", "gpt-4o", "deepseek-coder"]
    rows = [json.loads(line) for line in (KB / "leaderboard_kernels.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["level"] == 1 and r["problem_id"] == 11 and r["display_name"] == "gemini-1.5-flash")
    mine = leaderboard.set_index(["model_config", "problem_id"]).loc[("gemini-1.5-flash", 12)]
    assert mine["published_speedup"] == row["torch_speedup"] and mine["published_kernel_ms"] == row["kernel_time_ms"]
    assert leaderboard["float32_only"].all()


def test_join_and_material_changes_on_the_h200_records(records, leaderboard, changes):
    evaluations, _ = records
    joined = published.join_published(evaluations, leaderboard, problem_version="current")
    assert int(joined["has_record"].sum()) == 22  # 19 gemini + 3 claude (smoke)
    assert not published.join_published(evaluations, leaderboard, problem_version="v0")["has_record"].any()
    marked = published.material_changes(joined[joined["has_record"]], changes=changes)
    gemini = marked[marked["model_config"] == "gemini-1.5-flash"].set_index("problem_id")
    assert sorted(gemini.index[gemini["verdict_flip"]]) == [23, 97]
    # ratio outside [0.5, 2] (6, 7, 12, 39) or crossing 1 (25: 0.79 published, 1.12 here)
    assert sorted(gemini.index[gemini["speedup_change"]]) == [6, 7, 12, 25, 39]
    assert not gemini.loc[30, "changed"]  # 1.13 published, 1.64 here: both > 1, ratio 1.46
    assert "reference changed since v0" in gemini.loc[12, "reason"] and "mostly the baseline" in gemini.loc[12, "reason"]
    assert gemini.loc[97, "reason"].startswith("problem replaced since v0 (v0: 97_CosineSimilarityLoss.py")
    assert "runtime_error: TypeError" in gemini.loc[97, "reason"]
    assert "timeout: run: no reply within 60 s" in gemini.loc[23, "reason"]
    assert (marked["reason"] != "").sum() == marked["changed"].sum() == 7

    scipy_stats = pytest.importorskip("scipy.stats")
    agreement = published.published_agreement(marked).set_index("model_config")
    pairs = gemini.dropna(subset=["speedup"])
    rho = scipy_stats.spearmanr(pairs["speedup"], pairs["published_speedup"]).statistic
    assert agreement.loc["gemini-1.5-flash", "spearman_rho"] == pytest.approx(rho)
    assert agreement.loc["gemini-1.5-flash", "speedup_pairs"] == 17
    assert agreement.loc["all", "published"] == 22


def test_baselines_match_by_source_hash_and_exclude_stale_entries(records, changes):
    _, references = records
    baselines = published.load_baseline_timings(KB, "H100_Modal")
    raw = json.loads((KB / "baseline_timing" / "H100_Modal__baseline_time_torch.json").read_text())
    assert len(baselines[baselines["level"] == 1]) == len(raw["level1"]) == 100
    relu = baselines.set_index("problem_name").loc["19_ReLU.py"]
    assert relu["eager_mean_ms"] == raw["level1"]["19_ReLU.py"]["mean"] and relu["gpu"] == "NVIDIA H100 80GB HBM3"

    baselines = baselines[baselines["level"] == 1]
    versus = published.compare_baselines(references, baselines, changes).set_index("problem_id")
    assert versus["included"].sum() == 17  # the 19 H200 problems less the stale 12 and 97
    assert not versus.loc[12, "included"] and "Jan 2026" in versus.loc[12, "excluded_reason"]
    assert not versus.loc[97, "included"] and versus.loc[97, "eager_ratio"] > 2  # SDPA timed in fp16 there
    relu_refs = references[references["problem_name"] == "19_ReLU.py"]  # the smoke run timed it too: latest wins
    assert len(relu_refs) == 2
    ours = relu_refs.sort_values("created_utc")["eager_ms_median"].iloc[-1]
    assert versus.loc[19, "eager_ratio"] == pytest.approx(ours / raw["level1"]["19_ReLU.py"]["mean"])
    summary = published.baseline_summary(versus.reset_index()).iloc[0]
    assert summary["n"] == 17 and 0.70 < summary["eager_ratio_median"] < 0.75  # ~ H100/H200 bandwidth (0.70)
    assert summary["eager_spearman_rho"] > 0.7
    # a record of the v0 source under the same file name is not the published problem: it does not match
    v0_ref = references[references["problem_name"] == "19_ReLU.py"].assign(
        problem_sha256=changes.set_index("problem_id").loc[19, "v0_sha256"], problem_version="v0")
    alone = published.compare_baselines(v0_ref, baselines, changes).set_index("problem_id")
    assert not alone.loc[19, "included"] and alone.loc[19, "excluded_reason"].startswith("our record is of another")


# ------------------------------------------------------------------------------------------------ headline


def test_headline_table_on_the_h200_records(records):
    evaluations, _ = records
    table = headline.headline_table(evaluations, ["claude-3.5-sonnet", "gemini-1.5-flash"]).set_index("model_config")
    g = table.loc["gemini-1.5-flash"]
    gemini = evaluations[evaluations["model_config"] == "gemini-1.5-flash"]
    faster = gemini[(gemini["kbstudy_correct"] == True) & (gemini["speedup_vs_eager"] > 1)]  # noqa: E712
    assert (g["n"], g["n_correct"], g["verified_speedups"]) == (19, 17, 2) == (len(gemini), 17, len(faster))
    assert sorted(faster["problem_name"]) == ["25_Swish.py", "30_Softsign.py"]
    assert g["verified_speedup_median"] == pytest.approx(faster["speedup_vs_eager"].median())
    assert g["correct_pct"] == pytest.approx(100 * 17 / 19) and g["conv_n"] == 0 and g["n_float32_only"] == 0
    summary = scoring.summarize(gemini).iloc[0]
    assert g["fast_1"] == pytest.approx(summary["fast_1"]) and g["correct_pct"] == pytest.approx(summary["correct_pct"])
    assert list(table.index) == ["claude-3.5-sonnet", "gemini-1.5-flash"]
    categories = headline.category_table(evaluations, ["gemini-1.5-flash"])
    assert categories["n"].sum() == 19 and len(categories) == 8
    assert categories.set_index("category").loc["other", "n"] == 1  # 97, attention
    pivot = headline.category_pivot(categories).set_index("model_config")
    assert pivot.loc["gemini-1.5-flash", "matmul"] == "6/6" and pivot.loc["gemini-1.5-flash", "pooling"] == "-"


def test_dtype_status_of_bf16_records(records):
    evaluations, _ = records
    base = evaluations[evaluations["model_config"] == "gemini-1.5-flash"].head(1)
    assert list(headline.dtype_status(base)) == ["not_applicable"]
    failed = {"kbstudy_correct": None, "kernelbench_correct": None, "speedup_vs_eager": None}
    scan = {"dtype_scan": {"float32_only": True, "evidence": ["data_ptr<float> (line 9)"]}}
    rows = pd.concat([
        base.assign(precision="bf16"),  # evaluated
        base.assign(precision="bf16", outcome="runtime_error", **failed,
                    error_message="RuntimeError: expected scalar type Float but found BFloat16"),
        base.assign(precision="bf16", outcome="cuda_error", error_message="illegal memory access",
                    metadata=[scan], **failed),
        base.assign(precision="bf16", outcome="cuda_error", error_message="illegal memory access", metadata=[{}],
                    **failed),
        base.assign(precision="bf16", outcome="skipped", error_message="float32_only: data_ptr<float>", **failed,
                    metadata=[{"skip_reason": "float32_only"}]),
    ], ignore_index=True)
    assert list(headline.dtype_status(rows)) == ["ran", "float32_only", "float32_only", "failed", "float32_only"]
    rows["problem_id"] = range(len(rows))
    table = headline.headline_table(rows).iloc[0]
    assert table["n"] == 4 and table["n_float32_only"] == 3  # the skipped one is not an attempt
    assert table["correct_pct_dtype_ok"] == pytest.approx(50.0)  # of the evaluated and the plain failure


def test_version_comparison_pairs_the_same_kernel(records, changes):
    evaluations, _ = records
    gemini = evaluations[evaluations["model_config"] == "gemini-1.5-flash"]
    v0 = gemini.assign(problem_version="v0", kbstudy_correct=True, outcome="evaluated")
    both = headline.version_comparison(pd.concat([gemini, v0], ignore_index=True), changes).set_index("problem_id")
    assert len(both) == 19 and sorted(both.index[both["flip"]]) == [23, 97]
    assert both.loc[97, "change"] == "replaced" and both.loc[12, "change"] == "reference_changed"


def test_throughput_from_timestamps(records):
    evaluations, _ = records
    rate = headline.throughput(evaluations).set_index("run").loc["h200-level1-fp32"]
    # two device calls: 13:59:57-14:01:19 (first worker 1.30 s) and 14:10:03-14:11:15 (first: the 60.6 s hang)
    rows = evaluations[evaluations["run"] == "h200-level1-fp32"].sort_values("created_utc")
    expected = 82 + rows["worker_wall_s"].iloc[0] + 72 + rows["worker_wall_s"].iloc[10]
    assert rate["bursts"] == 2 and rate["records"] == 19
    assert rate["gpu_minutes"] == pytest.approx(expected / 60)
    assert rate["kernels_per_gpu_minute"] == pytest.approx(19 / (expected / 60))


# ------------------------------------------------------------------------------------------------ release


def test_release_dataset(tmp_path):
    from kbstudy.pipeline.release import merge_record_folders, write_release

    out = tmp_path / "release"
    paths = write_release([H200, SMOKE], out, name="h200-test", root=REPO)
    rows = [json.loads(line) for line in paths["evaluations.jsonl"].read_text().splitlines()]
    frame = pd.read_parquet(paths["evaluations.parquet"])
    schema = json.loads(paths["schema.json"].read_text())
    assert len(rows) == len(frame) == 28 and len(pd.read_parquet(paths["references.parquet"])) == 22
    assert [c["name"] for c in schema["evaluations"]] == list(frame.columns)
    assert all(c["description"] for c in schema["evaluations"])
    assert {"paper_category", "dtype_status", "records_folder"} <= set(frame.columns)
    assert json.loads(frame["metadata"].iloc[0]) == rows[0]["metadata"]
    assert frame["problem_flags"].isna().all()  # records older than the field: null in Parquet, not the string "NaN"
    readme = paths["README.md"].read_text()
    assert "28 evaluation records" in readme and "| NVIDIA H200 | current | fp32 | gemini-1.5-flash | 19 | 17 | 17 | 17 | 0 |" in readme
    assert "python -m kbstudy release --records outputs/records/kernelbench/h200/level1-fp32" in readme
    assert "A phased run" not in readme
    assert "is counted correct but not evaluated" in readme  # why a correct count can exceed `evaluated`
    before = paths["evaluations.jsonl"].read_bytes()
    write_release([H200, SMOKE], out, name="h200-test", root=REPO)
    assert paths["evaluations.jsonl"].read_bytes() == before  # same records, same bytes
    # a phased folder (the leaderboard script's) is named as such, with the phases it had done
    phased = tmp_path / "phased"
    merge_record_folders(phased, [H200])
    (phased / "phases_done.txt").write_text("top5.p001-025.v0.fp32\ntop5.p001-025.current.fp32\n")
    readme = write_release([phased], tmp_path / "r2", name="phased", root=REPO)["README.md"].read_text()
    assert readme.splitlines()[2].startswith("**A phased run:** `")
    assert "had 2 phases done when this release was made" in readme
    assert "top5.p001-025.current.fp32, top5.p001-025.v0.fp32" in readme

    merged = tmp_path / "merged"
    counts = merge_record_folders(merged, [H200, SMOKE, H200])
    assert counts == {"evaluations.jsonl": 28, "references.jsonl": 22}
    assert merge_record_folders(merged, [merged, SMOKE]) == counts  # idempotent, dest may be a source
    assert RecordStore(merged).evaluations_frame()["key"].is_unique
    assert "point at a reference timing" not in paths["README.md"].read_text()


def test_release_names_evaluations_whose_reference_record_is_missing(tmp_path):
    """An evaluations file that came back without its references (the H200 leaderboard's run of current 93-100 at commit
    b3c171f): the release says which problems' reference timings are missing, and warns."""
    from kbstudy.pipeline.release import orphan_evaluations, write_release

    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "evaluations.jsonl").write_bytes((H200 / "evaluations.jsonl").read_bytes())
    refs = [json.loads(line) for line in (H200 / "references.jsonl").read_text().splitlines()]
    lost = refs[0]
    (partial / "references.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refs[1:]))
    with pytest.warns(UserWarning, match="have no reference record"):
        readme = write_release([partial], tmp_path / "out", name="partial", root=REPO)["README.md"].read_text()
    ev = pd.read_json(partial / "evaluations.jsonl", lines=True)
    orphans = orphan_evaluations(ev, pd.DataFrame(refs[1:]))
    assert len(orphans) and set(orphans["reference_key"]) == {lost["key"]}
    assert f"**{len(orphans)} timed evaluation records point at a reference timing" in readme
    assert f"{lost['problem_version'] or 'current'} {lost['precision']} L{lost['level']}/{lost['problem_id']}" in readme
    assert orphan_evaluations(ev, pd.DataFrame(refs)).empty


# ------------------------------------------------------------------------------------------------ GPU plan


#: the script's evaluations on this machine: small sizes
CPU_EVAL_ARGS = "--device cpu --size-scale 0.0625"


def _script(out: Path, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "OUT": str(out), "KB_DIR": str(KB), "KBSTUDY_GIT_COMMIT": "test", "SKIP_FLAG": "",
            "SUMMARY": "0",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **env}
    full = {k: v for k, v in full.items() if v is not None}  # None: unset (e.g. SKIP_FLAG, to let the script probe)
    return subprocess.run(["bash", str(REPO / "scripts" / "h200_leaderboard.sh"), "200"], cwd=REPO, env=full,
                          capture_output=True, text=True, timeout=300)


def test_gpu_script_runs_resumes_and_matches_the_study(tmp_path):
    from kbstudy.pipeline.study_config import load_study

    dry = _script(tmp_path / "dry", DRY_RUN="1", RECORDS_DIR=str(tmp_path / "none"))
    assert dry.returncode == 0, dry.stderr
    commands = [line for line in dry.stdout.splitlines() if line.startswith("[")]
    assert len(commands) == 32 and "phases: 32, pending here: 32" in dry.stdout
    assert all("--run-timeout 60 --load-timeout 420" in c for c in commands)
    study = load_study(REPO / "params" / "study" / "h200_level1_leaderboard.yaml")
    assert {c.split("--run ")[1].split()[0] for c in commands} == {r.run for r in study.runs}
    assert sum("-c null:reference" in c for c in commands) == 4  # the current fp32 phases of the top five
    assert not (tmp_path / "dry").exists()  # a dry run writes nothing under $OUT
    # the bf16 phases skip float32-only kernels, in the script (which probes the evaluator for the flag, in a dry run
    # too) and in the study file alike: the flag is part of the settings key, so both make the same keys
    probed = _script(tmp_path / "dry", DRY_RUN="1", RECORDS_DIR=str(tmp_path / "none"), SKIP_FLAG=None)
    bf16 = [c for c in probed.stdout.splitlines() if c.startswith("[") and "--precision bf16" in c]
    assert len(bf16) == 16 and all("--skip-float32-only" in c for c in bf16)
    assert all(("--skip-float32-only" in c) == ("--precision bf16" in c) for c in probed.stdout.splitlines()
               if c.startswith("["))
    assert {r.run: bool(r.eval.get("skip_float32_only")) for r in study.runs} == {
        r.run: r.precision == "bf16" for r in study.runs}
    # no structural variants in either (the same settings key as the committed records)
    assert all("--no-structural-variants" in c for c in commands)
    assert all(r.eval.get("structural_variants") == [] for r in study.runs)
    # one real phase on this CPU: the CUDA kernels are recorded as skipped, the phase is marked done, and a second
    # call finds nothing left
    out = tmp_path / "call1"
    run = _script(out, RECORDS_DIR=str(tmp_path / "none"), CHUNKS="19-19", RUN_GROUPS="top5", PRECISIONS="bf16",
                  VERSIONS="v0", EXTRA_EVAL_ARGS=CPU_EVAL_ARGS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (out / "rec" / "phases_done.txt").read_text().split() == ["top5.p019-019.v0.bf16"]
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [
        "eval.log", "evaluations.jsonl", "phases_done.txt", "references.jsonl", "status.txt"]
    rows = RecordStore(out / "rec").evaluations_frame()
    assert len(rows) == 5 and set(rows["outcome"]) == {"skipped"} and set(rows["problem_version"]) == {"v0"}
    assert set(rows["run"]) == {"h200-level1-leaderboard-v0-bf16"} and set(rows["git_commit"]) == {"test"}
    assert all(m["dtype_scan"]["float32_only"] for m in rows["metadata"])
    again = _script(tmp_path / "call2", DRY_RUN="1", RECORDS_DIR=str(out / "rec"), CHUNKS="19-19",
                    RUN_GROUPS="top5", PRECISIONS="bf16", VERSIONS="v0")
    assert "pending here: 0" in again.stdout
    # REDO=1 runs a done phase again (with --retry-outcome: its machine failures are evaluated again)
    redo = _script(tmp_path / "call3", DRY_RUN="1", RECORDS_DIR=str(out / "rec"), CHUNKS="19-19",
                   RUN_GROUPS="top5", PRECISIONS="bf16", VERSIONS="v0", REDO="1",
                   EXTRA_EVAL_ARGS="--retry-outcome out_of_memory")
    assert "pending here: 1" in redo.stdout and "--retry-outcome out_of_memory" in redo.stdout


def test_gpu_script_redo_keeps_the_retried_records(tmp_path):
    """A REDO call's retried records replace the ones they retry in the merged folder (a retry of five
    out-of-memory records on the H200 was once dropped by the merge, which kept the first copy of a key)."""
    common = dict(CHUNKS="19-19", RUN_GROUPS="top5", PRECISIONS="bf16", VERSIONS="v0")
    first = _script(tmp_path / "call1", RECORDS_DIR=str(tmp_path / "none"),
                    EXTRA_EVAL_ARGS=CPU_EVAL_ARGS, **common)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = RecordStore(tmp_path / "call1" / "rec").evaluations_frame()
    assert len(before) == 5 and set(before["outcome"]) == {"skipped"}
    time.sleep(1.1)  # created_utc has whole seconds
    redo = _script(tmp_path / "call2", RECORDS_DIR=str(tmp_path / "call1" / "rec"), REDO="1",
                   EXTRA_EVAL_ARGS=f"{CPU_EVAL_ARGS} --retry-outcome skipped", **common)
    assert redo.returncode == 0, redo.stdout[-3000:] + redo.stderr[-3000:]
    after = RecordStore(tmp_path / "call2" / "rec").evaluations_frame()
    assert len(after) == 5 and sorted(after["key"]) == sorted(before["key"])
    assert (after.set_index("key")["created_utc"] > before.set_index("key")["created_utc"]).all()
    assert len((tmp_path / "call2" / "rec" / "evaluations.jsonl").read_text().splitlines()) == 5
    # the phase redone is listed once (a second line made status.txt count 6 phases done of 5)
    assert (tmp_path / "call2" / "rec" / "phases_done.txt").read_text().split() == ["top5.p019-019.v0.bf16"]
    assert "phases done: 1 of 1" in (tmp_path / "call2" / "status.txt").read_text()
    # RETRY_PHASES: the same retry first, then the call goes on with a pending phase (one command)
    time.sleep(1.1)
    both = _script(tmp_path / "call3", RECORDS_DIR=str(tmp_path / "call2" / "rec"), CHUNKS="19-19 20-20",
                   RUN_GROUPS="top5", PRECISIONS="bf16", VERSIONS="v0", RETRY_PHASES=r"p019-019",
                   RETRY_ARGS="--retry-outcome skipped", EXTRA_EVAL_ARGS=CPU_EVAL_ARGS)
    assert both.returncode == 0, both.stdout[-3000:] + both.stderr[-3000:]
    assert "pending here: 2 (retried first: 1)" in both.stdout
    assert both.stdout.index("top5.p019-019.v0.bf16 rc=0") < both.stdout.index("top5.p020-020.v0.bf16 rc=0")
    third = RecordStore(tmp_path / "call3" / "rec").evaluations_frame().set_index("key")
    assert (third.loc[after["key"], "created_utc"].values > after["created_utc"].values).all()
    assert set(third["problem_id"]) == {19, 20} and third.index.is_unique
    assert (tmp_path / "call3" / "rec" / "phases_done.txt").read_text().split() == [
        "top5.p019-019.v0.bf16", "top5.p020-020.v0.bf16"]


def test_merge_keeps_the_newest_record_of_each_identity(tmp_path):
    """Per evaluation identity (key, model configuration, sample): the newest record, whichever folder holds it; the
    same code under two configurations stays two records; a stale copy merged later changes nothing."""
    from kbstudy.pipeline.release import merge_record_folders

    rows = [json.loads(line) for line in (H200 / "evaluations.jsonl").read_text().splitlines()[:3]]
    refs = [json.loads(line) for line in (H200 / "references.jsonl").read_text().splitlines()[:2]]

    def folder(name, evaluations, references):
        path = tmp_path / name
        path.mkdir()
        (path / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evaluations))
        (path / "references.jsonl").write_text("".join(json.dumps(r) + "\n" for r in references))
        return path

    old = folder("old", rows, refs)
    retried = {**rows[1], "outcome": "evaluated", "created_utc": "2099-01-01T00:00:00+00:00"}
    same_code = {**rows[2], "model_config": "another-configuration", "candidate_id": "another"}
    new_ref = {**refs[0], "eager_ms_median": 1.0, "created_utc": "2099-01-01T00:00:00+00:00"}
    work = folder("work", rows + [retried, same_code], refs + [new_ref])
    dest = tmp_path / "dest"
    assert merge_record_folders(dest, [old, work]) == {"evaluations.jsonl": 4, "references.jsonl": 2}
    assert merge_record_folders(dest, [dest, old]) == {"evaluations.jsonl": 4, "references.jsonl": 2}
    merged = [json.loads(line) for line in (dest / "evaluations.jsonl").read_text().splitlines()]
    assert merged[1] == retried and merged[0] == rows[0] and merged[3] == same_code  # first positions kept
    merged_refs = [json.loads(line) for line in (dest / "references.jsonl").read_text().splitlines()]
    assert merged_refs[0]["eager_ms_median"] == 1.0


def test_gpu_script_spends_its_last_seconds_on_bf16_phases(tmp_path):
    """Past MIN_LEFT only the bf16 phases start (their float32-only kernels are recorded as skipped, in seconds)."""
    out = tmp_path / "call"
    run = _script(out, RECORDS_DIR=str(tmp_path / "none"), CHUNKS="19-19", RUN_GROUPS="top5",
                  PRECISIONS="fp32 bf16", VERSIONS="v0", SKIP_FLAG="--skip-float32-only", MIN_LEFT="100000",
                  MIN_LEFT_CHEAP="0", EXTRA_EVAL_ARGS=CPU_EVAL_ARGS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "only the 1 bf16 phases" in run.stdout
    assert (out / "rec" / "phases_done.txt").read_text().split() == ["top5.p019-019.v0.bf16"]
    assert "left: top5.p019-019.v0.fp32" in (out / "status.txt").read_text()
    # without the evaluator's skip, nothing is cheap: the call stops at once
    run = _script(tmp_path / "noskip", RECORDS_DIR=str(tmp_path / "none"), CHUNKS="19-19", RUN_GROUPS="top5",
                  PRECISIONS="fp32 bf16", VERSIONS="v0", MIN_LEFT="100000", MIN_LEFT_CHEAP="0")
    assert "stopping:" in run.stdout and (tmp_path / "noskip" / "rec" / "phases_done.txt").read_text() == ""


def test_gpu_script_keeps_every_slot_busy_and_merges_each_phase(tmp_path):
    """Two GPU slots, three phases: each phase's records are merged when it ends, and a free slot takes the next."""
    out = tmp_path / "call"
    run = _script(out, RECORDS_DIR=str(tmp_path / "none"), NGPU="2", CHUNKS="18-18 19-19 20-20", RUN_GROUPS="top5",
                  PRECISIONS="bf16", VERSIONS="v0", EXTRA_EVAL_ARGS=CPU_EVAL_ARGS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    done = (out / "rec" / "phases_done.txt").read_text().split()
    assert sorted(done) == ["top5.p018-018.v0.bf16", "top5.p019-019.v0.bf16", "top5.p020-020.v0.bf16"]
    assert {line.split("(slot ")[1].rstrip(")") for line in run.stdout.splitlines() if "(slot " in line} == {"0", "1"}
    rows = RecordStore(out / "rec").evaluations_frame()
    assert rows["key"].is_unique and set(rows["problem_id"]) == {18, 19, 20}


def test_h200_study_files_and_notebook_params():
    from kbstudy.pipeline.paths import project_path
    from kbstudy.pipeline.study import load_run_inputs
    from kbstudy.pipeline.study_config import load_study, notebook_parameters

    studies = [load_study(REPO / "params" / "study" / n) for n in ("h200_level1_fp32.yaml",
                                                                     "h200_level1_leaderboard.yaml")]
    leaderboard = studies[1]
    problems, candidates = load_run_inputs(leaderboard.runs[0])
    assert (len(problems), len(candidates)) == (100, 264 + 100)  # every level-1 kernel, null:reference everywhere
    assert [len(r.candidates) for r in leaderboard.runs] == [2, 1, 1, 1]
    assert {r.problems["version"] for r in leaderboard.runs} == {"current", "v0"}
    assert {r.precision for r in leaderboard.runs} == {"fp32", "bf16"}
    assert all(r.eval["run_timeout_s"] == 60 and r.eval["load_timeout_s"] == 420 for r in leaderboard.runs)
    assert studies[0].reports == leaderboard.reports  # one H200 level-1 analysis
    params = notebook_parameters(leaderboard.notebooks[0])
    assert params == notebook_parameters(studies[0].notebooks[0])
    written = {str(r.records) for s in studies for r in s.runs} | {str(SMOKE)}
    assert {str(project_path(d, REPO)) for d in params["records_dirs"]} == written
