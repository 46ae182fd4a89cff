// convbench stand-in for mshadow/half.h: mshadow::half::half_t, a 16-bit float usable on host and device, stored
// as CUDA's __half (the real one is bit-compatible), converting explicitly from float and implicitly to float, with
// the compound assignments. Arithmetic happens in float, as mshadow's did on the host.

#ifndef MSHADOW_HALF_H_
#define MSHADOW_HALF_H_

#include <cuda_fp16.h>
#include <mshadow/base.h>

namespace mshadow
{
namespace half
{
class half_t
{
public:
    __half cuhalf_;

    MSHADOW_XINLINE half_t() {}
    MSHADOW_XINLINE explicit half_t(const float &value) : cuhalf_(__float2half(value)) {}
    MSHADOW_XINLINE explicit half_t(const double &value) : cuhalf_(__float2half((float)value)) {}
    MSHADOW_XINLINE explicit half_t(const int &value) : cuhalf_(__float2half((float)value)) {}
    MSHADOW_XINLINE explicit half_t(const __half &value) : cuhalf_(value) {}
    MSHADOW_XINLINE operator float() const { return __half2float(cuhalf_); }
    MSHADOW_XINLINE half_t &operator=(const float &value)
    {
        cuhalf_ = __float2half(value);
        return *this;
    }
    MSHADOW_XINLINE half_t &operator+=(const float &v) { return *this = float(*this) + v; }
    MSHADOW_XINLINE half_t &operator-=(const float &v) { return *this = float(*this) - v; }
    MSHADOW_XINLINE half_t &operator*=(const float &v) { return *this = float(*this) * v; }
    MSHADOW_XINLINE half_t &operator/=(const float &v) { return *this = float(*this) / v; }
};
} // namespace half
} // namespace mshadow

#endif // MSHADOW_HALF_H_
