"""The pinned manifest of ``kbstudy data`` against the KernelBench data folder it must rebuild byte for byte."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from kbstudy.pipeline import data

DATA_DIR = data.resolve_kernelbench_dir(required=False)
needs_data = pytest.mark.skipif(not data.holds_data(DATA_DIR), reason=f"KernelBench data not found in {DATA_DIR}")


@needs_data
def test_every_pinned_target_is_the_data_folders_file():
    files = {str(p.relative_to(DATA_DIR)): p for p in DATA_DIR.rglob("*") if p.is_file()}
    assert set(files) == {t.path for t in data.TARGETS}  # exactly the folder's files
    for target in data.TARGETS:
        body = files[target.path].read_bytes()
        assert (hashlib.sha256(body).hexdigest(), len(body)) == (target.sha256, target.size), target.path


@needs_data
def test_every_pinned_problem_file_is_a_code_field():
    def lines(name):
        return [json.loads(line) for line in (DATA_DIR / name).read_text().splitlines()]

    levels = {f"KernelBench/level{r['level']}/{r['name']}": r["code"] for r in lines("kernelbench_levels_1-3.jsonl")}
    v0 = {f"docs/assets/problems/l{r['level']}_p{r['problem_id']}.py": r["code"]
          for r in lines("kernelbench_v0_problems.jsonl")}
    for pinned, codes in ((data.INPUT_SHA256["kernelbench"], levels), (data.INPUT_SHA256["leaderboard"], v0)):
        assert pinned == {path: hashlib.sha256(code.encode()).hexdigest() for path, code in codes.items()}
    assert len(levels) == len(v0) == 250


def test_sources_are_pinned_at_full_commits():
    assert {name: s.repo for name, s in data.SOURCES.items()} == {
        "kernelbench": "ScalingIntelligence/KernelBench", "leaderboard": "anneouyang/KernelBenchLeaderboard"}
    assert all(re.fullmatch(r"[0-9a-f]{40}", s.commit) for s in data.SOURCES.values())
    assert all(re.fullmatch(r"[0-9a-f]{64}", t.sha256) for t in data.TARGETS)
    for target in data.TARGETS:  # every target but the README comes from one source
        assert (target.source is None) == (target.build == "readme") and bool(target.inputs) == bool(target.source)
    assert Path(data.README_FILE).is_file() and Path(data.INPUTS_FILE).is_file()
