"""The two setups a workload is profiled in: ``eager`` (as built) and ``production`` (as users run it).

What users run differs from plain eager PyTorch by ``torch.compile``: Inductor fuses the elementwise and reduction
work around the vendor GEMMs and attention into its own Triton kernels (``triton_poi_fused_*``, ``triton_red_*``,
``triton_per_*``), so a generated kernel there competes with Inductor's, not with ATen's. The rest of a production
setup is already in both: on CUDA the workloads run attention through ``F.scaled_dot_product_attention``
(FlashAttention/cuDNN SDPA), bf16 (autocast, or bf16 weights for Llama inference), and the fused AdamW and SGD
optimizers (``fused=True``); DLRM's Adagrad keeps its sparse path for the tables (no fused or compiled form takes
sparse gradients) and its default foreach path for the dense parameters.

``production`` compiles the model in place (``nn.Module.compile()``, ``torch.compile`` with its default mode and
backend, Inductor) before the first step, so the first steps (the profiler's wait and warm-up, the timing warm-up)
pay for compilation and recompilation and the measured ones do not. For DLRM only the dense part is compiled
(``kbstudy.profiling.workloads.DLRM_DENSE_MODULES``): TorchRec keeps its embedding tables outside ``torch.compile``.
The setup is written into the workload's ``config`` (``setup``, ``compile``), so a record says how it was run.
"""

from __future__ import annotations

from typing import Any

#: The setups, in report order.
SETUPS = ("eager", "production")
#: ``torch.compile`` as the production setup calls it (its defaults, stated).
COMPILE = {"backend": "inductor", "mode": "default", "fullgraph": False, "dynamic": None}


def apply_setup(workload: Any, setup: str, compile_targets: tuple[str, ...] = ()) -> Any:
    """``workload`` (a :class:`kbstudy.profiling.workloads.Workload`) in ``setup``: ``"eager"`` leaves it as built,
    ``"production"`` compiles its model in place, the submodules named by ``compile_targets`` (dotted names) or, when
    empty, the whole model. Both record the setup in ``workload.config``. Raises ``ValueError`` for an unknown setup
    and for ``"production"`` on a workload that carries no model."""
    if setup not in SETUPS:
        raise ValueError(f"unknown setup {setup!r}; known: {SETUPS}")
    if setup == "eager":
        workload.config = {**workload.config, "setup": "eager"}
        return workload
    if workload.model is None:
        raise ValueError(f"{workload.name}: no model to compile")
    modules = list(compile_targets) or [""]
    for target in modules:
        module = workload.model.get_submodule(target) if target else workload.model
        module.compile(**COMPILE)
    workload.config = {**workload.config, "setup": "production",
                       "compile": {**COMPILE, "modules": [m or "model" for m in modules]}}
    return workload


__all__ = ["SETUPS", "COMPILE", "apply_setup"]
