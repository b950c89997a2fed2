"""Notebook 05 (end to end) rendered with papermill from committed records: the tables it writes must equal what
``kbstudy.analysis.projection`` and ``kbstudy.analysis.end_to_end`` compute from the same records, the measured
section must say "no measured records" without substitution records and show them when a folder holds some, and the
rendered notebook must pass strict nbval on a re-run. Everything the notebook writes goes to a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("papermill")
pytest.importorskip("jupytext")

from support.committed import committed_records  # noqa: E402

from kbstudy.analysis import end_to_end as e2e  # noqa: E402
from kbstudy.analysis import profiles  # noqa: E402
from kbstudy.analysis import projection as proj  # noqa: E402
from kbstudy.records.frames import load_frames  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "05_end_to_end.py"
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"
pytestmark = pytest.mark.slow


def _render(tmp: Path, params_name: str, **overrides) -> tuple[Path, Path]:
    from kbstudy.pipeline.render import render_notebook
    from kbstudy.pipeline.study_config import load_mapping

    params = load_mapping(REPO / "params" / f"05_end_to_end.{params_name}.yaml")
    out_dir = tmp / "analysis"
    params.update(output_dir=str(out_dir), **overrides)
    written = render_notebook(NOTEBOOK, tmp / "reports" / "05_end_to_end.ipynb", params, root=REPO)
    return written["ipynb"], out_dir


def _printed(ipynb: Path) -> str:
    parts = []
    for cell in json.loads(ipynb.read_text())["cells"]:
        for o in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            assert o.get("output_type") != "error" and o.get("name") != "stderr", o
            parts.append("".join(o.get("text", "")))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    """Rendered with the GPU params: the H200 leaderboard and DLRM-Bench records, the H100 profiles (eager and
    production) and the H100 substitution records."""
    for folder in ("kernelbench/h200/leaderboard", "dlrm_bench/h200/final", "profiles/h100/eager",
                   "profiles/h100/production", "substitution/h100/first"):
        committed_records(folder)
    return _render(tmp_path_factory.mktemp("nb05"), "h200")


def test_tables_equal_the_package_on_the_same_records(h200):
    ipynb, out = h200
    ev = load_frames([committed_records("kernelbench/h200/leaderboard")], first_attempts=True).evaluations
    rates = proj.kernel_category_rates(proj.llm_attempts(ev))
    pd.testing.assert_frame_equal(pd.read_csv(out / "tables" / "kernel_category_rates.csv"),
                                  pd.read_csv(pd.io.common.StringIO(rates.to_csv(index=False))))
    kernels, workloads = profiles.load_profile_records(
        committed_records("profiles/h100/eager"))
    seven = list(workloads.loc[(workloads["status"] == "ok") & (workloads["role"] == "seven"), "workload_key"])
    expected = proj.workload_projection(proj.category_projection(kernels, workloads, rates, keys=seven), rates, workloads)
    got = pd.read_csv(out / "tables" / "projection.csv", index_col="workload_key")
    assert list(got.index) == seven
    assert got["saving_by_category"].to_numpy() == pytest.approx(expected["saving_by_category"].to_numpy())
    assert got["saving_pooled"].to_numpy() == pytest.approx(expected["saving_pooled"].to_numpy())
    text = _printed(ipynb)
    assert "31 of 264" in text and "production setup: not yet measured" not in text
    assert "expert-written" in (out / "tables" / "projection_expert.csv").read_text()


def test_measured_records_are_read_and_set_beside_the_projection(h200):
    """The committed H100 substitutions: LLM-written kernels apply nowhere (saving 0), the expert EmbeddingBag kernel
    is timed in DLRM inference and refused by the end-to-end check in training."""
    _, out = h200
    measured = pd.read_csv(out / "tables" / "measured.csv")
    expected = e2e.load_substitution_records([committed_records("substitution/h100/first")])
    assert len(measured) == len(expected) == 18
    llm = measured[measured["kernel_source"] == "llm"]
    assert set(llm["outcome"]) == {"nothing_applicable"} and (llm["saving"] == 0).all()
    assert llm["not_applicable_reasons"].str.contains("verified for float32 only").any()
    infer = measured[(measured["workload"] == "dlrm_dcnv2_infer") & (measured["kernel_source"] == "expert")]
    assert set(infer["outcome"]) == {"timed"} and (infer["saving"] > 0.2).all()
    assert (infer["baseline_ms_ci_low"] <= infer["baseline_ms"]).all()
    train = measured[(measured["workload"] == "dlrm_dcnv2_train") & (measured["kernel_source"] == "expert")]
    assert set(train["outcome"]) == {"check_failed"} and (train["e2e_rel_l2"] > 0.02).all()
    both = pd.read_csv(out / "tables" / "projected_vs_measured.csv")
    row = both[(both["workload_key"] == "dlrm_dcnv2_infer@mlperf") & (both["kernel_source"] == "expert-written")
               & (both["setup"] == "eager")]
    assert row["measured_saving"].iloc[0] == pytest.approx(infer.loc[infer["config"] == "eager", "saving"].iloc[0])
    assert "Measured by substitution" in (out / "tables" / "answer.txt").read_text()


def test_cpu_default_renders_and_passes_nbval(tmp_path):
    ipynb, out = _render(tmp_path, "cpu-default")
    text = _printed(ipynb)
    assert "no measured records" in text and "/tmp" not in text and str(REPO) not in text
    assert (out / "figures" / "projected_vs_measured.png").exists()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                          "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), str(ipynb)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]
