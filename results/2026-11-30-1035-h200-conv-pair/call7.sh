# session 15, call 7 (run twice: the first, call7a-pytest.txt, with the fp32 rate only, which failed on fp16x3):
# call 6's two failures again, the stub ceilings of tests/test_whole.py now with fp32 and fp16x3 rates (a conv1 on the fp32 pipe: the
# pair's or gpu-igemm-tc's FMA kernel; a conv2 on gpu-wgmma's: on an sm_90 GPU)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "stage_times_cover or benchmark_reports" > $OUT/call7-pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/call7-pytest.txt; grep -E "^(E  |FAILED)" $OUT/call7-pytest.txt | head -12
