// convbench's copy of the interface a mini-dnn-era new-forward.cu implements (ECE408, 2020-2024): the header used
// when no gpu-new-forward.h lies beside the user's file and none is named with --header.
//
// The course's framework calls, for every convolution layer, with host pointers to x, k and y:
//   conv_forward_gpu_prolog   allocate device memory, copy x and k to the device, hand the device pointers back
//   conv_forward_gpu          the convolution on those device pointers (what the course times as Op Time)
//   conv_forward_gpu_epilog   copy y back to host_y, free the device memory
// Layouts: x (B, C, H, W), k (M, C, K, K), y (B, M, H_out, W_out), row-major float32.
//
// The variants (declared below for reading; -DCONVBENCH_STRIDE adds the stride):
//   Fall 2020   conv_forward_gpu(float *host_y, const float *host_x, const float *host_k, B, M, C, H, W, K) alone,
//               on host pointers (the same types as the later conv_forward_gpu; prolog and epilog never called)
//   2021        prolog / conv_forward_gpu / epilog with (..., B, M, C, H, W, K)
//   2022        the same, parameters renamed (output, input, mask, Batch, Map_out, Channel, Height, Width, K); some
//               semesters' header made the prolog's host_output `float *`
//   2023-2024   a trailing `const int S` (the stride) on all three
//
// Because the semesters' headers differed in const-ness, convbench builds a file against declarations with the
// exact parameter types of the file's own definitions: minidnn.py writes them into convbench-gpu-interface.inc and
// defines CONVBENCH_MATCHED_DECLARATIONS. The parameters are unnamed either way: a file may #define B, M, C, H, W,
// K or S before including this header, and a named parameter would then not compile.

#ifndef SRC_LAYER_GPU_NEW_FORWARD_H
#define SRC_LAYER_GPU_NEW_FORWARD_H

#ifdef CONVBENCH_STRIDE
#define CONVBENCH_STRIDE_PARAM , const int /* S */
#else
#define CONVBENCH_STRIDE_PARAM
#endif

class GPUInterface
{
public:
#ifdef CONVBENCH_MATCHED_DECLARATIONS
#include "convbench-gpu-interface.inc"
#else
    void get_device_properties();
    void conv_forward_gpu_prolog(const float * /* host_y */, const float * /* host_x */, const float * /* host_k */,
                                 float ** /* device_y_ptr */, float ** /* device_x_ptr */, float ** /* device_k_ptr */,
                                 const int /* B */, const int /* M */, const int /* C */, const int /* H */,
                                 const int /* W */, const int /* K */ CONVBENCH_STRIDE_PARAM);
    void conv_forward_gpu(float * /* device_y */, const float * /* device_x */, const float * /* device_k */,
                          const int /* B */, const int /* M */, const int /* C */, const int /* H */,
                          const int /* W */, const int /* K */ CONVBENCH_STRIDE_PARAM);
    void conv_forward_gpu_epilog(float * /* host_y */, float * /* device_y */, float * /* device_x */,
                                 float * /* device_k */, const int /* B */, const int /* M */, const int /* C */,
                                 const int /* H */, const int /* W */, const int /* K */ CONVBENCH_STRIDE_PARAM);
#endif
};

#endif
