// An empty bare forward_kernel (convbench's own), launched as an MXNet-era bare kernel is: the grader times it through
// every step a submitted one's call takes (worker.Calibration) and subtracts that cost from the real one's.
//
// convbench: grid=(1, 1, 1) block=(1, 1, 1)

__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                               const int H, const int W, const int K)
{
}
