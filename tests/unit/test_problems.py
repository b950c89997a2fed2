"""Problem loaders, size scaling and operator categories, on the shared KernelBench exports."""

from __future__ import annotations

import collections
import hashlib
import json
import types
from pathlib import Path

import pytest
import torch

from kbstudy.harness.problems import (
    ProblemLoadError,
    load_problems,
    make_problem,
    operator_category,
    scale_candidate_source,
    scale_source,
)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------------- JSONL


def test_levels_jsonl_counts_hashes_and_names(levels_file, all_problems):
    counts = collections.Counter(p.level for p in all_problems)
    assert counts == {1: 100, 2: 100, 3: 50}
    rows = {(r["level"], r["problem_id"]): r for r in _rows(levels_file)}
    assert len(rows) == 250
    for p in all_problems:
        row = rows[(p.level, p.problem_id)]
        assert p.source == row["code"]
        assert p.sha256 == hashlib.sha256(row["code"].encode("utf-8")).hexdigest()
        assert p.name == row["name"]
        assert p.version == "current"
    assert [p.name for p in all_problems if p.level == 1][18] == "19_ReLU.py"
    # sorted by (level, problem_id), keys unique
    assert [(p.level, p.problem_id) for p in all_problems] == sorted((p.level, p.problem_id) for p in all_problems)
    assert len({p.key for p in all_problems}) == 250


def test_filters(levels_file):
    probs = load_problems(levels_file, levels=[2], problem_ids=[1, 5, 1000])
    assert [(p.level, p.problem_id) for p in probs] == [(2, 1), (2, 5)]
    with pytest.raises(ProblemLoadError):
        load_problems(levels_file, levels=[7])  # filtered down to nothing


def test_v0_file_gets_version_v0(kernelbench_dir, all_problems):
    v0 = load_problems(kernelbench_dir / "kernelbench_v0_problems.jsonl")
    assert len(v0) == 250
    assert {p.version for p in v0} == {"v0"}
    assert collections.Counter(p.level for p in v0) == {1: 100, 2: 100, 3: 50}
    # v0 rows carry no name: every problem still gets one, unique within its level
    assert all(p.name for p in v0)
    assert len({(p.level, p.name) for p in v0}) == 250
    # the v0 set is a different (older) set of sources: same ids, other content for some of them
    current = {(p.level, p.problem_id): p.sha256 for p in all_problems}
    assert {(p.level, p.problem_id) for p in v0} == set(current)
    assert any(p.sha256 != current[(p.level, p.problem_id)] for p in v0)
    # keys keep the two sets apart in one store
    assert not {p.key for p in v0} & {p.key for p in all_problems}


def test_explicit_version_label(levels_file):
    (p,) = load_problems(levels_file, levels=[1], problem_ids=[19], version="mine")
    assert p.version == "mine" and p.key == "mine/L1/19"


def test_malformed_jsonl_line_names_the_line(levels_file, tmp_path):
    lines = levels_file.read_text().splitlines()[:2]
    bad = tmp_path / "problems.jsonl"
    bad.write_text("\n".join(lines + ['{"code": "x", "level": 1, "problem_id": ']) + "\n")
    with pytest.raises(ProblemLoadError, match=r"problems\.jsonl:3\b"):
        load_problems(bad)


def test_jsonl_row_missing_fields(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"level": 1, "problem_id": 1}) + "\n")
    with pytest.raises(ProblemLoadError, match="code"):
        load_problems(path)


def test_nonexistent_path(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_problems(tmp_path / "no_such_problems.jsonl")
    with pytest.raises(FileNotFoundError):
        load_problems(tmp_path / "no_such_folder")


def test_unknown_file_type(tmp_path):
    path = tmp_path / "problems.csv"
    path.write_text("code,level\n")
    with pytest.raises(ProblemLoadError):
        load_problems(path)


# --------------------------------------------------------------------------------------------------- folders

_PICK = [(1, 19), (1, 23), (2, 1), (3, 1)]


@pytest.fixture()
def picked(all_problems):
    index = {(p.level, p.problem_id): p for p in all_problems}
    return [index[k] for k in _PICK]


def test_kernelbench_checkout_layout(tmp_path, picked):
    for p in picked:
        folder = tmp_path / "KernelBench" / f"level{p.level}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / p.name).write_text(p.source)
    (tmp_path / "KernelBench" / "level1" / "helper_not_a_problem.py").write_text("x = 1\n")
    expected = [(p.level, p.problem_id, p.name, p.sha256) for p in picked]
    for root in (tmp_path, tmp_path / "KernelBench"):
        loaded = load_problems(root)
        assert [(p.level, p.problem_id, p.name, p.sha256) for p in loaded] == expected
        assert all(Path(p.origin).is_file() for p in loaded)
    relu = load_problems(tmp_path, levels=[1], problem_ids=[19])
    assert [p.name for p in relu] == ["19_ReLU.py"]


def test_plain_folder(tmp_path, picked):
    level1 = [p for p in picked if p.level == 1]
    for p in level1:
        (tmp_path / p.name).write_text(p.source)
    loaded = load_problems(tmp_path, level=1)
    assert [(p.level, p.problem_id, p.sha256) for p in loaded] == [(1, p.problem_id, p.sha256) for p in level1]
    with pytest.raises(ProblemLoadError, match="level"):
        load_problems(tmp_path)  # a plain folder does not say its level
    # a single file
    (single,) = load_problems(tmp_path / "19_ReLU.py", level=1)
    assert single.sha256 == level1[0].sha256


def test_empty_folder(tmp_path):
    with pytest.raises(ProblemLoadError):
        load_problems(tmp_path, level=1)


def test_py_without_get_inputs(tmp_path, problem_by_name):
    source = problem_by_name["19_ReLU.py"].source.replace("def get_inputs(", "def make_inputs(")
    folder = tmp_path / "level1"
    folder.mkdir()
    (folder / "19_ReLU.py").write_text(source)
    with pytest.raises(ProblemLoadError, match="get_inputs"):
        load_problems(folder / "19_ReLU.py")
    with pytest.raises(ProblemLoadError, match="get_inputs"):
        load_problems(tmp_path)
    with pytest.raises(ProblemLoadError, match="get_inputs"):
        make_problem(source, level=1, problem_id=19, name="19_ReLU.py")


def test_py_with_syntax_error(tmp_path):
    path = tmp_path / "level1" / "7_Broken.py"
    path.parent.mkdir()
    path.write_text("class Model(:\n")
    with pytest.raises(ProblemLoadError, match="not valid Python"):
        load_problems(path)


# --------------------------------------------------------------------------------------------------- Parquet


def test_parquet_export_loads_same_hashes(levels_file, all_problems, tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "kernelbench.parquet"
    pd.DataFrame(_rows(levels_file)).to_parquet(path, index=False)
    loaded = load_problems(path)
    assert [(p.level, p.problem_id, p.name, p.sha256) for p in loaded] == \
        [(p.level, p.problem_id, p.name, p.sha256) for p in all_problems]


# --------------------------------------------------------------------------------------------------- size scaling


def _exec(source: str) -> types.ModuleType:
    module = types.ModuleType("kbstudy_test_problem")
    exec(compile(source, "<problem>", "exec"), module.__dict__)  # noqa: S102
    return module


def _input_numel(module) -> int:
    with torch.device("meta"):
        inputs = module.get_inputs()
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def test_every_level1_problem_scales_and_runs(all_problems):
    """At 1/16 every level-1 problem still builds its Model and inputs and runs, on fewer input elements."""
    level1 = [p for p in all_problems if p.level == 1]
    assert len(level1) == 100
    failures = []
    with torch.no_grad():
        for p in level1:
            scaled = scale_source(p.source, 1 / 16)
            try:
                full_mod, small_mod = _exec(p.source), _exec(scaled)
                full_n, small_n = _input_numel(full_mod), _input_numel(small_mod)
                if not small_n < full_n:
                    failures.append(f"{p.name}: {small_n} input elements at 1/16, {full_n} at full size")
                    continue
                torch.manual_seed(0)
                model = small_mod.Model(*small_mod.get_init_inputs())
                out = model(*small_mod.get_inputs())
                if not isinstance(out, (torch.Tensor, tuple, list)):
                    failures.append(f"{p.name}: forward returned {type(out).__name__}")
            except Exception as exc:  # noqa: BLE001 - collected, reported together
                failures.append(f"{p.name}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


def test_scale_source_rewrites_sizes(problem_by_name):
    source = problem_by_name["19_ReLU.py"].source
    scaled = scale_source(source, 0.0625)
    module = _exec(scaled)
    assert (module.batch_size, module.dim) == (4096 // 16, 393216 // 16)
    assert "was 4096" in scaled  # the original value stays visible
    # hyper-parameters are left alone (kernel size, stride, ... of a convolution)
    conv = problem_by_name["50_conv_standard_2D__square_input__square_kernel.py"].source
    full, small = _exec(conv), _exec(scale_source(conv, 0.0625))
    with torch.device("meta"):
        full_model, small_model = full.Model(*full.get_init_inputs()), small.Model(*small.get_init_inputs())
    full_conv = next(m for m in full_model.modules() if isinstance(m, torch.nn.Conv2d))
    small_conv = next(m for m in small_model.modules() if isinstance(m, torch.nn.Conv2d))
    assert small_conv.kernel_size == full_conv.kernel_size
    assert small_conv.stride == full_conv.stride
    assert small_conv.padding == full_conv.padding


def test_scale_one_is_identity(all_problems):
    for p in all_problems:
        assert scale_source(p.source, 1.0) is p.source or scale_source(p.source, 1.0) == p.source


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan")])
def test_invalid_scale_raises(problem_by_name, bad):
    with pytest.raises(ValueError):
        scale_source(problem_by_name["19_ReLU.py"].source, bad)


def test_candidate_copies_of_the_problem_sizes_scale_with_it(all_problems):
    """Level-3 33_VanillaRNNHidden builds its hidden state from the module's ``batch_size``: a candidate repeating the
    problem's constants must see the scaled ones (same name and value only; its own tunables stay)."""
    rnn = next(p for p in all_problems if p.level == 3 and p.name.startswith("33_"))
    candidate = rnn.source + "\nBLOCK_SIZE = 1024\nhidden_size = 4096  # not the problem's value\n"
    scaled = _exec(scale_candidate_source(candidate, rnn.source, 1 / 64))
    problem = _exec(scale_source(rnn.source, 1 / 64))
    assert (scaled.batch_size, scaled.input_size) == (problem.batch_size, problem.input_size) == (16, 256)
    assert (scaled.BLOCK_SIZE, scaled.hidden_size) == (1024, 4096)
    assert scale_candidate_source(candidate, rnn.source, 1.0) is candidate
    assert scale_candidate_source("def broken(:\n", rnn.source, 0.5) == "def broken(:\n"  # the worker reports it
    with pytest.raises(ValueError):
        scale_candidate_source(candidate, rnn.source, 0)


# --------------------------------------------------------------------------------------------------- categories


def test_every_level1_problem_has_a_category(all_problems):
    level1 = [p for p in all_problems if p.level == 1]
    others = [p.name for p in level1 if p.category == "other"]
    assert not others
    assert operator_category("19_ReLU.py") == "activation"
    assert operator_category("1_Square_matrix_multiplication_.py") == "matmul"
    assert operator_category("87_conv_pointwise_2D.py") == "convolution"  # a 1x1 convolution, not a GEMM
    assert operator_category("something_else.py") == "other"
