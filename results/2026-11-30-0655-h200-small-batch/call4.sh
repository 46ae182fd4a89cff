# session 14, call 4 (carry .devrun/s14; tree 6d972df): the small-batch dense wgmma plan's ring knobs at 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s14
timeout 280 python3 $D/dense_knobs14.py fa19,fa18,sp18 100 2>&1 | grep -v -i warn > $OUT/dense-knobs.txt
echo "knobs rc=$? $((SECONDS-t0)) s"; cat $OUT/dense-knobs.txt
