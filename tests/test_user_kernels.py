"""Bring your own kernel (`--impl PATH`): the Python kind end to end on the CPU, the launch-declaration parser (and
that it evaluates nothing), loading and checking the CUDA kinds without a GPU, nvcc compile checks of every CUDA
example (where nvcc exists), the sandbox child process, and, marked `gpu`, every example and broken example on a GPU.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from clihelp import cli

from convbench import user
from convbench.core.errors import UsageError
from convbench.user import _source, launch_decl, minidnn
from convbench.user import find as get_impl

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
BROKEN = EXAMPLES / "broken"
NVCC = shutil.which("nvcc")
NO_GPU = not torch.cuda.is_available()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
CORRECTNESS = re.compile(r"^Correctness: (\S+) Model:", re.MULTILINE)


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    monkeypatch.delenv("CONVBENCH_DATA", raising=False)
    monkeypatch.delenv("CONVBENCH_SANDBOX", raising=False)


def one_line_error(rc: int, err: str, *fragments: str) -> str:
    assert rc == 2 and "Traceback" not in err, (rc, err)
    lines = [line for line in err.splitlines() if line.startswith("convbench: error: ")]
    assert len(lines) == 1 and err.rstrip("\n").endswith(lines[0]), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def verify_row(out: str, name: str) -> str:
    """The verify table's row of `name`, its cells joined across the lines a wrapped cell takes ("│ a │ b c │")."""
    lines = out.splitlines()
    at = [i for i, line in enumerate(lines) if f" {name} " in line]
    assert len(at) == 1, out
    cells = lines[at[0]].split("│")
    for line in lines[at[0] + 1:]:
        more = line.split("│")
        if len(more) != len(cells) or more[1].strip():  # the next row, or the table's end
            break
        cells = [f"{a.strip()} {b.strip()}".strip() for a, b in zip(cells, more)]
    return "│ " + " │ ".join(c.strip() for c in cells[1:-1]) + " │"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------------------------ the Python kind


def test_python_example_runs_with_the_reference_correctness(capsys):
    rc, out, err = cli(capsys, "run", "--impl", EXAMPLES / "python_conv.py", "--net", "sp19", "--size", "100")
    assert rc == 0, err
    rc_ref, out_ref, _ = cli(capsys, "run", "--impl", "reference", "--net", "sp19", "--size", "100")
    assert rc_ref == 0
    assert CORRECTNESS.search(out).group(1) == CORRECTNESS.search(out_ref).group(1) == "0.89"
    assert "impl python_conv on cpu" in err
    assert len(re.findall(r"^Op Time: \d+\.\d{6} Layer Time: \d+\.\d{6}$", out, re.MULTILINE)) == 2


def test_python_example_passes_verify(capsys):
    rc, out, err = cli(capsys, "verify", "--impl", EXAMPLES / "python_conv.py", "--shapes", "14", "--seed", "2")
    assert rc == 0, out + err
    row = verify_row(out, "python_conv")
    assert re.search(r"\sok\s", row) and "14 shapes each" in err, row


def test_broken_python_example_fails_verify(capsys):
    rc, out, err = cli(capsys, "verify", "--impl", BROKEN / "python_wrong.py", "--shapes", "14", "--seed", "2")
    assert rc == 1, out + err
    assert "Traceback" not in err
    assert re.search(r"FAIL \d+/14", verify_row(out, "python_wrong"))


def test_python_file_without_conv_forward(capsys, tmp_path):
    path = write(tmp_path, "nothing.py", "def forward(x, k):\n    return x\n")
    rc, out, err = cli(capsys, "verify", "--impl", path)
    one_line_error(rc, err, "nothing.py", "defines no function conv_forward")
    assert out == ""


@pytest.mark.parametrize("text, fragments", [
    ("def conv_forward(x, k)\n    return x\n", ("does not import", "SyntaxError", "line 1")),
    ("import no_such_module_here\n", ("does not import", "No module named", "line 1")),
    ("DEVICE = 'tpu'\ndef conv_forward(x, k):\n    return x\n", ("DEVICE = 'tpu'",)),
    ("NAME = 'cudnn'\ndef conv_forward(x, k):\n    return x\n", ("built-in implementation",)),
    ("TOLERANCE = 'small'\ndef conv_forward(x, k):\n    return x\n", ("TOLERANCE",)),
])
@pytest.mark.slow
def test_python_file_errors_are_one_line(capsys, tmp_path, text, fragments):
    rc, _, err = cli(capsys, "run", "--impl", write(tmp_path, "bad.py", text), "--size", "5")
    one_line_error(rc, err, *fragments)


@pytest.mark.parametrize("body, fragment", [
    ("return F.conv2d(x, k)[:, :, :-1]", "returned shape"),
    ("return F.conv2d(x.double(), k.double())", "returned torch.float64"),
    ("return None", "returned NoneType"),
    ("return x[0, 0, 0, 0].item() / 0", "ZeroDivisionError"),
])
@pytest.mark.slow
def test_python_kernel_bad_results_are_one_line(capsys, tmp_path, body, fragment):
    path = write(tmp_path, "oops.py", f"import torch.nn.functional as F\n\ndef conv_forward(x, k):\n    {body}\n")
    rc, _, err = cli(capsys, "verify", "--impl", path, "--shapes", "2", "--seed", "1")
    line = one_line_error(rc, err, "oops.py", fragment)
    if "ZeroDivision" in fragment:
        assert "line 4" in line


def test_python_file_name_and_settings(tmp_path):
    path = write(tmp_path, "my_conv.py", "import torch.nn.functional as F\nNAME = 'my-conv'\nTOLERANCE = 1e-4\n"
                 "PRECISION = 'tf32'\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n")
    impl = get_impl(str(path))
    assert (impl.name, impl.device, impl.tolerance, impl.precision) == ("my-conv", "cpu", 1e-4, "tf32")
    assert get_impl(str(path)) is impl  # loaded once per path
    x, k = torch.randn(2, 3, 9, 8), torch.randn(4, 3, 3, 3)
    y = torch.full((2, 4, 7, 6), float("nan"))
    impl(x, k, y)
    torch.testing.assert_close(y, F.conv2d(x, k))
    plain = get_impl(str(write(tmp_path, "plain_conv.py", "def conv_forward(x, k):\n    return x\n")))
    assert plain.name == "plain_conv"  # no NAME: the file's stem


def test_unknown_kernel_path(capsys, tmp_path):
    rc, _, err = cli(capsys, "run", "--impl", tmp_path / "missing.py")
    one_line_error(rc, err, "no such kernel file", "missing.py")
    rc, _, err = cli(capsys, "verify", "--impl", "no-such-impl")
    one_line_error(rc, err, "unknown implementation 'no-such-impl'", "your own kernel file")
    with pytest.raises(UsageError, match="no such kernel file"):
        get_impl("kernels/gone.cu")


@pytest.mark.skipif(not NO_GPU, reason="a CUDA GPU is present here, so --device cuda is not an error")
def test_python_example_on_cuda_without_gpu(capsys):
    rc, _, err = cli(capsys, "verify", "--impl", EXAMPLES / "python_conv.py", "--device", "cuda")
    one_line_error(rc, err, "no CUDA GPU")


# --------------------------------------------------------------------------------------- the launch declaration


def test_declaration_good():
    decl = launch_decl.parse_declaration("grid=(B, M, ceil(H_out/16)*ceil(W_out/16)) block=(16,16,1) "
                                         "shared = (16 + K - 1) * (16 + K - 1) * sizeof(float) constant=kc")
    assert decl.constant == "kc"
    assert decl.evaluate(B=2, M=16, C=6, H=22, W=22, K=5) == ((2, 16, 4), (16, 16, 1), 20 * 20 * 4)
    assert decl.evaluate(B=10000, M=4, C=1, H=86, W=86, K=7) == ((10000, 4, 25), (16, 16, 1), 22 * 22 * 4)
    decl = launch_decl.parse_declaration("grid=((W_out + T - 1) // T * max(1, min(H_out, 3)), M % 5 + 1) block=T",
                                         {"T": 8})
    assert decl.evaluate(B=1, M=7, C=1, H=20, W=20, K=5) == ((6, 3, 1), (8, 1, 1), 0)


def test_declaration_of_the_example_file():
    decl = launch_decl.find_declaration((EXAMPLES / "mxnet_forward.cu").read_text(), "mxnet_forward.cu")
    assert dict(decl.defines) == {"TILE_WIDTH": 16, "KC_FLOATS": 16000} and decl.constant == "kc"
    assert decl.evaluate(B=100, M=16, C=6, H=22, W=22, K=5) == ((100, 16, 4), (16, 16, 1), 20 * 20 * 4)


def test_integer_defines():
    found = launch_decl.integer_defines("#define TILE 16u\n#define TW (TILE * 2)  // twice\n#define F(x) x\n"
                                        "#define X 1.5\n#define UNKNOWN (Z + 1)\n  # define  K_MAX 7 /* c */\n")
    assert found == {"TILE": 16, "TW": 32, "K_MAX": 7}


@pytest.mark.parametrize("line, fragment", [
    ("block=(16, 16, 1)", "no grid"),
    ("grid=(B, M)", "no block"),
    ("grid=(B) block=(16) stream=2", "unknown key 'stream'"),
    ("grid=(B) grid=(M) block=1", "given twice"),
    ("grid=(B**2) block=1", "operator Pow"),
    ("grid=(B, M, 1, 1) block=1", "4 sizes"),
    ("grid=(B, M block=1", "unbalanced"),
    ("grid=(N) block=1", "name 'N' is not allowed"),
    ("grid=('B') block=1", "only whole numbers"),
    ("grid=(1.5) block=1", "only whole numbers"),
    ("grid=(B.bit_length()) block=1", "call of 'B.bit_length'"),
    ("grid=(B[0]) block=1", "Subscript"),
    ("grid=(lambda: 1) block=1", "Lambda"),
    ("grid=(ceil(1, 2)) block=1", "ceil() takes one argument"),
    ("grid=(sizeof(char)) block=1", "sizeof() takes one of"),
    ("grid=(B) block=1 constant=k[0]", "not a C identifier"),
    ("please grid=(B) block=1", "unexpected 'please'"),
    ("grid=(B) block=1 shared=", "has no value"),
])
def test_declaration_bad(line, fragment):
    with pytest.raises(UsageError) as e:
        launch_decl.parse_declaration(line)
    assert fragment in str(e.value) and "\n" not in str(e.value)
    assert "expected // convbench: grid=" in str(e.value)


@pytest.mark.parametrize("line, fragment", [
    ("grid=(H_out/16) block=16", "is 1.125 at B=2"),
    ("grid=(B, M, 70000) block=16", "grid.z = 70000"),
    ("grid=1 block=(32, 32, 2)", "2048 threads"),
    ("grid=(B - 2) block=1", "grid.x = 0"),
    ("grid=1 block=1 shared=-K", "shared = -5"),
    ("grid=(B // (M - M)) block=1", "division by zero"),
])
def test_declaration_bad_at_a_shape(line, fragment):
    decl = launch_decl.parse_declaration(line)
    with pytest.raises(UsageError, match=re.escape(fragment)):
        decl.evaluate(B=2, M=16, C=6, H=22, W=22, K=5)


def test_declaration_evaluates_no_code(tmp_path, monkeypatch):
    import builtins

    def no(*args, **kwargs):
        raise AssertionError("the parser must not evaluate Python")

    monkeypatch.setattr(builtins, "eval", no)
    monkeypatch.setattr(builtins, "exec", no)
    witness = tmp_path / "pwned"
    for line in (f"grid=(__import__('os').system('touch {witness}')) block=1",
                 f"grid=(open('{witness}', 'w')) block=1",
                 "grid=(().__class__.__base__.__subclasses__()) block=1",
                 f"grid=(B) block=(1) shared=__import__('os').system('touch {witness}')"):
        with pytest.raises(UsageError, match="not allowed"):
            launch_decl.parse_declaration(line)
    assert not witness.exists()
    assert launch_decl.parse_declaration("grid=(B) block=1").evaluate(B=3, M=1, C=1, H=1, W=1, K=1)[0] == (3, 1, 1)


def test_declaration_must_be_there_once(tmp_path):
    kernel = ("__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, "
              "const int C, const int H, const int W, const int K) {}\n")
    with pytest.raises(UsageError, match="no launch declaration"):
        user.load(write(tmp_path, "none.cu", kernel))
    with pytest.raises(UsageError, match="2 `// convbench:` launch declarations"):
        user.load(write(tmp_path, "two.cu", "// convbench: grid=B block=1\n// convbench: grid=M block=1\n" + kernel))


# ----------------------------------------------------------------------------------- the CUDA kinds, without a GPU


def test_cuda_examples_load_without_a_gpu():
    mx = get_impl(str(EXAMPLES / "mxnet_forward.cu"))
    assert (mx.name, mx.kind, mx.device, mx.writes_into) == ("mxnet_forward.cu", "mxnet", "cuda", True)
    nf = get_impl(str(EXAMPLES / "new-forward.cu"))
    assert (nf.name, nf.kind, nf.device) == ("new-forward.cu", "minidnn", "cuda")
    assert nf.host_layer is not None and nf.last_times == {}
    assert "B, M, C, H, W, K" in nf.summary
    assert "with stride S" in get_impl(str(BROKEN / "new-forward-wrong.cu")).summary
    for path in sorted(BROKEN.glob("*.cu")):  # broken ones fail later: at compile time or when they run
        assert get_impl(str(path)).kind in ("mxnet", "minidnn")


@pytest.mark.skipif(not NO_GPU, reason="a CUDA GPU is present here")
@pytest.mark.parametrize("example", ["mxnet_forward.cu", "new-forward.cu"])
def test_cuda_examples_need_a_gpu(capsys, example):
    rc, _, err = cli(capsys, "verify", "--impl", EXAMPLES / example)
    one_line_error(rc, err, "no CUDA GPU")
    rc, _, err = cli(capsys, "run", "--impl", EXAMPLES / example, "--device", "cpu")
    one_line_error(rc, err, f"implementation {example} needs a CUDA GPU", "--impl cpu-direct")


KERNEL = ("__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, "
          "const int C, const int H, const int W, const int K) { }\n")


@pytest.mark.parametrize("text, fragment", [
    ("__global__ void other(float *y) {}\n", "defines neither __global__ void forward_kernel"),
    ("// convbench: grid=(B) block=(16)\n" + KERNEL.replace("const float *k, ", ""), "forward_kernel takes (float *y"),
    ("// convbench: grid=(B) block=(16)\n// forward_kernel(...) is in a comment only\n__global__ void f() {}\n",
     "defines neither"),
    ("// convbench: grid=(B) block=(16)\nvoid forward_kernel(int a) {}\n", "defines no __global__ void forward_kernel"),
    ("// convbench: grid=(B, Q) block=(16)\n" + KERNEL, "name 'Q' is not allowed"),
    ("// convbench: grid=(B) block=(16) constant=kc\n" + KERNEL, "declares no `__constant__ float kc[SIZE]`"),
    ("// convbench: grid=(B) block=(16) constant=kc\n__constant__ float kc[N_MAX];\n" + KERNEL,
     "cannot read the size of __constant__ float kc[N_MAX]"),
])
@pytest.mark.slow
def test_mxnet_file_errors(tmp_path, text, fragment):
    with pytest.raises(UsageError) as e:
        user.load(write(tmp_path, "k.cu", text))
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_mxnet_constant_capacity(tmp_path):
    text = ("#define N 100\n// convbench: grid=(B) block=(16) constant=w\n__constant__ float w[N * 4];\n"
            + KERNEL)
    impl = user.load(write(tmp_path, "c.cu", text))
    assert impl.fn.worker.proc is not None  # user CUDA code runs in its sandbox process
    from convbench.user.cuda_file import MxnetKernel

    assert MxnetKernel(tmp_path / "c.cu").capacity == 400


@pytest.mark.parametrize("drop, fragment", [
    ("conv_forward_gpu_epilog", "does not define GPUInterface::conv_forward_gpu_epilog"),
    ("conv_forward_gpu(", "does not define GPUInterface::conv_forward_gpu("),
])
def test_minidnn_missing_methods(tmp_path, drop, fragment):
    source = (EXAMPLES / "new-forward.cu").read_text()
    renamed = source.replace(f"GPUInterface::{drop}", f"GPUInterface::renamed_{drop}")
    with pytest.raises(UsageError, match=re.escape(fragment)):
        user.load(write(tmp_path, "new-forward.cu", renamed))


def test_minidnn_mixed_variants(tmp_path):
    source = (EXAMPLES / "new-forward.cu").read_text()
    mixed = source.replace("float *device_k,\n                                                    const int B, "
                           "const int M, const int C, const int H, const int W,\n"
                           "                                                    const int K)",
                           "float *device_k,\n const int B, const int M, const int C, const int H, const int W, "
                           "const int K, const int S)")
    assert mixed != source
    with pytest.raises(UsageError, match=r"take \(conv_forward_gpu_prolog 12, conv_forward_gpu 9, "
                                         r"conv_forward_gpu_epilog 11\)"):
        user.load(write(tmp_path, "mixed.cu", mixed))


def test_strip_comments_keeps_lines_and_strings():
    code = 'a // x\n/* b\nc */ d "//not" \'/\'\n'
    stripped = _source.strip_comments(code)
    assert stripped.count("\n") == code.count("\n") and '"//not"' in stripped
    assert "x" not in stripped and "b" not in stripped and "d" in stripped


# ---------------------------------------------------------------------------------------- nvcc compile checks


@needs_nvcc
def test_mxnet_examples_compile_with_nvcc(tmp_path):
    good = [EXAMPLES / "mxnet_forward.cu", BROKEN / "mxnet_oob.cu", BROKEN / "mxnet_wrong.cu"]
    p = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90", "-c", *map(str, good)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr.lower(), p.stderr
    bad = BROKEN / "mxnet_compile_error.cu"
    p = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90", "-c", str(bad)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0
    first = _source.first_error(p.stderr, {str(bad.parent) + "/": ""})
    assert first.startswith("mxnet_compile_error.cu(17): error") and "flaot" in first, first


@needs_nvcc
def test_minidnn_examples_build(tmp_path):
    lib = minidnn.build(EXAMPLES / "new-forward.cu", "sm_90", tmp_path)
    stamp = lib.stat().st_mtime_ns
    assert minidnn.build(EXAMPLES / "new-forward.cu", "sm_90", tmp_path) == lib and lib.stat().st_mtime_ns == stamp
    so = ctypes.CDLL(str(lib))
    assert so.convbench_has_stride() == 0 and hasattr(so, "convbench_layer")
    wrong = ctypes.CDLL(str(minidnn.build(BROKEN / "new-forward-wrong.cu", "sm_90", tmp_path)))
    assert wrong.convbench_has_stride() == 1  # the 2022+ header variant, selected by -DCONVBENCH_STRIDE
    assert minidnn.build(BROKEN / "new-forward-oob.cu", "sm_90", tmp_path).is_file()
    assert not list(tmp_path.rglob("*.tmp"))


@needs_nvcc
def test_minidnn_compile_error_is_one_line(tmp_path):
    with pytest.raises(UsageError) as e:
        minidnn.build(BROKEN / "new-forward-compile-error.cu", "sm_90", tmp_path)
    message = str(e.value)
    assert "\n" not in message and "does not compile" in message
    assert re.search(r"new-forward-compile-error\.cu\(\d+\): error: identifier \"y_size\" is undefined", message), message
    assert str(tmp_path) not in message


@needs_nvcc
def test_minidnn_shim_reports_cuda_errors_in_one_line(tmp_path, capfd, monkeypatch):
    """A file that checks nothing and prints from C++: its output goes to stderr, and without a GPU the shim's own
    check names the phase and the CUDA error (with a GPU, the layer is right)."""
    path = write(tmp_path, "quiet.cu", """#include <cstdio>
#include "gpu-new-forward.h"
__global__ void kern(float *y, const float *x, const float *k, int n, int K) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float s = 0; for (int j = 0; j < K * K; ++j) s += x[i + (i / (5 - K + 1)) * (K - 1) + (j / K) * 5 + j % K] * k[j]; y[i] = s; }
}
void GPUInterface::conv_forward_gpu_prolog(const float *hy, const float *hx, const float *hk, float **dy, float **dx,
    float **dk, const int B, const int M, const int C, const int H, const int W, const int K) {
    printf("prolog says hello\\n");
    cudaMalloc((void **)dy, B * M * (H - K + 1) * (W - K + 1) * sizeof(float));
    cudaMalloc((void **)dx, B * C * H * W * sizeof(float));
    cudaMalloc((void **)dk, M * C * K * K * sizeof(float));
    cudaMemcpy(*dx, hx, B * C * H * W * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(*dk, hk, M * C * K * K * sizeof(float), cudaMemcpyHostToDevice);
}
void GPUInterface::conv_forward_gpu(float *dy, const float *dx, const float *dk, const int B, const int M,
    const int C, const int H, const int W, const int K) { kern<<<1, 32>>>(dy, dx, dk, (H - K + 1) * (W - K + 1), K); }
void GPUInterface::conv_forward_gpu_epilog(float *hy, float *dy, float *dx, float *dk, const int B, const int M,
    const int C, const int H, const int W, const int K) {
    cudaMemcpy(hy, dy, B * M * (H - K + 1) * (W - K + 1) * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dy); cudaFree(dx); cudaFree(dk);
}
""")
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path / "cache"))
    if NO_GPU:
        monkeypatch.setattr(minidnn, "device_arch", lambda: "sm_90")
    lib = minidnn.MinidnnLibrary(path)
    assert lib.device_properties() is None  # the file has none: nothing to print
    x, k = torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3)
    capfd.readouterr()
    if NO_GPU:
        with pytest.raises(UsageError) as e:
            lib.layer(x, k)
        assert "\n" not in str(e.value) and re.search(r"failed in conv_forward_gpu_prolog: cuda\w+ \(", str(e.value))
    else:
        torch.testing.assert_close(lib.layer(x, k), F.conv2d(x, k))
        assert set(lib.last_times) == {"prolog_s", "op_s", "epilog_s", "layer_s"}
    out, err = capfd.readouterr()
    assert "prolog says hello" in err and "prolog says hello" not in out


# ------------------------------------------------------------------------------------------------- the sandbox


def kernel(tmp_path: Path, name: str, body: str) -> Path:
    return write(tmp_path, name, f"import torch.nn.functional as F\n\ndef conv_forward(x, k):\n    {body}\n")


def test_sandbox_runs_the_kernel_in_its_own_process_and_forwards_output(tmp_path, capfd):
    path = write(tmp_path, "fine.py", "import os, torch.nn.functional as F\nprint('hello from the child')\n"
                 "def conv_forward(x, k):\n    print('pid', os.getpid())\n    return F.conv2d(x, k)\n")
    impl = user.load(path)
    proc = impl.fn.worker.proc
    x, k = torch.randn(2, 1, 8, 8), torch.randn(3, 1, 3, 3)
    for _ in range(2):
        torch.testing.assert_close(impl(x, k), F.conv2d(x, k))
    assert impl.fn.worker.proc is proc and impl.reported_op_time() > 0  # one child, kept; it timed the call itself
    err = capfd.readouterr().err
    assert "hello from the child" in err and err.count(f"pid {proc.pid}") == 2 or "pid " in err


@pytest.mark.parametrize("body, pattern", [
    ("import ctypes; ctypes.string_at(0)", r"bad\.py: the sandbox process was killed by SIGSEGV while running "
     r"B=1 C=1 H=4 W=4 M=1 K=3, in conv_forward"),
    ("print('bye', flush=True); import os; os._exit(0)", r"bad\.py: the sandbox process exited with status 0 while "
     r"running B=1 .*, in conv_forward; its last output: 'bye'"),
    ("import sys; sys.exit(3)", r"bad\.py: .*SystemExit: 3|exited with status"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", r"killed by SIGKILL"),
])
@pytest.mark.slow
def test_sandbox_turns_a_crash_or_exit_into_one_line_and_survives(tmp_path, body, pattern):
    impl = user.load(kernel(tmp_path, "bad.py", body))
    x, k = torch.randn(1, 1, 4, 4), torch.randn(1, 1, 3, 3)
    with pytest.raises(UsageError) as e:
        impl(x, k)
    assert "\n" not in str(e.value) and re.search(pattern, str(e.value)), str(e.value)
    assert impl.fn.worker.proc is None  # gone, and a later call starts a new one
    assert torch.equal(F.conv2d(x, k), F.conv2d(x, k))  # and this process goes on


def test_sandbox_time_out(tmp_path, monkeypatch):
    impl = user.load(kernel(tmp_path, "slow.py", "import time; time.sleep(60)"))
    monkeypatch.setenv("CONVBENCH_SANDBOX_TIMEOUT", "1")
    with pytest.raises(UsageError, match=r"slow.py: no answer within 1 s while running B=1 .*in conv_forward.* "
                                         r"CONVBENCH_SANDBOX_TIMEOUT"):
        impl(torch.randn(1, 1, 4, 4), torch.randn(1, 1, 3, 3))
    assert impl.fn.worker.proc is None


def test_sandbox_memory_limit(tmp_path, monkeypatch):
    impl = user.load(kernel(tmp_path, "hog.py", "a = [bytearray(50 << 20) for _ in range(200)]"))
    monkeypatch.setenv("CONVBENCH_SANDBOX_MEMORY", "1.5")
    with pytest.raises(UsageError, match=r"hog.py: used \d+\.\d GiB of memory, over the sandbox's 1.5 GiB, while "
                                         r"running .*CONVBENCH_SANDBOX_MEMORY"):
        impl(torch.randn(1, 1, 4, 4), torch.randn(1, 1, 3, 3))


def test_sandbox_import_time_exit_is_one_line(capsys, tmp_path):
    path = write(tmp_path, "leaves.py", "import os\nos._exit(5)\ndef conv_forward(x, k):\n    return x\n")
    rc, _, err = cli(capsys, "verify", "--impl", path, "--shapes", "2")
    one_line_error(rc, err, "leaves.py: the sandbox process exited with status 5 while loading the file")


def test_kernel_that_writes_its_inputs_fails_verify_and_warns_in_run(capsys, tmp_path):
    path = kernel(tmp_path, "scribbler.py", "y = F.conv2d(x, k); x.zero_(); k.mul_(2); return y")
    rc, out, err = cli(capsys, "verify", "--impl", path, "--shapes", "3", "--seed", "1")
    assert rc == 1, out + err
    assert "FAIL 3/3 (wrote k, x)" in verify_row(out, "scribbler")
    path = kernel(tmp_path, "scribbler2.py", "y = F.conv2d(x, k); x.zero_(); k.mul_(2); return y")
    rc, out, err = cli(capsys, "run", "--impl", path, "--size", "5")
    assert rc == 0 and "warning: scribbler2.py wrote to its inputs x and k" in err, err


@pytest.mark.skipif(not user.sandbox.self_test("cpu").ok, reason="the sandbox cannot be made on this machine")
def test_sandbox_has_no_network_and_its_own_tmp(tmp_path):
    secret = Path("/tmp") / f"convbench-test-secret-{os.getpid()}"
    secret.write_text("x")
    try:
        body = (f"import socket, os; s = socket.socket(); s.settimeout(2); ok = os.path.exists({str(secret)!r}); "
                "s.connect(('1.1.1.1', 53)) if ok else None; return F.conv2d(x, k) * (2 if ok else 1)")
        impl = user.load(kernel(tmp_path, "nosy.py", body))
        x, k = torch.randn(1, 1, 4, 4), torch.randn(1, 1, 3, 3)
        torch.testing.assert_close(impl(x, k), F.conv2d(x, k))  # the host's /tmp is not there
        impl2 = user.load(kernel(tmp_path, "net.py", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"))
        with pytest.raises(UsageError, match=r"net.py.*(OSError|unreachable|timed out)"):
            impl2(x, k)
    finally:
        secret.unlink()


def test_sandbox_off(monkeypatch, tmp_path):
    monkeypatch.setenv("CONVBENCH_SANDBOX", "0")
    impl = user.load(kernel(tmp_path, "inproc.py", "return F.conv2d(x, k)"))
    assert not hasattr(impl.fn, "worker") and impl.writes_into is False


# --------------------------------------------------------------------------------------------------- on a GPU

GOOD = ["python_conv.py", "mxnet_forward.cu", "new-forward.cu"]


@pytest.mark.gpu
@pytest.mark.parametrize("example", GOOD)
def test_gpu_examples_pass_verify(capsys, example):
    rc, out, err = cli(capsys, "verify", "--device", "cuda", "--impl", EXAMPLES / example, "--shapes", "30", "--seed", "4")
    assert rc == 0, out + err
    name = Path(example).stem if example.endswith(".py") else example
    assert re.search(r"\sok\s", verify_row(out, name)) and "30 shapes each" in err


@pytest.mark.gpu
@pytest.mark.parametrize("example", GOOD)
def test_gpu_examples_run_with_the_reference_correctness(capsys, example):
    rc, out, err = cli(capsys, "run", "--device", "cuda", "--impl", EXAMPLES / example, "--net", "sp19", "--size", "1000")
    assert rc == 0, err
    assert CORRECTNESS.search(out).group(1) == "0.886"
    if example == "new-forward.cu":
        times = get_impl(str(EXAMPLES / example)).last_times
        assert 0 < times["op_s"] <= times["layer_s"]


@pytest.mark.gpu
@pytest.mark.parametrize("broken", ["mxnet_wrong.cu", "new-forward-wrong.cu"])
def test_gpu_wrong_results_fail_verify(capsys, broken):
    rc, out, err = cli(capsys, "verify", "--device", "cuda", "--impl", BROKEN / broken, "--shapes", "12", "--seed", "4")
    assert rc == 1, out + err
    assert re.search(r"FAIL \d+/12", verify_row(out, broken))


@pytest.mark.gpu
@pytest.mark.parametrize("broken, pattern", [
    ("mxnet_compile_error.cu", r"does not compile: mxnet_compile_error\.cu\(17\): error: .*flaot"),
    ("new-forward-compile-error.cu", r'does not compile .*new-forward-compile-error\.cu\(\d+\): error: .*"y_size"'),
    ("mxnet_oob.cu", r"^convbench: error: mxnet_oob\.cu: .*illegal memory access .*sandbox process, B="),
    # the shim's check, or the file's own check_cuda + exit(-1) if it sees the fault first
    ("new-forward-oob.cu", r"^convbench: error: new-forward-oob\.cu.*(cudaErrorIllegalAddress|illegal memory access)"),
])
def test_gpu_broken_files_are_one_line_and_leave_cuda_usable(capsys, broken, pattern):
    rc, _, err = cli(capsys, "verify", "--device", "cuda", "--impl", BROKEN / broken, "--shapes", "3", "--seed", "4")
    assert re.search(pattern, one_line_error(rc, err)), err
    rc, out, err = cli(capsys, "verify", "--device", "cuda", "--impl", "gpu-basic", "--shapes", "3", "--seed", "4")
    assert rc == 0, out + err  # the fault stayed in the sandbox process


@pytest.mark.gpu
def test_gpu_nvrtc_compile_time_limit(capsys, tmp_path, monkeypatch):
    """A bare kernel whose macros expand to 2^28 tokens: NVRTC is stopped at the compile time limit, one line."""
    macros = "#define A0 1+\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 29))
    path = tmp_path / "bomb.cu"
    path.write_text(macros + "// convbench: grid=(1, 1, 1) block=(1, 1, 1)\n__global__ void forward_kernel(float *y, "
                    "const float *x, const float *k, const int B, const int M, const int C, const int H, const int W, "
                    "const int K) { y[0] = A28 0; }\n")
    monkeypatch.setenv("CONVBENCH_COMPILE_TIMEOUT", "3")
    start = time.perf_counter()
    rc, _, err = cli(capsys, "verify", "--device", "cuda", "--impl", path, "--shapes", "1")
    assert re.search(r"NVRTC compiling bomb\.cu took more than 3 s; .*CONVBENCH_COMPILE_TIMEOUT", one_line_error(rc, err))
    assert time.perf_counter() - start < 60
