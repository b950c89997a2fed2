"""Candidate kernels for a substitution: which kernel computes each operator, what it was verified on, and its module.

* **LLM-written** (:func:`leaderboard_choices`): from the evaluation records of the KernelBench leaderboard kernels
  (``outputs/records/kernelbench/<hw>/leaderboard``), per operator the fastest *verified* kernel: ``kbstudy_correct``,
  faster than eager PyTorch (``speedup_vs_eager`` > 1 with ``speedup_significant``), its source read from
  ``leaderboard_kernels.jsonl`` by SHA-256.
* **Expert-written** (:func:`dlrm_choices`): our DLRM-Bench Triton kernels (``kbstudy.suites.dlrm_bench``).

A kernel is verified for the inputs its problem's ``get_inputs()`` builds (shapes, dtypes at the record's precision,
contiguous) and the parameters ``get_init_inputs()`` gives ``Model``: :func:`verified_signature` computes them on the
``meta`` device (nothing is allocated). ``shape_generic`` (default ``False``) widens that to any shape of the same
dtype and layout, once the verifier's shape variants say the kernel passed them.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from pathlib import Path

import torch

from kbstudy.harness.loading import extensions_lock, load_module
from kbstudy.harness.problems import sha256_text
from kbstudy.substitution.operators import DLRM_PROBLEM_OPERATORS, LEVEL1_PROBLEM_OPERATORS
from kbstudy.suites.dlrm_bench import exec_source, load_dlrm_candidates, load_dlrm_problems, problem_precision

_PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
#: The problem files of each problem-set version, in the KernelBench data folder.
_PROBLEM_FILES = {"current": "kernelbench_levels_1-3.jsonl", "v0": "kernelbench_v0_problems.jsonl"}


@dataclasses.dataclass(frozen=True)
class KernelChoice:
    """One kernel chosen for an operator, with what it was verified on.

    ``kernel_source`` is ``"llm"`` or ``"expert"``; ``problem`` the problem key (``v0/L1/88``, ``dlrm/L5/3``);
    ``speedup_vs_eager`` the verified speedup of its record (``None`` for expert kernels read without records).
    """

    operator: str
    kernel_source: str
    problem: str
    problem_name: str
    problem_source: str
    source: str
    sha256: str
    model_config: str
    backend: str
    precision: str
    speedup_vs_eager: float | None = None
    shape_generic: bool = False

    def summary(self) -> dict:
        """The fields a record carries for this kernel (no sources)."""
        return {"operator": self.operator, "problem": self.problem, "problem_name": self.problem_name,
                "candidate_sha256": self.sha256, "model_config": self.model_config, "backend": self.backend,
                "precision": self.precision, "speedup_vs_eager": self.speedup_vs_eager,
                "shape_generic": self.shape_generic}

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class VerifiedSignature:
    """What a kernel was verified on: input shapes and dtypes, and ``Model``'s init parameters by name."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    init_params: dict


def kernelbench_dir() -> Path:
    """The KernelBench data folder: ``$KBSTUDY_KERNELBENCH_DIR``, else ``.device/kernelbench`` (what the GPU scripts
    carry), else ``../shared/kernelbench``."""
    if os.environ.get("KBSTUDY_KERNELBENCH_DIR"):
        return Path(os.environ["KBSTUDY_KERNELBENCH_DIR"])
    for candidate in (Path(".device/kernelbench"), Path("../shared/kernelbench")):
        if candidate.exists():
            return candidate
    return Path("../shared/kernelbench")


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def verified_win(record: dict) -> bool:
    """A leaderboard record of a kernel verified correct by kbstudy and significantly faster than eager."""
    speedup = record.get("speedup_vs_eager")
    return (record.get("outcome") == "evaluated" and bool(record.get("kbstudy_correct"))
            and not str(record.get("model_config", "")).startswith("null:")
            and speedup is not None and speedup > 1.0 and bool(record.get("speedup_significant")))


def shape_generic_from_variants(record: dict, variants: tuple[str, ...]) -> bool:
    """A record's kernel is shape-generic when it passed every one of the verifier's shape/layout ``variants`` (names
    in its ``kbstudy_variants``); ``False`` when none is named or one did not pass or was not run."""
    done = record.get("kbstudy_variants") or {}
    return bool(variants) and all(done.get(v) == "passed" for v in variants)


def leaderboard_choices(records_dir: str | Path, kb_dir: str | Path | None = None,
                        shape_generic: dict[str, bool] | None = None,
                        shape_variants: tuple[str, ...] = ()) -> tuple[list[KernelChoice], dict[str, str]]:
    """The fastest verified leaderboard kernel per operator of :data:`LEVEL1_PROBLEM_OPERATORS`.

    Args:
        records_dir: a folder of evaluation records (``evaluations.jsonl``), e.g.
            ``outputs/records/kernelbench/h200/leaderboard``.
        kb_dir: the KernelBench data folder (``leaderboard_kernels.jsonl``, the problem files); default
            :func:`kernelbench_dir`.
        shape_generic: per candidate SHA-256, whether the kernel is shape-generic (default: none is).
        shape_variants: the verifier's shape/layout variants whose passing makes a kernel shape-generic
            (:func:`shape_generic_from_variants`, read from the chosen record); with ``shape_generic``, either suffices.

    Returns ``(choices, missing)``: ``missing`` maps each operator without a verified win to the reason.
    """
    kb_dir = Path(kb_dir) if kb_dir else kernelbench_dir()
    rows = _read_jsonl(Path(records_dir) / "evaluations.jsonl")
    best: dict[str, dict] = {}
    for r in rows:
        op = LEVEL1_PROBLEM_OPERATORS.get(r.get("problem_id")) if r.get("level") == 1 else None
        if op and verified_win(r) and (op not in best or r["speedup_vs_eager"] > best[op]["speedup_vs_eager"]):
            best[op] = r
    missing = {op: "no leaderboard kernel verified correct and faster than eager" for op in
               LEVEL1_PROBLEM_OPERATORS.values() if op not in best}
    if not best:
        return [], missing
    sources = {sha256_text(row["code"]): row["code"] for row in _read_jsonl(kb_dir / "leaderboard_kernels.jsonl")}
    problems = {}
    for version, name in _PROBLEM_FILES.items():
        for row in _read_jsonl(kb_dir / name):
            problems[(version, row["level"], row["problem_id"])] = row["code"]
    choices = []
    for op, r in sorted(best.items()):
        source = sources.get(r["candidate_sha256"])
        if source is None:
            missing[op] = f"source of {r['candidate_id']} ({r['candidate_sha256'][:12]}) not in leaderboard_kernels.jsonl"
            continue
        choices.append(KernelChoice(
            operator=op, kernel_source="llm", problem=f"{r['problem_version']}/L1/{r['problem_id']}",
            problem_name=r["problem_name"], problem_source=problems[(r["problem_version"], 1, r["problem_id"])],
            source=source, sha256=r["candidate_sha256"], model_config=r["model_config"], backend=r["backend"],
            precision=r["precision"], speedup_vs_eager=float(r["speedup_vs_eager"]),
            shape_generic=bool((shape_generic or {}).get(r["candidate_sha256"], False))
            or shape_generic_from_variants(r, tuple(shape_variants))))
    return choices, missing


def dlrm_choices(problem_ids=tuple(DLRM_PROBLEM_OPERATORS), shape_generic: bool = False) -> list[KernelChoice]:
    """Our DLRM-Bench Triton kernels for the operators of :data:`DLRM_PROBLEM_OPERATORS` (the expert case)."""
    problems = {p.problem_id: p for p in load_dlrm_problems(problem_ids=list(problem_ids))}
    out = []
    for c in load_dlrm_candidates():
        if c.problem_id in problems:
            p = problems[c.problem_id]
            out.append(KernelChoice(operator=DLRM_PROBLEM_OPERATORS[c.problem_id], kernel_source="expert",
                                    problem=p.key, problem_name=p.name, problem_source=p.source, source=c.source,
                                    sha256=c.sha256, model_config=c.model_config, backend=c.backend,
                                    precision=problem_precision(c.problem_id), shape_generic=shape_generic))
    return sorted(out, key=lambda c: c.problem)


def _namespace(source: str, name: str, triton: bool) -> dict:
    if triton:  # Triton's @jit reads the source from a file: exec_source writes one
        return exec_source(source, name)
    return vars(load_module(source, f"kbstudy_substitution_{name}", f"<{name}>"))


def verified_signature(choice: KernelChoice) -> VerifiedSignature:
    """The inputs and init parameters ``choice`` was verified on, from its problem on the ``meta`` device; floating
    inputs take the record's precision (the harness casts them so)."""
    ns = _namespace(choice.problem_source, f"problem_{sha256_text(choice.problem_source)[:12]}", triton=False)
    with torch.device("meta"):
        inputs = [t for t in ns["get_inputs"]() if isinstance(t, torch.Tensor)]
    init = list(ns["get_init_inputs"]())
    dtype = _PRECISION_DTYPES.get(choice.precision, torch.float32)
    params = list(inspect.signature(ns["Model"].__init__).parameters)[1:]
    return VerifiedSignature(shapes=tuple(tuple(t.shape) for t in inputs),
                             dtypes=tuple(dtype if t.is_floating_point() else t.dtype for t in inputs),
                             init_params=dict(zip(params, init)))


def kernel_namespace(choice: KernelChoice) -> dict:
    """Execute the kernel's source (building a CUDA extension, if it has one, inside kbstudy's extensions lock) and
    return its namespace (``ModelNew``). Raises whatever loading the source raises."""
    name = f"{choice.operator}_{choice.sha256[:12]}"
    with extensions_lock():
        return _namespace(choice.source, name, triton=choice.backend == "triton")
