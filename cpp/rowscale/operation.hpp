// The row scaling C = diag(s) * A as an operation of the registry (core/registry.hpp): its
// checked RowscaleProblem (rowscale/problem.hpp) and its one family. select and launch are
// defined for it in cpp/rowscale/api.cu.
#pragma once

#include "core/registry.hpp"
#include "rowscale/problem.hpp"

namespace sparsek::detail {

using RowscaleFamily = FamilyOf<RowscaleProblem>;
using RowscaleSelection = SelectionOf<RowscaleProblem>;

// Defined in cpp/rowscale/simt/family.cu, built in every build.
extern const RowscaleFamily kRowscaleSimtFamily;

template <>
struct Operation<RowscaleProblem> : OperationDefaults<RowscaleProblem> {
  // Its one kernel reads f16 and bf16 in every build: bf16 needs no feature here.
  static constexpr bool kBf16Feature = false;
  static constexpr const RowscaleFamily* kFamilies[] = {&kRowscaleSimtFamily};
};

extern template Result select<RowscaleProblem>(const RowscaleProblem&, RowscaleSelection*);
extern template Result launch<RowscaleProblem>(const RowscaleProblem&, const RowscaleSelection&, cudaStream_t);

}  // namespace sparsek::detail
