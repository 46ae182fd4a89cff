# call 8: convbench verify of gpu-wgmma-taps (60 shapes, the wide-range case on 13) and of gpu-wgmma after its move
# onto wgmma_conv.cuh, each precision
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
for prec in fp32 fp16 bf16; do
  timeout 150 python3 -m convbench verify --impl gpu-wgmma-taps,gpu-wgmma --device cuda --precision $prec --shapes 60 --seed 11 --json $OUT/verify-$prec.json > $OUT/verify-$prec.txt 2>&1
  echo "verify $prec rc=$? $((SECONDS-t0)) s"; tail -6 $OUT/verify-$prec.txt
done
