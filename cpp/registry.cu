// Selection and launch over the kernel families (the rule is documented in registry.hpp).
#include "registry.hpp"

#include <cstdlib>
#include <cstring>

namespace sparsek::detail {
namespace {

// Auto's preference order.
const Family* const kFamilies[] = {&kDecodeFamily, &kSm90Family, &kWmmaFamily};
constexpr int kNumFamilies = sizeof(kFamilies) / sizeof(kFamilies[0]);
static_assert(kNumFamilies == 3, "the refusal message below names every family");

// Why family f cannot run p at all, or nullptr.
const char* family_refuses(const Family& f, const Problem& p) {
  if (p.has_epilogue() && !f.epilogue) return "no fused bias/activation epilogue";
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

bool allowed(const Family& f, Backend requested) { return requested == Backend::Auto || requested == f.backend; }

}  // namespace

Result select(const Problem& p, Selection* out) {
  const char* forced = forced_variant();
  if (forced[0] != '\0') {
    for (const Family* f : kFamilies) {
      for (int row = 0; row < f->rows; ++row) {
        if (std::strcmp(f->info(row).name, forced) != 0) continue;
        if (!allowed(*f, p.backend))
          return make_result(Status::NotSupported, "SPARSEK_VARIANT=%s is a %s row, but another backend was requested",
                             forced, f->name);
        if (const char* why = family_refuses(*f, p)) return make_result(Status::NotSupported, "%s: %s", f->name, why);
        if (const char* why = f->fits(p, row))
          return make_result(Status::NotSupported, "SPARSEK_VARIANT=%s does not fit: %s", forced, why);
        *out = Selection{f, row};
        return Result{};
      }
    }
    return make_result(Status::InvalidArgument, "SPARSEK_VARIANT=%s names no kernel variant", forced);
  }

  // Reasons per family, for the message when nothing runs the problem.
  const char* why[kNumFamilies] = {};
  const Family* last = nullptr;
  int tried = 0;
  for (const Family* f : kFamilies) {
    if (!allowed(*f, p.backend)) continue;
    const char* reason = family_refuses(*f, p);
    int last_fit_failure = -1;
    if (reason == nullptr) {
      for (int row = 0; row < f->rows; ++row) {
        const VariantInfo info = f->info(row);
        if (!info.automatic || (info.max_n > 0 && p.n() > info.max_n)) continue;
        // Average depth nnzb * bk / block_rows above the bound (no overflow: nnzb < 2^31, bk <= 2^31).
        if (info.max_row_depth > 0 && p.block_rows() > 0 &&
            p.a.nnzb * int64_t(p.a.bk) > info.max_row_depth * p.block_rows())
          continue;
        if (f->auto_skips != nullptr && f->auto_skips(p, row)) continue;
        const char* no = f->fits(p, row);
        if (no == nullptr) {
          *out = Selection{f, row};
          return Result{};
        }
        if (last_fit_failure < 0) reason = no;  // the most preferred row's reason
        last_fit_failure = row;
      }
      if (reason == nullptr) reason = "no variant in the table";
    }
    why[tried++] = reason;
    last = f;
  }
  // Rule 4: fallback rows, once no automatic row fits.
  for (const Family* f : kFamilies) {
    if (!allowed(*f, p.backend) || family_refuses(*f, p) != nullptr) continue;
    for (int row = 0; row < f->rows; ++row) {
      if (f->info(row).fallback && f->fits(p, row) == nullptr) {
        *out = Selection{f, row};
        return Result{};
      }
    }
  }
  if (p.backend == Backend::Auto)
    return make_result(Status::NotSupported, "no kernel runs this problem (%s: %s; %s: %s; %s: %s)",
                       kFamilies[0]->name, why[0], kFamilies[1]->name, why[1], kFamilies[2]->name, why[2]);
  if (last == nullptr) return make_result(Status::InvalidArgument, "unknown backend %d", static_cast<int>(p.backend));
  return make_result(Status::NotSupported, "the %s backend cannot run this problem: %s", last->name, why[0]);
}

Result launch(const Problem& p, const Selection& s, cudaStream_t stream) {
  if (p.empty_output()) return Result{};  // nothing to compute or write
  const cudaError_t e = s.family->launch(p, s.row, stream);
  if (e != cudaSuccess)
    return make_result(Status::CudaError, "%s launch of %s failed: %s", s.family->name, s.family->info(s.row).name,
                       cudaGetErrorString(e));
  return Result{};
}

}  // namespace sparsek::detail
