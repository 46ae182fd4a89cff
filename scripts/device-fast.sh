#!/usr/bin/env bash
# Issue 4's measurements, one device call each (each inside 10 minutes; results under $OUT):
#   bash scripts/device-fast.sh check     GPU tests of the new code and verify (60 shapes, fused too)
#   bash scripts/device-fast.sh sanitize  compute-sanitizer memcheck + racecheck on gpu-igemm-tc, -fp16x3, -fp16, the dense
#                                         kernel, and the tensor-core conv's modes on the course layers (dev_fast)
#   bash scripts/device-fast.sh sweep     dev_fast's verify (every mode, fixed plans too) and a quick plan sweep
#                                         (PRECS=tf32x3,fp16x3,fp16 KINDS=plain,fused LAYERS=conv1,conv2 THS=4,6
#                                         WARPS=4x8x1,2x8x2 PADS=0,1 NOVERIFY=1)
#   bash scripts/device-fast.sh fp16x3    gpu-igemm-tc-fp16x3 alone: GPU tests, verify, sanitizer (many items), bench
#   bash scripts/device-fast.sh bench     bench (cudnn, gpu-per-layer, gpu-igemm-tc and its precision modes)
#   bash scripts/device-fast.sh wgmma     gpu-wgmma (rung 22) and its modes: smoke check, verify (60 shapes), timing on
#                                         the course layers against cudnn and gpu-igemm-tc (SWEEP=1: its plans too)
#   bash scripts/device-fast.sh wgmma-check  gpu-wgmma: GPU tests (the kernel forced on 40 shapes too), verify (60
#                                         shapes), compute-sanitizer memcheck / racecheck / synccheck
#   bash scripts/device-fast.sh wgmma-bench  bench: cudnn, gpu-igemm-tc (+fp16x3, fp16), gpu-wgmma (+fp16, bf16)
#   bash scripts/device-fast.sh wgmma-final  racecheck + memcheck (the kernel forced on 40 shapes), verify (60 shapes),
#                                         then bench: cudnn, gpu-igemm-tc, gpu-wgmma and their FP16 modes
#   bash scripts/device-fast.sh whole     the whole-network comparison against PyTorch eager and torch.compile
#   bash scripts/device-fast.sh final-a   issue 4's results run, part 1: GPU tests, verify (60 shapes), racecheck +
#                                         memcheck of the wgmma kernel, bench (targets 1, 2, 5)
#   bash scripts/device-fast.sh final-b   part 2, the next call on the same machine: whole network on every net
#                                         (targets 3, 4), `run` Correctness of the reduced-precision modes and --fuse,
#                                         dev_small.py at 100 images, Nsight Compute on the two slowest layers; its
#                                         many small files come back as final-b.tar.gz
#   bash scripts/device-fast.sh final-recheck  after the review's Python changes to the launch path: GPU tests, verify
#                                         (60 shapes), bench of cudnn, gpu-igemm-tc and gpu-wgmma; the dev scripts run once
#   bash scripts/device-fast.sh ncu-why   Nsight Compute (full set) on the whole network's fused conv1 stage (fa19, 10000
#                                         images) and on gpu-wgmma's fa19 conv2 at 100 images: the misses' profiles
#   bash scripts/device-fast.sh small     GPU tests of whole.py and gpu-wgmma, then where the time goes at 100 images
#                                         (dev_small.py: Op Time vs device time vs host time, wgmma plan sweep), and
#                                         the whole network on NETS (default fa19)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/device-out} PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 CONVBENCH_CACHE=${CONVBENCH_CACHE:-/tmp/convbench-cache}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
NEW=gpu-igemm-tc,gpu-igemm-tc-fp16x3,gpu-igemm-tc-tf32,gpu-igemm-tc-fp16,gpu-igemm-tc-bf16
NETS=${NETS:-fa19,sp19,minidnn,fa18}
M=dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed  # Nsight Compute: DRAM traffic, shared-memory wavefronts
# compute-sanitizer TOOL... on the wgmma kernel forced onto 40 random shapes (3xFP16), each run under LIMIT seconds
sanitize_wgmma() {
    local limit=$1 tool
    shift
    for tool in "$@"; do
        echo "== compute-sanitizer --tool $tool: the wgmma kernel forced on 40 random shapes (3xFP16)" >> "$OUT/sanitize-wgmma.log"
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 \
            --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma.py \
            -k "kernel_itself and fp16x3" 2>&1 | tail -4 >> "$OUT/sanitize-wgmma.log"
        echo "== exit code ${PIPESTATUS[0]}" >> "$OUT/sanitize-wgmma.log"
    done
    grep -E "^==|SUMMARY|passed|failed" "$OUT/sanitize-wgmma.log"
}
case "${1:-check}" in
check)
    timeout 420 python3 -m pytest -q -rf -m gpu -p no:cacheprovider -k "igemm or fused or whole or precision" \
        tests/test_impls.py tests/test_fused.py tests/test_whole.py tests/test_precision.py 2>&1 | tail -25 | tee "$OUT/pytest-gpu.log"
    timeout 120 python3 -m convbench verify --device cuda --impl "$NEW" --shapes 60 --seed 4 2>&1 | tee "$OUT/verify.log" | tail -14
    ;;
sanitize)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck; do
        for cmd in "-m convbench verify --device cuda --impl gpu-igemm-tc,gpu-igemm-tc-fp16x3,gpu-igemm-tc-fp16 --shapes 8 --seed 7" \
                   "scripts/sanitize_dense.py"; do
            echo "== compute-sanitizer --tool $tool python3 $cmd" >> "$OUT/sanitize.log"
            timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $cmd 2>&1 | tail -6 >> "$OUT/sanitize.log"
            echo "== exit code ${PIPESTATUS[0]}" >> "$OUT/sanitize.log"
        done
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    grep -E "^==|SUMMARY" "$OUT/sanitize.log"
    timeout 150 python3 scripts/dev_fast.py --out "$OUT" --no-verify --sizes 10000 --nets $NETS 2>&1 | grep -v -i warn > "$OUT/modes.log"
    tail -3 "$OUT/modes.log"
    ;;
sweep)
    timeout 560 python3 scripts/dev_fast.py --out "$OUT" --sizes 10000 --nets $NETS --sweep --quick --verify-shapes 30 \
        --precs "${PRECS:-tf32x3,fp16x3,fp16}" --kinds "${KINDS:-plain,fused}" ${LAYERS:+--layers $LAYERS} \
        ${THS:+--ths $THS} ${WARPS:+--warps $WARPS} ${PADS:+--pads $PADS} ${NOVERIFY:+--no-verify} 2>&1 \
        | grep -v -i warn > "$OUT/sweep.log"
    grep -E "^verify|best|error" "$OUT/sweep.log" | head -60
    ;;
fp16x3)  # after the 3xFP16 review fixes: its GPU tests, verify, compute-sanitizer on many items, bench vs cudnn
    timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py tests/test_impls.py \
        tests/test_fused.py -k "fp16x3 or many_items" 2>&1 | tail -15 | tee "$OUT/pytest-fp16x3.log"
    timeout 90 python3 -m convbench verify --device cuda --impl gpu-igemm-tc-fp16x3 --shapes 60 --seed 4 2>&1 \
        | tail -8 | tee "$OUT/verify-fp16x3.log"
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck; do
        echo "== compute-sanitizer --tool $tool: test_every_image_is_accurate_when_blocks_take_many_items" >> "$OUT/sanitize-fp16x3.log"
        timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu \
            -p no:cacheprovider tests/test_mma.py -k "many_items and fp16x3" 2>&1 | tail -4 >> "$OUT/sanitize-fp16x3.log"
        echo "== exit code ${PIPESTATUS[0]}" >> "$OUT/sanitize-fp16x3.log"
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    grep -E "^==|SUMMARY|passed|failed" "$OUT/sanitize-fp16x3.log"
    timeout 150 python3 -m convbench bench --device cuda --impls cudnn,gpu-igemm-tc,gpu-igemm-tc-fp16x3 --nets $NETS \
        --sizes 100,10000 --layer-reps 1 --json "$OUT/bench-fp16x3.json" > "$OUT/bench-fp16x3.txt" 2>&1
    tail -3 "$OUT/bench-fp16x3.txt"
    ;;
bench)
    timeout 540 python3 -m convbench bench --device cuda --impls "cudnn,gpu-per-layer,$NEW" --nets $NETS \
        --sizes 100,10000 --layer-reps 1 --remeasure --json "$OUT/bench-fast.json" > "$OUT/bench-fast.txt" 2>&1
    tail -4 "$OUT/bench-fast.txt"
    ;;
wgmma)
    timeout ${SMOKE_S:-300} python3 scripts/dev_wgmma.py --out "$OUT" --nets $NETS --sizes ${SIZES:-10000} \
        ${SWEEP:+--sweep} 2>&1 | grep -v -i warn | tee "$OUT/dev-wgmma.log" | grep -E "smoke|best|wgmma|cudnn|igemm" | tail -60
    timeout 120 python3 -m convbench verify --device cuda --impl gpu-wgmma,gpu-wgmma-fp16,gpu-wgmma-bf16 --shapes 60 \
        --seed 4 2>&1 | tee "$OUT/verify-wgmma.log" | tail -8
    ;;
ncu-wgmma)  # Nsight Compute on one launch per course layer (LAYERS="fa19:conv1:wgmma-fp16 ..."), text to $OUT
    G=$(ncu --query-metrics 2>/dev/null | grep -o "sm__pipe_tensor_op_gmma_cycles_active" | head -1)
    [ -n "$G" ] && M=$M,$G.avg.pct_of_peak_sustained_active
    for spec in ${LAYERS:-fa19:conv1:wgmma-fp16 fa19:conv2:wgmma-fp16x3 fa19:conv2:wgmma-fp16}; do
        IFS=: read net layer prec <<< "$spec"
        timeout 150 ncu --kernel-name regex:"wgmma_conv_kernel|igemm_tc_kernel" --launch-count 1 --section SpeedOfLight \
            --section WarpStateStats --section Occupancy --metrics $M python3 scripts/dev_ncu_layer.py $net $layer $prec \
            > "$OUT/ncu-$net-$layer-$prec.txt" 2>&1
        grep -E "Duration|Throughput|dram__|gmma|wavefronts|Stall|Achieved Occupancy|Warp Cycles Per Issued" "$OUT/ncu-$net-$layer-$prec.txt" | head -30
    done
    ;;
wgmma-check)
    timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py tests/test_impls.py -k wgmma \
        2>&1 | tail -6 | tee "$OUT/pytest-wgmma.log"
    timeout 120 python3 -m convbench verify --device cuda --impl gpu-wgmma,gpu-wgmma-fp16,gpu-wgmma-bf16 --shapes 60 \
        --seed 4 2>&1 | tail -8 | tee "$OUT/verify-wgmma.log"
    sanitize_wgmma 170 memcheck racecheck synccheck
    ;;
wgmma-bench)
    timeout 560 python3 -m convbench bench --device cuda \
        --impls cudnn,gpu-igemm-tc,gpu-igemm-tc-fp16x3,gpu-wgmma,gpu-igemm-tc-fp16,gpu-wgmma-fp16,gpu-wgmma-bf16 \
        --nets $NETS --sizes 100,10000 --layer-reps 1 --remeasure --json "$OUT/bench-fast.json" > "$OUT/bench-fast.txt" 2>&1
    tail -4 "$OUT/bench-fast.txt"
    ;;
wgmma-final)
    sanitize_wgmma 100 racecheck memcheck
    timeout 60 python3 -m convbench verify --device cuda --impl gpu-wgmma,gpu-wgmma-fp16,gpu-wgmma-bf16 --shapes 60 \
        --seed 4 2>&1 | tail -8 | tee "$OUT/verify-wgmma.log" | grep -E "gpu-wgmma"
    timeout 420 python3 -m convbench bench --device cuda --impls cudnn,gpu-igemm-tc,gpu-wgmma,gpu-igemm-tc-fp16,gpu-wgmma-fp16 \
        --nets $NETS --sizes 100,10000 --layer-reps 1 --remeasure --json "$OUT/bench-fast.json" > "$OUT/bench-fast.txt" 2>&1
    echo "bench exit $?"; tail -3 "$OUT/bench-fast.txt"
    ;;
final-a)
    timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py tests/test_wgmma.py \
        tests/test_mma.py tests/test_impls.py -k "not kernel_itself and not triton and (whole or wgmma or igemm or mma or Dense)" \
        2>&1 | tail -8 | tee "$OUT/pytest-final.log"
    timeout 80 python3 -m convbench verify --device cuda --impl gpu-wgmma,gpu-wgmma-fp16,gpu-wgmma-bf16,gpu-igemm-tc \
        --shapes 60 --seed 4 2>&1 | tail -10 | tee "$OUT/verify-final.log" | grep -E "gpu-"
    sanitize_wgmma 80 racecheck memcheck
    timeout 330 python3 -m convbench bench --device cuda --impls cudnn,gpu-igemm-tc,gpu-wgmma,gpu-igemm-tc-fp16,gpu-wgmma-fp16 \
        --nets $NETS --sizes 100,10000 --layer-reps 1 --remeasure --json "$OUT/bench-fast.json" > "$OUT/bench-fast.txt" 2>&1
    echo "bench exit $?"; tail -3 "$OUT/bench-fast.txt"
    ;;
final-b)
    W=/tmp/final-b; mkdir -p $W
    for net in ${NETS//,/ }; do
        timeout 100 python3 scripts/whole_network.py --nets $net --sizes 100,10000 --reps 20 \
            --out "$W/whole-$net.json" > "$W/whole-$net.txt" 2>&1
        grep -E "^$net " "$W/whole-$net.txt"
    done
    for net in ${NETS//,/ }; do
        for run in "gpu-wgmma fp16" "gpu-wgmma bf16" "gpu-igemm-tc tf32" "gpu-igemm-tc fp32 --fuse"; do
            set -- $run
            timeout 60 python3 -m convbench run --device cuda --net $net --impl $1 --precision $2 ${3:-} --size 10000 \
                --json > "$W/run-$net-$1-$2${3:+-fuse}.json" 2> "$W/run-$net-$1-$2${3:+-fuse}.err"
            python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], d['correctness'], d.get('correctness_delta'))" \
                "$W/run-$net-$1-$2${3:+-fuse}.json" 2>&1 | tail -1
        done
    done
    timeout 90 python3 scripts/dev_small.py --out $W --impls cudnn,gpu-igemm-tc,gpu-wgmma 2>&1 | grep -v -i warn > "$W/dev-small.log"
    tail -8 "$W/dev-small.log"
    for spec in fa19:conv2:wgmma-fp16x3 fa19:conv1:tf32x3; do
        IFS=: read net layer prec <<< "$spec"
        timeout 60 ncu --kernel-name regex:"wgmma_conv_kernel|igemm_tc_kernel" --launch-count 1 --section SpeedOfLight \
            --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis --metrics $M \
            python3 scripts/dev_ncu_layer.py $net $layer $prec > "$W/ncu-$net-$layer-$prec.txt" 2>&1
        grep -E "Duration|Throughput|Pipe|Stall|Achieved Occupancy|Warp Cycles Per Issued" "$W/ncu-$net-$layer-$prec.txt" | head -14
    done
    tar czf "$OUT/final-b.tar.gz" -C $W .
    ;;
final-recheck)
    timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py tests/test_wgmma.py \
        tests/test_mma.py tests/test_impls.py -k "not kernel_itself and not triton and (whole or wgmma or igemm or mma or Dense)" \
        2>&1 | tail -8 | tee "$OUT/pytest-recheck.log"
    timeout 80 python3 -m convbench verify --device cuda --impl gpu-wgmma,gpu-wgmma-fp16,gpu-wgmma-bf16,gpu-igemm-tc \
        --shapes 60 --seed 4 2>&1 | tail -10 | tee "$OUT/verify-recheck.log" | grep -E "gpu-"
    timeout 240 python3 -m convbench bench --device cuda --impls cudnn,gpu-igemm-tc,gpu-wgmma --nets $NETS \
        --sizes 100,10000 --layer-reps 1 --json "$OUT/bench-recheck.json" > "$OUT/bench-recheck.txt" 2>&1
    echo "bench exit $?"
    IMAGES=100 timeout 60 python3 scripts/dev_ncu_layer.py fa19 conv1 fused-tf32x3 && echo "dev_ncu_layer fused ok"
    timeout 90 python3 scripts/dev_small.py --out "$OUT" --nets sp19 --impls cudnn,gpu-wgmma 2>&1 | grep -v -i warn | tail -4
    ;;
ncu-why)
    for spec in fa19:conv1:fused-tf32x3:10000 fa19:conv2:wgmma-fp16x3:100 fa19:conv2:wgmma-fp16x3:10000; do
        IFS=: read net layer prec n <<< "$spec"
        IMAGES=$n timeout 150 ncu --kernel-name regex:"wgmma_conv_kernel|igemm_tc_kernel" --launch-count 1 \
            --set full --import-source no python3 scripts/dev_ncu_layer.py $net $layer $prec \
            > "$OUT/ncu-full-$net-$layer-$prec-$n.txt" 2>&1
        grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|Issue Slots Busy|highest-utilized|Achieved Occupancy|Warp Cycles Per Issued|Stall" \
            "$OUT/ncu-full-$net-$layer-$prec-$n.txt" | head -12
    done
    ;;
small)
    timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py tests/test_wgmma.py \
        -k "not kernel_itself" 2>&1 | tail -6 | tee "$OUT/pytest-small.log"
    timeout 240 python3 scripts/dev_small.py --out "$OUT" --nets ${SMALL_NETS:-fa19,sp19,minidnn,fa18} \
        --impls cudnn,gpu-igemm-tc,gpu-wgmma --sweep 2>&1 | grep -v -i warn > "$OUT/dev-small.log"
    grep -v "^   sweep" "$OUT/dev-small.log" | tail -40
    for net in ${NETS_WHOLE:-fa19}; do
        timeout 150 python3 scripts/whole_network.py --nets $net --sizes 100,10000 --reps 20 \
            --out "$OUT/whole-$net.json" > "$OUT/whole-$net.txt" 2>&1
        grep -v -i warn "$OUT/whole-$net.txt" | tail -12
    done
    ;;
whole)
    for net in ${NETS//,/ }; do  # one file per network: a network cut short by its timeout costs only itself
        timeout 120 python3 scripts/whole_network.py --nets $net --sizes 100,10000 --reps 20 \
            --out "$OUT/whole-$net.json" > "$OUT/whole-$net.txt" 2>&1
        grep -E "^$net " "$OUT/whole-$net.txt"
    done
    ;;
esac
