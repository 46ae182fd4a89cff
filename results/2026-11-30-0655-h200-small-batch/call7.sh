# session 14, call 7 (carry .devrun/s14; tree 9eb2c3e + the k-loop's step entries loaded a step ahead): A/B per conv2
# layer against 9eb2c3e's kernel, the GPU tests of gpu-wgmma and gpu-wgmma-taps (which shares the k-loop), racecheck
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s14
timeout 150 python3 $D/ab_pf.py fa19,sp19,minidnn,fa18 100,1000,10000 2>&1 | grep -v -i warn > $OUT/ab-pf.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-pf.txt
timeout 100 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py tests/test_wgmma_taps.py -k "random_shapes or alignment" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 --print-limit 20 python3 $D/san14.py > $OUT/san-racecheck.txt 2>&1
echo "racecheck rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san14 target|Error" $OUT/san-racecheck.txt | tail -3
