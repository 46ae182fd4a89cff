# session 25, call 5 (tree: HOIST on, NPROD plan field, PHASES marks): GPU tests, sanitizer, whole network at 100
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_block_phases.py tests/test_wgmma.py tests/test_launch_plans.py tests/test_whole.py -k "phases or producer or tuned or shape_compiled or pieces or sweep or whole" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "^E |passed|failed|^FAILED" $OUT/pytest.txt | head -12 | cut -c1-300
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 python3 .devrun/s25/san_nprod.py > $OUT/san-memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -2 $OUT/san-memcheck.txt
IMAGES=2 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 .devrun/s25/san_nprod.py > $OUT/san-racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -2 $OUT/san-racecheck.txt
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 python3 .devrun/s25/san_nprod.py > $OUT/san-synccheck.txt 2>&1; echo "synccheck rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-synccheck.txt
timeout 100 python3 scripts/graph_timeline.py --nets fa19,sp19,minidnn,fa18 --sizes 100 --json $OUT/graph-timeline.json 2>&1 | grep -v -i warn > $OUT/graph-timeline.txt; grep -E "^[a-z0-9]+, |programmatic launches:|empty" $OUT/graph-timeline.txt
echo "timeline $((SECONDS-t0)) s"
export COMMIT=$(cat .devrun/s25/commit 2>/dev/null || echo wip) WHOLE_SIZES=100
DEVICE_KIND=nvidia-h200 timeout 300 bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
python3 - <<'PY'
import json, os
for r in json.load(open(os.environ["OUT"] + "/whole.json")):
    print(f"{r['net']:8s} {r['images']:6d} {r['network_time_s']*1e6:7.1f} us  x floor {r['x_floor']:.2f}  "
          f"eager {r['eager']['time_s']*1e6:7.1f} us ({r['eager']['speedup_x']:.2f}x)  compile "
          f"{r['compile']['time_s']*1e6:7.1f} us ({r['compile']['speedup_x']:.2f}x)  correctness {r['correctness']} "
          f"eager {r['eager']['correctness']} compile {r['compile']['correctness']}")
PY
ls $OUT
