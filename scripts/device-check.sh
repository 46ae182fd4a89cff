#!/usr/bin/env bash
# One measurement run on a GPU machine, for results/<run>/ (results/README.md). From the repository root, with $OUT
# set to the folder for the run's files:
#
#   bash scripts/device-check.sh [STEP ...]        steps: tests verify bench precision whole small graph dense
#                                                   c1 sweep sanitize sandbox clock grade feedback timing
#                                                   (default: tests verify bench whole sanitize, in order)
#
#   (manifest)  $OUT/manifest.json: card, driver, CUDA, cuDNN, torch, CuPy, Triton, commit ($COMMIT, else
#               `git rev-parse HEAD`), command, UTC date, device kind ($DEVICE_KIND, else named from the card and the
#               GPU count), the steps run and their exit codes, and `results` (bench.json, precision.json,
#               whole.json when made)
#   tests       pytest -m gpu over tests/, then the rest of the suite          -> $OUT/pytest-gpu.log
#   verify      convbench verify --device cuda --shapes 60 --wide-shapes 13 --seed 4 of every GPU impl (one call
#               each)                                                          -> $OUT/verify.log
#   bench       convbench bench of cudnn, gpu-igemm-tc, gpu-wgmma on fa19, sp19, minidnn, fa18 at 100 and 10000
#               images                                                         -> $OUT/bench.json, $OUT/bench.txt
#   precision   the same bench of the reduced-precision variants at 10000 images (their target: the memory floor)
#                                                                              -> $OUT/precision.json, .txt
#   whole       convbench run --whole-network --json on each net, at each WHOLE_SIZES and WHOLE_PRECISIONS (fp32
#               with --baselines: PyTorch eager and torch.compile in the same process)
#                                                                              -> $OUT/whole.json (a list)
#   small       scripts/small_batch_breakdown.py at 100 images: Op Time against the kernels' GPU time and the
#               host's cost of a call                                          -> $OUT/small.json, $OUT/small.txt
#   graph       scripts/graph_timeline.py at GRAPH_SIZES (default 100): each kernel's start and end in a replay of
#               the whole network's graph, with and without programmatic launches
#                                                                              -> $OUT/graph-timeline.json, .txt
#   dense       scripts/dense_ab.py at DENSE_SIZES (default 100,1000,10000): the dense layers' mma and wgmma GEMMs,
#               time and error                                                 -> $OUT/dense-ab.json, .txt
#   c1          scripts/optin_ab.py at 10000 and 100 images: the pooled conv1 layers on gpu-igemm-tc's mma kernel
#               (POOL) and its FMA kernel (igemm.C1_FMA), sp19's conv2 on gpu-wgmma's kernel, then the whole
#               network shipped and with each switch turned (C1_FMA, graph.WGMMA_THEN_POOL, wgmma.MIN_REDUCTION)
#                                                                              -> $OUT/optin-ab.json, .txt
#   sweep       convbench sweep --impl gpu-igemm-tc --quick of SWEEP_NETS (fa19,fa18) at SWEEP_SIZES (10000,100):
#               the general kernel's plans, the single-channel ones, plain and pooled (c1pool, c1fma)
#                                                     -> $OUT/sweep-NET-SIZE.txt, $OUT/sweep-plans.json
#   sanitize    compute-sanitizer (SANITIZE_TOOLS, default memcheck): verify of gpu-wgmma and gpu-igemm-tc on a few
#               shapes, the wgmma kernel forced onto random shapes, the whole network's dense kernel, the FMA kernel
#               for pooled conv1 layers
#                                                                              -> $OUT/sanitize.log
#   sandbox     the sandbox's self-test on this GPU grader, its GPU attacks and its limits (tests/adversarial)
#                                                                              -> $OUT/sandbox.log
#   clock       scripts/clock_jitter.py at 100 and 10000 images: the spread of convbench's clock around an empty
#               sandboxed call of each kind                                -> $OUT/clock-N.json (and the log)
#   grade       convbench grade of each GRADE_SETS folder of .submissions/ (real student files, never committed:
#               carry them; an entry FOLDER:GLOB takes some of its submissions) with the course's files (COURSE,
#               default .fixtures/course; GRADE_SIZES; GRADE_TIMEOUT; GRADE_FEEDBACK=1 adds --feedback)
#                                                                              -> $OUT/grade-SET.{json,txt,err}
#   feedback    the gpu and triton rungs graded as submissions with --feedback, then scripts/feedback_check.py (each
#               layer's bound against Nsight Compute)  -> $OUT/feedback-rungs.*, feedback-*/, feedback-check.{json,txt}
#   timing      a grade's timed call against the ladder: scripts/timed_call_steps.py at 1000 images, then TIMING_RUNGS
#               (default gpu-per-layer gpu-regtile gpu-igemm-tc gpu-wgmma) graded as submissions with --feedback
#               --no-counters at 100,1000, each rung's graded Σ Op Time against its ladder time from the same run
#                                                              -> $OUT/timing-steps.txt, $OUT/timing-rungs.{json,txt}
#
# Files all in $OUT; the default steps write 7 (the device tool returns 8), precision and small 2 more each. Measured
# on an H100: tests 5.5 minutes, verify 7 (the two Triton impls, which compile per shape, take 4 of them), bench 2.5,
# precision 3, whole 1.5 at one size and precision (more with --baselines: torch.compile), small 0.5, sanitize 1 per
# tool (racecheck 3). That is more than one device call (10 minutes): run `tests`, `verify` and `bench whole
# sanitize` as three calls (or split further), copy their files into one
# run folder, and merge the manifests' `steps` (each call writes its own manifest.json). Knobs: NETS (default fa19,sp19,minidnn,fa18), IMPLS (bench,
# default cudnn,gpu-igemm-tc,gpu-wgmma), SIZES (default 100,10000), VERIFY_SHAPES (60), VERIFY_SEED (4), COMMIT,
# DEVICE_KIND, VERIFY_IMPLS (default every GPU impl), WIDE_SHAPES (13), PREC_IMPLS (precision's, default the
# tf32 / fp16 / bf16 variants of gpu-igemm-tc and gpu-wgmma), WHOLE_SIZES (10000), WHOLE_PRECISIONS (fp32),
# GRAPH_SIZES (100), SANITIZE_TOOLS (memcheck; also racecheck, synccheck). Exit code: 0 when every step passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the files of this run}"
mkdir -p "$OUT"
if [ -z "${COMMIT:-}" ]; then  # the device's copy of the tree has no .git: pass COMMIT=<the checkout's commit>
    COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || COMMIT=$COMMIT-dirty
fi
NETS=${NETS:-fa19,sp19,minidnn,fa18}
IMPLS=${IMPLS:-cudnn,gpu-igemm-tc,gpu-wgmma}
SIZES=${SIZES:-100,10000}
VERIFY_SHAPES=${VERIFY_SHAPES:-60} VERIFY_SEED=${VERIFY_SEED:-4} WIDE_SHAPES=${WIDE_SHAPES:-13}
PREC_IMPLS=${PREC_IMPLS:-gpu-igemm-tc-tf32,gpu-igemm-tc-fp16,gpu-igemm-tc-bf16,gpu-wgmma-fp16,gpu-wgmma-bf16}
WHOLE_SIZES=${WHOLE_SIZES:-10000} WHOLE_PRECISIONS=${WHOLE_PRECISIONS:-fp32}
SANITIZE_TOOLS=${SANITIZE_TOOLS:-memcheck}
GRAPH_SIZES=${GRAPH_SIZES:-100} DENSE_SIZES=${DENSE_SIZES:-100,1000,10000} SWEEP_NETS=${SWEEP_NETS:-fa19,fa18} SWEEP_SIZES=${SWEEP_SIZES:-10000,100}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests verify bench whole sanitize)
for s in "${steps[@]}"; do
    case $s in tests | verify | bench | precision | whole | small | graph | dense | c1 | sweep | sanitize | sandbox | clock | grade | feedback | timing) ;;
    *) echo "device-check: unknown step '$s'; steps: tests verify bench precision whole small graph dense c1 sweep sanitize sandbox clock grade feedback timing" >&2
       exit 2 ;;
    esac
done
# convbench from this checkout: installed editable where pip can (no network there: no build isolation), and on
# PYTHONPATH in any case; the commit for the results files' own environment records
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1 \
    || echo "device-check: pip install -e . failed; using PYTHONPATH=src"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export CONVBENCH_CACHE=${CONVBENCH_CACHE:-/tmp/convbench-cache} CONVBENCH_COMMIT=$COMMIT
cb=(env COLUMNS=160 python3 -m convbench)  # wide tables in the logs (not for the tests: they check widths)

codes=()  # "step=exit code", for the manifest

manifest() {  # $OUT/manifest.json from this machine and the steps so far
    python3 - "$OUT" "$COMMIT" "bash scripts/device-check.sh ${*:-}" ${codes[@]+"${codes[@]}"} <<'EOF'
import datetime, json, os, subprocess, sys
from pathlib import Path

out, commit, command, *codes = sys.argv[1:]
def smi(field):
    try:
        text = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        text = ""
    return text.splitlines()
def version(name):
    try:
        return __import__(name).__version__
    except Exception:  # noqa: BLE001 - not installed, or broken: not recorded
        return None
import torch
names = smi("name") or ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
card = names[0] if names else "no GPU"
kind = os.environ.get("DEVICE_KIND")
if not kind and not names:
    kind = "no GPU"
elif not kind:
    model = next((m for m in ("H100", "H200") if m in card), card.replace(" ", "-").lower())
    kind = (f"nvidia-{model.lower()}" + ("-x1" if model == "H100" else "") if len(names) == 1
            else f"nvidia-{model.lower()}-x{len(names)}")
path = Path(out) / "manifest.json"
old = json.loads(path.read_text()) if path.is_file() else {}
present = [f for f in ("bench.json", "precision.json", "whole.json") if (Path(out) / f).is_file()]
doc = {
    "date": old.get("date") or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "card": card, "gpus": len(names), "device_kind": kind,
    "driver": (smi("driver_version") or [None])[0],
    "gpu_memory": (smi("memory.total") or [None])[0],
    "cuda": torch.version.cuda, "cudnn": None if torch.backends.cudnn.version() is None
    else str(torch.backends.cudnn.version()), "torch": torch.__version__,
    "cupy": version("cupy"), "triton": version("triton"),
    "python": ".".join(map(str, sys.version_info[:3])),
    "commit": commit, "commands": [command],
    "steps": {c.split("=", 1)[0]: int(c.split("=", 1)[1]) for c in codes},
    "results": present,
}
path.write_text(json.dumps(doc, indent=1) + "\n")
print(f"device-check: {path}: {card}, driver {doc['driver']}, torch {doc['torch']}, commit {commit}")
EOF
}

run_step() {  # STEP: run it, record its exit code
    local s=$1 rc=0 t0=$SECONDS
    echo "== device-check: $s"
    "step_$s" || rc=$?
    codes+=("$s=$rc")
    echo "== device-check: $s exit $rc ($((SECONDS - t0)) s)"
}

step_tests() {
    local rc=0
    { echo "== python3 -m pytest -q -rf -m gpu tests"
      timeout 300 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests 2>&1 | tail -40; } > "$OUT/pytest-gpu.log"
    rc=${PIPESTATUS[0]}
    { echo "== python3 -m pytest -q -rf -m 'not gpu' tests (the rest)"
      timeout 300 python3 -m pytest -q -rf -m "not gpu" -p no:cacheprovider tests 2>&1 | tail -40; } >> "$OUT/pytest-gpu.log"
    grep -E "^==|passed|failed|error" "$OUT/pytest-gpu.log" | tail -8
    grep -qE "[0-9]+ (failed|error)" "$OUT/pytest-gpu.log" && return 1
    return $rc
}

step_verify() {  # `verify --impl all`, one impl per call: a slow or faulting one costs only itself
    local impl rc=0 code t0
    : > "$OUT/verify.log"
    local impls=${VERIFY_IMPLS:-$(python3 -c "from convbench.impls import all_impls
print(','.join(i.name for i in all_impls() if i.device == 'cuda'))")}
    if [ -z "$impls" ]; then
        echo "device-check: verify: no implementations to verify" | tee -a "$OUT/verify.log"
        return 1
    fi
    for impl in ${impls//,/ }; do
        t0=$SECONDS
        timeout 300 "${cb[@]}" verify --device cuda --impl "$impl" --shapes "$VERIFY_SHAPES" --seed "$VERIFY_SEED" \
            --wide-shapes "$WIDE_SHAPES" >> "$OUT/verify.log" 2>&1
        code=$?
        echo "verify $impl: exit $code ($((SECONDS - t0)) s)" | tee -a "$OUT/verify.log"
        [ "$code" = 0 ] || rc=1
    done
    return $rc
}

step_bench() {
    timeout 420 "${cb[@]}" bench --device cuda --impls "$IMPLS" --nets "$NETS" --sizes "$SIZES" \
        --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
    local rc=$?
    tail -3 "$OUT/bench.txt"
    return $rc
}

step_precision() {
    timeout 420 "${cb[@]}" bench --device cuda --impls "$PREC_IMPLS" --nets "$NETS" --sizes 10000 \
        --json "$OUT/precision.json" > "$OUT/precision.txt" 2>&1
    local rc=$?
    tail -3 "$OUT/precision.txt"
    return $rc
}

step_small() {
    timeout 300 python3 scripts/small_batch_breakdown.py --nets "$NETS" --impls "$IMPLS" --size 100 \
        --json "$OUT/small.json" \
        > "$OUT/small.txt" 2>&1
    local rc=$?
    tail -6 "$OUT/small.txt"
    return $rc
}

step_graph() {
    timeout 300 python3 scripts/graph_timeline.py --nets "$NETS" --sizes "$GRAPH_SIZES" \
        --json "$OUT/graph-timeline.json" > "$OUT/graph-timeline.txt" 2>&1
    local rc=$?
    tail -6 "$OUT/graph-timeline.txt"
    return $rc
}

step_dense() {  # the whole network's dense layers with each GEMM kernel (scripts/dense_ab.py), the wgmma one at any batch
    timeout 300 python3 scripts/dense_ab.py --nets "$NETS" --sizes "$DENSE_SIZES" --min-batch 1 \
        --json "$OUT/dense-ab.json" > "$OUT/dense-ab.txt" 2>&1
    local rc=$?
    cat "$OUT/dense-ab.txt"
    return $rc
}

step_c1() {  # the kernel switches against the shipped settings (scripts/optin_ab.py): the layers, then the whole network
    timeout 500 python3 scripts/optin_ab.py --nets "$NETS" --sizes 10000,100 --json "$OUT/optin-ab.json" \
        > "$OUT/optin-ab.txt" 2>&1
    local rc=$?
    cat "$OUT/optin-ab.txt"
    return $rc
}

step_sweep() {  # `convbench sweep --impl gpu-igemm-tc --quick` per SWEEP_NETS and SWEEP_SIZES; the plans it records
    # are copied to $OUT/sweep-plans.json and then removed, so later steps run the shipped plans
    local net size rc=0 plans
    plans=$(python3 -c "from convbench.core.gpu import tuning; print(tuning.user_file())")
    rm -f "$plans"
    for size in ${SWEEP_SIZES//,/ }; do
        for net in ${SWEEP_NETS//,/ }; do
            timeout 400 "${cb[@]}" sweep --impl gpu-igemm-tc --net "$net" --batch "$size" --quick \
                > "$OUT/sweep-$net-$size.txt" 2>&1 || rc=1
            grep -E "\*|c1pool|epi2" "$OUT/sweep-$net-$size.txt" | head -12
        done
    done
    [ -f "$plans" ] && cp "$plans" "$OUT/sweep-plans.json" && rm -f "$plans"
    return $rc
}

step_whole() {
    local net size prec rc=0 tmp names=()
    tmp=$(mktemp -d)
    rm -f "$OUT/whole.json"
    for prec in ${WHOLE_PRECISIONS//,/ }; do
        for size in ${WHOLE_SIZES//,/ }; do
            for net in ${NETS//,/ }; do
                names+=("$net-$size-$prec")
                local f=$tmp/$net-$size-$prec
                # fp32: PyTorch eager and torch.compile in the same process too; should they fail, the graph alone
                if [ "$prec" = fp32 ] && timeout 200 "${cb[@]}" run --whole-network --net "$net" --size "$size" \
                        --precision "$prec" --json --baselines > "$f.json" 2> "$f.err"; then
                    continue
                fi
                [ "$prec" = fp32 ] && echo "whole $net $size: --baselines failed ($(tail -1 "$f.err")); the graph alone"
                timeout 150 "${cb[@]}" run --whole-network --net "$net" --size "$size" --precision "$prec" --json \
                    > "$f.json" 2> "$f.err" \
                    || { rc=1; echo "whole $net $size $prec failed: $(tail -1 "$f.err")"; rm -f "$f.json"; }
            done
        done
    done
    python3 - "$OUT/whole.json" "$tmp" "${names[@]}" <<'EOF'
import json, sys
from pathlib import Path
out, tmp, *names = sys.argv[1:]
docs = [json.loads((Path(tmp) / f"{n}.json").read_text()) for n in names if (Path(tmp) / f"{n}.json").is_file()]
if docs:  # a list of `run --whole-network --json` documents, one per network (measure/results.py reads it)
    Path(out).write_text(json.dumps(docs, indent=1) + "\n")
for d in docs:
    print(f"whole {d['net']:8} {d['images']} images {d.get('precision')}: {d['network_time_s'] * 1e3:.4f} ms, "
          f"x floor {d['x_floor']:.2f}, Correctness {d['correctness']}")
EOF
    rm -rf "$tmp"
    return $rc
}

step_sanitize() {  # every tensor its own allocation (as scripts/sanitize.sh): an overrun leaves it, memcheck sees it
    local rc=0 one
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    : > "$OUT/sanitize.log"
    local tool
    for tool in ${SANITIZE_TOOLS//,/ }; do
        for one in "python3 -m convbench verify --device cuda --impl gpu-wgmma,gpu-igemm-tc --shapes 8 --seed 7" \
                   "python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma.py -k kernel_itself" \
                   "python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k dense_matches" \
                   "python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k fma_kernel_matches"; do
            echo "== compute-sanitizer --tool $tool $one" >> "$OUT/sanitize.log"
            COLUMNS=160 timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 $one 2>&1 \
                | tail -20 >> "$OUT/sanitize.log"
            local code=${PIPESTATUS[0]}
            echo "== exit code $code (0: no errors found)" >> "$OUT/sanitize.log"
            [ "$code" = 0 ] || rc=1
        done
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    grep -E "^==|SUMMARY" "$OUT/sanitize.log"
    return $rc
}

step_sandbox() {  # the sandbox on a GPU grader: its self-test, then the GPU attacks and the limits
    {
        echo "== the self-test (device cuda)"
        python3 -c "from convbench.user import sandbox
r = sandbox.self_test('cuda')
print('self-test', 'passed' if r.ok else 'FAILED', r.backend, r.problem)
[print(' ', k, v) for k, v in r.properties.items()]"
        echo "== python3 -m pytest -q -rA tests/adversarial/test_sandbox_gpu.py tests/adversarial/test_sandbox_limits.py"
        timeout 300 python3 -m pytest -q -rA -p no:cacheprovider tests/adversarial/test_sandbox_gpu.py \
            tests/adversarial/test_sandbox_limits.py 2>&1 | tail -30
    } > "$OUT/sandbox.log" 2>&1
    local rc=${PIPESTATUS[0]}
    grep -E "self-test|passed|failed|error" "$OUT/sandbox.log" | tail -6
    grep -qE "[0-9]+ (failed|error)|self-test FAILED" "$OUT/sandbox.log" && return 1
    return $rc
}

step_clock() {  # how steady convbench's clock around a sandboxed call is here (scripts/clock_jitter.py)
    local n rc=0
    for n in 100 10000; do
        timeout 120 python3 scripts/clock_jitter.py --images $n --json "$OUT/clock-$n.json" || rc=1
    done
    return $rc
}

step_grade() {  # GRADE_SETS (default minidnn): `convbench grade` of each, the course's files. An entry is a folder of
    # .submissions/ or FOLDER:GLOB (some of its submissions: grade-FOLDER-GLOB.json with * and ? as x); each grade is
    # cut at GRADE_TIMEOUT seconds (default 540)
    local entry set pick name rc=0
    for entry in ${GRADE_SETS:-minidnn}; do
        set=${entry%%:*} pick=*
        [ "$set" = "$entry" ] || pick=${entry#*:}
        name=$set
        [ "$pick" = "*" ] || name=$set-$(printf %s "$pick" | tr '*?[]' 'xx__')
        # shellcheck disable=SC2086 # the glob picks the submissions
        local extra=()
        [ -z "${GRADE_FEEDBACK:-}" ] || extra=(--feedback --feedback-md "$OUT/feedback-$name")
        timeout "${GRADE_TIMEOUT:-540}" "${cb[@]}" grade .submissions/"$set"/$pick/ \
            --course-weights "${COURSE:-.fixtures/course}" --sizes "${GRADE_SIZES:-100,1000,10000}" --shapes 10 \
            --seed 4 --jobs 16 --json "$OUT/grade-$name.json" ${extra[@]+"${extra[@]}"} \
            > "$OUT/grade-$name.txt" 2> "$OUT/grade-$name.err"
        local code=$?
        echo "grade $entry: exit $code (1: some submission is not correct)"
        [ "$code" -le 1 ] || rc=1
    done
    return $rc
}

step_feedback() {  # the ladder's rungs graded as submissions with --feedback (FEEDBACK_RUNGS, default every gpu and
    # triton rung; FEEDBACK_SIZES, default 100,10000), then scripts/feedback_check.py: each layer's bound against
    # Nsight Compute on the trusted side, for FEEDBACK_CHECK (default: three rungs) and every grade-*.json of this run
    # made with GRADE_FEEDBACK=1 (the grade step, run first); FEEDBACK_FLAGS: more grade flags (--no-counters)
    local rungs=${FEEDBACK_RUNGS:-$(python3 -c "from convbench.impls.catalog import declared
print(' '.join(i.name for i in declared() if i.ladder in ('gpu', 'triton')))")}
    # shellcheck disable=SC2086 # one argument per rung
    timeout "${FEEDBACK_TIMEOUT:-420}" "${cb[@]}" grade --device cuda --sizes "${FEEDBACK_SIZES:-100,10000}" \
        --shapes 5 --seed 4 --feedback ${FEEDBACK_FLAGS:-} --feedback-md "$OUT/feedback-rungs" \
        --json "$OUT/feedback-rungs.json" $rungs \
        > "$OUT/feedback-rungs.txt" 2> "$OUT/feedback-rungs.err"
    local code=$?
    echo "feedback: rungs graded, exit $code"
    local grades=("$OUT/feedback-rungs.json")
    for f in "$OUT"/grade-*.json; do [ -f "$f" ] && grades+=("$f"); done
    # shellcheck disable=SC2086 # FEEDBACK_CHECK: names and paths
    timeout "${CHECK_TIMEOUT:-300}" python3 scripts/feedback_check.py "${grades[@]}" --out "$OUT/feedback-check.json" \
        --only ${FEEDBACK_CHECK:-gpu-basic gpu-regtile gpu-wgmma} > "$OUT/feedback-check.txt" 2>&1
    local check=$?
    tail -3 "$OUT/feedback-check.txt"
    [ "$code" -le 1 ] && [ "$check" = 0 ]
}

step_timing() {  # a grade's timed call against the ladder (see the header)
    local rungs=${TIMING_RUNGS:-gpu-per-layer gpu-regtile gpu-igemm-tc gpu-wgmma} rc=0
    timeout 150 python3 scripts/timed_call_steps.py --images 1000 gpu-per-layer gpu-igemm-tc \
        > "$OUT/timing-steps.txt" 2>&1 || rc=1
    cat "$OUT/timing-steps.txt"
    # shellcheck disable=SC2086 # one argument per rung
    timeout "${TIMING_TIMEOUT:-300}" "${cb[@]}" grade --device cuda --sizes 100,1000 --shapes 3 --seed 4 --feedback \
        --no-counters --json "$OUT/timing-rungs.json" $rungs > "$OUT/timing-rungs.txt" 2>&1
    [ $? -le 1 ] || rc=1
    python3 - "$OUT/timing-rungs.json" <<'PY' || rc=1
import json, sys
doc = json.load(open(sys.argv[1]))
for g in doc["grades"]:
    ladder = {r["name"]: r["total_s"] for r in (g.get("feedback") or {}).get("ladder", {}).get("rungs", [])}
    name, graded = g["name"].removesuffix("-graded"), sum(g["op_times"].get("1000", []))
    if name in ladder and graded:
        print(f"{name}: graded {graded * 1e6:.0f} µs, ladder {ladder[name] * 1e6:.0f} µs: x{graded / ladder[name]:.2f}")
PY
    return $rc
}

rm -f "$OUT/manifest.json"
manifest "${steps[@]}"
for s in "${steps[@]}"; do
    run_step "$s"
done
manifest "${steps[@]}"
! printf "%s\n" ${codes[@]+"${codes[@]}"} | grep -qv "=0$"
