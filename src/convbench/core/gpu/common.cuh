// The device helpers the tensor-core kernels share (gpu_14_igemm_tc.cu, gpu_15_wgmma.cu, whole/dense*.cu): TF32
// rounding and splitting, the m16n8k8 TF32 mma, 3xFP16 block scaling, cp.async, the fused activation, wgmma's
// fences and shared-memory descriptors (sm_90a), warp reductions. Each is
// __forceinline__: a kernel that uses none of them compiles as if the header were not there. Include it after the
// kernel's -D defaults (activate() reads ACT). A kernel that needs a helper with other semantics gets a variant here,
// beside the helper and named for what differs (split_tf32_rna_bits, cp_async16_zfill), never its own copy.
#pragma once

#include <cuda_fp16.h>

#include "phases.cuh"  // PHASE_MARK: phase timestamps under -DPHASES (scripts/block_phases.py), else nothing

typedef unsigned int u32;
typedef unsigned long long u64;

// ---- 3xTF32 ----

// TF32 rounding by integer arithmetic (finite inputs): adding half a TF32 ulp to the bits and clearing the 13 low
// bits rounds to nearest (ties away from zero) in 2 instructions; cvt.rna.tf32.f32 compiles to ~5 on sm_90.
__device__ __forceinline__ u32 tf32_round(float v) { return (__float_as_uint(v) + 0x1000u) & 0xffffe000u; }

// v = hi + lo exactly (Sterbenz: v - hi is exact), |lo| <= 2^-11 |v|. The tensor core reads only the top 19 bits
// of a TF32 operand, so lo goes in as it is (truncated there: ~2^-21 |v| lost, the CUTLASS fast-fp32 recipe).
__device__ __forceinline__ void split_tf32(float v, u32 &hi, u32 &lo) {
    hi = tf32_round(v);
    lo = __float_as_uint(v - __uint_as_float(hi));
}

// TF32 rounding by the cvt.rna.tf32.f32 instruction, of a value given as its raw fp32 bits (ldmatrix fragments,
// whole/dense.cu): the same rounding as tf32_round for finite values, NaN and infinity kept; the low 13 bits are zero.
__device__ __forceinline__ u32 tf32_round_rna_bits(u32 bits) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
    return r;
}

// split_tf32 of raw fp32 bits with both parts rounded by cvt.rna (whole/dense.cu): hi = rna(v), lo = rna(v - hi),
// so lo is itself a TF32 value (the tensor core drops none of its bits); one more cvt than split_tf32.
__device__ __forceinline__ void split_tf32_rna_bits(u32 bits, u32 &hi, u32 &lo) {
    hi = tf32_round_rna_bits(bits);
    lo = tf32_round_rna_bits(__float_as_uint(__uint_as_float(bits) - __uint_as_float(hi)));  // v - hi: exact in fp32
}

// One TF32 operand (PREC 1): half an ulp added, the low bits left for the tensor core to drop.
__device__ __forceinline__ u32 tf32_operand(float v) { return __float_as_uint(v) + 0x1000u; }

// D[16 x 8] += A[16 x 8] * B[8 x 8], TF32 operands in raw fragments, fp32 accumulators
__device__ __forceinline__ void mma_tf32(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D[16 x 8] += A[16 x 16] * B[16 x 8], fp16 operands in raw fragments (two values a register, the lower k in the low
// half), fp32 accumulators
__device__ __forceinline__ void mma_f16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- 3xFP16 (block-scaled fp16 hi + lo; gpu_14_igemm_tc.cu tells the scheme and its accuracy) ----

// v = hi + lo as two fp16 values in one word, hi in the low half
__device__ __forceinline__ u32 split_fp16(float v) {
    const __half h = __float2half_rn(v);
    const __half l = __float2half_rn(v - __half2float(h));
    return static_cast<u32>(__half_as_ushort(h)) | (static_cast<u32>(__half_as_ushort(l)) << 16);
}
// s for a block whose largest finite |value| has the bits mb: max * 2^s in [2^14, 2^15) (s is capped at 126, so a
// block whose largest value is below 2^-112 stays below 2^14)
__device__ __forceinline__ int fp16_shift(u32 mb) {
    if (mb == 0u) return 0;
    const int e = max(static_cast<int>(mb >> 23) - 127, -126);
    return min(14 - e, 126);
}
__device__ __forceinline__ float pow2(int s) { return __uint_as_float(static_cast<u32>(s + 127) << 23); }  // |s| <= 126
// the block's largest m into *slot (float bits of non-negative floats order like unsigned ints)
__device__ __forceinline__ void block_max(float m, u32 *slot) {
#pragma unroll
    for (int d = 16; d; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    if ((threadIdx.x & 31) == 0) atomicMax(slot, __float_as_uint(m));
}

// ---- cp.async: global -> shared without registers; a group per tile, waited for by count ----

__device__ __forceinline__ void cp_async4(float *dst, const float *src) {
    const u32 s = static_cast<u32>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async16(float *dst, const float *src) {
    const u32 s = static_cast<u32>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src));
}
// The same copies predicated: ok = false copies no bytes (src-size 0) and zero-fills the destination, so a
// tile's rows and columns past the edge come out zero without a branch around the copy.
__device__ __forceinline__ void cp_async4_zfill(float *dst, const float *src, bool ok) {
    const u32 s = static_cast<u32>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(src), "r"(ok ? 4 : 0));
}
// 16 bytes of which only the first `bytes` (0..16) are read, the rest of the destination zero-filled
__device__ __forceinline__ void cp_async16_part(float *dst, const float *src, int bytes) {
    const u32 s = static_cast<u32>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async16_zfill(float *dst, const float *src, bool ok) {
    cp_async16_part(dst, src, ok ? 16 : 0);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// wait until at most PENDING of this thread's groups are still in flight (the count spelled out in the instruction:
// an "n" operand in its place compiles to the same instruction but schedules the code around it differently)
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    static_assert(PENDING >= 0 && PENDING <= 3, "cp_async_wait: 0..3 groups pending");
    if constexpr (PENDING == 0) asm volatile("cp.async.wait_group 0;" ::: "memory");
    if constexpr (PENDING == 1) asm volatile("cp.async.wait_group 1;" ::: "memory");
    if constexpr (PENDING == 2) asm volatile("cp.async.wait_group 2;" ::: "memory");
    if constexpr (PENDING == 3) asm volatile("cp.async.wait_group 3;" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_1() { cp_async_wait<1>(); }
__device__ __forceinline__ void cp_async_wait_0() { cp_async_wait<0>(); }

// ---- max that keeps NaN (as PyTorch's max pool and relu do; fmaxf returns the other operand) ----

__device__ __forceinline__ float max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return (a != a || b != b) ? __int_as_float(0x7fffffff) : fmaxf(a, b);
#endif
}

// ---- the fused activation: ACT 0 (or unset) none, 1 tanh, 2 relu, 3 sigmoid ----

__device__ __forceinline__ float activate(float v) {
#if defined(ACT) && ACT == 1
    return tanhf(v);
#elif defined(ACT) && ACT == 2
    return max_nan(v, 0.0f);
#elif defined(ACT) && ACT == 3
    return 1.0f / (1.0f + expf(-v));
#else
    return v;
#endif
}

// ---- programmatic dependent launch (Hopper): a kernel overlapping the end of the one before it ----
// A kernel launched as a dependent (launcher.py's programmatic_launches(): the whole network's graph) may start once
// every block of the kernel before it has called griddep_launch_dependents() or exited, while that kernel finishes.
// Until griddep_wait() returns it may read only what no earlier kernel of the stream writes (the weights) and write
// only shared memory; griddep_wait() returns once the earlier kernel has finished and its writes are visible. A
// kernel prepared with `dependent=True` (launcher.prepare) must call griddep_wait() in every thread before its
// first other global access. Only a kernel whose successor has work before its wait triggers early (the single-
// channel convs, ahead of gpu-wgmma's weight layout): blocks launched early only to wait hold SM room, and crowd two
// to an SM onto the first SMs to free up. Launched the ordinary way, both are no-ops.
__device__ __forceinline__ void griddep_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- bulk copies (sm_90): the TMA unit copies a contiguous run of global memory into shared memory, the bytes
// counted on an mbarrier in shared memory (one arrival a phase: the thread that issues the copies) ----

__device__ __forceinline__ void mbar_init(u64 *bar, u32 arrivals) {
#if __CUDA_ARCH__ >= 900
    const u32 at = static_cast<u32>(__cvta_generic_to_shared(bar));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(at), "r"(arrivals) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // (before any other thread uses it)
#endif
}
// this phase's arrival, and the bytes its copies will bring
__device__ __forceinline__ void mbar_arrive_expect(u64 *bar, u32 bytes) {
#if __CUDA_ARCH__ >= 900
    const u32 at = static_cast<u32>(__cvta_generic_to_shared(bar));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(at), "r"(bytes) : "memory");
#endif
}
// until the phase of this parity has completed (its arrival made and its bytes landed)
__device__ __forceinline__ void mbar_wait(u64 *bar, u32 parity) {
#if __CUDA_ARCH__ >= 900
    const u32 at = static_cast<u32>(__cvta_generic_to_shared(bar));
    asm volatile(
        "{\n\t.reg .pred done;\n\t"
        "WAIT:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
        "@!done bra WAIT;\n\t}" ::"r"(at),
        "r"(parity)
        : "memory");
#endif
}
// bytes (a multiple of 16; both addresses 16-byte aligned) from src to dst, counted on bar
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, u32 bytes, u64 *bar) {
#if __CUDA_ARCH__ >= 900
    const u32 d = static_cast<u32>(__cvta_generic_to_shared(dst)), b = static_cast<u32>(__cvta_generic_to_shared(bar));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
                 "l"(src), "r"(bytes), "r"(b)
                 : "memory");
#endif
}

// ---- wgmma (Hopper, sm_90a): fences, commit groups, descriptors ----

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// until at most N committed wgmma groups of this warpgroup are still running
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
// generic-proxy writes to shared memory (cp.async's, st.shared) become visible to the async proxy (wgmma's operand
// reads)
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Shared-memory matrix descriptor, no swizzle: 8 x 16-byte core matrices; lbo = bytes between the two core matrices
// of a k step (K direction), sbo = bytes between 8-row groups (M or N direction)
__device__ __forceinline__ u64 descriptor(u32 addr, u32 lbo, u32 sbo) {
    return static_cast<u64>((addr >> 4) & 0x3FFF) | static_cast<u64>((lbo >> 4) & 0x3FFF) << 16 |
           static_cast<u64>((sbo >> 4) & 0x3FFF) << 32;
}
// operand fences: the compiler must keep these registers, with these values, up to here (wgmma reads and writes
// them asynchronously, which it cannot see)
__device__ __forceinline__ void keep(float &r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void keep(u32 &r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void keep(u64 &r) { asm volatile("" : "+l"(r)::"memory"); }
// four 8x8 b16 matrices from shared memory (lanes 8 i .. 8 i + 7 give matrix i's row addresses)
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// ---- warp reductions (every lane gets the result) ----

#ifndef NEG_INF
#define NEG_INF __int_as_float(0xff800000)
#endif

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
