#!/usr/bin/env bash
# compute-sanitizer (memcheck and racecheck) over every CUDA C implementation on small shapes (GPU machine).
#   bash scripts/sanitize.sh [impl,impl,...]      log: $OUT/sanitize.log (or ./sanitize.log)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
# every tensor its own cudaMalloc: an access past a tensor's end then leaves its allocation, where memcheck sees it
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
impls=${1:-$(python3 -c "from convbench.impls import all_impls; print(','.join(i.name for i in all_impls() if i.name.startswith('gpu-')))")}
log=${OUT:-.}/sanitize.log
status=0
for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool: $impls" | tee -a "$log"
    compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 \
        python3 -m convbench verify --device cuda --impl "$impls" --shapes 13 --seed 7 2>&1 | tail -25 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    echo "== $tool exit code: $rc (0: no errors found)" | tee -a "$log"
    [ "$rc" = 0 ] || status=1
done
exit $status
