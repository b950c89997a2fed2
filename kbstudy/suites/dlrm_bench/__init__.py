"""DLRM-Bench: twelve recommender-model kernel problems in KernelBench format, our Triton kernels, and their roofline.

Layout (see ``docs/reference/dlrm-bench.md``):

* ``problems/{id}_{Name}.py`` -- the twelve problems (``Model``, ``get_inputs``, ``get_init_inputs``), shapes from the
  MLPerf DLRM-v2 configuration (mlcommons/training ``recommendation_v2/torchrec_dlrm/README.MD``), tables capped at
  :data:`TABLE_ROW_CAP` rows.
* ``kernels/level_5_problem_{id}_sample_0_kernel.py`` -- our Triton candidates (model configuration
  :data:`MODEL_CONFIG`), in KernelBench's generation-output naming so :func:`kbstudy.harness.candidates.load_candidates` reads
  them.
* ``roofline`` -- compulsory bytes and FLOPs per problem, machine measurement, floors.
* ``measurement_run`` -- ``python -m kbstudy.suites.dlrm_bench.measurement_run --out DIR``: the machine's ceilings, then our candidates
  through the project's one evaluation path (:func:`kbstudy.harness.orchestrator.evaluate_batch`: both verdicts, eager and
  ``torch.compile`` timings), then the floors.

Precision: each problem is evaluated at the precision it is written in (:func:`problem_precision`): bf16 for 10 and 11,
fp32 for the others. The harness casts floating inputs and parameters to ``EvalConfig.precision``, so at that
precision the cast is a no-op and the problem runs exactly as written (an fp32 run of 10 or 11 would silently turn them
into fp32 problems).

Level: the problems sit directly in ``problems/`` (no ``level{N}`` folder) and are loaded with
``load_problems(PROBLEMS_DIR, level=DLRM_LEVEL, version="dlrm")``. :data:`DLRM_LEVEL` is 5, a number no KernelBench
level uses (KernelBench has levels 1-4), so DLRM-Bench candidates named ``level_5_problem_{P}_...`` can never be
mistaken for KernelBench ones; the problem key is ``dlrm/L5/{id}``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path

import torch

from kbstudy.harness.candidates import load_candidates
from kbstudy.harness.problems import Problem, load_problems, make_problem, scale_source
from kbstudy.suites.dlrm_bench.roofline import BF16_PROBLEMS

PROBLEMS_DIR = Path(__file__).resolve().parent / "problems"
KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
#: The level number given to DLRM-Bench problems (not used by KernelBench, whose levels are 1-4).
DLRM_LEVEL = 5
#: The problem-set label carried by every DLRM-Bench :class:`~kbstudy.harness.problems.Problem`.
DLRM_VERSION = "dlrm"
#: The model configuration name of our Triton candidates.
MODEL_CONFIG = "kbstudy-triton"
#: Rows per table at most: MLPerf DLRM-v2's five 40,000,000-row tables are capped here so that every problem fits one
#: H200 with room for the fp64 reference (problem 3's 26 tables: 24.3M rows, 12.4 GB fp32).
TABLE_ROW_CAP = 4_000_000
#: The paper's DLRM-Bench result for LLM-written kernels (win rate over eager PyTorch, median speedup).
PAPER_WIN_RATE = 0.417
PAPER_MEDIAN_SPEEDUP = 1.552


def problem_precision(problem_id: int) -> str:
    """The precision problem ``problem_id`` is written in and evaluated at: ``"bf16"`` for 10 and 11
    (:data:`~kbstudy.suites.dlrm_bench.roofline.BF16_PROBLEMS`, also their FLOPs' rate in the floor), ``"fp32"`` otherwise."""
    return "bf16" if int(problem_id) in BF16_PROBLEMS else "fp32"


def load_dlrm_problems(size_scale: float = 1.0, problem_ids=None) -> list[Problem]:
    """The twelve DLRM-Bench problems (version ``"dlrm"``, level :data:`DLRM_LEVEL`), sorted by id.

    Args:
        size_scale: in (0, 1]; below 1 each source is rewritten by :func:`kbstudy.harness.problems.scale_source` (its sha256 is
            then that of the scaled source, and the name is unchanged).
        problem_ids: keep only these ids (``None``: all twelve).

    Raises:
        ValueError: ``size_scale`` outside (0, 1].
        kbstudy.harness.problems.ProblemLoadError: a problem file is malformed or no problem is left after filtering.
    """
    problems = load_problems(PROBLEMS_DIR, level=DLRM_LEVEL, version=DLRM_VERSION, problem_ids=problem_ids)
    if size_scale == 1:
        return problems
    return [make_problem(scale_source(p.source, size_scale), level=p.level, problem_id=p.problem_id, name=p.name,
                         version=p.version, origin=p.origin) for p in problems]


def load_dlrm_candidates():
    """Our Triton candidates (model configuration :data:`MODEL_CONFIG`), one per problem, via
    :func:`kbstudy.harness.candidates.load_candidates`."""
    return load_candidates(KERNELS_DIR, model_config=MODEL_CONFIG)


def instantiate(problem: Problem, candidate_source: str, device: str, seed: int = 42) -> tuple[dict, object, list]:
    """A candidate's module on ``problem``, as the benchmarks build it: ``(candidate namespace, ModelNew(*init inputs),
    inputs)``, the model and the inputs built on ``device`` (``"cpu"`` or ``"cuda"``) after ``torch.manual_seed(seed)``.
    The namespace is returned so a caller can patch what ``ModelNew.forward`` looks up at call time (``_launch``)."""
    ns = exec_source(problem.source, problem.name)
    cn = exec_source(candidate_source, f"cand_{problem.problem_id}")
    with torch.device(device):
        torch.manual_seed(seed)
        model = cn["ModelNew"](*ns["get_init_inputs"]())
        inputs = ns["get_inputs"]()
    return cn, model, inputs


def exec_source(source: str, name: str) -> dict:
    """Execute a problem or candidate source in a fresh namespace and return it (``Model``/``ModelNew``, ``get_inputs``,
    module constants). The source is compiled with ``name`` as its file name so tracebacks point at it.

    Triton's ``@triton.jit`` reads the function's source through ``inspect``, which needs a real file; so the source is
    written to a temporary module file and imported from there.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "kbstudy_dlrm_sources"
    folder.mkdir(parents=True, exist_ok=True)
    stem = "".join(ch if ch.isalnum() else "_" for ch in Path(name).stem)
    path = folder / f"{stem}_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{digest}.tmp")
        tmp.write_text(source)
        tmp.replace(path)
    mod_name = f"kbstudy_dlrm_src_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return vars(module)
