// convbench's driver for an MXNet-era new-forward.cuh (ECE408, 2017-2019): C entry points (for ctypes) that call the
// student's mxnet::op::forward<gpu, float>(y, x, w) the way the course's MXNet operator (ece408_src/new-inl.h,
// NewOp::Forward) did, on PyTorch's device memory, and time it the same way.
//
// The build (mxnet_forward.py) compiles this one translation unit: convbench's stand-in framework headers
// (mxnet_include/: mxnet/base.h, mshadow, dmlc logging), new-inl.h's declaration of the forward template, then the
// student's file, unmodified (through the generated convbench_user_source.h), then these entry points.
//
// What new-inl.h did, and this shim does: wrap the op's buffers as mshadow::Tensor<gpu, 4, float> y (B, M, H_out,
// W_out), x (B, C, H, W), w (M, C, K, K) on the op's stream (here PyTorch's current stream), zero y, then time the
// student's call on the host clock. Two versions of the harness existed:
//   ece408_project 0b02118 (2017):  start = now(); forward<xpu, DType>(y_4d, x_4d, w_4d); end = now();
//   ece408_mxnet_docker (2018-19):  MSHADOW_CUDA_CALL(cudaDeviceSynchronize()); start = now(); forward<...>(...);
//                                   MSHADOW_CUDA_CALL(cudaDeviceSynchronize()); end = now();
// each followed by fprintf(stdout, "Op Time: %f\n", elapsed). convbench's Op Time is the later, synchronized one
// (the skeleton's forward ended with MSHADOW_CUDA_CALL(cudaDeviceSynchronize()) anyway, so the two agree for files
// that kept it); the 2017 reading, the forward call alone, is reported too.
//
// Errors: LOG(FATAL) and failed CHECKs (MSHADOW_CUDA_CALL too) throw dmlc::Error; any C++ exception out of forward
// is caught here and becomes one line in `err` (return 2), as is a CUDA error after the call (return 1). Before the
// call "forward" goes into the caller's `phase` buffer ("" when it is over), so a parent process can say which call
// exited or crashed.
//
// times[] (4 doubles): 0 op_s (forward + cudaDeviceSynchronize: the 2018-19 Op Time), 1 the forward call alone
// (the 2017 Op Time), 2 the GPU work calls forward made (launches, copies, memsets; shim_common.h), 3 the cost of an
// empty cudaDeviceSynchronize measured just before the call.

#include "shim_common.h"

#include <exception>
#include <string>

#include <mxnet/base.h>

namespace mxnet
{
namespace op
{
// As ece408_src/new-inl.h declared it before including new-forward.cuh: an explicit specialization
// `template <> void forward<gpu, float>(...)` in the student's file needs the primary template declared first.
template <typename xpu, typename DType>
void forward(mshadow::Tensor<xpu, 4, DType> &y, const mshadow::Tensor<xpu, 4, DType> &x,
             const mshadow::Tensor<xpu, 4, DType> &w);
} // namespace op
} // namespace mxnet

#include "convbench_user_source.h"

extern "C" int convbench_abi_version(void) { return 3; }

// Make `device` this runtime's current device (the library links its own CUDA runtime, whose current device is
// not PyTorch's): 0, or the CUDA error code.
extern "C" int convbench_use_device(int device) { return (int)cudaSetDevice(device); }

static void convbench_one_line(const char *where, const char *what, char *err, int errlen)
{
    std::string text = std::string(where) + ": " + what;
    for (char &c : text)
        if (c == '\n' || c == '\r')
            c = ' ';
    while (!text.empty() && text.back() == ' ')
        text.pop_back();
    snprintf(err, (size_t)errlen, "%s", text.c_str());
}

// One forward call on device memory: y (B, M, H-K+1, W-K+1) from x (B, C, H, W) and w (M, C, K, K), on `stream`.
// Returns 0 (with an error the file's own calls returned and it ignored, if any, in err: MXNet's engine never
// checked for those either); 1 with a CUDA fault, 2 with a LOG(FATAL) / CHECK / C++ exception, as one line in err.
extern "C" int convbench_forward(float *y, float *x, float *w, int cb_B, int cb_M, int cb_C, int cb_H, int cb_W,
                                 int cb_K, void *stream, double *times, char *phase, int phaselen, char *err,
                                 int errlen)
{
    const int cb_H_out = cb_H - cb_K + 1, cb_W_out = cb_W - cb_K + 1;
    err[0] = '\0';
    for (int i = 0; i < 4; ++i)
        times[i] = 0.0;
    cudaGetLastError();  // start clean (a non-sticky error left by someone else is not the file's)
    mshadow::Stream<mshadow::gpu> convbench_stream;
    convbench_stream.stream_ = (cudaStream_t)stream;
    mshadow::Tensor<mshadow::gpu, 4, float> y_4d(y, mshadow::Shape4(cb_B, cb_M, cb_H_out, cb_W_out), &convbench_stream);
    mshadow::Tensor<mshadow::gpu, 4, float> x_4d(x, mshadow::Shape4(cb_B, cb_C, cb_H, cb_W), &convbench_stream);
    mshadow::Tensor<mshadow::gpu, 4, float> w_4d(w, mshadow::Shape4(cb_M, cb_C, cb_K, cb_K), &convbench_stream);
    // new-inl.h: "zero the output." (y_4d = scalar<DType>(0) * y_4d), before the clock starts
    cudaMemsetAsync(y, 0, (size_t)cb_B * cb_M * cb_H_out * cb_W_out * sizeof(float), (cudaStream_t)stream);
    if (convbench_report(convbench_sync_error(), "zeroing y before forward", "", err, errlen))
        return 1;
    const double empty_sync = convbench_empty_sync_seconds();

    convbench_set_phase(phase, phaselen, "forward");
    long work0 = convbench_work_count();
    convbench_clock::time_point t0 = convbench_clock::now();
    try {
        mxnet::op::forward<mshadow::gpu, float>(y_4d, x_4d, w_4d);
    } catch (const std::exception &e) {
        convbench_flush();
        cudaDeviceSynchronize();  // let what it launched finish before the caller goes on
        cudaGetLastError();
        convbench_one_line("forward", e.what(), err, errlen);
        return 2;
    } catch (...) {
        convbench_flush();
        cudaDeviceSynchronize();
        cudaGetLastError();
        convbench_one_line("forward", "threw a C++ exception that is not a std::exception", err, errlen);
        return 2;
    }
    convbench_clock::time_point t1 = convbench_clock::now();
    cudaError_t sync = cudaDeviceSynchronize();
    convbench_clock::time_point t2 = convbench_clock::now();
    long work = convbench_work_count() - work0;
    convbench_flush();
    if (convbench_report(sync, "forward", "", err, errlen))
        return 1;
    convbench_note_ignored(cudaGetLastError(), "forward", err, errlen);  // left in err with 0: the caller reports it
    times[0] = convbench_seconds(t0, t2);
    times[1] = convbench_seconds(t0, t1);
    times[2] = (double)work;
    times[3] = empty_sync;
    convbench_set_phase(phase, phaselen, "");
    return 0;
}
