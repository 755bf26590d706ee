// The WMMA kernel family of the product (kWmmaFamily, spmm/operation.hpp; the registry:
// core/registry.hpp): what it supports, when a row of its table (configs.hpp) fits a problem,
// and the dispatch to the row's launch (the row units, generated from the table by the units
// generator). Sees the kernel only through launch.hpp, so this file compiles no kernel.
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <utility>

#include "core/family_util.hpp"
#include "core/launch_table.hpp"
#include "spmm/operation.hpp"
#include "spmm/wmma/launch.hpp"

namespace sparsek::detail {
namespace spmm_wmma {
namespace {

// This family's answer to "is there an image for this device" (family_util.hpp).
const char* missing_image(const Problem& p) {
  static ImageCache cache;
  return detail::missing_image(p, probe_kernel<0>(), cache);
}

VariantInfo info(int row) {
  const WmmaVariant& v = kWmmaVariants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by};
  i.needs = needs(v);
  return i;
}

// The dtypes need no check: every Problem has f16 or bf16 inputs and C of the input type
// or f32, which this family runs in every combination.
const char* supports(const Problem& p) {
  if (detail::is_fp8(p.input())) return "FP8 needs sm_90 tensor cores (the Hopper family; sm_80 has no FP8 MMA)";
  if (!WmmaDTypes::contains(p.input())) return "A and B must be f16 or bf16";
  if (p.device.cc_major < 8) return "needs compute capability >= 8.0 (cp.async, bf16 tensor cores)";
  const int bm = p.a.bm, bk = p.a.bk;
  if (bm < 16 || bm > 256 || bm % 16 != 0) return "bm must be a multiple of 16 in [16, 256]";
  if (bk < 16 || bk > 256 || bk % 16 != 0) return "bk must be a multiple of 16 in [16, 256]";
  // 16-byte vector accesses: base pointers and every row/column start must be aligned.
  if (!aligned16(p.a.values) || !aligned16(p.b.data) || !aligned16(p.c.data))
    return "A.values, B.data and C.data must be 16-byte aligned";
  // The Problem's invariants already say so; column-major C reads 8 bias values at once.
  if (p.bias != nullptr && !aligned16(p.bias)) return "bias must be 16-byte aligned";
  if (p.b.ld % 8 != 0) return "B.ld must be a multiple of 8 elements (16 bytes)";
  const int64_t c_vec = 16 / dtype_bytes(p.output());  // elements per 16 bytes
  if (p.c.ld % c_vec != 0) return "C.ld must be a multiple of 16 bytes";
  if ((p.b.layout == Layout::RowMajor || p.c.layout == Layout::RowMajor) && p.n() % 8 != 0)
    return "n must be a multiple of 8 when B or C is row-major (16-byte row vectors)";
  // The kernel counts k-steps (at most k/16 per block-row) in int32.
  if (p.k() / 16 > INT_MAX) return "k is too large (k/16 must fit in int32)";
  return missing_image(p);
}

// Why row `row` cannot run p. The grid limits come first, so that a problem too large for
// every row is refused for that and not for the first row's TILE_M. configs.hpp says how
// table order and these conditions make the choice.
const char* fits(const Problem& p, int row) {
  const WmmaVariant& v = kWmmaVariants[row];
  const int64_t m_tiles = p.m() / v.tile_m, n_tiles = (p.n() + v.tile_n - 1) / v.tile_n;
  if (n_tiles > 65535) return "n is too large for the grid (n-tiles > 65535)";
  if (m_tiles > INT_MAX) return "m is too large for the grid (m / TILE_M must fit in int32)";
  if (p.a.bm % v.tile_m != 0) return "its TILE_M does not divide bm";
  if (m_tiles * n_tiles < v.min_grid_ctas)  // < 2^47: both factors are bounded above
    return "the grid has fewer CTAs than the row's min_grid_ctas (a narrower row fills the GPU better)";
  // op(A) = A^T is compiled into the automatic rows only (kernel.cuh's launch_row).
  if (p.a_transposed && (!v.automatic || v.k_max > 32)) return "op(A) = A^T runs on the automatic rows only";
  const int smem =
      wmma_smem_bytes(v, p.a.bk, p.input(), p.b.layout == Layout::ColMajor, p.a_transposed);
  if (smem > p.device.smem_optin) return "its shared memory exceeds the device's per-block opt-in limit";
  return nullptr;
}

using LaunchFn = cudaError_t (*)(const Problem&, cudaStream_t);

// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kWmmaVariants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kWmmaRows>();


cudaError_t launch(const Problem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

}  // namespace
}  // namespace spmm_wmma

// Takes the fused bias/activation epilogue (kernel.cuh's write_tile_epi).
extern const Family kWmmaFamily = {
    Backend::Wmma,       "wmma", spmm_wmma::kWmmaRows, /*epilogue=*/true, &spmm_wmma::info, &spmm_wmma::supports,
    &spmm_wmma::fits, &spmm_wmma::launch,
};

}  // namespace sparsek::detail
