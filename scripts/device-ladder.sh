#!/usr/bin/env bash
# Everything the GPU ladder needs checked, in one device call (results and logs under $OUT):
#   1. environment; 2. the GPU tests (pytest -m gpu); 3. compute-sanitizer memcheck + racecheck on every CUDA C rung;
#   4. scripts/ladder.py: verify, Correctness on every network, Op Time table against cudnn.
# Device tool:  run  command="CONVBENCH_COMMIT=$(git rev-parse --short HEAD) bash scripts/device-ladder.sh"
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/device-out} PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 CONVBENCH_CACHE=${CONVBENCH_CACHE:-/tmp/convbench-cache}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
echo "== pytest -m gpu"
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_impls.py 2>&1 | tail -15 | tee "$OUT/pytest-gpu.log"
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
    echo "== compute-sanitizer"
    bash scripts/sanitize.sh
fi
echo "== ladder"
python3 scripts/ladder.py --out "$OUT" ${LADDER_ARGS:-}
