# session 24, call 5 (51affcc + the sweep's small-batch range counts): the single-channel sweep's GPU tests; the
# per-instruction stall samples of call 1's Nsight Compute report (fa18 at 100 images, the whole network's graph)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
timeout 240 python3 -m pytest -m gpu tests/test_mma.py tests/test_launch_plans.py -q -p no:cacheprovider -k "sweep or plan" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest.txt | cut -c1-300
R=.devrun/s24/ncu-fa18-100.ncu-rep
for k in wgmma_conv_kernel dense_wgmma_kernel igemm_c1_kernel dense_finish_kernel; do
  timeout 60 ncu --import $R --page source --csv --print-source sass --kernel-name $k > $OUT/src-$k.csv 2>&1
  echo "$k rc=$? $(wc -l < $OUT/src-$k.csv) lines"; head -c 600 $OUT/src-$k.csv; echo
done
echo "$((SECONDS-t0)) s"
