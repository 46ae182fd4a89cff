# session 17, call 5 (working tree after 3685061: the small-batch plans of fa19's, fa18's and mini-dnn's conv2 shipped
# in tuning/): conv2 at 1 to 400 images, the shipped plan against the rule's; then bench and the whole network with
# --baselines at 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 120 python3 results/2026-11-30-1720-h200-shape-specialized/tiny.py fa19,fa18,minidnn 1,8,32,100,400 2>&1 | grep -v -i warn > $OUT/tiny.txt
echo "tiny rc=$? $((SECONDS-t0)) s"; cat $OUT/tiny.txt
export COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo 8828f11)
DEVICE_KIND=nvidia-h200 SIZES=100 WHOLE_SIZES=100 timeout $((560-SECONDS+t0)) bash scripts/device-check.sh whole bench > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check" $OUT/device-check.log | tail -10; grep -E "images · cuda|Σ" $OUT/bench.txt 2>/dev/null
