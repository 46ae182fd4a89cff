# session 12, call 4 (carry .devrun/s12): gpu-wgmma's producer with 16-byte band copies: A/B against the 4-byte
# copies per conv2 layer, the stamped breakdown, the whole network's kernels, GPU tests, compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 120 python3 .devrun/s12/new_ab.py fa19,sp19,minidnn,fa18 100,1000,10000 2>&1 | grep -v -i warn > $OUT/new-ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/new-ab.txt
STAMP_SRC=stamp_wgmma_new.cu timeout 90 python3 .devrun/s12/stamp_run.py fa19,fa18 10000 2>&1 | grep -v -i warn > $OUT/stamps-new.txt
echo "stamps rc=$? $((SECONDS-t0)) s"; cat $OUT/stamps-new.txt
for B in 100; do timeout 80 python3 .devrun/s12/timeline.py fa19,sp19,minidnn,fa18 $B 2>&1 | grep -v -i warn > $OUT/timeline-$B.txt; echo "timeline $B rc=$? $((SECONDS-t0)) s"; grep -E "span|wgmma_conv" $OUT/timeline-$B.txt; done
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py tests/test_wgmma_taps.py tests/test_whole.py -k "not dense and (wgmma or taps or whole_network_matches)" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
for tool in memcheck racecheck synccheck; do
  timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 .devrun/s12/san_prefetch.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|sanitizer target" $OUT/san-$tool.txt | tail -2
done
