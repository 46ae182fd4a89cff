#!/usr/bin/env bash
# Every GPU path of "bring your own kernel" (`--impl PATH`), in one device call; logs under $OUT/user-kernels/:
#   1. pytest -m gpu tests/test_user_kernels.py
#   2. each example (Python, MXNet-era kernel, mini-dnn new-forward.cu): verify (50 shapes), then run on minidnn and
#      sp19 at 10000 images with --weights own (Correctness must equal the reference's: 0.8917 and 0.8881)
#   3. the broken examples: wrong results -> verify FAIL (exit 1); compile errors and out-of-bounds writes -> one
#      line, exit 2 (that the process stays usable after a fault is a test of step 1)
#   4. compute-sanitizer: memcheck finds the out-of-bounds writes (sandbox off, so the fault happens in the process
#      the sanitizer watches); memcheck and racecheck find nothing in the good CUDA examples
# Device tool:  run  command="bash scripts/device-user-kernels.sh"   (about 6-9 minutes on an H100; STAGES=12 and
# STAGES=34 split it into two calls)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/device-out} PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 CONVBENCH_CACHE=${CONVBENCH_CACHE:-/tmp/convbench-cache}
dir=$OUT/user-kernels
mkdir -p "$dir"
summary=$dir/summary.txt
: >"$summary"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$dir/gpu.txt"

# [WANT=REGEX] expect RC NAME CMD...: run CMD (at most 300 s), its output in $dir/NAME.log; one summary line: ok if
# the exit code is RC (and the output matches REGEX, when given)
expect() {
    local want=$1 name=$2
    shift 2
    local t0=$SECONDS
    timeout 300 "$@" >"$dir/$name.log" 2>&1
    local rc=$?
    local verdict=ok
    [ "$rc" = "$want" ] || verdict=UNEXPECTED
    [ -z "${WANT:-}" ] || grep -qE "$WANT" "$dir/$name.log" || verdict=UNEXPECTED
    printf '%-10s %-38s exit %3s (want %s) %4ss  %s\n' "$verdict" "$name" "$rc" "$want" $((SECONDS - t0)) \
        "$(grep -E '^(Correctness|convbench: error)' "$dir/$name.log" | tr '\n' ' ' | cut -c1-220)" | tee -a "$summary"
}
cb=(python3 -m convbench)  # an array, not a function: `timeout` runs programs
stage() { [[ ${STAGES:-1234} == *$1* ]]; }

if stage 1; then
echo "== 1. pytest -m gpu"
expect 0 pytest-gpu python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_user_kernels.py
fi

if stage 2; then
echo "== 2. examples: verify, then run at 10000 images"
for ex in python_conv.py mxnet_forward.cu new-forward.cu; do
    expect 0 "verify-$ex" "${cb[@]}" verify --device cuda --impl "examples/$ex" --seed 11
    for net in minidnn sp19; do
        want=$([ "$net" = minidnn ] && echo 0.8917 || echo 0.8881)  # the reference's, README's weights table
        WANT="^Correctness: $want " expect 0 "run-$net-$ex" "${cb[@]}" run --device cuda --impl "examples/$ex" --net "$net" --weights own --size 10000
    done
done
if [ -n "${CONVBENCH_FIXTURES:-}" ]; then  # the course's own model files, carried to the GPU machine
    for ex in python_conv.py mxnet_forward.cu new-forward.cu; do
        WANT="^Correctness: 0.8714 " expect 0 "run-course-minidnn-$ex" "${cb[@]}" run --device cuda --impl "examples/$ex" \
            --weights "$CONVBENCH_FIXTURES/course/minidnn/weights-86.bin" --size 10000
        WANT="^Correctness: 0.839[78] " expect 0 "run-course-sp19-$ex" "${cb[@]}" run --device cuda --impl "examples/$ex" \
            --weights "$CONVBENCH_FIXTURES/course/mxnet/sp19-ece408-0002.params" --size 10000
    done
fi
for net in minidnn sp19; do  # the library beside them, same card, same run
    expect 0 "run-$net-cudnn" "${cb[@]}" run --device cuda --impl cudnn --net "$net" --weights own --size 10000
done
fi

if stage 3; then
echo "== 3. broken examples"
WANT=FAIL expect 1 verify-python_wrong.py "${cb[@]}" verify --device cuda --impl examples/broken/python_wrong.py --seed 11
for f in mxnet_wrong.cu new-forward-wrong.cu; do
    WANT=FAIL expect 1 "verify-$f" "${cb[@]}" verify --device cuda --impl "examples/broken/$f" --seed 11
done
for f in mxnet_compile_error.cu new-forward-compile-error.cu mxnet_oob.cu new-forward-oob.cu; do
    case $f in *compile_error* | *compile-error*) WANT="^convbench: error: .*does not compile.*: .*error" ;;
               *) WANT="^convbench: error: .*(illegal memory access|IllegalAddress|InvalidAddressSpace)" ;; esac
    WANT=$WANT expect 2 "verify-$f" "${cb[@]}" verify --device cuda --impl "examples/broken/$f" --seed 11
    WANT=$WANT expect 2 "run-$f" "${cb[@]}" run --device cuda --impl "examples/broken/$f" --net sp19 --size 100
done
unset WANT
fi

if stage 4; then
echo "== 4. compute-sanitizer"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1  # every tensor its own allocation, as in scripts/sanitize.sh
for f in mxnet_oob.cu new-forward-oob.cu; do
    WANT="Invalid __global__ write" expect 9 "memcheck-$f" env CONVBENCH_SANDBOX=0 compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 5 \
        python3 -m convbench verify --device cuda --impl "examples/broken/$f" --shapes 4 --seed 3  # shape 3 (5 outputs) is the first whose writes leave y
    grep -m3 -E "Invalid __global__ write|========= +at " "$dir/memcheck-$f.log" | tee -a "$summary"
done
for tool in memcheck racecheck; do
    expect 0 "$tool-examples" env CONVBENCH_SANDBOX=0 compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 5 \
        python3 -m convbench verify --device cuda --impl examples/mxnet_forward.cu,examples/new-forward.cu --shapes 8 --seed 3
done
fi

echo "== summary ($summary)"
cat "$summary"
! grep -q UNEXPECTED "$summary"
