"""kbstudy: compile, verify and time LLM-generated GPU kernels; profile what share of real workloads they can reach.

Where things are (one concern per module):

* ``problems``   -- KernelBench-format problems (checkout, folder, JSONL/Parquet), hashing, size scaling
* ``candidates`` -- candidate sets (``ModelNew`` sources) from folders and JSONL, backend detection, null candidates
* ``worker``     -- the isolated process that builds and runs one candidate
* ``reference``  -- the process that owns the reference: inputs, expected outputs, eager/compile timings
* ``verify``     -- the verdicts: KernelBench's ``allclose`` check and kbstudy's scale-invariant check
* ``variants``   -- kbstudy's extra trials: fresh seeds, signed and large inputs, and where they apply
* ``timing``     -- CUDA-event and CPU timing over a pool of input sets, L2 clearing, host cross-check, statistics,
  significance of speedups
* ``kernel_share`` -- share of a candidate's device time in its own kernels versus vendor libraries and ATen
* ``records``    -- the record schema, JSONL store with resume, Parquet export
* ``evaluate``   -- orchestration of a batch
* ``study``      -- the main job: missing evaluations, then the notebooks through papermill
"""

__version__ = "0.1.0"
