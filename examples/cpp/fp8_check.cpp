// fp8_check: FP8 (e4m3, e5m2) block-sparse products through the public C++ API, against a
// double-precision host reference on the dequantized values (CMake target fp8_check, with
// SPARSEK_WITH_FP8).
//
//   fp8_check            the suite: W8A8 on the Hopper family (scale kinds x output dtypes x
//                        alpha/beta/bias/activation, 64x64 and 128x128 blocks, NaN-poisoned
//                        C, 100 bitwise-identical repeats), W8A16 on the Decode family (e4m3
//                        and e5m2 A x f16/bf16 B, both B layouts with odd ld, C f16/bf16/f32
//                        row/column-major, n = 1 .. 130, the same epilogue and repeat
//                        checks), and the typed refusals; one PASS/FAIL line each
//   fp8_check --decode-only   the W8A16 cases alone, 2 repeats (for compute-sanitizer)
//   fp8_check --time     also times W8A8 against f16 on the same pattern (m = n = k = 8192,
//                        128x128 blocks, top-k per block-row at densities 1/8 and 1/4), and
//                        W8A16 against f16 sparse decode (W 14336x4096 and 4096x4096, 128x128
//                        blocks, density 1/2, n = 1, 8, 16, weights cycled out of L2)
//   fp8_check --time-decode   the W8A16 timing alone
//   fp8_check --profile  one e4m3 launch of the timing case at 1/4 (for ncu)
//
// Quantization is cuda_fp8.h's (__nv_fp8_e4m3 from float: round to nearest even, saturating
// to +-448), with the scale amax/448 per block or per tensor, as sparsek's Rust quantizer.
// Exit status 0 only when every line passed.
#include <sparsek/sparsek.hpp>

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using sparsek::Activation;
using sparsek::Backend;
using sparsek::DType;
using sparsek::Layout;
using sparsek::ScaleKind;
using sparsek::Status;

namespace {

int passed = 0, failed = 0;

[[noreturn]] void die(const char* what, cudaError_t e) {
  std::printf("FAIL cuda error in %s: %s\n", what, cudaGetErrorString(e));
  std::exit(2);
}
#define CUDA_CHECK(call)                       \
  do {                                         \
    cudaError_t err_ = (call);                 \
    if (err_ != cudaSuccess) die(#call, err_); \
  } while (0)

void report(bool ok, const std::string& line) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", line.c_str());
  (ok ? passed : failed)++;
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) / double(1ull << 53); }
  float value() { return float(uniform() * 2.0 - 1.0); }
};

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 16 : bytes)); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};
template <class T>
void upload(Dev& d, const std::vector<T>& h) {
  CUDA_CHECK(cudaMemcpy(d.p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// cuda_fp8.h's conversions: round to nearest even, saturating to the largest finite value.
uint8_t to_fp8(float x, DType t) { return t == DType::E5M2 ? __nv_fp8_e5m2(x).__x : __nv_fp8_e4m3(x).__x; }
float from_fp8(uint8_t b, DType t) {
  if (t == DType::E5M2) {
    __nv_fp8_e5m2 v;
    v.__x = b;
    return float(v);
  }
  __nv_fp8_e4m3 v;
  v.__x = b;
  return float(v);
}
float fp8_max(DType t) { return t == DType::E5M2 ? 57344.0f : 448.0f; }

double activate(double v, Activation a) {
  switch (a) {
    case Activation::Relu: return v > 0 ? v : 0;
    case Activation::GeluTanh: return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    case Activation::Silu: return v / (1 + std::exp(-v));
    default: return v;
  }
}

const char* name(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
    default: return "?";
  }
}
const char* name(ScaleKind s) {
  switch (s) {
    case ScaleKind::None: return "none";
    case ScaleKind::PerTensor: return "tensor";
    case ScaleKind::PerBlock: return "block";
    case ScaleKind::PerColumn: return "column";
  }
  return "?";
}

int out_bytes(DType t) { return t == DType::F32 ? 4 : 2; }
float out_to_float(const uint8_t* p, DType t) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  if (t == DType::F16) {
    __half_raw r;
    r.x = bits;
    return __half2float(__half(r));
  }
  __nv_bfloat16_raw r;
  r.x = bits;
  return __bfloat162float(__nv_bfloat16(r));
}
void float_to_out(float v, uint8_t* p, DType t) {
  if (t == DType::F32) {
    std::memcpy(p, &v, 4);
    return;
  }
  uint16_t bits = t == DType::F16 ? __half_raw(__float2half_rn(v)).x : __nv_bfloat16_raw(__float2bfloat16_rn(v)).x;
  std::memcpy(p, &bits, 2);
}

// A random BSR pattern (m/bm x k/bk blocks, each kept with probability `density`, at least
// one per block-row when `full_rows`), FP8 values with their scales, and B (k x n,
// column-major) FP8 with its scales; everything dequantized for the reference. W8A16
// (make_w8a16): B f16 or bf16 in either layout with its ld, b_q its bytes.
struct Problem {
  DType t;  // A's FP8 type (and B's for W8A8)
  int64_t m, k, n;
  int bm, bk;
  ScaleKind a_kind, b_kind;
  std::vector<int32_t> row_ptr, col_idx;
  std::vector<uint8_t> a_q, b_q;    // A's values (nnzb blocks, row-major), B's bytes (column-major FP8, or b_layout)
  std::vector<float> a_scales, b_scales;
  std::vector<float> a_deq, b_deq;  // dequantized (stored * scale); b_deq column-major k x n
  DType b_type = DType::E4M3;       // B's dtype: t (W8A8), F16 or BF16 (W8A16)
  Layout b_layout = Layout::ColMajor;
  int64_t ldb = 0;                  // B's ld (elements)
  int64_t nnzb() const { return int64_t(col_idx.size()); }
};

Problem make_problem(Rng& rng, int64_t m, int64_t k, int64_t n, int bm, int bk, double density, ScaleKind a_kind,
                     ScaleKind b_kind, bool topk, DType t = DType::E4M3) {
  Problem p{t, m, k, n, bm, bk, a_kind, b_kind, {}, {}, {}, {}, {}, {}, {}, {}};
  const int64_t rows = m / bm, cols = k / bk;
  p.row_ptr.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    if (topk) {  // exactly round(density * cols) blocks per row, random columns
      std::vector<int32_t> all(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) all[size_t(c)] = int32_t(c);
      for (int64_t c = cols - 1; c > 0; --c) std::swap(all[size_t(c)], all[size_t(rng.next() % uint64_t(c + 1))]);
      const int64_t keep = std::max<int64_t>(1, int64_t(std::lround(density * double(cols))));
      std::sort(all.begin(), all.begin() + keep);
      p.col_idx.insert(p.col_idx.end(), all.begin(), all.begin() + keep);
    } else {
      for (int64_t c = 0; c < cols; ++c)
        if (rng.uniform() < density) p.col_idx.push_back(int32_t(c));
    }
    p.row_ptr.push_back(int32_t(p.col_idx.size()));
  }
  const int64_t block = int64_t(bm) * bk, nnzb = p.nnzb();
  // A: raw values with a magnitude that varies per block (so per-block scales matter).
  std::vector<float> a(size_t(nnzb * block));
  for (int64_t b = 0; b < nnzb; ++b) {
    const float mag = float(std::ldexp(1.0, int(rng.next() % 9) - 4));
    for (int64_t i = 0; i < block; ++i) a[size_t(b * block + i)] = rng.value() * mag;
  }
  auto amax = [](const float* x, int64_t len) {
    float v = 0;
    for (int64_t i = 0; i < len; ++i) v = std::max(v, std::fabs(x[i]));
    return v;
  };
  auto scale_of = [t](float am) { return am > 0 ? am / fp8_max(t) : 1.0f; };
  p.a_q.resize(a.size());
  p.a_deq.resize(a.size());
  if (a_kind == ScaleKind::PerTensor) p.a_scales = {scale_of(amax(a.data(), int64_t(a.size())))};
  if (a_kind == ScaleKind::PerBlock)
    for (int64_t b = 0; b < nnzb; ++b) p.a_scales.push_back(scale_of(amax(&a[size_t(b * block)], block)));
  for (int64_t b = 0; b < nnzb; ++b) {
    const float s = a_kind == ScaleKind::None ? 1.0f : p.a_scales[a_kind == ScaleKind::PerBlock ? size_t(b) : 0];
    for (int64_t i = 0; i < block; ++i) {
      const size_t at = size_t(b * block + i);
      p.a_q[at] = to_fp8(a[at] / s, t);
      p.a_deq[at] = from_fp8(p.a_q[at], t) * s;
    }
  }
  // B, column-major k x n: column j is x's token j; per-column magnitudes vary too.
  std::vector<float> bv(size_t(k * n));
  for (int64_t j = 0; j < n; ++j) {
    const float mag = float(std::ldexp(1.0, int(rng.next() % 5) - 2));
    for (int64_t i = 0; i < k; ++i) bv[size_t(j * k + i)] = rng.value() * mag;
  }
  p.b_q.resize(bv.size());
  p.b_deq.resize(bv.size());
  if (b_kind == ScaleKind::PerTensor) p.b_scales = {scale_of(amax(bv.data(), int64_t(bv.size())))};
  if (b_kind == ScaleKind::PerColumn)
    for (int64_t j = 0; j < n; ++j) p.b_scales.push_back(scale_of(amax(&bv[size_t(j * k)], k)));
  for (int64_t j = 0; j < n; ++j) {
    const float s = b_kind == ScaleKind::None ? 1.0f : p.b_scales[b_kind == ScaleKind::PerColumn ? size_t(j) : 0];
    for (int64_t i = 0; i < k; ++i) {
      const size_t at = size_t(j * k + i);
      p.b_q[at] = to_fp8(bv[at] / s, t);
      p.b_deq[at] = from_fp8(p.b_q[at], t) * s;
    }
  }
  p.b_type = t, p.b_layout = Layout::ColMajor, p.ldb = k;
  return p;
}

// W8A16: A as make_problem's (FP8 `t` with `a_kind` scales), B (k x n) in `b_type` (f16 or
// bf16), `b_layout`, ld = its contiguous extent + ld_pad; b_deq holds B's 16-bit values.
Problem make_w8a16(Rng& rng, int64_t m, int64_t k, int64_t n, int bm, int bk, double density, ScaleKind a_kind,
                   DType t, DType b_type, Layout b_layout, int64_t ld_pad, bool topk = false) {
  Problem p = make_problem(rng, m, k, 0, bm, bk, density, a_kind, ScaleKind::None, topk, t);
  p.n = n, p.b_type = b_type, p.b_layout = b_layout;
  const bool col = b_layout == Layout::ColMajor;
  p.ldb = (col ? k : n) + ld_pad;
  const int64_t outer = col ? n : k;
  p.b_q.assign(size_t(std::max<int64_t>(outer, 1) * p.ldb * 2), 0);
  p.b_deq.resize(size_t(k * n));
  for (int64_t j = 0; j < n; ++j) {
    const float mag = float(std::ldexp(1.0, int(rng.next() % 5) - 2));
    for (int64_t i = 0; i < k; ++i) {
      uint8_t two[2];
      float_to_out(rng.value() * mag, two, b_type);
      p.b_deq[size_t(j * k + i)] = out_to_float(two, b_type);
      std::memcpy(&p.b_q[size_t((col ? j * p.ldb + i : i * p.ldb + j) * 2)], two, 2);
    }
  }
  return p;
}

struct Options {
  DType out = DType::F32;
  Layout c_layout = Layout::ColMajor;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  Activation act = Activation::None;
  Backend backend = Backend::Auto;  // the requested backend
  Backend expect = Backend::Hopper;  // the backend that must run it
};

// The device copies of a Problem and the views over them.
struct DeviceProblem {
  Dev row_ptr, col_idx, a, b, a_scales, b_scales;
  int b_shift;  // B's scales start this many floats into b_scales
  explicit DeviceProblem(const Problem& p, int b_scale_shift = 0)
      : row_ptr(p.row_ptr.size() * 4),
        col_idx(p.col_idx.size() * 4),
        a(p.a_q.size()),
        b(p.b_q.size()),
        a_scales(p.a_scales.size() * 4),
        b_scales((p.b_scales.size() + size_t(b_scale_shift)) * 4),
        b_shift(b_scale_shift) {
    upload(row_ptr, p.row_ptr);
    upload(col_idx, p.col_idx);
    upload(a, p.a_q);
    upload(b, p.b_q);
    if (!p.a_scales.empty()) upload(a_scales, p.a_scales);
    if (!p.b_scales.empty())
      CUDA_CHECK(cudaMemcpy(static_cast<float*>(b_scales.p) + b_shift, p.b_scales.data(), p.b_scales.size() * 4,
                            cudaMemcpyHostToDevice));
  }
  sparsek::BsrView av(const Problem& p) const {
    sparsek::BsrView v;
    v.m = p.m, v.k = p.k, v.bm = p.bm, v.bk = p.bk, v.nnzb = p.nnzb();
    v.row_ptr = static_cast<const int32_t*>(row_ptr.p);
    v.col_idx = static_cast<const int32_t*>(col_idx.p);
    v.values = a.p;
    v.dtype = p.t;
    v.scale_kind = p.a_kind;
    v.scales = p.a_kind == ScaleKind::None ? nullptr : static_cast<const float*>(a_scales.p);
    return v;
  }
  sparsek::DenseView bv(const Problem& p) const {
    sparsek::DenseView v{b.p, p.k, p.n, p.ldb, p.b_layout, p.b_type, nullptr, p.b_kind};
    v.scales = p.b_kind == ScaleKind::None ? nullptr : static_cast<const float*>(b_scales.p) + b_shift;
    return v;
  }
};

// Checks one case: C (poisoned with NaN, or random when beta != 0) against the reference.
void check(const std::string& label, const Problem& p, const Options& o, int repeats = 1) {
  const int64_t m = p.m, n = p.n, k = p.k;
  const int ob = out_bytes(o.out);
  DeviceProblem d(p);
  Rng rng(7);
  std::vector<uint8_t> c0(size_t(m * n * ob));
  std::vector<float> c0f(size_t(m * n));
  const bool col = o.c_layout == Layout::ColMajor;
  auto at = [&](int64_t i, int64_t j) { return size_t(col ? j * m + i : i * n + j); };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float v = o.beta != 0 ? rng.value() : NAN;
      float_to_out(v, &c0[at(i, j) * ob], o.out);
      c0f[at(i, j)] = out_to_float(&c0[at(i, j) * ob], o.out);
    }
  std::vector<uint8_t> biasq;
  std::vector<float> biasf(size_t(m), 0.0f);
  if (o.bias) {
    biasq.resize(size_t(m * ob));
    for (int64_t i = 0; i < m; ++i) {
      float_to_out(rng.value(), &biasq[size_t(i * ob)], o.out);
      biasf[size_t(i)] = out_to_float(&biasq[size_t(i * ob)], o.out);
    }
  }
  Dev dc(c0.size()), dbias(biasq.size());
  upload(dc, c0);
  if (o.bias) upload(dbias, biasq);
  sparsek::DenseMutView cv{dc.p, m, n, col ? m : n, o.c_layout, o.out};
  sparsek::SpmmOptions opt;
  opt.alpha = o.alpha, opt.beta = o.beta, opt.activation = o.act, opt.backend = o.backend;
  opt.bias = o.bias ? dbias.p : nullptr;
  sparsek::Backend chosen = Backend::Auto;
  sparsek::Result r = sparsek::can_implement(d.av(p), d.bv(p), cv, opt, &chosen);
  // A build without bf16 (CMake SPARSEK_WITH_BF16=OFF) refuses bf16 B by name: not a failure.
  if (!r.ok() && p.b_type == DType::BF16 && std::strstr(r.message, "feature `bf16`") != nullptr) {
    std::printf("SKIP %s: %s\n", label.c_str(), r.message);
    return;
  }
  if (!r.ok()) return report(false, label + ": can_implement: " + r.message);
  r = sparsek::spmm(d.av(p), d.bv(p), cv, opt, nullptr);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  if (!r.ok()) return report(false, label + ": spmm: " + r.message);
  std::vector<uint8_t> got(c0.size());
  CUDA_CHECK(cudaMemcpy(got.data(), dc.p, got.size(), cudaMemcpyDeviceToHost));

  // Reference in double on the dequantized values.
  double num = 0, den = 0;
  int64_t unwritten = 0;
  std::vector<double> acc(static_cast<size_t>(n));
  const int64_t block = int64_t(p.bm) * p.bk;
  for (int64_t br = 0; br < m / p.bm; ++br)
    for (int i = 0; i < p.bm; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int32_t j = p.row_ptr[size_t(br)]; j < p.row_ptr[size_t(br + 1)]; ++j) {
        const float* blk = &p.a_deq[size_t(j * block + int64_t(i) * p.bk)];
        const int64_t k0 = int64_t(p.col_idx[size_t(j)]) * p.bk;
        for (int64_t col_j = 0; col_j < n; ++col_j) {
          const float* bcol = &p.b_deq[size_t(col_j * k + k0)];
          double s = 0;
          for (int kk = 0; kk < p.bk; ++kk) s += double(blk[kk]) * double(bcol[kk]);
          acc[size_t(col_j)] += s;
        }
      }
      const int64_t row = br * p.bm + i;
      for (int64_t j = 0; j < n; ++j) {
        double v = double(o.alpha) * acc[size_t(j)] + double(biasf[size_t(row)]);
        if (o.beta != 0) v += double(o.beta) * double(c0f[at(row, j)]);
        v = activate(v, o.act);
        const double g = out_to_float(&got[at(row, j) * ob], o.out);
        if (!std::isfinite(g)) ++unwritten;
        num += (g - v) * (g - v);
        den += v * v;
      }
    }
  const double rel = std::sqrt(num / std::max(den, 1e-300));
  // bf16 and f16 C: their rounding dominates (8 and 11 bits). f32 C: FP8 WGMMA adds within a
  // k-tile with about 14 bits kept (DeepSeek-V3 section 3.3.2), promoted to fp32 every k-tile
  // (mainloop.hpp): measured 0.6-1.1e-4 against the f64 reference on the H100, far below
  // e4m3's own rounding (2^-4).
  // W8A16 (Decode): mma.sync products of exact 16-bit values, summed in fp32 and scaled once
  // per block in fp32: f32 C far below W8A8's bound.
  const bool w8a16 = p.b_type == DType::F16 || p.b_type == DType::BF16;
  const double tol = o.out == DType::BF16 ? 8e-3 : o.out == DType::F16 ? 1e-3 : w8a16 ? 1e-4 : 5e-4;
  bool ok = unwritten == 0 && rel < tol && chosen == o.expect;
  char buf[256];
  std::snprintf(buf, sizeof(buf), ": rel err %.2e (tol %.0e), %lld unwritten, backend %d", rel, tol,
                (long long)unwritten, int(chosen));
  std::string line = label + buf;
  // Repeats: bitwise identical (no float atomics; split pieces reduce in a fixed order).
  if (ok && repeats > 1) {
    int differ = 0;
    std::vector<uint8_t> again(got.size());
    for (int rep = 0; rep < repeats; ++rep) {
      upload(dc, c0);
      r = sparsek::spmm(d.av(p), d.bv(p), cv, opt, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaMemcpy(again.data(), dc.p, again.size(), cudaMemcpyDeviceToHost));
      differ += !r.ok() || std::memcmp(again.data(), got.data(), got.size()) != 0;
    }
    ok = differ == 0;
    line += ", " + std::to_string(repeats) + " repeats: " + std::to_string(differ) + " differ";
  }
  report(ok, line);
}

// A refusal: `want` status, C untouched, the message naming `keyword`.
void refuse(const std::string& label, sparsek::BsrView a, sparsek::DenseView b, sparsek::SpmmOptions o, Status want,
            const char* keyword, DType out = DType::F32) {
  const int64_t bytes = a.m * b.cols * 4;
  Dev dc(static_cast<size_t>(bytes));
  CUDA_CHECK(cudaMemset(dc.p, 0x5a, size_t(bytes)));
  sparsek::DenseMutView cv{dc.p, a.m, b.cols, a.m, Layout::ColMajor, out};
  if (o.transpose_a) cv.rows = a.k, cv.ld = a.k;
  const sparsek::Result r = sparsek::spmm(a, b, cv, o, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> c(static_cast<size_t>(bytes));
  CUDA_CHECK(cudaMemcpy(c.data(), dc.p, c.size(), cudaMemcpyDeviceToHost));
  const bool untouched = std::all_of(c.begin(), c.end(), [](uint8_t x) { return x == 0x5a; });
  const bool ok = r.status == want && untouched && std::strstr(r.message, keyword) != nullptr;
  report(ok, "refusal " + label + ": " + r.message + (untouched ? "" : " (C WRITTEN)"));
}

double time_us(const sparsek::BsrView& a, const sparsek::DenseView& b, const sparsek::DenseMutView& c, int iters) {
  sparsek::SpmmOptions opt;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i)
    if (!sparsek::spmm(a, b, c, opt, nullptr).ok()) return -1;
  CUDA_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) (void)sparsek::spmm(a, b, c, opt, nullptr);
  CUDA_CHECK(cudaEventRecord(e1));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 1000.0 * ms / iters;
}

// FP8 against f16 on the same pattern, 8192^3, 128x128, top-k rows. `profile`: one e4m3
// launch at density 1/4 and nothing else (for ncu).
void timing(bool profile) {
  const int64_t s = 8192;
  for (double density : {0.125, 0.25}) {
    if (profile && density != 0.25) continue;
    Rng rng(11);
    Problem p = make_problem(rng, s, s, s, 128, 128, density, ScaleKind::PerBlock, ScaleKind::PerColumn, true);
    DeviceProblem d(p);
    Dev dc(size_t(s * s * 2)), a16(p.a_q.size() * 2), b16(p.b_q.size() * 2);
    std::vector<__half> h(p.a_deq.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = __float2half(p.a_deq[i]);
    upload(a16, h);
    h.resize(p.b_deq.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = __float2half(p.b_deq[i]);
    upload(b16, h);
    sparsek::DenseMutView cv{dc.p, s, s, s, Layout::ColMajor, DType::F16};
    sparsek::BsrView a8 = d.av(p), ah = a8;
    ah.values = a16.p, ah.dtype = DType::F16, ah.scales = nullptr, ah.scale_kind = ScaleKind::None;
    sparsek::DenseView bh{b16.p, s, s, s, Layout::ColMajor, DType::F16};
    const double flops = 2.0 * double(s) * double(p.nnzb()) * 128 * 128;
    if (profile) {
      const sparsek::Result r = sparsek::spmm(a8, d.bv(p), cv, sparsek::SpmmOptions{}, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      report(r.ok(), std::string("profile launch: ") + r.message);
      return;
    }
    const double t8 = time_us(a8, d.bv(p), cv, 20), t16 = time_us(ah, bh, cv, 20);
    std::printf("TIME 8192^3 128x128 density %.3f: e4m3 (block/column scales) %.1f us %.0f TFLOPS, f16 %.1f us %.0f "
                "TFLOPS, ratio %.2fx\n",
                density, t8, flops / t8 * 1e-6, t16, flops / t16 * 1e-6, t16 / t8);
  }
}

// ---- W8A16 on the Decode family ----

const char* name(Layout l) { return l == Layout::RowMajor ? "row" : "col"; }
const char* name(Activation a) {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::GeluTanh: return "gelu";
    case Activation::Silu: return "silu";
    default: return "none";
  }
}

// The W8A16 suite: e4m3 and e5m2 A x f16/bf16 B (both layouts, odd ld), C f16/bf16/f32 in
// both layouts, A's scales per block / per tensor / none, alpha/beta/bias/activations with
// NaN-poisoned C at beta = 0, n from 1 to 130 (the chunked row), blocks 128x128, 64x64,
// 32x48 (KC = 16) and 48x32 (KC = 32), an empty block-row, `repeats` (100) bitwise-identical
// repeats.
void w8a16_suite(Rng& rng, int repeats) {
  struct Block {
    int bm, bk;
  };
  const Block blocks[] = {{128, 128}, {64, 64}, {32, 48}, {48, 32}};
  const int64_t ns[] = {1, 3, 7, 16, 33, 64, 130};
  const DType outs[] = {DType::F32, DType::F16, DType::BF16};
  const ScaleKind a_kinds[] = {ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None};
  const Activation acts[] = {Activation::None, Activation::Relu, Activation::GeluTanh, Activation::Silu};
  const float alphas[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.25f, 0.75f}, {2.0f, 0.0f}};
  const int64_t pads[] = {0, 3, 1, 0, 5};
  int v = 0;
  for (int64_t n : ns)
    for (const Block& b : blocks) {
      const DType t = v % 2 ? DType::E5M2 : DType::E4M3;
      const DType bt = (v / 2) % 2 ? DType::BF16 : DType::F16;
      const Layout bl = v % 3 == 0 ? Layout::RowMajor : Layout::ColMajor;
      const ScaleKind ak = a_kinds[(v / 2) % 3];
      const double density = v % 7 == 3 ? 1.0 : 0.5;
      Problem p = make_w8a16(rng, 4 * b.bm, 6 * b.bk, n, b.bm, b.bk, density, ak, t, bt, bl, pads[v % 5]);
      Options o;
      o.out = outs[v % 3];
      o.c_layout = (v / 3) % 2 ? Layout::RowMajor : Layout::ColMajor;
      o.alpha = alphas[v % 4][0], o.beta = alphas[v % 4][1];
      o.bias = v % 3 != 1;
      o.act = acts[(v / 4) % 4];
      o.backend = v % 5 == 4 ? Backend::Auto : Backend::Decode;  // Auto must pick Decode too
      o.expect = Backend::Decode;
      char label[256];
      std::snprintf(label, sizeof(label),
                    "w8a16 %dx%d m=%lld k=%lld n=%lld A %s/%s B %s %s ld %lld C %s %s alpha %.2f beta %.2f%s act %s%s",
                    b.bm, b.bk, (long long)p.m, (long long)p.k, (long long)n, name(t), name(ak), name(bt), name(bl),
                    (long long)p.ldb, name(o.out), name(o.c_layout), double(o.alpha), double(o.beta),
                    o.bias ? " bias" : "", name(o.act), o.backend == Backend::Auto ? " (Auto)" : "");
      check(label, p, o);
      ++v;
    }
  // An empty block-row (its C rows are act(bias) = bias here), n = 1 and 16.
  for (int64_t n : {int64_t(1), int64_t(16)}) {
    Problem p = make_w8a16(rng, 192, 512, n, 64, 64, 1.0, ScaleKind::PerBlock, DType::E4M3, DType::F16,
                           Layout::ColMajor, 0);
    p.row_ptr = {0, 3, 3, 5};  // the first 5 of the 24 full-pattern blocks, their values and scales kept
    p.col_idx = {0, 2, 7, 1, 4};
    p.a_q.resize(5 * 64 * 64), p.a_deq.resize(5 * 64 * 64), p.a_scales.resize(5);
    Options o;
    o.backend = o.expect = Backend::Decode;
    o.bias = true, o.out = DType::F16;
    check("w8a16 64x64 blocks, an empty block-row, n=" + std::to_string(n), p, o);
  }
  // Bitwise repeats: cluster split-K (long block-rows) over a few block-rows, and a
  // row-major bf16 B with odd ld.
  {
    Problem p = make_w8a16(rng, 1024, 4096, 16, 128, 128, 0.5, ScaleKind::PerBlock, DType::E4M3, DType::F16,
                           Layout::ColMajor, 0);
    Options o;
    o.backend = o.expect = Backend::Decode;
    check("w8a16 128x128 m=1024 k=4096 n=16, bitwise repeats", p, o, repeats);
    Problem q = make_w8a16(rng, 512, 8192, 7, 64, 64, 0.6, ScaleKind::PerBlock, DType::E5M2, DType::BF16,
                           Layout::RowMajor, 3);
    o.out = DType::BF16, o.bias = true, o.beta = 0.5f;
    check("w8a16 64x64 m=512 k=8192 n=7 e5m2, bf16 row-major B ld 10, bitwise repeats", q, o, repeats);
    // The n48 and n64 tiles (two CTAs per SM), split along k in clusters.
    Problem r = make_w8a16(rng, 1024, 4096, 64, 128, 128, 0.5, ScaleKind::PerBlock, DType::E4M3, DType::F16,
                           Layout::ColMajor, 0);
    Options o64;
    o64.backend = o64.expect = Backend::Decode;
    o64.bias = true, o64.alpha = 0.75f;
    check("w8a16 128x128 m=1024 k=4096 n=64 bias, bitwise repeats", r, o64, repeats);
    Problem w = make_w8a16(rng, 512, 8192, 41, 64, 64, 0.5, ScaleKind::PerBlock, DType::E4M3, DType::BF16,
                           Layout::ColMajor, 0);
    o64.out = DType::BF16, o64.act = Activation::Silu;
    check("w8a16 64x64 m=512 k=8192 n=41 silu C bf16, bitwise repeats", w, o64, repeats);
  }
}

// HBM read bandwidth: a read-only kernel (PTX, loaded at run time: this file is host code)
// streaming 1 GiB with 16-byte loads, 4 in flight per thread. Negative when unavailable.
double hbm_read_tbps() {
  static const char kPtx[] = R"(
.version 7.8
.target sm_80
.address_size 64
.visible .entry hbm_read(.param .u64 p_src, .param .u64 p_iters, .param .u64 p_out)
{
  .reg .pred %p;
  .reg .b32 %r<24>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [p_src];
  ld.param.u64 %rd2, [p_iters];
  ld.param.u64 %rd3, [p_out];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd4, %r1, %r2;
  cvt.u64.u32 %rd5, %r3;
  add.u64 %rd4, %rd4, %rd5;
  mul.wide.u32 %rd6, %r4, %r2;
  shl.b64 %rd6, %rd6, 4;
  shl.b64 %rd4, %rd4, 4;
  add.u64 %rd7, %rd1, %rd4;
  mov.b32 %r5, 0;
  mov.u64 %rd8, 0;
LOOP:
  setp.ge.u64 %p, %rd8, %rd2;
  @%p bra DONE;
  add.u64 %rd9, %rd7, %rd6;
  add.u64 %rd10, %rd9, %rd6;
  add.u64 %rd11, %rd10, %rd6;
  ld.global.nc.v4.u32 {%r6, %r7, %r8, %r9}, [%rd7];
  ld.global.nc.v4.u32 {%r10, %r11, %r12, %r13}, [%rd9];
  ld.global.nc.v4.u32 {%r14, %r15, %r16, %r17}, [%rd10];
  ld.global.nc.v4.u32 {%r18, %r19, %r20, %r21}, [%rd11];
  xor.b32 %r5, %r5, %r6;
  xor.b32 %r5, %r5, %r7;
  xor.b32 %r5, %r5, %r8;
  xor.b32 %r5, %r5, %r9;
  xor.b32 %r5, %r5, %r10;
  xor.b32 %r5, %r5, %r11;
  xor.b32 %r5, %r5, %r12;
  xor.b32 %r5, %r5, %r13;
  xor.b32 %r5, %r5, %r14;
  xor.b32 %r5, %r5, %r15;
  xor.b32 %r5, %r5, %r16;
  xor.b32 %r5, %r5, %r17;
  xor.b32 %r5, %r5, %r18;
  xor.b32 %r5, %r5, %r19;
  xor.b32 %r5, %r5, %r20;
  xor.b32 %r5, %r5, %r21;
  shl.b64 %rd12, %rd6, 2;
  add.u64 %rd7, %rd7, %rd12;
  add.u64 %rd8, %rd8, 1;
  bra LOOP;
DONE:
  setp.ne.u32 %p, %r5, 0x9e3779b9;
  @%p bra END;
  st.global.u32 [%rd3], %r5;
END:
  ret;
}
)";
  cudaLibrary_t lib = nullptr;
  if (cudaLibraryLoadData(&lib, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  cudaKernel_t kernel = nullptr;
  double best = -1;
  if (cudaLibraryGetKernel(&kernel, lib, "hbm_read") == cudaSuccess) {
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const unsigned blocks = unsigned(sms) * 8, threads = 256;
    const uint64_t per_iter = uint64_t(blocks) * threads * 16 * 4;  // bytes per loop trip of the grid
    const uint64_t iters = (uint64_t(1) << 30) / per_iter;
    const uint64_t bytes = iters * per_iter;
    Dev src{size_t(bytes)}, out{16};
    CUDA_CHECK(cudaMemset(src.p, 1, size_t(bytes)));
    void* src_p = src.p;
    void* out_p = out.p;
    uint64_t it = iters;
    void* args[] = {&src_p, &it, &out_p};
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (int rep = 0; rep < 6; ++rep) {
      CUDA_CHECK(cudaEventRecord(e0));
      if (cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(blocks), dim3(threads), args, 0, nullptr) !=
          cudaSuccess) {
        (void)cudaGetLastError();
        best = -1;
        break;
      }
      CUDA_CHECK(cudaEventRecord(e1));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep > 0) best = std::max(best, double(bytes) / (double(ms) * 1e-3) * 1e-12);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  } else {
    (void)cudaGetLastError();
  }
  CUDA_CHECK(cudaLibraryUnload(lib));
  return best;
}

// Microseconds per launch of `a[i % a.size()]` x b -> c on Backend::Decode, back to back in a
// CUDA graph (no host time between launches), after warm-up. Negative on a refusal.
double graph_time_us(const std::vector<sparsek::BsrView>& a, const sparsek::DenseView& b,
                     const sparsek::DenseMutView& c) {
  sparsek::SpmmOptions opt;
  opt.backend = Backend::Decode;
  opt.check_indices = false;
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const sparsek::BsrView& v : a)
    if (!sparsek::spmm(v, b, c, opt, s).ok()) return -1;
  CUDA_CHECK(cudaStreamSynchronize(s));
  const size_t per = a.size() * std::max<size_t>(1, (60 + a.size() - 1) / a.size());  // launches per graph
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  bool ok = true;
  for (size_t i = 0; i < per; ++i) ok = ok && sparsek::spmm(a[i % a.size()], b, c, opt, s).ok();
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const int reps = 5;
  CUDA_CHECK(cudaEventRecord(e0, s));
  for (int r = 0; r < reps; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaEventRecord(e1, s));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(s));
  return ok ? 1000.0 * double(ms) / double(reps * per) : -1;
}

// W8A16 against f16 sparse decode on the same pattern: W (m x k) 14336x4096 and 4096x4096,
// 128x128 blocks, top-k density 1/2, e4m3 with per-block scales; x (B) f16 column-major
// (x row-major), y (C) f16. Several copies of the weights (over 200 MB each kind) are cycled
// so that every launch reads its weights from HBM (the H100's L2 is 50 MB); B and C stay in
// L2, as in a decode step. E_hbm = (A's values + scales + col_idx + B + C bytes) / time /
// 3.35 TB/s (the H100 SXM's HBM3 spec), and the same bytes over the read bandwidth measured
// here.
void decode_timing() {
  const double read_bw = hbm_read_tbps();
  if (read_bw > 0)
    std::printf("TIME HBM read bandwidth (1 GiB, 16-byte loads): %.2f TB/s measured (H100 SXM spec 3.35 TB/s)\n",
                read_bw);
  else
    std::printf("TIME HBM read bandwidth: not measured (the PTX read kernel did not load)\n");
  const int64_t shapes[][2] = {{14336, 4096}, {4096, 4096}};
  for (const auto& sh : shapes) {
    const int64_t m = sh[0], k = sh[1], nmax = 16;
    Rng rng(13);
    Problem p = make_w8a16(rng, m, k, nmax, 128, 128, 0.5, ScaleKind::PerBlock, DType::E4M3, DType::F16,
                           Layout::ColMajor, 0, /*topk=*/true);
    DeviceProblem d(p);
    const int64_t nnzb = p.nnzb(), elems = nnzb * 128 * 128;
    const size_t bytes8 = size_t(elems), bytes16 = size_t(elems) * 2;
    const size_t copies8 = std::max<size_t>(2, (size_t(200) << 20) / bytes8 + 1);
    const size_t copies16 = std::max<size_t>(2, (size_t(200) << 20) / bytes16 + 1);
    std::vector<__half> h(p.a_deq.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = __float2half(p.a_deq[i]);
    std::vector<std::unique_ptr<Dev>> a8, a16;
    for (size_t i = 0; i < copies8; ++i) {
      a8.push_back(std::make_unique<Dev>(bytes8));
      CUDA_CHECK(cudaMemcpy(a8.back()->p, d.a.p, bytes8, cudaMemcpyDeviceToDevice));
    }
    for (size_t i = 0; i < copies16; ++i) {
      a16.push_back(std::make_unique<Dev>(bytes16));
      upload(*a16.back(), h);
    }
    Dev dc(size_t(m * nmax * 2));
    CUDA_CHECK(cudaMemset(dc.p, 0, size_t(m * nmax * 2)));
    std::vector<sparsek::BsrView> v8, v16;
    for (auto& x : a8) {
      sparsek::BsrView v = d.av(p);
      v.values = x->p;
      v8.push_back(v);
    }
    for (auto& x : a16) {
      sparsek::BsrView v = d.av(p);
      v.values = x->p, v.dtype = DType::F16, v.scales = nullptr, v.scale_kind = ScaleKind::None;
      v16.push_back(v);
    }
    for (int64_t n : {int64_t(1), int64_t(8), int64_t(16)}) {
      sparsek::DenseView b = d.bv(p);
      b.cols = n;  // the first n columns (column-major, ld = k)
      sparsek::DenseMutView c{dc.p, m, n, m, Layout::ColMajor, DType::F16};
      const double t8 = graph_time_us(v8, b, c), t16 = graph_time_us(v16, b, c);
      const double common = double(nnzb) * 4 + double(k * n * 2) + double(m * n * 2);  // col_idx + B + C
      const double by8 = double(bytes8) + double(nnzb) * 4 + common, by16 = double(bytes16) + common;
      const double e8 = by8 / (t8 * 1e-6) / 3.35e12, e16 = by16 / (t16 * 1e-6) / 3.35e12;
      std::printf("TIME decode W %lldx%lld 128x128 density 0.5 n=%lld: w8a16 e4m3 %.2f us (E_hbm %.2f, %.2f of "
                  "measured), f16 %.2f us (E_hbm %.2f, %.2f of measured), ratio w8a16/f16 %.3f (target <= 0.55) "
                  "[%zu/%zu weight copies]\n",
                  (long long)m, (long long)k, (long long)n, t8, e8, read_bw > 0 ? e8 * 3.35 / read_bw : 0.0, t16, e16,
                  read_bw > 0 ? e16 * 3.35 / read_bw : 0.0, t8 / t16, copies8, copies16);
      report(t8 > 0 && t16 > 0, "decode timing ran (W " + std::to_string(m) + "x" + std::to_string(k) +
                                    ", n=" + std::to_string(n) + ")");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::fprintf(stderr, "fp8_check: no usable GPU\n");
    return 77;
  }
  if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) {
    timing(true);
    return failed == 0 ? 0 : 1;
  }
  if (argc > 1 && std::strcmp(argv[1], "--time-decode") == 0) {  // the decode timing alone
    decode_timing();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
  }
  Rng rng(2026);
  const bool decode_only = argc > 1 && std::strcmp(argv[1], "--decode-only") == 0;
  if (decode_only) {  // (under compute-sanitizer: 2 repeats)
    w8a16_suite(rng, 2);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
  }
  // Scale kinds x outputs, 128x128 and 64x64 blocks, odd n, a partial last dense tile.
  const ScaleKind a_kinds[] = {ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None};
  const ScaleKind b_kinds[] = {ScaleKind::PerColumn, ScaleKind::PerTensor, ScaleKind::None};
  const DType outs[] = {DType::F32, DType::F16, DType::BF16};
  for (int bm : {128, 64})
    for (int ai = 0; ai < 3; ++ai)
      for (int oi = 0; oi < 3; ++oi) {
        const ScaleKind ak = a_kinds[ai], bk = b_kinds[(ai + oi) % 3];
        const int64_t n = oi == 2 ? 200 : 264;
        Problem p = make_problem(rng, 4 * bm, 6 * bm, n, bm, bm, 0.5, ak, bk, false);
        Options o;
        o.out = outs[oi];
        char label[160];
        std::snprintf(label, sizeof(label), "%dx%d m=%lld k=%lld n=%lld A %s B %s C %s", bm, bm, (long long)p.m,
                      (long long)p.k, (long long)n, name(ak), name(bk), name(o.out));
        check(label, p, o);
      }
  // n from 1 to 600, odd ones first, on random patterns of density 0.55 (block-rows of odd and
  // even block counts), each C dtype in turn, alpha and a bias.
  {
    const int64_t odd_ns[] = {1, 3, 7, 33, 129, 257, 600};
    int v = 0;
    for (int bm : {128, 64})
      for (int64_t n : odd_ns) {
        Problem p = make_problem(rng, 5 * bm, 7 * bm, n, bm, bm, 0.55, ScaleKind::PerBlock, ScaleKind::PerColumn, false);
        Options o;
        o.out = outs[v++ % 3], o.alpha = 0.75f, o.bias = true;
        char label[160];
        std::snprintf(label, sizeof(label), "%dx%d m=%lld k=%lld n=%lld C %s alpha/bias", bm, bm, (long long)p.m,
                      (long long)p.k, (long long)n, name(o.out));
        check(label, p, o);
      }
  }
  // n past 4096, odd (not the cluster row's multiple of 512): Auto's 128x128 row, its last dense
  // tile partial.
  {
    Problem p = make_problem(rng, 3 * 128, 5 * 128, 4105, 128, 128, 0.6, ScaleKind::PerBlock, ScaleKind::PerColumn,
                             false);
    Options o;
    o.out = DType::BF16, o.alpha = 0.75f, o.bias = true;
    check("128x128 m=384 k=640 n=4105 (the 128x128 row) C bf16 alpha/bias, bitwise repeats", p, o, 20);
  }
  // n a multiple of 512 over enough tiles not to split (34 block-rows): Auto's 128x256 cluster
  // row for 128x128 blocks (configs.hpp); C both layouts, beta.
  {
    Problem p = make_problem(rng, 34 * 128, 5 * 128, 1024, 128, 128, 0.6, ScaleKind::PerBlock, ScaleKind::PerColumn,
                             false);
    Options o;
    o.out = DType::F16, o.alpha = 0.75f, o.bias = true;
    check("128x128 m=4352 k=640 n=1024 (the 128x256 cluster row) C f16 alpha/bias, bitwise repeats", p, o, 20);
    Problem q = make_problem(rng, 34 * 128, 5 * 128, 512, 128, 128, 0.5, ScaleKind::PerBlock, ScaleKind::PerColumn,
                             false);
    Options r;
    r.out = DType::F32, r.c_layout = Layout::RowMajor, r.alpha = 1.5f, r.beta = 0.5f;
    check("128x128 m=4352 k=640 n=512 (the 128x256 cluster row) C f32 row-major beta 0.5", q, r);
    // B's column scales 4 bytes past a 16-byte boundary: refused before any launch (the
    // validation every entry shares, core/validate.cu), C untouched.
    DeviceProblem shifted(p, 1);
    refuse("B's column scales not 16-byte aligned", shifted.av(p), shifted.bv(p), sparsek::SpmmOptions{},
           Status::InvalidArgument, "16-byte", DType::F16);
  }
  // e5m2 (the same kernels, its own rows), both block sizes.
  for (int bm : {128, 64})
    for (DType out : {DType::F32, DType::BF16}) {
      Problem p = make_problem(rng, 4 * bm, 6 * bm, 136, bm, bm, 0.5, ScaleKind::PerBlock, ScaleKind::PerColumn, false,
                               DType::E5M2);
      Options o;
      o.out = out, o.alpha = 0.5f, o.bias = true;
      check(std::string("e5m2 ") + std::to_string(bm) + "x" + std::to_string(bm) + " C " + name(out) + " with bias", p, o);
    }
  // The epilogue: alpha, beta (C read), bias of C's dtype, activations, row-major C.
  {
    Problem p = make_problem(rng, 512, 1024, 136, 128, 128, 0.4, ScaleKind::PerBlock, ScaleKind::PerColumn, false);
    Options o;
    o.alpha = 0.75f, o.beta = -1.25f, o.bias = true;
    for (Activation act : {Activation::None, Activation::Relu, Activation::GeluTanh, Activation::Silu})
      for (DType out : {DType::F32, DType::BF16}) {
        o.act = act, o.out = out;
        o.c_layout = act == Activation::Relu ? Layout::RowMajor : Layout::ColMajor;
        check(std::string("128x128 alpha/beta/bias act ") + std::to_string(int(act)) + " C " + name(out) +
                  (o.c_layout == Layout::RowMajor ? " row-major" : ""),
              p, o);
      }
  }
  // An empty block-row (its C rows get beta*C = 0), n = 1.
  {
    Problem p = make_problem(rng, 192, 512, 1, 64, 64, 1.0, ScaleKind::PerBlock, ScaleKind::PerTensor, false);
    p.row_ptr = {0, 3, 3, 5};  // the first 5 of the 24 full-pattern blocks, their values and scales kept
    p.col_idx = {0, 2, 7, 1, 4};
    p.a_q.resize(5 * 64 * 64), p.a_deq.resize(5 * 64 * 64), p.a_scales.resize(5);
    check("64x64 blocks, an empty block-row, n=1", p, Options{});
  }
  {
    Problem p = make_problem(rng, 1024, 2048, 512, 128, 128, 0.3, ScaleKind::PerBlock, ScaleKind::PerColumn, false);
    check("128x128 m=1024 k=2048 n=512, bitwise repeats", p, Options{}, 100);
    Problem few = make_problem(rng, 256, 8192, 64, 128, 128, 1.0, ScaleKind::PerBlock, ScaleKind::None, false);
    check("few tiles, long block-rows (split tiles), bitwise repeats", few, Options{}, 100);
  }
  // Typed refusals, C untouched.
  {
    Problem p = make_problem(rng, 256, 256, 64, 128, 128, 1.0, ScaleKind::PerBlock, ScaleKind::None, false);
    DeviceProblem d(p);
    const sparsek::BsrView a = d.av(p);
    const sparsek::DenseView b = d.bv(p);
    sparsek::SpmmOptions o;
    sparsek::DenseView row_b = b;
    row_b.layout = Layout::RowMajor, row_b.ld = p.n;
    refuse("row-major B", a, row_b, o, Status::NotSupported, "column-major B");
    sparsek::SpmmOptions wmma = o;
    wmma.backend = Backend::Wmma;
    refuse("the Wmma backend", a, b, wmma, Status::NotSupported, "FP8");
    sparsek::SpmmOptions at = o;
    at.transpose_a = true;
    at.transpose_index = {a.row_ptr, a.col_idx, a.col_idx};
    refuse("op(A) = A^T", a, b, at, Status::NotSupported, "K-major");
    sparsek::BsrView col_a = a;
    col_a.scale_kind = ScaleKind::PerColumn;
    refuse("A scales per column", col_a, b, o, Status::InvalidArgument, "per tensor or per block");
    sparsek::BsrView odd = a;
    odd.scales = reinterpret_cast<const float*>(static_cast<const char*>(d.a_scales.p) + 4);
    refuse("A scales not 16-byte aligned", odd, b, o, Status::InvalidArgument, "16-byte");
    sparsek::BsrView none = a;
    none.scale_kind = ScaleKind::None;
    refuse("scales with ScaleKind::None", none, b, o, Status::InvalidArgument, "ScaleKind::None");
    sparsek::BsrView bad_kind = a;
    bad_kind.scale_kind = static_cast<ScaleKind>(9);
    refuse("scale_kind = 9", bad_kind, b, o, Status::InvalidArgument, "not a ScaleKind");
    Dev b16(size_t(p.k * p.n * 2));  // its own bytes: B's FP8 buffer is half as large
    sparsek::DenseView f16b = b;
    f16b.data = b16.p, f16b.dtype = DType::F16, f16b.scales = nullptr, f16b.scale_kind = ScaleKind::None;
    sparsek::SpmmOptions on_decode = o;
    on_decode.backend = Backend::Decode;
    refuse("W8A8 on the Decode backend", a, b, on_decode, Status::NotSupported, "Hopper");
    sparsek::DenseView scaled_f16b = f16b;
    scaled_f16b.scale_kind = ScaleKind::PerTensor, scaled_f16b.scales = static_cast<const float*>(d.a_scales.p);
    refuse("W8A16 with scales on B", a, scaled_f16b, on_decode, Status::InvalidArgument, "only FP8");
    sparsek::SpmmOptions w8a16_t = at;
    refuse("W8A16 op(A) = A^T", a, f16b, w8a16_t, Status::NotSupported, "K-major");
    refuse("FP8 C", a, b, o, Status::NotSupported, "C must be", DType::E4M3);
    sparsek::DenseView scaled16 = f16b;
    sparsek::BsrView a16 = a;
    a16.dtype = DType::F16, a16.scales = nullptr, a16.scale_kind = ScaleKind::None;
    scaled16.scale_kind = ScaleKind::PerTensor, scaled16.scales = static_cast<const float*>(d.a_scales.p);
    refuse("scales on an f16 B", a16, scaled16, o, Status::InvalidArgument, "only FP8");
  }
  w8a16_suite(rng, 100);
  if (argc > 1 && std::strcmp(argv[1], "--time") == 0) {
    timing(false);
    decode_timing();
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
