"""Diagnostic timing (no correctness check: the patched kernels compute nothing right) of conv2 on gpu-wgmma-taps and
gpu-wgmma: median of 20 launches (CUDA events, inputs rotated) for each net at B images. python3 time_conv2.py B"""
import sys

import torch

from convbench.cli.sweep import course_layers, timed
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.impls import gpu_16_wgmma_taps as taps

B = int(sys.argv[1])
tag = sys.argv[2]
for net in ("fa19", "fa18"):
    layer = course_layers(net, B)[1]
    (Bx, C, H, W), (M, _, K, _) = layer.x.shape, layer.k.shape
    y = torch.empty(Bx, M, H - K + 1, W - K + 1, device="cuda")
    for name, call in (("taps", lambda i: taps.launch(layer.sets[i], layer.k, y, "fp16x3")),
                       ("taps NR2", lambda i: taps.launch(layer.sets[i], layer.k, y, "fp16x3", override=(2, 1))),
                       ("gpu-wgmma", lambda i: wgmma.launch(layer.sets[i], layer.k, y, "fp16x3"))):
        try:
            call(0)
            torch.cuda.synchronize()
            print(f"{tag:12} {net:6} B={B} {name:10} {timed(call, layer, 20) * 1e6:9.1f} us", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{tag:12} {net:6} B={B} {name:10} {str(e).splitlines()[0][:90]}", flush=True)
