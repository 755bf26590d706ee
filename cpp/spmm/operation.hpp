// The product C = alpha*op(A)*B + beta*C as an operation of the registry (core/registry.hpp):
// its checked Problem (spmm/problem.hpp), its families in Auto's preference order, and Auto's
// policy across them. select and launch are defined for it in cpp/spmm/api.cu.
#pragma once

#include <cstdlib>

#include "core/registry.hpp"
#include "spmm/problem.hpp"
#include "spmm/sm90/configs.hpp"  // gated_min_n, one_wave_row_takes

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
  // gated rows wherever one runs it (measured faster there than Decode, sm90/configs.hpp),
  // and a plain product that hopper_takes_plain picks (below).
  static const char* auto_leaves(const Problem& p, const Family& f, int /*row*/) {
    if (&f == &kSm90Family && p.a.bm <= 16 && wmma_runs(p))
      return "Auto leaves 16-high blocks to WMMA (measured faster than the any-block rows)";
    if (&f == &kDecodeFamily && p.gated && p.n() >= spmm_sm90::gated_min_n(p.a.bm) && runs(kSm90Family, p))
      return "Auto leaves gated products of many columns to Hopper's gated rows (measured faster)";
    if (&f == &kDecodeFamily && hopper_takes_w8a16(p) && runs(kSm90Family, p))
      return "Auto leaves W8A16 products of many columns to Hopper's W8A16 rows (measured faster)";
    if (&f == &kDecodeFamily && hopper_takes_plain(p) && runs(kSm90Family, p))
      return "Auto leaves 16-bit products of more than 16 columns on large weights of tall blocks (32 on smaller "
             "ones) to Hopper's narrow rows, and of more than 64 on large weights to its other rows (measured faster)";
    return nullptr;
  }

  // Where Decode's 128-column row would take a plain 16-bit product of op(A) = A
  // (65 <= n <= 128), Auto leaves it to Hopper for blocks taller than 64 whose stored blocks
  // (A's bytes) reach kHopperPlainMinBytes. Measured on an H100 (2026-11-27,
  // tests/cpp/check_gated.cu --time-only, f16, d = 0.5, the MLP's down product y = W_down h,
  // us, Decode vs Hopper, n = 80 | 96 | 112 | 128):
  //   128x128 blocks: Qwen2.5-7B 3584x18944 (65 MiB) 62.6 vs 57.7 | 63.3 vs 57.8 |
  //     63.3 vs 57.3 | 64.2 vs 57.7; Llama-3-8B 4096x14336 (56 MiB) 96.3 vs 53.3 | 97.0 vs 52.9 |
  //     96.5 vs 52.8 | 97.4 vs 53.1; Qwen2.5-14B 5120x13824 (68 MiB) 84.8 vs 57.0 | 85.2 vs
  //     56.5 | 85.5 vs 56.4 | 85.9 vs 55.9; Llama-3-70B 8192x28672 (224 MiB) 169.2 vs 171.4 |
  //     170.7 vs 169.5 | 183.8 vs 162.9 | 179.0 vs 157.5; but Phi-3-mini 3072x8192 (24 MiB,
  //     L2-resident in the timing loop) 30.7 vs 34.6 | 30.8 vs 35.7 | 30.9 vs 35.3 | 32.2 vs 35.0.
  //   64x64 blocks: Decode at every n (Qwen2.5-7B 73.7 vs 87.3 | 74.2 vs 84.2 | 74.0 vs 80.8 |
  //     74.3 vs 80.3; Llama-3-8B 60.0 vs 68.1 | 60.4 vs 67.7 | 60.4 vs 66.5 | 60.5 vs 65.2).
  //   At n <= 64 Decode's narrower rows won everywhere against those tiles (n = 64: 36.0 vs
  //   59.5, 46.7 vs 52.9, 45.1 vs 57.6, 142.2 vs 178.8, 21.3 vs 36.8 on the five 128x128 shapes).
  // Hopper's narrow rows (128x64 tiles on 128-deep k-tiles, one wave; configs.hpp
  // one_wave_row_takes) changed that from n = 33, whatever the weights' size (H200,
  // 2026-11-29, spmm_check f16 d 0.5, B and C column-major, us, Decode vs the narrow row, n =
  // 32 | 64 | 96 | 128): 4096x14336 29.1 vs 27.4 | 42.1 vs 27.0 | 82.1 vs 27.3 | 82.8 vs 27.0;
  // 3584x18944 34.0 vs 29.8 | 34.4 vs 29.4 | 58.4 vs 31.0 | 58.8 vs 30.9; 3072x8192 16.4 vs
  // 18.3 | 18.1 vs 16.2 | 30.0 vs 17.3 | 30.5 vs 17.3; 1536x8960 13.7 vs 16.3 | 16.6 vs 15.3 |
  // 21.0 vs 15.8 | 21.1 vs 16.1; n = 48 on the MLPs' down projections (check_gated): Llama-3-8B
  // 43.1 vs 28.6, Qwen2.5-14B 41.9 vs 31.4. At n = 16 Decode was 20-40 % faster. At n = 17-32
  // (Decode's 32-column rows) the narrow rows won on weights of 32 MiB or more (bench_report
  // decode, n = 32, d 0.5 / 0.3: 14336x4096 22.5 vs 29.9 / 16.5 vs 22.1, 13824x5120 25.6 vs
  // 35.9 / 18.4 vs 24.7, 4096x14336 27.8 vs 29.7 / 22.1 vs 23.2; 5120x13824 d 0.3 lost, 23.3 vs
  // 21.6; n = 24 on the MLPs' down projections 29.0 vs 31.9, 32.0 vs 36.6, 32.5 vs 32.4) and lost
  // on smaller ones (n = 32: 3072x8192 18.3 vs 16.4, 1536x8960 16.3 vs 13.7), which Decode keeps
  // up to n = 32. SPARSEK_HOPPER_PLAIN_MIN_N (a measuring knob, read once) sets both thresholds.
  static constexpr int64_t kHopperNarrowMinN = 17;       // weights of kHopperPlainMinBytes or more
  static constexpr int64_t kHopperNarrowSmallMinN = 33;  // smaller weights
  static constexpr int64_t kHopperPlainMinN = 65;
  static constexpr int64_t kHopperPlainMinBytes = int64_t(32) << 20;
  static bool hopper_takes_plain(const Problem& p) {
    static const int64_t forced_min_n = [] {
      const char* s = std::getenv("SPARSEK_HOPPER_PLAIN_MIN_N");
      return s != nullptr && std::atoll(s) > 0 ? int64_t(std::atoll(s)) : int64_t(0);
    }();
    if (p.gated || p.a_transposed || p.a.bm <= 64) return false;
    if (p.input() != DType::F16 && p.input() != DType::BF16) return false;
    // nnzb * bm * bk fits int64 (the Problem's rules); bytes of a 16-bit element: 2.
    const bool large = p.a.nnzb * p.a.bm * p.a.bk >= kHopperPlainMinBytes / 2;
    const int64_t narrow_min_n = forced_min_n > 0 ? forced_min_n : large ? kHopperNarrowMinN : kHopperNarrowSmallMinN;
    if (p.n() >= narrow_min_n && spmm_sm90::one_wave_row_takes(p)) return true;
    return p.n() >= kHopperPlainMinN && large;
  }

  // W8A16 (FP8 A, 16-bit B) from n = kHopperW8A16MinN columns: Hopper's W8A16 rows (A converted to
  // f16 in registers, WGMMA) where one runs it, Decode's dequantizing mma.sync rows below; from n =
  // kHopperW8A16NarrowMinN the gated product and the plain products the narrow W8A16 row takes (one
  // wave), and from n = 17 those of at least kHopperW8A16SmallNMinRows block-rows (the gated
  // product on Hopper from n = 17 measured neither faster nor slower: the MLP's gain below is its
  // down projection's). Measured on an H200 (2026-11-29, bench_report fp8 and decode --mlp-only,
  // e4m3 128x128 d 0.5), µs through Auto (Decode below n = 33) against the Hopper rows from n = 17,
  // at n = 17 / 24 / 32: 4096x14336 31.8 / 31.9 / 32.0 against 24.4 / 23.2 / 23.6, 5120x13824
  // 32.1-32.3 against 25.3-25.6, 11008x4096 20.3-20.8 against 17.7-18.8, 14336x4096 21.2-21.4
  // against 18.5-20.2, 8192x2048 12.9-13.1 against 13.1-13.5, but 2048x8192 (16 block-rows)
  // 13.1-13.3 against 18.5-18.9 and 18944x3584 (148, not one wave) 31.3-31.5 against 45.9-48.9; the
  // Llama-3-8B MLP from a graph at n = 24 / 32 70.7 / 68.3 against 62.7 / 59.3, Qwen2.5-7B 85.7 /
  // 83.3 against 85.2 / 82.0. SPARSEK_W8A16_HOPPER_MIN_N (a measuring knob, read once) sets every
  // threshold.
  static constexpr int64_t kHopperW8A16MinN = 64;
  static constexpr int64_t kHopperW8A16NarrowMinN = 33;
  static constexpr int64_t kHopperW8A16SmallNMinN = 17;
  static constexpr int64_t kHopperW8A16SmallNMinRows = 32;
  static bool hopper_takes_w8a16(const Problem& p) {
    if (!detail::is_fp8(p.input()) || p.b.dtype == p.input()) return false;
    static const int64_t forced_min_n = [] {
      const char* s = std::getenv("SPARSEK_W8A16_HOPPER_MIN_N");
      return s != nullptr && std::atoll(s) > 0 ? int64_t(std::atoll(s)) : int64_t(0);
    }();
    if (forced_min_n > 0) return p.n() >= forced_min_n;
    if (p.n() >= kHopperW8A16MinN) return true;
    if (p.gated) return p.n() >= kHopperW8A16NarrowMinN;
    if (p.n() < kHopperW8A16SmallNMinN || !spmm_sm90::one_wave_row_takes(p)) return false;
    return p.n() >= kHopperW8A16NarrowMinN || p.block_rows() >= kHopperW8A16SmallNMinRows;
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
