// rowscale's half of the cxx bridge (src/device/sys.rs, cpp/bridge_common.hpp).
#include "bridge_common.hpp"
#include "sparsek/cpp/rowscale/bridge.h"
#include "rowscale/operation.hpp"

namespace sparsek::ffi {

// The row scaling of the Rust entry (src/rowscale/check.rs validated it; A comes from a
// DeviceBsr).
FfiStatus rowscale(const RowscaleProblem& problem) {
  return select_and_run(problem, unsupported(problem.a), [&problem](const detail::DeviceInfo& device) {
    return detail::RowscaleProblem::from_rust(to_bsr(problem.a), reinterpret_cast<const float*>(problem.s),
                                              reinterpret_cast<void*>(problem.c), device);
  });
}

}  // namespace sparsek::ffi
