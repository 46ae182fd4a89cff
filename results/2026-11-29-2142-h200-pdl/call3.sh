# session 11, call 3 (carry .devrun/s11 .devrun/s11b): what Op Time's method adds at 100 images (events made inside
# the region), the whole graph's kernels and gaps on the real clock at 100 images, the single-channel plans at 100
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 .devrun/s11b/timing_ab.py > $OUT/timing-ab.txt 2>&1
echo "timing_ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/timing-ab.txt | grep round
timeout 120 python3 .devrun/s11b/timeline.py fa19,sp19,minidnn,fa18 100 > $OUT/timeline-100.txt 2>&1
echo "timeline rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/timeline-100.txt | tail -24
timeout $((560-SECONDS)) python3 .devrun/s11/c1_plans.py fa19,sp19,minidnn,fa18 100 > $OUT/c1-plans-100.txt 2>&1
echo "c1_plans rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/c1-plans-100.txt | grep "in force"
