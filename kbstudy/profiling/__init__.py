"""Profiling of real workloads: what share of their GPU time could a KernelBench-style kernel replace?

* ``workloads``   -- the seven workloads (three domains) in plain PyTorch, from published configs, random weights,
  synthetic inputs; tiny configurations for CPU tests; a model-size sweep for the transformers
* ``capture``     -- ``torch.profiler`` capture: device kernel time per kernel name (GPU) or self CPU time per ATen
  operator (CPU); step time from a separate run without the profiler
* ``classify``    -- ordered rule tables: kernel name -> category, ATen operator -> category
* ``addressable`` -- addressable fraction under a stated rule, the Amdahl bound 1/(1-f), projected speedups
* ``gpu_run``     -- ``python -m kbstudy.profiling.gpu_run --out DIR``: profile everything, write records
* ``cli``         -- the ``kbstudy profile ...`` typer app

Nothing here imports ``transformers`` or ``torchvision``: every model is written in plain PyTorch (see ``workloads``).
"""
