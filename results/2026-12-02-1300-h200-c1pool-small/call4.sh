# session 24, call 4 (51affcc): the whole network at 100 images with PyTorch eager and torch.compile (whole.json)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
export COMMIT=51affcc WHOLE_SIZES=100
DEVICE_KIND=nvidia-h200 timeout 400 bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
python3 - <<'PY'
import json, os
for r in json.load(open(os.environ["OUT"] + "/whole.json")):
    print(f"{r['net']:8s} {r['images']:6d} {r['network_time_s']*1e6:7.1f} us  x floor {r['x_floor']:.2f}  "
          f"eager {r['eager']['time_s']*1e6:7.1f} us ({r['eager']['speedup_x']:.2f}x)  compile "
          f"{r['compile']['time_s']*1e6:7.1f} us ({r['compile']['speedup_x']:.2f}x)  correctness {r['correctness']} "
          f"eager {r['eager']['correctness']} compile {r['compile']['correctness']}")
PY
ls $OUT
