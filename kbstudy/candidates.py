"""Candidates: sources defining ``ModelNew``, tagged with their problem, model configuration and sample id.

Candidate sets load from

* a folder in KernelBench's generation-output naming, ``level_{L}_problem_{P}_sample_{S}_kernel.py``
  (``scripts/generate_samples.py`` in KernelBench); the model configuration is the folder's name unless given;
* a JSONL file, one candidate a line: ``level``, ``problem_id``, ``code`` and optionally ``model_config``
  (or ``model``/``display_name``), ``sample_id``, ``backend``, ``metadata``;
* KernelBench's leaderboard export (``leaderboard_kernels.jsonl``): its ``problem_id`` is 0-based and is shifted to
  the problem files' 1-based ids; ``display_name`` becomes the model configuration and the published speedups are
  kept in ``metadata``.

Built-in *null candidates* (see :func:`null_candidates`) are generated per problem: the reference itself, an all-zeros
output, and a constant equal to the reference's mean. They calibrate the verdicts: only the first may pass.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Iterable

from kbstudy.problems import Problem, sha256_text

BACKENDS = ("torch", "triton", "cuda")
_SAMPLE_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
#: Fields of the leaderboard export that mark it (its problem ids are 0-based).
_LEADERBOARD_FIELDS = {"display_name", "torch_speedup", "kernel_time_ms"}


class CandidateLoadError(ValueError):
    """A path or file that does not hold a candidate set (message says which line or file and why)."""


def detect_backend(source: str) -> str:
    """``"cuda"`` for CUDA C++ through ``torch.utils.cpp_extension`` (``load_inline``/``load``), ``"triton"`` for
    ``@triton.jit`` kernels, else ``"torch"`` (plain PyTorch). CUDA wins when both appear, since it needs nvcc."""
    if re.search(r"\bload_inline\b|cpp_extension\.load\b|__global__", source):
        return "cuda"
    if re.search(r"@triton\.(jit|autotune)|import triton", source):
        return "triton"
    return "torch"


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
    """Build a :class:`Candidate`; the backend is detected from the source unless given.

    Raises :class:`CandidateLoadError` for an unknown backend name.
    """
    backend = backend or detect_backend(source)
    if backend not in BACKENDS:
        raise CandidateLoadError(f"{origin or model_config}: unknown backend {backend!r} (expected one of {BACKENDS})")
    return Candidate(level=int(level), problem_id=int(problem_id), source=source, sha256=sha256_text(source),
                     backend=backend, model_config=str(model_config), sample_id=int(sample_id), origin=origin,
                     metadata=dict(metadata or {}))


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

#: Source templates of the null candidates. Each subclasses the problem's ``Model`` (the problem source is prepended),
#: so it needs nothing but the problem; none is a plausible kernel: they exist to test the verdicts.
_NULL_TEMPLATES = {
    "reference": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: the reference itself (must pass every verdict).\"\"\"
""",
    "zeros": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: an all-zeros output of the right shape and dtype (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        return torch.zeros_like(super().forward(*args, **kwargs))
""",
    "mean": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: a constant equal to the reference output's mean (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        return torch.full_like(out, out.float().mean().item())
""",
}

NULL_CANDIDATES = tuple(_NULL_TEMPLATES)


def null_candidates(problem: Problem, kinds: Iterable[str] = NULL_CANDIDATES) -> list[Candidate]:
    """The null candidates of one problem, each with model configuration ``null:<kind>``.

    Raises ``KeyError`` for an unknown kind (known: ``reference``, ``zeros``, ``mean``).
    """
    out = []
    for kind in kinds:
        source = problem.source.rstrip() + "\n" + _NULL_TEMPLATES[kind]
        out.append(make_candidate(source, level=problem.level, problem_id=problem.problem_id,
                                  model_config=f"null:{kind}", backend="torch", origin=f"kbstudy:null:{kind}"))
    return out
