# session 15, call 2: call 1's illegal address in ab_pair.py's replays, step by step (dbg_pair.py), then under memcheck
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
timeout 100 python3 $R/dbg_pair.py fa19 100 > $OUT/call2-dbg.txt 2>&1; echo "dbg rc=$? $((SECONDS-t0)) s"; grep -v "^  " $OUT/call2-dbg.txt | head -12
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 python3 $R/dbg_pair.py fa19 100 > $OUT/call2-dbg-memcheck.txt 2>&1
echo "memcheck rc=$? $((SECONDS-t0)) s"; head -60 $OUT/call2-dbg-memcheck.txt | cut -c1-220
