#!/usr/bin/env bash
# The grading service on a multi-GPU machine, for results/<run>/ (issue 18's run). From the repository root, with
# $OUT set, the course's model files in .fixtures/course, the submissions in .submissions/ (neither committed) and
# the service's wheels in .whl/ (the device image lacks fastapi, distributed, sqlalchemy, ...; device README):
#
#   COMMIT=<commit> bash scripts/device-service.sh [WORKERS [DEADLINES]]      default: 2,1 and 200,330
#
# Installs the wheels into /tmp/site, writes $OUT/card.txt (GPUs, driver, versions, commit, UTC date), logs load,
# GPU use and the busiest processes every 15 s into $OUT/monitor.txt, and runs scripts/serve_on_gpus.py on the
# submissions listed in $OUT/paths.txt (the 23 of the 2026-11-26 runs that build with CUDA 13), one pass per worker
# count, into $OUT (service-W.json, service-summary.txt, run.txt). A pass that runs out of time keeps what it saw.
# SUBMISSIONS (a glob list) and SHAPES (3), REPEATS (1) change what is graded.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the files of this run}"
WORKERS=${1:-2,1}
DEADLINES=${2:-200,330}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "device-service: the wheels in .whl/ did not install" >&2; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src CONVBENCH_CACHE=${CONVBENCH_CACHE:-/tmp/cbc} PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
    python3 -c "import sys, torch, cupy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', \
torch.version.cuda, 'cupy', cupy.__version__, 'cudnn', torch.backends.cudnn.version())"
    echo "commit ${COMMIT:-unknown}; $(date -u +%FT%TZ); workers $WORKERS; deadlines $DEADLINES"
} > "$OUT/card.txt" 2>&1
(while sleep 15; do
    date +%T; uptime
    nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader
    ps -eo pid,pcpu,rss,etimes,args --sort=-pcpu | cut -c1-160 | head -6
done > "$OUT/monitor.txt" 2>&1) &
monitor=$!
trap 'kill $monitor 2>/dev/null' EXIT
# shellcheck disable=SC2086  # the globs expand here on purpose
ls -d ${SUBMISSIONS:-.submissions/minidnn/0[1-578]-* .submissions/minidnn/09-* .submissions/minidnn/1[02346]-* \
    .submissions/mxnet/0[1678]-* .submissions/mxnet/1[0134-6]-*} > "$OUT/paths.txt"
mapfile -t paths < "$OUT/paths.txt"
python3 scripts/serve_on_gpus.py "${paths[@]}" --out "$OUT" --workers "$WORKERS" --deadline "$DEADLINES" \
    --shapes "${SHAPES:-3}" --repeats "${REPEATS:-1}" --course-weights .fixtures/course > "$OUT/run.txt" 2>&1
status=$?
grep -v "graded at" "$OUT/run.txt" | tail -8
exit $status
