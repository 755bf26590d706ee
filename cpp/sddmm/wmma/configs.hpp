// The WMMA SDDMM family's table of variants (kSddmmWmmaFamily, family.cu): one row per
// tile, each compiled in a generated unit (SPARSEK_SDDMM_WMMA_INSTANTIATE, kernel.cuh), so
// adding a row is its line here and a test case. Selection is the registry's rule
// (cpp/core/registry.hpp): the first automatic row that fits, i.e. the largest square tile
// that divides both sides of S's blocks. A CTA computes one tile of one
// stored block of S over the whole k (kernel.cuh).
//
// Why these tiles: the same shapes as the SpMM WMMA family's classes (cpp/spmm/wmma/configs.hpp),
// square because an S block is bm x bn with no long side to favour; 128 x 128 with 8 warps
// of 64 x 32 and 3 stages, 64 x 64 with 4 warps of 32 x 32 and 4 stages, 32 x 32 and
// 16 x 16 for small blocks. Design, not measured.
#pragma once

#include <cuda_runtime_api.h>

#include "sddmm/problem.hpp"
#include "core/features.hpp"

namespace sparsek::detail::sddmm_wmma {

struct SddmmWmmaVariant {
  const char* name;      // the registry's name (SPARSEK_VARIANT)
  int tile;              // the square tile of S: TILE x TILE
  int warps_m, warps_n;  // warp grid; warp tile = tile/warps_m x tile/warps_n
  int stages;            // cp.async ring depth (K_STEP 32)
  bool automatic;
  const char* chosen_by;
};

// clang-format off
inline constexpr SddmmWmmaVariant kSddmmWmmaVariants[] = {
    {"sddmm_wmma_t128", 128, 2, 4, 3, true, "design, not measured: the tile of 128-wide blocks"},
    {"sddmm_wmma_t64",   64, 2, 2, 4, true, "design, not measured: the tile of 64-wide blocks"},
    {"sddmm_wmma_t32",   32, 2, 2, 4, true, "design, not measured: the tile of 32-wide blocks"},
    {"sddmm_wmma_t16",   16, 1, 1, 4, true, "design, not measured: the last resort (every block side % 16)"},
};
// clang-format on

inline constexpr int kSddmmWmmaRows = sizeof(kSddmmWmmaVariants) / sizeof(kSddmmWmmaVariants[0]);

constexpr bool sddmm_wmma_same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}
// The build features a row needs (core/features.hpp).
constexpr uint32_t needs(const SddmmWmmaVariant& v) {
  return v.automatic ? 0u : uint32_t(detail::kFeatureTuning);
}

constexpr int sddmm_wmma_row(const char* name) {
  for (int i = 0; i < kSddmmWmmaRows; ++i)
    if (sddmm_wmma_same(kSddmmWmmaVariants[i].name, name)) return i;
  return -1;
}

// Shared memory of one row: the ring (A and B stages, 16-byte padded rows) or the fp32
// staging of the tile for the epilogue, whichever is larger.
inline constexpr int kSddmmKStep = 32;
constexpr int sddmm_wmma_smem(const SddmmWmmaVariant& v) {
  const int stage = 2 * (v.tile * (kSddmmKStep + 8) > kSddmmKStep * (v.tile + 8) ? v.tile * (kSddmmKStep + 8)
                                                                                  : kSddmmKStep * (v.tile + 8));
  const int ring = v.stages * 2 * stage;
  const int epi = v.tile * (v.tile + 4) * 4;
  return ring > epi ? ring : epi;
}

// The launch of row kRow (kernel.cuh), instantiated by the row's generated unit.
template <int kRow>
cudaError_t launch_row(const SddmmProblem& p, cudaStream_t stream);
template <int kRow>
const void* probe_kernel();

}  // namespace sparsek::detail::sddmm_wmma
