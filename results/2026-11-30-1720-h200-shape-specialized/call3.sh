# session 17, call 3 (3685061): bench and the whole network with --baselines (cudnn, eager, torch.compile in the same
# process), the table of issue 28; then gpu-wgmma's small shapes under racecheck, and verify of gpu-wgmma
export COMMIT=3685061; t0=$SECONDS
DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 400 bash scripts/device-check.sh bench whole > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check|x floor|Op Time" $OUT/device-check.log | tail -14; tail -30 $OUT/bench.txt 2>/dev/null
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
S=results/2026-11-30-0655-h200-small-batch/san14.py
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 --print-limit 20 python3 $S > $OUT/san-racecheck.txt 2>&1
echo "racecheck rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|Error|runs" $OUT/san-racecheck.txt | tail -3
timeout $((575-SECONDS+t0)) python3 -m convbench verify --impl gpu-wgmma --device cuda --shapes 60 --wide-shapes 13 --seed 4 > $OUT/verify-gpu-wgmma.txt 2>&1
echo "verify rc=$? $((SECONDS-t0)) s"; tail -6 $OUT/verify-gpu-wgmma.txt
