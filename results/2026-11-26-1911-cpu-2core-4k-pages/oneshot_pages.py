import sys, time
import convbench.impls.cpu_04_direct as cd
from convbench.network.weights import load_weights
from convbench.data.fashion_mnist import load_dataset
from convbench.network.model import Network
from convbench.impls.registry import get_impl
net, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "small": cd._huge_pages = lambda y: None
w = load_weights("own", net); d = load_dataset(w.spec.input_size, count=n, quiet=True)
impl = get_impl("onednn" if mode == "onednn" else "cpu-direct")
t = time.perf_counter(); r = Network(w, impl, "cpu").infer(d.images, show_progress=False)
print(net, n, mode, "infer", round(time.perf_counter() - t, 3), [round(c.op_time, 4) for c in r.conv_timings], flush=True)
