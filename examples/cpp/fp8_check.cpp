// fp8_check: FP8 (e4m3) block-sparse products through the public C++ API, against a
// double-precision host reference on the dequantized values (CMake target fp8_check, with
// SPARSEK_WITH_FP8).
//
//   fp8_check            the suite: scale kinds x output dtypes x alpha/beta/bias/activation,
//                        64x64 and 128x128 blocks, NaN-poisoned C, 100 bitwise-identical
//                        repeats, and the typed refusals; one PASS/FAIL line each
//   fp8_check --time     also times FP8 against f16 on the same pattern (m = n = k = 8192,
//                        128x128 blocks, top-k per block-row at densities 1/8 and 1/4)
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
// column-major) FP8 with its scales; everything dequantized for the reference.
struct Problem {
  DType t;  // A's and B's FP8 type
  int64_t m, k, n;
  int bm, bk;
  ScaleKind a_kind, b_kind;
  std::vector<int32_t> row_ptr, col_idx;
  std::vector<uint8_t> a_q, b_q;    // A's values (nnzb blocks, row-major), B column-major
  std::vector<float> a_scales, b_scales;
  std::vector<float> a_deq, b_deq;  // dequantized (stored * scale)
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
  return p;
}

struct Options {
  DType out = DType::F32;
  Layout c_layout = Layout::ColMajor;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  Activation act = Activation::None;
};

// The device copies of a Problem and the views over them.
struct DeviceProblem {
  Dev row_ptr, col_idx, a, b, a_scales, b_scales;
  explicit DeviceProblem(const Problem& p)
      : row_ptr(p.row_ptr.size() * 4),
        col_idx(p.col_idx.size() * 4),
        a(p.a_q.size()),
        b(p.b_q.size()),
        a_scales(p.a_scales.size() * 4),
        b_scales(p.b_scales.size() * 4) {
    upload(row_ptr, p.row_ptr);
    upload(col_idx, p.col_idx);
    upload(a, p.a_q);
    upload(b, p.b_q);
    if (!p.a_scales.empty()) upload(a_scales, p.a_scales);
    if (!p.b_scales.empty()) upload(b_scales, p.b_scales);
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
    sparsek::DenseView v{b.p, p.k, p.n, p.k, Layout::ColMajor, p.t, nullptr, p.b_kind};
    v.scales = p.b_kind == ScaleKind::None ? nullptr : static_cast<const float*>(b_scales.p);
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
  opt.alpha = o.alpha, opt.beta = o.beta, opt.activation = o.act;
  opt.bias = o.bias ? dbias.p : nullptr;
  sparsek::Backend chosen = Backend::Auto;
  sparsek::Result r = sparsek::can_implement(d.av(p), d.bv(p), cv, opt, &chosen);
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
  // (mainloop.hpp): measured 0.6-1.1e-4 against the f64 reference on the H100 (report/NOTES.md
  // session 19), far below e4m3's own rounding (2^-4).
  const double tol = o.out == DType::BF16 ? 8e-3 : o.out == DType::F16 ? 1e-3 : 5e-4;
  bool ok = unwritten == 0 && rel < tol && chosen == Backend::Hopper;
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
  Rng rng(2026);
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
    refuse("W8A16 (f16 B): no Decode FP8 yet", a, f16b, o, Status::NotSupported, "Decode");
    refuse("FP8 C", a, b, o, Status::NotSupported, "C must be", DType::E4M3);
    sparsek::DenseView scaled16 = f16b;
    sparsek::BsrView a16 = a;
    a16.dtype = DType::F16, a16.scales = nullptr, a16.scale_kind = ScaleKind::None;
    scaled16.scale_kind = ScaleKind::PerTensor, scaled16.scales = static_cast<const float*>(d.a_scales.p);
    refuse("scales on an f16 B", a16, scaled16, o, Status::InvalidArgument, "only FP8");
  }
  if (argc > 1 && std::strcmp(argv[1], "--time") == 0) timing(false);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
