# session 13, call 2 (carry .devrun/s13): gpu-wgmma's conv2 with its parts switched off (abl_ab.py)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $OUT/clocks.txt &
timeout 540 python3 .devrun/s13/abl_ab.py fa19,fa18,sp19,minidnn ${SIZES:-10000,1000} 2>&1 | grep -v -i warn > $OUT/abl.txt
echo "abl rc=$? $((SECONDS-t0)) s"; cat $OUT/abl.txt
kill %1; sort $OUT/clocks.txt | uniq -c | sort -rn | head -5
