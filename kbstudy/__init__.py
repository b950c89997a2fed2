"""kbstudy: compile, verify and time LLM-generated GPU kernels; profile what share of real workloads they can reach.

The package is in layers, each importing only those below it (``docs/architecture.md``):

* ``records``  -- the record schema, the JSONL store with resume, the one frame loader, provenance
* ``verdict``  -- KernelBench's check, kbstudy's check, the extra trials, static scans: pure functions
* ``harness``  -- problems, candidates, the orchestrator and its processes (``child/``: where a candidate runs),
  builds, timing, record assembly, containment of hostile candidates
* ``suites``, ``profiling``, ``generate`` -- DLRM-Bench; real-workload profiles; candidate generation by any LLM
* ``analysis`` -- scoring, the audit, calibration findings, published numbers, report tables and figures
* ``pipeline`` -- study files and runs, notebook rendering, calibration runs, the released dataset, the data folder
* ``cli``      -- the ``kbstudy`` command, one module per command group
"""

__version__ = "0.1.0"
