// FP8 quantization of BSR values on the device (contract: include/sparsek/quantize.hpp). The
// host quantizer (src/quantize/mod.rs, src/element/fp8.rs) computes the same bits: the same amax
// (a max is exact in any order), the same IEEE division v / scale, the same rounding.
//
// Per block: one CTA per stored block (grid-stride): the block's amax (thread maxima, warp
// shuffles, shared memory), its scale, then every value. Per tensor: the scale slot is zeroed,
// every CTA folds the amax of its chunk into it with an integer atomicMax on the magnitude's
// bits (exact and order-free: the bits of non-negative floats order as their values, NaN
// above infinity above every finite value), a second launch quantizes with the scale the
// amax gives, and a third turns the slot into that scale.
//
// The registry (core/registry.hpp) sees these launches as the one row of the quantization's
// one family, kQuantizeFamily (quantize/operation.hpp), defined at the end of this file.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "quantize/operation.hpp"
#include "quantize/problem.hpp"

namespace sparsek::detail {
namespace {

constexpr int kThreads = 256;

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(float x) { return x; }

// |v|'s bits: ordered as the magnitudes, NaN above +inf.
__device__ inline uint32_t magnitude_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// One FP8 format (src/element/fp8.rs, Format).
template <int kMbits, int kBias, uint32_t kMaxCode, bool kIeee>
struct Fp8Format {
  static __device__ float max_finite() {
    // The largest finite value: (max_code's significand) * 2^(exponent - bias - mbits).
    const int exp = int(kMaxCode >> kMbits) - kBias;
    const float sig = float((kMaxCode & ((1u << kMbits) - 1)) | (1u << kMbits));
    return ldexpf(sig, exp - kMbits);
  }
  // v rounded to the nearest encoding, ties to even, saturating finite overflow: the host's
  // Format::encode, line for line.
  static __device__ uint8_t encode(float v) {
    const uint32_t bits = __float_as_uint(v);
    const uint32_t sign = (bits >> 24) & 0x80u;
    const uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) {
      if (!kIeee) return uint8_t(sign | 0x7fu);
      uint32_t payload = (abs >> (23 - kMbits)) & ((1u << kMbits) - 1);
      if (payload == 0) payload = 1u << (kMbits - 1);
      return uint8_t(sign | 0x7cu | payload);
    }
    if (abs == 0x7f800000u) return uint8_t(sign | (kIeee ? 0x7cu : kMaxCode));
    const int e = int(abs >> 23);
    if (e == 0) return uint8_t(sign);
    const uint32_t full = (abs & 0x7fffffu) | 0x800000u;
    const int exp = e - 127;
    const int emin = 1 - kBias;
    const int target = exp > emin ? exp : emin;
    const uint32_t shift = uint32_t(23 - kMbits + (target - exp));
    if (shift > 25) return uint8_t(sign);
    uint32_t q = full >> shift;
    const uint32_t rem = full & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u) == 1u)) q += 1;
    uint32_t code = (uint32_t(target + kBias) << kMbits) + q - (1u << kMbits);
    if (code > kMaxCode) code = kMaxCode;
    return uint8_t(sign | code);
  }
  // The scale of a part whose amax has these bits (src/scale.rs, scale_for; NaN for a part
  // holding a NaN or an infinity).
  static __device__ float scale_for(uint32_t amax_bits) {
    if (amax_bits >= 0x7f800000u) return __uint_as_float(0x7fc00000u);
    if (amax_bits == 0) return 1.0f;
    return fmaxf(__fdiv_rn(__uint_as_float(amax_bits), max_finite()), FLT_MIN);
  }
};
using E4M3Format = Fp8Format<3, 7, 0x7eu, false>;
using E5M2Format = Fp8Format<2, 15, 0x7bu, true>;

// The CTA's maximum of `mine` (every thread passes its own); every thread gets it.
__device__ uint32_t cta_max(uint32_t mine) {
  __shared__ uint32_t warp_max[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) mine = max(mine, __shfl_xor_sync(0xffffffffu, mine, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = mine;
  __syncthreads();
  uint32_t all = 0;
  for (int w = 0; w < kThreads / 32; ++w) all = max(all, warp_max[w]);
  __syncthreads();  // warp_max is reused by the next call
  return all;
}

template <class T, class F>
__global__ void __launch_bounds__(kThreads) quantize_blocks(const T* __restrict__ in, uint8_t* __restrict__ out,
                                                            float* __restrict__ scales, int64_t nnzb, int64_t len) {
  for (int64_t b = blockIdx.x; b < nnzb; b += gridDim.x) {
    const T* v = in + b * len;
    uint32_t m = 0;
    for (int64_t i = threadIdx.x; i < len; i += kThreads) m = max(m, magnitude_bits(to_float(v[i])));
    const float scale = F::scale_for(cta_max(m));
    if (threadIdx.x == 0) scales[b] = scale;
    uint8_t* q = out + b * len;
    for (int64_t i = threadIdx.x; i < len; i += kThreads) q[i] = F::encode(__fdiv_rn(to_float(v[i]), scale));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) tensor_amax(const T* __restrict__ in, int64_t total, uint32_t* amax) {
  uint32_t m = 0;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads)
    m = max(m, magnitude_bits(to_float(in[i])));
  m = cta_max(m);
  if (threadIdx.x == 0 && m != 0) atomicMax(amax, m);  // integer max: exact in any order
}

template <class T, class F>
__global__ void __launch_bounds__(kThreads) quantize_tensor(const T* __restrict__ in, uint8_t* __restrict__ out,
                                                            int64_t total, const uint32_t* amax) {
  const float scale = F::scale_for(*amax);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads)
    out[i] = F::encode(__fdiv_rn(to_float(in[i]), scale));
}

template <class F>
__global__ void tensor_scale(float* slot) {
  *slot = F::scale_for(*reinterpret_cast<const uint32_t*>(slot));
}

// Enough CTAs to fill any GPU a few times over; the loops stride past it.
constexpr int64_t kMaxGrid = 1 << 16;

int grid_for(int64_t work) {
  const int64_t g = work < 1 ? 1 : work;
  return int(g < kMaxGrid ? g : kMaxGrid);
}

template <class T, class F>
Result launch_typed(const QuantizeProblem& p, cudaStream_t stream) {
  const T* in = static_cast<const T*>(p.values);
  uint8_t* out = static_cast<uint8_t*>(p.out_values);
  if (p.granularity == ScaleKind::PerBlock) {
    if (p.nnzb == 0) return Result{};
    quantize_blocks<T, F><<<grid_for(p.nnzb), kThreads, 0, stream>>>(in, out, p.scales, p.nnzb, p.block_len);
  } else {
    const int64_t total = p.nnzb * p.block_len;
    uint32_t* slot = reinterpret_cast<uint32_t*>(p.scales);
    const cudaError_t e = cudaMemsetAsync(slot, 0, sizeof(uint32_t), stream);
    if (e != cudaSuccess)
      return make_result(Status::CudaError, "quantize_fp8: cudaMemsetAsync: %s", cudaGetErrorString(e));
    if (total > 0) {
      const int grid = grid_for((total + kThreads * 16 - 1) / (kThreads * 16));
      tensor_amax<T><<<grid, kThreads, 0, stream>>>(in, total, slot);
      quantize_tensor<T, F><<<grid, kThreads, 0, stream>>>(in, out, total, slot);
    }
    tensor_scale<F><<<1, 1, 0, stream>>>(p.scales);
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return make_result(Status::CudaError, "quantize_fp8 launch: %s", cudaGetErrorString(e));
  return Result{};
}

template <class T>
Result launch_to(const QuantizeProblem& p, cudaStream_t stream) {
  return p.out == DType::E4M3 ? launch_typed<T, E4M3Format>(p, stream) : launch_typed<T, E5M2Format>(p, stream);
}

// Enqueues the launches of p (a memset and three launches per tensor, one launch per block),
// each failure named by its call.
Result launch_quantize(const QuantizeProblem& p, int /*row*/, cudaStream_t stream) {
  if (!Fp8DTypes::contains(p.out))
    return make_result(Status::NotSupported, "quantize_fp8 writes e4m3 or e5m2, not %s", dtype_name(p.out));
  return dispatch<QuantizeInputs>(
      p.in, [&](auto tr) { return launch_to<DeviceType<decltype(tr)::kDType>>(p, stream); },
      [&] { return make_result(Status::NotSupported, "quantize_fp8 reads f16, bf16 or f32, not %s", dtype_name(p.in)); });
}

VariantInfo quantize_info(int /*row*/) {
  return VariantInfo{"quantize", /*automatic=*/true,
                     "the quantization's only kernel: one configuration per granularity (per block or per tensor, "
                     "picked by the problem inside the launch), nothing to choose between"};
}

// Every checked QuantizeProblem runs: the launches need no more than its invariants.
const char* quantize_supports(const QuantizeProblem&) { return nullptr; }
const char* quantize_fits(const QuantizeProblem&, int /*row*/) { return nullptr; }

}  // namespace

extern const QuantizeFamily kQuantizeFamily = {
    Backend::Auto,  // no backend to choose
    "quantize",
    /*rows=*/1,
    /*epilogue=*/false,
    &quantize_info,
    &quantize_supports,
    &quantize_fits,
    /*launch=*/nullptr,
    /*auto_skips=*/nullptr,
    /*gated=*/false,
    /*launch_worded=*/&launch_quantize,
};

}  // namespace sparsek::detail
