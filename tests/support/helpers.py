"""Helpers shared by the tests that evaluate candidates (``from support.helpers import cpu_config``)."""

from __future__ import annotations

from pathlib import Path

from kbstudy.pipeline.data import resolve_kernelbench_dir

REPO = Path(__file__).resolve().parents[2]
LEVELS_FILE = "kernelbench_levels_1-3.jsonl"
V0_FILE = "kernelbench_v0_problems.jsonl"
LEADERBOARD_FILE = "leaderboard_kernels.jsonl"

#: A small timing budget: enough to exercise the timing path, cheap on a CPU.
FAST_TIMING = {"warmup_ms": 1, "budget_ms": 20, "min_reps": 3, "max_reps": 5}


def kernelbench_path() -> Path:
    """The KernelBench data folder (``kbstudy.pipeline.data.resolve_kernelbench_dir``: ``$KBSTUDY_KERNELBENCH_DIR``,
    the fetched ``data/kernelbench``, then ``<repo>/../shared/kernelbench``)."""
    return resolve_kernelbench_dir(required=False)


def cpu_config(**overrides):
    """An ``EvalConfig`` for fast CPU batches (no torch.compile baseline, small timing budget, short timeouts).

    The extra trials' seeds are fixed (``1000 + i``) unless given, so a test's inputs do not change between runs; a
    real batch draws them (``kbstudy.verdict.trials.draw_seeds``)."""
    from kbstudy.harness.config import EvalConfig
    from kbstudy.verdict.trials import STRUCTURAL_VARIANTS, VARIANTS

    settings = dict(run="core-test", device="cpu", size_scale=0.0625, compile_baseline=False, progress=False,
                    timing=dict(FAST_TIMING), run_timeout_s=20, load_timeout_s=60)
    settings.update(overrides)
    if "extra_seeds" not in overrides:
        n = settings.get("fresh_trials", 2) + len(settings.get("variants", VARIANTS)) \
            + len(settings.get("structural_variants", STRUCTURAL_VARIANTS))
        settings["extra_seeds"] = [1000 + i for i in range(n)]
    return EvalConfig(**settings)


def records_by_config(store) -> dict[str, dict]:
    """Evaluation rows of a store keyed by model configuration (each test candidate has its own configuration)."""
    rows = store.evaluations()
    by_config = {r["model_config"]: r for r in rows}
    assert len(by_config) == len(rows), "two records share a model configuration"
    return by_config


def torch_candidate(body: str, *, level: int = 1, problem_id: int, name: str, prelude: str = ""):
    """A hand-written torch candidate whose ``forward(self, x)`` is ``body`` (indented here), model configuration
    ``name``. The name is written into the source, so two candidates never share a source (nor an evaluation key)."""
    import textwrap

    from kbstudy.harness.candidates import make_candidate

    source = (f"# kbstudy test candidate: {name}\nimport torch\nimport torch.nn as nn\n" + textwrap.dedent(prelude) + "\n\nclass ModelNew(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n"
              + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) + "\n")
    return make_candidate(source, level=level, problem_id=problem_id, model_config=name, backend="torch")
