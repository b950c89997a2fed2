"""Profiling of real workloads: what share of their GPU time could a KernelBench-style kernel replace?

* ``workloads``   -- the seven workloads (three domains) as training or inference steps, from published configs,
  random weights, synthetic inputs; tiny configurations for CPU tests; a model-size sweep for the transformers
* ``transformer_models``, ``vision_models``, ``recommender_models`` -- the models of those workloads, in plain PyTorch
* ``capture``     -- ``torch.profiler`` capture: device kernel time per kernel name (GPU) or self CPU time per ATen
  operator (CPU); step time from a separate run without the profiler
* ``addressable`` -- addressable fraction under a stated rule, the Amdahl bound 1/(1-f), projected speedups
* ``profile_run`` -- ``python -m kbstudy.profiling.profile_run --out DIR``: profile everything, write records

Kernel names are sorted into categories by :mod:`kbstudy.harness.kernel_classes`; the ``kbstudy profile ...`` commands
are :mod:`kbstudy.cli.profile`; the report is :mod:`kbstudy.analysis.profiles`.

Nothing here imports ``transformers`` or ``torchvision``: every model is written in plain PyTorch (see ``workloads``).
"""
