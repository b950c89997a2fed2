"""``kbstudy profile fixture-from-names`` and ``coverage`` on the committed H200 records (typer's CliRunner)."""

import csv
import shutil

import pytest

pytest.importorskip("typer")
from support.committed import RECORDS, REPO, committed_records  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kbstudy.cli.profile import app  # noqa: E402

H200, H200_KERNEL_TABLES = RECORDS / "profiles" / "h200" / "eager", RECORDS / "profiles" / "h200" / "eager-kernel-tables"
SOURCES = [H200 / "kernels.jsonl", H200_KERNEL_TABLES / "kernels.jsonl"]
FIXTURE = REPO / "tests" / "profiling" / "fixtures" / "h200_kernel_names.csv"


@pytest.fixture(autouse=True)
def _h200_profile_records_committed():
    committed_records(H200, H200_KERNEL_TABLES, file="kernels.jsonl")


def test_fixture_from_names_is_idempotent_and_prunes(tmp_path):
    fixture = tmp_path / "h200.csv"
    shutil.copy(FIXTURE, fixture)
    with fixture.open("a", newline="") as fh:  # a name no record holds
        csv.writer(fh).writerow(["void gone_kernel<float>(float*)", "elementwise", "aten::add", "stale"])
    result = CliRunner().invoke(app, ["fixture-from-names", *map(str, SOURCES), "--fixture", str(fixture), "--prune"])
    assert result.exit_code == 0, result.output
    assert "appended 0 names, dropped 1" in result.output
    assert fixture.read_text() == FIXTURE.read_text()  # the committed fixture is exactly what the records hold


def test_fixture_from_names_appends_with_the_name_rule_category(tmp_path):
    fixture = tmp_path / "new.csv"
    result = CliRunner().invoke(app, ["fixture-from-names", str(SOURCES[1]), "--fixture", str(fixture)])
    assert result.exit_code == 0, result.output
    with fixture.open(newline="") as fh:
        rows = {r["name"]: r for r in csv.DictReader(fh)}
    with FIXTURE.open(newline="") as fh:
        committed = {r["name"]: r["expected_category"] for r in csv.DictReader(fh)}
    assert len(rows) == 200 and all(r["expected_category"] == committed[n] for n, r in rows.items())


def test_coverage_with_supplementary_lists_all_twelve_runs():
    result = CliRunner().invoke(app, ["coverage", str(H200),
                                      "--supplementary", str(H200_KERNEL_TABLES)])
    assert result.exit_code == 0, result.output
    assert "llama_infer@8b" in result.output and "vit_b16_infer@b16" in result.output
    assert "max other_by_name_rules 0.00000" in result.output
