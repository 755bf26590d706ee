// The product C = alpha*op(A)*B + beta*C as an operation of the registry (core/registry.hpp):
// its checked Problem (spmm/problem.hpp), its families in Auto's preference order, and Auto's
// policy across them. select and launch are defined for it in cpp/spmm/api.cu.
#pragma once

#include "core/registry.hpp"
#include "spmm/problem.hpp"
#include "spmm/sm90/configs.hpp"  // gated_min_n

namespace sparsek::detail {

using Family = FamilyOf<Problem>;
using Selection = SelectionOf<Problem>;

// The families, each defined in its family.cu (cpp/spmm/decode, cpp/spmm/sm90, cpp/spmm/wmma).
extern const Family kDecodeFamily;
extern const Family kSm90Family;
extern const Family kWmmaFamily;

template <>
struct Operation<Problem> : OperationDefaults<Problem> {
  // Decode first: its rows fit only below their measured n thresholds (decode/configs.hpp);
  // then Hopper, the faster wherever it applies; then WMMA (sm_80 and newer).
  static constexpr const Family* kFamilies[] = {&kDecodeFamily, &kSm90Family, &kWmmaFamily};

  // Auto's policy across the families: it leaves 16-high blocks to WMMA wherever WMMA runs
  // them. The only Hopper rows that fit such blocks are the any-block rows, measured slower
  // there (H100, f16 TFLOPS at density 1/16, 1/8, 1/4: 16x16 62/67/67 against WMMA's
  // 76/78/78), while on every taller block they measured faster (32x32 204/234/245 against
  // 138/145/148; 64x112 291/317/332 against 225/241/246; 128x48 342/422/476 against
  // 189/211/191; 128x112 370/424/478 against 205/219/210; f32 C at 128x128 and 64x64, density
  // 1/8: 444 and 361 against WMMA's 329 and 250 in the input type). Backend::Hopper runs every
  // row; a row SPARSEK_VARIANT forces under Backend::Auto is held to this too.
  // It also leaves a gated product of n >= spmm_sm90::gated_min_n(bm) columns to Hopper's
  // gated rows wherever one runs it (measured faster there than Decode, sm90/configs.hpp).
  static const char* auto_leaves(const Problem& p, const Family& f, int /*row*/) {
    if (&f == &kSm90Family && p.a.bm <= 16 && wmma_runs(p))
      return "Auto leaves 16-high blocks to WMMA (measured faster than the any-block rows)";
    if (&f == &kDecodeFamily && p.gated && p.n() >= spmm_sm90::gated_min_n(p.a.bm) && runs(kSm90Family, p))
      return "Auto leaves gated products of many columns to Hopper's gated rows (measured faster)";
    return nullptr;
  }

  // Whether Auto would run p on family f: a built automatic row of it within its n bound
  // fits, and Auto's policy keeps it (the registry's rule 3, core/registry.hpp).
  static bool runs(const Family& f, const Problem& p) {
    if ((p.has_epilogue() && !f.epilogue) || (p.gated && !f.gated) || f.supports(p) != nullptr) return false;
    for (int row = 0; row < f.rows; ++row) {
      const VariantInfo info = f.info(row);
      if (built(info.needs) && info.automatic && (info.max_n == 0 || p.n() <= info.max_n) &&
          (info.max_row_depth == 0 || !p.deeper_than(info.max_row_depth)) &&
          (f.auto_skips == nullptr || !f.auto_skips(p, row)) && f.fits(p, row) == nullptr &&
          auto_leaves(p, f, row) == nullptr)
        return true;
    }
    return false;
  }

  // Whether the WMMA family runs p: an automatic row of it fits.
  static bool wmma_runs(const Problem& p) {
    const Family& w = kWmmaFamily;
    if ((p.has_epilogue() && !w.epilogue) || w.supports(p) != nullptr) return false;
    for (int row = 0; row < w.rows; ++row)
      if (w.info(row).automatic && w.fits(p, row) == nullptr) return true;
    return false;
  }
};

extern template Result select<Problem>(const Problem&, Selection*);
extern template Result launch<Problem>(const Problem&, const Selection&, cudaStream_t);

}  // namespace sparsek::detail
