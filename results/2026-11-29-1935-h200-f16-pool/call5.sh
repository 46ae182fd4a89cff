# session 10, call 5 (carry .devrun/s10): act_pool's grid as one wave of resident blocks, its staging size; GPU test,
# then the whole network of minidnn against PyTorch's ops
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 100 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -4
timeout 100 python3 .devrun/s10/ap_sweep.py 10000,100 > $OUT/ap-sweep.txt 2>&1
echo "sweep rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ap-sweep.txt | tail -3
timeout 120 python3 .devrun/s10/ab3.py 10000,100 minidnn > $OUT/ab5.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ab5.txt | grep whole
