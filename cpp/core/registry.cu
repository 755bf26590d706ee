// Selection and launch over the kernel families of each operation (the rule is documented
// in registry.hpp).
#include "registry.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "tma_status.hpp"

namespace sparsek::detail {
namespace {

// Auto's preference order, per operation.
const Family* const kFamilies[] = {&kDecodeFamily, &kSm90Family, &kWmmaFamily};
// An operation whose feature is not built has no family (its sources are not compiled): the
// list holds a null, and select names the feature.
#if SPARSEK_FEATURES & SPARSEK_FEATURE_SDDMM
const SddmmFamily* const kSddmmFamilies[] = {&kSddmmSm90Family, &kSddmmWmmaFamily};
#else
const SddmmFamily* const kSddmmFamilies[] = {nullptr};
#endif
#if SPARSEK_FEATURES & SPARSEK_FEATURE_ATTENTION
const AttentionFamily* const kAttentionFamilies[] = {&kAttentionSm90Family};
#else
const AttentionFamily* const kAttentionFamilies[] = {nullptr};
#endif

// The feature an operation needs (0: none) and its name in messages.
constexpr uint32_t operation_needs(const Problem*) { return 0; }
constexpr uint32_t operation_needs(const SddmmProblem*) { return kFeatureSddmm; }
constexpr uint32_t operation_needs(const AttentionProblem*) { return kFeatureAttention; }

template <class P>
struct Families;
template <>
struct Families<Problem> {
  static constexpr const Family* const* list = kFamilies;
  static constexpr int count = sizeof(kFamilies) / sizeof(kFamilies[0]);
};
template <>
struct Families<SddmmProblem> {
  static constexpr const SddmmFamily* const* list = kSddmmFamilies;
  static constexpr int count = sizeof(kSddmmFamilies) / sizeof(kSddmmFamilies[0]);
};
template <>
struct Families<AttentionProblem> {
  static constexpr const AttentionFamily* const* list = kAttentionFamilies;
  static constexpr int count = sizeof(kAttentionFamilies) / sizeof(kAttentionFamilies[0]);
};
constexpr int kMaxFamilies = 3;
static_assert(Families<Problem>::count <= kMaxFamilies && Families<SddmmProblem>::count <= kMaxFamilies,
              "the refusal message below names up to three families");

// Whether the block-rows' average depth (nonzero blocks * bk / block-rows) is above
// `bound` (no overflow: nnzb < 2^31, bk <= 2^31). SDDMM rows set no such bound.
bool deeper_than(const Problem& p, int64_t bound) {
  return p.block_rows() > 0 && p.a.nnzb * int64_t(p.a.bk) > bound * p.block_rows();
}
bool deeper_than(const SddmmProblem&, int64_t) { return false; }
bool deeper_than(const AttentionProblem&, int64_t) { return false; }

// Why family f cannot run p at all, or nullptr.
template <class P>
const char* family_refuses(const FamilyOf<P>& f, const P& p) {
  if (p.has_epilogue() && !f.epilogue) return "no fused bias/activation epilogue";
  if constexpr (std::is_same_v<P, Problem>)
    if (p.gated && !f.gated) return "no gated (GLU) epilogue";
  return f.supports(p);
}

// SPARSEK_VARIANT, read once per process; "" when unset.
const char* forced_variant() {
  static const char* const name = [] {
    const char* v = std::getenv("SPARSEK_VARIANT");
    return v == nullptr ? "" : v;
  }();
  return name;
}

template <class P>
bool allowed(const FamilyOf<P>& f, Backend requested) {
  return requested == Backend::Auto || requested == f.backend;
}

// Whether some family of operation P has a row called `name`.
template <class P>
bool names_row(const char* name) {
  for (int fi = 0; fi < Families<P>::count; ++fi)
    for (int row = 0; Families<P>::list[fi] != nullptr && row < Families<P>::list[fi]->rows; ++row)
      if (std::strcmp(Families<P>::list[fi]->info(row).name, name) == 0) return true;
  return false;
}

// Whether a family of an operation other than P's has a row called `name`.
template <class P>
bool names_other_row(const char* name) {
  return (!std::is_same_v<P, Problem> && names_row<Problem>(name)) ||
         (!std::is_same_v<P, SddmmProblem> && names_row<SddmmProblem>(name)) ||
         (!std::is_same_v<P, AttentionProblem> && names_row<AttentionProblem>(name));
}

// The rows of `f` that fit p but are not built: the first one's missing feature, or null.
template <class P>
const char* unbuilt_fit(const FamilyOf<P>& f, const P& p) {
  for (int row = 0; row < f.rows; ++row) {
    const VariantInfo info = f.info(row);
    if (!built(info.needs) && info.automatic && f.fits(p, row) == nullptr) return missing_feature(info.needs);
  }
  return nullptr;
}

template <class P>
Result select_row(const P& p, SelectionOf<P>* out) {
  using F = FamilyOf<P>;
  constexpr uint32_t kOperationNeeds = operation_needs(static_cast<const P*>(nullptr));
  if (!built(kOperationNeeds))
    return make_result(Status::NotSupported,
                       "sparsek was built without this operation: enable the feature `%s` (cargo feature; CMake "
                       "SPARSEK_WITH_*)",
                       missing_feature(kOperationNeeds));
  if (p.input() == DType::BF16 && !built(kFeatureBf16))
    return make_result(Status::NotSupported,
                       "sparsek was built without bf16 inputs: enable the feature `bf16` (cargo feature; CMake "
                       "SPARSEK_WITH_BF16)");
  const F* const* const kList = Families<P>::list;
  constexpr int kNumFamilies = Families<P>::count;
  // A forced row of another operation leaves this one to the rule.
  const char* forced = forced_variant();
  if (forced[0] != '\0' && !names_row<P>(forced) && names_other_row<P>(forced)) forced = "";
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
        if (const char* why = f->fits(p, row))
          return make_result(Status::NotSupported, "SPARSEK_VARIANT=%s does not fit: %s", forced, why);
        *out = SelectionOf<P>{f, row};
        return Result{};
      }
    }
    return make_result(Status::InvalidArgument, "SPARSEK_VARIANT=%s names no kernel variant", forced);
  }

  // Reasons per family, for the message when nothing runs the problem.
  const char* why[kMaxFamilies] = {};
  char with_feature[kMaxFamilies][160];
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
        if (info.max_row_depth > 0 && deeper_than(p, info.max_row_depth)) continue;
        if (f->auto_skips != nullptr && f->auto_skips(p, row)) continue;
        const char* no = f->fits(p, row);
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
      if (f->info(row).fallback && built(f->info(row).needs) && f->fits(p, row) == nullptr) {
        *out = SelectionOf<P>{f, row};
        return Result{};
      }
    }
  }
  if (p.backend == Backend::Auto) {
    char list[400] = "";
    int used = 0;
    for (int fi = 0; fi < tried && used >= 0 && used < int(sizeof(list)); ++fi)
      used += std::snprintf(list + used, sizeof(list) - size_t(used), "%s%s: %s", fi ? "; " : "", kList[fi]->name,
                            why[fi]);
    return make_result(Status::NotSupported, "no kernel runs this problem (%s)", list);
  }
  if (last == nullptr) {
    // A valid backend with no family for this operation (Decode runs no SDDMM).
    for (const Family* f : kFamilies)
      if (f->backend == p.backend)
        return make_result(Status::NotSupported, "the %s backend has no kernel for this operation", f->name);
    return make_result(Status::InvalidArgument, "unknown backend %d", static_cast<int>(p.backend));
  }
  return make_result(Status::NotSupported, "the %s backend cannot run this problem: %s", last->name, why[0]);
}

template <class P>
Result launch_row(const P& p, const SelectionOf<P>& s, cudaStream_t stream) {
  if (p.empty_output()) return Result{};  // nothing to compute or write
  const cudaError_t e = s.family->launch(p, s.row, stream);
  // A TMA descriptor that could not be encoded: the launch enqueued nothing (tma_status.hpp).
  if (const char* operand = tma_encode_failure(e))
    return make_result(Status::InvalidArgument,
                       "the TMA descriptor of %s could not be encoded (its address, strides or extents are outside "
                       "what TMA takes); nothing was launched",
                       operand);
  if (e != cudaSuccess)
    return with_cuda_error(e, make_result(Status::CudaError, "%s launch of %s failed: %s", s.family->name, s.family->info(s.row).name,
                       cudaGetErrorString(e)));
  return Result{};
}

}  // namespace

Result select(const Problem& p, Selection* out) { return select_row(p, out); }
Result select(const SddmmProblem& p, SddmmSelection* out) { return select_row(p, out); }
Result launch(const Problem& p, const Selection& s, cudaStream_t stream) { return launch_row(p, s, stream); }
Result launch(const SddmmProblem& p, const SddmmSelection& s, cudaStream_t stream) {
  return launch_row(p, s, stream);
}
Result select(const AttentionProblem& p, AttentionSelection* out) { return select_row(p, out); }
Result launch(const AttentionProblem& p, const AttentionSelection& s, cudaStream_t stream) {
  return launch_row(p, s, stream);
}

}  // namespace sparsek::detail
