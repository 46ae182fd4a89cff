# session 15, call 8: whole/conv_pair.cu with one, two and three producer warpgroups (the consumers capped at 4 - N),
# against the two kernels, fa19 and sp19 at 100, 1000 and 10000 images; the GPU tests of the pair with two producers
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
timeout 230 python3 $R/ab_pair.py fa19,sp19 100,1000,10000 p1,p2,p3,two 2>&1 | grep -v -i warn > $OUT/call8-ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/call8-ab.txt
