// spmm_check: checks (and optionally times) sparsek::spmm against a double-precision host
// reference, using only the public header. Built by scripts/build-cpp-check.sh (or CMake:
// target spmm_check).
//
//   spmm_check [--m 1024 --n 512 --k 768 --bm 64 --bk 64 --density 0.25]
//              [--dtype f16|bf16] [--out f16|bf16|f32] [--b-layout row|col] [--c-layout row|col]
//              [--alpha 1 --beta 0] [--backend auto|wmma|cutlass|decode] [--seed 1] [--iters 1]
//              [--ld-pad 0] [--empty-rows F] [--transpose]
//   (--transpose: C = alpha*A^T*B + beta*C with A stored k x m in bk x bm blocks and passed
//   with its transpose index, checked on the device first)
//   spmm_check --suite [--backend ...]     ~40 built-in cases, one PASS/FAIL line each
//   spmm_check --bad                        malformed views and (with check_indices) bad
//                                           index arrays must be refused, C untouched
//
// Every check prints one line starting with PASS or FAIL; the exit status is 0 only when
// everything passed. With --iters N > 1 the case is checked once, then timed over N runs
// (after a warm-up) and TFLOPS = 2 * n * nnzb * bm * bk / time is printed.
//
// SPARSEK_VARIANT=<row name> in the environment forces one kernel row of the registry
// (cpp/core/registry.hpp; e.g. wmma_w128x256 or sm90_f16_bm128_brow_crow): a case that row
// does not fit is refused (NotSupported) instead of silently measuring another row.
#include <sparsek/sparsek.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using sparsek::Backend;
using sparsek::DType;
using sparsek::Layout;

namespace {

// ---- small helpers ----------------------------------------------------------------------

[[noreturn]] void die(const char* what, cudaError_t e) {
  std::printf("FAIL cuda error in %s: %s\n", what, cudaGetErrorString(e));
  std::exit(2);
}
#define CUDA_CHECK(call)                      \
  do {                                        \
    cudaError_t err_ = (call);                \
    if (err_ != cudaSuccess) die(#call, err_); \
  } while (0)

// splitmix64: small, fast, good enough for test data.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  float sym() { return static_cast<float>(2.0 * uniform() - 1.0); }          // [-1, 1)
  uint64_t below(uint64_t n) { return next() % n; }
};

uint32_t f32_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
float bits_f32(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// IEEE binary16, round to nearest even.
uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // half subnormal (or zero)
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent
  return static_cast<uint16_t>(h);
}
float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}
uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t) { return t == DType::F16 ? "f16" : t == DType::BF16 ? "bf16" : "f32"; }
const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Wmma: return "wmma";
    case Backend::Hopper: return "hopper";
    case Backend::Decode: return "decode";
  }
  return "?";
}

// Every message of the C++ API starts with exactly one "sparsek: ".
bool one_prefix(const char* message) {
  return std::strncmp(message, "sparsek: ", 9) == 0 && std::strstr(message + 1, "sparsek: ") == nullptr &&
         message[9] != '\0';
}

// A host buffer of f16/bf16/f32 elements with float access.
struct HostBuf {
  DType t = DType::F16;
  std::vector<uint8_t> raw;
  HostBuf() = default;
  HostBuf(DType type, size_t count) : t(type), raw(count * dtype_size(type)) {}
  size_t size() const { return raw.size() / dtype_size(t); }
  size_t bytes() const { return raw.size(); }
  float get(size_t i) const {
    if (t == DType::F32) {
      float f;
      std::memcpy(&f, &raw[i * 4], 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, &raw[i * 2], 2);
    return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  void set(size_t i, float v) {
    if (t == DType::F32) {
      std::memcpy(&raw[i * 4], &v, 4);
      return;
    }
    const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(&raw[i * 2], &h, 2);
  }
  bool same_bits(size_t i, const HostBuf& o) const {
    const size_t s = dtype_size(t);
    return std::memcmp(&raw[i * s], &o.raw[i * s], s) == 0;
  }
};

struct DevBuf {
  void* p = nullptr;
  DevBuf() = default;
  explicit DevBuf(size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMalloc(&p, bytes));
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// ---- one test case ----------------------------------------------------------------------

struct Case {
  int64_t m = 1024, n = 512, k = 768;
  int bm = 64, bk = 64;
  double density = 0.25;      // fraction of block columns present in a (non-empty) block-row
  bool one_block = false;     // exactly one nonzero block in the whole matrix
  double empty_rows = -1;     // fraction of block-rows forced empty; < 0: 0.1 when checking, 0 when timing
  DType dtype = DType::F16, out = DType::F16;
  Layout b_layout = Layout::RowMajor, c_layout = Layout::RowMajor;
  float alpha = 1.0f, beta = 0.0f;
  int64_t ld_pad = 0;  // extra elements in B's and C's leading dimensions (keep a multiple of 8)
  uint64_t seed = 1;
  // op(A) = A^T: the stored matrix is k x m in bk x bm blocks (so op(A) is m x k in bm x bk
  // blocks, like A otherwise), passed with its transpose index; the index is checked on the
  // device (check_indices), which covers that path too.
  bool transpose = false;
};

// The transpose index of a host pattern (sparsek.hpp's TransposeIndexView): blocks by
// block-column, block-rows ascending within each.
struct TransposeIndex {
  std::vector<int32_t> col_ptr, row_idx, block_id;
};
TransposeIndex transpose_index(const std::vector<int32_t>& row_ptr, const std::vector<int32_t>& col_idx,
                               int64_t block_cols) {
  TransposeIndex t;
  t.col_ptr.assign(static_cast<size_t>(block_cols + 1), 0);
  for (int32_t col : col_idx) ++t.col_ptr[col + 1];
  for (int64_t i = 0; i < block_cols; ++i) t.col_ptr[i + 1] += t.col_ptr[i];
  t.row_idx.resize(col_idx.size());
  t.block_id.resize(col_idx.size());
  std::vector<int32_t> next(t.col_ptr.begin(), t.col_ptr.end() - 1);
  for (size_t r = 0; r + 1 < row_ptr.size(); ++r)
    for (int32_t j = row_ptr[r]; j < row_ptr[r + 1]; ++j) {
      const int32_t slot = next[col_idx[j]]++;
      t.row_idx[slot] = static_cast<int32_t>(r);
      t.block_id[slot] = j;
    }
  return t;
}

struct Bsr {
  std::vector<int32_t> row_ptr, col_idx;
  HostBuf values;
};

// Random block pattern: each non-empty block-row gets round(density * k/bk) (at least 1)
// distinct sorted block columns; a fraction of block-rows is left empty.
Bsr make_bsr(const Case& c, double empty_frac, Rng& rng) {
  const int64_t mb = c.m / c.bm, kb = c.k / c.bk;
  Bsr a;
  a.row_ptr.assign(mb + 1, 0);
  std::vector<int32_t> cols(static_cast<size_t>(kb));
  std::iota(cols.begin(), cols.end(), 0);
  const int64_t one_row = c.one_block && mb > 0 ? static_cast<int64_t>(rng.below(mb)) : -1;
  for (int64_t r = 0; r < mb; ++r) {
    int64_t cnt = 0;
    if (c.one_block) {
      cnt = (r == one_row && kb > 0) ? 1 : 0;
    } else if (kb > 0 && c.density > 0 && !(rng.uniform() < empty_frac)) {
      cnt = std::clamp<int64_t>(std::llround(c.density * kb), 1, kb);
    }
    for (int64_t i = 0; i < cnt; ++i) std::swap(cols[i], cols[i + rng.below(kb - i)]);  // partial shuffle
    std::vector<int32_t> pick(cols.begin(), cols.begin() + cnt);
    std::sort(pick.begin(), pick.end());
    a.col_idx.insert(a.col_idx.end(), pick.begin(), pick.end());
    a.row_ptr[r + 1] = static_cast<int32_t>(a.col_idx.size());
  }
  const size_t block = static_cast<size_t>(c.bm) * c.bk;
  a.values = HostBuf(c.dtype, a.col_idx.size() * block);
  for (size_t i = 0; i < a.values.size(); ++i) a.values.set(i, rng.sym());
  return a;
}

struct Outcome {
  bool pass = false;
  bool skipped = false;  // the backend does not take this case (NotSupported)
};

// Runs one case: build, launch, verify, optionally time. Prints one line.
Outcome run_case(const Case& c, Backend backend, int iters, bool refuse_is_failure, const char* label) {
  Outcome res;
  const bool timing = iters > 1;
  const double empty_frac = c.empty_rows >= 0 ? c.empty_rows : (timing ? 0.0 : 0.1);
  Rng rng(c.seed);
  char desc[400];
  std::snprintf(desc, sizeof(desc), "%s%sm=%lld n=%lld k=%lld bm=%d bk=%d %s->%s B=%s C=%s alpha=%g beta=%g ld_pad=%lld",
                label, c.transpose ? "A^T " : "", (long long)c.m, (long long)c.n, (long long)c.k, c.bm, c.bk, dtype_name(c.dtype),
                dtype_name(c.out), c.b_layout == Layout::RowMajor ? "row" : "col",
                c.c_layout == Layout::RowMajor ? "row" : "col", c.alpha, c.beta, (long long)c.ld_pad);
  if (c.bm <= 0 || c.bk <= 0 || c.m % c.bm != 0 || c.k % c.bk != 0) {
    std::printf("FAIL %s: m and k must be multiples of bm and bk\n", desc);
    return res;
  }

  // Host data. B and C include their leading-dimension padding; C's padding holds a
  // sentinel that must survive.
  // The stored matrix: op(A) itself, or (transposed) its k x m transpose in bk x bm blocks.
  Case stored = c;
  if (c.transpose) std::swap(stored.m, stored.k), std::swap(stored.bm, stored.bk);
  Bsr a = make_bsr(stored, empty_frac, rng);
  const int64_t nnzb = static_cast<int64_t>(a.col_idx.size());
  // op(A)'s block-rows: A's (row_ptr, col_idx, block j) or its transpose index's (col_ptr,
  // row_idx, block block_id[j], read transposed).
  const TransposeIndex ti = c.transpose ? transpose_index(a.row_ptr, a.col_idx, stored.k / stored.bk) : TransposeIndex{};
  const std::vector<int32_t>& op_ptr = c.transpose ? ti.col_ptr : a.row_ptr;
  const std::vector<int32_t>& op_idx = c.transpose ? ti.row_idx : a.col_idx;
  auto op_value = [&](int32_t j, int rr, int kk) {  // element (rr, kk) of op(A)'s j-th listed block
    const size_t block = static_cast<size_t>(c.bm) * c.bk;
    return c.transpose ? a.values.get(static_cast<size_t>(ti.block_id[j]) * block + static_cast<size_t>(kk) * c.bm + rr)
                       : a.values.get(static_cast<size_t>(j) * block + static_cast<size_t>(rr) * c.bk + kk);
  };
  const bool b_row = c.b_layout == Layout::RowMajor, c_row = c.c_layout == Layout::RowMajor;
  const int64_t ldb = (b_row ? c.n : c.k) + c.ld_pad, ldc = (c_row ? c.n : c.m) + c.ld_pad;
  const int64_t b_outer = b_row ? c.k : c.n, c_outer = c_row ? c.m : c.n;
  HostBuf hb(c.dtype, static_cast<size_t>(b_outer * ldb));
  std::vector<float> bref(static_cast<size_t>(c.k * c.n));  // B as row-major floats for the reference
  for (int64_t kk = 0; kk < c.k; ++kk)
    for (int64_t j = 0; j < c.n; ++j) {
      const size_t idx = static_cast<size_t>(b_row ? kk * ldb + j : j * ldb + kk);
      hb.set(idx, rng.sym());
      bref[kk * c.n + j] = hb.get(idx);
    }
  HostBuf hc(c.out, static_cast<size_t>(c_outer * ldc));
  const float sentinel = 7.0f;
  auto c_index = [&](int64_t r, int64_t j) { return static_cast<size_t>(c_row ? r * ldc + j : j * ldc + r); };
  for (size_t i = 0; i < hc.size(); ++i) hc.set(i, sentinel);
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t j = 0; j < c.n; ++j) hc.set(c_index(r, j), c.beta != 0.0f ? rng.sym() : NAN);
  const HostBuf hc_in = hc;

  // Device copies.
  DevBuf d_rp(a.row_ptr.size() * 4), d_ci(a.col_idx.size() * 4), d_av(a.values.bytes()), d_b(hb.bytes()),
      d_c(hc.bytes());
  CUDA_CHECK(cudaMemcpy(d_rp.p, a.row_ptr.data(), a.row_ptr.size() * 4, cudaMemcpyHostToDevice));
  if (nnzb) {
    CUDA_CHECK(cudaMemcpy(d_ci.p, a.col_idx.data(), a.col_idx.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_av.p, a.values.raw.data(), a.values.bytes(), cudaMemcpyHostToDevice));
  }
  if (hb.bytes()) CUDA_CHECK(cudaMemcpy(d_b.p, hb.raw.data(), hb.bytes(), cudaMemcpyHostToDevice));
  if (hc.bytes()) CUDA_CHECK(cudaMemcpy(d_c.p, hc.raw.data(), hc.bytes(), cudaMemcpyHostToDevice));

  DevBuf d_tp(ti.col_ptr.size() * 4), d_tr(ti.row_idx.size() * 4), d_tb(ti.block_id.size() * 4);
  if (c.transpose) {
    CUDA_CHECK(cudaMemcpy(d_tp.p, ti.col_ptr.data(), ti.col_ptr.size() * 4, cudaMemcpyHostToDevice));
    if (nnzb) {
      CUDA_CHECK(cudaMemcpy(d_tr.p, ti.row_idx.data(), ti.row_idx.size() * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(d_tb.p, ti.block_id.data(), ti.block_id.size() * 4, cudaMemcpyHostToDevice));
    }
  }

  sparsek::BsrView av;
  av.m = stored.m, av.k = stored.k, av.bm = stored.bm, av.bk = stored.bk, av.nnzb = nnzb;
  av.row_ptr = static_cast<const int32_t*>(d_rp.p);
  av.col_idx = static_cast<const int32_t*>(d_ci.p);
  av.values = d_av.p;
  av.dtype = c.dtype;
  sparsek::DenseView bv{d_b.p, c.k, c.n, ldb, c.b_layout, c.dtype};
  sparsek::DenseMutView cv{d_c.p, c.m, c.n, ldc, c.c_layout, c.out};
  sparsek::SpmmOptions opt;
  opt.alpha = c.alpha, opt.beta = c.beta, opt.backend = backend;
  if (c.transpose) {
    opt.transpose_a = true;
    opt.transpose_index.col_ptr = static_cast<const int32_t*>(d_tp.p);
    opt.transpose_index.row_idx = static_cast<const int32_t*>(d_tr.p);
    opt.transpose_index.block_id = static_cast<const int32_t*>(d_tb.p);
    opt.check_indices = !timing;  // the device check of the index (it synchronizes)
  }

  Backend chosen = Backend::Auto;
  sparsek::Result can = sparsek::can_implement(av, bv, cv, opt, &chosen);
  if (!can.ok()) {
    const bool refused = can.status == sparsek::Status::NotSupported;
    res.skipped = refused && !refuse_is_failure;
    std::printf("%s %s: can_implement: %s\n", res.skipped ? "SKIP" : "FAIL", desc, can.message);
    return res;
  }

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  sparsek::Result r = sparsek::spmm(av, bv, cv, opt, stream);
  if (!r.ok()) {
    std::printf("FAIL %s: spmm returned status %d: %s\n", desc, (int)r.status, r.message);
    CUDA_CHECK(cudaStreamDestroy(stream));
    return res;
  }
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  HostBuf out(c.out, hc.size());
  if (out.bytes()) CUDA_CHECK(cudaMemcpy(out.raw.data(), d_c.p, out.bytes(), cudaMemcpyDeviceToHost));

  // Every element of C: NaN means unwritten (beta == 0 poisons C) or a broken kernel; the
  // padding between rows/columns must be untouched.
  int64_t nan_count = 0, pad_clobbered = 0;
  for (int64_t o = 0; o < c_outer; ++o)
    for (int64_t i = 0; i < ldc; ++i) {
      const size_t idx = static_cast<size_t>(o * ldc + i);
      const bool inside = i < (c_row ? c.n : c.m);
      if (inside && std::isnan(out.get(idx))) ++nan_count;
      if (!inside && !out.same_bits(idx, hc_in)) ++pad_clobbered;
    }

  // Reference in double over block-rows; a sample of them when the full product is large.
  const int64_t mb = c.m / c.bm;
  const double work_per_row_fma = static_cast<double>(c.bk) * c.bm * c.n;  // per nonzero block
  const double budget = 4e8;
  std::vector<int64_t> rows(static_cast<size_t>(mb));
  std::iota(rows.begin(), rows.end(), 0);
  const bool sample = nnzb * work_per_row_fma > budget;
  if (sample)
    for (int64_t i = mb - 1; i > 0; --i) std::swap(rows[i], rows[rng.below(i + 1)]);
  double spent = 0, err2 = 0, ref2 = 0;
  int64_t checked_rows = 0;
  std::vector<double> acc(static_cast<size_t>(c.bm * c.n));
  for (int64_t br : rows) {
    const int64_t blocks = op_ptr[br + 1] - op_ptr[br];
    if (sample && spent > 0 && spent + blocks * work_per_row_fma > budget) continue;
    spent += std::max<double>(blocks, 1) * work_per_row_fma;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int32_t jb = op_ptr[br]; jb < op_ptr[br + 1]; ++jb) {
      for (int rr = 0; rr < c.bm; ++rr)
        for (int kk = 0; kk < c.bk; ++kk) {
          const double av_ = op_value(jb, rr, kk);
          if (av_ == 0.0) continue;
          const float* brow = &bref[(static_cast<int64_t>(op_idx[jb]) * c.bk + kk) * c.n];
          double* arow = &acc[static_cast<size_t>(rr) * c.n];
          for (int64_t j = 0; j < c.n; ++j) arow[j] += av_ * brow[j];
        }
    }
    for (int rr = 0; rr < c.bm; ++rr) {
      const int64_t row = br * c.bm + rr;
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t idx = c_index(row, j);
        double ref = static_cast<double>(c.alpha) * acc[static_cast<size_t>(rr) * c.n + j];
        if (c.beta != 0.0f) ref += static_cast<double>(c.beta) * hc_in.get(idx);
        const double d = static_cast<double>(out.get(idx)) - ref;
        err2 += d * d;
        ref2 += ref * ref;
      }
    }
    ++checked_rows;
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  const double tol = (c.dtype == DType::BF16 || c.out == DType::BF16) ? 1e-2 : 2e-3;
  const bool ok = std::isfinite(rel) && rel <= tol && nan_count == 0 && pad_clobbered == 0;

  char extra[160] = "";
  if (timing && ok) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (int i = -2; i < iters; ++i) {  // two warm-up launches, then the timed ones
      if (i == 0) CUDA_CHECK(cudaEventRecord(e0, stream));
      sparsek::Result ri = sparsek::spmm(av, bv, cv, opt, stream);
      if (!ri.ok()) {
        std::printf("FAIL %s: spmm failed while timing: %s\n", desc, ri.message);
        std::exit(2);
      }
    }
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double sec = ms / 1e3 / iters;
    const double flops = 2.0 * c.n * nnzb * c.bm * c.bk;
    std::snprintf(extra, sizeof(extra), " time_us=%.1f tflops=%.1f", sec * 1e6, flops / sec / 1e12);
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));

  std::printf("%s %s nnzb=%lld backend=%s rel_err=%.3g tol=%.0e nan_or_unwritten=%lld pad_clobbered=%lld "
              "checked_block_rows=%lld/%lld%s\n",
              ok ? "PASS" : "FAIL", desc, (long long)nnzb, backend_name(chosen), rel, tol, (long long)nan_count,
              (long long)pad_clobbered, (long long)checked_rows, (long long)mb, extra);
  res.pass = ok;
  return res;
}

// ---- the suite --------------------------------------------------------------------------

std::vector<Case> suite_cases(uint64_t seed) {
  std::vector<Case> v;
  auto add = [&](Case c) {
    c.seed = seed + v.size();
    v.push_back(c);
  };
  // Every block shape in {16,32,64,128}^2, rotating dtype, output type, layouts, scaling
  // and n (n = 1000 and 520 leave partial N tiles).
  const int shapes[4] = {16, 32, 64, 128};
  const int64_t ns[4] = {256, 1000, 520, 136};
  const float ab[4][2] = {{1, 0}, {0.5f, 1}, {1, 0}, {-1, 0.5f}};
  int idx = 0;
  for (int bm : shapes)
    for (int bk : shapes) {
      Case c;
      c.m = 512, c.k = 512, c.n = ns[idx % 4], c.bm = bm, c.bk = bk, c.density = 0.3;
      c.dtype = idx % 2 ? DType::BF16 : DType::F16;
      c.out = (idx / 2) % 3 == 1 ? DType::F32 : c.dtype;
      c.b_layout = (idx / 2) % 2 ? Layout::ColMajor : Layout::RowMajor;
      c.c_layout = (idx / 4) % 2 ? Layout::ColMajor : Layout::RowMajor;
      c.alpha = ab[(idx / 3) % 4][0], c.beta = ab[(idx / 3) % 4][1];
      add(c);
      ++idx;
    }
  Case c;
  // Density extremes: a single block, full, none at all.
  c = Case{}, c.m = 512, c.k = 512, c.n = 256, c.one_block = true, add(c);
  c = Case{}, c.m = 256, c.k = 512, c.n = 264, c.density = 1.0, c.empty_rows = 0, c.dtype = c.out = DType::BF16, add(c);
  c = Case{}, c.m = 256, c.k = 256, c.n = 128, c.density = 0, c.beta = 0, add(c);
  c = Case{}, c.m = 256, c.k = 256, c.n = 128, c.density = 0, c.beta = 0.5f, c.out = DType::F32, add(c);
  // Odd sizes and block shapes that are not powers of two (K_STEP 16, TILE_M 16/32).
  c = Case{}, c.m = 1008, c.k = 1008, c.n = 1000, c.bm = 16, c.bk = 48, c.density = 0.2, add(c);
  c = Case{}, c.m = 1008, c.k = 1040, c.n = 1512, c.bm = 48, c.bk = 80, c.density = 0.15, c.dtype = DType::BF16,
  c.out = DType::F32, c.c_layout = Layout::ColMajor, add(c);
  c = Case{}, c.m = 960, c.k = 960, c.n = 520, c.bm = 96, c.bk = 96, c.density = 0.25, c.b_layout = Layout::ColMajor,
  c.beta = 1, add(c);
  c = Case{}, c.m = 1024, c.k = 1024, c.n = 384, c.bm = 256, c.bk = 256, c.density = 0.5, c.dtype = c.out = DType::BF16,
  add(c);
  c = Case{}, c.m = 576, c.k = 640, c.n = 264, c.bm = 192, c.bk = 32, c.density = 0.3, c.c_layout = Layout::ColMajor,
  add(c);
  c = Case{}, c.m = 432, c.k = 576, c.n = 200, c.bm = 144, c.bk = 144, c.density = 0.5, c.out = DType::F32, add(c);
  c = Case{}, c.m = 512, c.k = 560, c.n = 256, c.bm = 128, c.bk = 112, c.density = 0.3,
  c.b_layout = c.c_layout = Layout::ColMajor, add(c);
  // Padded leading dimensions (the padding of C must stay untouched).
  c = Case{}, c.m = 512, c.k = 512, c.n = 256, c.ld_pad = 8, c.beta = 1, add(c);
  c = Case{}, c.m = 512, c.k = 512, c.n = 248, c.ld_pad = 24, c.b_layout = c.c_layout = Layout::ColMajor,
  c.dtype = DType::BF16, c.out = DType::F32, add(c);
  // A last dense tile pulled back over the one before (sm90 Direct rows, tile_iterator.hpp's
  // dense_tile_start): the overlap is written once, so beta applies once.
  c = Case{}, c.m = 512, c.k = 512, c.n = 300, c.bm = 32, c.bk = 32, c.density = 0.3, c.beta = 0.5f,
  c.b_layout = c.c_layout = Layout::ColMajor, add(c);
  c = Case{}, c.m = 512, c.k = 512, c.n = 330, c.bm = 128, c.bk = 128, c.out = DType::F32, c.beta = 1,
  c.b_layout = c.c_layout = Layout::ColMajor, add(c);
  c = Case{}, c.m = 512, c.k = 512, c.n = 200, c.bm = 64, c.bk = 64, c.density = 0.4, c.beta = 0.25f,
  c.out = DType::F32, add(c);
  // alpha/beta corners.
  c = Case{}, c.m = 512, c.k = 512, c.n = 256, c.alpha = 0, c.beta = 1, add(c);
  c = Case{}, c.m = 512, c.k = 512, c.n = 256, c.alpha = 2, c.beta = -1, c.out = DType::F32,
  c.c_layout = Layout::ColMajor, add(c);
  // Narrow n, including n not a multiple of 8 (only with both B and C column-major).
  c = Case{}, c.m = 512, c.k = 512, c.n = 8, add(c);
  c = Case{}, c.m = 512, c.k = 512, c.n = 12, c.b_layout = c.c_layout = Layout::ColMajor, c.beta = 1, add(c);
  c = Case{}, c.m = 512, c.k = 512, c.n = 24, c.bm = 32, c.bk = 32, c.dtype = c.out = DType::BF16, add(c);
  // Enough CTAs to take the wide (TILE_N 256) rows of the wmma table for bm 16/32/64.
  c = Case{}, c.m = 1024, c.k = 512, c.n = 2048, c.bm = 16, c.bk = 32, c.density = 0.25, add(c);
  c = Case{}, c.m = 1024, c.k = 512, c.n = 2304, c.bm = 32, c.bk = 64, c.density = 0.2, c.b_layout = Layout::ColMajor,
  c.dtype = DType::BF16, c.out = DType::BF16, add(c);
  c = Case{}, c.m = 2048, c.k = 512, c.n = 2304, c.bm = 64, c.bk = 64, c.density = 0.15, c.beta = 0.5f,
  c.c_layout = Layout::ColMajor, add(c);
  // ... and the 128 x 256 row for bm = 128 (two-pass epilogue), both layouts.
  c = Case{}, c.m = 2048, c.k = 128, c.n = 4352, c.bm = 128, c.bk = 32, c.density = 0.25, add(c);
  c = Case{}, c.m = 2048, c.k = 128, c.n = 4352, c.bm = 128, c.bk = 32, c.density = 0.25, c.dtype = DType::BF16,
  c.out = DType::F32, c.b_layout = c.c_layout = Layout::ColMajor, c.beta = -0.5f, add(c);
  c = Case{}, c.m = 768, c.k = 512, c.n = 392, c.bm = 256, c.bk = 64, c.density = 0.4, c.c_layout = Layout::ColMajor,
  c.ld_pad = 16, c.beta = 2, add(c);
  // op(A) = A^T through the C API's transpose index (checked on the device first).
  const int tshapes[5][2] = {{64, 64}, {128, 128}, {128, 64}, {32, 48}, {16, 16}};
  for (int i = 0; i < 10; ++i) {
    c = Case{}, c.transpose = true, c.m = 768, c.k = 1024, c.n = i % 3 == 2 ? 264 : 512;
    c.bm = tshapes[i % 5][0], c.bk = tshapes[i % 5][1];
    c.k = c.k / c.bk * c.bk, c.m = c.m / c.bm * c.bm, c.density = 0.2;
    c.dtype = i % 2 ? DType::BF16 : DType::F16;
    c.out = i % 4 == 3 ? DType::F32 : c.dtype;
    c.b_layout = (i / 2) % 2 ? Layout::ColMajor : Layout::RowMajor;
    c.c_layout = i % 3 == 1 ? Layout::ColMajor : Layout::RowMajor;
    c.beta = i % 2 ? 0.5f : 0.0f, add(c);
  }
  return v;
}

// ---- malformed views --------------------------------------------------------------------

int run_bad(Backend backend) {
  // A small valid problem, then one defect at a time. C is poisoned and must stay so.
  const int64_t m = 96, k = 96, n = 64;
  const int bm = 48, bk = 48;
  std::vector<int32_t> row_ptr = {0, 1, 2}, col_idx = {0, 1};
  DevBuf d_rp(row_ptr.size() * 4), d_ci(col_idx.size() * 4), d_av(2 * bm * bk * 2 + 16), d_b(k * n * 2),
      d_c(m * n * 2);
  CUDA_CHECK(cudaMemcpy(d_rp.p, row_ptr.data(), row_ptr.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_ci.p, col_idx.data(), col_idx.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_av.p, 0, 2 * bm * bk * 2 + 16));
  CUDA_CHECK(cudaMemset(d_b.p, 0, k * n * 2));
  CUDA_CHECK(cudaMemset(d_c.p, 0xff, m * n * 2));  // 0xffff: a NaN in f16 and bf16

  auto valid = [&](sparsek::BsrView& a, sparsek::DenseView& b, sparsek::DenseMutView& c) {
    a = sparsek::BsrView{};
    a.m = m, a.k = k, a.bm = bm, a.bk = bk, a.nnzb = 2;
    a.row_ptr = static_cast<const int32_t*>(d_rp.p), a.col_idx = static_cast<const int32_t*>(d_ci.p);
    a.values = d_av.p, a.dtype = DType::F16;
    b = sparsek::DenseView{d_b.p, k, n, n, Layout::RowMajor, DType::F16};
    c = sparsek::DenseMutView{d_c.p, m, n, n, Layout::RowMajor, DType::F16};
  };
  struct Bad {
    const char* name;
    void (*apply)(sparsek::BsrView&, sparsek::DenseView&, sparsek::DenseMutView&, sparsek::SpmmOptions&);
  };
  const Bad bads[] = {
      {"bm=24 (not a multiple of 16) on wmma",
       [](sparsek::BsrView& a, sparsek::DenseView&, sparsek::DenseMutView&, sparsek::SpmmOptions& o) {
         a.bm = 24, a.nnzb = 2, o.backend = Backend::Wmma;  // 96 / 24 = 4 block-rows; row_ptr is only read on launch
       }},
      {"null values", [](sparsek::BsrView& a, sparsek::DenseView&, sparsek::DenseMutView&,
                         sparsek::SpmmOptions&) { a.values = nullptr; }},
      {"B rows != k", [](sparsek::BsrView&, sparsek::DenseView& b, sparsek::DenseMutView&,
                         sparsek::SpmmOptions&) { b.rows = 80; }},
      {"C ld < n", [](sparsek::BsrView&, sparsek::DenseView&, sparsek::DenseMutView& c,
                      sparsek::SpmmOptions&) { c.ld = 32; }},
      {"misaligned A.values on wmma",
       [](sparsek::BsrView& a, sparsek::DenseView&, sparsek::DenseMutView&, sparsek::SpmmOptions& o) {
         a.values = static_cast<const char*>(a.values) + 2, o.backend = Backend::Wmma;
       }},
      {"C bf16 with f16 inputs", [](sparsek::BsrView&, sparsek::DenseView&, sparsek::DenseMutView& c,
                                    sparsek::SpmmOptions&) { c.dtype = DType::BF16; }},
      {"m not a multiple of bm", [](sparsek::BsrView& a, sparsek::DenseView&, sparsek::DenseMutView& c,
                                    sparsek::SpmmOptions&) { a.m = c.rows = 80; }},
  };
  int failures = 0;
  for (const Bad& bad : bads) {
    sparsek::BsrView a;
    sparsek::DenseView b;
    sparsek::DenseMutView c;
    valid(a, b, c);
    sparsek::SpmmOptions o;
    o.backend = backend;
    bad.apply(a, b, c, o);
    sparsek::Result r = sparsek::spmm(a, b, c, o, nullptr);
    const bool refused = !r.ok() && r.status != sparsek::Status::CudaError && one_prefix(r.message);
    std::printf("%s bad view '%s': status=%d message=\"%s\"\n", refused ? "PASS" : "FAIL", bad.name,
                (int)r.status, r.message);
    if (!refused) ++failures;
  }

  // Bad index arrays behind well-formed views: only the device check (check_indices) sees
  // them; it must refuse with InvalidArgument naming the first bad block-row and launch
  // nothing. A is 2x2 blocks; the valid arrays are row_ptr {0, 1, 2}, col_idx {0, 1}.
  struct BadIndices {
    const char* name;
    int32_t row_ptr[3], col_idx[2];
    int bad_row;
  };
  const BadIndices bad_indices[] = {
      {"col_idx out of range", {0, 1, 2}, {0, 2}, 1},
      {"negative col_idx", {0, 1, 2}, {-1, 1}, 0},
      {"duplicate col_idx", {0, 2, 2}, {1, 1}, 0},
      {"row_ptr decreasing", {0, 2, 1}, {0, 1}, 1},
      {"row_ptr[0] != 0", {1, 1, 2}, {0, 1}, 0},
      {"row_ptr past nnzb", {0, 1, 3}, {0, 1}, 1},
  };
  for (const BadIndices& bad : bad_indices) {
    CUDA_CHECK(cudaMemcpy(d_rp.p, bad.row_ptr, sizeof(bad.row_ptr), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_ci.p, bad.col_idx, sizeof(bad.col_idx), cudaMemcpyHostToDevice));
    sparsek::BsrView a;
    sparsek::DenseView b;
    sparsek::DenseMutView c;
    valid(a, b, c);
    sparsek::SpmmOptions o;  // Auto: some backend runs the well-formed 48x48-block views
    o.check_indices = true;
    sparsek::Result r = sparsek::spmm(a, b, c, o, nullptr);
    CUDA_CHECK(cudaGetLastError());
    char row[32];
    std::snprintf(row, sizeof(row), "block-row %d", bad.bad_row);
    const bool refused = r.status == sparsek::Status::InvalidArgument && one_prefix(r.message) &&
                         std::strstr(r.message, row) != nullptr;
    std::printf("%s bad indices '%s' (check_indices): status=%d message=\"%s\"\n", refused ? "PASS" : "FAIL",
                bad.name, (int)r.status, r.message);
    if (!refused) ++failures;
  }
  CUDA_CHECK(cudaMemcpy(d_rp.p, row_ptr.data(), row_ptr.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_ci.p, col_idx.data(), col_idx.size() * 4, cudaMemcpyHostToDevice));
  // Nothing may have been launched: C still holds the poison.
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> hc(static_cast<size_t>(m * n));
  CUDA_CHECK(cudaMemcpy(hc.data(), d_c.p, hc.size() * 2, cudaMemcpyDeviceToHost));
  const bool untouched = std::all_of(hc.begin(), hc.end(), [](uint16_t x) { return x == 0xffff; });
  std::printf("%s bad views: C untouched after refused calls\n", untouched ? "PASS" : "FAIL");
  if (!untouched) ++failures;
  std::printf("%s --bad: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}

// ---- command line -----------------------------------------------------------------------

void usage() {
  std::printf(
      "usage: spmm_check [--m M --n N --k K --bm BM --bk BK --density D] [--dtype f16|bf16]\n"
      "                  [--out f16|bf16|f32] [--b-layout row|col] [--c-layout row|col]\n"
      "                  [--alpha A --beta B] [--backend auto|wmma|cutlass|decode] [--seed S] [--iters N]\n"
      "                  [--ld-pad P] [--empty-rows F] [--transpose] [--suite] [--bad]\n"
      "environment: SPARSEK_VARIANT=<row name> forces one kernel row\n");
}

bool parse_dtype(const char* s, DType* t) {
  if (!std::strcmp(s, "f16")) return *t = DType::F16, true;
  if (!std::strcmp(s, "bf16")) return *t = DType::BF16, true;
  if (!std::strcmp(s, "f32")) return *t = DType::F32, true;
  return false;
}
bool parse_layout(const char* s, Layout* l) {
  if (!std::strcmp(s, "row")) return *l = Layout::RowMajor, true;
  if (!std::strcmp(s, "col")) return *l = Layout::ColMajor, true;
  return false;
}
bool parse_backend(const char* s, Backend* b) {
  if (!std::strcmp(s, "auto")) return *b = Backend::Auto, true;
  if (!std::strcmp(s, "wmma")) return *b = Backend::Wmma, true;
  if (!std::strcmp(s, "cutlass") || !std::strcmp(s, "hopper")) return *b = Backend::Hopper, true;
  if (!std::strcmp(s, "decode")) return *b = Backend::Decode, true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Case c;
  Backend backend = Backend::Auto;
  int iters = 1;
  bool suite = false, bad = false, out_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--suite") { suite = true; continue; }
    if (arg == "--bad") { bad = true; continue; }
    if (arg == "--transpose") { c.transpose = true; continue; }
    if (arg == "--help" || arg == "-h") { usage(); return 0; }
    if (i + 1 >= argc) { std::printf("FAIL missing value for %s\n", arg.c_str()); usage(); return 2; }
    const char* v = argv[++i];
    bool ok = true;
    if (arg == "--m") c.m = std::atoll(v);
    else if (arg == "--n") c.n = std::atoll(v);
    else if (arg == "--k") c.k = std::atoll(v);
    else if (arg == "--bm") c.bm = std::atoi(v);
    else if (arg == "--bk") c.bk = std::atoi(v);
    else if (arg == "--density") c.density = std::atof(v);
    else if (arg == "--dtype") ok = parse_dtype(v, &c.dtype) && c.dtype != DType::F32;
    else if (arg == "--out") ok = parse_dtype(v, &c.out), out_given = true;
    else if (arg == "--b-layout") ok = parse_layout(v, &c.b_layout);
    else if (arg == "--c-layout") ok = parse_layout(v, &c.c_layout);
    else if (arg == "--alpha") c.alpha = static_cast<float>(std::atof(v));
    else if (arg == "--beta") c.beta = static_cast<float>(std::atof(v));
    else if (arg == "--backend") ok = parse_backend(v, &backend);
    else if (arg == "--seed") c.seed = std::strtoull(v, nullptr, 10);
    else if (arg == "--iters") iters = std::max(1, std::atoi(v));
    else if (arg == "--ld-pad") c.ld_pad = std::atoll(v);
    else if (arg == "--empty-rows") c.empty_rows = std::atof(v);
    else ok = false;
    if (!ok) { std::printf("FAIL bad argument %s %s\n", arg.c_str(), v); usage(); return 2; }
  }
  if (!out_given) c.out = c.dtype;

  int dev = 0;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (cc %d.%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  if (const char* forced = std::getenv("SPARSEK_VARIANT"); forced != nullptr && forced[0] != '\0')
    std::printf("SPARSEK_VARIANT=%s: every case runs that kernel row or is refused\n", forced);

  if (bad) return run_bad(backend);
  if (suite) {
    const std::vector<Case> cases = suite_cases(c.seed);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      char label[32];
      std::snprintf(label, sizeof(label), "[%zu] ", i);
      // With an explicit wmma backend every suite case is meant to run: refusal is a failure.
      const Outcome o = run_case(cases[i], backend, 1, backend == Backend::Wmma, label);
      if (o.skipped) ++skipped;
      else if (o.pass) ++passed;
      else ++failed;
    }
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
  }
  const Outcome o = run_case(c, backend, iters, true, "");
  return o.pass ? 0 : 1;
}
