"""Notebook 02 (correctness audit) rendered with papermill from real records (a fixture-sized slice of the committed
CPU calibration, plus the committed H200 smoke run and the CPU DLRM-Bench run): the CSV tables it writes must equal
``kbstudy.analysis.audit`` on the same records, its printed output must be clean, and the rendered notebook must pass strict
nbval when re-run. The H200 params file is checked for a folder that does not exist yet (a GPU run to come)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.committed import committed_records
from support.fixture_records import write_calibration_slice

from kbstudy.analysis import audit
from kbstudy.records.frames import load_frames, run_folders

pytest.importorskip("papermill")
pytest.importorskip("jupytext")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "02_correctness_audit.py"
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    from kbstudy.pipeline.render import render_notebook
    from kbstudy.pipeline.study_config import load_mapping

    tmp = tmp_path_factory.mktemp("nb02")
    calibration = write_calibration_slice(tmp)
    params = load_mapping(REPO / "params" / "02_correctness_audit.cpu-default.yaml")
    smoke, dlrm = "outputs/records/kernelbench/h200/smoke", "outputs/records/dlrm_bench/cpu/study"
    committed_records(REPO / smoke, REPO / dlrm, file="evaluations.jsonl")
    params.update(records_dirs=[str(calibration), smoke, dlrm], output_dir=str(tmp / "analysis"))
    written = render_notebook(NOTEBOOK, tmp / "reports" / "02_correctness_audit.ipynb", params, root=REPO, html=False)
    return tmp, written["ipynb"], tmp / "analysis", params


def _printed(ipynb: Path) -> str:
    nb = json.loads(ipynb.read_text())
    parts = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            assert o.get("output_type") != "error" and o.get("name") != "stderr", o
            text = o.get("text", "")
            parts.append(text if isinstance(text, str) else "".join(text))
    return "".join(parts)


def test_tables_equal_audit(rendered):
    tmp, ipynb, out, params = rendered
    folders, missing = run_folders(params["records_dirs"], REPO)
    assert missing == []
    ev, refs, _ = load_frames(folders, label="relative", root=REPO, settings=True)
    findings = audit.null_findings(ev, refs, params["precisions"])
    tables = out / "tables"
    expected = {"null_summary": audit.null_summary(findings), "zeros_pass_counts": audit.zeros_pass_counts(findings),
                "violations": audit.violations(findings),
                "threshold_evidence": audit.threshold_evidence(findings, ev, params["precisions"]),
                "candidate_reverification": audit.candidate_reverification(ev, params["precisions"]),
                "proposed_summary": audit.proposed_summary(findings)}
    for name, frame in expected.items():
        written = pd.read_csv(tables / f"{name}.csv", keep_default_na=False, na_values=[""])
        frame = frame.reset_index(drop=True)
        assert list(written.columns) == list(frame.columns), name
        assert len(written) == len(frame), name
        for col in frame.columns:
            got, want = written[col], frame[col]
            if pd.api.types.is_numeric_dtype(got) and pd.api.types.is_numeric_dtype(want.dropna()):
                assert got.to_numpy(dtype=float) == pytest.approx(want.to_numpy(dtype=float), nan_ok=True), (name, col)
            else:
                assert got.fillna("").astype(str).tolist() == want.fillna("").astype(str).tolist(), (name, col)
    for fig in ("null_outcomes", "metric_spread"):
        assert (out / "figures" / f"{fig}.png").stat().st_size > 0
        assert (out / "figures" / f"{fig}.svg").stat().st_size > 0
    text = _printed(ipynb)
    assert "AMD EPYC, 1/64 size, bf16: all-zeros passes KernelBench's check on 1 of 4 level-1 problems" in text
    assert "all-zeros passes KernelBench's check on 4 of 60 level-1 problems" in text
    assert str(Path.home()) not in text and "/tmp" not in text, "printed outputs must not carry absolute paths"


def test_h200_params_read_each_candidate_once_and_tolerate_a_run_to_come():
    from kbstudy.pipeline.study_config import load_mapping

    params = load_mapping(REPO / "params" / "02_correctness_audit.h200.yaml")
    folders, missing = run_folders(params["records_dirs"], REPO)
    names = {Path(f).resolve().relative_to(REPO).as_posix().removeprefix("outputs/records/") for f in folders}
    assert names >= {"kernelbench/h200/smoke", "kernelbench/h200/level1-fp32", "kernelbench/h200/calibration/level1-fp32",
                     "kernelbench/h200/calibration/level1-bf16"}
    # kernelbench/h200/level1-fp32-first4 holds the first four of level1-fp32's candidates: reading both counts them
    # twice
    assert "kernelbench/h200/level1-fp32-first4" not in names
    assert all(m.startswith("outputs/records/kernelbench/h200/") for m in missing)
    ev, _, _ = load_frames(folders, label="relative", root=REPO, settings=True)
    # gemini-1.5-flash's kernels were run twice at fp32 (kernelbench/h200/level1-fp32, then the leaderboard): both folders
    # are read, and the audit's candidate tables take each attempt once, from the folder listed first (the leaderboard)
    gemini = ev[ev.model_config == "gemini-1.5-flash"]
    assert gemini.duplicated(["problem_version", "problem_id", "candidate_sha256", "precision"]).any()
    kept = audit.candidate_records(ev)
    kept = kept[kept.model_config == "gemini-1.5-flash"]
    assert not kept.duplicated(["problem_version", "problem_id", "candidate_sha256", "precision"]).any()
    assert set(kept.records_folder) == {"outputs/records/kernelbench/h200/leaderboard"}
    assert len(kept) == len(gemini.drop_duplicates(["problem_version", "problem_id", "candidate_sha256", "precision"]))


def test_nbval_passes_on_a_rerun(rendered):
    _, ipynb, _, _ = rendered
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                          "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), str(ipynb)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]
