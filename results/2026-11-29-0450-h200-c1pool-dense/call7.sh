export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py -k "single_channel and matches" > $OUT/pytest-c1.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-c1.txt
t0=$SECONDS
timeout 130 python3 .devrun/ab/ab_c1.py $OUT/ab-c1.json 2>&1 | tee $OUT/ab-c1.txt
echo "ab $((SECONDS-t0)) s"
for net in fa19 sp19 minidnn fa18; do
  timeout 40 python3 -m convbench run --whole-network --net $net --size 10000 --json > $OUT/whole-$net.json 2>$OUT/whole-$net.err
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['net'], d['images'], round(d['network_time_s']*1e3,4), 'ms', 'x floor', round(d['x_floor'],2), 'Correctness', d['correctness'])" $OUT/whole-$net.json || tail -2 $OUT/whole-$net.err
done
