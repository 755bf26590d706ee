// The host side of one Decode row's launch: per device, the kernel's occupancy and resident
// clusters; the tensor maps of A and B; the cluster size S (choose_split); and the per-row
// entry points launch.hpp declares (launch_row, probe_kernel, fill_score) with launch_typed,
// which plans the grid (launch.hpp's decode_plan, decode_grid), fills DecodeArgs and launches. The measuring knobs
// SPARSEK_DECODE_TM, SPARSEK_DECODE_SPLIT and SPARSEK_DECODE_PDL are read here, once each.
#pragma once

#include <cuda.h>  // CUtensorMap (the driver is reached through the runtime's entry point)
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/dtype.hpp"
#include "core/launch_counters.hpp"
#include "spmm/decode/configs.hpp"
#include "spmm/decode/decode_kernel.cuh"
#include "spmm/decode/launch.hpp"
#include "spmm/decode/params.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail::spmm_decode {

// Per device, per kernel: CTAs per SM at the row's shared memory, whether the image is
// sm_90 code, and how many clusters of 2, 4 and 8 CTAs can be resident at once (0: that
// size cannot run). Queried once per device.
struct DecodeLimits {
  int ctas_per_sm = 1;
  bool sm90 = false;          // the kernel's image is sm_90 code: clusters and the TMA path
  int max_clusters[4] = {};   // [log2 S] for S = 2, 4, 8 (index 0 unused)
};

inline DecodeLimits query_limits(const void* fn, int threads, int smem, const Problem& p) {
  DecodeLimits lim;
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, static_cast<size_t>(smem)) == cudaSuccess &&
      occ > 0)
    lim.ctas_per_sm = occ;
  else
    (void)cudaGetLastError();
  // Clusters need cc >= 9.0 and code compiled for it: an image from sm_80 code (an sm_80
  // cubin, or compute_80 PTX compiled at load time: ptxVersion 80) has the cluster code
  // compiled out, uses cp.async instead of the TMA, and runs with S = 1.
  cudaFuncAttributes attr{};
  if (p.device.cc_major >= 9 && cudaFuncGetAttributes(&attr, fn) == cudaSuccess && attr.binaryVersion >= 90 &&
      attr.ptxVersion >= 90) {
    lim.sm90 = true;
    for (int l = 1; l <= 3; ++l) {
      const int s = 1 << l;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(static_cast<unsigned>(s));
      cfg.blockDim = dim3(static_cast<unsigned>(threads));
      cfg.dynamicSmemBytes = static_cast<size_t>(smem);
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = static_cast<unsigned>(s);
      at[0].val.clusterDim.y = 1;
      at[0].val.clusterDim.z = 1;
      cfg.attrs = at;
      cfg.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg) == cudaSuccess) lim.max_clusters[l] = clusters;
      else (void)cudaGetLastError();
    }
  } else {
    (void)cudaGetLastError();
  }
  return lim;
}

// cuTensorMapEncodeTiled, through the runtime (no link against the driver library); null
// when unavailable (then the kernel uses its cp.async path).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The element types a tensor map of this family takes (A: 16-bit or FP8; B: 16-bit).
using DecodeMapDTypes = DTypeList<DType::F16, DType::BF16, DType::E4M3, DType::E5M2>;

// A 2-D tensor map over a matrix of `outer` rows of `inner` contiguous elements, `ld`
// elements apart, read in boxes of box_outer x kc with the swizzle of rows of kc 16-bit
// elements (128, 64 or 32 bytes), or unswizzled (`swizzle` false: FP8 A's rows).
inline bool make_tensor_map(CUtensorMap* map, DType t, const void* base, int64_t inner, int64_t outer, int64_t ld,
                            int kc, int box_outer, bool swizzle = true) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * static_cast<cuuint64_t>(dtype_bytes(t))};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kc), static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t unit[2] = {1, 1};
  const CUtensorMapSwizzle swizzle_mode = !swizzle   ? CU_TENSOR_MAP_SWIZZLE_NONE
                                          : kc == 64 ? CU_TENSOR_MAP_SWIZZLE_128B
                                          : kc == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                     : CU_TENSOR_MAP_SWIZZLE_32B;
  const bool known = dispatch<DecodeMapDTypes>(t, [](auto) { return true; }, [] { return false; });
  if (!known) return false;
  const CUtensorMapDataType type = dispatch<DecodeMapDTypes>(
      t, [](auto tr) { return DeviceTypeOf<decltype(tr)::kDType>::kTensorMap; },
      [] { return CU_TENSOR_MAP_DATA_TYPE_FLOAT16; });  // unreachable: refused above
  const CUresult r = encode(map, type, 2, const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_mode,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// The cluster size S for `units` CTAs without a split (see the file comment): the largest S
// in {2, 4, 8}, at most the mean number of blocks per block-row, whose `units` clusters can
// all be resident at once (one wave: a later wave would stream after the first has ended);
// 1 if none. Gated (`halves` = 2): the cluster covers two block-rows with S/2 ranks each,
// and S is at least 2 whatever the waves (the halves meet in the cluster).
inline int choose_split(int64_t units, int64_t mean_blocks, const DecodeLimits& lim, int halves = 1) {
  int s = halves;
  for (int l = 1; l <= 3; ++l) {
    const int next = 1 << l;
    if (next <= s) continue;
    if (next / halves > mean_blocks || units * next > INT_MAX || units > lim.max_clusters[l]) break;
    s = next;
  }
  return s;
}

// Row kRow's kernel for TA x T: its shared-memory attribute set and its limits, once per
// device (racing first calls store the same value).
template <int kRow, typename TA, typename T>
cudaError_t kernel_limits(const Problem& p, DecodeLimits* out) {
  using Tr = Traits<kRow>;
  const void* fn = reinterpret_cast<const void*>(&decode_kernel<kRow, TA, T>);
  cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return e;
  constexpr int kMaxDevices = 64;
  static DecodeLimits cache[kMaxDevices];
  static std::atomic<bool> cached[kMaxDevices] = {};
  const int dev = p.device.id;
  if (dev >= 0 && dev < kMaxDevices && cached[dev].load(std::memory_order_acquire)) {
    *out = cache[dev];
  } else {
    *out = query_limits(fn, Tr::kThreads, Tr::kSmemBytes, p);
    if (dev >= 0 && dev < kMaxDevices) {
      cache[dev] = *out;
      cached[dev].store(true, std::memory_order_release);
    }
  }
  return cudaSuccess;
}

// The grid of a problem on row kRow: its plan, the CTAs before the split and S.
struct DecodeGrid {
  DecodePlan plan;
  int64_t units;  // (block-row or gated pair, slice) pairs
  int S;          // CTAs per cluster
};

template <int kRow>
DecodeGrid decode_grid(const Problem& p, const DecodeLimits& lim) {
  constexpr DecodeVariant v = Traits<kRow>::cfg;
  // SPARSEK_DECODE_TM=<16|32|64|...> (a measuring knob, read once) caps the rows per CTA.
  static const int tm_cap = [] {
    const char* v = std::getenv("SPARSEK_DECODE_TM");
    return v == nullptr ? 0 : std::atoi(v) / 16 * 16;
  }();
  DecodeGrid g{};
  g.plan = decode_plan(v, p.a.bm, p.a.bk, tm_cap);
  const int64_t block_rows = p.block_rows();
  const int halves = p.gated ? 2 : 1;
  g.units = block_rows / halves * g.plan.slices;  // <= INT_MAX (family.cu's supports)
  const int64_t mean_blocks = block_rows > 0 ? p.a.nnzb / block_rows : 0;
  g.S = choose_split(g.units, mean_blocks, lim, halves);
  // SPARSEK_DECODE_SPLIT=<1|2|4|8> (a measuring knob, read once) forces S where the device
  // and the grid allow it.
  static const int forced_split = [] {
    const char* v = std::getenv("SPARSEK_DECODE_SPLIT");
    return v == nullptr ? 0 : std::atoi(v);
  }();
  if (((forced_split == 1 && !p.gated) || (forced_split == 2 && lim.max_clusters[1] > 0) ||
       (forced_split == 4 && lim.max_clusters[2] > 0) || (forced_split == 8 && lim.max_clusters[3] > 0)) &&
      g.units * forced_split <= INT_MAX)
    g.S = forced_split;
  return g;
}

// One product's kernel arguments and tensor maps on row kRow with the grid `grid`:
// cudaErrorInvalidValue for a C type the family does not write (a Problem's C is f16, bf16 or
// f32: api.cu).
template <int kRow>
cudaError_t decode_args(const Problem& p, const DecodeLimits& lim, const DecodeGrid& grid, DecodeArgs* out,
                        CUtensorMap* map_a, CUtensorMap* map_b) {
  using Tr = Traits<kRow>;
  constexpr DecodeVariant v = Tr::cfg;
  const DecodePlan plan = grid.plan;
  DecodeArgs args{};
  args.row_ptr = p.a.row_ptr;
  args.col_idx = p.a.col_idx;
  args.a_values = p.a.values;
  args.b = p.b.data;
  args.c = p.c.data;
  args.bias = p.bias;
  args.ldb = p.b.ld;
  args.ldc = p.c.ld;
  args.n = static_cast<int32_t>(p.n());  // <= n_max (fits)
  args.bm = p.a.bm;
  args.bk = p.a.bk;
  args.tm = plan.tm;
  args.slices = plan.slices;
  args.kc = plan.kc;
  args.kpb = plan.kpb;
  args.nb = plan.nb;
  args.mw = plan.mw;
  args.kw = plan.kw;
  args.cluster = grid.S;
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.activation = static_cast<int32_t>(p.activation);
  args.b_col = p.b.layout == Layout::ColMajor;
  args.b_vec = args.b_col && p.b.ld % 8 == 0 && reinterpret_cast<uintptr_t>(p.b.data) % 16 == 0;
  args.c_col = p.c.layout == Layout::ColMajor;
  args.c_f32 = p.c.dtype == DType::F32;
  args.a_scales = p.a.scales;
  args.a_scale_kind = static_cast<int32_t>(p.a.scale_kind);
  switch (p.c.dtype) {
    case DType::F16: args.c_type = 0; break;
    case DType::BF16: args.c_type = 1; break;
    case DType::F32: args.c_type = 2; break;
    default: return cudaErrorInvalidValue;
  }

  // sm_90 images stream A (and aligned column-major B) with the TMA; the tensor coordinates
  // are int32 (A's rows: nnzb * bm; B's rows: k). Otherwise, or if a map cannot be made,
  // the cp.async path (the kernel never reads a map it was not given).
  // FP8 A: a UINT8 map of unswizzled KC-byte rows (kernel.cuh's file comment).
  args.gated = p.gated;
  args.tma = lim.sm90 && p.a.nnzb > 0 && p.a.nnzb * p.a.bm <= INT_MAX && p.k() <= INT_MAX &&
             make_tensor_map(map_a, p.input(), p.a.values, p.a.bk, p.a.nnzb * p.a.bm, p.a.bk, plan.kc, plan.tm,
                             !Tr::kFp8);
  // B's boxes are at most 64 k (an FP8 part of KC = 128 takes two: kernel.cuh).
  if (args.tma && args.b_vec &&
      !make_tensor_map(map_b, p.b.dtype, p.b.data, p.k(), p.n(), p.b.ld, plan.kc < 64 ? plan.kc : 64, v.n_max))
    args.tma = false;
  *out = args;
  return cudaSuccess;
}

// Launches decode_kernel<kRow, TA, T> over `ctas` CTAs in clusters of S: one product
// (chain.counters null; `second` and the second maps unused) or a chain.
template <int kRow, typename TA, typename T>
cudaError_t launch_grid(int64_t ctas, int S, bool sm90, const DecodeArgs& first, const DecodeArgs& second,
                        const DecodeChain& chain, const CUtensorMap& map_a1, const CUtensorMap& map_b1,
                        const CUtensorMap& map_a2, const CUtensorMap& map_b2, cudaStream_t stream) {
  using Tr = Traits<kRow>;
  const void* fn = reinterpret_cast<const void*>(&decode_kernel<kRow, TA, T>);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(static_cast<unsigned>(Tr::kThreads));
  cfg.dynamicSmemBytes = static_cast<size_t>(Tr::kSmemBytes);
  cfg.stream = stream;
  cudaLaunchAttribute at[2];
  unsigned num_attrs = 0;
  if (S > 1) {
    at[num_attrs].id = cudaLaunchAttributeClusterDimension;
    at[num_attrs].val.clusterDim.x = static_cast<unsigned>(S);
    at[num_attrs].val.clusterDim.y = 1;
    at[num_attrs].val.clusterDim.z = 1;
    ++num_attrs;
  }
  // sm_90 images wait for the previous kernel inside the kernel (griddepcontrol.wait), so
  // its launch and prologue may overlap that kernel's tail. SPARSEK_DECODE_PDL=0 (a
  // measuring knob, read once) launches in plain stream order.
  static const bool pdl = [] {
    const char* v = std::getenv("SPARSEK_DECODE_PDL");
    return v == nullptr || std::atoi(v) != 0;
  }();
  if (sm90 && pdl) {
    at[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[num_attrs].val.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }
  cfg.attrs = num_attrs > 0 ? at : nullptr;
  cfg.numAttrs = num_attrs;
  DecodeArgs a1 = first, a2 = second;
  DecodeChain ch = chain;
  CUtensorMap ma1 = map_a1, mb1 = map_b1, ma2 = map_a2, mb2 = map_b2;
  void* params[] = {&a1, &a2, &ch, &ma1, &mb1, &ma2, &mb2};
  cudaError_t e = cudaLaunchKernelExC(&cfg, fn, params);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <int kRow, typename TA, typename T>
cudaError_t launch_typed(const Problem& p, cudaStream_t stream) {
  DecodeLimits lim;
  cudaError_t e = kernel_limits<kRow, TA, T>(p, &lim);
  if (e != cudaSuccess) return e;
  // Gated: a cluster per (gate, up) pair of block-rows, which needs clusters (family.cu's
  // supports checked the device and image; a device where no 2-CTA cluster fits gets none).
  if (p.gated && (!lim.sm90 || lim.max_clusters[1] <= 0)) return cudaErrorNotSupported;
  const DecodeGrid grid = decode_grid<kRow>(p, lim);
  DecodeArgs args{};
  alignas(64) CUtensorMap map_a{};
  alignas(64) CUtensorMap map_b{};
  e = decode_args<kRow>(p, lim, grid, &args, &map_a, &map_b);
  if (e != cudaSuccess) return e;
  const int64_t ctas = grid.units * grid.S;
  const DecodeChain single{nullptr, static_cast<uint32_t>(ctas), 0, nullptr, 0};
  return launch_grid<kRow, TA, T>(ctas, grid.S, lim.sm90, args, args, single, map_a, map_b, map_a, map_b, stream);
}

// The chain (kernel.cuh, "Chains"): `second` reads `first`'s C as its B, both on row kRow in
// one grid with the first's cluster size. cudaErrorNotSupported, having launched nothing,
// where it cannot run here: not sm_90 TMA code for both, B of the second not on the TMA path,
// no counters (core/launch_counters.hpp), or the grid too large.
template <int kRow, typename TA, typename T>
cudaError_t launch_chain_typed(const Problem& first, const Problem& second, cudaStream_t stream) {
  DecodeLimits lim;
  cudaError_t e = kernel_limits<kRow, TA, T>(first, &lim);
  if (e != cudaSuccess) return e;
  if (!lim.sm90 || lim.max_clusters[1] <= 0 || first.empty_output() || second.empty_output())
    return cudaErrorNotSupported;
  const DecodeGrid g1 = decode_grid<kRow>(first, lim);
  DecodeGrid g2 = decode_grid<kRow>(second, lim);
  g2.S = g1.S;  // one cluster size per launch
  const int64_t ctas1 = g1.units * g1.S, ctas2 = g2.units * g2.S;
  if (ctas1 + ctas2 > INT_MAX) return cudaErrorNotSupported;
  DecodeArgs a1{}, a2{};
  alignas(64) CUtensorMap ma1{}, mb1{}, ma2{}, mb2{};
  e = decode_args<kRow>(first, lim, g1, &a1, &ma1, &mb1);
  if (e == cudaSuccess) e = decode_args<kRow>(second, lim, g2, &a2, &ma2, &mb2);
  if (e != cudaSuccess) return e;
  // The second product waits for the first before its B's TMA boxes: its B must be on that
  // path (the kernel's other B paths read without the wait).
  if (!a1.tma || !a2.tma || !a2.b_vec) return cudaErrorNotSupported;
  DecodeChain chain{nullptr, static_cast<uint32_t>(ctas1), static_cast<uint32_t>(ctas2), nullptr, 0};
  if (launch_counters(first.device.id, stream, &chain.counters) != cudaSuccess) return cudaErrorNotSupported;
  // The second product's A into L2 while the first ends, where it takes at most a quarter of
  // an H100's or H200's 50 MB L2 (SPARSEK_DECODE_CHAIN_PREFETCH=0, a measuring knob read once:
  // none).
  static const bool prefetch = [] {
    const char* v = std::getenv("SPARSEK_DECODE_CHAIN_PREFETCH");
    return v == nullptr || std::atoi(v) != 0;
  }();
  const uint64_t a2_bytes = static_cast<uint64_t>(second.a.nnzb) * second.a.bm * second.a.bk *
                            static_cast<uint64_t>(dtype_bytes(second.input()));
  if (prefetch && a2_bytes <= (uint64_t(12) << 20)) {
    chain.prefetch = second.a.values;
    chain.prefetch_bytes = a2_bytes & ~uint64_t(15);
  }
  return launch_grid<kRow, TA, T>(ctas1 + ctas2, g1.S, lim.sm90, a1, a2, chain, ma1, mb1, ma2, mb2, stream);
}

// The bytes of A a problem keeps in flight on row kRow, per wave of resident CTAs: CTAs x
// (stages - 1) stages of A / waves. The kernel is latency-bound (kernel.cuh): a CTA streams
// at about its bytes in flight per memory latency, so a grid's time goes as waves x (bytes
// per CTA) / (bytes in flight per CTA), i.e. as 1 / this score. A negative score: the row
// cannot run p.
template <int kRow, typename TA, typename T>
double fill_score_typed(const Problem& p) {
  constexpr DecodeVariant v = Traits<kRow>::cfg;
  DecodeLimits lim;
  if (kernel_limits<kRow, TA, T>(p, &lim) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1.0;
  }
  if (p.gated && (!lim.sm90 || lim.max_clusters[1] <= 0)) return -1.0;
  const DecodeGrid g = decode_grid<kRow>(p, lim);
  const double ctas = static_cast<double>(g.units) * g.S;
  const double capacity = static_cast<double>(lim.ctas_per_sm) * (p.device.sm_count > 0 ? p.device.sm_count : 1);
  const double waves = ctas > capacity ? std::ceil(ctas / capacity) : 1.0;
  const double stage = static_cast<double>(g.plan.nb) * g.plan.tm * decode_a_row_bytes(v, g.plan.kc);
  return ctas * (v.stages - 1) * stage / waves;
}

template <int kRow>
double fill_score(const Problem& p) {
  if constexpr (Traits<kRow>::kFp8) {
    return dispatch<DecodeFp8DTypes>(
        p.input(),
        [&](auto ta) {
          using TA = DeviceType<decltype(ta)::kDType>;
          return dispatch<DecodeDTypes>(
              p.b.dtype, [&](auto tb) { return fill_score_typed<kRow, TA, DeviceType<decltype(tb)::kDType>>(p); },
              [] { return -1.0; });
        },
        [] { return -1.0; });
  } else {
    return dispatch<DecodeDTypes>(
        p.input(), [&](auto tr) { return fill_score_typed<kRow, DeviceType<decltype(tr)::kDType>, DeviceType<decltype(tr)::kDType>>(p); },
        [] { return -1.0; });
  }
}

template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream) {
  if constexpr (Traits<kRow>::kFp8) {
    // W8A16: A's FP8 type x B's 16-bit type.
    return dispatch<DecodeFp8DTypes>(
        p.input(),
        [&](auto ta) {
          using TA = DeviceType<decltype(ta)::kDType>;
          return dispatch<DecodeDTypes>(
              p.b.dtype, [&](auto tb) { return launch_typed<kRow, TA, DeviceType<decltype(tb)::kDType>>(p, stream); },
              [] { return cudaErrorNotSupported; });
        },
        [] { return cudaErrorNotSupported; });
  } else {
    return dispatch<DecodeDTypes>(
        p.input(),
        [&](auto tr) {
          using T = DeviceType<decltype(tr)::kDType>;
          return launch_typed<kRow, T, T>(p, stream);
        },
        [] { return cudaErrorNotSupported; });
  }
}

template <int kRow>
cudaError_t launch_chain_row(const Problem& first, const Problem& second, cudaStream_t stream) {
  if (first.input() != second.input() || first.b.dtype != second.b.dtype) return cudaErrorNotSupported;
  if constexpr (Traits<kRow>::kFp8) {
    return dispatch<DecodeFp8DTypes>(
        first.input(),
        [&](auto ta) {
          using TA = DeviceType<decltype(ta)::kDType>;
          return dispatch<DecodeDTypes>(
              first.b.dtype,
              [&](auto tb) {
                return launch_chain_typed<kRow, TA, DeviceType<decltype(tb)::kDType>>(first, second, stream);
              },
              [] { return cudaErrorNotSupported; });
        },
        [] { return cudaErrorNotSupported; });
  } else {
    return dispatch<DecodeDTypes>(
        first.input(),
        [&](auto tr) {
          using T = DeviceType<decltype(tr)::kDType>;
          return launch_chain_typed<kRow, T, T>(first, second, stream);
        },
        [] { return cudaErrorNotSupported; });
  }
}

template <int kRow>
const void* probe_kernel() {
  if constexpr (Traits<kRow>::kFp8)
    return reinterpret_cast<const void*>(&decode_kernel<kRow, __nv_fp8_e4m3, __half>);
  else
    return reinterpret_cast<const void*>(&decode_kernel<kRow, __half, __half>);
}

}  // namespace sparsek::detail::spmm_decode
