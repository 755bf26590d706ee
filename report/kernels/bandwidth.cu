// The bandwidth ceilings bench_report measures in the same run as the kernels it rates:
// streaming reads of a buffer larger than L2 (HBM read bandwidth) or small enough to stay
// in L2 and read many times (L2 read bandwidth). Compiled to PTX by report/build.rs and
// loaded through cudarc.
#include <cstdint>

extern "C" __global__ void read_bandwidth(const int4* __restrict__ data, long long n16, int passes,
                                          int* __restrict__ sink) {
  int acc = 0;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (int pass = 0; pass < passes; ++pass) {
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride) {
      const int4 v = __ldcg(data + i);  // through L2, not L1
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  if (acc == 0x13579bdf) *sink = acc;  // keeps the loads; practically never true
}

// The dense MLP baseline's elementwise step (bench_report decode, MLP rows): h = silu(g) * u
// for f16 rows, g the first `count` values of `gu` and u the next `count` (the gate and up
// products stacked), f32 math, as a framework's fused SiLU-and-multiply.
#include <cuda_fp16.h>
extern "C" __global__ void silu_mul_f16(const __half* __restrict__ gu, __half* __restrict__ h, long long count) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float g = __half2float(gu[i]), u = __half2float(gu[count + i]);
    h[i] = __float2half_rn(g / (1.0f + __expf(-g)) * u);
  }
}
