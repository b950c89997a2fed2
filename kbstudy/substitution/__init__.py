"""Substitution: candidate kernels put into a real workload, checked end to end, and timed (issue 28).

* ``operators`` -- the operators a substitution maps (semantics, the ``torch.nn.functional`` calls or module classes
  where they run) and the problems whose kernels compute them
* ``kernels``   -- the kernels: the fastest verified leaderboard kernel per operator (LLM-written), our DLRM-Bench
  Triton kernels (expert-written); what each was verified on
* ``places``    -- the places of each operator in a model, the guard, applying a substitution
* ``adapters``  -- module places: how a kernel's ``ModelNew`` takes a module's place with the module's parameters
* ``check``     -- the end-to-end check (outputs, loss, gradients) that precedes any timing
* ``measure``   -- baseline and substituted step times in separate processes, interleaved; one record per case
* ``store``     -- the records (JSONL) and their loader
* ``gpu_run``   -- ``python -m kbstudy.substitution.gpu_run --out DIR``: the seven workloads x {eager, production}

Reference: ``docs/reference/substitution.md``.
"""
