// FP8 quantization as an operation of the registry (core/registry.hpp): its checked
// QuantizeProblem (quantize/problem.hpp) and its one family of one kernel
// (cpp/quantize/kernel.cu). select and launch are defined for it in cpp/quantize/api.cu.
#pragma once

#include "core/features.hpp"
#include "core/registry.hpp"
#include "quantize/problem.hpp"

namespace sparsek::detail {

using QuantizeFamily = FamilyOf<QuantizeProblem>;
using QuantizeSelection = SelectionOf<QuantizeProblem>;

// Defined in cpp/quantize/kernel.cu, compiled with the feature `fp8` only.
extern const QuantizeFamily kQuantizeFamily;

template <>
struct Operation<QuantizeProblem> : OperationDefaults<QuantizeProblem> {
  static constexpr uint32_t kNeeds = kFeatureFp8;
  static constexpr const char* kNotBuilt =
      "sparsek was built without fp8: enable the feature `fp8` (cargo feature; CMake SPARSEK_WITH_FP8)";
  // Its kernel reads f16, bf16 and f32 values in every build.
  static constexpr bool kBf16Feature = false;
  // One kernel: nothing for SPARSEK_VARIANT to force, and a refusal is its reason alone.
  static constexpr bool kForcible = false;
  static constexpr bool kNamesFamilies = false;
#if SPARSEK_FEATURES & SPARSEK_FEATURE_FP8
  static constexpr const QuantizeFamily* kFamilies[] = {&kQuantizeFamily};
#else
  static constexpr const QuantizeFamily* kFamilies[] = {nullptr};  // not built: select refuses first
#endif
};

extern template Result select<QuantizeProblem>(const QuantizeProblem&, QuantizeSelection*);
extern template Result launch<QuantizeProblem>(const QuantizeProblem&, const QuantizeSelection&, cudaStream_t);

}  // namespace sparsek::detail
