# session 14, call 5 (tree 6d972df; the device machine of call 4, still warm): bench and the whole network
export COMMIT=6d972df; DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 560 bash scripts/device-check.sh bench whole > $OUT/device-check.log 2>&1
