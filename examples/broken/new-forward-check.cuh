// new-forward-check.cuh: an MXNet-era new-forward.cuh whose forward still holds the skeleton's placeholder
// CHECK_EQ(0, 1): the check fails on the first call, and convbench reports it as one line (the failed check and
// its message) instead of aborting.
//
//   convbench verify --device cuda --impl examples/broken/new-forward-check.cuh

#ifndef MXNET_OPERATOR_NEW_FORWARD_CUH_
#define MXNET_OPERATOR_NEW_FORWARD_CUH_

#include <mxnet/base.h>

namespace mxnet
{
namespace op
{

template <>
void forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, const mshadow::Tensor<gpu, 4, float> &x,
                         const mshadow::Tensor<gpu, 4, float> &w)
{
    // Use mxnet's CHECK_EQ to do assertions.
    CHECK_EQ(0, 1) << "Remove this line and replace with your implementation";
}
} // namespace op
} // namespace mxnet

#endif
