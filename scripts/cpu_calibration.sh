#!/usr/bin/env bash
# The CPU null-candidate calibration rendered by notebook 02 (outputs/records/kernelbench/cpu/calibration/), in two
# lanes (fp32 and bf16 run side by side on a 2-core machine). Resumable: a rerun evaluates only what is missing.
# Measured wall times on 2 cores are in docs/reference/notebooks.md (notebook 02).
#
#   bash scripts/cpu_calibration.sh [KERNELBENCH_DIR]     # default: `kbstudy data where` (data/kernelbench, ...)
set -euo pipefail
KB=${1:-$(python -m kbstudy data where --path-only)}
OUT=outputs/records/kernelbench/cpu/calibration
SCALE=0.015625        # 1/64 of every module-level size (kbstudy.harness.problems.scale_source)
DLRM_SCALE=0.001953125  # 1/512: DLRM-Bench's CPU scale (outputs/records/dlrm_bench/cpu/study)
COMMON=(--device cpu --no-progress)

lane() {  # one precision: every step in order
  local p=$1
  # 1. KernelBench level 1, all 100 problems, every calibration null
  python -m kbstudy calibrate --problems "$KB/kernelbench_levels_1-3.jsonl" --level 1 --precision "$p" \
    --size-scale $SCALE --out $OUT/level1 "${COMMON[@]}"
  # 2. levels 2 and 3: the deterministic subset whose scaled forward is small on the meta device (their spatial sizes
  #    often escape the scaling: `height = width = 128`, literals in get_inputs)
  #    (first output <= 2^20 elements, inputs <= 2^22, <= 2^30 FLOP); selection.jsonl says what was left out and why
  python -m kbstudy calibrate --problems "$KB/kernelbench_levels_1-3.jsonl" --level 2 --level 3 --precision "$p" \
    --size-scale $SCALE --max-output-numel 1048576 --max-input-numel 4194304 --max-gflop 1.073741824 \
    --run-timeout 120 --out $OUT/level23 "${COMMON[@]}"
  # 3. DLRM-Bench, all twelve problems
  python -m kbstudy calibrate --dlrm --precision "$p" --size-scale $DLRM_SCALE --out $OUT/dlrm "${COMMON[@]}"
  # 4. torch.compile as a second honest implementation: level-1 problems 1, 6, 11, ..., 96 (every fifth)
  python -m kbstudy calibrate --problems "$KB/kernelbench_levels_1-3.jsonl" --level 1 --precision "$p" \
    $(for i in $(seq 1 5 96); do echo --problem-id $i; done) --nulls compile \
    --size-scale $SCALE --out $OUT/level1 "${COMMON[@]}"
}

lane fp32 > "$OUT/log-fp32.txt" 2>&1 &
lane bf16 > "$OUT/log-bf16.txt" 2>&1 &
wait
