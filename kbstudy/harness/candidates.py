"""Candidates: sources defining ``ModelNew``, tagged with their problem, model configuration and sample id.

Candidate sets load from

* a folder in KernelBench's generation-output naming, ``level_{L}_problem_{P}_sample_{S}_kernel.py``
  (``scripts/generate_samples.py`` in KernelBench); the model configuration is the folder's name unless given;
* a JSONL file, one candidate a line: ``level``, ``problem_id``, ``code`` and optionally ``model_config``
  (or ``model``/``display_name``), ``sample_id``, ``backend``, ``metadata``;
* KernelBench's leaderboard export (``leaderboard_kernels.jsonl``): its ``problem_id`` is 0-based and is shifted to
  the problem files' 1-based ids; ``display_name`` becomes the model configuration and the published speedups are
  kept in ``metadata``.

Built-in *null candidates* (see :func:`null_candidates`; their sources are files under ``null_candidates/``) are
generated per problem. They calibrate the verdicts:

* ``reference``: the reference itself (must pass every verdict);
* ``zeros``: an all-zeros output; ``mean``: a constant equal to the reference output's mean;
* ``noise``: the reference plus noise at KernelBench's tolerance, ``out = ref + tol * u`` with ``u`` uniform in
  [-1, 1) elementwise and ``tol`` KernelBench's atol = rtol of the output's dtype (fp32 1e-4, fp16/bf16 1e-2), so
  ``|out - ref| <= atol`` everywhere and KernelBench's ``allclose`` passes by construction. Its relative L2 error is
  ``tol / (sqrt(3) RMS(ref))``: kbstudy rejects it exactly where the output's scale is below about ``tol / (sqrt(3)
  threshold)`` (fp32: RMS < 0.058, bf16: RMS < 0.29), i.e. where KernelBench's absolute tolerance is larger than
  the signal it judges, and accepts it (rightly: it is accurate) elsewhere;
* ``partial0.3``, ``partial10``, ``partial50``, ``partial90``: the reference computed in full, then only the first
  k% (``floor(n k / 100)`` elements) of the flattened output copied into a fresh ``torch.empty_like``; the rest is
  left as the allocator gave it (the paper's 283x kernel wrote 0.3% of its output);
* ``lowprec``: the reference computed one precision lower and cast back: fp32 runs in fp16, fp16 runs in bf16
  (weights and inputs cast, the model run in that dtype; where an op has no kernel for it, the inputs, weights and
  output are rounded to it around a computation at the run's dtype instead); bf16 runs, having no lower torch
  compute dtype that every op supports, round inputs, weights and output to 3 mantissa bits (fp8 e4m3's precision,
  bf16's exponent range). Note: at fp32 kbstudy's threshold (1e-3) admits TF32 (unit roundoff 2^-11), which is
  fp16's unit roundoff too, so fp32 ``lowprec`` on an elementwise problem is expected to pass kbstudy's check; the
  calibration reports it rather than assumes it fails;
* ``compile``: the reference under ``torch.compile`` (Inductor, default mode): an honest implementation whose error
  shows the spread a verdict must admit (must pass, like ``reference``).

:data:`CALIBRATION_NULLS` are the ones the calibration (``kbstudy calibrate``) runs beside ``reference`` by default;
``compile`` (:data:`HONEST_EXTRA_NULLS`) runs on request.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path
from typing import Iterable

from kbstudy.harness.problems import Problem, sha256_text
from kbstudy.verdict.static_scan import DTYPE_SCAN_KEY, detect_backend, scan_dtype_support

BACKENDS = ("torch", "triton", "cuda")
_SAMPLE_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
#: Fields of the leaderboard export that mark it (its problem ids are 0-based).
_LEADERBOARD_FIELDS = {"display_name", "torch_speedup", "kernel_time_ms"}


class CandidateLoadError(ValueError):
    """A path or file that does not hold a candidate set (message says which line or file and why)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate kernel: the ``ModelNew`` source for problem (``level``, ``problem_id``)."""

    level: int
    problem_id: int
    source: str
    sha256: str
    backend: str
    model_config: str
    sample_id: int = 0
    origin: str = ""
    metadata: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)

    @property
    def candidate_id(self) -> str:
        return f"{self.model_config}/L{self.level}/{self.problem_id}/s{self.sample_id}"


def make_candidate(source: str, *, level: int, problem_id: int, model_config: str, sample_id: int = 0,
                   backend: str | None = None, origin: str = "", metadata: dict | None = None) -> Candidate:
    """Build a :class:`Candidate`; the backend is detected from the source unless given. A CUDA candidate's
    metadata gets ``dtype_scan`` (``kbstudy.verdict.static_scan.scan_dtype_support``), which every record of it then
    carries.

    Raises :class:`CandidateLoadError` for an unknown backend name.
    """
    backend = backend or detect_backend(source)
    if backend not in BACKENDS:
        raise CandidateLoadError(f"{origin or model_config}: unknown backend {backend!r} (expected one of {BACKENDS})")
    metadata = dict(metadata or {})
    if backend == "cuda":
        metadata.setdefault(DTYPE_SCAN_KEY, scan_dtype_support(source).as_metadata())
    return Candidate(level=int(level), problem_id=int(problem_id), source=source, sha256=sha256_text(source),
                     backend=backend, model_config=str(model_config), sample_id=int(sample_id), origin=origin,
                     metadata=metadata)


def _from_row(row: dict, where: str, model_config: str | None, leaderboard: bool) -> Candidate:
    missing = {"level", "problem_id", "code"} - set(row)
    if missing:
        raise CandidateLoadError(f"{where}: lacks {sorted(missing)} (need level, problem_id, code)")
    config = model_config or row.get("model_config") or row.get("display_name") or row.get("model")
    if not config:
        raise CandidateLoadError(f"{where}: no model configuration (model_config, display_name or model)")
    problem_id = int(row["problem_id"]) + (1 if leaderboard else 0)
    metadata = dict(row.get("metadata") or {})
    if leaderboard:
        metadata.update({k: row[k] for k in ("model", "file", "torch_speedup", "torch_compile_speedup",
                                             "baseline_torch_time_ms", "baseline_torch_compile_time_ms",
                                             "kernel_time_ms") if k in row})
    return make_candidate(row["code"], level=row["level"], problem_id=problem_id, model_config=config,
                          sample_id=row.get("sample_id", 0), backend=row.get("backend"), origin=where,
                          metadata=metadata)


def load_candidates(path: str | Path, *, model_config: str | None = None, levels: Iterable[int] | None = None,
                    model_configs: Iterable[str] | None = None) -> list[Candidate]:
    """Load a candidate set from a folder or a JSONL file (see the module docstring).

    Args:
        path: the folder or ``.jsonl`` file.
        model_config: force this configuration name on every candidate (default: from the file or folder name).
        levels: keep only these levels.
        model_configs: keep only these configurations.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CandidateLoadError: no candidates, or a malformed line or file.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"candidate source not found: {path}")
    candidates: list[Candidate] = []
    if path.is_dir():
        config = model_config or path.name
        for file in sorted(path.rglob("*.py")):
            m = _SAMPLE_RE.match(file.name)
            if not m:
                continue
            level, problem_id, sample_id = map(int, m.groups())
            sub_config = model_config or (file.parent.name if file.parent != path else config)
            candidates.append(make_candidate(file.read_text(), level=level, problem_id=problem_id,
                                             model_config=sub_config, sample_id=sample_id, origin=str(file)))
        if not candidates:
            raise CandidateLoadError(f"{path}: no files named level_{{L}}_problem_{{P}}_sample_{{S}}_kernel.py")
    elif path.suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise CandidateLoadError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from exc
        leaderboard = bool(rows) and _LEADERBOARD_FIELDS <= set(rows[0][1])
        candidates = [_from_row(row, f"{path}:{lineno}", model_config, leaderboard) for lineno, row in rows]
        if not candidates:
            raise CandidateLoadError(f"{path}: empty candidate file")
    else:
        raise CandidateLoadError(f"{path}: expected a folder or a .jsonl file")
    if levels is not None:
        keep = set(levels)
        candidates = [c for c in candidates if c.level in keep]
    if model_configs is not None:
        keep_cfg = set(model_configs)
        candidates = [c for c in candidates if c.model_config in keep_cfg]
    return candidates


def write_candidates_jsonl(candidates: Iterable[Candidate], path: str | Path) -> Path:
    """Write candidates as JSONL in the format :func:`load_candidates` reads; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for c in candidates:
            fh.write(json.dumps({"level": c.level, "problem_id": c.problem_id, "code": c.source,
                                 "model_config": c.model_config, "sample_id": c.sample_id, "backend": c.backend,
                                 "metadata": c.metadata}) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ null candidates

#: The null candidates' sources: Python fragments (``<kind>.py``) appended to a problem's source, which defines ``Model``
#: and imports ``torch``; each defines a ``ModelNew(Model)``, none a plausible kernel: they exist to test the verdicts.
#: ``helpers.py`` is prepended to the kinds added for the calibration, ``partial.py`` holds ``{k}`` for the percentage,
#: and ``<kind>_sequence.py`` are ``zeros`` and ``mean`` for a problem whose ``forward`` returns a tuple or list
#: (``_returns_sequence``), separate so that the single-output sources keep their bytes and record keys.
NULL_SOURCES = Path(__file__).parent / "null_candidates"


def _returns_sequence(source: str) -> bool:
    """Does the ``forward`` of the source's ``Model`` class return a literal tuple or list (``return a, b``)? Static
    (``ast``); a source that does not parse, or returns a sequence through a name, counts as a single output."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    return any(isinstance(r, ast.Return) and isinstance(r.value, (ast.Tuple, ast.List))
                               for r in ast.walk(fn))
    return False


#: Every null candidate kind, in a fixed order (``null:all`` on the command line).
NULL_CANDIDATES = ("reference", "zeros", "mean", "noise", "partial0.3", "partial10", "partial50", "partial90", "lowprec",
                   "compile")
#: The null candidates of the calibration (``kbstudy calibrate``), run beside ``null:reference``.
CALIBRATION_NULLS = ("zeros", "mean", "noise", "partial0.3", "partial10", "partial50", "partial90", "lowprec")
#: Honest implementations besides the reference itself: run on request (``kbstudy calibrate --nulls compile``), since
#: an Inductor compile costs seconds per problem where the other nulls cost milliseconds.
HONEST_EXTRA_NULLS = ("compile",)
_FIRST_NULLS = ("reference", "zeros", "mean")  # kept byte-identical: their sources (and record keys) predate helpers
_SEQUENCE_NULLS = ("zeros", "mean")  # kinds with a form of their own for a problem returning several outputs


def _null_fragment(name: str) -> str:
    """The source fragment ``NULL_SOURCES/<name>.py``, as appended (after a blank line)."""
    return "\n\n" + (NULL_SOURCES / f"{name}.py").read_text(encoding="utf-8")


def _null_source(kind: str, problem_source: str) -> str:
    """The ``ModelNew`` fragment of null kind ``kind`` for a problem with source ``problem_source``."""
    if kind.startswith("partial"):
        fragment = _null_fragment("partial").replace("{k}", kind[len("partial"):])
    elif kind in _SEQUENCE_NULLS and _returns_sequence(problem_source):
        return _null_fragment("helpers") + _null_fragment(f"{kind}_sequence")  # e.g. DLRM-Bench 5's (rows, new_weight)
    else:
        fragment = _null_fragment(kind)
    return fragment if kind in _FIRST_NULLS else _null_fragment("helpers") + fragment


def null_candidates(problem: Problem, kinds: Iterable[str] = NULL_CANDIDATES) -> list[Candidate]:
    """The null candidates of one problem, each with model configuration ``null:<kind>`` and backend ``torch``.

    Args:
        problem: the problem; each candidate's source is the problem's source followed by a ``ModelNew(Model)``.
        kinds: kinds from :data:`NULL_CANDIDATES` (the module docstring says what each outputs).
    Raises ``KeyError`` for an unknown kind.
    """
    out = []
    for kind in kinds:
        if kind not in NULL_CANDIDATES:
            raise KeyError(f"unknown null candidate {kind!r}; choose from {sorted(NULL_CANDIDATES)} (or null:all)")
        source = problem.source.rstrip() + "\n" + _null_source(kind, problem.source)
        out.append(make_candidate(source, level=problem.level, problem_id=problem.problem_id,
                                  model_config=f"null:{kind}", backend="torch", origin=f"kbstudy:null:{kind}"))
    return out
