"""The CUDA plumbing that can be checked without a GPU: argument packing, the one-line CUDA error, tuning records."""

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from convbench.cli.main import main
from stubdriver import c_launcher, stub_library
from convbench.core import gpu
from convbench.core.errors import UsageError, cuda_error
from convbench.core.gpu import tuning
from convbench.impls.registry import all_impls


def test_kernel_arguments_are_packed_as_the_kernel_expects():
    t = torch.zeros(3)
    assert gpu.kernel_arg(t) == np.uint64(t.data_ptr()) and gpu.kernel_arg(t).dtype == np.uint64  # 8-byte pointer
    assert gpu.kernel_arg(7).dtype == np.int32 and gpu.kernel_arg(7) == 7  # `const int` parameters
    assert gpu.kernel_arg(1.5).dtype == np.float32


def test_ceil_div():
    assert [gpu.ceil_div(a, 16) for a in (1, 16, 17, 32, 33)] == [1, 1, 2, 2, 3]


def test_gpu_errors_become_one_line():
    class CUDADriverError(Exception):
        pass

    CUDADriverError.__module__ = "cupy.cuda.driver"
    msg = cuda_error(CUDADriverError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"))
    assert msg.startswith("the GPU reported: CUDA_ERROR_ILLEGAL_ADDRESS") and "compute-sanitizer" in msg
    assert cuda_error(RuntimeError("CUDA error: device-side assert triggered\nmore")) .count("\n") == 0
    assert cuda_error(ValueError("a bug of ours")) is None


def test_tuning_records_and_forces(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path))
    tuning._table.cache_clear()
    x, k = torch.empty(2, 3, 20, 24), torch.empty(5, 3, 5, 5)
    defaults = {"TILE": 16}
    assert tuning.config("gpu-x", x, k, defaults) == defaults
    path = tuning.record("gpu-x", tuning.shape_key(x.shape, k.shape), {"TILE": 32})
    assert path.is_file() and not list(tmp_path.rglob("*.tmp"))
    assert tuning.config("gpu-x", x, k, defaults) == {"TILE": 32}
    assert tuning.config("gpu-x", torch.empty(2, 3, 21, 24), k, defaults) == defaults  # another shape
    tuning.force("gpu-x", {"TILE": 8})
    assert tuning.config("gpu-x", x, k, defaults) == {"TILE": 8}
    tuning.force("gpu-x", None)
    assert tuning.config("gpu-x", x, k, defaults) == {"TILE": 32}
    tuning._table.cache_clear()


def test_gpu_rungs_register_without_a_gpu():
    gpu = {i.name for i in all_impls() if i.device == "cuda"}
    assert {"cudnn", "cudnn-tf32", "gpu-basic", "gpu-streams"} <= gpu
    for impl in all_impls():
        if impl.precision != "fp32" and impl.device == "cuda":
            assert impl.tolerance > 1e-5, f"{impl.name} is reduced-precision: its tolerance says what it meets"


def test_sweep_needs_a_gpu_impl(capsys):
    assert main(["sweep", "--impl", "cpu-naive"]) == 2
    # without a GPU nothing sweeps, whatever the impl: the GPU is what the line names then
    want = "sweep times GPU implementations" if torch.cuda.is_available() else "sweep: no CUDA GPU"
    assert want in capsys.readouterr().err




@pytest.fixture
def stub(tmp_path, monkeypatch):
    """STUB_DRIVER compiled here and put in the driver's place for the ctypes launcher (the library, to read what
    the last call passed)."""
    from convbench.core.gpu import launcher

    library = ctypes.CDLL(str(stub_library(tmp_path)))
    fn = library["cuLaunchKernel"]
    fn.restype = ctypes.c_int
    monkeypatch.setattr(launcher, "_cu_launch_kernel", lambda: fn)
    monkeypatch.setattr(launcher, "launch_class", lambda: launcher.CtypesLaunch)
    return library


def _read_last_call(library, kinds: str) -> dict:
    """What the stand-in driver recorded: f, stream, extra, the 7 dimensions, and the parameters as `kinds` says
    ("u" 8-byte pointer, "i" int32, "f" float32)."""
    params = ctypes.cast(ctypes.c_void_p.in_dll(library, "got_params").value, ctypes.POINTER(ctypes.c_void_p))
    types = {"u": ctypes.c_uint64, "i": ctypes.c_int32, "f": ctypes.c_float}
    return {"f": ctypes.c_void_p.in_dll(library, "got_f").value,
            "stream": ctypes.c_void_p.in_dll(library, "got_stream").value,
            "extra": ctypes.c_void_p.in_dll(library, "got_extra").value,
            "dims": list((ctypes.c_uint * 7).in_dll(library, "got_dims")),
            "params": [ctypes.cast(params[i], ctypes.POINTER(types[c]))[0] for i, c in enumerate(kinds)]}


def test_the_ctypes_launch_passes_every_argument_through_the_c_call(stub):
    """The ctypes launcher (where the C one was not built) calls cuLaunchKernel without argtypes: every value is a
    ctypes object built once, so a wrong type or width would reach the driver silently. A C function with the
    driver's signature, compiled here, records what arrives (the stack-passed arguments of x86-64 included)."""
    from convbench.core.gpu import launcher

    y, x, x2 = torch.zeros(4), torch.zeros(8), torch.zeros(8)
    kernel = SimpleNamespace(kernel=SimpleNamespace(ptr=0x7F00_1234_5670))
    job = launcher.prepare(kernel, (132, 2, 3), (384,), (y, x, 97, -5, 2.5), 227 * 1024, "k", slots=(1,))
    stream = 0xDEAD_BEEF_1234_5678  # a full 64-bit handle
    job.launch(stream, x2.data_ptr())
    got = _read_last_call(stub, "uuiif")
    assert got["f"] == 0x7F00_1234_5670 and got["stream"] == stream and got["extra"] is None
    assert got["dims"] == [132, 2, 3, 384, 1, 1, 227 * 1024]
    assert got["params"] == [y.data_ptr(), x2.data_ptr(), 97, -5, 2.5]  # the slot holds this call's pointer
    job.launch(0, x.data_ptr())  # the default stream: NULL
    got = _read_last_call(stub, "uuiif")
    assert got["stream"] is None and got["params"][1] == x.data_ptr()
    with pytest.raises(TypeError, match="a stream and 1 pointers"):
        job.launch(0)


C_LAUNCHER_CHECK = r"""
import ctypes, struct, sys
library = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # soname libcuda.so.1: what the launcher opens
from convbench.core.errors import UsageError
from convbench.core.gpu import _launch, launcher
assert launcher.launch_class() is _launch.Launch
import numpy as np
params, offsets = launcher.packed_arguments((1, np.uint64(2**40), 3, 2.5))
assert offsets == (0, 8, 16, 20), offsets  # the pointer aligned to 8 bytes
job = _launch.Launch("k", 0x7F0012345670, (132, 2, 3), (384, 1, 1), 227 * 1024, params, offsets, (1,))
job.launch(0xDEADBEEF12345678, 0xFFFF_0000_1234_5678)
f, stream = (ctypes.c_void_p.in_dll(library, n).value for n in ("got_f", "got_stream"))
dims = list((ctypes.c_uint * 7).in_dll(library, "got_dims"))
p = ctypes.cast(ctypes.c_void_p.in_dll(library, "got_params").value, ctypes.POINTER(ctypes.c_void_p))
values = [ctypes.cast(p[i], ctypes.POINTER(t))[0] for i, t in
          enumerate((ctypes.c_int32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float))]
print(hex(f), hex(stream), dims, values, ctypes.c_void_p.in_dll(library, "got_extra").value)
assert job.params[8:16] == struct.pack("<Q", 0xFFFF_0000_1234_5678) and len(job.params) == len(params) == 24
bad_inits = {"slot over a 4-byte int": dict(slots=(2,)), "function -1": dict(function=-1),
             "function 0": dict(function=0), "shared -1": dict(shared=-1), "grid 0": dict(grid=(0, 1, 1)),
             "offsets out of order": dict(offsets=(0, 16, 8, 20)), "offset past the end": dict(offsets=(0, 8, 16, 24))}
for what, change in bad_inits.items():
    given = dict(name="k", function=1, grid=(1, 1, 1), block=(1, 1, 1), shared=0, params=params, offsets=offsets,
                 slots=(1,)) | change
    try:
        _launch.Launch(**given)
        print("accepted:", what)
    except (TypeError, ValueError, OverflowError):
        pass
unready = _launch.Launch.__new__(_launch.Launch)
for use in (lambda: unready.launch(0, 1), lambda: unready.name, lambda: unready.params):
    try:
        use()
        print("an unprepared Launch was used")
    except TypeError:
        pass
try:
    job.__init__("k", 1, (1, 1, 1), (1, 1, 1), 0, params, offsets, (1,))
    print("prepared twice")
except TypeError:
    pass
for bad in ((0xDEAD,), (0, 1, 2), (-1, 5)):
    try:
        job.launch(*bad)
    except (TypeError, OverflowError) as e:
        print("refused:", type(e).__name__)
library.fail_next(719)  # CUDA_ERROR_LAUNCH_FAILED: the stand-in has no error names
try:
    job.launch(0, 1)
except UsageError as e:
    print("failed:", e)
"""

def test_the_c_launcher_passes_every_argument_and_names_a_failure(tmp_path):
    """The C launcher (_launch.c, built at install) against the stand-in driver, in a process of its own (it opens
    libcuda.so.1 once, by name: the stand-in, loaded first under that name): the argument block packed at natural
    alignment, the slot written per call, 64-bit stream and pointers intact, bad calls refused, a failure named."""
    import subprocess
    import sys

    c_launcher()
    lib = stub_library(tmp_path)
    out = subprocess.run([sys.executable, "-c", C_LAUNCHER_CHECK, str(lib)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("0x7f0012345670 0xdeadbeef12345678 [132, 2, 3, 384, 1, 1, 232448] "
                        "[1, 18446462599038260856, 3, 2.5] None")
    assert not [line for line in lines if line.startswith(("accepted", "an unprepared", "prepared twice"))], lines
    assert lines[1:4] == ["refused: TypeError", "refused: TypeError", "refused: OverflowError"]
    assert lines[4] == "failed: CUDA launch of k grid=(132, 2, 3) failed: CUresult 719"


PROGRAMMATIC_CHECK = r"""
import ctypes, sys, threading
library = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # soname libcuda.so.1: what the launcher opens
from convbench.core.gpu import _launch, launcher
import numpy as np
params, offsets = launcher.packed_arguments((1, np.uint64(2**40)))
dep = _launch.Launch("dep", 0x7F0012345670, (264, 1, 1), (256, 1, 1), 105088, params, offsets, (1,), True)
plain = _launch.Launch("plain", 0x7F0012345678, (2, 1, 1), (32, 1, 1), 0, params, offsets, (1,))
counts = lambda: tuple(ctypes.c_uint.in_dll(library, n).value for n in ("plain_calls", "ex_calls"))
print("available", _launch.programmatic_available(), dep.dependent, plain.dependent)
dep.launch(7, 1)
print("off", counts())
print("was", _launch.set_programmatic(True))
plain.launch(7, 1)
print("on, a plain launch", counts())
dep.launch(0xDEADBEEF12345678, 0xFFFF_0000_1234_5678)
dims = list((ctypes.c_uint * 7).in_dll(library, "got_dims"))
attr = [ctypes.c_int.in_dll(library, n).value for n in ("got_attr_id", "got_attr_value")]
stream = ctypes.c_void_p.in_dll(library, "got_stream").value
p = ctypes.cast(ctypes.c_void_p.in_dll(library, "got_params").value, ctypes.POINTER(ctypes.c_void_p))
print("on, dependent", counts(), dims, hex(stream), ctypes.c_uint.in_dll(library, "got_nattrs").value, attr,
      hex(ctypes.cast(p[1], ctypes.POINTER(ctypes.c_uint64))[0]))
other = []
t = threading.Thread(target=lambda: (dep.launch(7, 1), other.append(counts())))
t.start(); t.join()
print("another thread", other[0])
print("was", _launch.set_programmatic(False))
dep.launch(7, 1)
print("off again", counts())
ctypes.c_int.in_dll(library, "driver_version").value = 12020  # CUDA 12.2: no programmatic edges in graphs
print("available on 12.2", _launch.programmatic_available())
"""


def test_dependent_launches_go_programmatic_only_where_asked(tmp_path):
    """The C launcher against the stand-in driver: a Launch prepared `dependent` goes through cuLaunchKernelEx with
    programmatic stream serialization (attribute 6, value 1), its grid, block, shared memory, stream and argument
    block intact, only while set_programmatic is on, and only on the thread that set it; any other Launch, and every
    launch with it off, is the ordinary cuLaunchKernel."""
    import subprocess
    import sys

    c_launcher()
    lib = stub_library(tmp_path)
    out = subprocess.run([sys.executable, "-c", PROGRAMMATIC_CHECK, str(lib)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "available True True False",
        "off (1, 0)",
        "was False",
        "on, a plain launch (2, 0)",
        "on, dependent (2, 1) [264, 1, 1, 256, 1, 1, 105088] 0xdeadbeef12345678 1 [6, 1] 0xffff000012345678",
        "another thread (3, 1)",
        "was True",
        "off again (4, 1)",
        "available on 12.2 False",
    ]


def test_programmatic_launches_are_a_no_op_where_unavailable(monkeypatch):
    """Without the C launcher's cuLaunchKernelEx (the ctypes launcher, no GPU, an older GPU), programmatic_launches()
    changes nothing: every launch is the ordinary one, and the results are the same."""
    from convbench.core.gpu import launcher

    monkeypatch.setattr(launcher, "programmatic_available", lambda index=None: False)
    monkeypatch.setattr(launcher, "launch_class", lambda: object)  # the C launcher's place: not CtypesLaunch
    calls = []
    monkeypatch.setattr(launcher, "_launch", SimpleNamespace(set_programmatic=calls.append))
    with launcher.programmatic_launches():
        pass
    assert calls == []


def test_programmatic_launches_nest_and_restore_the_setting_on_any_exit(monkeypatch):
    """programmatic_launches(False) inside programmatic_launches() turns dependent launches ordinary within it; each
    restores the thread's setting as it was on leaving, also when an exception leaves it."""
    from convbench.core.gpu import launcher

    state = {"on": False}

    def set_programmatic(on):
        previous, state["on"] = state["on"], bool(on)
        return previous

    monkeypatch.setattr(launcher, "_launch", SimpleNamespace(set_programmatic=set_programmatic))
    monkeypatch.setattr(launcher, "launch_class", lambda: object)  # the C launcher's place: not CtypesLaunch
    monkeypatch.setattr(launcher, "programmatic_available", lambda index=None: True)
    with launcher.programmatic_launches():
        assert state["on"]
        with launcher.programmatic_launches(False):
            assert not state["on"]
        assert state["on"]
        with pytest.raises(KeyError):
            with launcher.programmatic_launches(False):
                raise KeyError("inside")
        assert state["on"]
    assert not state["on"]


class FakeKernel:
    """A compiled kernel as launch() sees it: hashable, with a CUfunction handle."""

    def __init__(self, ptr: int):
        self.kernel = SimpleNamespace(ptr=ptr)


def test_launch_prepares_once_per_launch_and_passes_what_it_was_given(stub, monkeypatch):
    """launch() (rungs 1-12, the whole network's dense layers, a course file's kernel) prepares a launch once per
    kernel, grid, block, shared memory and numbers: a short grid or block padded to three, the same launch on other
    buffers reuses it with their addresses, and another number is another launch, passed as its own bytes."""
    from convbench.core.gpu import launcher

    monkeypatch.setattr(launcher, "LAUNCHES", launcher.LaunchCache())
    device = [0]
    monkeypatch.setattr(torch.cuda, "current_device", lambda: device[0])
    kernel = FakeKernel(0x7F00_0000_1000)
    stream = SimpleNamespace(cuda_stream=0x1234)
    y, x, other = torch.zeros(4), torch.zeros(8), torch.zeros(8)
    launcher.launch(kernel, (5,), (64,), (y, x, 3, 2.0), shared_mem=96, stream=stream)
    got = _read_last_call(stub, "uuif")
    assert got["dims"] == [5, 1, 1, 64, 1, 1, 96] and got["stream"] == 0x1234
    assert got["params"] == [y.data_ptr(), x.data_ptr(), 3, 2.0]
    assert len(launcher.LAUNCHES) == 1
    launcher.launch(kernel, (5,), (64,), (y, other, 3, 2.0), shared_mem=96, stream=stream)
    assert len(launcher.LAUNCHES) == 1  # other buffers: the same launch, their addresses passed
    assert _read_last_call(stub, "uuif")["params"][1] == other.data_ptr()
    launcher.launch(kernel, (5,), (64,), (y, other, 3.0, 2.0), shared_mem=96, stream=stream)
    assert _read_last_call(stub, "uuff")["params"][2] == 3.0  # 3.0 is a float: not int 3's bytes
    assert len(launcher.LAUNCHES) == 2
    launcher.launch(kernel, (5,), (64,), (y, 7, x), shared_mem=96, stream=stream)  # a tensor after a number
    assert _read_last_call(stub, "uiu")["params"] == [y.data_ptr(), 7, x.data_ptr()]
    launcher.launch(kernel, (5,), (64,), (y, 7, other), shared_mem=96, stream=stream)  # its slot too
    assert _read_last_call(stub, "uiu")["params"] == [y.data_ptr(), 7, other.data_ptr()]
    assert len(launcher.LAUNCHES) == 3
    device[0] = 1  # another GPU: its own launch (a kernel's handle belongs to one device's context)
    launcher.launch(kernel, (5,), (64,), (y, x, 3, 2.0), shared_mem=96, stream=stream)
    assert len(launcher.LAUNCHES) == 4
    for v in (1, 1.0, True):  # equal as keys, but three launches: 1 and True as int32, 1.0 as float32
        launcher.launch(kernel, (1,), (1,), (v,), stream=stream)
    assert len(launcher.LAUNCHES) == 7
    assert _read_last_call(stub, "i")["params"] == [1]


def test_a_failed_launch_is_named_as_the_driver_names_it(monkeypatch):
    from convbench.core.gpu import launcher

    failing = lambda *args: 1  # noqa: E731 - CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(launcher, "_cu_launch_kernel", lambda: failing)
    with pytest.raises(ValueError, match="slot 1 is not an aligned 8-byte parameter"):  # an int: 4 bytes
        launcher.CtypesLaunch("k", 1, (1, 1, 1), (1, 1, 1), 0, *launcher.packed_arguments((1, 2)), (1,))
    with pytest.raises(ValueError, match="grid"):
        launcher.CtypesLaunch("k", 1, (0, 1, 1), (1, 1, 1), 0, b"", (), ())
    job = launcher.CtypesLaunch("k", 1, (1, 1, 1), (1, 1, 1), 0, b"", (), ())
    with pytest.raises(UsageError, match=r"CUDA launch of k grid=\(1, 1, 1\) failed: (CUDA_ERROR_INVALID_VALUE|CUresult 1)"):
        job.launch(0)


def test_a_kernel_argument_of_another_type_is_refused():
    import pytest

    from convbench.core.gpu import launcher

    with pytest.raises(TypeError, match="str"):
        launcher.packed_arguments((1, "7"))
