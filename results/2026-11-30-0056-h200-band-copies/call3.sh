# session 12, call 3 (carry .devrun/s12): gpu-wgmma's conv2 with clock64 stamps per item and warpgroup
# (stamp_wgmma.cu, written by `python3 make_stamped.py` from gpu_15_wgmma.cu and wgmma_conv.cuh at cbee1a4)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
timeout 240 python3 .devrun/s12/stamp_run.py fa19,fa18,minidnn,sp19 10000,100 2>&1 | grep -v -i warn | tee $OUT/stamps.txt
