#!/usr/bin/env bash
# GPU figures on the machine as it is (Python 3.12 with PyTorch, JAX, numba, numpy 2.5; no
# TensorFlow, Ray or Redis; no network), about 8 minutes in all. docs/gpu.md says more.
#
#   bash bench/gpu_wheels.sh                  # here, with the network: the wheels into .whl/
#   OUT=/some/folder bash bench/gpu.sh        # there, with .whl/ carried next to the repository
#
# It installs .whl/ into a target folder without the network (the repository itself goes on
# PYTHONPATH), then for each of JAX and PyTorch (bench/gpu_figures.py, a process per step):
#   1. nvidia-smi, and what the backend sees;
#   2. the raw compiled call of the go9 and go19 nets at batch 256, 1,024, 4,096, float32
#      and mixed precision: rows/s;
#   3. the same nets through InferenceServer in one process, concurrent callers merged into
#      batches of 1,024 (RATIO gpu_inference_server_vs_raw_<backend> ... target 0.9);
#   4. the train step of go19's net (10x128, batch 1,024), mixed vs float32: steps/s;
#   5. `tengen train go9 --single-process` then go19, on the GPU: games/min, positions/s,
#      evaluations/s, mean batch, the model's busy share (RATIO gpu_selfplay_model_busy_...).
# Writes $OUT/gpu_bench.log, $OUT/gpu_figures.json and $OUT/ratios.txt (a temporary folder without
# OUT), and nothing else there: the self-play runs go under RUNS (default /tmp/tengen-gpu-runs).
#
# Environment: PYTHON (default python3), WHEELS (default .whl), SITE (the install target,
# default /tmp/tengen-gpu-site), BUDGET_MIB (the wheels' budget, default 40), BACKENDS
# (default "jax torch"), GO9_MINUTES / GO19_MINUTES (each backend's self-play runs, default
# 1.5 and 1: both backends' runs and the rest fit 8 minutes; the issue's 3 and 2 fit one
# backend: SELFPLAY_BACKENDS=jax), SELFPLAY_BACKENDS (default: BACKENDS), GPU_SMOKE=1 (every
# step shrunk to seconds: a CPU's check that nothing fails to import or run).
# A failed or timed-out step is reported and the next one runs; the exit status is non-zero
# when any step failed. A missing or oversized wheels folder stops it before anything runs.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
WHEELS="${WHEELS:-$ROOT/.whl}"
SITE="${SITE:-/tmp/tengen-gpu-site}"
# the self-play runs' directories: not under OUT, which brings back only a few files
RUNS="${RUNS:-/tmp/tengen-gpu-runs}"
BUDGET_MIB="${BUDGET_MIB:-40}"
BACKENDS="${BACKENDS:-jax torch}"
SELFPLAY_BACKENDS="${SELFPLAY_BACKENDS-$BACKENDS}"
GO9_MINUTES="${GO9_MINUTES:-1.5}"
GO19_MINUTES="${GO19_MINUTES:-1}"
SMOKE=()
if [[ -n "${GPU_SMOKE:-}" ]]; then
    SMOKE=(--smoke)
    GO9_MINUTES="${GPU_SMOKE_MINUTES:-1}"
    GO19_MINUTES="${GPU_SMOKE_MINUTES:-1}"
fi

# the wheels first: without them no step can import tengen's dependencies
if ! compgen -G "$WHEELS/*.whl" >/dev/null; then
    echo "gpu.sh: no wheels in $WHEELS: run 'bash bench/gpu_wheels.sh' where there is a network, and carry" \
        "the folder with the repository" >&2
    exit 2
fi
WHEELS_BYTES="$(cat "$WHEELS"/*.whl | wc -c)"
if (( WHEELS_BYTES > BUDGET_MIB * 1024 * 1024 )); then
    echo "gpu.sh: the wheels in $WHEELS come to $(( WHEELS_BYTES / 1024 / 1024 )) MiB, over the budget of" \
        "$BUDGET_MIB MiB: download only what bench/gpu_wheels.sh pins" >&2
    exit 2
fi

OUT="${OUT:-$(mktemp -d -t tengen-gpu.XXXXXX)}"
mkdir -p "$OUT"
LOG="$OUT/gpu_bench.log"
FIGURES="$OUT/gpu_figures.json"
rm -f "$FIGURES"
# everything from here on goes to the terminal and to the log
exec > >(tee -a "$LOG") 2>&1
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
echo "host $(hostname), $(nproc) cores, repo $ROOT, out $OUT, python $("$PYTHON" --version 2>&1)"
if command -v nvidia-smi >/dev/null; then
    run nvidia-smi 30 nvidia-smi
else
    echo "no nvidia-smi on this machine (no NVIDIA driver): the figures are the CPU's"
fi

step "wheels from $WHEELS ($(( WHEELS_BYTES / 1024 )) KiB) into $SITE, without the network"
run install 120 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl
export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false

for backend in $BACKENDS; do
    step "$backend: what the single-process run imports, and what the backend sees"
    # a missing module is named here, once, rather than in every step
    run "$backend-imports" 120 env KERAS_BACKEND="$backend" "$PYTHON" -c "
import importlib, sys
missing = []
for name in ('numpy', 'numba', 'yaml', 'msgpack', 'zstandard', 'safetensors', 'pydantic', 'sgfmill', 'fsspec',
             'aiohttp', 'keras', 'tengen.cli', 'tengen.run.single_process', 'tengen.workers.inference_server'):
    try:
        importlib.import_module(name)
    except Exception as e:
        missing.append(f'{name} ({type(e).__name__}: {e})')
if missing:
    sys.exit('cannot import: ' + '; '.join(missing))
import numpy, keras
print('numpy', numpy.__version__, 'keras', keras.__version__, 'on', keras.backend.backend(), 'from', keras.__file__)
"
    figures=("$PYTHON" bench/gpu_figures.py --backend "$backend" --out "$FIGURES" "${SMOKE[@]}")
    run "$backend-device" 120 "${figures[@]}" device
    step "$backend: the raw compiled call, go9 and go19 nets, batch 256/1,024/4,096, float32 and mixed"
    run "$backend-infer" 150 "${figures[@]}" infer
    step "$backend: InferenceServer in one process (no Ray) vs the raw call, merged batches of 1,024"
    run "$backend-server" 120 "${figures[@]}" server
    step "$backend: the train step of go19's net (10x128, batch 1,024), mixed vs float32"
    run "$backend-train" 120 "${figures[@]}" train
done
for backend in $SELFPLAY_BACKENDS; do
    for config_minutes in "go9 $GO9_MINUTES" "go19 $GO19_MINUTES"; do
        read -r config minutes <<<"$config_minutes"
        step "$backend: tengen train $config --single-process for $minutes min"
        rm -rf "$RUNS/run-$config-$backend"  # a rerun on the same machine starts a new run
        run "$backend-selfplay-$config" "$(awk -v m="$minutes" 'BEGIN { print int(m * 60 + 150) }')" \
            "$PYTHON" bench/gpu_figures.py selfplay --config "$config" --minutes "$minutes" \
            --run-dir "$RUNS/run-$config-$backend" --backend "$backend" --out "$FIGURES" "${SMOKE[@]}"
    done
done

step "done"
grep -h '^RATIO' "$LOG" > "$OUT/ratios.txt" || true
cat "$OUT/ratios.txt"
echo "log: $LOG, figures: $FIGURES"
if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "failed steps: ${FAILED[*]}"
    exit 1
fi
