# call 3: the dense wgmma knobs at 1000 images (all four nets) and minidnn at 10000, then device-check whole
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 scripts/dense_ab.py --knobs --nets minidnn,fa19,sp19,fa18 --sizes 1000 --json $OUT/dense-knobs-1000.json > $OUT/dense-knobs-1000.txt 2>&1
echo "knobs 1000 rc=$? $((SECONDS-t0)) s"; grep best $OUT/dense-knobs-1000.txt
timeout 60 python3 scripts/dense_ab.py --knobs --nets minidnn --sizes 10000 --json $OUT/dense-knobs-minidnn.json > $OUT/dense-knobs-minidnn.txt 2>&1
echo "knobs minidnn rc=$? $((SECONDS-t0)) s"; grep best $OUT/dense-knobs-minidnn.txt
COMMIT=0e8abee DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout $((590-SECONDS)) bash scripts/device-check.sh whole
echo "whole rc=$? $((SECONDS-t0)) s"
