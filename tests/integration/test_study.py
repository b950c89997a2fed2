"""kbstudy.pipeline.study and study_config: study files, the evaluation step (through the real evaluate_batch, on a tiny
CPU config) and the notebook step."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kbstudy.harness.config import NoGPUError, hardware_label, resolve_device
from kbstudy.pipeline import study as study_mod
from kbstudy.pipeline import study_config
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.pipeline.paths import find_project_root, project_path
from kbstudy.records.store import RecordStore

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = resolve_kernelbench_dir(required=False)
needs_kernelbench = pytest.mark.skipif(not (KERNELBENCH / "kernelbench_levels_1-3.jsonl").exists(),
                                       reason="KernelBench data not found")


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


@needs_kernelbench
@pytest.mark.parametrize("name", ["cpu_default.yaml", "h200_level1_fp32.yaml"])
def test_shipped_study_files_parse_and_resolve(name):
    study = study_config.load_study(REPO / "params" / "study" / name, kernelbench_dir=KERNELBENCH)
    assert study.runs and study.notebooks
    for nb in study.notebooks:
        assert nb.notebook.exists() and nb.params.exists()
        params = study_config.notebook_parameters(nb)
        if nb.notebook.name != "01_kernelbench_level1.py":
            continue
        assert {"records_dirs", "output_dir", "precision", "hardware_label", "correctness"} <= set(params)
        # the notebook reads the records its study writes (paths relative to the repository root); the H200 analysis
        # also reads the folders of the other H200 study and the smoke run
        # (tests/integration/test_leaderboard_analysis.py)
        assert {str(r.records) for r in study.runs} <= {str(project_path(d, REPO)) for d in params["records_dirs"]}
    info = study_mod.run_evaluations(study, dry_run=True)
    run = study.runs[0]
    assert info[run.run]["problems"] == 100
    problems, candidates = study_mod.load_run_inputs(run)
    configs = {c.model_config for c in candidates}
    leaderboard = {"cpu_default.yaml": "claude-3.5-sonnet", "h200_level1_fp32.yaml": "gemini-1.5-flash"}[name]
    assert leaderboard in configs
    assert {c.backend for c in candidates if c.model_config == leaderboard} == {"cuda"}
    if name == "cpu_default.yaml":
        assert {"null:reference", "null:zeros", "kbstudy-triton-examples"} <= configs
        recorded_on = {row["hardware"] for row in RecordStore(run.records).evaluations()}
        if hardware_label("cpu") in recorded_on:  # the committed records are this study's: nothing to evaluate
            assert info[run.run]["missing"] == 0
        else:  # records are keyed by hardware: another CPU model measures every candidate again
            assert info[run.run]["missing"] == len(candidates)
    else:
        assert info[run.run]["missing"] is None  # a GPU run's keys need the GPU's name


#: the shipped studies' runs whose committed records are under today's checks: a fresh clone's `kbstudy study`
#: evaluates nothing of them (h200_level1_fp32.yaml's 19 records predate the accuracy checks of checks=v4, so that
#: study measures its kernels again)
CURRENT_RUNS = [("cpu_default.yaml", "cpu-default")] + [
    ("h200_level1_leaderboard.yaml", f"h200-level1-leaderboard-{v}-{p}") for v in ("current", "v0")
    for p in ("fp32", "bf16")]


@needs_kernelbench
@pytest.mark.parametrize("name, run_name", CURRENT_RUNS, ids=[r for _, r in CURRENT_RUNS])
def test_shipped_study_runs_find_every_evaluation_recorded(name, run_name):
    study = study_config.load_study(REPO / "params" / "study" / name, kernelbench_dir=KERNELBENCH)
    run = next(r for r in study.runs if r.run == run_name)
    problems, candidates = study_mod.load_run_inputs(run)
    store = RecordStore(run.records)
    hardware = {row["hardware"] for row in store.evaluations()}
    cfg = study_mod.run_config(study, run, run.device)
    missing = {h: study_mod.missing_candidates(problems, candidates, store, cfg, h) for h in hardware}
    assert any(not m for m in missing.values()), {h: [c.candidate_id for c in m][:5] for h, m in missing.items()}


def test_default_study_follows_the_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert study_config.default_study_file(REPO).name == "cpu_default.yaml"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert study_config.default_study_file(REPO).name == "h200_level1_fp32.yaml"


def test_gpu_run_without_gpu_is_an_error(monkeypatch, tmp_path):
    """A study run on ``cuda`` where torch sees no GPU: a StudyError saying so and how to render instead (the device
    is resolved by the harness's one resolve_device)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NoGPUError, match="no GPU"):
        resolve_device("cuda")
    with pytest.raises(study_config.StudyError, match="no GPU.*--only-notebooks"):
        study_mod.study_device("cuda")
    assert resolve_device("auto") == "cpu"
    study = study_config.load_study(_write(tmp_path / "s.yaml", {"name": "x", "runs": [
        {"run": "r", "problems": "p.jsonl", "candidates": ["null:zeros"], "records": "o", "device": "cuda"}]}),
        root=tmp_path)
    with pytest.raises(study_config.StudyError, match="no GPU.*--only-notebooks"):
        study_mod.run_evaluations(study, progress=False)


@pytest.mark.parametrize("data, message", [
    ({"runs": []}, "name"),
    ({"name": "x", "runs": [{"run": "r", "problems": "p.jsonl", "candidates": []}]}, "records"),
    ({"name": "x", "runs": [{"run": "r", "problems": "{nowhere}/p.jsonl", "candidates": [], "records": "o"}]},
     "placeholder"),
    ({"name": "x", "runs": [{"run": "r", "problems": "p.jsonl", "candidates": [{"model_config": "m"}],
                             "records": "o"}]}, "null:<kind>"),
])
def test_bad_study_files_raise(tmp_path, data, message):
    with pytest.raises(study_config.StudyError, match=message):
        study_config.load_study(_write(tmp_path / "s.yaml", data), root=tmp_path)


def test_project_path_finds_the_repository_root(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO / "notebooks")
    assert project_path("params") == REPO / "params"
    assert project_path(tmp_path) == tmp_path
    # outside any checkout (nbval re-running a notebook copied elsewhere): the folder above the package
    assert find_project_root(tmp_path) == REPO


def test_notebooks_declare_their_parameters():
    """Notebook 01 reads the KernelBench data (its ``kernelbench_dir`` parameter); notebooks 02-05 read only records."""
    declared = study_config.declared_parameters(REPO / "notebooks" / "01_kernelbench_level1.py")
    assert declared["kernelbench_dir"] is None and "records_dirs" in declared  # None: found as `kbstudy data where`
    for name in ("02_correctness_audit.py", "03_addressable_fraction.py", "04_dlrm_bench.py", "05_end_to_end.py"):
        assert "kernelbench_dir" not in study_config.declared_parameters(REPO / "notebooks" / name)


def _two_notebook_study(tmp_path, kernelbench_dir: str | None) -> Path:
    params = _write(tmp_path / "params" / "nb.yaml", {"records_dirs": ["r"], "output_dir": "o"})
    return _write(tmp_path / "study.yaml", {
        "name": "pass-through", "kernelbench_dir": kernelbench_dir, "reports": str(tmp_path / "reports"), "runs": [],
        "notebooks": [{"notebook": str(REPO / "notebooks" / "01_kernelbench_level1.py"), "params": str(params)},
                      {"notebook": str(REPO / "notebooks" / "02_correctness_audit.py"), "params": str(params)}]})


def test_kernelbench_dir_reaches_the_notebooks_that_read_it(tmp_path):
    """The study's KernelBench folder (the file's, or --kernelbench-dir) is given to every notebook declaring a
    ``kernelbench_dir`` parameter when it is not the folder the notebook reads by default; a notebook that does not
    read the data gets nothing, and the default folder (found as `kbstudy data where` finds it, by the study and by
    the notebook alike) adds no parameter (committed renderings stay as they are)."""
    study_file = _two_notebook_study(tmp_path, None)
    default = study_config.load_study(study_file, root=tmp_path)
    assert all("kernelbench_dir" not in study_config.notebook_parameters(nb, default) for nb in default.notebooks)
    elsewhere = tmp_path.parent / "elsewhere" / "kb"
    moved = study_config.load_study(study_file, root=tmp_path, kernelbench_dir=elsewhere)
    nb01, nb02 = (study_config.notebook_parameters(nb, moved) for nb in moved.notebooks)
    assert nb01["kernelbench_dir"] == str(elsewhere) and nb01["records_dirs"] == ["r"]
    assert "kernelbench_dir" not in nb02
    # (data/kernelbench, where `kbstudy data fetch` writes, is the notebook's own default when nothing else is found)
    inside = study_config.load_study(study_file, root=tmp_path, kernelbench_dir="own/kernelbench")
    assert study_config.notebook_parameters(inside.notebooks[0], inside)["kernelbench_dir"] == "own/kernelbench"


def test_kbstudy_study_passes_kernelbench_dir_to_the_rendered_parameters(tmp_path, monkeypatch):
    """``kbstudy study --kernelbench-dir DIR --only-notebooks`` (what ``make render KERNELBENCH_DIR=DIR`` runs): the
    parameters notebook 01 is rendered with hold DIR."""
    from typer.testing import CliRunner

    from kbstudy.cli.app import app
    from kbstudy.pipeline import render

    rendered = {}

    def capture(notebook, output, parameters=None, **kwargs):
        rendered[Path(notebook).stem] = parameters
        return {"ipynb": Path(output)}

    monkeypatch.setattr(render, "render_notebook", capture)
    data = tmp_path / "my-kernelbench"
    result = CliRunner().invoke(app, ["study", str(_two_notebook_study(tmp_path, "../shared/kernelbench")),
                                      "--only-notebooks", "--kernelbench-dir", str(data)])
    assert result.exit_code == 0, result.output
    assert rendered["01_kernelbench_level1"]["kernelbench_dir"] == str(data)
    assert "kernelbench_dir" not in rendered["02_correctness_audit"]


@needs_kernelbench
@pytest.mark.slow
def test_tiny_cpu_study_end_to_end(tmp_path):
    """19_ReLU at 1/16 size on the CPU: null candidates, the Triton example (interpreter) and claude's CUDA kernel
    (skipped); then notebook 01; then a second run that finds every evaluation already recorded."""
    records = tmp_path / "records"
    params = _write(tmp_path / "params" / "nb.yaml", {
        "records_dirs": [str(records)], "output_dir": str(tmp_path / "analysis"), "precision": "fp32",
        "hardware_label": "test CPU", "correctness": "kbstudy", "level": 1})
    study_file = _write(tmp_path / "study.yaml", {
        "name": "tiny", "kernelbench_dir": str(KERNELBENCH), "reports": str(tmp_path / "reports"),
        "runs": [{
            "run": "tiny", "records": str(records), "precision": "fp32", "device": "cpu", "size_scale": 0.0625,
            "problems": {"path": "{kernelbench_dir}/kernelbench_levels_1-3.jsonl", "levels": [1], "problem_ids": [19]},
            "candidates": ["null:reference", "null:zeros",
                           {"path": str(REPO / "kbstudy" / "examples" / "triton"),
                            "model_config": "kbstudy-triton-examples"},
                           {"path": "{kernelbench_dir}/leaderboard_kernels.jsonl",
                            "model_configs": ["claude-3.5-sonnet"], "levels": [1]}],
            "eval": {"compile_baseline": False, "spare_process": False, "structural_variants": [],
                     "timing": {"warmup_ms": 1.0, "budget_ms": 20.0, "min_reps": 3, "max_reps": 5}},
        }],
        "notebooks": [{"notebook": str(REPO / "notebooks" / "01_kernelbench_level1.py"), "params": str(params)}],
    })
    data = tmp_path / "kernelbench"  # another path to the same data: reaches notebook 01's parameters
    data.symlink_to(KERNELBENCH, target_is_directory=True)
    result = study_mod.run_study(study_file, root=REPO, progress=False, kernelbench_dir=data)
    assert result["runs"]["tiny"]["written"] == 4
    frame = RecordStore(records).evaluations_frame().set_index("model_config")
    assert frame.loc["null:reference", "outcome"] == "evaluated" and frame.loc["null:reference", "kbstudy_correct"]
    assert frame.loc["null:zeros", "outcome"] == "evaluated" and not frame.loc["null:zeros", "kbstudy_correct"]
    assert frame.loc["kbstudy-triton-examples", "outcome"] == "evaluated", frame.loc["kbstudy-triton-examples", "error_message"]
    assert frame.loc["kbstudy-triton-examples", "kbstudy_correct"]
    assert frame.loc["claude-3.5-sonnet", "outcome"] == "skipped"
    # the notebook step: rendered notebook, HTML, and tables equal to scoring on the same records
    assert (tmp_path / "reports" / "01_kernelbench_level1.ipynb").exists()
    assert (tmp_path / "reports" / "01_kernelbench_level1.html").exists()
    executed = json.loads((tmp_path / "reports" / "01_kernelbench_level1.ipynb").read_text())
    injected = next(c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    assert f"kernelbench_dir = {str(data)!r}".replace("'", '"') in "".join(injected["source"])
    headline = pd.read_csv(tmp_path / "analysis" / "tables" / "headline.csv").set_index("model_config")
    assert headline.loc["claude-3.5-sonnet", "n"] == 0 and headline.loc["claude-3.5-sonnet", "n_skipped"] == 1
    assert headline.loc["null:reference", "kbstudy_correct_pct"] == 100.0
    assert headline.loc["null:zeros", "kbstudy_correct_pct"] == 0.0
    lines = (tmp_path / "reports" / "study_provenance.jsonl").read_text().splitlines()
    provenance = json.loads(lines[-1])
    assert provenance["study"] == "tiny" and "git_commit" in provenance
    # resume: nothing new to evaluate
    again = study_mod.run_study(study_file, root=REPO, progress=False, only_evaluations=True, kernelbench_dir=data)
    assert again["runs"]["tiny"]["written"] == 0 and again["runs"]["tiny"]["already_done"] == 4
    # ... and a run that wrote nothing leaves the provenance history as it was (a fresh clone's re-render stays clean)
    assert (tmp_path / "reports" / "study_provenance.jsonl").read_text().splitlines() == lines
