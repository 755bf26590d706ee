// Helpers of the SDDMM families' family.cu files (cpp/sddmm/wmma, cpp/sddmm/sm90).
#pragma once

#include "../family_util.hpp"  // (this file shares its name)
#include "sddmm/problem.hpp"

namespace sparsek::detail {

// cpp/family_util.hpp's missing_image for an SddmmProblem: whether this build carries the
// family's image for the current device (asked once per device, through one kernel).
inline const char* missing_image(const SddmmProblem& p, const void* probe, ImageCache& cache) {
  // family_util.hpp's check reads only the device of its Problem.
  const Problem on_device = Problem::from_rust(BsrView{}, DenseView{}, DenseView{}, 1.0f, 0.0f, Backend::Auto, nullptr,
                                               Activation::None, p.device, false, nullptr);
  return missing_image(on_device, probe, cache);
}

}  // namespace sparsek::detail
