// convbench stand-in for MXNet's include/mxnet/base.h (0.11-1.x), the one framework header an ECE408 new-forward.cuh
// includes (2017-2019). Brings in mshadow's tensors and dmlc's logging, and the names the mxnet namespace defines
// that those files use unqualified inside mxnet::op: gpu, cpu, index_t, real_t. With the standard headers the
// course's new-inl.h included before new-forward.cuh (<algorithm>, <map>, <vector>, <string>, <utility>, <chrono>).

#ifndef MXNET_BASE_H_
#define MXNET_BASE_H_

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <dmlc/base.h>
#include <dmlc/logging.h>
#include <mshadow/tensor.h>

namespace mxnet
{
/*! \brief mxnet cpu */
typedef mshadow::cpu cpu;
/*! \brief mxnet gpu */
typedef mshadow::gpu gpu;
/*! \brief index type usually use unsigned */
typedef mshadow::index_t index_t;
/*! \brief data type that will be used to store ndarray */
typedef mshadow::default_real_t real_t;
} // namespace mxnet

#endif // MXNET_BASE_H_
