# kbstudy: one command per step. See docs/reference/notebooks.md.
PYTHON ?= python3
STUDY ?= params/study/cpu_default.yaml
# the executed notebooks that nbval re-runs (the committed, "golden" renderings)
REPORTS ?= $(sort $(wildcard outputs/reports/*/*.ipynb))
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

# torch is installed first and pinned: on these CPU machines torch==2.13.0 resolves to the CPU wheel on disk, while a
# bare `torch` (or a newer release) pulls a several-GB CUDA build. Elsewhere, point TORCH_SPEC/TORCH_INDEX at a CPU
# build, e.g. make install TORCH_INDEX=--index-url=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: install study render golden test pytest nbval test-heavy test-timing test-unit test-integration test-notebooks test-adversarial test-gpu

install:
	$(PYTHON) -m pip install $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -e ".[test]"

# the KernelBench data folder (problems, leaderboard kernels, baselines); empty: $KBSTUDY_KERNELBENCH_DIR, else
# data/kernelbench (`kbstudy data fetch`), else ../shared/kernelbench (kbstudy.pipeline.data.resolve_kernelbench_dir)
KERNELBENCH_DIR ?=
KERNELBENCH_ARG = $(if $(KERNELBENCH_DIR),--kernelbench-dir "$(KERNELBENCH_DIR)")

# the whole study: missing evaluations, then every notebook (outputs/records/, outputs/reports/)
study:
	$(PYTHON) -m kbstudy study $(STUDY) $(KERNELBENCH_ARG)

# re-render the reports from the records already present (no evaluation)
render golden:
	$(PYTHON) -m kbstudy study $(STUDY) --only-notebooks $(KERNELBENCH_ARG)

# the whole test suite: every pytest tier (tests/README.md; the GPU tier skips without CUDA), then nbval on the
# committed rendered notebooks
test: pytest nbval

# pytest-xdist: two workers (the serial suite kept one core of two busy), each taking whole files so a module's
# fixtures are built once; PYTEST_WORKERS=0 runs the tests in this process alone
PYTEST_WORKERS ?= 2
pytest:
	$(PYTHON) -m pytest -q tests -m "not heavy and not timing" -n $(PYTEST_WORKERS) --dist loadfile

# one tier each (tests/<tier>/); test-gpu is for the GPU machine
test-unit test-integration test-notebooks test-adversarial test-gpu: test-%:
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/$* -m "not heavy and not timing"

# strict output comparison of the rendered notebooks (numbers printed as rounded text; images not compared)
nbval:
	@test -n "$(REPORTS)" || { echo "no rendered notebooks under outputs/reports/: run 'make study' or 'make render'"; exit 1; }
	$(PYTHON) -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg $(REPORTS)

# the false-alarm checks too long for every run: every level-1 problem under torch.compile, the heavy convolutions
test-heavy:
	$(PYTHON) -m pytest -q tests -m heavy

# comparisons of measured times between batches (a concurrent batch's timings against the serial path's): on a quiet
# machine; a shared one's noise fails them, so they are not in `make test`
test-timing:
	$(PYTHON) -m pytest -q tests -m timing
