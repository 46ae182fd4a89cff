#!/usr/bin/env bash
# One device call: GPU checks for what exists so far (cudnn + reference on CUDA), logs under $OUT.
#   run (device tool):  bash scripts/device-check.sh
set -uo pipefail
OUT=${OUT:-/tmp/convbench-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 CONVBENCH_CACHE=/tmp/convbench-cache
log=$OUT/device-check.log
{
    echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || cat .commit 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c "import torch, numba, skimage; print('python', __import__('platform').python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'numba', numba.__version__, 'skimage', skimage.__version__)"
    echo "== verify on cuda"
    python3 -m convbench verify --device cuda --shapes 60
    echo "verify exit: $?"
    echo "== pytest gpu + impls"
    python3 -m pytest -q -m gpu tests/test_impls.py 2>&1 | tail -3
    for net in fa17 sp18 fa18 sp19 fa19 minidnn; do
        for size in 100 1000 10000; do
            echo "== run $net $size: cudnn (cuda) vs reference (cpu)"
            python3 -m convbench run --net "$net" --size "$size" --impl cudnn
            python3 -m convbench run --net "$net" --size "$size" --impl reference --device cpu | tail -1
        done
    done
    echo "== course fixtures are not on the device (../shared does not travel)"
} 2>&1 | tee "$log"
