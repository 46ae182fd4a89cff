export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py -k "fma or nan_input" > $OUT/pytest-fma.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-fma.txt
t0=$SECONDS
timeout $((585-SECONDS)) python3 .devrun/s3/fma_sweep.py $OUT/fma-sweep.json $((560-SECONDS)) 2>&1 | tee $OUT/fma-sweep.txt
echo "sweep $((SECONDS-t0)) s"
