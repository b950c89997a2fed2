"""``outputs/records/MANIFEST.md`` lists exactly the record folders on disk (``outputs/records/<suite>/<hardware>/<purpose>``
and ``outputs/archive/<name>``), each with a README, and every records path the params name exists."""

from __future__ import annotations

import re

from support.committed import RECORDS, REPO

from kbstudy.pipeline.study_config import load_mapping

MANIFEST = RECORDS / "MANIFEST.md"
ARCHIVE = REPO / "outputs" / "archive"


def _manifest_folders() -> list[str]:
    return re.findall(r"^\| `(outputs/[^`]+)` \|", MANIFEST.read_text(), flags=re.MULTILINE)


def _folders_on_disk() -> set[str]:
    found = {p.relative_to(REPO).as_posix() for p in RECORDS.glob("*/*/*") if p.is_dir()}
    found |= {p.relative_to(REPO).as_posix() for p in ARCHIVE.glob("*") if p.is_dir()}
    return found


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_manifest_lists_exactly_the_folders_on_disk():
    listed = _manifest_folders()
    assert len(listed) == len(set(listed)), "a folder is listed twice"
    assert set(listed) == _folders_on_disk()
    # nothing but the three-level layout and its manifest directly under outputs/records
    assert sorted(p.name for p in RECORDS.iterdir()) == ["MANIFEST.md", "dlrm_bench", "kernelbench", "profiles", "substitution"]


def test_every_record_folder_has_a_readme():
    missing = [f for f in _folders_on_disk() if not (REPO / f / "README.md").is_file()]
    assert missing == []


def test_every_params_records_path_exists():
    named = {}
    for params in sorted((REPO / "params").glob("*.yaml")) + sorted((REPO / "params" / "study").glob("*.yaml")):
        for text in _strings(load_mapping(params)):
            if text.startswith("outputs/records/"):
                named.setdefault(text, []).append(params.name)
    assert named, "no params file names a records folder"
    assert {path: files for path, files in named.items() if not (REPO / path).is_dir()} == {}
    # and each is a listed folder or lies inside one (calibration subfolders)
    listed = _manifest_folders()
    assert [p for p in named if not any(p == f or p.startswith(f + "/") for f in listed)] == []
