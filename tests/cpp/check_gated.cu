// Standalone correctness and timing harness for the gated (GLU) product on the Hopper family
// (cpp/spmm/sm90/gated.hpp) and for sparse_mlp (not a library source).
//
// Checks, against a double-precision host reference of
//   h = act(alpha*G*x + bias[gate row]) * (alpha*U*x + bias[up row])
// (A's block-rows interleaved (gate, up), include/sparsek/sparsek.hpp SpmmOptions::gated):
//   - Backend::Hopper: f16 and bf16, h in the input type or f32, row- and column-major x and
//     h, ld padding, every activation, alpha, bias, blocks 128x128, 64x64, 96x64, 32x64 and
//     128x64, n = 1, 7, 64, 129, 600, pairs with an empty gate row, an empty up row or both;
//     h NaN-poisoned inside its view and a sentinel outside it (the ld padding), which must
//     stay; 100 repeats bitwise; 140 pairs (more tiles than an H100's 132 SMs) of 128x128
//     and 64x64 blocks;
//   - Backend::Auto at n = 1, 16, 128, 512 (Decode below the threshold, Hopper above it);
//   - sparse_mlp (Auto) at n = 1, 3, 16, 128, 512 against the reference with h rounded to the
//     input type as the device stores it.
// --time: the gated product on Backend::Decode and Backend::Hopper and the down product
// (Auto, Decode and Hopper) at n = 16 .. 512 on Qwen2.5-7B (hidden 3584, inter 18944), Llama-3-8B
// (4096 / 14336) and Phi-3-mini (3072 / 8192) with 128x128 blocks, then Qwen2.5-7B and
// Llama-3-8B with 64x64 blocks (CHECK_GATED_ONLY64 set: those alone), d = 0.5, f16; times in
// microseconds (the median of 5 repeats), and sparse_mlp through Auto. CHECK_GATED_NS (e.g.
// "17,64,128") picks the n; CHECK_GATED_SHAPES (e.g. "qwen2.5-7b,qwen2.5-14b,llama-3-70b")
// the MLPs, among the five names above and qwen2.5-14b (5120 / 13824), llama-3-70b
// (8192 / 28672), qwen2.5-7b-64 and llama-3-8b-64 (the 64x64 blocks). With CHECK_GATED_CUBLAS naming libcublas.so
// (opened at run time: the harness links no cuBLAS), the dense f16 MLP of the same shape
// beside it, as report/src/report/mlp.rs times it: cuBLAS's gate|up GEMM, a fused
// SiLU-and-multiply, cuBLAS's down GEMM.
// Prints PASS / FAIL lines and "N passed, N failed"; exits 1 on a failure.
//
// Build from the repository root with the library (libsparsek_kernels.a), as the bundle
// does (scripts/bundle-gpu.sh):
//   NVCC=third_party/py/nvidia/cu13/bin/nvcc
//   $NVCC -std=c++17 -O2 --expt-relaxed-constexpr -Iinclude -x cu \
//     -gencode=arch=compute_90a,code=sm_90a tests/cpp/check_gated.cu <libsparsek_kernels.a> -o check_gated
// Usage: ./check_gated [--time] [--time-only] [--quick] [--mlp] [--profile] [--seed N]
// --profile: one launch each of the gated product Auto takes on Qwen2.5-7B, 128x128 blocks,
// n = 64 and 512 (for ncu).
// --quick: six small Hopper cases only (for compute-sanitizer's memcheck and racecheck).
// --mlp: the sparse_mlp cases only (the same, for the gated product on Decode and the down
// product after it).
#include <dlfcn.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <sparsek/mlp.hpp>
#include <sparsek/sparsek.hpp>

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

#define CUDA_OK(x)                                                                              \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::printf("FAIL CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

#ifdef CHECK_GATED_ROWS
// A build with the gated rows compiled into the harness (a measuring build made before the
// library is rebuilt): launches the named row of the Hopper family (null: the row for the
// problem's dtype, B layout and block height) without the registry.
sparsek::Result launch_gated_row(const char* row, const sparsek::BsrView& a, const sparsek::DenseView& b,
                                 const sparsek::DenseMutView& c, const sparsek::SpmmOptions& options,
                                 cudaStream_t stream);
#endif

namespace {

int g_pass = 0, g_fail = 0;

void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? g_pass : g_fail)++;
}

// xorshift64: the same values for a seed on every machine.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  float sym() { return static_cast<float>(2 * uniform() - 1); }
};

size_t dsize(DType t) { return t == DType::F32 ? 4 : 2; }

// v rounded to t, stored at dst[i]; the stored value read back as a double.
double put(void* dst, size_t i, DType t, float v) {
  if (t == DType::F32) {
    static_cast<float*>(dst)[i] = v;
    return v;
  }
  if (t == DType::F16) {
    const __half h = __float2half_rn(v);
    static_cast<__half*>(dst)[i] = h;
    return __half2float(h);
  }
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  static_cast<__nv_bfloat16*>(dst)[i] = h;
  return __bfloat162float(h);
}
double get(const void* src, size_t i, DType t) {
  if (t == DType::F32) return static_cast<const float*>(src)[i];
  if (t == DType::F16) return __half2float(static_cast<const __half*>(src)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(src)[i]);
}

double act64(Activation a, double x) {
  switch (a) {
    case Activation::Relu: return x > 0 ? x : 0;
    case Activation::GeluTanh: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Activation::Silu: return x / (1 + std::exp(-x));
    default: return x;
  }
}

const char* act_name(Activation a) {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::GeluTanh: return "gelu";
    case Activation::Silu: return "silu";
    default: return "none";
  }
}
const char* dt_name(DType t) { return t == DType::F16 ? "f16" : t == DType::BF16 ? "bf16" : "f32"; }

// A BSR weight of `brows` block-rows on the host (values as doubles, already rounded to the
// dtype) and on the device.
struct Bsr {
  int64_t m = 0, k = 0;
  int bm = 0, bk = 0;
  DType t = DType::F16;
  std::vector<int32_t> row_ptr, col_idx;
  std::vector<double> vals;  // nnzb * bm * bk, row-major blocks
  int32_t *d_row_ptr = nullptr, *d_col_idx = nullptr;
  void* d_vals = nullptr;

  // Each block kept with probability `density`; `empty` lists block-rows forced empty.
  Bsr(int brows, int bcols, int bm_, int bk_, double density, DType t_, Rng& rng, const std::vector<int>& empty = {})
      : m(int64_t(brows) * bm_), k(int64_t(bcols) * bk_), bm(bm_), bk(bk_), t(t_) {
    row_ptr.push_back(0);
    for (int r = 0; r < brows; ++r) {
      const bool forced = std::find(empty.begin(), empty.end(), r) != empty.end();
      for (int c = 0; c < bcols && !forced; ++c)
        if (rng.uniform() < density) col_idx.push_back(c);
      row_ptr.push_back(int32_t(col_idx.size()));
    }
    const size_t n = col_idx.size() * size_t(bm) * bk;
    std::vector<char> host(std::max<size_t>(n, 1) * 2);
    vals.resize(n);
    for (size_t i = 0; i < n; ++i) vals[i] = put(host.data(), i, t, rng.sym());
    CUDA_OK(cudaMalloc(&d_row_ptr, row_ptr.size() * 4));
    CUDA_OK(cudaMalloc(&d_col_idx, std::max<size_t>(col_idx.size(), 1) * 4));
    CUDA_OK(cudaMalloc(&d_vals, host.size()));
    CUDA_OK(cudaMemcpy(d_row_ptr, row_ptr.data(), row_ptr.size() * 4, cudaMemcpyHostToDevice));
    if (!col_idx.empty()) CUDA_OK(cudaMemcpy(d_col_idx, col_idx.data(), col_idx.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_vals, host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  Bsr(const Bsr&) = delete;
  Bsr& operator=(const Bsr&) = delete;
  ~Bsr() {
    cudaFree(d_row_ptr);
    cudaFree(d_col_idx);
    cudaFree(d_vals);
  }
  sparsek::BsrView view() const {
    sparsek::BsrView v;
    v.m = m, v.k = k, v.bm = bm, v.bk = bk, v.nnzb = int64_t(col_idx.size());
    v.row_ptr = d_row_ptr, v.col_idx = d_col_idx, v.values = d_vals, v.dtype = t;
    return v;
  }
  // out (m x n, row-major) = this * x, x as x_at(row of x, column).
  template <class X>
  void multiply(int64_t n, const X& x_at, std::vector<double>& out) const {
    out.assign(size_t(m) * n, 0.0);
    for (int64_t br = 0; br + 1 < int64_t(row_ptr.size()); ++br)
      for (int32_t j = row_ptr[br]; j < row_ptr[br + 1]; ++j) {
        const double* blk = &vals[size_t(j) * bm * bk];
        const int64_t k0 = int64_t(col_idx[j]) * bk;
        for (int r = 0; r < bm; ++r) {
          double* o = &out[size_t(br * bm + r) * n];
          for (int kk = 0; kk < bk; ++kk) {
            const double w = blk[r * bk + kk];
            for (int64_t c = 0; c < n; ++c) o[c] += w * x_at(k0 + kk, c);
          }
        }
      }
  }
};

// A dense matrix (rows x cols, layout, ld padding) on the host and the device.
struct Dense {
  int64_t rows, cols, ld;
  Layout layout;
  DType t;
  std::vector<char> host;
  void* dev = nullptr;
  Dense(int64_t r, int64_t c, Layout l, DType t_, int64_t pad)
      : rows(r), cols(c), ld((l == Layout::RowMajor ? c : r) + pad), layout(l), t(t_) {
    host.resize(size_t(ld) * (l == Layout::RowMajor ? r : c) * dsize(t));
    CUDA_OK(cudaMalloc(&dev, std::max<size_t>(host.size(), 16)));
  }
  Dense(const Dense&) = delete;
  Dense& operator=(const Dense&) = delete;
  ~Dense() { cudaFree(dev); }
  size_t at(int64_t i, int64_t j) const { return size_t(layout == Layout::RowMajor ? i * ld + j : j * ld + i); }
  size_t elems() const { return host.size() / dsize(t); }
  bool inside(size_t e) const {
    const int64_t outer = int64_t(e) / ld, inner = int64_t(e) % ld;
    return layout == Layout::RowMajor ? (inner < cols && outer < rows) : (inner < rows && outer < cols);
  }
  void upload() { CUDA_OK(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice)); }
  void download() { CUDA_OK(cudaMemcpy(host.data(), dev, host.size(), cudaMemcpyDeviceToHost)); }
  double value(int64_t i, int64_t j) const { return get(host.data(), at(i, j), t); }
  sparsek::DenseView view() const { return {dev, rows, cols, ld, layout, t, nullptr, sparsek::ScaleKind::None}; }
  sparsek::DenseMutView mut_view() { return {dev, rows, cols, ld, layout, t}; }
};

// The sentinel of the padding outside a view and the NaN poison inside it.
void poison(Dense& c) {
  for (size_t e = 0; e < c.elems(); ++e) put(c.host.data(), e, c.t, c.inside(e) ? NAN : 7.0f);
  c.upload();
}

// The gated reference (inter x n, row-major) from gate_up * x.
std::vector<double> gated_reference(const Bsr& gu, const std::vector<double>& acc, int64_t n,
                                    const std::vector<double>& bias, Activation act, float alpha) {
  const int64_t inter = gu.m / 2, bm = gu.bm;
  std::vector<double> h(size_t(inter) * n);
  for (int64_t i = 0; i < inter; ++i) {
    const int64_t g = 2 * (i / bm) * bm + i % bm, u = g + bm;
    for (int64_t c = 0; c < n; ++c) {
      const double bg = bias.empty() ? 0.0 : bias[g], bu = bias.empty() ? 0.0 : bias[u];
      h[size_t(i) * n + c] = act64(act, alpha * acc[size_t(g) * n + c] + bg) * (alpha * acc[size_t(u) * n + c] + bu);
    }
  }
  return h;
}

double tolerance(DType in, DType out) {
  if (in == DType::BF16 || out == DType::BF16) return 1e-2;
  return out == DType::F16 ? 2e-3 : 1e-3;
}

sparsek::Result run_gated(Backend backend, const sparsek::BsrView& a, const sparsek::DenseView& b,
                          const sparsek::DenseMutView& c, sparsek::SpmmOptions o, cudaStream_t stream,
                          const char* row = nullptr) {
  o.gated = true;
  o.backend = backend;
#ifdef CHECK_GATED_ROWS
  if (backend == Backend::Hopper) return launch_gated_row(row, a, b, c, o, stream);
#endif
  (void)row;
  return sparsek::spmm(a, b, c, o, stream);
}

struct GatedCase {
  int pairs, bcols, bm, bk;
  double density;
  int64_t n;
  DType in, out;
  Layout bl, cl;
  int64_t pad;
  bool bias;
  Activation act;
  float alpha;
  Backend backend;
  int repeats;  // > 0: that many more launches, each bitwise equal to the first
  // CHECK_GATED_ROWS builds: the row (check_gated_rows.cu), or null for Auto's choice.
  const char* row = nullptr;
};

void check_gated(const GatedCase& k, Rng& rng) {
  char name[256];
  std::snprintf(name, sizeof name, "gated %s%s %s->%s %dx%d pairs=%d kb=%d d=%.2f n=%lld B=%s C=%s pad=%lld %s%s a=%g",
                k.backend == Backend::Hopper ? "hopper" : k.backend == Backend::Auto ? "auto" : "decode",
                k.row != nullptr ? " (k64)" : "",
                dt_name(k.in), dt_name(k.out), k.bm, k.bk, k.pairs, k.bcols, k.density, (long long)k.n,
                k.bl == Layout::RowMajor ? "row" : "col", k.cl == Layout::RowMajor ? "row" : "col", (long long)k.pad,
                act_name(k.act), k.bias ? " bias" : "", k.alpha);
  // Pairs 0, 1, 2: an empty gate row, an empty up row, both (block-rows 0, 3, 4 and 5).
  std::vector<int> empty;
  if (k.pairs >= 4) empty = {0, 3, 4, 5};
  Bsr gu(2 * k.pairs, k.bcols, k.bm, k.bk, k.density, k.in, rng, empty);
  const int64_t inter = gu.m / 2, n = k.n;
  Dense x(gu.k, n, k.bl, k.in, k.pad);
  std::vector<double> xv(size_t(gu.k) * n);
  for (int64_t i = 0; i < gu.k; ++i)
    for (int64_t c = 0; c < n; ++c) xv[size_t(i) * n + c] = put(x.host.data(), x.at(i, c), k.in, rng.sym());
  x.upload();
  std::vector<double> bias;
  void* d_bias = nullptr;
  if (k.bias) {
    std::vector<char> hb(size_t(gu.m) * 2);
    bias.resize(size_t(gu.m));
    for (int64_t i = 0; i < gu.m; ++i) bias[i] = put(hb.data(), i, k.in, rng.sym());
    CUDA_OK(cudaMalloc(&d_bias, hb.size()));
    CUDA_OK(cudaMemcpy(d_bias, hb.data(), hb.size(), cudaMemcpyHostToDevice));
  }
  Dense h(inter, n, k.cl, k.out, k.pad);
  poison(h);
  std::vector<double> acc;
  gu.multiply(n, [&](int64_t i, int64_t c) { return xv[size_t(i) * n + c]; }, acc);
  const std::vector<double> want = gated_reference(gu, acc, n, bias, k.act, k.alpha);

  sparsek::SpmmOptions o;
  o.alpha = k.alpha;
  o.bias = d_bias;
  o.activation = k.act;
  sparsek::Result r = run_gated(k.backend, gu.view(), x.view(), h.mut_view(), o, nullptr, k.row);
  if (!r.ok()) {
    report(false, std::string(name) + ": " + r.message);
    cudaFree(d_bias);
    return;
  }
  CUDA_OK(cudaDeviceSynchronize());
  h.download();
  double num = 0, den = 0;
  int64_t bad = 0, outside = 0;
  for (int64_t i = 0; i < inter; ++i)
    for (int64_t c = 0; c < n; ++c) {
      const double o_ = h.value(i, c), w = want[size_t(i) * n + c];
      if (!std::isfinite(o_)) {
        ++bad;
        continue;
      }
      num += (o_ - w) * (o_ - w), den += w * w;
    }
  for (size_t e = 0; e < h.elems(); ++e)
    if (!h.inside(e) && get(h.host.data(), e, k.out) != 7.0) ++outside;
  const double err = den == 0 ? std::sqrt(num) : std::sqrt(num / den);
  bool same = true;
  if (k.repeats > 0) {
    const std::vector<char> first = h.host;
    for (int rep = 0; rep < k.repeats && same; ++rep) {
      poison(h);
      r = run_gated(k.backend, gu.view(), x.view(), h.mut_view(), o, nullptr, k.row);
      CUDA_OK(cudaDeviceSynchronize());
      h.download();
      same = r.ok() && std::memcmp(first.data(), h.host.data(), first.size()) == 0;
    }
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, ": rel err %.2e, %lld unwritten, %lld outside%s", err, (long long)bad,
                (long long)outside, k.repeats > 0 ? (same ? ", repeats bitwise" : ", REPEATS DIFFER") : "");
  report(bad == 0 && outside == 0 && err < tolerance(k.in, k.out) && same, std::string(name) + tail);
  cudaFree(d_bias);
}

// Six small Hopper cases: each natural tile and the transposed one, both dtypes, both C
// layouts, bias, empty rows.
void quick_suite(Rng& rng) {
  const GatedCase cases[] = {
      {6, 4, 128, 128, 0.5, 64, DType::F16, DType::F32, Layout::ColMajor, Layout::RowMajor, 0, true, Activation::Silu,
       0.5f, Backend::Hopper, 0},
      {6, 8, 64, 64, 0.5, 100, DType::F16, DType::F16, Layout::ColMajor, Layout::ColMajor, 8, true,
       Activation::GeluTanh, -1.25f, Backend::Hopper, 0},
      {4, 3, 128, 128, 0.5, 7, DType::F16, DType::F16, Layout::ColMajor, Layout::ColMajor, 0, true, Activation::Silu,
       1.0f, Backend::Hopper, 0},
      {4, 4, 64, 64, 0.5, 64, DType::BF16, DType::F32, Layout::RowMajor, Layout::RowMajor, 8, true,
       Activation::GeluTanh, 0.5f, Backend::Hopper, 0},
      {4, 5, 96, 64, 0.5, 129, DType::F16, DType::F32, Layout::ColMajor, Layout::RowMajor, 0, false,
       Activation::Relu, -1.25f, Backend::Hopper, 0},
      {4, 3, 128, 128, 0.5, 200, DType::BF16, DType::BF16, Layout::RowMajor, Layout::ColMajor, 8, true,
       Activation::Silu, 1.0f, Backend::Hopper, 0},
  };
  for (const GatedCase& k : cases) check_gated(k, rng);
}

void gated_suite(Rng& rng) {
  const Activation acts[] = {Activation::Silu, Activation::GeluTanh, Activation::None, Activation::Relu};
  const float alphas[] = {1.0f, 0.5f, -1.25f};
  const int blocks[][2] = {{128, 128}, {64, 64}, {96, 64}, {32, 64}, {128, 64}};
  const int64_t ns[] = {1, 7, 64, 129, 200, 600};  // 129, 200, 600: a last dense tile pulled back
  const DType io[][2] = {{DType::F16, DType::F16}, {DType::BF16, DType::BF16}, {DType::F16, DType::F32},
                         {DType::BF16, DType::F32}};
  int v = 0;
  for (const auto& blk : blocks)
    for (int64_t n : ns) {
      for (int lay = 0; lay < 2; ++lay, ++v) {
        GatedCase k;
        k.bm = blk[0], k.bk = blk[1];
        k.pairs = std::max(4, 640 / k.bm) - v % 2;
        k.bcols = std::max(3, 512 / k.bk) + v % 3;
        k.density = v % 5 == 0 ? 1.0 : 0.5;
        k.n = n;
        k.in = io[v % 4][0], k.out = io[v % 4][1];
        // x row-major needs n a multiple of 8 (16-byte rows for TMA): odd n take column-major x.
        k.bl = (lay == 0 || n % 8 != 0) ? Layout::ColMajor : Layout::RowMajor;
        k.cl = (v / 2) % 2 == 0 ? Layout::ColMajor : Layout::RowMajor;
        k.pad = v % 3 == 2 ? 8 : 0;
        k.bias = v % 3 != 0;
        k.act = acts[v % 4];
        k.alpha = alphas[v % 3];
        k.backend = Backend::Hopper;
        k.repeats = (v % 7 == 0) ? 100 : 0;
        // Half the cases on the rows of 64-wide k-tiles (else 128-wide where bk takes them).
#ifdef CHECK_GATED_ROWS
        k.row = v % 2 == 0 ? "k64" : nullptr;
#endif
        check_gated(k, rng);
      }
    }
  // More pairs than an H100 has SMs (a second round of tiles), 128x128 and 64x64 blocks.
  for (int64_t n : {int64_t(33), int64_t(64)}) {
    GatedCase k{140, 12, 128, 128, 0.5, n, DType::F16, DType::F16, Layout::ColMajor, Layout::ColMajor, 0, n == 33,
                Activation::Silu, 1.0f, Backend::Hopper, 100};
    check_gated(k, rng);
  }
  {
    GatedCase k{140, 16, 64, 64, 0.5, 100, DType::F16, DType::F32, Layout::ColMajor, Layout::RowMajor, 8, true,
                Activation::GeluTanh, -1.25f, Backend::Hopper, 100};
    check_gated(k, rng);
  }
  // Auto: Decode below the threshold, Hopper above it; both layouts.
  for (int64_t n : {int64_t(1), int64_t(16), int64_t(128), int64_t(512)}) {
    GatedCase k{8, 6, 128, 128, 0.5, n, DType::F16, DType::F16, Layout::ColMajor, Layout::ColMajor, 0, true,
                Activation::Silu, 1.0f, Backend::Auto, n == 128 ? 100 : 0};
    check_gated(k, rng);
    k.in = DType::BF16, k.out = DType::F32, k.cl = Layout::RowMajor, k.bm = 64, k.bk = 64, k.pairs = 12;
    check_gated(k, rng);
  }
}

// sparse_mlp through Auto against the f64 reference (h rounded to the input type).
void mlp_suite(Rng& rng) {
  const int64_t hidden = 512, inter = 1536;
  for (DType t : {DType::F16, DType::BF16}) {
    Bsr gu(2 * int(inter / 128), int(hidden / 128), 128, 128, 0.5, t, rng);
    Bsr down(int(hidden / 64), int(inter / 64), 64, 64, 0.5, t, rng);
    for (int64_t n : {int64_t(1), int64_t(3), int64_t(16), int64_t(128), int64_t(512)}) {
      Dense x(hidden, n, Layout::ColMajor, t, 0);
      std::vector<double> xv(size_t(hidden) * n);
      for (int64_t i = 0; i < hidden; ++i)
        for (int64_t c = 0; c < n; ++c) xv[size_t(i) * n + c] = put(x.host.data(), x.at(i, c), t, rng.sym());
      x.upload();
      Dense h(inter, n, Layout::ColMajor, t, 0), y(hidden, n, Layout::ColMajor, DType::F32, 0);
      poison(h);
      poison(y);
      sparsek::MlpView mv;
      mv.gate_up = gu.view();
      mv.down = down.view();
      mv.activation = Activation::Silu;
      sparsek::Result r = sparsek::sparse_mlp(mv, x.view(), h.mut_view(), y.mut_view(), nullptr);
      char name[128];
      std::snprintf(name, sizeof name, "sparse_mlp %s hidden=%lld inter=%lld n=%lld", dt_name(t), (long long)hidden,
                    (long long)inter, (long long)n);
      if (!r.ok()) {
        report(false, std::string(name) + ": " + r.message);
        continue;
      }
      CUDA_OK(cudaDeviceSynchronize());
      y.download();
      std::vector<double> acc, hv, yv;
      gu.multiply(n, [&](int64_t i, int64_t c) { return xv[size_t(i) * n + c]; }, acc);
      hv = gated_reference(gu, acc, n, {}, Activation::Silu, 1.0f);
      std::vector<char> tmp(4);
      for (double& e : hv) e = put(tmp.data(), 0, t, float(e));  // h as the device stores it
      down.multiply(n, [&](int64_t i, int64_t c) { return hv[size_t(i) * n + c]; }, yv);
      double num = 0, den = 0;
      int64_t bad = 0;
      for (int64_t i = 0; i < hidden; ++i)
        for (int64_t c = 0; c < n; ++c) {
          const double o_ = y.value(i, c), w = yv[size_t(i) * n + c];
          if (!std::isfinite(o_)) {
            ++bad;
            continue;
          }
          num += (o_ - w) * (o_ - w), den += w * w;
        }
      const double err = std::sqrt(num / den), tol = t == DType::BF16 ? 2e-2 : 5e-3;
      char tail[96];
      std::snprintf(tail, sizeof tail, ": rel err %.2e, %lld unwritten", err, (long long)bad);
      report(bad == 0 && err < tol, std::string(name) + tail);
    }
  }
}

// The dense MLP's GLU: h[j][i] = silu(gu[j][i]) * gu[j][inter + i] (column j of the stacked
// gate|up product, 2*inter rows).
__global__ void silu_mul(const __half* gu, __half* h, int64_t inter, int64_t count) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / inter, i = e - j * inter;
    const float g = __half2float(gu[j * 2 * inter + i]), u = __half2float(gu[j * 2 * inter + inter + i]);
    h[e] = __float2half_rn(g / (1.0f + __expf(-g)) * u);
  }
}

__global__ void fill_random(__half* p, int64_t count, uint32_t seed) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x) {
    uint32_t v = uint32_t(e) * 2654435761u ^ seed;
    v ^= v >> 15, v *= 2246822519u, v ^= v >> 13;
    p[e] = __float2half_rn((float(v & 0xffff) / 32768.0f - 1.0f) * 0.05f);
  }
}

// cuBLAS's GEMM, opened at run time (CHECK_GATED_CUBLAS): C (m x n) = op(A) * B, f16 in and
// out, f32 compute, column-major.
struct Cublas {
  using Create = int (*)(void**);
  using Gemm = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                       const void*, void*, int, int, int, int);
  void* handle = nullptr;
  Gemm gemm = nullptr;
  bool open() {
    const char* path = std::getenv("CHECK_GATED_CUBLAS");
    if (path == nullptr) return false;
    void* lib = dlopen(path, RTLD_NOW);
    if (lib == nullptr) {
      std::printf("  (no cuBLAS: %s)\n", dlerror());
      return false;
    }
    auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
    gemm = reinterpret_cast<Gemm>(dlsym(lib, "cublasGemmEx"));
    return create != nullptr && gemm != nullptr && create(&handle) == 0;
  }
  // op(A) = A^T with A stored k x m (a row-major m x k weight), B k x n, C m x n.
  int weight_times(int m, int n, int k, const void* a, const void* b, void* c) const {
    constexpr int kOpN = 0, kOpT = 1, kR16F = 2, kCompute32F = 68, kDefaultAlgo = -1;
    const float one = 1.0f, zero = 0.0f;
    return gemm(handle, kOpT, kOpN, m, n, k, &one, a, kR16F, k, b, kR16F, k, &zero, c, kR16F, m, kCompute32F,
                kDefaultAlgo);
  }
};

template <class Body>
double median_us(int iters, const Body& body) {
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int it = 0; it < 3; ++it) body();
  std::vector<float> times;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_OK(cudaEventRecord(e0));
    for (int it = 0; it < iters; ++it) body();
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms * 1000.0f / float(iters));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(times.begin(), times.end());
  return double(times[2]);
}

// The batch sizes --time measures: CHECK_GATED_NS (a comma list), else the default sweep.
std::vector<int64_t> time_ns() {
  std::vector<int64_t> ns;
  if (const char* v = std::getenv("CHECK_GATED_NS")) {
    for (const char* p = v; *p != '\0';) {
      char* end = nullptr;
      const long long n = std::strtoll(p, &end, 10);
      if (end == p) break;
      if (n >= 1 && n <= 4096) ns.push_back(n);
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (ns.empty()) ns = {16, 20, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};
  return ns;
}

// Whether --time measures the MLP `model`: CHECK_GATED_SHAPES (a comma list of names) names
// it, or is unset and the model is one of the default three.
bool time_shape(const char* model, bool by_default) {
  const char* v = std::getenv("CHECK_GATED_SHAPES");
  if (v == nullptr) return by_default;
  const std::string list = std::string(",") + v + ",";
  return list.find(std::string(",") + model + ",") != std::string::npos;
}

// The gated product and the down product of an MLP layer, f16, d = 0.5, square blocks of
// side `block`.
void time_mlp(const char* model, int64_t hidden, int64_t inter, int block, Rng& rng,
              const std::vector<const char*>& rows, const Cublas* blas) {
  Bsr gu(int(2 * inter / block), int(hidden / block), block, block, 0.5, DType::F16, rng);
  Bsr down(int(hidden / block), int(inter / block), block, block, 0.5, DType::F16, rng);
  __half *w_gu = nullptr, *w_down = nullptr, *d_gu = nullptr;
  if (blas != nullptr) {
    CUDA_OK(cudaMalloc(&w_gu, size_t(2 * inter * hidden) * 2));
    CUDA_OK(cudaMalloc(&w_down, size_t(hidden * inter) * 2));
    CUDA_OK(cudaMalloc(&d_gu, size_t(2 * inter * 512) * 2));
    fill_random<<<1024, 256>>>(w_gu, 2 * inter * hidden, 1);
    fill_random<<<1024, 256>>>(w_down, hidden * inter, 2);
    CUDA_OK(cudaGetLastError());
  }
  for (int64_t n : time_ns()) {
    Dense x(hidden, n, Layout::ColMajor, DType::F16, 0);
    for (size_t e = 0; e < x.elems(); ++e) put(x.host.data(), e, DType::F16, rng.sym());
    x.upload();
    Dense h(inter, n, Layout::ColMajor, DType::F16, 0), y(hidden, n, Layout::ColMajor, DType::F16, 0);
    sparsek::SpmmOptions o;
    o.activation = Activation::Silu;
    auto gated = [&](Backend be, const char* row) {
      const sparsek::Result r = run_gated(be, gu.view(), x.view(), h.mut_view(), o, nullptr, row);
      if (!r.ok()) std::printf("  (%s)\n", r.message);
      return r.ok();
    };
    std::printf("time %s %dx%d n=%lld:", model, block, block, (long long)n);
    if (gated(Backend::Decode, nullptr))
      std::printf(" gated_decode %.1f", median_us(20, [&] { (void)gated(Backend::Decode, nullptr); }));
    for (const char* row : rows)
      if (gated(Backend::Hopper, row))
        std::printf(" gated_hopper[%s] %.1f", row != nullptr ? row : "auto", median_us(20, [&] { (void)gated(Backend::Hopper, row); }));
    sparsek::SpmmOptions d;
    auto down_run = [&] { return sparsek::spmm(down.view(), h.view(), y.mut_view(), d, nullptr); };
    if (down_run().ok()) std::printf(" down_auto %.1f", median_us(20, [&] { (void)down_run(); }));
    sparsek::SpmmOptions dd;
    dd.backend = Backend::Decode;
    auto down_decode = [&] { return sparsek::spmm(down.view(), h.view(), y.mut_view(), dd, nullptr); };
    if (down_decode().ok()) std::printf(" down_decode %.1f", median_us(20, [&] { (void)down_decode(); }));
    sparsek::SpmmOptions dh;
    dh.backend = Backend::Hopper;
    auto down_hopper = [&] { return sparsek::spmm(down.view(), h.view(), y.mut_view(), dh, nullptr); };
    if (down_hopper().ok()) std::printf(" down_hopper %.1f", median_us(20, [&] { (void)down_hopper(); }));
    sparsek::MlpView mv;
    mv.gate_up = gu.view();
    mv.down = down.view();
    mv.activation = Activation::Silu;
    auto mlp = [&] { return sparsek::sparse_mlp(mv, x.view(), h.mut_view(), y.mut_view(), nullptr); };
    if (mlp().ok()) std::printf(" sparse_mlp %.1f", median_us(20, [&] { (void)mlp(); }));
    if (blas != nullptr) {
      auto dense = [&] {
        (void)blas->weight_times(int(2 * inter), int(n), int(hidden), w_gu, x.dev, d_gu);
        silu_mul<<<1024, 256>>>(d_gu, static_cast<__half*>(h.dev), inter, inter * n);
        (void)blas->weight_times(int(hidden), int(n), int(inter), w_down, h.dev, y.dev);
      };
      std::printf(" dense_mlp %.1f", median_us(20, dense));
      std::printf(" dense_gateup %.1f", median_us(20, [&] {
                    (void)blas->weight_times(int(2 * inter), int(n), int(hidden), w_gu, x.dev, d_gu);
                  }));
    }
    std::printf("\n");
    CUDA_OK(cudaDeviceSynchronize());
  }
  cudaFree(w_gu);
  cudaFree(w_down);
  cudaFree(d_gu);
}

}  // namespace

int main(int argc, char** argv) {
  bool time = false, check = true, quick = false, profile = false, mlp_only = false;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--time") time = true;
    else if (a == "--time-only") time = true, check = false;
    else if (a == "--quick") quick = true, check = false;
    else if (a == "--mlp") mlp_only = true, check = false;
    else if (a == "--profile") profile = true, check = false;
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
  }
  int dev = 0;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (cc %d.%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9 || prop.minor != 0) {
    std::printf("SKIP: the Hopper family needs compute capability 9.0\n");
    return 0;
  }
  Rng rng(seed);
  if (quick) quick_suite(rng);
  if (mlp_only) mlp_suite(rng);
  if (profile) {
    Bsr gu(2 * 18944 / 128, 3584 / 128, 128, 128, 0.5, DType::F16, rng);
    for (int64_t n : {int64_t(64), int64_t(512)}) {
      Dense x(3584, n, Layout::ColMajor, DType::F16, 0), h(18944, n, Layout::ColMajor, DType::F16, 0);
      x.upload();
      sparsek::SpmmOptions o;
      o.activation = Activation::Silu;
      const sparsek::Result r = run_gated(Backend::Hopper, gu.view(), x.view(), h.mut_view(), o, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      report(r.ok(), std::string("profile launch n=") + std::to_string(n) + " " + r.message);
    }
  }
  if (check) {
    gated_suite(rng);
    mlp_suite(rng);
  }
  if (time) {
    std::vector<const char*> rows = {nullptr}, rows64 = {nullptr};
#ifdef CHECK_GATED_ROWS
    rows = {"sm90_f16_gated_bm_le128_k64_bcol", "sm90_f16_gated_bm_le128_k128_bcol",
            "sm90_f16_gated_bm_le128_k64_bcol_128x64", "sm90_f16_gated_bm_le128_k128_bcol_128x64"};
    rows64 = {"sm90_f16_gated_bm_le64_k64_bcol", "sm90_f16_gated_bm_le128_k64_bcol_128x64",
              "sm90_f16_gated_bm_le128_k64_bcol"};
#endif
    Cublas blas;
    const Cublas* dense = blas.open() ? &blas : nullptr;
    const bool only64 = std::getenv("CHECK_GATED_ONLY64") != nullptr;
    if (!only64) {
      if (time_shape("qwen2.5-7b", true)) time_mlp("qwen2.5-7b", 3584, 18944, 128, rng, rows, dense);
      if (time_shape("llama-3-8b", true)) time_mlp("llama-3-8b", 4096, 14336, 128, rng, rows, dense);
      if (time_shape("phi-3-mini", true)) time_mlp("phi-3-mini", 3072, 8192, 128, rng, rows, dense);
      if (time_shape("qwen2.5-14b", false)) time_mlp("qwen2.5-14b", 5120, 13824, 128, rng, rows, dense);
      if (time_shape("llama-3-70b", false)) time_mlp("llama-3-70b", 8192, 28672, 128, rng, rows, dense);
    }
    if (time_shape("qwen2.5-7b-64", true)) time_mlp("qwen2.5-7b", 3584, 18944, 64, rng, rows64, dense);
    if (time_shape("llama-3-8b-64", true)) time_mlp("llama-3-8b", 4096, 14336, 64, rng, rows64, dense);
  }
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
