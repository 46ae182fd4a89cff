# session 16, call 3 (7857c22): bench and the whole network with --baselines (cudnn, eager, torch.compile in the same
# process), the table of issue 28
export COMMIT=7857c22; DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 570 bash scripts/device-check.sh bench whole > $OUT/device-check.log 2>&1
echo "rc=$?"; grep -E "^whole|== device-check|x floor|Op Time" $OUT/device-check.log | tail -14; tail -30 $OUT/bench.txt 2>/dev/null
