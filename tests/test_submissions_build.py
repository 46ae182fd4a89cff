"""Course submissions built with nvcc (mini-dnn new-forward.cu 2020-2024, MXNet new-forward.cuh 2017-2019): which
kind, variant, student file and header a submission gets (table-driven, no compiler needed); with nvcc, every
example compiled and linked into a library through the real build, -D reaching nvcc, one-line compile and link
errors, the stand-in MXNet headers' CHECK / LOG run on the host; marked gpu, every example run against float64
conv2d, twice on the same buffers, with the course's timings and op_empty. CONVBENCH_SUBMISSIONS=DIR also builds
every submission folder DIR/*/* (real student files, never copied into the repository)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from convbench.core.errors import UsageError
from convbench.user import _source, base, minidnn, mxnet_forward, nvcc_build
from convbench.user.base import BuildOptions

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
MINIDNN_EXAMPLES = sorted(p for p in (EXAMPLES / "minidnn").iterdir() if p.is_dir())
MXNET_EXAMPLES = sorted(p for p in (EXAMPLES / "mxnet").iterdir() if p.is_dir())
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
ARCH = "sm_90"  # CPU-only builds: any architecture nvcc knows

BUILDERS = {"minidnn": minidnn, "mxnet-forward": mxnet_forward}


def ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One build cache for the module: an example built by one test is not built again by the next."""
    return tmp_path_factory.mktemp("user-kernels")


# ----------------------------------------------------------------------------------- what a submission is (no nvcc)

PROLOG = "void GPUInterface::conv_forward_gpu_prolog({}) {{}}\n"
GPU = "void GPUInterface::conv_forward_gpu({}) {{}}\n"
EPILOG = "void GPUInterface::conv_forward_gpu_epilog({}) {{}}\n"
INTS = "const int B, const int M, const int C, const int H, const int W, const int K"
INTS_2022 = "const int Batch, const int Map_out, const int Channel, const int Height, const int Width, const int K"
SOURCES_2021 = (PROLOG.format(f"const float *host_y, const float *host_x, const float *host_k, float **dy, "
                              f"float **dx, float **dk, {INTS}")
                + GPU.format(f"float *device_y, const float *device_x, const float *device_k, {INTS}")
                + EPILOG.format(f"float *host_y, float *device_y, float *device_x, float *device_k, {INTS}"))
SOURCES_2022 = (PROLOG.format(f"float *host_output, const float *host_input, const float *host_mask, float **o, "
                              f"float **i, float **m, {INTS_2022}")
                + GPU.format(f"float *device_output, const float *device_input, const float *device_mask, {INTS_2022}")
                + EPILOG.format(f"float *host_output, float *o, float *i, float *m, {INTS_2022}"))
SOURCES_2023 = SOURCES_2021.replace("const int K)", "const int K, const int S)")
SOURCE_2020 = GPU.format(f"float *host_y, const float *host_x, const float *host_k, {INTS}")


@pytest.mark.parametrize("source, expected", [
    (SOURCE_2020, "fall2020"),
    (SOURCES_2021, "2021"),
    (SOURCES_2022, "2022"),
    (SOURCES_2023, "2023-stride"),
    ("// a comment: void GPUInterface::conv_forward_gpu_prolog(int) {}\n" + SOURCES_2021, "2021"),
    ("__host__ " + SOURCES_2021.replace("\n", "\n__host__ ", 2), "2021"),
    (SOURCES_2021 + "void GPUInterface::get_device_properties() { }\n", "2021"),
], ids=["fall2020", "2021", "2022", "2023-stride", "commented-out", "__host__", "with-properties"])
def test_minidnn_variant_is_read_from_the_definitions(source, expected):
    assert minidnn.variant(_source.strip_comments(source), Path("x.cu"))[0] == expected


@pytest.mark.parametrize("source, fragment", [
    (SOURCES_2021.replace("conv_forward_gpu_epilog", "renamed_epilog"),
     "does not define GPUInterface::conv_forward_gpu_epilog(...)"),
    (SOURCES_2021.replace("GPUInterface::conv_forward_gpu(", "GPUInterface::renamed("),
     "does not define GPUInterface::conv_forward_gpu(...)"),
    (SOURCES_2021.replace("const int K) {}\nvoid GPUInterface::conv_forward_gpu_epilog",
                          "const int K, const int S) {}\nvoid GPUInterface::conv_forward_gpu_epilog"),
     "take (conv_forward_gpu_prolog 12, conv_forward_gpu 10, conv_forward_gpu_epilog 10) parameters"),
    (GPU.format("float *host_y, int B"), "takes 2 parameters and there is no prolog or epilog"),
], ids=["no-epilog", "no-gpu", "mixed", "short-fall2020"])
def test_minidnn_variant_errors_are_one_line(source, fragment):
    with pytest.raises(UsageError) as e:
        minidnn.variant(_source.strip_comments(source), Path("x.cu"))
    assert fragment in str(e.value) and "\n" not in str(e.value)


MXNET_SPECIALIZATION = ("template <> void forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, const "
                        "mshadow::Tensor<gpu, 4, float> &x, const mshadow::Tensor<gpu, 4, float> &w) { }\n")
MXNET_TEMPLATE = ("template <typename gpu, typename DType>\nvoid forward(mshadow::Tensor<gpu, 4, DType> &y,\n"
                  "    const mshadow::Tensor<gpu, 4, DType> &x, const mshadow::Tensor<gpu, 4, DType> &w)\n{\n}\n")
MXNET_CPU = MXNET_TEMPLATE.replace("gpu", "cpu")


@pytest.mark.parametrize("source, kind", [
    (SOURCES_2021, "minidnn"),
    (SOURCE_2020, "minidnn"),
    (MXNET_SPECIALIZATION, "mxnet-forward"),
    (MXNET_TEMPLATE, "mxnet-forward"),
    (MXNET_CPU, None),  # the course's CPU twin, new-forward.h
    ("template <> void forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, const mshadow::Tensor<gpu, 4, "
     "float> &x, const mshadow::Tensor<gpu, 4, float> &w);\n", None),  # declared, not defined
    ("__global__ void forward_kernel(float *y, const float *x, const float *k, int B) {}\n// convbench: grid=1\n",
     "mxnet"),
    ("__global__ void forward_kernel(float *y) {}\n" + MXNET_SPECIALIZATION, "mxnet-forward"),
    ("__global__ void other(float *y) {}\n", None),
], ids=["minidnn", "fall2020", "specialization", "template", "cpu-twin", "declaration", "bare-kernel",
        "kernel-and-forward", "nothing"])
def test_kind_of_source(source, kind):
    assert base.kind_of_source(_source.strip_comments(source)) == kind


@pytest.mark.parametrize("parameter, expected", [
    ("const float *host_y", "const float *"), ("float **device_y_ptr", "float **"), ("const int K", "const int"),
    ("const int", "const int"), ("unsigned int", "unsigned int"), ("unsigned n", "unsigned"), ("float*x", "float*"),
    ("float * __restrict__ y", "float * __restrict__"), ("const int S = 1", "const int"), ("size_t", "size_t"),
])
def test_parameter_type_drops_the_name(parameter, expected):
    assert _source.parameter_type(parameter) == expected


def test_kind_of_examples():
    for folder in MINIDNN_EXAMPLES:
        assert base.kind_of(folder) == "minidnn", folder
    for folder in MXNET_EXAMPLES:
        assert base.kind_of(folder) == "mxnet-forward", folder
    assert base.kind_of(EXAMPLES / "mxnet_forward.cu") == "mxnet"  # the bare kernel + launch line stays NVRTC's
    assert base.kind_of(EXAMPLES / "minidnn" / "2021" / "new-forward.cu") == "minidnn"


def test_folder_finds_the_one_student_file(tmp_path):
    write(tmp_path, "sub/new-forward.cu", SOURCES_2021)
    write(tmp_path, "sub/matmul.cu", "__global__ void matmul(float *c) {}\n")
    write(tmp_path, "sub/.hidden/old.cu", SOURCES_2021)
    assert base.submission_file(tmp_path) == tmp_path / "sub" / "new-forward.cu"
    assert base.kind_of(tmp_path) == "minidnn"
    course = write(tmp_path, "ece408_src/new-forward.cuh", MXNET_SPECIALIZATION).parent
    write(course, "new-forward.h", MXNET_CPU)  # the CPU twin is no candidate
    write(course, "new.cu", "// the operator's registration: no forward defined here\n")
    assert base.submission_file(course) == course / "new-forward.cuh" and base.kind_of(course) == "mxnet-forward"


def test_folder_with_none_or_several_is_one_line(tmp_path):
    empty = write(tmp_path, "empty/readme.cu", "int x;\n").parent
    with pytest.raises(UsageError, match=r"no \.cu or \.cuh file in this folder defines") as e:
        base.kind_of(empty)
    assert "\n" not in str(e.value)
    several = write(tmp_path, "several/new-forward.cu", SOURCES_2021).parent
    write(several, "new-forward-old.cu", SOURCES_2023)
    with pytest.raises(UsageError, match=r"2 files in this folder define a submission \(new-forward-old\.cu, "
                                         r"new-forward\.cu\); give the path of the one to run"):
        base.kind_of(several)
    assert base.kind_of(several / "new-forward.cu") == "minidnn"  # the file itself is fine


def test_folder_compiles_every_cu_beside_the_student_file():
    spec, _, _ = minidnn.plan(EXAMPLES / "minidnn" / "matmul-folder")
    assert spec.units == ("src/matmul.cu", "src/new-forward.cu", minidnn.SHIM)
    assert "src/matmul.h" in spec.files
    alone, _, _ = minidnn.plan(EXAMPLES / "minidnn" / "matmul-folder" / "new-forward.cu")
    assert alone.units == ("src/new-forward.cu", minidnn.SHIM)  # a file is compiled alone


def test_folder_leaves_out_included_and_scratch_copies(tmp_path):
    main = write(tmp_path, "new-forward.cu", '#include "kernels.cu"\n__global__ void conv(float *y) {}\n' + SOURCES_2021)
    write(tmp_path, "kernels.cu", "__global__ void helper(float *y) {}\n")  # #included: not compiled again
    write(tmp_path, "new-forward-old.cu", "__global__ void conv(float *y) {}\n")  # a scratch copy of conv
    write(tmp_path, "matmul.cu", "__global__ void matmul(float *c) {}\n")
    spec, _, _ = minidnn.plan(tmp_path)
    assert spec.units == ("src/matmul.cu", "src/new-forward.cu", minidnn.SHIM)
    assert "src/kernels.cu" in spec.files  # copied beside it, for the #include
    assert base.submission_file(tmp_path) == main


def test_header_beside_the_file_is_used_and_convbench_matches_declarations(tmp_path):
    own = EXAMPLES / "minidnn" / "custom-header"
    spec, variant, header = minidnn.plan(own)
    assert header == "its own gpu-new-forward.h" and variant == "2021"
    assert spec.files["src/gpu-new-forward.h"] == (own / "gpu-new-forward.h").read_text()
    assert "CONVBENCH_MATCHED_DECLARATIONS" not in spec.defines
    spec, variant, header = minidnn.plan(EXAMPLES / "minidnn" / "2022")
    assert header == "convbench's gpu-new-forward.h" and variant == "2022"
    assert "CONVBENCH_MATCHED_DECLARATIONS" in spec.defines
    declared = spec.files[f"src/{minidnn.MATCHED}"]
    assert "void conv_forward_gpu_prolog(float *, const float *, const float *, float **, float **, float **, " \
           "const int, const int, const int, const int, const int, const int);" in declared
    explicit = write(tmp_path, "edited.h", "// an explicit header\n")
    spec, _, header = minidnn.plan(own, BuildOptions(header=str(explicit)))
    assert header == "--header edited.h" and spec.files["src/gpu-new-forward.h"] == "// an explicit header\n"
    with pytest.raises(UsageError, match=r"--header .*nope\.h: no such file"):
        minidnn.plan(own, BuildOptions(header=str(tmp_path / "nope.h")))


def test_variants_reach_the_build_as_defines():
    expected = {"fall2020": "CONVBENCH_FALL2020", "2023-stride": "CONVBENCH_STRIDE"}
    for folder in MINIDNN_EXAMPLES:
        spec, variant, _ = minidnn.plan(folder)
        wanted = expected.get(variant)
        assert [d for d in spec.defines if d in expected.values()] == ([wanted] if wanted else []), folder


def test_defines_are_checked_and_passed(tmp_path):
    spec, _, _ = minidnn.plan(EXAMPLES / "minidnn" / "2021", BuildOptions(defines=("TILE_WIDTH=8", "FAST")))
    assert spec.defines[-2:] == ("TILE_WIDTH=8", "FAST")
    for bad in ("1TILE", "TILE WIDTH", "-DX", ""):
        with pytest.raises(UsageError, match="is not NAME or NAME=VALUE"):
            nvcc_build.check_defines((bad,))
    assert nvcc_build.check_defines(("A=x y", "B")) == ["-DA=x y", "-DB"]


def test_mxnet_plan_uses_the_stand_ins_and_refuses_a_header(tmp_path):
    spec = mxnet_forward.plan(EXAMPLES / "mxnet" / "specialization")
    assert spec.units == (mxnet_forward.SHIM,)
    assert {"include/mxnet/base.h", "include/mshadow/tensor.h", "include/dmlc/logging.h"} <= set(spec.files)
    assert spec.files[mxnet_forward.USER_SOURCE] == '#include "src/new-forward.cuh"\n'
    with pytest.raises(UsageError, match="--header applies to mini-dnn files"):
        mxnet_forward.plan(EXAMPLES / "mxnet" / "specialization", BuildOptions(header="gpu-new-forward.h"))
    cpu = write(tmp_path, "new-forward.cuh", MXNET_CPU)
    with pytest.raises(UsageError, match="does not define forward<gpu, float>"):
        mxnet_forward.plan(cpu)


def test_op_empty_rule():
    assert nvcc_build.op_was_empty(0, 12e-6, 10e-6)
    assert not nvcc_build.op_was_empty(1, 12e-6, 10e-6)  # a launch is work, however fast
    assert not nvcc_build.op_was_empty(0, 200e-6, 10e-6)  # no launch of its own, but something took time


def test_the_wrapped_symbols_are_the_counters():
    symbols = nvcc_build.wrapped_symbols()
    assert {"__cudaPushCallConfiguration", "cudaLaunchKernel", "cudaMemcpy", "cudaMemcpyAsync"} <= set(symbols)
    assert len(symbols) == len(set(symbols)) == nvcc_build.shipped(nvcc_build.SUPPORT_HEADER).count("CONVBENCH_COUNT(") - 1


# ------------------------------------------------------------------------------------------------ nvcc, no GPU


@needs_nvcc
@pytest.mark.parametrize("example", MINIDNN_EXAMPLES + MXNET_EXAMPLES + [EXAMPLES / "broken" / "new-forward-check.cuh"],
                         ids=ids(MINIDNN_EXAMPLES + MXNET_EXAMPLES) + ["broken/new-forward-check.cuh"])
@pytest.mark.slow
def test_every_example_builds_and_links(example, cache):
    kind = base.kind_of(example)
    lib = BUILDERS[kind].build(example, ARCH, cache)
    so = ctypes.CDLL(str(lib))  # loads without a GPU: the CUDA runtime starts lazily
    # mini-dnn's shim has the timed layer's handshake with the grader (convbench_set_timing_hook) since version 4
    assert so.convbench_abi_version() == (4 if kind == "minidnn" else 3)
    if kind == "minidnn":
        assert hasattr(so, "convbench_set_timing_hook")
        variant = minidnn.plan(example)[1]
        assert so.convbench_variant() == {"fall2020": 2020, "2023-stride": 2023}.get(variant, 2021)
    assert BUILDERS[kind].build(example, ARCH, cache) == lib  # cached: built once per content
    assert not list(lib.parent.glob("*.tmp")) and not list(lib.parent.glob("work-*"))


@needs_nvcc
def test_a_define_reaches_nvcc(tmp_path):
    source = (EXAMPLES / "minidnn" / "2021" / "new-forward.cu").read_text()
    path = write(tmp_path, "new-forward.cu", "#ifndef CONVBENCH_TEST_TILE\n#error CONVBENCH_TEST_TILE is not "
                 "defined\n#endif\n" + source)
    with pytest.raises(UsageError, match="CONVBENCH_TEST_TILE is not defined"):
        minidnn.build(path, ARCH, tmp_path / "cache")
    assert minidnn.build(path, ARCH, tmp_path / "cache", BuildOptions(defines=("CONVBENCH_TEST_TILE=8",))).is_file()


@needs_nvcc
def test_first_compiler_error_is_one_line(tmp_path):
    source = (EXAMPLES / "minidnn" / "2021" / "new-forward.cu").read_text()
    path = write(tmp_path, "typo.cu", source.replace("float acc = 0.0f;", "flaot acc = 0.0f;"))
    with pytest.raises(UsageError) as e:
        minidnn.build(path, ARCH, tmp_path / "cache")
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / "cache") not in message
    assert re.search(r"typo\.cu does not compile \(nvcc with convbench's gpu-new-forward\.h\): typo\.cu\(\d+\): "
                     r"error: .*flaot", message), message
    mxnet = write(tmp_path, "new-forward.cuh", (EXAMPLES / "mxnet" / "specialization" / "new-forward.cuh").read_text()
                  .replace("const int H_out = H - K + 1;", "const int H_out = H - K + 1"))
    with pytest.raises(UsageError, match=r"does not compile \(nvcc with convbench's stand-in MXNet headers\): "
                                         r"new-forward\.cuh\(\d+\): error"):
        mxnet_forward.build(mxnet, ARCH, tmp_path / "cache")


@needs_nvcc
def test_a_missing_definition_is_a_link_error_naming_the_fix(tmp_path):
    with pytest.raises(UsageError) as e:
        minidnn.build(EXAMPLES / "minidnn" / "matmul-folder" / "new-forward.cu", ARCH, tmp_path)
    message = str(e.value)
    assert "\n" not in message and "does not link" in message and "undefined reference" in message
    assert "matmul_batched" in message and "give the folder" in message


@needs_nvcc
def test_the_header_decides_what_compiles(tmp_path):
    """custom-header's file uses members only its own header declares: without that header (convbench's) it does
    not compile; named with --header it does."""
    own = EXAMPLES / "minidnn" / "custom-header"
    alone = write(tmp_path, "alone/new-forward.cu", (own / "new-forward.cu").read_text())
    with pytest.raises(UsageError, match=r"nvcc with convbench's gpu-new-forward\.h\): new-forward\.cu\(\d+\): error"):
        minidnn.build(alone, ARCH, tmp_path / "cache")
    lib = minidnn.build(alone, ARCH, tmp_path / "cache", BuildOptions(header=str(own / "gpu-new-forward.h")))
    assert lib.is_file()


@needs_nvcc
def test_fall2020_builds_against_its_own_one_method_header(tmp_path):
    """The course's Fall 2020 header declares conv_forward_gpu and get_device_properties only: the shim calls
    nothing else."""
    folder = tmp_path / "fall2020"
    shutil.copytree(EXAMPLES / "minidnn" / "fall2020", folder)
    write(folder, "gpu-new-forward.h", "#ifndef SRC_LAYER_GPU_NEW_FORWARD_H\n#define SRC_LAYER_GPU_NEW_FORWARD_H\n"
          "class GPUInterface\n{\n    public:\n    void get_device_properties();\n    void conv_forward_gpu(float "
          "*host_y, const float *host_x, const float *host_k, const int B, const int M, const int C, const int H, "
          "const int W, const int K);\n};\n#endif\n")
    assert minidnn.plan(folder)[1:] == ("fall2020", "its own gpu-new-forward.h")
    assert ctypes.CDLL(str(minidnn.build(folder, ARCH, tmp_path / "cache"))).convbench_variant() == 2020


@needs_nvcc
def test_cuda13_removed_device_properties_still_compile(tmp_path):
    """get_device_properties() implementations print cudaDeviceProp fields CUDA 13 removed (clockRate, ...)."""
    source = (EXAMPLES / "minidnn" / "2021" / "new-forward.cu").read_text().replace(
        'std::cout << "Device 0 name: " << prop.name << std::endl;',
        'std::cout << prop.name << " " << prop.clockRate << " " << prop.memoryClockRate << " " << prop.deviceOverlap '
        '<< " " << prop.kernelExecTimeoutEnabled << " " << prop.computeMode << std::endl;')
    assert "clockRate" in source
    assert minidnn.build(write(tmp_path, "new-forward.cu", source), ARCH, tmp_path / "cache").is_file()


@needs_nvcc
def test_stand_in_headers_check_and_log_on_the_host(tmp_path):
    """CHECK / CHECK_EQ / LOG(FATAL) / MSHADOW_CUDA_CALL throw dmlc::Error with file:line and the message; LOG(INFO)
    writes to stderr; tensors report their shape. A host program: no GPU needed."""
    program = write(tmp_path, "standin.cu", """#include <mxnet/base.h>
#include <cstdio>
int main() {
    mshadow::Tensor<mxnet::gpu, 4, float> t((float *)nullptr, mshadow::Shape4(2, 3, 4, 5), nullptr);
    printf("shape %u %u %u %u stride %u\\n", t.size(0), t.shape_[1], t.size(2), t.shape_[3], t.stride_);
    mshadow::half::half_t h(1.5f);
    h += 1.0f;
    printf("half %g\\n", (float)h);
    LOG(INFO) << "info " << 7;
    try { CHECK_EQ(t.size(1), 4u) << "channels"; } catch (const dmlc::Error &e) { printf("A %s\\n", e.what()); }
    try { LOG(FATAL) << "fatal " << 42; } catch (const dmlc::Error &e) { printf("B %s\\n", e.what()); }
    try { MSHADOW_CUDA_CALL(cudaErrorInvalidValue); } catch (const dmlc::Error &e) { printf("C %s\\n", e.what()); }
    CHECK(true) << "never";
    return 0;
}
""")
    include = REPO / "src" / "convbench" / "user" / "mxnet_include"
    p = subprocess.run([NVCC, "-std=c++17", f"-I{include}", str(program), "-o", str(tmp_path / "standin")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr.lower(), p.stderr
    run = subprocess.run([str(tmp_path / "standin")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "shape 2 3 4 5 stride 5" in run.stdout and "half 2.5" in run.stdout
    assert re.search(r"A \S*standin\.cu:\d+: Check failed: t\.size\(1\) == 4u \(3 vs\. 4\) : channels", run.stdout)
    assert re.search(r"B \S*standin\.cu:\d+: fatal 42", run.stdout)
    assert re.search(r"C .*Check failed: .*CUDA: invalid argument", run.stdout)
    assert re.search(r"\S*standin\.cu:\d+: info 7", run.stderr)


@needs_nvcc
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error path a machine without a GPU takes")
def test_shims_report_cuda_errors_in_one_line_and_the_phase(tmp_path, monkeypatch):
    """Without a GPU the first CUDA call fails: each shim says where in one line, and the phase buffer holds the
    phase that failed."""
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(minidnn, "device_arch", lambda: ARCH)
    phase = ctypes.create_string_buffer(64)
    nvcc_build.use_phase_buffer(ctypes.addressof(phase), 64)
    try:
        lib = minidnn.MinidnnLibrary(EXAMPLES / "minidnn" / "2022")
        with pytest.raises(UsageError) as e:
            lib.layer(torch.randn(1, 1, 6, 6), torch.randn(2, 1, 3, 3))
        assert re.match(r"2022 failed in conv_forward_gpu_prolog: cuda\w+ \(.*\) \(B=1 M=2 C=1 H=6 W=6 K=3\); ",
                        str(e.value)), str(e.value)
        assert phase.value == b"conv_forward_gpu_prolog" and lib.last_times == {}
        so = ctypes.CDLL(str(mxnet_forward.build(EXAMPLES / "mxnet" / "template", ARCH, tmp_path)))
        times, err = (ctypes.c_double * mxnet_forward.TIMES)(), ctypes.create_string_buffer(nvcc_build.ERRLEN)
        phase.value = b""
        so.convbench_forward.restype = ctypes.c_int
        rc = so.convbench_forward(None, None, None, 1, 1, 1, 6, 6, 3, None, times, phase, 64, err, nvcc_build.ERRLEN)
        assert rc == 1 and re.match(rb"zeroing y before forward: cuda\w+ \(", err.value), err.value
        assert phase.value == b""  # forward itself never ran
    finally:
        nvcc_build.use_phase_buffer(None)


SUBMISSIONS = os.environ.get("CONVBENCH_SUBMISSIONS")


@needs_nvcc
@pytest.mark.skipif(not SUBMISSIONS, reason="set CONVBENCH_SUBMISSIONS=DIR to build every submission DIR/*/*")
def test_real_submissions_build_or_fail_in_one_line(tmp_path):
    """Every submission folder either builds or is one UsageError line (a student's own compile error, a folder
    with several versions): never a traceback, never a crash."""
    outcomes = []
    for folder in sorted(p for p in Path(SUBMISSIONS).glob("*/*") if p.is_dir()):
        try:
            kind = base.kind_of(folder)
            if kind in BUILDERS:
                BUILDERS[kind].build(folder, ARCH, tmp_path)
            outcomes.append(f"ok   {kind:14s} {folder.name}")
        except UsageError as e:
            assert "\n" not in str(e), str(e)
            outcomes.append(f"fail {folder.name}: {e}")
    print("\n".join(outcomes))
    assert outcomes


# ---------------------------------------------------------------------------------------------------- on a GPU

SHAPES = [(2, 3, 20, 22, 4, 5), (1, 1, 9, 9, 2, 3), (5, 4, 40, 40, 16, 7), (3, 2, 7, 30, 3, 1)]  # B C H W M K


def rel_error(y: torch.Tensor, x: torch.Tensor, k: torch.Tensor) -> float:
    ref = F.conv2d(x.double().cpu(), k.double().cpu())
    return float((y.double().cpu() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


GPU_EXAMPLES = MINIDNN_EXAMPLES + MXNET_EXAMPLES


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
@pytest.mark.parametrize("example", GPU_EXAMPLES, ids=ids(GPU_EXAMPLES))
def test_gpu_every_example_matches_conv2d(example, cache, monkeypatch):
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache.parent / "gpu-cache"))
    kind = base.kind_of(example)
    impl = BUILDERS[kind].load(example)
    impl.setup()
    generator = torch.Generator().manual_seed(4)
    for B, C, H, W, M, K in SHAPES:
        x = torch.randn(B, C, H, W, generator=generator).cuda()
        k = torch.randn(M, C, K, K, generator=generator).cuda()
        y = torch.full((B, M, H - K + 1, W - K + 1), float("nan"), device="cuda")
        impl.fn(x, k, y)
        assert rel_error(y, x, k) <= 1e-5, (example.name, (B, C, H, W, M, K))
        times = impl.last_times
        assert 0 <= times["op_s"] <= times["layer_s"] and isinstance(times["op_empty"], bool)
        if kind == "minidnn":
            assert times["prolog_s"] >= 0 and times["epilog_s"] >= 0
        assert times["op_empty"] == (example.name == "prolog-only"), times
    # the course's whole layer, host to host, twice on the same torch buffers (cudaHostRegister must not trip)
    x_host = torch.randn(4, 2, 24, 24, generator=generator)
    k_dev = torch.randn(6, 2, 5, 5, generator=generator).cuda()
    first = impl.host_layer(x_host, k_dev)
    second = impl.host_layer(x_host, k_dev)
    assert rel_error(first, x_host, k_dev) <= 1e-5 and torch.equal(first, second)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_gpu_phase_buffer_and_output(cache, monkeypatch, capfd):
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache.parent / "gpu-cache"))
    phase = ctypes.create_string_buffer(b"stale", 64)
    nvcc_build.use_phase_buffer(ctypes.addressof(phase), 64)
    try:
        impl = minidnn.load(EXAMPLES / "minidnn" / "printf")
        x, k = torch.randn(2, 1, 12, 12).cuda(), torch.randn(3, 1, 3, 3).cuda()
        y = torch.empty(2, 3, 10, 10, device="cuda")
        capfd.readouterr()
        impl.fn(x, k, y)
        assert phase.value == b""  # the call is over
        out, err = capfd.readouterr()
        assert "prolog: B=2 M=3 C=1 H=12 W=12 K=3" in err and "epilog: done" in err and "kernel: grid" in err
        assert "prolog:" not in out  # stdout carries convbench's results
    finally:
        nvcc_build.use_phase_buffer(None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_gpu_a_failed_check_is_one_line(cache, monkeypatch):
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache.parent / "gpu-cache"))
    impl = mxnet_forward.load(EXAMPLES / "broken" / "new-forward-check.cuh")
    x, k = torch.randn(1, 1, 8, 8).cuda(), torch.randn(2, 1, 3, 3).cuda()
    with pytest.raises(UsageError) as e:
        impl.fn(x, k, torch.empty(1, 2, 6, 6, device="cuda"))
    message = str(e.value)
    assert "\n" not in message
    assert re.search(r"failed in forward: new-forward-check\.cuh:\d+: Check failed: 0 == 1 \(0 vs\. 1\) : Remove "
                     r"this line and replace with your implementation", message), message
    torch.cuda.synchronize()  # the process's CUDA context is fine


IGNORES_ITS_ERROR = """#include "gpu-new-forward.h"
__global__ void conv(float *y, const float *x, const float *k, int B, int M, int C, int H, int W, int K) {
    int Ho = H - K + 1, Wo = W - K + 1;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)B * M * Ho * Wo) return;
    int w = i % Wo, h = (i / Wo) % Ho, m = (i / ((long)Wo * Ho)) % M, b = i / ((long)Wo * Ho * M);
    float s = 0;
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                s += x[((b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
    y[i] = s;
}
__global__ void unused() {}
void GPUInterface::conv_forward_gpu_prolog(const float *hy, const float *hx, const float *hk, float **dy, float **dx,
    float **dk, const int B, const int M, const int C, const int H, const int W, const int K) {
    unused<<<1, 4096>>>();  // too many threads: cudaErrorInvalidConfiguration, never checked (as real files do)
    cudaMalloc((void **)dy, B * M * (H - K + 1) * (W - K + 1) * sizeof(float));
    cudaMalloc((void **)dx, B * C * H * W * sizeof(float));
    cudaMalloc((void **)dk, M * C * K * K * sizeof(float));
    cudaMemcpy(*dx, hx, B * C * H * W * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(*dk, hk, M * C * K * K * sizeof(float), cudaMemcpyHostToDevice);
}
void GPUInterface::conv_forward_gpu(float *dy, const float *dx, const float *dk, const int B, const int M,
    const int C, const int H, const int W, const int K) {
    long n = (long)B * M * (H - K + 1) * (W - K + 1);
    conv<<<(n + 255) / 256, 256>>>(dy, dx, dk, B, M, C, H, W, K);
}
void GPUInterface::conv_forward_gpu_epilog(float *hy, float *dy, float *dx, float *dk, const int B, const int M,
    const int C, const int H, const int W, const int K) {
    cudaMemcpy(hy, dy, B * M * (H - K + 1) * (W - K + 1) * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dy); cudaFree(dx); cudaFree(dk);
}
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_gpu_an_error_the_file_ignores_is_reported_not_fatal(tmp_path, cache, monkeypatch):
    """The course's harness never checked CUDA errors: a file whose own call fails (non-sticky) and goes on still
    gives its output, and the error is kept for the verdict; a fault would still stop the call."""
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache.parent / "gpu-cache"))
    impl = minidnn.load(write(tmp_path, "ignores/new-forward.cu", IGNORES_ITS_ERROR))
    x, k = torch.randn(3, 2, 13, 11).cuda(), torch.randn(4, 2, 3, 3).cuda()
    y = torch.full((3, 4, 11, 9), float("nan"), device="cuda")
    impl.fn(x, k, y)
    assert rel_error(y, x, k) <= 1e-5
    # CUDA 13 answers a block of 4096 threads with cudaErrorInvalidValue; older runtimes said InvalidConfiguration
    assert re.match(r"conv_forward_gpu_prolog: cudaError(InvalidValue|InvalidConfiguration) \(",
                    impl.last_times["ignored_error"]), impl.last_times


@needs_nvcc
def test_the_same_submission_elsewhere_reuses_its_build(tmp_path, cache):
    """A grading job unpacks each upload into a fresh temporary folder: the build is found by content, not path."""
    example = EXAMPLES / "minidnn" / "matmul-folder"  # a folder, its own header beside it
    built = []
    for where in ("first", "second"):
        copy = tmp_path / where / "sub"
        shutil.copytree(example, copy)
        built.append(minidnn.build(copy, ARCH, cache / "shared-builds"))
    assert built[0] == built[1]
