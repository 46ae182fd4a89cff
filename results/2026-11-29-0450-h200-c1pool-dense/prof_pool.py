"""One conv+act+pool call (gpu-igemm-tc's conv_act_pool) of NET's layer LI at SIZE real images, for ncu
--profile-from-start off, after warm-up."""
import sys, torch
from convbench.cli import sweep as S
from convbench.impls import gpu_14_igemm_tc as igemm
net, size, li = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
layer = S.course_layers(net, size)[li]
x, k = layer.x, layer.k
y = igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3")
for _ in range(3):
    igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3", out=y)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3", out=y)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(net, size, li, tuple(x.shape), tuple(k.shape), tuple(y.shape), "ok")
