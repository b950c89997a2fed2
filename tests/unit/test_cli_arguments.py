"""The options the command groups share: the run options' checks and the choice of batch evaluator."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import typer

from kbstudy.cli.arguments import CURRENT_PROBLEMS, batch_evaluator, check_run_options, problems_or_default
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.pipeline.data import KERNELBENCH_DIR_ENV
from kbstudy.pipeline.ray_batch import evaluate_batch_ray


def test_plain_evaluator_without_ray_options():
    assert batch_evaluator(False, None) is evaluate_batch


@pytest.mark.parametrize("ray, address", [(True, None), (False, "auto"), (True, "ray://head:10001")])
def test_ray_evaluator_joins_the_given_cluster(ray, address):
    chosen = batch_evaluator(ray, address)
    assert isinstance(chosen, functools.partial) and chosen.func is evaluate_batch_ray
    assert chosen.keywords["address"] == address


@pytest.mark.parametrize("precisions, scale", [(["fp8"], 1.0), (["fp32"], 0.0), (["fp32"], 1.5)])
def test_bad_run_options_exit_2(precisions, scale):
    with pytest.raises(typer.Exit) as exc:
        check_run_options(precisions, scale)
    assert exc.value.exit_code == 2


def test_good_run_options_pass():
    check_run_options(["fp32", "bf16"], 0.5)


def test_problems_default_to_the_data_folders_current_set(monkeypatch, tmp_path):
    (tmp_path / CURRENT_PROBLEMS).write_text("")
    monkeypatch.setenv(KERNELBENCH_DIR_ENV, str(tmp_path))
    assert problems_or_default(None) == tmp_path / CURRENT_PROBLEMS
    assert problems_or_default(Path("mine.jsonl")) == Path("mine.jsonl")


def test_no_data_folder_says_how_to_get_one(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(KERNELBENCH_DIR_ENV, str(tmp_path / "absent"))
    with pytest.raises(typer.Exit) as exc:
        problems_or_default(None)
    assert exc.value.exit_code == 2
    err = capsys.readouterr().err
    assert "kbstudy data fetch" in err and "--problems" in err
