# session 22, call 5 (029bd39): bench at 100 images with 200 reps, twice, a minute apart: does a run of 200 turns
# decide target 1 where runs of 20 moved by a quarter?
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for run in a b; do
    timeout 200 python3 -m convbench bench --device cuda --impls cudnn,gpu-igemm-tc,gpu-wgmma \
        --nets fa19,sp19,minidnn,fa18 --sizes 100 --reps 200 --layer-reps 5 --json $OUT/bench200-$run.json \
        > $OUT/bench200-$run.txt 2>&1
    echo "bench $run rc=$? $((SECONDS-t0)) s"
    grep -E "images · cuda|Σ|launch floor|warning" $OUT/bench200-$run.txt | cut -c1-200
    [ $run = a ] && sleep 45
done
