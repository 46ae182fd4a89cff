# session 20, call 5 (036bfc2 + c1_fma_ru.cu): the FMA kernel's input-row loop unrolled (RU 1) against rolled, on
# sp19's and mini-dnn's conv1, plain and pooled, at 10000 and 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 400 python3 results/2026-12-01-0457-h200-fma-plain-conv1/ab_ru.py sp19,minidnn 10000,100 2>&1 | grep -v -i warn > $OUT/ab-ru.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-ru.txt
