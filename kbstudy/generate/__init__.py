"""Generate candidates with any language model: the study's first stage.

* :mod:`~kbstudy.generate.config`  -- model configurations (``params/models/*.yaml``); the key stays in the environment
* :mod:`~kbstudy.generate.prompts` -- versioned KernelBench-style prompt templates; code extraction from replies
* :mod:`~kbstudy.generate.client`  -- OpenAI-compatible chat-completions client: retries, backoff, clear errors
* :mod:`~kbstudy.generate.store`   -- the generation store: every reply kept, resume, export to a candidate set
* :mod:`~kbstudy.generate.run`     -- the run: concurrency limit, progress bar, one record per reply
* :mod:`~kbstudy.generate.replay`  -- rebuild candidates from stored replies, with no network
* :mod:`~kbstudy.cli.generate`     -- ``kbstudy generate`` and ``kbstudy replay``

Every module imports without ``openai`` (:mod:`client` loads it where installed, and its ``ChatClient`` refuses to
start without it), so replay, evaluation and the ``kbstudy`` command line work where it is not installed.
"""

from kbstudy.generate.config import ModelConfig, ModelConfigError, load_model_config
from kbstudy.generate.prompts import extract_code, load_template, render_prompt
from kbstudy.generate.replay import ReplayResult, replay_generations
from kbstudy.generate.store import GenerationRecord, GenerationStore, GenerationStoreError

__all__ = [
    "GenerationRecord",
    "GenerationStore",
    "GenerationStoreError",
    "ModelConfig",
    "ModelConfigError",
    "ReplayResult",
    "extract_code",
    "load_model_config",
    "load_template",
    "render_prompt",
    "replay_generations",
]
