#!/usr/bin/env bash
# The answering checks on a lent machine with a CUDA GPU and 16 cores, in one call (device time is short): a
# thin caller of the benchmark runner, every record merged into OUTDIR/benchmarks.json:
#   1. the fused CUDA stream's exactness tests (tests/engine/test_kernels_gpu.py, test_device.py);
#   2. one step on the GPU: torch's CUDA form against the fused kernel (the benchmark kernels);
#   3. CN15k and PPI5k: `pipeline export` of a trained run, then fresh `pipeline answer` processes on the CPU
#      at 1, 2, 4, 8, 16 workers, pair cache cold and warm (the benchmark cold-answer), and on the GPU with
#      the torch form (PIPELINE_KERNELS=torch) and the fused one (auto); per type in one process.
# Inputs (not in git; copied from a trained run beside this checkout): .dev/runs/{cn15k,ppi5k}-logi (model.pt,
# config.json, metadata.json, results.json), .dev/q/{cn15k,ppi5k}_test.parquet (test query sets),
# .dev/data/ppi5k (test_device.py's data set). Every log and table goes to OUTDIR.
#   bash benchmarks/gpu_machine_answering.sh OUTDIR [BUDGET_SECONDS]
set -u
OUTDIR=${1:-/tmp/out31}
BUDGET=${2:-540}
mkdir -p "$OUTDIR"
BENCH_JSON=$OUTDIR/benchmarks.json
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIPELINE_HOME=/tmp/ph31 PIPELINE_DATA=$PWD/.dev/data
PY=${PY:-python3}
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
log() { echo "== $(($(date +%s) - T0)) s: $*"; }
pipeline() { $PY -c 'import sys; from pipeline.cli import main; sys.argv[0] = "pipeline"; main()' "$@"; }
secs() { local a=$(date +%s%N); "$@"; local rc=$?; echo "took $((($(date +%s%N) - a) / 1000000)) ms (rc $rc)"; }

log machine
nvidia-smi -L; nproc; free -g | head -2
$PY -c "import torch, triton, numba, numpy, pyarrow; print('torch', torch.__version__, 'triton', triton.__version__,
'numba', numba.__version__, 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__, torch.cuda.get_device_name())
from pipeline.engine import kernels; print('numba loads', kernels.load(), '| triton loads', kernels.load_gpu())"

EXP=/tmp/exp31
log "exports (GPU scoring): CN15k in the background, PPI5k now"
(secs pipeline export .dev/runs/cn15k-logi --threshold 0.1 --out $EXP/cn15k >"$OUTDIR/export_cn15k.log" 2>&1; echo done >>"$OUTDIR/export_cn15k.log") &
CN=$!
secs pipeline export .dev/runs/ppi5k-logi --threshold 0.1 --out $EXP/ppi5k 2>&1 | tail -2

log "exactness on the GPU (while CN15k exports)"
timeout 210 $PY -m pytest -q -p no:cacheprovider tests/engine/test_kernels_gpu.py tests/engine/test_device.py 2>&1 \
    | tee "$OUTDIR/tests.log" | tail -8

log "one step, GPU"
timeout 100 $PY -m benchmarks run kernels --device cuda --entries 5000000 --rows 1,8,36,100 --atoms 1,2 \
    --repeat 15 --label gpu --json "$BENCH_JSON" 2>&1 | tee "$OUTDIR/step.log" | tail -16

wait $CN
tail -3 "$OUTDIR/export_cn15k.log"
log "CN15k: the first answering process after the export (index and pairs built), 16 workers, CPU"
secs pipeline answer .dev/q/cn15k_test.parquet --adjacency $EXP/cn15k --device cpu --workers 16 --out /tmp/a31 \
    --json >"$OUTDIR/cn15k_first.json" 2>"$OUTDIR/cn15k_first.err"
du -sh $EXP/cn15k "$PIPELINE_HOME"/pairs 2>/dev/null

if [ "$(left)" -gt 150 ]; then
    log "CN15k, CPU workers"
    timeout $(($(left) - 120)) $PY -m benchmarks run cold-answer --adjacency $EXP/cn15k --queries .dev/q/cn15k_test.parquet \
        --calibrations none --workers 1,2,4,8,16 --cache cold,warm --device cpu \
        --label cn15k-16-cores --json "$BENCH_JSON" 2>&1 | tail -18
fi
if [ "$(left)" -gt 80 ]; then
    log "CN15k, GPU: torch form, then fused (fresh processes, pair cache n/a on the GPU)"
    for k in torch auto; do
        PIPELINE_KERNELS=$k timeout 60 $PY -m benchmarks run cold-answer --adjacency $EXP/cn15k \
            --queries .dev/q/cn15k_test.parquet --calibrations none --workers 1 --cache warm --device cuda \
            --label cn15k-gpu-$k --json "$BENCH_JSON" 2>&1 | tail -6
    done
fi
if [ "$(left)" -gt 60 ]; then
    log "PPI5k, CPU workers and GPU"
    timeout $(($(left) - 30)) $PY -m benchmarks run cold-answer --adjacency $EXP/ppi5k --queries .dev/q/ppi5k_test.parquet \
        --calibrations none --workers 1,2,4,8,16 --cache cold,warm --device cpu \
        --label ppi5k-16-cores --json "$BENCH_JSON" 2>&1 | tail -18
    PIPELINE_KERNELS=auto timeout 30 $PY -m benchmarks run cold-answer --adjacency $EXP/ppi5k \
        --queries .dev/q/ppi5k_test.parquet --calibrations none --workers 1 --cache warm --device cuda \
        --label ppi5k-gpu --json "$BENCH_JSON" 2>&1 | tail -6
fi
if [ "$(left)" -gt 40 ]; then
    log "CN15k per type in one process, GPU: torch form against fused"
    timeout $(($(left) - 5)) $PY -m benchmarks run kernels --device cuda --entries 1000 --rows 1 --atoms 1 --repeat 1 \
        --queries .dev/q/cn15k_test.parquet --adjacency $EXP/cn15k --types 2m,im,2p,ip,inp,up --passes 2 \
        --label cn15k-types-gpu --json "$BENCH_JSON" 2>&1 | tee "$OUTDIR/cn15k_types_gpu.log" | tail -14
fi
log end
