// The Hopper family's one-wave rules on the host (cpp/spmm/sm90/configs.hpp): which rows Auto
// passes over for their one-wave bound (one_wave_skips, family.cu's auto_skips) and whether a
// one-wave row takes a product (one_wave_row_takes, the product's Auto policy), over every
// bounded row and n = 1..600 on a 132-SM device, against the rule written out here, and on the
// shapes the rule was measured on; and where Auto leaves W8A16 products to the Hopper family
// (spmm/operation.hpp). No GPU needed: the rules read host numbers.
//
//   sparsek_test_sm90_auto_rules   (one line per failed check, then "N passed, N failed")
#include <cstdio>
#include <cstring>

#include "spmm/operation.hpp"  // Auto's W8A16 thresholds (no family is used)
#include "spmm/sm90/configs.hpp"

namespace {

using namespace sparsek;
using namespace sparsek::detail;
using namespace sparsek::detail::spmm_sm90;

int passed = 0, failed = 0;

void check(bool ok, const char* what, const char* row = "", int64_t m = 0, int64_t n = 0) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::printf("FAIL %s: row %s m %lld n %lld\n", what, row, static_cast<long long>(m), static_cast<long long>(n));
}

constexpr int kSms = 132;

// A product of an m x k weight of bm x 128 blocks at density 1/2 with n columns, B and C
// column-major in the input type (f16 beside FP8 A), on a 132-SM sm_90 device: what the rules
// read.
Problem product(int64_t m, int64_t k, int64_t n, DType input = DType::F16, int32_t bm = 128) {
  BsrView a;
  a.m = m;
  a.k = k;
  a.bm = bm;
  a.bk = 128;
  a.nnzb = m / bm * (k / 128) / 2;
  a.dtype = input;
  DenseView b;
  b.rows = k;
  b.cols = n;
  b.ld = k;
  b.layout = Layout::ColMajor;
  b.dtype = input == DType::BF16 ? DType::BF16 : DType::F16;
  DenseMutView c;
  c.rows = m;
  c.cols = n;
  c.ld = m;
  c.layout = Layout::ColMajor;
  c.dtype = b.dtype;
  DeviceInfo device;
  device.cc_major = 9;
  device.sm_count = kSms;
  return Problem::from_rust(a, b, c, 1.0f, 0.0f, Backend::Auto, nullptr, Activation::None, device, false, nullptr,
                            false);
}

const Sm90Variant& row(const char* name) {
  for (const Sm90Variant& v : kSm90Variants)
    if (std::strcmp(v.name, name) == 0) return v;
  std::printf("FAIL no row %s\n", name);
  ++failed;
  return kSm90Variants[0];
}

}  // namespace

int main() {
  check(empty_columns(384, 128) == 0 && empty_columns(384, 256) == 128 && empty_columns(1, 64) == 63 &&
            empty_columns(512, 256) == 0,
        "empty_columns");

  // Every bounded row, n = 1..600, on shapes of 8..256 block-rows: passed over exactly where
  // the bound applies, its tiles outnumber the SMs, and (with less_waste_than) its tiles leave
  // at least as many columns of n empty as the wider ones would.
  for (const Sm90Variant& v : kSm90Variants) {
    if (v.one_wave_from_n == 0) {
      for (int64_t n = 1; n <= 600; n += 7)
        check(!one_wave_skips(product(16384, 4096, n), v), "unbounded row never skipped", v.name, 16384, n);
      continue;
    }
    for (int64_t rows = 8; rows <= 256; rows *= 2)
      for (int64_t n = 1; n <= 600; ++n) {
        const Problem p = product(rows * 128, 4096, n);
        const int64_t width = v.transposed ? v.tile_m : v.tile_n;
        const int64_t tiles = rows * ((n + width - 1) / width);
        const int64_t wide = v.less_waste_than;
        const bool wastes_less =
            wide > 0 && (n + width - 1) / width * width - n < (n + wide - 1) / wide * wide - n;
        const bool expect = n >= v.one_wave_from_n && tiles > kSms && !wastes_less;
        check(one_wave_skips(p, v) == expect, "one_wave_skips as written out", v.name, rows * 128, n);
      }
  }

  // The measured choices (H200, configs.hpp above kDeep128): the narrow row on the MLPs' down
  // projections where its tiles fit one wave; the 128x128 row where its own do, or at n = 320
  // and 384 on many block-rows; neither at n = 160 and 448 there.
  const Sm90Variant& narrow = row("sm90_f16_bm_le128_k128_bcol_128x64");
  const Sm90Variant& deep = row("sm90_f16_bm_le128_k128_bcol_128x128");
  check(!one_wave_skips(product(4096, 14336, 256), narrow), "narrow at 4096x14336 n 256 (128 tiles)");
  check(one_wave_skips(product(4096, 14336, 384), narrow), "no narrow at 4096x14336 n 384 (192 tiles)");
  check(!one_wave_skips(product(4096, 14336, 384), deep), "128x128 at 4096x14336 n 384 (96 tiles)");
  check(one_wave_skips(product(5120, 13824, 256), narrow) && !one_wave_skips(product(5120, 13824, 256), deep),
        "5120x13824 n 256: the 128x128 row");
  check(one_wave_skips(product(5120, 13824, 512), deep), "no 128x128 at 5120x13824 n 512 (160 tiles)");
  for (int64_t m : {14336, 18944, 13824, 11008, 28672}) {
    check(!one_wave_skips(product(m, 4096, 320), deep), "128x128 at n 320 on many block-rows", deep.name, m, 320);
    check(!one_wave_skips(product(m, 4096, 384), deep), "128x128 at n 384 on many block-rows", deep.name, m, 384);
    check(one_wave_skips(product(m, 4096, 160), deep), "no 128x128 at n 160 on many block-rows", deep.name, m, 160);
    check(one_wave_skips(product(m, 4096, 448), deep), "no 128x128 at n 448 on many block-rows", deep.name, m, 448);
    for (int64_t n = 1; n <= 128; ++n)
      check(!one_wave_skips(product(m, 4096, n), deep), "128x128 at every n <= 128", deep.name, m, n);
  }

  // one_wave_row_takes: the products a bounded row takes (of the product's dtype), not those
  // none takes, none past the rows' max_n, no gated product.
  check(one_wave_row_takes(product(4096, 14336, 64)), "takes 4096x14336 n 64 (narrow)");
  check(one_wave_row_takes(product(4096, 14336, 384)), "takes 4096x14336 n 384 (128x128)");
  check(one_wave_row_takes(product(14336, 4096, 384)), "takes 14336x4096 n 384 (128x128, less waste)");
  check(!one_wave_row_takes(product(14336, 4096, 256)), "not 14336x4096 n 256 (224 tiles of 128x128)");
  check(!one_wave_row_takes(product(4096, 14336, 513)), "not past max_n 512");
  check(one_wave_row_takes(product(4096, 14336, 256, DType::BF16)), "bf16 through the bf16 rows");
  Problem gated = product(8192, 4096, 64);
  gated.gated = true;
  check(!one_wave_row_takes(gated), "not a gated product");

  // W8A16 (e4m3 A, f16 B) on Hopper: from n = 64; from n = 33 where the narrow row takes it in
  // one wave; from n = 17 where that wave has at least 32 block-rows (the shapes they were measured on).
  using Op = Operation<Problem>;
  const struct {
    int64_t m, k, n;
    bool hopper;
  } w8a16[] = {{4096, 14336, 16, false},  {4096, 14336, 17, true},   {5120, 13824, 24, true},
               {2048, 8192, 32, false},   {2048, 8192, 33, true},    {18944, 3584, 32, false},
               {18944, 3584, 48, false},  {18944, 3584, 64, true},   {14336, 4096, 1, false},
               {14336, 4096, 24, true},   {11008, 4096, 17, true},   {3584, 18944, 24, false}};
  for (const auto& c : w8a16)
    check(Op::hopper_takes_w8a16(product(c.m, c.k, c.n, DType::E4M3)) == c.hopper, "W8A16 on Hopper", "", c.m, c.n);
  check(!Op::hopper_takes_w8a16(product(4096, 14336, 512)), "16-bit A is not W8A16", "", 4096, 512);

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
