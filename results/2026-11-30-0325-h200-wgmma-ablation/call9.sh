# session 13, call 8 (carry .devrun/s13): sp19's conv2 (reduction 150) on gpu-igemm-tc's kernel against gpu-wgmma's,
# now that its descriptors are in uniform registers; the whole network with gpu-wgmma's kernel from reductions of 64
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 scripts/optin_ab.py --what short,whole --nets sp19 --sizes 10000,1000 --configs wgmma-short --json $OUT/short.json 2>&1 | grep -v -i warn > $OUT/short.txt
echo "short rc=$? $((SECONDS-t0)) s"; cat $OUT/short.txt
