"""The build report of the nvcc-built kinds (user/build_report.py, nvcc_build.make_report): ptxas's resources and
the SASS instruction mix parsed from real nvcc output (a tiny kernel file with shared memory, spills, __constant__
weights, atomics, half2 and tensor cores), the report kept beside the library and found again on a cache hit, the
first-error path with ptxas's lines around it, the report sent by the build step through a real child and checked
by the parent; marked gpu, a real mini-dnn example through the worker's build step (the build needs the GPU's
architecture)."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch

from convbench.core.errors import UsageError
from convbench.user import _source, build_report, minidnn, nvcc_build
from convbench.user.base import BuildOptions
from convbench.user.protocol import MAX_MESSAGE, check_build_reply, check_build_report
from convbench.user.worker import Worker

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")

KERNELS = r"""
#include <cuda_fp16.h>
#include <mma.h>
__constant__ float weights[64];
__global__ void tiled(float *y, const float *x) {
    __shared__ float tile[256];
    tile[threadIdx.x] = x[threadIdx.x] * weights[threadIdx.x % 64];
    __syncthreads();
    y[threadIdx.x] = tile[255 - threadIdx.x];
}
__global__ void atomic_half2(float *y, __half2 *h, const __half2 *a) {
    atomicAdd(y, 1.0f);
    h[threadIdx.x] = __hfma2(a[threadIdx.x], a[threadIdx.x + 1], h[threadIdx.x]);
    y[threadIdx.x + 1] = __shfl_down_sync(0xffffffff, y[threadIdx.x], 1);
}
__global__ void __launch_bounds__(1024, 2) spills(float *y, const float *x, int n) {
    float a[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) a[i] = x[i * n + threadIdx.x];
    float s = 0;
    for (int j = 0; j < n; ++j) {
#pragma unroll
        for (int i = 0; i < 64; ++i) s += a[(i + j) & 63] * a[i];
    }
    y[threadIdx.x] = s;
}
__global__ void tensor(float *c, const half *a, const half *b) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
template <typename T> __global__ void fill(T *y) { y[threadIdx.x] = T(1); }
template __global__ void fill<float>(float *);
"""
NAMES = {"_Z5tiledPfPKf": "tiled", "_Z12atomic_half2PfP7__half2PKS0_": "atomic_half2", "_Z6spillsPfPKfi": "spills",
         "_Z6tensorPfPK6__halfS2_": "tensor", "_Z4fillIfEvPT_": "fill"}


def cuobjdump() -> str | None:
    """The toolkit's cuobjdump, else the one Triton ships (the same tool), else None."""
    found = nvcc_build.toolkit_tool("cuobjdump", NVCC) if NVCC else None
    if found is None:
        try:
            import triton
        except ImportError:
            return None
        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        found = str(bundled) if bundled.is_file() else None
    return found


def compile_kernels(folder: Path, arch: str) -> tuple[str, Path]:
    """(nvcc's -Xptxas -v output, the library) of KERNELS for `arch`."""
    source = folder / "kernels.cu"
    source.write_text(KERNELS)
    lib = folder / f"lib-{arch}.so"
    p = subprocess.run([NVCC, "-O3", f"-arch={arch}", "-x", "cu", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
                        str(source), "-o", str(lib)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stderr + p.stdout, lib


@pytest.fixture(scope="module")
def sm90(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc is not installed here")
    return compile_kernels(tmp_path_factory.mktemp("sm90"), "sm_90")


def by_name(kernels: list[build_report.PtxasKernel]) -> dict[str, build_report.PtxasKernel]:
    return {NAMES[k.name]: k for k in kernels}


# ------------------------------------------------------------------------------------ ptxas on real nvcc output


def test_ptxas_resources_of_real_kernels(sm90):
    output, _ = sm90
    kernels = by_name(build_report.parse_ptxas(output))
    assert set(kernels) == set(NAMES.values())
    assert kernels["tiled"].shared_bytes == 1024  # __shared__ float tile[256]
    assert all(k.shared_bytes == 0 for name, k in kernels.items() if name != "tiled")
    spill = kernels["spills"]
    assert spill.spill_store_bytes > 0 and spill.spill_load_bytes > 0 and spill.stack_bytes >= spill.spill_store_bytes
    assert spill.registers <= 32  # __launch_bounds__(1024, 2): 64K registers over 2048 threads
    assert all(0 < k.registers <= 255 and k.arch == "sm_90" for k in kernels.values())
    assert all(k.spill_store_bytes == 0 for name, k in kernels.items() if name != "spills")


@needs_nvcc
def test_constant_memory_where_ptxas_reports_it(tmp_path):
    """CUDA 13's ptxas reports a unit's __constant__ bytes (cmem[3]) for sm_75 and none for sm_90: the unit's 64
    floats are each kernel's constant_bytes where reported, 0 where not."""
    output, _ = compile_kernels(tmp_path, "sm_75")
    kernels = build_report.parse_ptxas(output)
    if "cmem[3]" not in output:
        pytest.skip("this nvcc's ptxas reports no cmem[3] for sm_75")
    assert kernels and all(k.constant_bytes == 256 for k in kernels)


def test_ptxas_lines_of_cuda_12_and_functions_that_are_not_entries():
    """The older format: per-kernel cmem banks (only bank 3 is the user's __constant__s); a unit's cmem[3] on its
    gmem line; a device function's properties (not an entry) change no kernel; a kernel may be named `error`."""
    text = textwrap.dedent("""\
        ptxas info    : 0 bytes gmem, 512 bytes cmem[3]
        ptxas info    : Compiling entry function 'error' for 'sm_80'
        ptxas info    : Function properties for error
            8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
        ptxas info    : Used 40 registers, 4096 bytes smem, 376 bytes cmem[0], 8 bytes cmem[2]
        ptxas info    : Function properties for _Z6helperv
            64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : 0 bytes gmem
        ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'
        ptxas info    : Function properties for _Z1kPf
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 255 registers, 128 bytes cmem[3], 360 bytes cmem[0]
        """)
    first, second = build_report.parse_ptxas(text)
    assert (first.name, first.registers, first.shared_bytes, first.constant_bytes, first.stack_bytes,
            first.spill_store_bytes, first.spill_load_bytes) == ("error", 40, 4096, 512, 8, 4, 12)
    assert (second.name, second.registers, second.shared_bytes, second.constant_bytes, second.stack_bytes) == \
           ("_Z1kPf", 255, 0, 128, 0)


# ------------------------------------------------------------------------------------------- SASS, real listing


@pytest.fixture(scope="module")
def sass(sm90):
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump here (neither beside nvcc nor Triton's)")
    listing, problem = nvcc_build.bounded_output([tool, "-sass", str(sm90[1])], nvcc_build.SASS_BYTES, 60)
    assert listing is not None, problem
    return {NAMES[name]: units[0] for name, units in build_report.parse_sass(listing).items() if name in NAMES}


def test_sass_instruction_classes_of_real_kernels(sass):
    assert set(sass) == set(NAMES.values())
    tiled = sass["tiled"]
    assert tiled["shared_load"] >= 1 and tiled["shared_store"] >= 1 and tiled["barrier"] >= 1
    assert tiled["global_load"] >= 1 and tiled["global_store"] >= 1 and tiled["atomic"] == 0
    mixed = sass["atomic_half2"]
    assert mixed["atomic"] >= 1 and mixed["fp16"] >= 1 and mixed["shuffle"] >= 1 and mixed["tensor"] == 0
    assert sass["tensor"]["tensor"] >= 1
    assert sass["spills"]["global_load"] >= 64  # its 64 loads of x
    # `HFMA2.MMA Rd, -RZ, RZ, ...` is how ptxas writes a constant into a register: no half arithmetic
    assert sass["fill"]["fp16"] == 0 and sass["fill"]["tensor"] == 0
    for counts in sass.values():
        assert counts["total"] >= sum(v for k, v in counts.items() if k != "total") > 0


@pytest.mark.parametrize("line, kind", [
    ("        /*0040*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;", "global_load"),
    ("        /*0050*/              @!P0 STS [R0], R5 ;", "shared_store"),
    ("        /*0060*/              @UP0 HGMMA.64x64x16.F32 R24, gdesc[UR4], R24 ;", "tensor"),
    ("        /*0070*/                   HFMA2.MMA R11, R0, R11, R10 ;", "fp16"),
    ("        /*0080*/                   HFMA2.MMA R7, -RZ, RZ, 1.875, 0 ;", None),
    ("        /*0090*/                   ATOMS.ADD R3, [R2], R4 ;", "atomic"),
    ("        /*00a0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;", "barrier"),
    ("        /*00b0*/                   ULDC.64 UR4, c[0x0][0x208] ;", "constant_load"),
    ("        /*00c0*/                   LDSM.16.M88.4 R4, [R2] ;", "shared_load"),
    ("        /*00d0*/                   FFMA R1, R2, R3, R4 ;", None),
    ("        /*1a2f0*/                  NOP ;", None),
])
def test_one_sass_line(line, kind):
    counts = build_report.parse_sass("\t\tFunction : _Z1kv\n" + line + "\n")["_Z1kv"][0]
    assert counts["total"] == (0 if "NOP" in line else 1)
    assert {k for k, v in counts.items() if v and k != "total"} == ({kind} if kind else set())


# ------------------------------------------------------------------------------------ names and the whole report


def test_names_are_demangled_by_the_tool_given(sm90):
    """cu++filt where the toolkit has it; binutils' c++filt reads the same stdin-to-stdout way, for this test."""
    tool = shutil.which("c++filt")
    if tool is None:
        pytest.skip("no c++filt here")
    names = nvcc_build.demangle([k.name for k in build_report.parse_ptxas(sm90[0])], tool)
    assert names["_Z6spillsPfPKfi"] == "spills(float*, float const*, int)"
    assert names["_Z4fillIfEvPT_"] == "void fill<float>(float*)"
    assert nvcc_build.demangle(["_Z1kv"], None) == {}


def test_a_report_is_checked_data_and_keeps_its_bounds(sm90):
    kernels = build_report.parse_ptxas(sm90[0])
    report = build_report.assemble(kernels * 20, None, {"_Z6spillsPfPKfi": "x" * 500}, "sm_90", "no cuobjdump")
    assert len(report["kernels"]) == build_report.MAX_KERNELS and "more kernels not listed" in report["note"]
    assert all(k["instructions"] == {} for k in report["kernels"])
    assert max(len(k["name"]) for k in report["kernels"]) == build_report.NAME_CHARS
    assert check_build_report(json.loads(json.dumps(report))) == report


def test_the_largest_report_fits_one_message():
    """64 kernels with 200-character names of characters JSON escapes, every number at its bound: one message."""
    counts = dict.fromkeys(build_report.INSTRUCTION_CLASSES, 10**8)
    kernel = {"name": '"' * build_report.NAME_CHARS, "registers": 255, **dict.fromkeys(
        ("shared_bytes", "constant_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes"), 1 << 30),
        "instructions": counts}
    report = {"arch": "sm_100a", "note": "\\" * build_report.NOTE_CHARS, "kernels": [kernel] * build_report.MAX_KERNELS}
    assert check_build_report(report) == report
    reply = {"status": "ok", "report": report, "report_problem": ""}
    assert len(json.dumps(reply)) < MAX_MESSAGE - 1024


# ----------------------------------------------------------------------------------- the build, the cache, errors


@needs_nvcc
def test_the_report_lies_beside_the_library_and_survives_a_cache_hit(tmp_path):
    folder = EXAMPLES / "minidnn" / "matmul-folder"
    lib = minidnn.build(folder, "sm_90", tmp_path)
    report, problem = nvcc_build.stored_report(lib)
    assert problem == "" and report is not None and check_build_report(report) == report
    names = [k["name"] for k in report["kernels"]]
    assert any("matmul_kernel" in n for n in names) and any("unroll_kernel" in n for n in names)
    assert report["arch"] == "sm_90" and all(0 < k["registers"] <= 255 for k in report["kernels"])
    assert any(k["shared_bytes"] > 0 for k in report["kernels"])  # the tiled matmul's tiles
    if nvcc_build.toolkit_tool("cuobjdump", NVCC) is None:
        assert "no cuobjdump" in report["note"] and all(k["instructions"] == {} for k in report["kernels"])
    stamp = lib.stat().st_mtime_ns
    assert minidnn.build(folder, "sm_90", tmp_path) == lib and lib.stat().st_mtime_ns == stamp  # a cache hit
    assert nvcc_build.stored_report(lib) == (report, "")
    assert not list(lib.parent.glob("*.tmp"))


def test_a_missing_or_broken_report_is_a_reason(tmp_path):
    lib = tmp_path / "libuser.so"
    assert nvcc_build.stored_report(lib)[0] is None and "no build report" in nvcc_build.stored_report(lib)[1]
    (tmp_path / nvcc_build.REPORT).write_text("[1, 2")
    assert nvcc_build.stored_report(lib) == (None, "the build report is not JSON")
    (tmp_path / nvcc_build.REPORT).write_text("[1, 2]")
    assert nvcc_build.stored_report(lib) == (None, "the build report is not a JSON object")


@needs_nvcc
def test_the_first_error_is_found_among_ptxas_lines(tmp_path):
    """A folder whose matmul.cu compiles first (ptxas prints its kernels' lines, one kernel named `error`) and whose
    new-forward.cu has a typo: the one line is the compiler's error, not a ptxas line."""
    folder = tmp_path / "sub"
    shutil.copytree(EXAMPLES / "minidnn" / "matmul-folder", folder)
    matmul = folder / "matmul.cu"
    matmul.write_text(matmul.read_text() + '\nextern "C" __global__ void error(float *y) { y[0] = 1; }\n')
    source = folder / "new-forward.cu"
    source.write_text(source.read_text().replace("const int", "cosnt int", 1))
    with pytest.raises(UsageError) as e:
        minidnn.build(folder, "sm_90", tmp_path / "cache")
    message = str(e.value)
    assert "ptxas" not in message and "\n" not in message
    assert "new-forward.cu(" in message and "error" in message, message


def test_first_error_skips_ptxas_statistics():
    output = ("ptxas info    : Compiling entry function 'error' for 'sm_90'\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "/b/src/k.cu(3): error: identifier \"x\" is undefined\n")
    assert _source.first_error(output, {"/b/src/": ""}) == 'k.cu(3): error: identifier "x" is undefined'
    assert _source.first_error("ptxas info    : 0 bytes gmem\n", {}) == "no compiler output"


def test_tools_are_bounded(tmp_path):
    assert nvcc_build.bounded_output(["sh", "-c", "echo hi"], 100, 10) == ("hi\n", "")
    assert nvcc_build.bounded_output(["sh", "-c", "head -c 5000 /dev/zero"], 1000, 10) == \
           (None, "printed more than 1000 bytes")
    assert nvcc_build.bounded_output(["sh", "-c", "sleep 30"], 100, 0.5) == (None, "took more than 0.5 s")
    assert nvcc_build.bounded_output(["sh", "-c", "exit 3"], 100, 10) == (None, "exited with status 3")
    assert nvcc_build.bounded_output([str(tmp_path / "absent")], 100, 10)[1].startswith("did not start")


# ------------------------------------------------------------------------------- the build step and the parent


def test_build_reply_keeps_a_good_report_and_drops_a_bad_one():
    good = {"arch": "sm_90", "note": "", "kernels": [
        {"name": "k", "registers": 30, "shared_bytes": 0, "constant_bytes": 0, "stack_bytes": 0,
         "spill_store_bytes": 0, "spill_load_bytes": 0, "instructions": {}}]}
    assert check_build_reply({"status": "ok", "report": good, "extra": 1}) == \
           {"status": "ok", "op_s": None, "layer_s": None, "times": {}, "report": good, "report_problem": ""}
    bad = check_build_reply({"status": "ok", "report": {**good, "arch": "sm_90\x1b[2J"}})
    assert bad["status"] == "ok" and bad["report"] is None and "arch" in bad["report_problem"]
    none = check_build_reply({"status": "ok", "report": None, "report_problem": "no \x1b[31m report"})
    assert none["report"] is None and none["report_problem"] == "no \\x1b[31m report"
    assert check_build_reply({"status": "ok"})["report_problem"] == "the build step sent no build report"
    assert check_build_reply({"status": "error", "stage": "build", "message": "x"})["status"] == "error"


FORGED_BUILD = """
import torch.nn.functional as F
import convbench.user.child as child
child._build = lambda impl: {{"status": "ok", "report": {report}, "report_problem": ""}}
def conv_forward(x, k):
    return F.conv2d(x, k)
"""


def built_worker(tmp_path: Path, report: dict) -> Worker:
    """A worker whose build step answers with `report` (a Python file standing in for nvcc's kinds: at load it
    replaces the child's build step), built."""
    path = tmp_path / "stand_in.py"
    path.write_text(FORGED_BUILD.format(report=repr(report)))
    worker = Worker("python", path, BuildOptions())
    worker.quiet = True
    worker.built = False
    try:
        worker.build()
    except BaseException:
        worker.remove()
        raise
    return worker


@pytest.mark.slow
def test_the_build_step_sends_its_report_to_the_parent(tmp_path):
    """Through a real child: the report the build step answers with is what the worker keeps, checked."""
    report = {"arch": "sm_90", "note": "", "kernels": [
        {"name": "conv(float*, float const*)", "registers": 40, "shared_bytes": 1024, "constant_bytes": 0,
         "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
         "instructions": dict.fromkeys(build_report.INSTRUCTION_CLASSES, 1)}]}
    worker = built_worker(tmp_path, report)
    try:
        assert worker.built and worker.build_report == report and worker.build_report_problem == ""
    finally:
        worker.remove()


def test_kinds_not_built_by_nvcc_have_no_report(tmp_path):
    path = tmp_path / "k.py"
    path.write_text("def conv_forward(x, k):\n    return x\n")
    worker = Worker("python", path, BuildOptions())
    try:
        assert worker.build_report is None and worker.build_report_problem == ""
    finally:
        worker.remove()
    cu = EXAMPLES / "mxnet_forward.cu"
    worker = Worker("mxnet", cu, BuildOptions())
    try:
        assert worker.build_report is None and "NVRTC" in worker.build_report_problem
    finally:
        worker.remove()


@pytest.mark.gpu
def test_a_minidnn_example_through_the_worker_build_step(tmp_path):
    """The real build step in the sandbox: the report comes back, sane; a second worker on the same builds folder
    hits the cache and still gets it."""
    reports = []
    for _ in range(2):
        worker = Worker("minidnn", EXAMPLES / "new-forward.cu", BuildOptions(), builds=tmp_path / "builds")
        worker.quiet = True
        try:
            worker.build()
            assert worker.build_report is not None, worker.build_report_problem
            reports.append(worker.build_report)
        finally:
            worker.remove()
    report = reports[0]
    major, minor = torch.cuda.get_device_capability()
    assert report["arch"] == f"sm_{major}{minor}" and report["kernels"]
    assert all(0 < k["registers"] <= 255 for k in report["kernels"])
    assert reports[1] == report
