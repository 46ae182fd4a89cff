# session 19, call 8 (04d2039): racecheck and synccheck of the FMA kernel with IPT; mini-dnn's and sp19's whole networks
# with eager and torch.compile at 10000 and 100 images on the shipped plans; their graphs' kernels
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
for tool in racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 .devrun/s19/san_c1.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|launches" $OUT/san-$tool.txt | tail -2
done
export COMMIT=04d2039
NETS=minidnn,sp19 DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 200 bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check" $OUT/device-check.log | tail -6
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/whole.json"))
for r in d:
    e, c = r["eager"], r["compile"]
    print(r["net"], r["images"], f"{r['network_time_s']*1e6:.1f} us", f"x{e['speedup_x']:.2f} eager x{c['speedup_x']:.2f} compile",
          f"floor x{r['x_floor']:.2f}", "corr", r["correctness"], e["correctness"], f"err {r['rel_error_vs_fp64']:.2e}")
PY
timeout 60 python3 .devrun/s19/graph_kernels.py minidnn,sp19 10000,100 2>&1 | grep -v -i warn > $OUT/graph-kernels.txt; grep -v steps $OUT/graph-kernels.txt; grep "replay" $OUT/graph-kernels.txt | cut -c1-80
