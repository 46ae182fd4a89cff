# session 13, call 5 (carry .devrun/s13): gpu-wgmma with the extra batch of an item rotating over the consumer
# warpgroups (ABL_ROTATE, a copy of the kernel), shipped plans and others
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
VARIANTS=copy,rotate PLANS="1,3,3;1,2,3;2,2,3;2,3,3;2,4,2" timeout 400 python3 .devrun/s13/abl_ab.py fa19,fa18,sp19,minidnn ${SIZES:-10000,1000} 2>&1 | grep -v -i warn > $OUT/rotate.txt
echo "rotate rc=$? $((SECONDS-t0)) s"; cat $OUT/rotate.txt
