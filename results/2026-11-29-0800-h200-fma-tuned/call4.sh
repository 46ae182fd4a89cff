export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 560 python3 scripts/optin_ab.py --what whole --json $OUT/optin-whole.json 2>&1 | tee $OUT/optin-whole.txt
echo "whole $((SECONDS-t0)) s"
