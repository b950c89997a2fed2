"""Notebook 01 rendered with papermill from fixture records (recommenders-style): the CSV tables it writes must equal
``kbstudy.analysis.scoring`` on the same records, and the rendered notebook must pass strict nbval when re-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.fixture_records import config_a, record, write_store

from kbstudy.analysis import scoring
from kbstudy.records.frames import load_evaluations

pm = pytest.importorskip("papermill")
pytest.importorskip("jupytext")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "01_kernelbench_level1.py"
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"
pytestmark = pytest.mark.slow


def _render(tmp_path: Path, records: Path, name: str = "01_kernelbench_level1") -> tuple[Path, Path]:
    from kbstudy.pipeline.render import render_notebook

    out_dir = tmp_path / "analysis"
    params = {"records_dirs": [str(records)], "output_dir": str(out_dir), "precision": "fp32",
              "hardware_label": "fixture", "correctness": "kbstudy", "level": 1}
    written = render_notebook(NOTEBOOK, tmp_path / "reports" / f"{name}.ipynb", params, root=REPO)
    return written["ipynb"], out_dir


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nb")
    write_store(tmp / "records")
    ipynb, out_dir = _render(tmp, tmp / "records")
    return tmp, ipynb, out_dir


def test_notebook_tables_equal_scoring(rendered):
    tmp, ipynb, out_dir = rendered
    frame = load_evaluations([tmp / "records"])
    for baseline in ("eager", "compile"):
        written = pd.read_csv(out_dir / "tables" / f"summary_{baseline}.csv")
        expected = scoring.summarize(frame, correctness="kbstudy", baseline=baseline)
        pd.testing.assert_frame_equal(written, expected, check_dtype=False)
    headline = pd.read_csv(out_dir / "tables" / "headline.csv").set_index("model_config")
    # hand-computed for configuration A (tests/support/fixture_records.py)
    assert headline.loc["A", "kbstudy_correct_pct"] == pytest.approx(40.0)
    assert headline.loc["A", "fast_1"] == pytest.approx(0.2)
    assert headline.loc["A", "compile_speedup_geomean"] == pytest.approx(0.5)
    for name in ("correctness_rates", "fast_p_curve", "correct_speedups"):
        assert (out_dir / "figures" / f"{name}.png").stat().st_size > 0
        assert (out_dir / "figures" / f"{name}.svg").stat().st_size > 0
    assert ipynb.with_suffix(".html").exists()


def test_rendered_notebook_is_clean(rendered):
    _, ipynb, _ = rendered
    nb = json.loads(ipynb.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    tags = [c.get("metadata", {}).get("tags", []) for c in nb["cells"]]
    assert ["parameters"] in tags and ["injected-parameters"] in tags
    text = "".join(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"])
                   for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))
    # tables are HTML (kbstudy.analysis.tables) with a text/plain twin: configuration A is a row of the headline table
    tables = "".join("".join(o["data"]["text/plain"]) for c in nb["cells"] if c["cell_type"] == "code"
                     for o in c.get("outputs", []) if "text/html" in o.get("data", {}))
    assert "A " in tables or "A\n" in tables
    assert str(Path.home()) not in tables and "/tmp" not in tables, "tables must not carry absolute paths"
    # the fixture has no null:reference record: the notebook says its margin is 0 (and does not warn, see below)
    assert "fixture-cpu: m = 0 (no null:reference records)" in text
    assert str(Path.home()) not in text and "/tmp" not in text, "printed outputs must not carry absolute paths"
    errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error" or o.get("name") == "stderr"]
    assert not errors, errors


def _nbval(ipynb: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), str(ipynb)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_nbval_passes_on_a_rerun_and_fails_when_a_number_changes(rendered):
    tmp, ipynb, _ = rendered
    ok = _nbval(ipynb)
    assert ok.returncode == 0, ok.stdout[-4000:]
    # change one record's speedup: the stored outputs no longer match, nbval must fail
    changed = tmp / "records_changed"
    write_store(changed, [record("A", 1, kb=True, kbs=True, eager=3.0, compile=1.0)] + config_a()[1:])
    text = ipynb.read_text().replace(json.dumps(str(tmp / "records"))[1:-1], json.dumps(str(changed))[1:-1])
    assert text != ipynb.read_text()
    mutated = ipynb.with_name("mutated.ipynb")
    mutated.write_text(text)
    bad = _nbval(mutated)
    assert bad.returncode != 0, "nbval should have caught the changed speedup"


def test_render_merges_a_cells_stream_messages(tmp_path):
    """Text a cell prints around a flush and a pause arrives as several stream messages; the rendering keeps one
    stdout block per run of them (``kbstudy.pipeline.render.strip_run_metadata``), so a re-render does not depend on when the
    kernel flushed. A figure-free two-cell notebook, rendered through papermill as the study renders."""
    import nbformat

    from kbstudy.pipeline.render import render_notebook

    source = tmp_path / "nb_streams.py"
    source.write_text("# %% tags=[\"parameters\"]\npause = 0.3\n\n# %%\nimport sys, time\nprint(\"first\")\n"
                      "sys.stdout.flush()\ntime.sleep(pause)\nprint(\"second\")\nsys.stdout.flush()\n"
                      "time.sleep(pause)\nprint(\"third\", file=sys.stderr)\nsys.stderr.flush()\ntime.sleep(pause)\n"
                      "print(\"fourth\")\n")
    out = render_notebook(source, tmp_path / "out" / "nb_streams.ipynb", {}, root=tmp_path, html=False)["ipynb"]
    outputs = nbformat.read(out, as_version=4).cells[-1].outputs
    assert [(o.output_type, o.name, o.text) for o in outputs] == [
        ("stream", "stdout", "first\nsecond\n"), ("stream", "stderr", "third\n"), ("stream", "stdout", "fourth\n")]
