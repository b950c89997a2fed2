"""Records: JSONL append/read, torn lines, non-finite values, keys, Parquet export, resume, and the schema doc."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import pytest
from support.helpers import REPO, cpu_config, torch_candidate

from kbstudy.harness.candidates import null_candidates
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.records.schema import (
    OUTCOMES,
    SCHEMA_VERSION,
    EvaluationRecord,
    ReferenceRecord,
    evaluation_key,
    reference_key,
)
from kbstudy.records.store import RecordStore, append_jsonl, iter_jsonl


def _strict_loads(line: str):
    """``json.loads`` that rejects NaN/Infinity, as JSON itself (and most non-Python readers) does."""
    def reject(token):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(line, parse_constant=reject)


def _record(i: int, **overrides) -> EvaluationRecord:
    fields = dict(key=f"k{i:03d}", run="r", level=1, problem_id=19, problem_name="19_ReLU.py",
                  problem_version="current", problem_sha256="p" * 64, category="activation",
                  candidate_id=f"m/L1/19/s{i}", candidate_sha256="c" * 64, model_config="m", sample_id=i,
                  backend="torch", precision="fp32", size_scale=0.0625, device="cpu", hardware="cpu-x",
                  timing_method="cpu_perf_counter", outcome="evaluated", kernelbench_correct=True,
                  kbstudy_correct=True, rel_l2_error=1e-7, candidate_ms_median=1.5 + i, metadata={"i": i})
    fields.update(overrides)
    return EvaluationRecord(**fields)


# ------------------------------------------------------------------------------------------------ JSONL


def test_append_and_iter_jsonl(tmp_path):
    path = tmp_path / "sub" / "rows.jsonl"
    rows = [{"a": i, "text": "line\\nwith escaped newline", "nested": {"x": [1, 2]}} for i in range(5)]
    for row in rows:
        append_jsonl(path, row)
    append_jsonl(path, json.dumps({"a": 5}))
    assert list(iter_jsonl(path)) == rows + [{"a": 5}]
    assert path.read_text().count("\n") == 6
    assert list(iter_jsonl(tmp_path / "absent.jsonl")) == []
    with pytest.raises(ValueError):
        append_jsonl(path, '{"a": 1}\n{"b": 2}')


def test_torn_last_line_is_skipped_with_a_warning(tmp_path):
    store = RecordStore(tmp_path)
    for i in range(3):
        store.append(_record(i))
    full = _record(3).to_json()
    with open(store.evaluations_path, "a") as fh:
        fh.write(full[: len(full) // 2])  # a writer killed mid-line
    with pytest.warns(UserWarning, match="torn"):
        rows = store.evaluations()
    assert [r["key"] for r in rows] == ["k000", "k001", "k002"]
    assert rows[1] == json.loads(_record(1).to_json())
    with pytest.warns(UserWarning):
        assert store.evaluation_keys() == {"k000", "k001", "k002"}


def test_append_after_a_torn_line_is_not_lost(tmp_path):
    """Resuming after a torn final line: the next record must start on a line of its own."""
    store = RecordStore(tmp_path)
    store.append(_record(0))
    torn = _record(1).to_json()
    with open(store.evaluations_path, "a") as fh:
        fh.write(torn[:40])
    store.append(_record(2))
    store.append(_record(3))
    with pytest.warns(UserWarning, match="torn"):
        keys = [r["key"] for r in store.evaluations()]
    assert keys == ["k000", "k002", "k003"]


def test_non_finite_values_become_null(tmp_path):
    record = _record(0, rel_l2_error=float("nan"), speedup_vs_eager=float("inf"),
                     candidate_ms_median=float("-inf"), metadata={"ratio": float("nan"), "ok": 1.0,
                                                                  "samples": [1.0, float("inf")]})
    line = record.to_json()
    row = _strict_loads(line)  # valid JSON: no NaN / Infinity tokens anywhere
    assert row["rel_l2_error"] is None and row["speedup_vs_eager"] is None and row["candidate_ms_median"] is None
    assert row["metadata"]["ok"] == 1.0
    assert row["metadata"]["ratio"] is None and row["metadata"]["samples"] == [1.0, None]
    ref = ReferenceRecord(key="r", run="r", level=1, problem_id=19, problem_name="19_ReLU.py",
                          problem_version="current", problem_sha256="p" * 64, precision="fp32", size_scale=1.0,
                          device="cpu", hardware="cpu-x", timing_method="cpu_perf_counter", outcome="evaluated",
                          eager_ms_std=float("nan"))
    assert _strict_loads(ref.to_json())["eager_ms_std"] is None
    store = RecordStore(tmp_path)
    store.append(record)
    store.append(ref)
    assert store.evaluations()[0]["rel_l2_error"] is None
    assert list(store.references()) == ["r"]


def test_record_lines_carry_every_field(tmp_path):
    row = json.loads(_record(0).to_json())
    assert list(row) == [f.name for f in dataclasses.fields(EvaluationRecord)]
    assert row["schema_version"] == SCHEMA_VERSION


def test_evaluation_keys_are_stable():
    settings = "trials=5;seed=42;inputs_on_device=True"
    key = evaluation_key("a" * 64, "b" * 64, "fp32", 0.0625, "NVIDIA H200", settings)
    raw = "|".join(["a" * 64, "b" * 64, "fp32", "0.0625", "NVIDIA H200", settings])
    assert key == hashlib.sha256(raw.encode()).hexdigest()[:24]
    assert re.fullmatch(r"[0-9a-f]{24}", key)
    # an int scale and a float scale are the same evaluation
    assert evaluation_key("a" * 64, "b" * 64, "fp32", 1, "h", settings) == \
        evaluation_key("a" * 64, "b" * 64, "fp32", 1.0, "h", settings)
    base = ("a" * 64, "b" * 64, "fp32", 0.0625, "NVIDIA H200", settings)
    variants = [("c" * 64, *base[1:]), (base[0], "c" * 64, *base[2:]), (*base[:2], "bf16", *base[3:]),
                (*base[:3], 0.125, *base[4:]), (*base[:4], "cpu", base[5]), (*base[:5], "trials=3")]
    assert len({evaluation_key(*v) for v in variants} | {key}) == len(variants) + 1
    assert reference_key("a" * 64, "fp32", 0.0625, "NVIDIA H200", settings) == \
        evaluation_key("a" * 64, "reference-timing", "fp32", 0.0625, "NVIDIA H200", settings)


def test_export_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    store = RecordStore(tmp_path)
    records = [_record(i, outcome=OUTCOMES[i % len(OUTCOMES)]) for i in range(12)]
    for r in records:
        store.append(r)
    store.append(ReferenceRecord(key="ref", run="r", level=1, problem_id=19, problem_name="19_ReLU.py",
                                 problem_version="current", problem_sha256="p" * 64, precision="fp32",
                                 size_scale=0.0625, device="cpu", hardware="cpu-x", timing_method="cpu_perf_counter",
                                 outcome="evaluated", eager_ms_median=2.0, output_shape=[256, 24576]))
    paths = store.export_parquet()
    assert sorted(p.name for p in paths) == ["evaluations.parquet", "references.parquet"]
    frame = pd.read_parquet(tmp_path / "evaluations.parquet")
    assert len(frame) == 12
    assert list(frame.columns) == [f.name for f in dataclasses.fields(EvaluationRecord)]
    assert list(frame["key"]) == [r.key for r in records]
    assert list(frame["outcome"]) == [r.outcome for r in records]
    assert list(frame["candidate_ms_median"]) == [r.candidate_ms_median for r in records]
    assert [json.loads(m) for m in frame["metadata"]] == [r.metadata for r in records]
    refs = pd.read_parquet(tmp_path / "references.parquet")
    assert list(refs["key"]) == ["ref"] and json.loads(refs["output_shape"][0]) == [256, 24576]


# ------------------------------------------------------------------------------------------------ resume


@pytest.fixture(scope="module")
def resumed(problem_by_name, tmp_path_factory):
    """2 problems x 2 candidates, run twice; then a superset (one more candidate per problem) after a torn line."""
    tmp = tmp_path_factory.mktemp("resume")
    problems = [problem_by_name["19_ReLU.py"], problem_by_name["21_Sigmoid.py"]]
    first = [c for p in problems for c in null_candidates(p, ["reference", "zeros"])]
    extra = [torch_candidate("return torch.relu(x)", problem_id=19, name="extra-relu"),
             torch_candidate("return torch.sigmoid(x)", problem_id=21, name="extra-sigmoid")]
    store = RecordStore(tmp / "records")
    cfg = cpu_config(size_scale=0.01, cache_dir=str(tmp / "cache"))
    runs = [evaluate_batch(problems, first, store, cfg)]
    lines_after_first = store.evaluations_path.read_text().count("\n")
    refs_after_first = store.references_path.read_text().count("\n")
    runs.append(evaluate_batch(problems, first, store, cfg))
    lines_after_second = store.evaluations_path.read_text().count("\n")
    # the interrupted writer of the superset run: a torn line, then the run resumes with a superset
    with open(store.evaluations_path, "a") as fh:
        fh.write('{"key": "torn-by-a-kill", "run": ')
    with pytest.warns(UserWarning, match="torn"):  # the resuming batch reads past the torn line, and says so
        runs.append(evaluate_batch(problems, first + extra, store, cfg))
    return {"runs": runs, "store": store, "first": first, "extra": extra, "lines_after_first": lines_after_first,
            "lines_after_second": lines_after_second, "refs_after_first": refs_after_first}


def test_second_run_writes_nothing(resumed):
    first_run, second_run, _ = resumed["runs"]
    assert first_run.written == 4 and first_run.already_done == 0
    assert second_run.written == 0 and second_run.already_done == 4
    assert resumed["lines_after_second"] == resumed["lines_after_first"] == 4


def test_superset_run_writes_only_the_new_ones(resumed):
    third = resumed["runs"][2]
    assert third.written == 2 and third.already_done == 4
    with pytest.warns(UserWarning, match="torn"):
        rows = resumed["store"].evaluations()
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == 6
    assert sorted(r["candidate_id"] for r in rows) == \
        sorted(c.candidate_id for c in resumed["first"] + resumed["extra"])
    assert {r["outcome"] for r in rows} == {"evaluated"}
    assert {r["model_config"]: r["kbstudy_correct"] for r in rows} == {
        "null:reference": True, "null:zeros": False, "extra-relu": True, "extra-sigmoid": True}


def test_references_timed_once_per_problem(resumed):
    store = resumed["store"]
    assert resumed["refs_after_first"] == 2
    assert store.references_path.read_text().count("\n") == 2
    refs = store.references()
    assert {r["problem_id"] for r in refs.values()} == {19, 21}
    with pytest.warns(UserWarning):
        rows = store.evaluations()
    assert {r["reference_key"] for r in rows} == set(refs)


# ------------------------------------------------------------------------------------------------ schema doc


def _doc_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """``{heading: [(field, type), ...]}`` from the field tables (first column ``field``) under each heading."""
    sections: dict[str, list[tuple[str, str]]] = {}
    heading, in_field_table = "", False
    for line in text.splitlines():
        if line.startswith("#"):
            heading, in_field_table = line.lstrip("#").strip().strip("`"), False
            continue
        if not line.startswith("|"):
            in_field_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].lower() == "field":
            in_field_table = True
            continue
        if in_field_table and not set(cells[0]) <= set("-: "):
            names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0])
            for name in names:
                sections.setdefault(heading, []).append((name, cells[1] if len(cells) > 1 else ""))
    return sections


@pytest.mark.parametrize("cls", [EvaluationRecord, ReferenceRecord], ids=lambda c: c.__name__)
def test_schema_doc_documents_every_field(cls):
    doc = REPO / "docs" / "reference" / "record_schema.md"
    assert doc.is_file(), "docs/reference/record_schema.md is missing"
    sections = _doc_sections(doc.read_text())
    assert cls.__name__ in sections, f"no field table under a '{cls.__name__}' heading"
    documented = dict(sections[cls.__name__])
    assert len(documented) == len(sections[cls.__name__]), "a field is documented twice"
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    assert sorted(set(fields) - set(documented)) == [], "fields missing from the doc"
    assert sorted(set(documented) - set(fields)) == [], "documented names that are not fields"
    # the type column says what the annotation says ("str | None" is written "str or None")
    wrong = {name: (documented[name], ann) for name, ann in fields.items()
             if documented[name].replace(" or ", " | ") != ann}
    assert not wrong, f"documented types differ from the annotations: {wrong}"


def test_identical_code_gets_a_record_per_candidate(problem_by_name, tmp_path):
    """Two samples of one configuration and one sample of another, all the same source: measured once, three records
    (pass@k counts both samples; the second configuration is not silently missing). A rerun writes nothing."""
    from kbstudy.harness.candidates import make_candidate

    problem = problem_by_name["19_ReLU.py"]
    source = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        return torch.relu(x)\n")
    cands = [make_candidate(source, level=1, problem_id=19, model_config=m, sample_id=s)
             for m, s in (("model-a", 0), ("model-a", 1), ("model-b", 0))]
    store = RecordStore(tmp_path / "records")
    cfg = cpu_config(size_scale=0.01, cache_dir=str(tmp_path / "cache"))
    first = evaluate_batch([problem], cands, store, cfg)
    assert first.written == 3 and first.already_done == 0
    rows = store.evaluations()
    assert sorted((r["model_config"], r["sample_id"]) for r in rows) == [("model-a", 0), ("model-a", 1), ("model-b", 0)]
    assert len({r["key"] for r in rows}) == 1 and {r["outcome"] for r in rows} == {"evaluated"}
    copies = [r for r in rows if "measurement_of" in r["metadata"]]
    assert len(copies) == 2  # one candidate ran; the other two carry its measurement and say whose
    assert {c["metadata"]["measurement_of"]["model_config"] for c in copies} == {"model-a"}
    assert len({r["candidate_ms_median"] for r in rows}) == 1
    again = evaluate_batch([problem], cands, store, cfg)
    assert again.written == 0 and again.already_done == 3


def test_skip_float32_only_records_the_reason_without_running(problem_by_name, tmp_path):
    """At bf16 with ``skip_float32_only``, a leaderboard CUDA kernel hard-coded to float is recorded as skipped for
    that reason (the scan's evidence in its message), and the flag is part of the settings key."""
    from support.helpers import LEADERBOARD_FILE, kernelbench_path

    from kbstudy.harness.candidates import load_candidates

    problem = problem_by_name["19_ReLU.py"]
    cands = [c for c in load_candidates(kernelbench_path() / LEADERBOARD_FILE, levels=[1])
             if c.problem_id == 19 and c.backend == "cuda"][:2]
    assert cands and all(c.metadata["dtype_scan"]["float32_only"] for c in cands)
    store = RecordStore(tmp_path / "records")
    cfg = cpu_config(size_scale=0.01, cache_dir=str(tmp_path / "cache"), precision="bf16", skip_float32_only=True)
    assert cfg.settings_key().endswith(";skip_float32_only")
    assert "skip_float32_only" not in cpu_config().settings_key()
    summary = evaluate_batch([problem], cands, store, cfg)
    rows = store.evaluations()
    assert summary.written == len(cands) and {r["outcome"] for r in rows} == {"skipped"}
    assert {r["metadata"]["skip_reason"] for r in rows} == {"float32_only"}
    assert all(r["error_message"].startswith("float32_only: ") and "float" in r["error_message"] for r in rows)
