# session 12, call 2 (carry .devrun/s12): gpu-wgmma's prelaid weights: GPU tests, compute-sanitizer, the A/B in the
# whole network at 100 and 10000 images, and a plan sweep of conv2 at 100 images with prelaid weights
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 .devrun/s12/prelaid_ab.py fa19,sp19,minidnn,fa18 100,10000 sweep > $OUT/prelaid-ab.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/prelaid-ab.txt | grep -v "^      " | tail -40
grep -E "wgmma_conv" $OUT/prelaid-ab.txt
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py tests/test_whole.py -k "prelaid or laid or whole_network_matches or kernel_itself" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 .devrun/s12/prelaid_san.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|sanitizer target" $OUT/san-$tool.txt | tail -2
done
