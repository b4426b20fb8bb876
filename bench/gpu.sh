#!/usr/bin/env bash
# GPU checks for one CUDA machine (prepared for 16 cores + one H200; about 8 minutes):
#
#   1. a virtualenv with `pip install -e '.[gpu]'` (TensorFlow's CUDA libraries) and Ray;
#   2. nvidia-smi and what TensorFlow sees;
#   3. bench/inference.py --gpu: the InferenceServer actor vs the raw compiled call,
#      mixed precision, merged batches 256/512/1024 (RATIO gpu_inference_server_vs_raw...);
#   4. bench/train_step.py --compare precision: the Trainer's step on Go 19x19's net
#      (10x128, batch 1024) in mixed precision vs float32 (RATIO train_step_mixed_vs_float32);
#   5. bench/train_step.py: the Trainer's XLA step (its default) vs the plain one on
#      the same net in mixed precision (RATIO train_step_xla_vs_plain).
#
#   bash bench/gpu.sh            # from the repository root (or anywhere: it cds there)
#
# Environment: OUT (a folder: every step's output is also written there), VENV (the
# virtualenv, default .venv-gpu; reused when it already imports tensorflow and ray),
# PIP_TIMEOUT / BENCH_TIMEOUT / TRAIN_TIMEOUT (seconds per step),
# SKIP_INSTALL (non-empty: use VENV as it is).
# The venv is made with --system-site-packages, so an image with TensorFlow already
# installed still works when the package index cannot be reached.
# Each step runs under `timeout`; a failed step is reported and the next one still runs;
# the script exits non-zero when any step failed.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OUT="${OUT:-}"
if [[ -n "$OUT" ]]; then
    mkdir -p "$OUT"
    LOG="$OUT/gpu_bench.log"
else
    LOG="$(mktemp -t tengen-gpu-bench.XXXXXX.log)"
fi
# everything from here on goes to the terminal and to the log
exec > >(tee -a "$LOG") 2>&1

VENV="${VENV:-$ROOT/.venv-gpu}"
PIP_TIMEOUT="${PIP_TIMEOUT:-240}"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-200}"
TRAIN_TIMEOUT="${TRAIN_TIMEOUT:-120}"
export TF_FORCE_GPU_ALLOW_GROWTH=true
FAILED=()

step() { echo; echo "=== $* ($(date -u +%H:%M:%S) UTC)"; }
# run NAME SECONDS CMD...: a step that may fail or time out without stopping the script
run() {
    local name="$1" limit="$2"
    shift 2
    local rc=0
    timeout --kill-after=10 "$limit" "$@" || rc=$?
    if [[ $rc -ne 0 ]]; then
        if [[ $rc -eq 124 || $rc -eq 137 ]]; then
            echo "!!! $name timed out after ${limit}s"
        else
            echo "!!! $name failed (exit $rc)"
        fi
        FAILED+=("$name")
    fi
    return 0
}

step "machine"
echo "host $(hostname), $(nproc) cores, repo $ROOT, log $LOG"
run nvidia-smi 30 nvidia-smi

step "virtualenv $VENV"
PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
    run venv 60 python3 -m venv --system-site-packages "$VENV"
fi
if [[ ! -x "$PY" ]]; then
    echo "no virtualenv; using $(command -v python3)"
    PY="$(command -v python3)"
fi
if [[ -n "${SKIP_INSTALL:-}" ]]; then
    echo "SKIP_INSTALL set: no install"
elif "$PY" -c "import tensorflow, ray, tengen.engine.network" >/dev/null 2>&1 \
    && "$PY" -c "import tensorflow as tf, sys; sys.exit(0 if tf.config.list_physical_devices('GPU') else 1)" \
        >/dev/null 2>&1; then
    echo "the environment already has tensorflow (with a GPU), ray and tengen: no install"
else
    # few retries: where the index cannot be reached, fail fast and measure what is installed
    run pip-install "$PIP_TIMEOUT" "$PY" -m pip install --quiet --retries 1 --timeout 20 \
        -e '.[gpu]' 'ray[default]>=2.40'
fi
"$PY" -m pip list 2>/dev/null | grep -i -E '^(tensorflow|keras|ray|numpy|nvidia-cudnn)' || true

step "what TensorFlow sees"
run tf-devices 90 "$PY" -c "
import tensorflow as tf
print('tensorflow', tf.__version__, 'built with cuda', tf.test.is_built_with_cuda())
print('gpus', tf.config.list_physical_devices('GPU'))
"

step "inference server vs raw compiled call (bench/inference.py --gpu)"
run inference-bench "$BENCH_TIMEOUT" "$PY" bench/inference.py --gpu

step "the Trainer's step in mixed precision vs float32 (bench/train_step.py --compare precision, Go 19x19's net)"
run train-precision-bench "$TRAIN_TIMEOUT" "$PY" bench/train_step.py --config go19 --seconds 30 \
    --compare precision

step "the Trainer's XLA step vs the plain one (bench/train_step.py, Go 19x19's net, mixed precision)"
run train-xla-bench "$TRAIN_TIMEOUT" "$PY" bench/train_step.py --config go19 --seconds 30 \
    --mixed-precision

step "done"
if [[ -n "$OUT" ]]; then
    grep '^RATIO' "$LOG" > "$OUT/ratios.txt" || true
    echo "log: $OUT/gpu_bench.log, ratios: $OUT/ratios.txt"
fi
grep '^RATIO' "$LOG" || true
if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "failed steps: ${FAILED[*]}"
    exit 1
fi
