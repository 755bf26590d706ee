// The WMMA SDDMM family (kSddmmWmmaFamily, sddmm/operation.hpp; the registry:
// core/registry.hpp), sm_80+: what it supports, when a row of its table (configs.hpp) fits,
// and the dispatch to the row's launch (the row units, generated from the table by the units
// generator). Sees the kernels only through configs.hpp.
#include <array>
#include <climits>
#include <cstdint>
#include <utility>

#include "core/launch_table.hpp"
#include "core/family_util.hpp"
#include "sddmm/operation.hpp"
#include "sddmm/wmma/configs.hpp"

namespace sparsek::detail {
namespace sddmm_wmma {
namespace {

const char* missing_image(const SddmmProblem& p) {
  static ImageCache cache;
  return detail::missing_image(p.device.id, probe_kernel<0>(), cache);
}

VariantInfo info(int row) {
  const SddmmWmmaVariant& v = kSddmmWmmaVariants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by};
  i.needs = needs(v);
  return i;
}

// Every SddmmProblem has f16/bf16 A and B and S of that type or f32: all run here.
const char* supports(const SddmmProblem& p) {
  if (p.device.cc_major < 8) return "needs compute capability >= 8.0 (cp.async, bf16 tensor cores)";
  if (p.s.bm % 16 != 0 || p.s.bn % 16 != 0) return "S's blocks must be multiples of 16 on both sides";
  if (!aligned16(p.a.data) || !aligned16(p.b.data) || !aligned16(p.s.values))
    return "A, B and S's values must be 16-byte aligned";
  // 16-byte vectors along A's and B's lines (k = 0 reads neither: S = beta * S).
  if (p.k() > 0 && (p.a.ld % 8 != 0 || p.b.ld % 8 != 0))
    return "the leading dimensions of A and B must be multiples of 8";
  // 16-byte chunks along k: whole where A or B is contiguous along k.
  const bool k_contig = p.a.layout == Layout::RowMajor || p.b.layout == Layout::ColMajor;
  if (k_contig && p.k() % 8 != 0) return "k must be a multiple of 8 when A is row-major or B column-major";
  return missing_image(p);
}

const char* fits(const SddmmProblem& p, int row) {
  const SddmmWmmaVariant& v = kSddmmWmmaVariants[row];
  if (p.s.bm % v.tile != 0 || p.s.bn % v.tile != 0) return "its tile does not divide S's blocks";
  const int64_t tiles = int64_t(p.s.bm / v.tile) * (p.s.bn / v.tile);
  if (p.s.nnzb > INT_MAX / tiles) return "too many tiles for the grid (nnzb * tiles per block must fit int32)";
  if (sddmm_wmma_smem(v) > p.device.smem_optin) return "its shared memory exceeds the device's per-block opt-in limit";
  return nullptr;
}

using LaunchFn = cudaError_t (*)(const SddmmProblem&, cudaStream_t);
// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kSddmmWmmaVariants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kSddmmWmmaRows>();

cudaError_t launch(const SddmmProblem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

}  // namespace
}  // namespace sddmm_wmma

extern const SddmmFamily kSddmmWmmaFamily = {
    Backend::Wmma, "wmma", sddmm_wmma::kSddmmWmmaRows, /*epilogue=*/false, &sddmm_wmma::info,
    &sddmm_wmma::supports, &sddmm_wmma::fits, &sddmm_wmma::launch,
};

}  // namespace sparsek::detail
