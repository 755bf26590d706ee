// The registry's selection and launch (the rule: core/registry.hpp), one template for every
// operation. Included by each operation's api.cu, which instantiates it for its problem with
// SPARSEK_DEFINE_OPERATION (and by core/registry.cu, which defines the functions declared
// here); every other caller sees the declarations of core/registry.hpp and links those
// instances.
#pragma once

#include <cstdio>
#include <cstring>

#include "core/registry.hpp"
#include "core/tma_status.hpp"

namespace sparsek::detail {

// SPARSEK_VARIANT, read once per process; "" when unset (core/registry.cu).
const char* forced_variant();

// The row names of one operation, for SPARSEK_VARIANT's rule "a row of another operation
// leaves this one to the rule": a node of the list that register_row_names prepends to.
struct RowNames {
  bool (*names)(const char* name);  // whether some row of the operation is called `name`
  const RowNames* next = nullptr;
};

// Adds `entry` (a static object of the registering operation) to the registered operations;
// true, for a namespace-scope initialiser. Thread-safe.
bool register_row_names(RowNames* entry);

// Whether some registered operation has a row called `name`.
bool names_registered_row(const char* name);

// The name of a backend that names a family ("decode", "hopper", "wmma"), or nullptr.
const char* backend_name(Backend backend);

namespace registry {

template <class P>
constexpr int family_count() {
  return int(sizeof(Operation<P>::kFamilies) / sizeof(Operation<P>::kFamilies[0]));
}

// Why family f cannot run p at all, or nullptr.
template <class P>
const char* family_refuses(const FamilyOf<P>& f, const P& p) {
  if (p.has_epilogue() && !f.epilogue) return "no fused bias/activation epilogue";
  if (p.gated_epilogue() && !f.gated) return "no gated (GLU) epilogue";
  return f.supports(p);
}

// Why row `row` of f cannot run p, or nullptr: the row's fit, then (under Backend::Auto) the
// operation's Auto policy.
template <class P>
const char* row_refuses(const FamilyOf<P>& f, const P& p, int row) {
  if (const char* why = f.fits(p, row)) return why;
  return p.backend == Backend::Auto ? Operation<P>::auto_leaves(p, f, row) : nullptr;
}

template <class P>
bool allowed(const FamilyOf<P>& f, Backend requested) {
  return requested == Backend::Auto || requested == f.backend;
}

// Whether some row of operation P is called `name` (no row of an operation SPARSEK_VARIANT
// does not force is).
template <class P>
bool names_row(const char* name) {
  if constexpr (!Operation<P>::kForcible) {
    (void)name;
    return false;
  } else {
    for (const FamilyOf<P>* f : Operation<P>::kFamilies)
      for (int row = 0; f != nullptr && row < f->rows; ++row)
        if (std::strcmp(f->info(row).name, name) == 0) return true;
    return false;
  }
}

// The rows of `f` that fit p but are not built: the first one's missing feature, or null.
template <class P>
const char* unbuilt_fit(const FamilyOf<P>& f, const P& p) {
  for (int row = 0; row < f.rows; ++row) {
    const VariantInfo info = f.info(row);
    if (!built(info.needs) && info.automatic && row_refuses(f, p, row) == nullptr)
      return missing_feature(info.needs);
  }
  return nullptr;
}

}  // namespace registry

template <class P>
Result select(const P& p, SelectionOf<P>* out) {
  using Op = Operation<P>;
  using F = FamilyOf<P>;
  using namespace registry;
  if (!built(Op::kNeeds)) return make_result(Status::NotSupported, "%s", Op::kNotBuilt);
  if constexpr (Op::kBf16Feature)
    if (p.input() == DType::BF16 && !built(kFeatureBf16))
      return make_result(Status::NotSupported,
                         "sparsek was built without bf16 inputs: enable the feature `bf16` (cargo feature; CMake "
                         "SPARSEK_WITH_BF16)");
  const F* const* const kList = Op::kFamilies;
  constexpr int kNumFamilies = family_count<P>();
  // A forced row of another operation leaves this one to the rule.
  const char* forced = Op::kForcible ? forced_variant() : "";
  if (forced[0] != '\0' && !names_row<P>(forced) && names_registered_row(forced)) forced = "";
  if (forced[0] != '\0') {
    for (int fi = 0; fi < kNumFamilies; ++fi) {
      const F* f = kList[fi];
      for (int row = 0; row < f->rows; ++row) {
        if (std::strcmp(f->info(row).name, forced) != 0) continue;
        if (!built(f->info(row).needs))
          return make_result(Status::NotSupported, "SPARSEK_VARIANT=%s is not built: enable the feature `%s`", forced,
                             missing_feature(f->info(row).needs));
        if (!allowed(*f, p.backend))
          return make_result(Status::NotSupported, "SPARSEK_VARIANT=%s is a %s row, but another backend was requested",
                             forced, f->name);
        if (const char* why = family_refuses(*f, p)) return make_result(Status::NotSupported, "%s: %s", f->name, why);
        if (const char* why = row_refuses(*f, p, row))
          return make_result(Status::NotSupported, "SPARSEK_VARIANT=%s does not fit: %s", forced, why);
        *out = SelectionOf<P>{f, row};
        return Result{};
      }
    }
    return make_result(Status::InvalidArgument, "SPARSEK_VARIANT=%s names no kernel variant", forced);
  }

  // Reasons per family, for the message when nothing runs the problem.
  const char* why[kNumFamilies] = {};
  char with_feature[kNumFamilies][160];
  const F* last = nullptr;
  int tried = 0;
  for (int fi = 0; fi < kNumFamilies; ++fi) {
    const F* f = kList[fi];
    if (!allowed(*f, p.backend)) continue;
    const char* reason = family_refuses(*f, p);
    int last_fit_failure = -1;
    if (reason == nullptr) {
      for (int row = 0; row < f->rows; ++row) {
        const VariantInfo info = f->info(row);
        if (!built(info.needs)) continue;
        if (!info.automatic || (info.max_n > 0 && p.n() > info.max_n)) continue;
        if (info.max_row_depth > 0 && p.deeper_than(info.max_row_depth)) continue;
        if (f->auto_skips != nullptr && f->auto_skips(p, row)) continue;
        const char* no = row_refuses(*f, p, row);
        if (no == nullptr) {
          *out = SelectionOf<P>{f, row};
          return Result{};
        }
        if (last_fit_failure < 0) reason = no;  // the most preferred row's reason
        last_fit_failure = row;
      }
      if (reason == nullptr) reason = "no variant in the table";
      // A row this build left out would have run it: say which feature brings it.
      if (const char* feature = unbuilt_fit(*f, p)) {
        std::snprintf(with_feature[tried], sizeof(with_feature[tried]),
                      "its rows for this problem need the feature `%s` (not built)", feature);
        reason = with_feature[tried];
      }
    }
    why[tried++] = reason;
    last = f;
  }
  // Rule 4: fallback rows, once no automatic row fits.
  for (int fi = 0; fi < kNumFamilies; ++fi) {
    const F* f = kList[fi];
    if (!allowed(*f, p.backend) || family_refuses(*f, p) != nullptr) continue;
    for (int row = 0; row < f->rows; ++row) {
      if (f->info(row).fallback && built(f->info(row).needs) && row_refuses(*f, p, row) == nullptr) {
        *out = SelectionOf<P>{f, row};
        return Result{};
      }
    }
  }
  if (p.backend == Backend::Auto) {
    if constexpr (!Op::kNamesFamilies) return make_result(Status::NotSupported, "%s", why[0]);
    char list[400] = "";
    int used = 0;
    for (int fi = 0; fi < tried && used >= 0 && used < int(sizeof(list)); ++fi)
      used += std::snprintf(list + used, sizeof(list) - size_t(used), "%s%s: %s", fi ? "; " : "", kList[fi]->name,
                            why[fi]);
    return make_result(Status::NotSupported, "no kernel runs this problem (%s)", list);
  }
  if (last == nullptr) {
    // A valid backend with no family for this operation (Decode runs no SDDMM).
    if (const char* name = backend_name(p.backend))
      return make_result(Status::NotSupported, "the %s backend has no kernel for this operation", name);
    return make_result(Status::InvalidArgument, "unknown backend %d", static_cast<int>(p.backend));
  }
  return make_result(Status::NotSupported, "the %s backend cannot run this problem: %s", last->name, why[0]);
}

template <class P>
Result launch(const P& p, const SelectionOf<P>& s, cudaStream_t stream) {
  if (p.empty_output()) return Result{};  // nothing to compute or write
  if (s.family->launch_worded != nullptr) return s.family->launch_worded(p, s.row, stream);
  const cudaError_t e = s.family->launch(p, s.row, stream);
  // A TMA descriptor that could not be encoded: the launch enqueued nothing (tma_status.hpp).
  if (const char* operand = tma_encode_failure(e))
    return make_result(Status::InvalidArgument,
                       "the TMA descriptor of %s could not be encoded (its address, strides or extents are outside "
                       "what TMA takes); nothing was launched",
                       operand);
  if (e != cudaSuccess)
    return with_cuda_error(e, make_result(Status::CudaError, "%s launch of %s failed: %s", s.family->name,
                                          s.family->info(s.row).name, cudaGetErrorString(e)));
  return Result{};
}

}  // namespace sparsek::detail

// Defines select and launch for the operation of checked problem P in this translation unit
// (the operation's api.cu; P's Operation specialisation must be visible), and registers its
// row names for SPARSEK_VARIANT's rule at static initialisation: every caller of P's select
// links this object, and with it the registration. At namespace sparsek::detail.
#define SPARSEK_DEFINE_OPERATION(P)                                                      \
  template Result select<P>(const P&, SelectionOf<P>*);                                  \
  template Result launch<P>(const P&, const SelectionOf<P>&, cudaStream_t);              \
  namespace {                                                                            \
  RowNames row_names_of_##P{&registry::names_row<P>};                                    \
  [[maybe_unused]] const bool registered_row_names_of_##P = register_row_names(&row_names_of_##P); \
  }
