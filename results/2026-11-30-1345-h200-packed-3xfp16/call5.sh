# session 16, call 5 (c59f2c7): the whole network of fa19 and mini-dnn at 10000 images with the shipped plans, the
# whole network's GPU tests, verify of gpu-wgmma (60 shapes, 13 wide-range)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; export COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo c59f2c7)
NETS=fa19,minidnn DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000 timeout 110 bash scripts/device-check.sh whole > $OUT/whole-check.log 2>&1
echo "whole rc=$? $((SECONDS-t0)) s"; grep -E "^whole" $OUT/whole-check.log
timeout 200 python3 -m pytest -m gpu tests/test_whole.py -q -p no:cacheprovider > $OUT/pytest-whole.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-whole.txt
timeout 100 python3 -m convbench verify --impl gpu-wgmma --device cuda --shapes 60 --wide-shapes 13 --seed 4 > $OUT/verify-gpu-wgmma.txt 2>&1
echo "verify rc=$? $((SECONDS-t0)) s"; tail -6 $OUT/verify-gpu-wgmma.txt
