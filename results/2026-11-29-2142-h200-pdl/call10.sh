# session 11, call 10 (as call 9 with the ring depth STAGES 3, 4, 6 swept)
# session 11, call 9 (carry .devrun/s11e): dense_mma_kernel's splits at 100 images (the GEMM at one 8-warp block an
# SM, bound by each warp's instruction latency): each reachable split count, CUPTI times of the GEMM and the finish
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
for net in fa19 fa18 sp19; do
  timeout 100 python3 .devrun/s11e/dense_small.py $net 100 3,4,6 > $OUT/dense-small-$net.txt 2>&1
  echo "$net rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/dense-small-$net.txt | grep splits
done
