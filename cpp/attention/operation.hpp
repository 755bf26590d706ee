// Block-sparse attention as an operation of the registry (core/registry.hpp): its checked
// AttentionProblem (attention/problem.hpp) and its families. select and launch are defined for
// it in cpp/attention/api.cu. (The top-k gating that builds its masks is an operation of its
// own: attention/gating.hpp.)
#pragma once

#include "attention/problem.hpp"
#include "core/features.hpp"
#include "core/registry.hpp"

namespace sparsek::detail {

using AttentionFamily = FamilyOf<AttentionProblem>;
using AttentionSelection = SelectionOf<AttentionProblem>;

// Defined in cpp/attention/decode/family.cu and cpp/attention/sm90/family.cu, compiled with
// the feature `attention` only.
extern const AttentionFamily kAttentionDecodeFamily;
extern const AttentionFamily kAttentionSm90Family;

template <>
struct Operation<AttentionProblem> : OperationDefaults<AttentionProblem> {
  static constexpr uint32_t kNeeds = kFeatureAttention;
  static constexpr const char* kNotBuilt =
      "sparsek was built without this operation: enable the feature `attention` (cargo feature; CMake "
      "SPARSEK_WITH_*)";
#if SPARSEK_FEATURES & SPARSEK_FEATURE_ATTENTION
  // Auto's order: the split-KV decode family first (it takes decode shapes only, at most 16
  // query rows per KV head, and refuses the rest), then the Hopper family.
  static constexpr const AttentionFamily* kFamilies[] = {&kAttentionDecodeFamily, &kAttentionSm90Family};
#else
  static constexpr const AttentionFamily* kFamilies[] = {nullptr};  // not built: select refuses first
#endif
};

extern template Result select<AttentionProblem>(const AttentionProblem&, AttentionSelection*);
extern template Result launch<AttentionProblem>(const AttentionProblem&, const AttentionSelection&, cudaStream_t);

}  // namespace sparsek::detail
