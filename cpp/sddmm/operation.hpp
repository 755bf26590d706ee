// The SDDMM S = alpha*(A*B) ⊙ mask + beta*S as an operation of the registry
// (core/registry.hpp): its checked SddmmProblem (sddmm/problem.hpp) and its families in Auto's
// preference order. select and launch are defined for it in cpp/sddmm/api.cu.
#pragma once

#include "core/features.hpp"
#include "core/registry.hpp"
#include "sddmm/problem.hpp"

namespace sparsek::detail {

using SddmmFamily = FamilyOf<SddmmProblem>;
using SddmmSelection = SelectionOf<SddmmProblem>;

// The families, each defined in its family.cu (cpp/sddmm/sm90, cpp/sddmm/wmma), compiled with
// the feature `sddmm` only.
extern const SddmmFamily kSddmmSm90Family;
extern const SddmmFamily kSddmmWmmaFamily;

template <>
struct Operation<SddmmProblem> : OperationDefaults<SddmmProblem> {
  static constexpr uint32_t kNeeds = kFeatureSddmm;
  static constexpr const char* kNotBuilt =
      "sparsek was built without this operation: enable the feature `sddmm` (cargo feature; CMake SPARSEK_WITH_*)";
#if SPARSEK_FEATURES & SPARSEK_FEATURE_SDDMM
  // Hopper first, the faster wherever it applies; then WMMA.
  static constexpr const SddmmFamily* kFamilies[] = {&kSddmmSm90Family, &kSddmmWmmaFamily};
#else
  static constexpr const SddmmFamily* kFamilies[] = {nullptr};  // not built: select refuses first
#endif
};

extern template Result select<SddmmProblem>(const SddmmProblem&, SddmmSelection*);
extern template Result launch<SddmmProblem>(const SddmmProblem&, const SddmmSelection&, cudaStream_t);

}  // namespace sparsek::detail
