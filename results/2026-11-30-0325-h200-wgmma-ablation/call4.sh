# session 13, call 3 (carry .devrun/s13): the knobs removed (GPU tests of gpu-wgmma and -taps); the ablation with the
# epilogue switched off
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
VARIANTS=copy,mma-only,noepi,mma-noepi,sync-only,barriers timeout 200 python3 .devrun/s13/abl_ab.py fa19,fa18,sp19,minidnn 10000 2>&1 | grep -v -i warn > $OUT/abl-epi.txt
echo "abl rc=$? $((SECONDS-t0)) s"; cat $OUT/abl-epi.txt
timeout 300 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py tests/test_wgmma_taps.py > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
