export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache COLUMNS=200 PYTHONUNBUFFERED=1
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$SECONDS
timeout 250 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py tests/test_mma.py > $OUT/pytest.log 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -25 $OUT/pytest.log
t0=$SECONDS
timeout 120 python3 scripts/dense_ab.py --nets fa19,sp19,minidnn,fa18 --sizes 100,1000,10000 --min-batch 1 --json $OUT/dense-ab.json > $OUT/dense-ab.txt 2>&1
echo "dense_ab rc=$? $((SECONDS-t0)) s"; cat $OUT/dense-ab.txt | tail -30
t0=$SECONDS
timeout 170 python3 -m convbench sweep --impl gpu-igemm-tc --net fa19 --batch 10000 --quick > $OUT/sweep-fa19-10000.txt 2>&1
echo "sweep rc=$? $((SECONDS-t0)) s"; grep -E "\*|c1pool|epi2|conv" $OUT/sweep-fa19-10000.txt | head -40
