# call 5 (carry .devrun/s6): where both conv2 kernels wait (Nsight Compute's SASS lines with their stall samples),
# fa19 at 10000 images: gpu-wgmma-taps (two accumulator sets) and gpu-wgmma; then the fixed course-layer tests
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
P='--section SourceCounters --set none --import-source no --page source --print-source sass --csv'
timeout 150 ncu -k wgmma_taps_kernel -s 2 -c 1 $P python3 .devrun/s6/one_taps.py fa19 10000 > $OUT/sass-taps-fa19.csv 2>&1
echo "ncu taps rc=$? $((SECONDS-t0)) s"
timeout 150 ncu -k wgmma_conv_kernel -s 2 -c 1 $P python3 .devrun/s6/one_conv2.py fa19 10000 > $OUT/sass-wgmma-fa19.csv 2>&1
echo "ncu wgmma rc=$? $((SECONDS-t0)) s"
for f in taps wgmma; do python3 .devrun/s6/regions.py $OUT/sass-$f-fa19.csv > $OUT/sass-$f-fa19-regions.txt; echo "== $f"; cat $OUT/sass-$f-fa19-regions.txt; done
timeout 100 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma_taps.py -k course > $OUT/pytest-course.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-course.txt
