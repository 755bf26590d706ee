// The SIMT row-scaling family (kRowscaleSimtFamily, rowscale/operation.hpp; the registry:
// core/registry.hpp): what it supports, when a row of its table (configs.hpp) fits, and the
// dispatch to the row's launch (the row units, generated from the table by the units
// generator). Sees the kernel only through configs.hpp.
#include <cstdint>

#include "core/family_util.hpp"
#include "core/launch_table.hpp"
#include "rowscale/operation.hpp"
#include "rowscale/simt/configs.hpp"

namespace sparsek::detail {
namespace rowscale_simt {
namespace {

VariantInfo info(int row) {
  const RowscaleSimtVariant& v = kRowscaleSimtVariants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by};
  i.needs = needs(v);
  return i;
}

// Every checked RowscaleProblem (f16/bf16, aligned to its element) runs on any device with an
// image of the kernel.
const char* supports(const RowscaleProblem& p) {
  static ImageCache cache;
  return missing_image(p.device.id, probe_kernel<0>(), cache);
}

const char* fits(const RowscaleProblem&, int) { return nullptr; }

using LaunchFn = cudaError_t (*)(const RowscaleProblem&, cudaStream_t);
// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kRowscaleSimtVariants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kRowscaleSimtRows>();

cudaError_t launch(const RowscaleProblem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

}  // namespace
}  // namespace rowscale_simt

extern const RowscaleFamily kRowscaleSimtFamily = {
    Backend::Auto,  // one family: no backend to choose
    "simt",        rowscale_simt::kRowscaleSimtRows, /*epilogue=*/false, &rowscale_simt::info,
    &rowscale_simt::supports, &rowscale_simt::fits, &rowscale_simt::launch,
};

}  // namespace sparsek::detail
