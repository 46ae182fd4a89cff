"""Device call: the single-channel kernel's output stores plain against st.global.cs (streaming, CS=1), its rule's
plan, conv1 of fa19 and fa18 with real inputs; checked against float64; CUDA events around 20 back-to-back
launches, median of 5, min of 3 interleaved rounds."""
import torch
import torch.nn.functional as F

from timing import kernel_us
from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as ig
from convbench.measure.bench import conv_inputs

stream = gpu.current_stream_handle(0)
for net, size in (("fa19", 10000), ("fa18", 10000), ("fa19", 100)):
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=size, quiet=True)
    inp = conv_inputs(net, data.images[:size], "cuda")[0]
    x, k = inp.x, inp.k
    ref = F.conv2d(x.double(), k.double())
    y = torch.empty(ref.shape, device="cuda")
    runs = {}
    for cs in (False, True):
        job = ig._prepare_c1(x, k, y, ig.TF32X3, True, None, cs)
        run = (lambda job=job: job.launch(stream, y.data_ptr(), x.data_ptr(), k.data_ptr()))
        y.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        err = float((y.double() - ref).norm() / ref.norm())
        assert torch.isfinite(y).all() and err <= 1e-5, err
        runs[cs] = run
    got = {cs: [] for cs in runs}
    for _ in range(3):
        for cs, run in runs.items():
            got[cs].append(kernel_us(run))
    a, b = min(got[False]), min(got[True])
    print(f"{net} conv1 {size} images: plain stores {a:.1f} us, streaming stores {b:.1f} us ({a / b:.2f}x)", flush=True)
