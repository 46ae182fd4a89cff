# session 20, call 3 (6253fc4): gpu-wgmma's conv2 plans of fa19 and fa18 at 100 images swept again, now timed by
# CUPTI (the shipped ones were picked by Op Time), against the shipped plans; then bench at 100 images on the swept
# plans (this call's user file)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
python3 -c "
from convbench.core.gpu import tuning
for net, key in (('fa19', 'C12M24K5H33W33/fp16x3/small'), ('fa18', 'C12M24K7H33W33/fp16x3/small')):
    print(net, key, tuning.shipped('NVIDIA-H200').get('gpu-wgmma', {}).get(key))
" > $OUT/shipped.txt 2>&1; cat $OUT/shipped.txt
for net in fa18 fa19; do
  timeout 150 python3 -m convbench sweep --impl gpu-wgmma --net $net --batch 100 > $OUT/sweep-wgmma-$net-100.txt 2>&1
  echo "sweep $net rc=$? $((SECONDS-t0)) s"; grep -E "conv2|\*" $OUT/sweep-wgmma-$net-100.txt | head -8
done
cp /tmp/cbcache/tuning/*.json $OUT/ 2>/dev/null
export COMMIT=6253fc4
DEVICE_KIND=nvidia-h200 NETS=fa19,fa18 SIZES=100 IMPLS=cudnn,gpu-wgmma timeout $((590-SECONDS+t0)) bash scripts/device-check.sh bench > $OUT/device-check.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; grep -E "images · cuda|Σ|conv" $OUT/bench.txt 2>/dev/null
