"""Plain-PyTorch kernels and problems for the substitution tests (``kbstudy.substitution``)."""

from __future__ import annotations

from kbstudy.harness.problems import sha256_text
from kbstudy.substitution.kernels import KernelChoice


def problem(body: str, inputs: str, init: str = "[]") -> str:
    """A KernelBench-format problem source: ``Model.forward(self, x)`` returns ``body``."""
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Model(nn.Module):\n"
            f"    def __init__(self, *args):\n        super().__init__()\n\n"
            f"    def forward(self, *xs):\n        x = xs[0]\n        return {body}\n\n\n"
            f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n")


def kernel(body: str, init_params: str = "") -> str:
    """A plain-PyTorch ``ModelNew`` whose forward returns ``body`` (``x`` the first input)."""
    return (f"import math\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            f"    def __init__(self, {init_params}*args):\n        super().__init__()\n\n"
            f"    def forward(self, *xs):\n        x = xs[0]\n        return {body}\n")


GELU_TANH = "0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))"
#: an adversarial GELU: ReLU, right where x > 0 and zero elsewhere, the shape and dtype of a GELU
WRONG_GELU = "torch.relu(x)"


def choice(operator: str, problem_source: str, source: str, *, shape_generic: bool = False, backend: str = "torch",
           precision: str = "fp32", kernel_source: str = "llm") -> KernelChoice:
    return KernelChoice(operator=operator, kernel_source=kernel_source, problem=f"test/L1/{operator}",
                        problem_name=f"{operator}.py", problem_source=problem_source, source=source,
                        sha256=sha256_text(source), model_config="test", backend=backend, precision=precision,
                        speedup_vs_eager=2.0, shape_generic=shape_generic)
