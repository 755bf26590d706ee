// The SIMT row-scaling family's table of variants (kRowscaleSimtFamily, family.cu): one row,
// compiled in a generated unit (SPARSEK_ROWSCALE_SIMT_INSTANTIATE, kernel.cuh). A CTA of
// `threads` threads scales a grid-stride range of C's values (kernel.cuh).
//
// Why 256 threads: a memory-bound elementwise kernel, one value per thread per step; design,
// not measured.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/features.hpp"
#include "rowscale/problem.hpp"

namespace sparsek::detail::rowscale_simt {

struct RowscaleSimtVariant {
  const char* name;  // the registry's name (SPARSEK_VARIANT)
  int threads;       // threads per CTA
  bool automatic;
  const char* chosen_by;
};

// clang-format off
inline constexpr RowscaleSimtVariant kRowscaleSimtVariants[] = {
    {"rowscale_simt_t256", 256, true, "design, not measured: one value per thread, 256 threads"},
};
// clang-format on

inline constexpr int kRowscaleSimtRows = sizeof(kRowscaleSimtVariants) / sizeof(kRowscaleSimtVariants[0]);

// The build features a row needs (core/features.hpp): none.
constexpr uint32_t needs(const RowscaleSimtVariant&) { return 0u; }

constexpr bool rowscale_simt_same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

constexpr int rowscale_simt_row(const char* name) {
  for (int i = 0; i < kRowscaleSimtRows; ++i)
    if (rowscale_simt_same(kRowscaleSimtVariants[i].name, name)) return i;
  return -1;
}

// The launch of row kRow (kernel.cuh), instantiated by the row's generated unit.
template <int kRow>
cudaError_t launch_row(const RowscaleProblem& p, cudaStream_t stream);
template <int kRow>
const void* probe_kernel();

}  // namespace sparsek::detail::rowscale_simt
