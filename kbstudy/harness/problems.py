"""KernelBench-format problems: loading, hashing, operator categories and size scaling.

A *problem* is a Python source that defines ``Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``
(KernelBench's format, ``KernelBench/level{N}/{id}_{Name}.py``). Sources load from

* a KernelBench checkout (the folder holding ``KernelBench/level1`` ..., or ``KernelBench`` itself),
* any folder of such files (level taken from a ``level{N}`` folder name, else the ``level`` argument),
* the dataset's JSONL or Parquet export with columns ``code, level, name, problem_id``
  (``../shared/kernelbench/kernelbench_levels_1-3.jsonl``), or the v0 export with ``code, level, problem_id``
  (named from the current export beside it, except the v0 problems that v0.1 replaced: :data:`V0_NAMES`).

Every problem carries the SHA-256 of its source, so results are matched by content, not only by name.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable

_FILE_RE = re.compile(r"^(\d+)_(.+)\.py$")


class ProblemLoadError(ValueError):
    """A path or file that does not hold KernelBench-format problems (message says which and why)."""


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of a source text, UTF-8 encoded."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Problem:
    """One KernelBench-format problem.

    ``version`` names the problem set it came from (``"current"`` for KernelBench at HEAD, ``"v0"`` for the original
    late-2024 set, ``"dlrm"`` for DLRM-Bench); ``origin`` is the file it was read from.
    """

    level: int
    problem_id: int
    name: str
    source: str
    sha256: str
    version: str = "current"
    origin: str = ""

    @property
    def key(self) -> str:
        return f"{self.version}/L{self.level}/{self.problem_id}"

    @property
    def category(self) -> str:
        """The operator category (see :func:`operator_category`)."""
        return operator_category(self.name)


def _check_source(source: str, where: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProblemLoadError(f"{where}: not valid Python ({exc.msg}, line {exc.lineno})") from exc
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = {"Model", "get_inputs", "get_init_inputs"} - defined
    if missing:
        raise ProblemLoadError(f"{where}: not a KernelBench problem, missing {sorted(missing)}")


def make_problem(source: str, *, level: int, problem_id: int, name: str, version: str = "current",
                 origin: str = "") -> Problem:
    """Build a :class:`Problem` from a source text, checking that it defines ``Model``, ``get_inputs`` and
    ``get_init_inputs``. Raises :class:`ProblemLoadError` otherwise."""
    _check_source(source, origin or name)
    return Problem(level=int(level), problem_id=int(problem_id), name=name, source=source, sha256=sha256_text(source),
                   version=version, origin=origin)


def _from_rows(rows: Iterable[dict], where: str, version: str,
               names: dict[tuple[int, int], str] | None = None) -> list[Problem]:
    problems = []
    for i, row in enumerate(rows):
        missing = {"code", "level", "problem_id"} - set(row)
        if missing:
            raise ProblemLoadError(f"{where}: row {i} lacks {sorted(missing)} (need code, level, problem_id[, name])")
        name = (row.get("name") or (names or {}).get((int(row["level"]), int(row["problem_id"])))
                or _name_from_code(row["code"], int(row["problem_id"])))
        problems.append(make_problem(row["code"], level=row["level"], problem_id=row["problem_id"], name=name,
                                     version=version, origin=f"{where}#{i}"))
    return problems


def _name_from_code(code: str, problem_id: int) -> str:
    """Fallback name of a row without one: ``{id}_problem.py``."""
    return f"{problem_id}_problem.py"


#: File names of the original (v0) problems that KernelBench v0.1 replaced or renamed under the same id: the v0
#: export carries no names and the current export names the *new* problem, so these are kept here. Source:
#: KernelBench issue #62 ("More changes in v0.1 than mentioned in the changelog?", 2025), which lists the v0 names
#: that disappeared; each was checked against the v0 source's ``Model`` (e.g. v0 level-1 50 computes
#: ``torch.prod(x, dim)``, current 50 is a 2D convolution; v0 97 is a cosine-similarity loss, current 97 is SDPA).
V0_NAMES: dict[tuple[int, int], str] = {
    (1, 50): "50_Product_reduction_over_a_dimension.py",
    (1, 97): "97_CosineSimilarityLoss.py",
    (2, 27): "27_Conv3d_HardSwish_ReLU_Softmax_Mean.py",
    (2, 41): "41_Gemm_BatchNorm_GELU_GroupNorm_Mean_ReLU.py",
    (2, 45): "45_Gemm_Sigmoid_Sum_LogSumExp.py",
    (2, 58): "58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp_Max.py",
    (2, 66): "66_Matmul_Dropout_Mean_Softmax.py",
    (3, 35): "35_LTSM.py",
    (3, 36): "36_LTSMHn.py",
    (3, 37): "37_LTSMCn.py",
    (3, 38): "38_LTSMBidirectional.py",
    (3, 41): "41_GRUBirectional.py",
}


def _sibling_names(path: Path) -> dict[tuple[int, int], str]:
    """File names by (level, problem_id) from a JSONL beside ``path`` whose rows have names (the v0 export has none;
    its problems keep their ids, so the current export beside it names them)."""
    names: dict[tuple[int, int], str] = {}
    for sibling in sorted(path.parent.glob("*.jsonl")):
        if sibling == path:
            continue
        try:
            with sibling.open() as fh:
                for line in fh:
                    row = json.loads(line)
                    if {"name", "level", "problem_id", "code"} <= set(row):
                        names[(int(row["level"]), int(row["problem_id"]))] = row["name"]
                    else:
                        break
        except (OSError, json.JSONDecodeError):
            continue
    return names


def _load_folder(folder: Path, level: int | None, version: str) -> list[Problem]:
    problems = []
    for path in sorted(folder.glob("*.py")):
        m = _FILE_RE.match(path.name)
        if not m:
            continue
        lvl = level
        lm = re.match(r"level_?(\d+)$", path.parent.name)
        if lm:
            lvl = int(lm.group(1))
        if lvl is None:
            raise ProblemLoadError(f"{path}: cannot tell its level (folder is not level{{N}}); pass level=")
        problems.append(make_problem(path.read_text(), level=lvl, problem_id=int(m.group(1)), name=path.name,
                                     version=version, origin=str(path)))
    return problems


def load_problems(path: str | Path, *, levels: Iterable[int] | None = None,
                  problem_ids: Iterable[int] | None = None, version: str | None = None,
                  level: int | None = None) -> list[Problem]:
    """Load problems from a KernelBench checkout, a folder, or a JSONL/Parquet export (see the module docstring).

    Args:
        path: the checkout, folder or file.
        levels: keep only these levels (``None``: all).
        problem_ids: keep only these problem ids (``None``: all).
        version: the problem-set label; default ``"v0"`` for a file named ``*v0*``, else ``"current"``.
        level: the level of a plain folder whose name is not ``level{N}``.

    Returns the problems sorted by (level, problem_id).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ProblemLoadError: the path holds no problems, or a file/row is malformed.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"problem source not found: {path}")
    if version is None:
        version = "v0" if "v0" in path.name else "current"
    if path.is_file():
        if path.suffix == ".jsonl":
            rows = []
            for lineno, line in enumerate(path.read_text().splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ProblemLoadError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from exc
            names = _sibling_names(path) if rows and "name" not in rows[0] else None
            if names is not None and version == "v0":
                names.update(V0_NAMES)  # the sibling names the problem that replaced these v0 problems
            problems = _from_rows(rows, str(path), version, names)
        elif path.suffix == ".parquet":
            import pandas as pd  # only for Parquet sources; JSONL and folders need no pandas

            problems = _from_rows(pd.read_parquet(path).to_dict("records"), str(path), version)
        elif path.suffix == ".py":
            problems = _load_folder_file(path, level, version)
        else:
            raise ProblemLoadError(f"{path}: expected a folder, .jsonl, .parquet or .py file")
    else:
        roots = [path / "KernelBench", path] if (path / "KernelBench").is_dir() else [path]
        level_dirs = sorted(d for r in roots for d in r.glob("level*") if d.is_dir())
        if level_dirs:
            problems = [p for d in level_dirs for p in _load_folder(d, None, version)]
        else:
            problems = _load_folder(path, level, version)
    if levels is not None:
        keep = set(levels)
        problems = [p for p in problems if p.level in keep]
    if problem_ids is not None:
        keep_ids = set(problem_ids)
        problems = [p for p in problems if p.problem_id in keep_ids]
    if not problems:
        raise ProblemLoadError(f"{path}: no KernelBench-format problems found (after filtering)")
    return sorted(problems, key=lambda p: (p.level, p.problem_id))


def _load_folder_file(path: Path, level: int | None, version: str) -> list[Problem]:
    m = _FILE_RE.match(path.name)
    if not m:
        raise ProblemLoadError(f"{path}: a problem file is named {{id}}_{{Name}}.py")
    lm = re.match(r"level_?(\d+)$", path.parent.name)
    lvl = int(lm.group(1)) if lm else level
    if lvl is None:
        raise ProblemLoadError(f"{path}: cannot tell its level; pass level=")
    return [make_problem(path.read_text(), level=lvl, problem_id=int(m.group(1)), name=path.name, version=version,
                         origin=str(path))]


# ------------------------------------------------------------------------------------------------- size scaling

#: Module-level names that are never scaled: they are hyper-parameters of the operator, not sizes.
#: (``dim`` is scaled only when it is a size: a small value such as ``dim = 1`` is an axis and stays.)
_UNSCALED = re.compile(
    r"^(kernel.*|stride.*|padding.*|dilation.*|groups|num_groups|output_padding|return_indices|reduce_dim|"
    r"num_heads|margin|eps|alpha|beta|.*_p|p|ceil_mode|count_include_pad)$"
)
#: Integers below this are structural (axes, kernel sizes, head counts) and are left alone.
SCALE_THRESHOLD = 32
#: A scaled size never drops below this, nor below the original value if that was smaller.
SCALE_FLOOR = 16


def _scale_int(value: int, size_scale: float) -> int:
    if value < SCALE_THRESHOLD:
        return value
    scaled = value * size_scale
    # keep the power-of-two factor (up to 16) so channel counts stay divisible by group counts
    quantum = math.gcd(value, 16)
    scaled = max(SCALE_FLOOR, int(round(scaled / quantum)) * quantum)
    return min(value, scaled)


def _literal_value(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    # simple constant arithmetic such as ``2048 * 2`` or ``16 * 1024``
    if isinstance(node, ast.BinOp) and not any(isinstance(n, ast.Name) for n in ast.walk(node)):
        try:
            return eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}})  # noqa: S307
        except Exception:
            return None
    return None


def size_constants(source: str) -> list[tuple[int, int, str, Any, str]]:
    """The problem's editable size constants: ``(lineno, col_offset, name, value, original text)`` per top-level
    single-line ``name = <constant>`` whose value is an int (a constant product such as ``2048 * 2`` counts) or a
    tuple of ints and whose name is not an operator hyper-parameter (:data:`_UNSCALED`). The one reading of a
    problem's sizes: :func:`scale_source` and the shape variants (``kbstudy.harness.variant_inputs``) both edit
    these."""
    tree = ast.parse(source)
    found = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if _UNSCALED.match(name) or node.lineno != node.end_lineno:
            continue  # multi-line constants: left untouched rather than risk a broken rewrite
        value = _literal_value(node.value)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int) or (isinstance(value, tuple) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value)):
            found.append((node.lineno, node.col_offset, name, value, ast.get_source_segment(source, node.value)))
    return found


def map_sizes(value, fn):
    """``fn`` applied to an int, or to each int of a tuple."""
    return tuple(fn(v) for v in value) if isinstance(value, tuple) else fn(value)


def _size_edits(source: str, size_scale: float) -> list[tuple[int, int, str, Any, Any, str]]:
    """The rewrites of :func:`scale_source`: ``(lineno, col_offset, name, value, new value, original text)`` per
    top-level size constant it scales."""
    edits = []
    for lineno, col, name, value, text in size_constants(source):
        new = map_sizes(value, lambda v: _scale_int(v, size_scale))
        if new != value:
            edits.append((lineno, col, name, value, new, text))
    return edits


def _apply_edits(source: str, edits, note: float | str) -> str:
    lines = source.splitlines(keepends=True)
    label = note if isinstance(note, str) else f"size_scale={note}"
    for lineno, col, name, _, new, original in edits:
        old = lines[lineno - 1]
        newline = "\n" if old.endswith("\n") else ""
        lines[lineno - 1] = old[:col] + f"{name} = {new!r}  # kbstudy {label}: was {original}" + newline
    return "".join(lines)


def edit_sizes(source: str, edits: dict[str, Any], note: str = "variant") -> str:
    """``source`` with the size constants named in ``edits`` (as :func:`size_constants` finds them) set to their new
    values (``{name: int or tuple}``); other names are ignored. Each rewritten line keeps its old value in a comment
    that says ``note``."""
    rewrites = [(lineno, col, name, value, edits[name], text) for lineno, col, name, value, text
                in size_constants(source) if name in edits and edits[name] != value]
    return _apply_edits(source, rewrites, note)


def edit_candidate_sizes(candidate_source: str, problem_source: str, edits: dict[str, Any],
                         note: str = "variant") -> str:
    """A candidate's source with its own copies of the problem's size constants edited as ``edits`` edits the
    problem's: only a top-level constant with the *same name and the same value* as in ``problem_source`` changes
    (``BLOCK_SIZE = 1024`` or a CUDA source string stays as written). A candidate that does not parse is returned
    unchanged (the worker reports the syntax error itself)."""
    try:
        values = {name: value for _, _, name, value, _ in size_constants(problem_source)}
        mine = {name: value for _, _, name, value, _ in size_constants(candidate_source)}
    except SyntaxError:
        return candidate_source
    keep = {name: new for name, new in edits.items() if name in values and mine.get(name) == values[name]}
    return edit_sizes(candidate_source, keep, note) if keep else candidate_source


def scale_source(source: str, size_scale: float) -> str:
    """Shrink a KernelBench problem's sizes by ``size_scale`` (0 < size_scale <= 1) by rewriting its module-level
    integer constants.

    Rule: a top-level ``name = <constant>`` (an int, a constant product such as ``2048 * 2``, or a tuple of ints) whose
    name is not an operator hyper-parameter (kernel size, stride, padding, dilation, groups, ...) has every integer
    ``>= 32`` multiplied by ``size_scale``, rounded to keep its power-of-two factor up to 16 and floored at 16.
    Assignments computed from other names (``dim2 = N * 2``) are left as written and shrink through their inputs.
    Each rewritten line keeps its original value in a trailing comment. ``size_scale == 1`` returns ``source``
    unchanged.

    Raises ``ValueError`` for a scale outside (0, 1].
    """
    if not 0 < size_scale <= 1:
        raise ValueError(f"size_scale must be in (0, 1], got {size_scale}")
    if size_scale == 1:
        return source
    return _apply_edits(source, _size_edits(source, size_scale), size_scale)


def scale_candidate_source(candidate_source: str, problem_source: str, size_scale: float) -> str:
    """A candidate's source for the problem scaled by :func:`scale_source`: the candidate's own copies of the problem's
    size constants are scaled the same way, so a ``ModelNew`` that reads ``batch_size`` or ``hidden_size`` from its
    module (as candidates that repeat the problem's code do, and every null candidate) sees the sizes the reference
    process uses. Only a top-level assignment with the *same name and the same value* as a constant the problem's
    scaling rewrites is changed; any other constant of the candidate (``BLOCK_SIZE = 1024``, a CUDA source string) is
    left as written. ``size_scale == 1``, or a candidate that does not parse, returns ``candidate_source`` unchanged
    (the worker then reports the syntax error itself).

    Raises ``ValueError`` for a scale outside (0, 1].
    """
    if not 0 < size_scale <= 1:
        raise ValueError(f"size_scale must be in (0, 1], got {size_scale}")
    if size_scale == 1:
        return candidate_source
    try:
        scaled = {(name, repr(value)): new for _, _, name, value, new, _ in _size_edits(problem_source, size_scale)}
        edits = [e for e in _size_edits(candidate_source, size_scale)
                 if scaled.get((e[2], repr(e[3]))) == e[4]]
    except SyntaxError:
        return candidate_source
    return _apply_edits(candidate_source, edits, size_scale)


# --------------------------------------------------------------------------------------------- operator categories

#: Ordered (first match wins) rules from a level-1 problem's file name to its operator category, as used in the
#: paper's per-category table. Convolutions before matmul: "conv_pointwise" is a 1x1 convolution, not a GEMM problem.
CATEGORY_RULES: tuple[tuple[str, str], ...] = (
    ("convolution", r"conv"),
    ("matmul", r"matmul|matrix_multiplication|gemm|matrix_vector|matrix_scalar"),
    ("attention", r"attention"),
    ("normalization", r"norm"),
    ("pooling", r"pool"),
    ("loss", r"loss"),
    ("activation", r"relu|sigmoid|tanh|swish|gelu|selu|softplus|softsign|elu|hardtanh|softmax|logsoftmax"),
    ("reduction", r"reduction|argmax|argmin|cumsum|cumprod|min_|max_|sum_|mean_"),
)


#: The operator categories of the paper's per-category table, in its order. :func:`operator_category` also knows
#: ``attention`` (one level-1 problem, 97_ScaledDotProductAttention); :func:`paper_category` reports it as ``other``.
PAPER_CATEGORIES: tuple[str, ...] = ("matmul", "convolution", "activation", "normalization", "pooling", "reduction",
                                     "loss", "other")


def operator_category(name: str) -> str:
    """The operator category of a problem from its file name: matmul, convolution, activation, normalization,
    pooling, reduction, loss, attention or other (first matching rule of :data:`CATEGORY_RULES`)."""
    lowered = name.lower()
    for category, pattern in CATEGORY_RULES:
        if re.search(pattern, lowered):
            return category
    return "other"


def paper_category(name_or_category: str) -> str:
    """The paper's table category (one of :data:`PAPER_CATEGORIES`) of a problem file name or of a category that
    :func:`operator_category` returned: its category where the paper has that row, else ``other`` (``attention``,
    ``dlrm``, unknown names)."""
    category = name_or_category if name_or_category in (*PAPER_CATEGORIES, "attention", "dlrm") \
        else operator_category(name_or_category)
    return category if category in PAPER_CATEGORIES else "other"


# ------------------------------------------------------------------------------------------ version differences

#: How a problem changed between two versions (:func:`version_changes`), from least to most:
#: ``identical`` (same source), ``sizes_or_inputs`` (same ``Model`` class; module-level sizes or ``get_inputs`` /
#: ``get_init_inputs`` changed, e.g. v0.1's larger sizes and ``torch.rand`` inputs), ``reference_changed`` (same
#: name, the ``Model`` class changed: the reference computes something else or computes it differently),
#: ``replaced`` (another problem under the same id: the names differ).
VERSION_CHANGES: tuple[str, ...] = ("identical", "sizes_or_inputs", "reference_changed", "replaced")


@dataclasses.dataclass(frozen=True)
class VersionChange:
    """How one problem (``level``, ``problem_id``) differs between an old and a new version (see
    :data:`VERSION_CHANGES`)."""

    level: int
    problem_id: int
    old_name: str
    new_name: str
    old_sha256: str
    new_sha256: str
    change: str


def _model_class_dump(source: str) -> str | None:
    """The AST of the source's ``Model`` class without docstrings (comments and formatting never reach the AST), or
    ``None`` if there is none."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for sub in ast.walk(node):
                body = getattr(sub, "body", None)
                if (isinstance(sub, (ast.ClassDef, ast.FunctionDef)) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                    sub.body = body[1:] or [ast.Pass()]
            return ast.dump(node)
    return None


def classify_version_change(old: Problem, new: Problem) -> str:
    """One of :data:`VERSION_CHANGES` for two versions of the same (level, problem_id)."""
    if old.sha256 == new.sha256:
        return "identical"
    if old.name != new.name:
        return "replaced"
    if _model_class_dump(old.source) != _model_class_dump(new.source):
        return "reference_changed"
    return "sizes_or_inputs"


def version_changes(old: Iterable[Problem], new: Iterable[Problem]) -> list[VersionChange]:
    """Per (level, problem_id) present in both sets, how the problem changed from ``old`` (e.g. the v0 problems) to
    ``new`` (the current ones), sorted by (level, problem_id). On KernelBench level 1, v0 -> current: 95
    ``sizes_or_inputs``, 3 ``reference_changed`` (12: ``diag(A) @ B`` became ``A.unsqueeze(1) * B``; 38: L1 norm by
    the sum became by the mean; 92: the exclusive cumsum was fixed), 2 ``replaced`` (50, 97)."""
    by_key = {(p.level, p.problem_id): p for p in old}
    out = []
    for p in sorted(new, key=lambda q: (q.level, q.problem_id)):
        o = by_key.get((p.level, p.problem_id))
        if o is None:
            continue
        out.append(VersionChange(level=p.level, problem_id=p.problem_id, old_name=o.name, new_name=p.name,
                                 old_sha256=o.sha256, new_sha256=p.sha256, change=classify_version_change(o, p)))
    return out
