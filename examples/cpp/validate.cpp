// sparsek's Rust-side BSR validation and pattern builders from C++ (no GPU needed):
// malformed BSRs must throw rust::Error with a message naming the defect (so a caller
// launches nothing), a valid one must pass, and top-k / causal patterns must come out
// right. One line per check, then "N passed, N failed"; exit status 1 on any failure.
//
//   cmake -S . -B build -DSPARSEK_WITH_RUST=ON -DCMAKE_CUDA_COMPILER=...
//   cmake --build build --target sparsek_validate && (cd build && ctest --output-on-failure)
#include <sparsek/rust.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int passed = 0, failed = 0;

void report(bool ok, const std::string& what, const std::string& detail) {
  (ok ? passed : failed)++;
  std::printf("%s  %s: %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
}

template <typename T>
rust::Slice<const T> slice(const std::vector<T>& v) {
  return rust::Slice<const T>(v.data(), v.size());
}

template <typename T>
std::vector<T> to_vector(const rust::Vec<T>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// A 4 x 6 grid of 2 x 3 blocks (an 8 x 18 matrix) with 6 blocks.
struct Bsr {
  int64_t m = 8, k = 18, bm = 2, bk = 3;
  std::vector<int32_t> row_ptr{0, 2, 2, 5, 6};
  std::vector<int32_t> col_idx{0, 3, 1, 2, 5, 4};
  int64_t values_len = 6 * 2 * 3;
};

// `bsr` must be rejected with a message containing `expected`.
void expect_error(const std::string& what, const Bsr& bsr, const std::string& expected) {
  try {
    sparsek::rust::validate_bsr(bsr.m, bsr.k, bsr.bm, bsr.bk, slice(bsr.row_ptr),
                                slice(bsr.col_idx), bsr.values_len);
    report(false, what, "accepted, expected an error containing \"" + expected + "\"");
  } catch (const rust::Error& e) {
    const std::string msg = e.what();
    report(msg.find(expected) != std::string::npos, what,
           "rust::Error \"" + msg + "\"" +
               (msg.find(expected) != std::string::npos ? "" : ", expected \"" + expected + "\""));
  }
}

template <typename T>
std::string show(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void expect_pattern(const std::string& what, const sparsek::rust::BsrPattern& p, int64_t rows,
                    int64_t cols, const std::vector<int32_t>& row_ptr,
                    const std::vector<int32_t>& col_idx) {
  const auto rp = to_vector(p.row_ptr), ci = to_vector(p.col_idx);
  const bool ok = p.block_rows == rows && p.block_cols == cols && rp == row_ptr && ci == col_idx;
  report(ok, what,
         std::to_string(p.block_rows) + "x" + std::to_string(p.block_cols) + " row_ptr " + show(rp) +
             " col_idx " + show(ci) +
             (ok ? "" : ", expected row_ptr " + show(row_ptr) + " col_idx " + show(col_idx)));
}

}  // namespace

int main() {
  // A valid BSR passes.
  {
    const Bsr good;
    try {
      sparsek::rust::validate_bsr(good.m, good.k, good.bm, good.bk, slice(good.row_ptr),
                                  slice(good.col_idx), good.values_len);
      report(true, "valid BSR", "accepted");
    } catch (const rust::Error& e) {
      report(false, "valid BSR", std::string("rejected: ") + e.what());
    }
  }

  // Malformed BSRs: each throws, naming its defect.
  {
    Bsr b;
    b.col_idx = {0, 3, 2, 1, 5, 4};
    expect_error("unsorted columns", b, "col_idx of block-row 2 is not sorted (2 then 1)");
  }
  {
    Bsr b;
    b.col_idx = {0, 3, 1, 2, 6, 4};
    expect_error("column out of range", b, "col_idx of block-row 2 holds 6, outside 0..6");
  }
  {
    Bsr b;
    b.col_idx = {0, 3, 1, -1, 5, 4};
    expect_error("negative column", b, "holds -1, outside 0..6");
  }
  {
    Bsr b;
    b.col_idx = {0, 3, 1, 1, 5, 4};
    expect_error("duplicate column", b, "col_idx of block-row 2 holds column 1 twice");
  }
  {
    Bsr b;
    b.row_ptr = {0, 2, 1, 5, 6};
    expect_error("ragged row_ptr (decreasing)", b, "row_ptr is ragged at entry 2: decreases from 2 to 1");
  }
  {
    Bsr b;
    b.row_ptr = {0, 2, 2, 5, 7};
    expect_error("ragged row_ptr (end != nnzb)", b,
                 "row_ptr is ragged at entry 4: ends at 7, but col_idx has 6 entries");
  }
  {
    Bsr b;
    b.row_ptr = {1, 2, 2, 5, 6};
    expect_error("row_ptr not from 0", b, "row_ptr is ragged at entry 0: starts at 1, not 0");
  }
  {
    Bsr b;
    b.row_ptr = {0, 2, 5, 6};
    expect_error("row_ptr length", b, "row_ptr has 4 entries; block rows + 1 = 5 expected");
  }
  {
    Bsr b;
    b.values_len = 35;
    expect_error("wrong values length", b, "values has 35 elements; nnzb * bm * bk = 36 expected");
  }
  {
    Bsr b;
    b.k = 17;
    expect_error("k not a block multiple", b, "k = 17 is not a multiple of the block side 3");
  }
  {
    Bsr b;
    b.bm = 0;
    expect_error("zero-sized block", b, "block shape 0x3 has a zero side");
  }
  {
    Bsr b;
    b.m = -8;
    expect_error("negative m", b, "m = -8 is negative");
  }
  {
    // A block side above INT32_MAX (the kernels take it as int32: 2^32 + 16 would be 16).
    Bsr b;
    b.m = b.bm = (int64_t{1} << 32) + 16;
    b.k = b.bk = 1;
    b.row_ptr = {0, 1};
    b.col_idx = {0};
    b.values_len = b.bm;
    expect_error("block side above INT32_MAX", b,
                 "block side bm = 4294967312 exceeds 2147483647");
  }

  // Top-k pattern: the 2 best blocks of each row (ties to the lower column, NaN lowest).
  {
    const std::vector<float> scores{0.1f, 0.9f, 0.5f, 0.7f,  //
                                    NAN,  0.2f, 0.2f, 0.0f,  //
                                    3.0f, 2.0f, 1.0f, 0.0f};
    try {
      const auto p = sparsek::rust::topk_pattern(slice(scores), 3, 4, 2);
      expect_pattern("top-2 pattern", p, 3, 4, {0, 2, 4, 6}, {1, 3, 1, 2, 0, 1});
      // It is a valid BSR index set for any block shape.
      sparsek::rust::validate_bsr(3 * 64, 4 * 128, 64, 128, {p.row_ptr.data(), p.row_ptr.size()},
                                  {p.col_idx.data(), p.col_idx.size()}, 6 * 64 * 128);
      report(true, "top-2 pattern validates", "accepted as 64x128 blocks");
    } catch (const rust::Error& e) {
      report(false, "top-2 pattern", std::string("threw: ") + e.what());
    }
    try {
      sparsek::rust::topk_pattern(slice(scores), 3, 4, 5);
      report(false, "top-5 of 4 columns", "accepted, expected an error");
    } catch (const rust::Error& e) {
      const std::string msg = e.what();
      report(msg == "invalid pattern: top-5 of a row of 4 blocks", "top-5 of 4 columns",
             "rust::Error \"" + msg + "\"");
    }
    try {
      sparsek::rust::topk_pattern(slice(scores), 4, 4, 1);
      report(false, "scores length", "accepted, expected an error");
    } catch (const rust::Error& e) {
      const std::string msg = e.what();
      report(msg == "input has 12 elements; 16 expected", "scores length",
             "rust::Error \"" + msg + "\"");
    }
  }

  // Patterns beyond the mask limits (INT32_MAX blocks per side, 2^32 in all) throw before
  // allocating anything.
  {
    const auto expect_too_large = [](const std::string& what, auto&& build) {
      try {
        build();
        report(false, what, "accepted, expected an error");
      } catch (const rust::Error& e) {
        const std::string msg = e.what();
        report(msg.find("block mask is too large") != std::string::npos, what,
               "rust::Error \"" + msg + "\"");
      }
    };
    const std::vector<float> none;
    expect_too_large("huge top-k grid", [&] {
      sparsek::rust::topk_pattern(slice(none), int64_t{1} << 32, int64_t{1} << 32, 0);
    });
    expect_too_large("huge causal pattern",
                     [] { sparsek::rust::causal_pattern(int64_t{1} << 32, 0); });
  }

  // Causal pattern, full and banded.
  try {
    expect_pattern("causal pattern", sparsek::rust::causal_pattern(3, 0), 3, 3, {0, 1, 3, 6},
                   {0, 0, 1, 0, 1, 2});
    expect_pattern("causal band-2 pattern", sparsek::rust::causal_pattern(3, 2), 3, 3,
                   {0, 1, 3, 5}, {0, 0, 1, 1, 2});
  } catch (const rust::Error& e) {
    report(false, "causal pattern", std::string("threw: ") + e.what());
  }

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
