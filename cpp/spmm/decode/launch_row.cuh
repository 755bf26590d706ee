// The host side of one Decode row's launch: per device, the kernel's occupancy and resident
// clusters; the tensor maps of A and B; the cluster size S (choose_split); and the per-row
// entry points launch.hpp declares (launch_row, probe_kernel, fill_score) with launch_typed,
// which plans the grid (launch.hpp's decode_plan, decode_grid), fills DecodeArgs and launches. The measuring knobs
// SPARSEK_DECODE_TM, SPARSEK_DECODE_SPLIT, SPARSEK_DECODE_PDL, SPARSEK_DECODE_TMA, SPARSEK_DECODE_SETTLED and
// SPARSEK_DECODE_EARLY_LAUNCH are read here, once each.
#pragma once

#include <cuda.h>  // CUtensorMap (the driver is reached through the runtime's entry point)
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/dtype.hpp"
#include "spmm/decode/configs.hpp"
#include "spmm/decode/decode_kernel.cuh"
#include "spmm/decode/launch.hpp"
#include "spmm/decode/params.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail::spmm_decode {

// A measuring knob (SPARSEK_DECODE_TM, _SPLIT, _TMA, _PDL, _SETTLED, _EARLY_LAUNCH): the integer in environment
// variable `name`, or `unset` where it is not set. Each caller reads it once (a static).
inline int decode_knob(const char* name, int unset) {
  const char* v = std::getenv(name);
  return v == nullptr ? unset : std::atoi(v);
}

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

// CTAs of the row that can be resident at once on p's device: one wave.
inline double resident_ctas(const DecodeLimits& lim, const Problem& p) {
  return static_cast<double>(lim.ctas_per_sm) * (p.device.sm_count > 0 ? p.device.sm_count : 1);
}

// The bytes of A grid g keeps in flight on row v, per wave of resident CTAs: CTAs x (stages
// - 1) stages of A / waves. The kernel is latency-bound (kernel.cuh): a CTA streams at about
// its bytes in flight per memory latency, so a grid's time goes as waves x (bytes per CTA) /
// (bytes in flight per CTA), i.e. as 1 / this score.
inline double grid_score(const DecodeVariant& v, const DecodeGrid& g, const DecodeLimits& lim, const Problem& p) {
  const double ctas = static_cast<double>(g.units) * g.S;
  const double capacity = resident_ctas(lim, p);
  const double waves = ctas > capacity ? std::ceil(ctas / capacity) : 1.0;
  const double stage = static_cast<double>(g.plan.nb) * g.plan.tm * decode_a_row_bytes(v, g.plan.kc);
  return ctas * (v.stages - 1) * stage / waves;
}

// The grid of plan `plan` for p: its units and S (choose_split).
inline DecodeGrid grid_of(const DecodePlan& plan, const Problem& p, const DecodeLimits& lim) {
  DecodeGrid g{};
  g.plan = plan;
  const int64_t block_rows = p.block_rows();
  const int halves = p.gated ? 2 : 1;
  g.units = block_rows / halves * plan.slices;  // <= INT_MAX (family.cu's supports)
  const int64_t mean_blocks = block_rows > 0 ? p.a.nnzb / block_rows : 0;
  g.S = choose_split(g.units, mean_blocks, lim, halves);
  return g;
}

// Row kRow's grid for p. Rows per CTA (the configs.hpp column tm_min): of the plans from TM =
// the largest divisor of bm that is <= tm_max down to tm_min, the first and those below it
// whose grid fits one wave of resident CTAs, the one launch.hpp's decode_prefers keeps (more
// of A in flight per wave, or as much with a smaller S), the larger TM on a tie (B read by
// fewer slices).
template <int kRow>
DecodeGrid decode_grid(const Problem& p, const DecodeLimits& lim) {
  constexpr DecodeVariant v = Traits<kRow>::cfg;
  // SPARSEK_DECODE_TM=<16|32|64|...> (a measuring knob, read once) caps the rows per CTA in
  // place of the slicing (a cap of tm_max or more: the largest divisor, as without slicing).
  static const int tm_cap = decode_knob("SPARSEK_DECODE_TM", 0) / 16 * 16;
  DecodeGrid g = grid_of(decode_plan(v, p.a.bm, p.a.bk, tm_cap), p, lim);
  if (tm_cap <= 0) {
    constexpr int kMostPlans = 16;  // TM = 16 .. 256
    DecodeGrid cand[kMostPlans];
    DecodeFill fill[kMostPlans];
    int count = 0;
    const int floor = v.tm_min > 0 ? v.tm_min : v.tm_max;
    const double capacity = resident_ctas(lim, p);
    for (int cap = v.tm_max; cap >= 16 && cap >= floor && count < kMostPlans; cap -= 16) {
      const DecodePlan plan = decode_plan(v, p.a.bm, p.a.bk, cap);
      if (count > 0 && plan.tm == cand[count - 1].plan.tm) continue;  // cap below TM: the same plan
      const DecodeGrid c = grid_of(plan, p, lim);
      // Slicing fills one wave; past it, more CTAs only add waves (tall shapes measured
      // 0.89-0.92x sliced into a third wave).
      if (count > 0 && static_cast<double>(c.units) * c.S > capacity) continue;
      cand[count] = c;
      fill[count] = {grid_score(v, c, lim, p), c.S};
      ++count;
    }
    g = cand[decode_pick(fill, count)];  // the largest TM first, so a tie keeps the larger
  }
  // SPARSEK_DECODE_SPLIT=<1|2|4|8> (a measuring knob, read once) forces S where the device
  // and the grid allow it.
  static const int forced_split = decode_knob("SPARSEK_DECODE_SPLIT", 0);
  if (((forced_split == 1 && !p.gated) || (forced_split == 2 && lim.max_clusters[1] > 0) ||
       (forced_split == 4 && lim.max_clusters[2] > 0) || (forced_split == 8 && lim.max_clusters[3] > 0)) &&
      g.units * forced_split <= INT_MAX)
    g.S = forced_split;
  return g;
}

template <int kRow, typename TA, typename T>
cudaError_t launch_typed(const Problem& p, cudaStream_t stream) {
  using Tr = Traits<kRow>;
  constexpr DecodeVariant v = Tr::cfg;
  const void* fn = reinterpret_cast<const void*>(&decode_kernel<kRow, TA, T>);
  DecodeLimits lim;
  cudaError_t e = kernel_limits<kRow, TA, T>(p, &lim);
  if (e != cudaSuccess) return e;
  // Gated: a cluster per (gate, up) pair of block-rows, which needs clusters (family.cu's
  // supports checked the device and image; a device where no 2-CTA cluster fits gets none).
  if (p.gated && (!lim.sm90 || lim.max_clusters[1] <= 0)) return cudaErrorNotSupported;
  const DecodeGrid grid = decode_grid<kRow>(p, lim);
  const DecodePlan plan = grid.plan;
  const int64_t units = grid.units;
  const int S = grid.S;

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
  args.cluster = S;
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.activation = static_cast<int32_t>(p.activation);
  args.b_col = p.b.layout == Layout::ColMajor;
  args.b_vec = args.b_col && p.b.ld % 8 == 0 && reinterpret_cast<uintptr_t>(p.b.data) % 16 == 0;
  args.c_col = p.c.layout == Layout::ColMajor;
  args.c_f32 = p.c.dtype == DType::F32;
  args.a_scales = p.a.scales;
  args.a_scale_kind = static_cast<int32_t>(p.a.scale_kind);
  // C's type, by value (a Problem's C is f16, bf16 or f32: api.cu); anything else launches nothing.
  switch (p.c.dtype) {
    case DType::F16: args.c_type = 0; break;
    case DType::BF16: args.c_type = 1; break;
    case DType::F32: args.c_type = 2; break;
    default: return cudaErrorInvalidValue;
  }

  // sm_90 images stream A (and aligned column-major B) with the TMA; the tensor coordinates
  // are int32 (A's rows: nnzb * bm; B's rows: k). Otherwise, or if a map cannot be made,
  // the cp.async path (the kernel never reads a map it was not given).
  alignas(64) CUtensorMap map_a{};
  alignas(64) CUtensorMap map_b{};
  // FP8 A: a UINT8 map of unswizzled KC-byte rows (kernel.cuh's file comment).
  args.gated = p.gated;
  // SPARSEK_DECODE_SETTLED=0 (a measuring knob, read once): every A read after the wait.
  static const bool settled_on = decode_knob("SPARSEK_DECODE_SETTLED", 1) != 0;
  args.a_settled = settled_on && p.a.settled;
  // SPARSEK_DECODE_EARLY_LAUNCH=0 (a measuring knob, read once): the next kernel launches
  // once this one's CTAs have streamed A, not once their prologue is issued.
  static const bool early = decode_knob("SPARSEK_DECODE_EARLY_LAUNCH", 1) != 0;
  args.launch_next_early = early;
  // SPARSEK_DECODE_TMA=0 (a measuring knob, read once): the cp.async path on sm_90 too.
  static const bool tma_on = decode_knob("SPARSEK_DECODE_TMA", 1) != 0;
  args.tma = tma_on && lim.sm90 && p.a.nnzb > 0 && p.a.nnzb * p.a.bm <= INT_MAX && p.k() <= INT_MAX &&
             make_tensor_map(&map_a, p.input(), p.a.values, p.a.bk, p.a.nnzb * p.a.bm, p.a.bk, plan.kc, plan.tm,
                             !Tr::kFp8);
  // B's boxes are at most 64 k (an FP8 part of KC = 128 takes two: kernel.cuh).
  if (args.tma && args.b_vec &&
      !make_tensor_map(&map_b, p.b.dtype, p.b.data, p.k(), p.n(), p.b.ld, plan.kc < 64 ? plan.kc : 64, v.n_max))
    args.tma = false;

  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(units * S));
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
  static const bool pdl = decode_knob("SPARSEK_DECODE_PDL", 1) != 0;
  if (lim.sm90 && pdl) {
    at[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[num_attrs].val.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }
  cfg.attrs = num_attrs > 0 ? at : nullptr;
  cfg.numAttrs = num_attrs;
  void* params[] = {&args, &map_a, &map_b};
  e = cudaLaunchKernelExC(&cfg, fn, params);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

// Row kRow's grid for p: the bytes of A it keeps in flight per wave of resident CTAs
// (grid_score) and its split. A negative score: the row cannot run p.
template <int kRow, typename TA, typename T>
DecodeFill fill_score_typed(const Problem& p) {
  DecodeLimits lim;
  if (kernel_limits<kRow, TA, T>(p, &lim) != cudaSuccess) {
    (void)cudaGetLastError();
    return {-1.0, 0};
  }
  if (p.gated && (!lim.sm90 || lim.max_clusters[1] <= 0)) return {-1.0, 0};
  const DecodeGrid g = decode_grid<kRow>(p, lim);
  return {grid_score(Traits<kRow>::cfg, g, lim, p), g.S};
}

template <int kRow>
DecodeFill fill_score(const Problem& p) {
  constexpr DecodeFill kNone{-1.0, 0};
  if constexpr (Traits<kRow>::kFp8) {
    return dispatch<DecodeFp8DTypes>(
        p.input(),
        [&](auto ta) {
          using TA = DeviceType<decltype(ta)::kDType>;
          return dispatch<DecodeDTypes>(
              p.b.dtype, [&](auto tb) { return fill_score_typed<kRow, TA, DeviceType<decltype(tb)::kDType>>(p); },
              [] { return kNone; });
        },
        [] { return kNone; });
  } else {
    return dispatch<DecodeDTypes>(
        p.input(), [&](auto tr) { return fill_score_typed<kRow, DeviceType<decltype(tr)::kDType>, DeviceType<decltype(tr)::kDType>>(p); },
        [] { return kNone; });
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
const void* probe_kernel() {
  if constexpr (Traits<kRow>::kFp8)
    return reinterpret_cast<const void*>(&decode_kernel<kRow, __nv_fp8_e4m3, __half>);
  else
    return reinterpret_cast<const void*>(&decode_kernel<kRow, __half, __half>);
}

}  // namespace sparsek::detail::spmm_decode
