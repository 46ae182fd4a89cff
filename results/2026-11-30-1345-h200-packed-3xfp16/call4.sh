# session 16, call 4 (7857c22): gpu-wgmma's plans swept again with the packed layout (convbench sweep records them in
# $CONVBENCH_CACHE/tuning, which this call's later steps read), the whole network with them, gpu-wgmma's GPU tests
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
for nb in fa19:10000 fa19:100 minidnn:10000 fa18:100; do
  net=${nb%%:*}; b=${nb##*:}
  timeout 85 python3 -m convbench sweep --impl gpu-wgmma --net $net --batch $b > $OUT/sweep-$net-$b.txt 2>&1
  echo "sweep $net $b rc=$? $((SECONDS-t0)) s"; grep -v "^\s*$" $OUT/sweep-$net-$b.txt | tail -6
done
cp /tmp/cbcache/tuning/*.json $OUT/ 2>/dev/null; cat /tmp/cbcache/tuning/*.json
mkdir -p $OUT/whole; export COMMIT=7857c22
OUT=$OUT/whole NETS=fa19,minidnn,fa18 DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 200 bash scripts/device-check.sh whole > $OUT/whole-check.log 2>&1
echo "whole rc=$? $((SECONDS-t0)) s"; grep -E "^whole" $OUT/whole-check.log
timeout 80 python3 -m pytest -m gpu tests/test_wgmma.py -q -p no:cacheprovider > $OUT/pytest-wgmma.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-wgmma.txt
