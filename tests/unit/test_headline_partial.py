"""The leaderboard analysis on partial records (issue #4's run is made phase by phase): the headline table counts
only verified speedups, with the noise margin of null:reference records it does not show; the coverage of the
published kernels; throughput per device call; one colour per configuration across figure panels. Hand-made records
(tests/support/fixture_records.py); every expected value is worked out here."""

from __future__ import annotations

import pandas as pd
import pytest
from support.fixture_records import record, write_store
from typer.testing import CliRunner

from kbstudy.analysis import figures as plots
from kbstudy.analysis import headline, published, scoring
from kbstudy.records.frames import load_evaluations

CONV = "54_conv_standard_3D__square_input__square_kernel.py"


def _with_interval(rec, half_width: float = 0.005):
    rec.speedup_vs_eager_ci_low = rec.speedup_vs_eager * (1 - half_width)
    rec.speedup_vs_eager_ci_high = rec.speedup_vs_eager * (1 + half_width)
    return rec


@pytest.fixture()
def frame(tmp_path) -> pd.DataFrame:
    """null:reference at 0.98, 1.01, 1.03 (margin m = 3 %); K: 1.02 (significant, inside the margin), 1.5 on a
    convolution (verified), 1.2 on a convolution (not significant), 0.5 (slower)."""
    rows = [record("null:reference", pid, kb=True, kbs=True, eager=s, hardware="gpu")
            for pid, s in ((1, 0.98), (2, 1.01), (3, 1.03))]
    rows += [record("K", 1, kb=True, kbs=True, eager=1.02, hardware="gpu"),
             record("K", 2, kb=True, kbs=True, eager=1.5, hardware="gpu"),
             record("K", 3, kb=True, kbs=True, eager=1.2, hardware="gpu", sig=False),
             record("K", 4, kb=True, kbs=True, eager=0.5, hardware="gpu")]
    for rec in rows:
        _with_interval(rec)
        if rec.model_config == "K" and rec.problem_id in (2, 3):
            rec.problem_name = CONV
    write_store(tmp_path / "run", rows)
    return load_evaluations([tmp_path / "run"])


def test_headline_table_counts_only_verified_speedups(frame):
    table = headline.headline_table(frame, ["K"]).set_index("model_config")
    k = table.loc["K"]
    # three point estimates above 1, one verified: 1.02 is inside the margin of the null:reference records (left out
    # of the table by ``configs`` but still measuring the margin), 1.2 is not significant
    assert (k["n"], k["n_correct"], k["verified_speedups"]) == (4, 4, 1)
    assert k["verified_speedup_median"] == pytest.approx(1.5)
    assert k["speedup_median"] == pytest.approx((1.02 + 1.2) / 2)
    assert (k["conv_n"], k["conv_solved"], k["conv_faster"]) == (2, 2, 1)
    summary = scoring.summarize(frame).set_index("model_config").loc["K"]
    assert k["fast_1"] == pytest.approx(summary["fast_1"]) == pytest.approx(1 / 4)
    assert k["verified_speedups"] == summary["n_verified_faster"]
    # the reference is never a speedup over itself, whatever its point estimate
    everyone = headline.headline_table(frame).set_index("model_config")
    assert everyone.loc["null:reference", "verified_speedups"] == 0
    assert everyone.loc["K", "verified_speedups"] == 1
    categories = headline.category_table(frame, ["K"]).set_index("category")
    assert categories["verified_speedups"].sum() == 1 and categories.loc["convolution", "verified_speedups"] == 1


def test_coverage_of_the_published_kernels(frame):
    kernels = pd.DataFrame({"level": 1, "problem_id": [1, 2, 3, 4, 7, 9], "model_config": "K",
                            "candidate_sha256": [f"K-1-{p}-0" for p in (1, 2, 3, 4, 7, 9)]})
    kernels.loc[kernels["problem_id"] == 4, "candidate_sha256"] = "edited since"  # our record is of another source
    cov = published.coverage(frame, kernels, ["K"], size_scale=0.0625).set_index(["problem_version", "precision"])
    assert list(cov.index) == [("current", "fp32"), ("current", "bf16"), ("v0", "fp32"), ("v0", "bf16")]
    current = cov.loc[("current", "fp32")]
    assert (current["published"], current["with_record"], current["missing"]) == (6, 3, 3)
    assert current["problems"] == "1-3"
    assert (cov.loc[("v0", "bf16"), "with_record"], cov.loc[("v0", "bf16"), "problems"]) == (0, "-")
    assert published.coverage(frame, kernels, ["K"])["with_record"].sum() == 0  # other size scale: none


def test_id_ranges():
    assert published.id_ranges([8, 1, 2, 3, 5, 7, 3]) == "1-3, 5, 7-8"
    assert published.id_ranges([]) == "-" and published.id_ranges([4]) == "4"


def _timed(problem_id: int, created: str, wall: float, commit: str):
    rec = record("K", problem_id, kb=True, kbs=True, eager=1.0, hardware="gpu", run="lb")
    rec.created_utc, rec.worker_wall_s, rec.git_commit = created, wall, commit
    return rec


@pytest.fixture()
def two_calls(tmp_path):
    """Call a: records at 10:00:10 and 10:01:00 (first worker 10 s); call b 150 s later: 10:03:30 and 10:04:00
    (first worker 30 s)."""
    rows = [_timed(1, "2026-01-01T10:00:10+00:00", 10.0, "a" * 40), _timed(2, "2026-01-01T10:01:00+00:00", 5.0, "a" * 40),
            _timed(3, "2026-01-01T10:03:30+00:00", 30.0, "b" * 40), _timed(4, "2026-01-01T10:04:00+00:00", 5.0, "b" * 40)]
    write_store(tmp_path / "calls", rows)
    return tmp_path / "calls"


def test_throughput_per_call(two_calls):
    frame = load_evaluations([two_calls])
    run = headline.throughput(frame).iloc[0]
    # grouped by run alone the two calls are one burst (150 s apart < 300 s): 10:00:00 to 10:04:00
    assert (run["bursts"], run["gpu_minutes"]) == (1, pytest.approx(4.0))
    calls = headline.throughput(frame, by=["run", "git_commit"]).sort_values("start_utc")
    assert list(calls["git_commit"].str[0]) == ["a", "b"]
    assert list(calls["gpu_minutes"]) == pytest.approx([60 / 60, 60 / 60])  # 10:00:00-10:01:00, 10:03:00-10:04:00
    assert list(calls["kernels_per_gpu_minute"]) == pytest.approx([2.0, 2.0])
    assert list(calls["start_utc"]) == ["2026-01-01T10:00:00+00:00", "2026-01-01T10:03:00+00:00"]
    assert list(calls["end_utc"]) == ["2026-01-01T10:01:00+00:00", "2026-01-01T10:04:00+00:00"]


def test_throughput_command_per_call(two_calls):
    from kbstudy.cli.app import app

    result = CliRunner().invoke(app, ["throughput", str(two_calls), "--per-call"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert "git_commit" in lines[0] and "start_utc" in lines[0] and len(lines) == 4
    assert " aaaaaaa " in lines[1] and " bbbbbbb " in lines[2]  # in order of their start, commits shortened
    assert lines[3] == "all rows: 4 records in 2.0 GPU-minutes of bursts, 2.0 kernels per GPU-minute"
    plain = CliRunner().invoke(app, ["throughput", str(two_calls)])
    assert plain.exit_code == 0 and len(plain.output.strip().splitlines()) == 2 and "git_commit" not in plain.output


def test_fixed_palette_keeps_a_name_s_colour_across_panels():
    both = plots.fixed_palette(["gpt-4o", "claude", "gemini", "claude"])
    assert list(both) == ["claude", "gemini", "gpt-4o"]
    assert len(set(both.values())) == 3
    # a panel without gemini still colours gpt-4o as the figure does: pass the figure's palette to every panel
    assert plots.fixed_palette(["gpt-4o", "claude"])["claude"] == both["claude"]
