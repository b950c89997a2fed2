"""The typer commands, end to end against the loopback server."""

from __future__ import annotations

from support.chat_server import API_KEY_ENV
from typer.testing import CliRunner

from kbstudy.cli.generate import app
from kbstudy.harness.candidates import load_candidates

runner = CliRunner()


def test_generate_then_replay(server, write_config, problems_path, tmp_path, api_key_env):
    out = tmp_path / "outputs" / "generations" / "test"
    args = ["generate", "--config", str(write_config()), "--problems", str(problems_path), "--level", "1",
            "--problem-id", "19", "--problem-id", "23", "--samples", "1", "--out", str(out), "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 ok" in result.output and "kbstudy eval" in result.output
    assert len(server.chat_requests) == 2
    generated = load_candidates(out / "candidates.jsonl")
    assert sorted(c.problem_id for c in generated) == [19, 23]

    result = runner.invoke(app, args)  # resume
    assert result.exit_code == 0 and "skipped 2" in result.output and len(server.chat_requests) == 2

    replayed_path = tmp_path / "replayed.jsonl"
    result = runner.invoke(app, ["replay", str(out), "--out", str(replayed_path), "--problems", str(problems_path),
                                 "--strict"])
    assert result.exit_code == 0, result.output
    assert sorted(c.sha256 for c in load_candidates(replayed_path)) == sorted(c.sha256 for c in generated)


def test_exit_codes(server, write_config, problems_path, tmp_path, monkeypatch):
    common = ["--problems", str(problems_path), "--problem-id", "19", "--level", "1", "--out", str(tmp_path / "o"),
              "--no-progress"]
    result = runner.invoke(app, ["generate", "--config", str(tmp_path / "missing.yaml"), *common])
    assert result.exit_code == 2 and "missing.yaml" in result.output

    monkeypatch.setenv(API_KEY_ENV, "wrong")
    result = runner.invoke(app, ["generate", "--config", str(write_config()), *common])
    assert result.exit_code == 1 and "401" in result.output and API_KEY_ENV in result.output

    result = runner.invoke(app, ["replay", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "no generation set" in result.output
