"""The ``kbstudy`` command line (``eval``, ``export``, ``summary``) through typer's test runner, on real data."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kbstudy.cli.app import app

#: a wide console, so rich does not wrap the summary table's cells
runner = CliRunner(env={"COLUMNS": "200"})


def _text(result) -> str:
    """Everything the command printed (stdout and stderr)."""
    out = result.output or ""
    try:
        err = result.stderr or ""
    except ValueError:  # older click: stderr not captured separately
        err = ""
    return out + ("" if err in out else err)


def test_eval_bad_problems_path(tmp_path):
    result = runner.invoke(app, ["eval", "--problems", str(tmp_path / "nope.jsonl"), "-c", "null:reference",
                                 "--out", str(tmp_path / "out"), "--device", "cpu", "--no-progress"])
    assert result.exit_code == 2, _text(result)
    assert "problem source not found" in _text(result) and "nope.jsonl" in _text(result)
    assert not (tmp_path / "out" / "evaluations.jsonl").exists()


def test_eval_malformed_candidates(tmp_path, levels_file):
    cands = tmp_path / "cands.jsonl"
    cands.write_text(json.dumps({"level": 1, "problem_id": 19, "code": "x", "model_config": "m"}) + "\n{oops\n")
    result = runner.invoke(app, ["eval", "--problems", str(levels_file), "-c", str(cands), "--level", "1",
                                 "--problem-id", "19", "--out", str(tmp_path / "out"), "--device", "cpu",
                                 "--no-progress"])
    assert result.exit_code == 2, _text(result)
    assert "cands.jsonl:2" in _text(result)


@pytest.mark.parametrize("args, message", [
    (["--size-scale", "0"], "size-scale"),
    (["--precision", "fp64"], "precision"),
    (["-c", "null:ones"], "ones"),
])
def test_eval_bad_options(tmp_path, levels_file, args, message):
    base = ["eval", "--problems", str(levels_file), "--level", "1", "--problem-id", "19",
            "--out", str(tmp_path / "out"), "--device", "cpu", "--no-progress"]
    if "-c" not in args:
        base += ["-c", "null:reference"]
    result = runner.invoke(app, base + args)
    assert result.exit_code == 2, _text(result)
    assert message in _text(result)


@pytest.fixture(scope="module")
def cli_run(levels_file, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    out = tmp / "cli-run"
    args = ["eval", "--problems", str(levels_file), "-c", "null:reference", "-c", "null:zeros", "--level", "1",
            "--problem-id", "19", "--size-scale", "0.03", "--device", "cpu", "--no-compile-baseline",
            "--out", str(out), "--no-progress", "--timing-budget-ms", "20", "--cache-dir", str(tmp / "cache")]
    result = runner.invoke(app, args)
    return {"result": result, "out": out, "args": args}


def test_eval_tiny_real_run(cli_run):
    result, out = cli_run["result"], cli_run["out"]
    assert result.exit_code == 0, _text(result) + repr(result.exception)
    text = _text(result)
    assert "2 records written, 0 already present" in text
    assert "null:reference" in text and "null:zeros" in text  # the summary table
    rows = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    by_config = {r["model_config"]: r for r in rows}
    assert by_config["null:reference"]["kbstudy_correct"] is True
    assert by_config["null:zeros"]["kbstudy_correct"] is False
    assert {r["run"] for r in rows} == {"cli-run"}  # the run is named after the out folder
    assert {r["size_scale"] for r in rows} == {0.03}
    assert (out / "references.jsonl").is_file()


def test_eval_again_resumes(cli_run):
    result = runner.invoke(app, cli_run["args"])
    assert result.exit_code == 0, _text(result)
    assert "0 records written, 2 already present" in _text(result)
    assert len((cli_run["out"] / "evaluations.jsonl").read_text().splitlines()) == 2


def test_export_writes_parquet(cli_run):
    pd = pytest.importorskip("pandas")
    assert cli_run["result"].exit_code == 0
    result = runner.invoke(app, ["export", str(cli_run["out"])])
    assert result.exit_code == 0, _text(result)
    path = cli_run["out"] / "evaluations.parquet"
    assert str(path) in result.output
    frame = pd.read_parquet(path)
    assert sorted(frame["model_config"]) == ["null:reference", "null:zeros"]
    assert (cli_run["out"] / "references.parquet").is_file()


def test_export_and_summary_of_an_empty_folder(tmp_path):
    assert runner.invoke(app, ["export", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["summary", str(tmp_path)]).exit_code == 2


def test_summary_prints(cli_run):
    assert cli_run["result"].exit_code == 0
    result = runner.invoke(app, ["summary", str(cli_run["out"])])
    assert result.exit_code == 0, _text(result)
    assert "null:reference" in result.output and "null:zeros" in result.output
    assert "kbstudy-correct" in result.output
    # why the zeros output is not correct: its failing check, per configuration
    assert "why records are not kbstudy-correct" in result.output
    assert "null:zeros: 1 x evaluated: rel_l2" in result.output
    assert "null:reference:" not in result.output.split("why records")[1]


def test_failure_reasons_blank_numbers_and_rank():
    pd = pytest.importorskip("pandas")
    from kbstudy.cli.records import failure_reasons

    frame = pd.DataFrame([
        {"model_config": "m", "outcome": "timeout", "error_message": "run: no reply within 60 s", "kbstudy_correct": None,
         "kbstudy_failure": None},
        {"model_config": "m", "outcome": "timeout", "error_message": "run: no reply within 120 s",
         "kbstudy_correct": None, "kbstudy_failure": None},
        {"model_config": "m", "outcome": "evaluated", "error_message": None, "kbstudy_correct": False,
         "kbstudy_failure": "coverage"},
        {"model_config": "m", "outcome": "evaluated", "error_message": None, "kbstudy_correct": True,
         "kbstudy_failure": None},
        {"model_config": "m", "outcome": "skipped", "error_message": "no GPU", "kbstudy_correct": None,
         "kbstudy_failure": None},
    ])
    reasons = failure_reasons(frame)
    assert reasons.values.tolist() == [["m", "timeout: run: no reply within N s", 2], ["m", "evaluated: coverage", 1]]


def test_eval_with_no_matching_candidate_says_so(levels_file, tmp_path):
    result = runner.invoke(app, ["eval", "--problems", str(levels_file), "-c", str(levels_file.parent /
                                 "leaderboard_kernels.jsonl"), "--level", "1", "--problem-id", "19",
                                 "--model-config", "no-such-model", "--device", "cpu", "--out", str(tmp_path / "o"),
                                 "--no-progress"])
    assert result.exit_code == 0, _text(result)
    assert "no candidate matches this selection" in _text(result) and "no-such-model" in _text(result)
    assert not (tmp_path / "o" / "evaluations.jsonl").exists()


def test_summary_per_problem_rows(cli_run):
    """``summary --per-problem``: one row per problem x candidate of the real tiny CPU batch, with outcome, both
    verdicts, the failing check and the speedup over eager labelled as a CPU result."""
    assert cli_run["result"].exit_code == 0
    result = runner.invoke(app, ["summary", str(cli_run["out"]), "--per-problem"])
    assert result.exit_code == 0, _text(result)
    lines = result.output.splitlines()
    for col in ("problem", "candidate", "outcome", "KernelBench", "kbstudy", "failing check", "speedup vs eager"):
        assert col in result.output
    zeros = next(line for line in lines if "null:zeros" in line)
    reference = next(line for line in lines if "null:reference" in line)
    assert "L1/19 19_ReLU.py" in zeros and "L1/19 19_ReLU.py" in reference
    assert "evaluated" in zeros and "rel_l2" in zeros and "fail" in zeros
    assert "evaluated" in reference and "pass" in reference and "fail" not in reference
    assert "CPU, not a GPU result" in reference


def test_summary_csv(cli_run, tmp_path):
    """``--csv PATH`` writes the per-problem table; ``--csv -`` prints it to stdout."""
    pd = pytest.importorskip("pandas")
    import io

    path = tmp_path / "sub" / "per_problem.csv"
    result = runner.invoke(app, ["summary", str(cli_run["out"]), "--csv", str(path)])
    assert result.exit_code == 0, _text(result)
    table = pd.read_csv(path).set_index("model_config")
    assert sorted(table.index) == ["null:reference", "null:zeros"]
    assert {"problem", "sample_id", "outcome", "kernelbench_correct", "kbstudy_correct", "failing_check",
            "speedup_vs_eager", "speedup_ci_low", "speedup_ci_high", "timing_note"} <= set(table.columns)
    assert table.loc["null:zeros", "failing_check"] == "rel_l2"
    assert not table.loc["null:zeros", "kbstudy_correct"] and table.loc["null:reference", "kbstudy_correct"]
    assert table.loc["null:reference", "problem"] == "L1/19 19_ReLU.py"
    assert table.loc["null:reference", "timing_note"] == "CPU, not a GPU result"
    assert table.loc["null:reference", "speedup_vs_eager"] > 0
    stdout = runner.invoke(app, ["summary", str(cli_run["out"]), "--csv", "-"])
    assert stdout.exit_code == 0, _text(stdout)
    assert pd.read_csv(io.StringIO(stdout.output)).equals(pd.read_csv(path))


def test_summary_labels_cpu_speedups(cli_run):
    result = runner.invoke(app, ["summary", str(cli_run["out"])])
    assert result.exit_code == 0, _text(result)
    assert "CPU, not a GPU result" in result.output


def test_eval_interrupted_prints_the_resume_hint(levels_file, tmp_path, monkeypatch):
    """An interrupted batch (Ctrl-C, or SIGTERM, which evaluate_batch turns into KeyboardInterrupt) ends with one line
    saying to rerun the same command, and exit status 130."""
    from kbstudy.cli import arguments

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(arguments, "evaluate_batch", interrupted)  # the evaluator `kbstudy eval` calls
    result = runner.invoke(app, ["eval", "--problems", str(levels_file), "-c", "null:reference", "--level", "1",
                                 "--problem-id", "19", "--device", "cpu", "--out", str(tmp_path / "o"),
                                 "--no-progress"])
    assert result.exit_code == 130, _text(result)
    assert "rerun the same command to resume" in _text(result)


@pytest.mark.slow
def test_eval_sigterm_prints_the_resume_hint(levels_file, tmp_path):
    """A real ``kbstudy eval`` process stopped by SIGTERM while a candidate runs prints the hint and keeps what it
    wrote (the reference record)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    problems = [json.loads(line) for line in levels_file.read_text().splitlines() if line.strip()]
    relu = next(p for p in problems if p["level"] == 1 and p["problem_id"] == 19)
    cands = tmp_path / "slow"
    cands.mkdir()
    (cands / "level_1_problem_19_sample_0_kernel.py").write_text(
        relu["code"] + "\n\nimport time\n\n\nclass ModelNew(Model):\n    def forward(self, x):\n"
        "        time.sleep(600)\n        return super().forward(x)\n")
    out = tmp_path / "o"
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "kbstudy", "eval", "--problems", str(levels_file), "-c", str(cands),
                             "--level", "1", "--problem-id", "19", "--size-scale", "0.03", "--device", "cpu",
                             "--no-compile-baseline", "--out", str(out), "--no-progress", "--cache-dir",
                             str(tmp_path / "cache")], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        deadline = time.monotonic() + 240
        while not (out / "references.jsonl").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert (out / "references.jsonl").exists(), proc.communicate(timeout=60)
        time.sleep(2)  # the candidate's first trial is sleeping now
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "rerun the same command to resume" in stderr
    assert (out / "references.jsonl").read_text().strip()


def _problem_folder(levels_file, dest):
    """A KernelBench-style problem folder (``level1/19_ReLU.py``) made from the shared export."""
    rows = [json.loads(line) for line in levels_file.read_text().splitlines() if line.strip()]
    relu = next(r for r in rows if r["level"] == 1 and r["problem_id"] == 19)
    (dest / "level1").mkdir(parents=True)
    (dest / "level1" / "19_ReLU.py").write_text(relu["code"])
    return dest


@pytest.mark.parametrize("source", ["folder", "jsonl", "data folder"])
def test_eval_problem_source_given_as_candidates_says_so(levels_file, tmp_path, source):
    """A problem folder, a problem JSONL or the KernelBench data folder given where a candidate source is expected:
    a message that says what it is, not that the candidate source was not found."""
    path = {"folder": lambda: _problem_folder(levels_file, tmp_path / "KernelBench"),
            "jsonl": lambda: levels_file, "data folder": lambda: levels_file.parent}[source]()
    result = runner.invoke(app, ["eval", "--problems", str(levels_file), "-c", str(path), "--level", "1",
                                 "--problem-id", "19", "--device", "cpu", "--out", str(tmp_path / "o"),
                                 "--no-progress"])
    assert result.exit_code == 2, _text(result)
    text = " ".join(_text(result).split())
    expected = {"folder": "is a problem folder", "jsonl": "is a problem file",
                "data folder": "is the KernelBench data folder"}[source]
    assert expected in text and "not a candidate source" in text, text
    assert "not found" not in text
    assert not (tmp_path / "o" / "evaluations.jsonl").exists()


def test_command_line_needs_no_optional_package():
    """The GPU image lacks papermill, jupytext, nbformat, nbconvert and openai: ``kbstudy`` still starts (every command
    module imports without them) and ``eval`` is there."""
    import subprocess
    import sys
    from pathlib import Path

    script = ("import sys\n"
              "for name in ('papermill', 'jupytext', 'nbformat', 'nbconvert', 'openai'):\n"
              "    sys.modules[name] = None  # any import of it fails\n"
              "from kbstudy.cli.app import app\n"
              "app(['eval', '--help'], standalone_mode=False)\n")
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "--candidates" in done.stdout
