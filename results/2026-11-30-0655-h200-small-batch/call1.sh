# session 14, call 1 (carry .devrun/s14): gpu-wgmma's prologue — the weights by cp.async (cpw), the producer's
# conversion unrolled by 2 (u2), item 0 converted by all threads (join): A/B per conv2 layer against HEAD's kernel,
# stamped breakdowns at 100 images, the GPU tests of the working tree's kernel, compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s14
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 220 python3 $D/ab14.py fa19,sp19,minidnn,fa18 100,1000,10000 2>&1 | grep -v -i warn > $OUT/ab14.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab14.txt
timeout 60 python3 $D/precompile.py fa19,fa18,minidnn 100 st_head.cu st_cpw.cu st_cpw_u2.cu st_cpw.cu:1 st_cpw_u2.cu:1 2>&1 | tail -1
echo "precompile $((SECONDS-t0)) s"
for v in head cpw cpw_u2; do STAMP_SRC=st_$v.cu timeout 45 python3 $D/stamp_run.py fa19,fa18,minidnn 100 2>&1 | grep -v -i warn >> $OUT/stamps.txt; done
for v in cpw cpw_u2; do JOIN_FIRST=1 STAMP_SRC=st_$v.cu timeout 45 python3 $D/stamp_run.py fa19,fa18,minidnn 100 2>&1 | grep -v -i warn >> $OUT/stamps.txt; done
echo "stamps $((SECONDS-t0)) s"; cat $OUT/stamps.txt
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py -k "random_shapes or alignment" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
for j in 0 1; do for tool in memcheck racecheck; do
  JOIN_FIRST=$j timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $D/san14.py > $OUT/san-$tool-join$j.txt 2>&1
  echo "$tool join $j rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san14 target|Error" $OUT/san-$tool-join$j.txt | tail -3
done; done
