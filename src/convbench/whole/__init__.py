"""The whole network on the GPU: every layer device-resident, fused kernels, one CUDA graph replay per batch
(`convbench run --whole-network`), and its benchmark against PyTorch eager and torch.compile.

    graph.py   the network grouped into fused steps, captured and replayed as a CUDA graph; benchmark and floor
    dense.py   the fully connected layers (+ softmax) on the tensor cores, with dense.cu
"""
