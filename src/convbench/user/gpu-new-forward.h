// convbench's copy of the interface a mini-dnn-era new-forward.cu implements (ECE408, 2020-2024).
//
// The course's framework calls, for every convolution layer, with host pointers to x, k and y:
//   conv_forward_gpu_prolog   allocate device memory, copy x and k to the device, hand the device pointers back
//   conv_forward_gpu          the convolution on those device pointers (what the course times as Op Time)
//   conv_forward_gpu_epilog   copy y back to host_y, free the device memory
// Layouts: x (B, C, H, W), k (M, C, K, K), y (B, M, H_out, W_out), row-major float32.
//
// Two variants existed. The original (2020-2021) passes B, M, C, H, W, K; the later one (2022+) adds the stride S
// as a last argument to the three conv methods (convbench's layers all have S = 1). convbench builds a file with
// -DCONVBENCH_STRIDE when its definitions take S, so that these declarations match them. Parameter names differ
// between years (host_y / host_output, ...): only the types matter.

#ifndef SRC_LAYER_GPU_NEW_FORWARD_H
#define SRC_LAYER_GPU_NEW_FORWARD_H

#ifdef CONVBENCH_STRIDE
#define CONVBENCH_STRIDE_PARAM , const int S
#else
#define CONVBENCH_STRIDE_PARAM
#endif

class GPUInterface
{
public:
    void get_device_properties();
    void conv_forward_gpu_prolog(const float *host_y, const float *host_x, const float *host_k,
                                 float **device_y_ptr, float **device_x_ptr, float **device_k_ptr,
                                 const int B, const int M, const int C, const int H, const int W,
                                 const int K CONVBENCH_STRIDE_PARAM);
    void conv_forward_gpu(float *device_y, const float *device_x, const float *device_k,
                          const int B, const int M, const int C, const int H, const int W,
                          const int K CONVBENCH_STRIDE_PARAM);
    void conv_forward_gpu_epilog(float *host_y, float *device_y, float *device_x, float *device_k,
                                 const int B, const int M, const int C, const int H, const int W,
                                 const int K CONVBENCH_STRIDE_PARAM);
};

#endif
