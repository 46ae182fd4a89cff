"""Why an empty kernel's call timed as Op Time took longer than real conv calls (results/2026-11-29-1935-h200-f16-pool,
call 2): the same events-around-a-synchronized-call timing (core/timing.run_times) of an empty kernel through the C
launcher (CuPy-loaded, as small_batch_breakdown does), through gpu.launch of an NVRTC empty kernel (convbench's own
path), a tiny torch op, and gpu-wgmma's sp19 conv1 call; each with CUPTI's kernel time and its host time back to back.
python3 floor_diag.py"""
import statistics
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core import gpu, outputs
from convbench.core.timing import run_times
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs
from convbench.data.fashion_mnist import load_dataset
from convbench.core.spec import get_network

import importlib.util
import pathlib
spec = importlib.util.spec_from_file_location("sbb", pathlib.Path("scripts/small_batch_breakdown.py"))
sbb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sbb)

net = get_network("sp19")
data = load_dataset(net.input_size, count=100, quiet=True)
inp = conv_inputs("sp19", data.images, "cuda")[0]
x, k = inp.x, inp.k
impl = get_impl("gpu-wgmma")
impl.prepare()
launches = sbb.empty_launches(x, k)
src = 'extern "C" __global__ void empty_nvrtc(float *y) {}'
path = pathlib.Path("/tmp/empty_nvrtc.cu")
path.write_text(src)
fn = gpu.kernel(path, "empty_nvrtc")
y = torch.empty(1, device="cuda")
t = torch.zeros(1, device="cuda")
calls = {"empty, C launcher (CuPy module)": launches["C"],
         "empty, ctypes launcher (CuPy module)": launches.get("ctypes", launches["C"]),
         "empty, gpu.launch (NVRTC)": lambda: gpu.launch(fn, (1, 1, 1), (32, 1, 1), (y,)),
         "torch add_ on one float": lambda: t.add_(1),
         "gpu-wgmma sp19 conv1 (pooled)": lambda: impl(x, k)}


def kernel_us(f):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    torch.cuda.synchronize()
    with prof, outputs.pooled():
        for _ in range(20):
            f()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in ev) / 20, sorted({e.name[:40] for e in ev})


for rnd in range(2):
    for name, f in calls.items():
        op = statistics.median(run_times("cuda", lambda i: f(), 1, 50, warmup=5)) * 1e6
        with outputs.pooled():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                f()
            host = (time.perf_counter() - t0) / 200 * 1e6
            torch.cuda.synchronize()
        kern, names = kernel_us(f)
        print(f"round {rnd} {name:40} Op Time {op:7.2f} us  kernel {kern:6.2f} us  host {host:6.2f} us  {names}",
              flush=True)
