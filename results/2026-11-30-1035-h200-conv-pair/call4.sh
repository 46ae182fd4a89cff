# session 15, call 4: Nsight Compute of whole/conv_pair.cu at 1000 images (sp19, fa19): warp states, and the source
# page's stall samples by 200-instruction block (the producer's conv1 is the FFMA blocks)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
for net in sp19 fa19; do
  python3 $R/one_pair.py $net 1000 > /dev/null 2>&1  # compile once (the cache)
  timeout 100 ncu -k conv_pair_kernel -s 1 -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats python3 $R/one_pair.py $net 1000 > $OUT/call4-ncu-$net.txt 2>&1
  echo "$net rc=$? $((SECONDS-t0)) s"; grep -E "^    (Duration|Compute \(SM\) Throughput|Achieved Occupancy|Eligible Warps|Warp Cycles Per Issued|Issued Warp|No Eligible|Registers)" $OUT/call4-ncu-$net.txt | head -10
  timeout 100 ncu -k conv_pair_kernel -s 1 -c 1 --section SourceCounters --set none --import-source no --page source --print-source sass --csv python3 $R/one_pair.py $net 1000 > $OUT/call4-sass-$net.csv 2>&1
  python3 $R/ncu_stalls.py $OUT/call4-sass-$net.csv > $OUT/call4-stalls-$net.txt 2>&1; echo "stalls rc=$? $((SECONDS-t0)) s"; cat $OUT/call4-stalls-$net.txt | cut -c1-200
  gzip $OUT/call4-sass-$net.csv
done
