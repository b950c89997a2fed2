"""Notebooks 03 (addressable fraction) and 04 (DLRM-Bench) rendered with papermill from the committed CPU records
(recommenders-style): the CSV tables they write must equal what ``kbstudy.analysis.profiles`` and
``kbstudy.analysis.dlrm`` compute from the same records, a few numbers are checked against the records
themselves, and the rendered notebooks must pass strict nbval on a re-run.

The records (``outputs/records/profiles/cpu/study``, ``outputs/records/dlrm_bench/cpu/study``) are read-only inputs;
everything the notebooks write goes to a temporary folder.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("papermill")
pytest.importorskip("jupytext")

from support.committed import RECORDS, committed_records  # noqa: E402

from kbstudy.analysis import dlrm as dlrm_report  # noqa: E402
from kbstudy.analysis import (
    dlrm_device,  # noqa: E402
    dlrm_variants,  # noqa: E402
)
from kbstudy.analysis import profiles as prof_report  # noqa: E402
from kbstudy.profiling.addressable import paper_comparison  # noqa: E402
from kbstudy.records.store import RecordStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"
PROFILE_RECORDS = RECORDS / "profiles" / "cpu" / "study"
DLRM_RECORDS = RECORDS / "dlrm_bench" / "cpu" / "study"
H200_PROFILE_RECORDS = RECORDS / "profiles" / "h200" / "eager"
H200_DLRM_RECORDS = RECORDS / "dlrm_bench" / "h200" / "preliminary"
H200_REPORT = REPO / "outputs" / "reports" / "h200" / "03_addressable_fraction.ipynb"
pytestmark = pytest.mark.slow


def _params(name: str, out_dir: Path) -> dict:
    """The notebook's committed cpu-default params, with the output folder redirected to ``out_dir``."""
    from kbstudy.pipeline.study_config import load_mapping

    params = load_mapping(REPO / "params" / f"{name}.cpu-default.yaml")
    params["output_dir"] = str(out_dir)
    return params


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """``{notebook: (ipynb, output_dir)}`` for notebooks 03 and 04, rendered once for the module."""
    committed_records(PROFILE_RECORDS, file="workloads.jsonl")
    committed_records(DLRM_RECORDS, file="evaluations.jsonl")
    from kbstudy.pipeline.render import render_notebook

    tmp = tmp_path_factory.mktemp("nb0304")
    out = {}
    for name in ("03_addressable_fraction", "04_dlrm_bench"):
        out_dir = tmp / "analysis" / name
        written = render_notebook(REPO / "notebooks" / f"{name}.py", tmp / "reports" / f"{name}.ipynb",
                                  _params(name, out_dir), root=REPO)
        out[name] = (written["ipynb"], out_dir)
    return out


def _printed(ipynb: Path) -> str:
    nb = json.loads(ipynb.read_text())
    parts = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            assert o.get("output_type") != "error" and o.get("name") != "stderr", o
            text = o.get("text", "")
            parts.append(text if isinstance(text, str) else "".join(text))
    return "".join(parts)


# ------------------------------------------------------------------------------------------------ notebook 03


def test_notebook_03_tables_equal_report(rendered):
    ipynb, out = rendered["03_addressable_fraction"]
    tables = out / "tables"
    kernels, workloads = prof_report.load_profile_records(PROFILE_RECORDS, root=REPO)
    table = prof_report.workload_table(kernels, workloads, rule="non_vendor")

    coverage = pd.read_csv(tables / "coverage.csv")
    pd.testing.assert_frame_equal(coverage, prof_report.coverage_table(kernels, workloads), check_dtype=False)
    assert (coverage["status"] == "ok").all() and len(coverage) == 14  # seven + six sweep sizes + ViT extra

    summary = pd.read_csv(tables / "addressable_summary.csv", index_col="workload_key")
    pd.testing.assert_frame_equal(summary, table[summary.columns.tolist()], check_dtype=False, check_names=False)
    # numbers the profiler recorded independently, and Amdahl's bound by hand
    recorded = workloads.set_index("workload_key")["addressable_fraction"]
    for key, row in summary.iterrows():
        assert row["addressable_fraction"] == pytest.approx(recorded[key], abs=1e-12)
        assert row["amdahl_bound"] == pytest.approx(1 / (1 - row["addressable_fraction"]))
    assert summary.loc["gpt2_train@tiny", "addressable_fraction"] == pytest.approx(0.3713479337, abs=1e-9)

    main_keys = [k for k in table.index if table.loc[k, "role"] in ("seven", "extra")]
    assert len(main_keys) == 8
    breakdown = pd.read_csv(tables / "category_breakdown.csv", index_col=0)
    pd.testing.assert_frame_equal(breakdown, prof_report.breakdown_table(kernels, main_keys), check_dtype=False,
                                  check_names=False)
    assert breakdown.sum(axis=1).to_numpy() == pytest.approx([1.0] * len(breakdown))

    comparison = pd.read_csv(tables / "paper_comparison.csv", index_col=0)
    seven = table[table["role"] == "seven"]  # the paper's seven: the ViT extra is drawn, not counted
    assert len(seven) == 7
    pd.testing.assert_frame_equal(comparison, paper_comparison(seven, seven["domain"].to_dict()), check_dtype=False,
                                  check_names=False)
    assert comparison.loc["paper", "addressable_min"] == pytest.approx(0.089)

    sweep = pd.read_csv(tables / "size_sweep.csv", index_col=0)
    pd.testing.assert_frame_equal(sweep, prof_report.sweep_table(table, workloads), check_dtype=False,
                                  check_names=False)
    assert set(sweep["workload"]) == {"gpt2_train", "llama_infer"}
    assert (sweep["row_from"] == "workloads.jsonl").all()

    sources = pd.read_csv(tables / "row_sources.csv", keep_default_na=False, na_values=[""])
    assert sources["source_folder"].eq("outputs/records/profiles/cpu/study").all() and len(sources) == 14
    assert not (tables / "folder_agreement.csv").exists()  # no supplementary folder on the CPU default
    notes = (tables / "paper_comparison_notes.txt").read_text().splitlines()
    assert notes == prof_report.paper_comparison_notes(table, prof_report.sweep_table(table, workloads))

    for fig in ("category_breakdown", "addressable_vs_paper", "size_sweep"):
        assert (out / "figures" / f"{fig}.png").stat().st_size > 0
    text = _printed(ipynb)
    assert "14 of 14 runs ok; nothing missing" in text
    assert "sweep sizes absent from the records: none" in text


# ------------------------------------------------------------------------------------------------ notebook 04


def test_notebook_04_tables_equal_report(rendered):
    ipynb, out = rendered["04_dlrm_bench"]
    tables = out / "tables"
    assert dlrm_report.run_layout(DLRM_RECORDS) == "evaluate_batch"
    table, machine = dlrm_report.load_run(DLRM_RECORDS)

    written = pd.read_csv(tables / "dlrm_bench_table.csv")
    pd.testing.assert_frame_equal(written, table[written.columns.tolist()], check_dtype=False)
    assert written["problem_id"].tolist() == list(range(1, 13))
    assert written.set_index("problem_id")["precision"].to_dict() == {
        i: ("bf16" if i in (10, 11) else "fp32") for i in range(1, 13)}
    assert written["kbstudy_correct"].all()
    # KernelBench's bf16 tolerance (atol = rtol = 1e-2) is under a few bf16 ulps: the 3-layer DCN (10) passes it only
    # because its kernel rounds as eager does (three roundings per layer; to nearest even by hand under the
    # interpreter, which truncates bf16 casts)
    assert written.set_index("problem_id")["kernelbench_correct"].to_dict() == {i: True for i in range(1, 13)}
    assert (written["correct"] == (written["kernelbench_correct"] & written["kbstudy_correct"])).all()
    assert written["compile_ms"].isna().all()  # no torch.compile baseline on the CPU run
    ratio = written["eager_ms"] / written["ours_ms"]
    assert written["speedup_vs_eager"].to_numpy() == pytest.approx(ratio.to_numpy(), rel=1e-9)
    ratio = written["ours_ms"] / written["floor_ms"]
    assert written["ours_over_floor"].to_numpy() == pytest.approx(ratio.to_numpy(), rel=1e-9)
    # the floors are those of floors.jsonl, computed on the machine of machine.json
    floors = dlrm_report.load_floors(DLRM_RECORDS).set_index("problem_id")
    assert written.set_index("problem_id")["floor_ms"].to_dict() == pytest.approx(floors["floor_ms"].to_dict())
    assert set(floors["machine_key"]) == {machine["key"]}
    records = {r["problem_id"]: r for r in RecordStore(DLRM_RECORDS).evaluations()}
    assert set(floors["problem_sha256"].items()) == {(k, r["problem_sha256"]) for k, r in records.items()}
    assert all("inputs_mutated" not in r["metadata"] for r in records.values())  # problem 5 is functional

    summ = pd.read_csv(tables / "dlrm_bench_summary.csv")
    pd.testing.assert_frame_equal(summ, dlrm_report.summary(table), check_dtype=False)
    values = summ.set_index("quantity")["ours"]
    assert values["problems"] == 12 and values["correct"] == 12
    assert values["KernelBench verdict passed"] == 12 and values["kbstudy verdict passed"] == 12
    assert values["win rate over eager"] == 0  # the Triton interpreter on a CPU never beats eager
    assert math.isnan(values["median speedup vs eager, wins only"])
    ok = table[table["correct"]]
    assert values["median speedup vs eager, correct kernels"] == pytest.approx(ok["speedup_vs_eager"].median())
    mem_count = int((table["bound"] == "memory").sum())
    assert values["memory-bound problems"] == mem_count >= 9

    times = pd.read_csv(tables / "dlrm_bench_times.csv")
    assert set(times["variant"]) == {"eager", "ours (Triton)", "floor"} and len(times) == 36
    mem = pd.read_csv(tables / "memory_bound_vs_floor.csv")
    assert len(mem) == mem_count and not mem["within_target"].any()
    assert (out / "figures" / "dlrm_bench_times.png").stat().st_size > 0

    text = _printed(ipynb)
    assert f"{machine['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s" in text
    assert "layout: evaluate_batch" in text
    assert "torch.compile times absent for 12 of 12 problems" in text
    assert "kernels not correct" not in text
    # launch-aware view: a CPU run times no Triton launch (only under the interpreter), so the flags are empty
    assert "launch latency (empty Triton kernel, timed as candidates are): not measured in this run" in text
    assert "launch_torch_ms" in machine["details"] and "launch_triton_ms" not in machine["details"]
    launch = pd.read_csv(tables / "launch_aware.csv")
    view = dlrm_report.launch_view(table)
    pd.testing.assert_frame_equal(launch.drop(columns="launch_bound"), view.drop(columns="launch_bound"),
                                  check_dtype=False)
    assert launch["launch_ms"].isna().all() and launch["launch_bound"].isna().all() and len(launch) == 12
    assert math.isnan(values["launch latency, empty Triton kernel (ms)"])
    # device-time view: a CPU run profiles no device kernels, so only the per-call columns are filled, and no figure
    device = pd.read_csv(tables / "device_time.csv")
    expected = dlrm_device.device_time_view(DLRM_RECORDS)
    empty = ["device_ms", "gap_us", "device_over_floor", "device_within_target", "target_gap_us", "n_kernels",
             "device_source", "device_q1_ms", "device_q3_ms", "profiled_ms", "copy_ms", "copy_over_floor",
             "device_over_copy", "device_flush", "copy_flush", "sector_over_bytes", "dram_copy_ms",
             "dram_copy_over_floor", "target_below_copy"]
    pd.testing.assert_frame_equal(device.drop(columns=empty), expected.drop(columns=empty), check_dtype=False)
    assert device[empty].isna().all().all() and len(device) == 12
    assert dlrm_device.device_notes(expected, machine)[0] in text
    assert "no figure: these records have no device times" in text
    assert not (out / "figures" / "device_vs_floor.png").exists()


# ------------------------------------------------------------------------------------------------ both


def test_rendered_notebooks_pass_nbval(rendered):
    """Strict nbval on a re-run of both rendered notebooks (no cell is tagged nbval-ignore-output)."""
    paths = [str(ipynb) for ipynb, _ in rendered.values()]
    for p in paths:
        cells = json.loads(Path(p).read_text())["cells"]
        assert not any("nbval-ignore-output" in c.get("metadata", {}).get("tags", []) for c in cells)
        text = _printed(Path(p))
        assert "/tmp" not in text and str(Path.home()) not in text and str(REPO) not in text
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                          "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), *paths],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]


# ------------------------------------------------------------------------------------------------ partial records


@pytest.mark.skipif(not H200_REPORT.exists(), reason="H200 rendering absent")
def test_committed_h200_rendering_equals_report_on_its_records():
    """The committed H200 notebook 3 (``outputs/reports/h200/``) shows what ``kbstudy.analysis.profiles`` computes from
    the committed records with its params (main folder plus the earlier call's kernel tables): a stale rendering fails
    here, without re-executing it (``make nbval`` does that)."""
    committed_records(H200_PROFILE_RECORDS, file="workloads.jsonl")
    from kbstudy.pipeline.paths import project_path
    from kbstudy.pipeline.study_config import load_mapping

    params = load_mapping(REPO / "params" / "03_addressable_fraction.h200.yaml")
    assert params["output_dir"] == "outputs/reports/h200/03_addressable_fraction"
    kernels, workloads = prof_report.load_profile_records(
        project_path(params["records_dir"], REPO),
        supplementary=[project_path(d, REPO) for d in params["supplementary_dirs"]], root=REPO)
    table = prof_report.workload_table(kernels, workloads, rule=params["rule"])
    tables = REPO / params["output_dir"] / "tables"
    summary = pd.read_csv(tables / "addressable_summary.csv", index_col="workload_key")
    pd.testing.assert_frame_equal(summary, table[summary.columns.tolist()], check_dtype=False, check_names=False)
    assert len(summary) == 12 and summary.loc["llama_infer@8b"].isna()["step_ms_median"]
    sources = pd.read_csv(tables / "row_sources.csv", keep_default_na=False, na_values=[""])
    assert sources.set_index("workload_key").loc[["llama_infer@8b", "vit_b16_infer@b16"], "row_from"].tolist() == [
        "kernels.jsonl", "kernels.jsonl"]
    sweep = pd.read_csv(tables / "size_sweep.csv", index_col=0)
    pd.testing.assert_frame_equal(sweep, prof_report.sweep_table(table, workloads), check_dtype=False,
                                  check_names=False)
    assert len(sweep) == 6
    classification = pd.read_csv(tables / "classification_coverage.csv", index_col=0)
    assert (classification["other_by_name_rules"] < prof_report.OTHER_SHARE_TARGET).all() and len(classification) == 12
    notes = (tables / "paper_comparison_notes.txt").read_text().splitlines()
    assert notes == prof_report.paper_comparison_notes(table, prof_report.sweep_table(table, workloads))
    for fig in ("category_breakdown", "addressable_vs_paper", "size_sweep"):
        assert (REPO / params["output_dir"] / "figures" / f"{fig}.png").stat().st_size > 0


def test_dlrm_missing_names_gaps():
    """The preliminary H200 folder (the former runner's layout) stays readable: self-check as ``correct``."""
    committed_records(H200_DLRM_RECORDS, file="evaluations.jsonl")
    assert dlrm_report.run_layout(H200_DLRM_RECORDS) == "preliminary"
    table, machine = dlrm_report.load_run(H200_DLRM_RECORDS)
    assert dlrm_report.missing(table, machine) == []
    assert table["correct"].all() and table["kernelbench_correct"].isna().all()
    assert pd.isna(dlrm_report.summary(table).set_index("quantity").loc["KernelBench verdict passed", "ours"])
    partial = table[table["problem_id"] > 2].copy()
    partial.loc[partial["problem_id"] == 5, "compile_ms"] = float("nan")
    notes = dlrm_report.missing(partial, {})
    assert notes[0].startswith("machine.json absent")
    assert "2 of 12 problems have no record: 1 EmbeddingBagSum, 2 EmbeddingBagWeightedVarLen" in notes
    assert "torch.compile times absent for 1 of 10 problems (problems 5)" in notes


def _code_without_docstrings(source: str) -> str:
    """The AST of ``source`` with every module, class and function docstring emptied (``ast.dump``)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                first.value.value = ""
    return ast.dump(tree)


@pytest.mark.skipif(not (REPO / "outputs" / "reports" / "h200" / "04_dlrm_bench.ipynb").exists(),
                    reason="H200 notebook 4 rendering absent")
def test_committed_h200_dlrm_rendering_equals_report_on_its_records():
    """The committed H200 notebook 4 shows what ``kbstudy.analysis.dlrm`` computes from the records its params
    name (``dlrm_bench/h200/final``, the kernels of commit cbec50b, compared with ``previous-kernels``, whose files
    differ in 5 and 12, and with ``repeat``, which holds eleven of the twelve files): a stale rendering fails here. The
    records say which record is which file, that the two new kernels (5 and 12) took less device time than the files
    they replace where both were measured in the same run, and that the device time of one file reproduces between
    runs."""
    from kbstudy.pipeline.paths import project_path
    from kbstudy.pipeline.study_config import load_mapping
    from kbstudy.suites.dlrm_bench import load_dlrm_candidates

    params = load_mapping(REPO / "params" / "04_dlrm_bench.h200.yaml")
    assert params["records_dir"] == "outputs/records/dlrm_bench/h200/final"
    assert params["previous_records_dir"] == "outputs/records/dlrm_bench/h200/previous-kernels"
    assert params["repeat_records_dir"] == "outputs/records/dlrm_bench/h200/repeat"
    records_dir, previous_dir, repeat_dir = (project_path(params[k], REPO) for k in (
        "records_dir", "previous_records_dir", "repeat_records_dir"))
    committed_records(records_dir, previous_dir, repeat_dir, file="evaluations.jsonl")
    table, machine = dlrm_report.load_run(records_dir)
    before, _ = dlrm_report.load_run(previous_dir)
    repeat, _ = dlrm_report.load_run(repeat_dir)
    device = dlrm_device.device_time_view(records_dir)
    tables = REPO / params["output_dir"] / "tables"
    for name, expected in (("dlrm_bench_summary", dlrm_report.summary(table)),
                           ("launch_gap", dlrm_report.launch_gap(table)),
                           ("device_time", device),
                           ("before_after", dlrm_report.compare_runs(before, table)),
                           ("repeat_run", dlrm_report.compare_runs(repeat, table)),
                           ("variants", dlrm_variants.variants(records_dir)),
                           ("achieved_bandwidth", dlrm_report.achieved_bandwidth(records_dir)),
                           ("kernel_moves_previous", dlrm_report.kernel_moves(previous_dir, records_dir)),
                           ("kernel_moves_repeat", dlrm_report.kernel_moves(repeat_dir, records_dir))):
        # a CSV reads None back as NaN (e.g. target_below_copy of the compute-bound problems)
        expected = expected.where(expected.notna(), float("nan"))
        pd.testing.assert_frame_equal(pd.read_csv(tables / f"{name}.csv"), expected, check_dtype=False, obj=name)
    assert table["correct"].all() and len(table) == 12
    assert (REPO / params["output_dir"] / "figures" / "device_vs_floor.png").stat().st_size > 0
    text = _printed(REPO / "outputs" / "reports" / "h200" / "04_dlrm_bench.ipynb")
    for note in (dlrm_report.floor_notes(table, machine)
                 + dlrm_device.device_notes(device, machine)
                 + dlrm_report.gather_notes(dlrm_report.achieved_bandwidth(records_dir), machine)
                 + dlrm_variants.variant_notes(dlrm_variants.variants(records_dir))
                 + dlrm_report.move_notes(dlrm_report.kernel_moves(previous_dir, records_dir))
                 + dlrm_report.move_notes(dlrm_report.kernel_moves(repeat_dir, records_dir))):
        assert note in text
    assert "memory-bound problems within 1.25x of the floor: 4 EmbeddingBagBackward (1.19x)" in text  # per call
    assert "win rate over eager: 100.0% (12 of 12; paper 41.7%)" in text
    assert "other run: outputs/records/dlrm_bench/h200/repeat" in text
    assert (table["speedup_significant"] == True).all()  # noqa: E712 - every kernel a significant win over eager
    # the target, by (clean-L2) device time: five memory-bound kernels within it (9 and 12 on the line: 12 at 1.256x
    # here, 1.245x in the repeat run, whose machine measured a 1.5 % lower copy bandwidth); a plain copy of the
    # compulsory bytes is within 1.25x of the floor everywhere but problem 7, and so is a copy of the bytes the DRAM
    # must move in whole sectors (problems 5 and 6 move more than their bytes)
    mem = device[device["bound"] == "memory"]
    assert set(device["device_source"]) == {"cold"} and set(device["device_flush"]) == {"read"}
    assert set(device["copy_flush"]) == {"read"}
    assert mem.loc[mem["device_within_target"] == True, "problem_id"].tolist() == [1, 3, 4, 8, 9]  # noqa: E712
    on_line = mem.set_index("problem_id").loc[[9, 12], "device_over_floor"]
    assert ((on_line - dlrm_report.FLOOR_TARGET).abs() < 0.01).all(), on_line
    assert mem.loc[mem["per_call_over_floor"] <= dlrm_report.FLOOR_TARGET, "problem_id"].tolist() == [4]
    assert mem.loc[mem["copy_over_floor"] > dlrm_report.FLOOR_TARGET, "problem_id"].tolist() == [7]
    assert mem.loc[mem["sector_over_bytes"] > 1.0, "problem_id"].tolist() == [5, 6]
    assert mem.loc[mem["target_below_copy"] == True, "problem_id"].tolist() == [7]  # noqa: E712
    assert device.loc[device["bound"] == "compute", "target_below_copy"].isna().all()
    floors = pd.read_json(records_dir / "floors.jsonl", lines=True).set_index("problem_id")
    assert floors["sector_copy_ms"].dropna().index.tolist() == [5, 6]
    # commit cbec50b's code made the run, a4d968a's the repeat; ours are the shipped files (all but 5 in the repeat)
    # as measured: the final folder keeps the measured files byte for byte (candidates/kbstudy-triton/), and each
    # shipped file is its measured file with docstrings and comments rewritten, the same code
    evaluations = RecordStore(records_dir).evaluations_frame()
    repeated = RecordStore(repeat_dir).evaluations_frame()
    assert set(evaluations["git_commit"]) == {"cbec50bc39411c5c94d2983429d9ef80b3ce4fe8"}
    assert set(repeated["git_commit"]) == {"a4d968aabe033a5abbcb8cc1e8b46a7d79a84494"}
    assert set(evaluations["model_config"]) == {"kbstudy-triton"} and len(evaluations) == 12
    assert set(repeated["model_config"]) == {"kbstudy-triton"}
    assert evaluations["candidate_device_ms_median"].notna().all()
    # every record names what its Triton autotuners chose (problem 7's kernel has none: one launch shape)
    tuned = evaluations.set_index("problem_id")["metadata"].map(lambda m: sorted(m.get("autotuned") or {}))
    assert [p for p in range(1, 13) if not tuned[p]] == [7]
    shipped_source = {c.problem_id: c.source for c in load_dlrm_candidates()}
    ours = evaluations.set_index("problem_id")["candidate_sha256"]
    measured_dir = records_dir / "candidates" / "kbstudy-triton"
    assert sorted(f.name for f in measured_dir.iterdir()) == sorted(
        f"level_5_problem_{p}_sample_0_kernel.py" for p in range(1, 13))
    ours_source = {p: (measured_dir / f"level_5_problem_{p}_sample_0_kernel.py").read_text() for p in range(1, 13)}
    assert all(ours[p] == hashlib.sha256(ours_source[p].encode()).hexdigest() for p in range(1, 13))
    assert all(_code_without_docstrings(ours_source[p]) == _code_without_docstrings(shipped_source[p])
               for p in range(1, 13))
    again = repeated[repeated["model_config"] == "kbstudy-triton"].set_index("problem_id")["candidate_sha256"]
    assert [p for p in range(1, 13) if again[p] != ours[p]] == [5]
    # which record is which file: ten kernels are the files of previous-kernels; 12 is the variant s15-d, measured
    # beside that run's file in two runs, and 5 the variant s16-c, measured beside that run's file too; each with its
    # device-time interval below 1 in the same run
    s15 = RecordStore(previous_dir).evaluations_frame()
    s15_ours = s15[s15["model_config"] == "kbstudy-triton"].set_index("problem_id")["candidate_sha256"]
    assert [p for p in range(1, 13) if ours[p] != s15_ours[p]] == [5, 12]
    for folder, config, problem in (("variants-problem-12", "s15-d", 12), ("variants-problem-12-repeat", "s15-d", 12),
                                    ("variants-problem-5", "s16-c", 5)):
        folder = committed_records(RECORDS / "dlrm_bench" / "h200" / folder)
        variants = dlrm_variants.variants(folder).set_index(["problem_id", "model_config"])
        runs = RecordStore(folder).evaluations_frame().set_index(["problem_id", "model_config"])
        measured = (folder / "candidates" / config / f"level_5_problem_{problem}_sample_0_kernel.py").read_text()
        assert runs.loc[(problem, config), "candidate_sha256"] == hashlib.sha256(measured.encode()).hexdigest()
        # the shipped file is the measured one with its docstrings and comments rewritten: the same code
        assert _code_without_docstrings(measured) == _code_without_docstrings(shipped_source[problem])
        assert runs.loc[(problem, "kbstudy-triton"), "candidate_sha256"] == s15_ours[problem], folder
        assert variants.loc[(problem, config), "variant_over_ours_device_ci_high"] < 1.0, folder
    # the device time of one file reproduces between runs (within 5 % here): the eleven kernel files both runs hold
    dev_rep = dlrm_device.device_time_view(repeat_dir).set_index("problem_id")
    dev_new = device.set_index("problem_id")
    for p in (1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12):
        assert dev_rep.loc[p, "device_ms"] == pytest.approx(dev_new.loc[p, "device_ms"], rel=0.05), p
