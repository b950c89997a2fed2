"""The Ray driver's pure parts (kbstudy.pipeline.ray_batch) and the study file's ``ray`` key, without Ray: the order
problems are handed to lanes, the retry mark on a record, and what a study run's ``ray`` value means."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kbstudy.pipeline.ray_batch import problem_order, with_retries
from kbstudy.pipeline.study_config import StudyError, load_study
from kbstudy.records.schema import EvaluationRecord


def test_largest_problem_first_and_unsizable_ones_before_all():
    problems = [SimpleNamespace(name=n) for n in "abcd"]
    sizes = [{"input_numel": 10, "output_numel": 10, "error": None},
             {"input_numel": 1000, "output_numel": 5, "error": None},
             {"input_numel": None, "output_numel": None, "error": "meta: no kernel"},
             {"input_numel": 10, "output_numel": 10, "error": None}]
    assert [p.name for p in problem_order(problems, sizes)] == ["c", "b", "a", "d"]  # ties keep their order


def test_a_retried_record_says_so_and_keeps_every_other_field():
    fields = {f: None for f in EvaluationRecord.__dataclass_fields__}
    fields.update(key="k", run="r", level=1, problem_id=1, problem_name="p", problem_version="current",
                  problem_sha256="s", candidate_id="c", candidate_sha256="cs", model_config="m", sample_id=0,
                  backend="cuda", precision="fp32", size_scale=1.0, device="cuda", hardware="H", outcome="evaluated",
                  metadata={"stage_seconds": {"load": 1.0}})
    line = EvaluationRecord(**fields).to_json()
    row = json.loads(with_retries(line, 1))
    assert row["metadata"] == {"stage_seconds": {"load": 1.0}, "ray_retries": 1}
    assert {k: v for k, v in row.items() if k != "metadata"} == \
        {k: v for k, v in json.loads(line).items() if k != "metadata"}


@pytest.mark.parametrize("value, expected", [(None, None), (False, None), (True, ""), ("auto", "auto"),
                                             ("ray://head:10001", "ray://head:10001")])
def test_study_run_ray_key(tmp_path, value, expected):
    run = {"run": "r", "problems": str(tmp_path / "p.jsonl"), "candidates": ["null:reference"],
           "records": str(tmp_path / "rec")}
    if value is not None:
        run["ray"] = value
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps({"name": "s", "runs": [run], "notebooks": []}))
    assert load_study(path, root=tmp_path, kernelbench_dir=tmp_path).runs[0].ray == expected


def test_study_run_ray_key_refuses_other_values(tmp_path):
    run = {"run": "r", "problems": str(tmp_path / "p.jsonl"), "candidates": ["null:reference"],
           "records": str(tmp_path / "rec"), "ray": 2}
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps({"name": "s", "runs": [run], "notebooks": []}))
    with pytest.raises(StudyError, match="ray"):
        load_study(path, root=tmp_path, kernelbench_dir=tmp_path)
