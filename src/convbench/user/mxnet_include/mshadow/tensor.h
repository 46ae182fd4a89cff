// convbench stand-in for mshadow/tensor.h: what a new-forward.cuh reads from the tensors MXNet passes to
// forward(y, x, w). A Tensor<Device, dim, DType> is a view: dptr_ (device memory for gpu), shape_ (shape_[i] or
// size(i), the era's unsigned index_t), stride_ (elements per row: the last dimension, tensors are contiguous), and
// stream_, whose stream_ member is the cudaStream_t the op must run on (convbench passes PyTorch's current stream).
// Plain data, so a Tensor may be passed to a kernel by value. Shape1..Shape5 build shapes; AllocSpace / FreeSpace
// allocate a tensor's memory as mshadow did. mshadow's expression templates (y = scalar(0) * y, dot, ...) are not
// here: new-inl.h used them, the student files convbench has seen did not.

#ifndef MSHADOW_TENSOR_H_
#define MSHADOW_TENSOR_H_

#include <mshadow/base.h>

namespace mshadow
{

template <int dimension>
struct Shape {
    static const int kDimension = dimension;
    static const int kSubdim = dimension - 1;
    index_t shape_[dimension];

    MSHADOW_XINLINE index_t &operator[](int idx) { return shape_[idx]; }
    MSHADOW_XINLINE const index_t &operator[](int idx) const { return shape_[idx]; }
    MSHADOW_XINLINE size_t Size() const
    {
        size_t size = 1;
        for (int i = 0; i < dimension; ++i)
            size *= shape_[i];
        return size;
    }
    MSHADOW_XINLINE bool operator==(const Shape<dimension> &s) const
    {
        for (int i = 0; i < dimension; ++i)
            if (s.shape_[i] != shape_[i])
                return false;
        return true;
    }
    MSHADOW_XINLINE bool operator!=(const Shape<dimension> &s) const { return !(*this == s); }
};

MSHADOW_XINLINE Shape<1> Shape1(index_t s0)
{
    Shape<1> s;
    s[0] = s0;
    return s;
}
MSHADOW_XINLINE Shape<2> Shape2(index_t s0, index_t s1)
{
    Shape<2> s;
    s[0] = s0;
    s[1] = s1;
    return s;
}
MSHADOW_XINLINE Shape<3> Shape3(index_t s0, index_t s1, index_t s2)
{
    Shape<3> s;
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    return s;
}
MSHADOW_XINLINE Shape<4> Shape4(index_t s0, index_t s1, index_t s2, index_t s3)
{
    Shape<4> s;
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    return s;
}
MSHADOW_XINLINE Shape<5> Shape5(index_t s0, index_t s1, index_t s2, index_t s3, index_t s4)
{
    Shape<5> s;
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    s[4] = s4;
    return s;
}

template <typename Device>
struct Stream {
    // a CPU stream holds nothing
    void Wait() {}
    bool CheckIdle() { return true; }
};

template <>
struct Stream<gpu> {
    cudaStream_t stream_ = 0;

    static cudaStream_t GetStream(Stream<gpu> *stream) { return stream != nullptr ? stream->stream_ : 0; }
    void Wait() { MSHADOW_CUDA_CALL(cudaStreamSynchronize(stream_)); }
    bool CheckIdle()
    {
        cudaError_t state = cudaStreamQuery(stream_);
        if (state == cudaSuccess)
            return true;
        if (state == cudaErrorNotReady)
            return false;
        MSHADOW_CUDA_CALL(state);
        return false;
    }
};

template <typename Device, int dimension, typename DType = default_real_t>
struct Tensor {
    static const bool kDevCPU = Device::kDevCPU;
    static const int kSubdim = dimension - 1;

    DType *dptr_ = nullptr;
    Shape<dimension> shape_;
    index_t stride_ = 0;
    Stream<Device> *stream_ = nullptr;

    MSHADOW_XINLINE Tensor() {}
    MSHADOW_XINLINE Tensor(const Shape<dimension> &shape) : shape_(shape), stride_(shape[kSubdim]) {}
    MSHADOW_XINLINE Tensor(DType *dptr, const Shape<dimension> &shape)
        : dptr_(dptr), shape_(shape), stride_(shape[kSubdim])
    {
    }
    MSHADOW_XINLINE Tensor(DType *dptr, const Shape<dimension> &shape, Stream<Device> *stream)
        : dptr_(dptr), shape_(shape), stride_(shape[kSubdim]), stream_(stream)
    {
    }
    MSHADOW_XINLINE Tensor(DType *dptr, const Shape<dimension> &shape, index_t stride, Stream<Device> *stream)
        : dptr_(dptr), shape_(shape), stride_(stride), stream_(stream)
    {
    }

    void set_stream(Stream<Device> *stream) { stream_ = stream; }
    MSHADOW_XINLINE index_t size(int idx) const { return shape_[idx]; }
    MSHADOW_XINLINE bool CheckContiguous() const { return shape_[kSubdim] == stride_; }
    MSHADOW_XINLINE size_t MSize() const { return shape_.Size() / shape_[kSubdim] * stride_; }
};

#ifndef MSHADOW_ALLOC_PAD
#define MSHADOW_ALLOC_PAD true
#endif

// mshadow's device allocation, as its tensor_gpu-inl.h did it: pitched rows when padded (the default: stride_ may
// then exceed the last dimension), one contiguous block otherwise. A failing cudaMalloc is a failed CHECK.
template <int dim, typename DType>
inline void AllocSpace(Tensor<gpu, dim, DType> *obj, bool pad = MSHADOW_ALLOC_PAD)
{
    size_t pitch;
    if (pad) {
        size_t rows = obj->shape_.Size() / obj->shape_[dim - 1];
        MSHADOW_CUDA_CALL(cudaMallocPitch((void **)&obj->dptr_, &pitch, obj->shape_[dim - 1] * sizeof(DType), rows));
        obj->stride_ = static_cast<index_t>(pitch / sizeof(DType));
    } else {
        obj->stride_ = obj->shape_[dim - 1];
        MSHADOW_CUDA_CALL(cudaMallocPitch((void **)&obj->dptr_, &pitch, obj->shape_.Size() * sizeof(DType), 1));
    }
}

template <int dim, typename DType>
inline void FreeSpace(Tensor<gpu, dim, DType> *obj)
{
    MSHADOW_CUDA_CALL(cudaFree(obj->dptr_));
    obj->dptr_ = nullptr;
}

template <int dim, typename DType>
inline void AllocSpace(Tensor<cpu, dim, DType> *obj, bool pad = MSHADOW_ALLOC_PAD)
{
    (void)pad;
    obj->stride_ = obj->shape_[dim - 1];
    obj->dptr_ = static_cast<DType *>(malloc(obj->shape_.Size() * sizeof(DType)));
    CHECK(obj->dptr_ != nullptr) << "AllocSpace: out of host memory";
}

template <int dim, typename DType>
inline void FreeSpace(Tensor<cpu, dim, DType> *obj)
{
    free(obj->dptr_);
    obj->dptr_ = nullptr;
}

} // namespace mshadow

#endif // MSHADOW_TENSOR_H_
