// Standalone correctness and timing harness for the Decode family (not a library source).
//
// Runs random problems through the public sparsek::spmm with backend = Backend::Decode and
// compares with a double-precision host reference; checks that 100 repeats are bitwise
// identical and that nothing outside C's view (its ld padding) is written; then times the
// issue's shapes. Prints PASS / FAIL / SKIP lines and "N passed, N failed"; exits 1 on a
// failure.
//
// Build from the repository root with the library (libsparsek_kernels.a or its objects):
//   NVCC=third_party/py/nvidia/cu13/bin/nvcc
//   $NVCC $(grep -v '^#' cpp/nvcc_flags.txt | tr '\n' ' ') \
//     -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Iinclude \
//     tests/cpp/check_decode.cu <libsparsek_kernels.a> -o check_decode
// Usage: ./check_decode [--no-time] [--time-only] [--seed N]
// SPARSEK_VARIANT=decode_n128 (say) forces one row; cases it does not fit print SKIP.
#include <cuda_runtime.h>
#include <sparsek/sparsek.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using sparsek::Activation;
using sparsek::Backend;
using sparsek::DType;
using sparsek::Layout;

namespace {

#define CUDA_OK(expr)                                                                                  \
  do {                                                                                                 \
    cudaError_t e_ = (expr);                                                                           \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #expr, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                    \
    }                                                                                                  \
  } while (0)

// ---- Host conversions (round to nearest even), independent of the CUDA headers ----
uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }
uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return 0x7e00;  // NaN
  if (au >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf (>= 65520)
  if (au < 0x38800000u) {  // subnormal or zero in f16
    const float a = bits_f32(au);
    const int q = static_cast<int>(std::nearbyint(a * 16777216.0f));  // units of 2^-24, ties to even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t r = au + 0xfffu + ((au >> 13) & 1u);  // round mantissa to 10 bits
  r -= 0x38000000u;                               // rebias 127 -> 15
  return static_cast<uint16_t>(sign | (r >> 13));
}
float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

int bytes_of(DType t) { return t == DType::F32 ? 4 : 2; }
const char* name_of(DType t) { return t == DType::F16 ? "f16" : t == DType::BF16 ? "bf16" : "f32"; }
const char* name_of(Layout l) { return l == Layout::RowMajor ? "row" : "col"; }
const char* name_of(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::Relu: return "relu";
    case Activation::GeluTanh: return "gelu";
    case Activation::Silu: return "silu";
  }
  return "?";
}

// Rounds v to dtype t; stores the element's bits into dst (2 or 4 bytes); returns the value.
double put(void* dst, DType t, double v) {
  if (t == DType::F32) {
    const float f = static_cast<float>(v);
    std::memcpy(dst, &f, 4);
    return f;
  }
  const uint16_t h = t == DType::F16 ? f32_to_f16(static_cast<float>(v)) : f32_to_bf16(static_cast<float>(v));
  std::memcpy(dst, &h, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
double get(const void* src, DType t) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, src, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
void put_nan(void* dst, DType t) {
  if (t == DType::F32) {
    const uint32_t q = 0x7fc00000u;
    std::memcpy(dst, &q, 4);
  } else {
    const uint16_t q = t == DType::F16 ? 0x7e00 : 0x7fc0;
    std::memcpy(dst, &q, 2);
  }
}

double act_ref(double x, Activation a) {
  switch (a) {
    case Activation::Relu: return x > 0 ? x : 0.0;
    case Activation::GeluTanh: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::Silu: return x / (1.0 + std::exp(-x));
    default: return x;
  }
}

struct Case {
  int64_t m = 0, k = 0;
  int bm = 16, bk = 16;
  double density = 0.5;
  int n = 1;
  Layout bl = Layout::ColMajor, cl = Layout::ColMajor;
  int64_t ldb_pad = 0, ldc_pad = 0;  // ld = contiguous extent + pad
  bool b_misalign = false, c_misalign = false;  // base pointer one element past 16-byte alignment
  DType in = DType::F16, out = DType::F16;
  bool bias = false;
  Activation act = Activation::None;
  float alpha = 1.0f, beta = 0.0f;
  int empty_rows_every = 0;  // > 0: every such block-row has no blocks
  bool exact_density = false;  // exactly round(density * block_cols) blocks per block-row
};

std::string describe(const Case& c) {
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "m=%lld k=%lld blk=%dx%d d=%.2f n=%d B=%s ldb+%lld%s C=%s ldc+%lld%s in=%s out=%s bias=%d act=%s "
                "alpha=%g beta=%g",
                (long long)c.m, (long long)c.k, c.bm, c.bk, c.density, c.n, name_of(c.bl), (long long)c.ldb_pad,
                c.b_misalign ? "(misaligned)" : "", name_of(c.cl), (long long)c.ldc_pad,
                c.c_misalign ? "(misaligned)" : "", name_of(c.in), name_of(c.out), c.bias ? 1 : 0, name_of(c.act),
                c.alpha, c.beta);
  return buf;
}

// A problem on the host and the device.
struct Problem {
  Case cs;
  int64_t block_rows = 0, block_cols = 0, nnzb = 0;
  std::vector<int32_t> row_ptr, col_idx;
  std::vector<double> a_val;  // nnzb*bm*bk, rounded to the input type
  std::vector<unsigned char> a_bits, b_bits, c_bits, bias_bits;
  std::vector<double> bias_val;
  int64_t ldb = 0, ldc = 0, b_elems = 0, c_elems = 0;
  // device
  int32_t *d_row_ptr = nullptr, *d_col_idx = nullptr;
  void *d_a = nullptr, *d_b_alloc = nullptr, *d_c_alloc = nullptr, *d_bias = nullptr;
  void *d_b = nullptr, *d_c = nullptr;

  ~Problem() {
    cudaFree(d_row_ptr);
    cudaFree(d_col_idx);
    cudaFree(d_a);
    cudaFree(d_b_alloc);
    cudaFree(d_c_alloc);
    cudaFree(d_bias);
  }

  double b_at(int64_t i, int64_t j) const {  // B[i][j]
    const int64_t idx = cs.bl == Layout::RowMajor ? i * ldb + j : j * ldb + i;
    return get(&b_bits[idx * 2], cs.in);
  }
  int64_t c_index(int64_t i, int64_t j) const { return cs.cl == Layout::RowMajor ? i * ldc + j : j * ldc + i; }

  // settled: BsrView::settled (A read before the previous kernel completes).
  sparsek::BsrView a_view(bool settled = false) const {
    sparsek::BsrView a;
    a.m = cs.m, a.k = cs.k, a.bm = cs.bm, a.bk = cs.bk, a.nnzb = nnzb;
    a.row_ptr = d_row_ptr, a.col_idx = d_col_idx, a.values = d_a, a.dtype = cs.in;
    a.settled = settled;
    return a;
  }
  sparsek::DenseView b_view() const {
    sparsek::DenseView b;
    b.data = d_b, b.rows = cs.k, b.cols = cs.n, b.ld = ldb, b.layout = cs.bl, b.dtype = cs.in;
    return b;
  }
  sparsek::DenseMutView c_view() const {
    sparsek::DenseMutView c;
    c.data = d_c, c.rows = cs.m, c.cols = cs.n, c.ld = ldc, c.layout = cs.cl, c.dtype = cs.out;
    return c;
  }
  sparsek::SpmmOptions options() const {
    sparsek::SpmmOptions o;
    o.alpha = cs.alpha, o.beta = cs.beta, o.backend = Backend::Decode;
    o.bias = cs.bias ? d_bias : nullptr;
    o.activation = cs.act;
    return o;
  }
};

void build(Problem& p, const Case& cs, std::mt19937_64& rng, bool fill_values = true) {
  p.cs = cs;
  p.block_rows = cs.m / cs.bm;
  p.block_cols = cs.k / cs.bk;
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  p.row_ptr.assign(p.block_rows + 1, 0);
  p.col_idx.clear();
  for (int64_t r = 0; r < p.block_rows; ++r) {
    if (!(cs.empty_rows_every > 0 && r % cs.empty_rows_every == cs.empty_rows_every - 1)) {
      if (cs.exact_density) {
        std::vector<int32_t> cols(p.block_cols);
        for (int64_t j = 0; j < p.block_cols; ++j) cols[j] = static_cast<int32_t>(j);
        std::shuffle(cols.begin(), cols.end(), rng);
        const int64_t take = static_cast<int64_t>(std::llround(cs.density * p.block_cols));
        cols.resize(take);
        std::sort(cols.begin(), cols.end());
        p.col_idx.insert(p.col_idx.end(), cols.begin(), cols.end());
      } else {
        for (int64_t j = 0; j < p.block_cols; ++j)
          if (coin(rng) < cs.density) p.col_idx.push_back(static_cast<int32_t>(j));
      }
    }
    p.row_ptr[r + 1] = static_cast<int32_t>(p.col_idx.size());
  }
  p.nnzb = static_cast<int64_t>(p.col_idx.size());
  const int64_t a_elems = p.nnzb * cs.bm * cs.bk;
  const int ib = bytes_of(cs.in), ob = bytes_of(cs.out);
  p.a_bits.resize(a_elems * ib);
  if (fill_values) {
    p.a_val.resize(a_elems);
    for (int64_t i = 0; i < a_elems; ++i) p.a_val[i] = put(&p.a_bits[i * ib], cs.in, uni(rng));
  } else {
    for (int64_t i = 0; i < a_elems; ++i) put(&p.a_bits[i * ib], cs.in, 0.001 * static_cast<double>(i % 1000));
  }
  // B, with NaN in its ld padding (a read past the view shows up in C).
  const bool brow = cs.bl == Layout::RowMajor;
  p.ldb = (brow ? cs.n : cs.k) + cs.ldb_pad;
  if (p.ldb < 1) p.ldb = 1;
  const int64_t b_outer = brow ? cs.k : cs.n, b_ext = brow ? cs.n : cs.k;
  p.b_elems = b_outer > 0 ? (b_outer - 1) * p.ldb + b_ext : 0;
  p.b_bits.resize(p.b_elems * ib);
  for (int64_t o = 0; o < b_outer; ++o)
    for (int64_t x = 0; x < p.ldb && o * p.ldb + x < p.b_elems; ++x) {
      unsigned char* dst = &p.b_bits[(o * p.ldb + x) * ib];
      if (x < b_ext) put(dst, cs.in, uni(rng));
      else put_nan(dst, cs.in);
    }
  // C: random where beta != 0, NaN where beta == 0 (C must not be read) and in the padding.
  const bool crow = cs.cl == Layout::RowMajor;
  p.ldc = (crow ? cs.n : cs.m) + cs.ldc_pad;
  if (p.ldc < 1) p.ldc = 1;
  const int64_t c_outer = crow ? cs.m : cs.n, c_ext = crow ? cs.n : cs.m;
  p.c_elems = c_outer > 0 ? (c_outer - 1) * p.ldc + c_ext : 0;
  p.c_bits.resize(p.c_elems * ob);
  for (int64_t o = 0; o < c_outer; ++o)
    for (int64_t x = 0; x < p.ldc && o * p.ldc + x < p.c_elems; ++x) {
      unsigned char* dst = &p.c_bits[(o * p.ldc + x) * ob];
      if (x < c_ext && cs.beta != 0.0f) put(dst, cs.out, uni(rng));
      else put_nan(dst, cs.out);
    }
  p.bias_val.assign(cs.m, 0.0);
  p.bias_bits.resize(cs.m * ib);
  for (int64_t i = 0; i < cs.m; ++i) p.bias_val[i] = put(&p.bias_bits[i * ib], cs.in, uni(rng));

  // Device copies (B and C at 16-byte aligned bases, or one element past one).
  CUDA_OK(cudaMalloc(&p.d_row_ptr, p.row_ptr.size() * 4));
  CUDA_OK(cudaMemcpy(p.d_row_ptr, p.row_ptr.data(), p.row_ptr.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&p.d_col_idx, p.col_idx.size() * 4 + 4));
  if (!p.col_idx.empty())
    CUDA_OK(cudaMemcpy(p.d_col_idx, p.col_idx.data(), p.col_idx.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&p.d_a, p.a_bits.size() + 16));
  if (!p.a_bits.empty()) CUDA_OK(cudaMemcpy(p.d_a, p.a_bits.data(), p.a_bits.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&p.d_b_alloc, p.b_bits.size() + 16));
  p.d_b = static_cast<unsigned char*>(p.d_b_alloc) + (cs.b_misalign ? ib : 0);
  if (!p.b_bits.empty()) CUDA_OK(cudaMemcpy(p.d_b, p.b_bits.data(), p.b_bits.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&p.d_c_alloc, p.c_bits.size() + 16));
  p.d_c = static_cast<unsigned char*>(p.d_c_alloc) + (cs.c_misalign ? ob : 0);
  CUDA_OK(cudaMalloc(&p.d_bias, p.bias_bits.size() + 16));
  if (!p.bias_bits.empty())
    CUDA_OK(cudaMemcpy(p.d_bias, p.bias_bits.data(), p.bias_bits.size(), cudaMemcpyHostToDevice));
}

// Flips the sign of n 16-bit floats (f16 or bf16).
__global__ void negate_16(unsigned short* v, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    v[i] ^= 0x8000u;
}

void reset_c(const Problem& p) {
  if (!p.c_bits.empty()) CUDA_OK(cudaMemcpy(p.d_c, p.c_bits.data(), p.c_bits.size(), cudaMemcpyHostToDevice));
}

int g_pass = 0, g_fail = 0, g_skip = 0;
bool g_forced = false;  // SPARSEK_VARIANT set: NotSupported is a skip

// One correctness case.
void run_case(const Case& cs, std::mt19937_64& rng, int repeats) {
  Problem p;
  build(p, cs, rng);
  const std::string what = describe(cs);
  reset_c(p);
  sparsek::Result r = sparsek::spmm(p.a_view(), p.b_view(), p.c_view(), p.options(), nullptr);
  if (!r.ok()) {
    if (g_forced && r.status == sparsek::Status::NotSupported) {
      ++g_skip;
      std::printf("SKIP %s: %s\n", what.c_str(), r.message);
    } else {
      ++g_fail;
      std::printf("FAIL %s: spmm refused: %s\n", what.c_str(), r.message);
    }
    return;
  }
  CUDA_OK(cudaDeviceSynchronize());
  const int ob = bytes_of(cs.out);
  std::vector<unsigned char> got(p.c_bits.size());
  if (!got.empty()) CUDA_OK(cudaMemcpy(got.data(), p.d_c, got.size(), cudaMemcpyDeviceToHost));

  // Reference and comparison.
  const double tol = cs.out == DType::BF16 ? 1e-2 : 2e-3;
  double worst = 0.0;
  int64_t bad = 0, worst_i = -1, worst_j = -1;
  double worst_got = 0, worst_ref = 0;
  std::vector<double> accs(cs.n);
  for (int64_t br = 0; br < p.block_rows; ++br)
    for (int rr = 0; rr < cs.bm; ++rr) {
      const int64_t i = br * cs.bm + rr;
      std::fill(accs.begin(), accs.end(), 0.0);
      for (int32_t t = p.row_ptr[br]; t < p.row_ptr[br + 1]; ++t) {
        const double* arow = &p.a_val[(static_cast<int64_t>(t) * cs.bm + rr) * cs.bk];
        const int64_t k0 = static_cast<int64_t>(p.col_idx[t]) * cs.bk;
        for (int kk = 0; kk < cs.bk; ++kk) {
          const double av = arow[kk];
          if (av == 0.0) continue;
          for (int j = 0; j < cs.n; ++j) accs[j] += av * p.b_at(k0 + kk, j);
        }
      }
      for (int j = 0; j < cs.n; ++j) {
        const int64_t ci = p.c_index(i, j);
        double v = cs.alpha * accs[j];
        if (cs.bias) v += p.bias_val[i];
        if (cs.beta != 0.0f) v += cs.beta * get(&p.c_bits[ci * ob], cs.out);
        const double ref = act_ref(v, cs.act);
        const double g = get(&got[ci * ob], cs.out);
        const double err = std::isfinite(g) ? std::fabs(g - ref) / std::max(1.0, std::fabs(ref)) : INFINITY;
        if (!(err <= tol)) ++bad;
        if (!(err <= worst)) worst = err, worst_i = i, worst_j = j, worst_got = g, worst_ref = ref;
      }
    }
  // Nothing outside the view was written: the padding keeps its NaN bits.
  int64_t pad_bad = 0;
  {
    const bool crow = cs.cl == Layout::RowMajor;
    const int64_t c_ext = crow ? cs.n : cs.m;
    for (int64_t e = 0; e < p.c_elems; ++e)
      if (e % p.ldc >= c_ext && std::memcmp(&got[e * ob], &p.c_bits[e * ob], ob) != 0) ++pad_bad;
  }
  if (bad > 0 || pad_bad > 0) {
    ++g_fail;
    std::printf("FAIL %s: %lld elements over tolerance %.0e (worst %.3g at (%lld,%lld): got %.6g, want %.6g), %lld "
                "padding elements written\n",
                what.c_str(), (long long)bad, tol, worst, (long long)worst_i, (long long)worst_j, worst_got, worst_ref,
                (long long)pad_bad);
    return;
  }
  // Bitwise reproducibility, every other repeat with A settled (its reads start before the
  // previous kernel completes: the same bits).
  int mismatches = 0;
  std::vector<unsigned char> again(got.size());
  for (int rep = 0; rep < repeats; ++rep) {
    reset_c(p);
    r = sparsek::spmm(p.a_view(rep % 2 == 1), p.b_view(), p.c_view(), p.options(), nullptr);
    if (!r.ok()) {
      ++mismatches;
      break;
    }
    if (!again.empty()) CUDA_OK(cudaMemcpy(again.data(), p.d_c, again.size(), cudaMemcpyDeviceToHost));
    if (again != got) ++mismatches;
  }
  if (mismatches > 0) {
    ++g_fail;
    std::printf("FAIL %s: %d of %d repeats differ bitwise from the first run\n", what.c_str(), mismatches, repeats);
    return;
  }
  // A written by the kernel right before the call on the call's stream: the call may launch
  // while that kernel runs (programmatic dependent launch), and A, not settled, must be read
  // after it. Negating A negates C exactly where nothing else enters C.
  const int64_t a_elems = static_cast<int64_t>(p.a_bits.size()) / 2;
  if (!cs.bias && cs.act == Activation::None && cs.beta == 0.0f && a_elems > 0) {
    cudaStream_t s = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    reset_c(p);
    negate_16<<<264, 256, 0, s>>>(static_cast<unsigned short*>(p.d_a), a_elems);
    r = sparsek::spmm(p.a_view(false), p.b_view(), p.c_view(), p.options(), s);
    negate_16<<<264, 256, 0, s>>>(static_cast<unsigned short*>(p.d_a), a_elems);  // A as before
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));
    int64_t wrong = r.ok() ? 0 : 1;
    if (r.ok() && !again.empty()) {
      CUDA_OK(cudaMemcpy(again.data(), p.d_c, again.size(), cudaMemcpyDeviceToHost));
      const bool crow = cs.cl == Layout::RowMajor;
      for (int64_t e = 0; e < p.c_elems; ++e)
        if (e % p.ldc < (crow ? cs.n : cs.m) && get(&again[e * ob], cs.out) != -get(&got[e * ob], cs.out)) ++wrong;
    }
    if (wrong > 0) {
      ++g_fail;
      std::printf("FAIL %s: with A negated by the kernel before the call, %lld elements of C are not -C\n",
                  what.c_str(), (long long)wrong);
      return;
    }
  }
  ++g_pass;
  std::printf("PASS %s: worst rel. error %.2e, %d repeats identical\n", what.c_str(), worst, repeats);
}

// ---- Timing ----

// A read-only stream over `bytes` (16-byte loads, a grid-stride loop): what HBM gives a
// kernel that only reads, launch included, for comparison with the Decode kernel.
__global__ void read_probe(const uint4* p, int64_t n16, uint32_t* sink) {
  uint32_t x = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n16;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;  // keeps the loads
}

void probe_bandwidth(double bytes) {
  const int copies = std::max(1, static_cast<int>(std::ceil(120e6 / bytes)));  // as time_case: from HBM
  void* buf = nullptr;
  uint32_t* sink = nullptr;
  CUDA_OK(cudaMalloc(&buf, static_cast<size_t>(bytes) * copies));
  CUDA_OK(cudaMemset(buf, 1, static_cast<size_t>(bytes) * copies));
  CUDA_OK(cudaMalloc(&sink, 4));
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t n16 = static_cast<int64_t>(bytes) / 16;
  for (int i = 0; i < 3; ++i) read_probe<<<sms * 8, 256>>>(static_cast<const uint4*>(buf), n16, sink);
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  CUDA_OK(cudaEventRecord(t0));
  for (int i = 0; i < 20; ++i)
    read_probe<<<sms * 8, 256>>>(static_cast<const uint4*>(buf) + (i % copies) * n16, n16, sink);
  CUDA_OK(cudaEventRecord(t1));
  CUDA_OK(cudaEventSynchronize(t1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
  const double us = 1e3 * ms / 20;
  std::printf("PROBE read-only stream of %.1f MB: %8.2f us  %7.1f GB/s\n", bytes / 1e6, us, bytes / us * 1e-3);
  CUDA_OK(cudaEventDestroy(t0));
  CUDA_OK(cudaEventDestroy(t1));
  CUDA_OK(cudaFree(buf));
  CUDA_OK(cudaFree(sink));
}
void time_case(int64_t m, int64_t k, int n, std::mt19937_64& rng) {
  Case cs;
  cs.m = m, cs.k = k, cs.bm = 128, cs.bk = 128, cs.density = 0.5, cs.exact_density = true, cs.n = n;
  cs.bl = Layout::ColMajor, cs.cl = Layout::ColMajor;  // B = x^T (x row-major n x k), C = y^T (y row-major n x m)
  cs.in = DType::F16, cs.out = DType::F16;
  Problem p;
  build(p, cs, rng, /*fill_values=*/false);
  // Copies of A's values, cycled through so that every call reads A from HBM: together at
  // least 120 MB, more than twice the H100's 50 MB L2 (one 16.8 MB A would stay in L2).
  const double a_bytes = static_cast<double>(p.nnzb) * cs.bm * cs.bk * 2;
  const int copies = std::max(1, static_cast<int>(std::ceil(120e6 / a_bytes)));
  std::vector<void*> a_copies(copies, nullptr);
  std::vector<sparsek::BsrView> as(copies, p.a_view());
  for (int i = 0; i < copies; ++i) {
    CUDA_OK(cudaMalloc(&a_copies[i], p.a_bits.size()));
    CUDA_OK(cudaMemcpy(a_copies[i], p.d_a, p.a_bits.size(), cudaMemcpyDeviceToDevice));
    as[i].values = a_copies[i];
  }
  const sparsek::DenseView b = p.b_view();
  const sparsek::DenseMutView c = p.c_view();
  const sparsek::SpmmOptions o = p.options();
  for (int i = 0; i < 3; ++i) {
    const sparsek::Result r = sparsek::spmm(as[i % copies], b, c, o, nullptr);
    if (!r.ok()) {
      std::printf("TIME m=%lld k=%lld n=%d: spmm refused: %s\n", (long long)m, (long long)k, n, r.message);
      return;
    }
  }
  CUDA_OK(cudaDeviceSynchronize());
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  constexpr int kIters = 20;
  CUDA_OK(cudaEventRecord(t0));
  for (int i = 0; i < kIters; ++i) (void)sparsek::spmm(as[i % copies], b, c, o, nullptr);
  CUDA_OK(cudaEventRecord(t1));
  CUDA_OK(cudaEventSynchronize(t1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
  CUDA_OK(cudaEventDestroy(t0));
  CUDA_OK(cudaEventDestroy(t1));
  const double us = 1e3 * ms / kIters;
  std::printf("TIME (A cycled over %d copies, %.0f MB)\n", copies, copies * a_bytes / 1e6);
  // The same 20 calls captured in a CUDA graph: the kernels' time without the host's
  // per-call overhead (validation, selection, launch).
  double graph_us = -1.0;
  {
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    bool ok = true;
    for (int i = 0; i < kIters; ++i) ok = ok && sparsek::spmm(as[i % copies], b, c, o, s).ok();
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    if (ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      CUDA_OK(cudaGraphLaunch(exec, s));  // warm-up
      CUDA_OK(cudaStreamSynchronize(s));
      CUDA_OK(cudaEventCreate(&t0));
      CUDA_OK(cudaEventCreate(&t1));
      CUDA_OK(cudaEventRecord(t0, s));
      CUDA_OK(cudaGraphLaunch(exec, s));
      CUDA_OK(cudaEventRecord(t1, s));
      CUDA_OK(cudaEventSynchronize(t1));
      CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
      graph_us = 1e3 * ms / kIters;
      CUDA_OK(cudaEventDestroy(t0));
      CUDA_OK(cudaEventDestroy(t1));
      CUDA_OK(cudaGraphExecDestroy(exec));
    } else {
      (void)cudaGetLastError();
    }
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(s));
  }
  for (void* ptr : a_copies) CUDA_OK(cudaFree(ptr));
  const double all_bytes = a_bytes + static_cast<double>(k) * n * 2 + static_cast<double>(m) * n * 2;
  std::printf("TIME %lldx%lld density 0.5 blocks 128x128 n=%3d f16: %8.2f us  %7.1f GB/s (A+B+C)  A alone %7.1f GB/s "
              "= %5.1f%% of 3.1 TB/s\n",
              (long long)m, (long long)k, n, us, all_bytes / us * 1e-3, a_bytes / us * 1e-3,
              100.0 * a_bytes / us * 1e-3 / 3100.0);
  if (graph_us > 0)
    std::printf("     (CUDA graph) %8.2f us  %7.1f GB/s (A+B+C)  A alone %7.1f GB/s = %5.1f%% of 3.1 TB/s\n", graph_us,
                all_bytes / graph_us * 1e-3, a_bytes / graph_us * 1e-3, 100.0 * a_bytes / graph_us * 1e-3 / 3100.0);
}

}  // namespace

int main(int argc, char** argv) {
  bool do_check = true, do_time = true;
  uint64_t seed = 20261122;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-time")) do_time = false;
    else if (!std::strcmp(argv[i], "--time-only")) do_check = false;
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
  }
  g_forced = std::getenv("SPARSEK_VARIANT") != nullptr;
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (cc %d.%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  std::mt19937_64 rng(seed);

  if (do_check) {
    const int ns[] = {1, 2, 3, 7, 8, 9, 16, 31, 64, 100, 128};
    const int blocks[] = {16, 32, 48, 64, 80, 128, 256};
    const DType ins[] = {DType::F16, DType::BF16};
    const Activation acts[] = {Activation::None, Activation::Relu, Activation::GeluTanh, Activation::Silu};
    auto pick = [&](int count) { return static_cast<int>(rng() % static_cast<uint64_t>(count)); };
    int idx = 0;
    // Random cases: every n, four configurations each, cycling layouts, dtypes and epilogues.
    for (int n : ns) {
      for (int v = 0; v < 4; ++v, ++idx) {
        Case cs;
        cs.n = n;
        cs.bm = blocks[pick(7)];
        cs.bk = blocks[pick(7)];
        const int64_t rows = 1 + pick(10), cols = 1 + pick(20);
        cs.m = rows * cs.bm;
        cs.k = cols * cs.bk;
        while (cs.m * cs.k > (1 << 20) && cs.k > cs.bk) cs.k -= cs.bk;
        const double dens[] = {0.15, 0.25, 0.5, 1.0};
        cs.density = dens[pick(4)];
        cs.bl = (idx & 1) ? Layout::RowMajor : Layout::ColMajor;
        cs.cl = (idx & 2) ? Layout::RowMajor : Layout::ColMajor;
        cs.ldb_pad = (idx % 3 == 0) ? 0 : 1 + 2 * pick(3);  // 0 or odd
        cs.ldc_pad = (idx % 5 == 0) ? 0 : 1 + 2 * pick(3);
        cs.b_misalign = idx % 7 == 3;
        cs.c_misalign = idx % 6 == 2;
        cs.in = ins[idx & 1 ? 0 : 1];
        if ((idx / 2) & 1) cs.in = cs.in == DType::F16 ? DType::BF16 : DType::F16;
        cs.out = (idx % 3 == 1) ? DType::F32 : cs.in;
        cs.bias = idx % 2 == 0;
        cs.act = acts[idx % 4];
        const float alphas[] = {1.0f, 0.5f, -1.25f};
        cs.alpha = alphas[idx % 3];
        cs.beta = (idx % 4 == 1 || idx % 4 == 2) ? 0.75f : 0.0f;
        cs.empty_rows_every = idx % 5 == 4 ? 3 : 0;
        run_case(cs, rng, 100);
      }
    }
    // Fixed cases: the issue's layout (col-major B with aligned ld = k: the cp.async B path),
    // long block-rows over few block-rows (cluster split S = 8 on an H100), empty A, bm > 128
    // (two slices per block-row), tiny bm with large bk, every row's n boundary.
    const int edge_ns[] = {1, 8, 9, 16, 17, 32, 33, 64, 65, 128};
    for (int i = 0; i < 10; ++i) {
      Case cs;
      cs.n = edge_ns[i];
      cs.m = 4 * 64, cs.k = 48 * 64, cs.bm = 64, cs.bk = 64, cs.density = 0.5;
      cs.bl = Layout::ColMajor, cs.ldb_pad = 0, cs.cl = i % 2 ? Layout::RowMajor : Layout::ColMajor;
      cs.in = i % 2 ? DType::BF16 : DType::F16, cs.out = i % 3 == 0 ? DType::F32 : cs.in;
      cs.bias = i % 2 == 1, cs.act = acts[i % 4], cs.beta = i % 4 == 3 ? 0.5f : 0.0f;
      run_case(cs, rng, 100);
    }
    {
      Case cs;  // 128x128 blocks, S = 8 split, aligned col-major B, col-major C with ld = m
      cs.m = 2 * 128, cs.k = 32 * 128, cs.bm = 128, cs.bk = 128, cs.density = 0.5, cs.n = 64;
      run_case(cs, rng, 100);
      cs.n = 1, cs.bias = true, cs.act = Activation::Silu;
      run_case(cs, rng, 100);
      cs.n = 100, cs.out = DType::F32, cs.cl = Layout::RowMajor, cs.ldc_pad = 3, cs.beta = 1.0f;
      run_case(cs, rng, 100);
    }
    {
      Case cs;  // no blocks at all: C = act(bias + beta*C)
      cs.m = 3 * 32, cs.k = 5 * 32, cs.bm = 32, cs.bk = 32, cs.density = 0.0, cs.n = 9, cs.bias = true;
      cs.act = Activation::GeluTanh, cs.beta = 0.5f, cs.cl = Layout::RowMajor, cs.ldc_pad = 1;
      run_case(cs, rng, 10);
    }
    {
      Case cs;  // bm = 256 (two CTAs per block-row), bk = 16
      cs.m = 3 * 256, cs.k = 40 * 16, cs.bm = 256, cs.bk = 16, cs.density = 0.5, cs.n = 31;
      cs.bl = Layout::RowMajor, cs.ldb_pad = 5, cs.in = DType::BF16, cs.out = DType::BF16;
      run_case(cs, rng, 100);
      cs.n = 128, cs.bl = Layout::ColMajor, cs.ldb_pad = 8, cs.out = DType::F32;
      run_case(cs, rng, 100);
    }
    {
      Case cs;  // bm = 16, bk = 256; bm = 208 (TM = 16, 13 slices); bm = 48, bk = 80
      cs.m = 8 * 16, cs.k = 6 * 256, cs.bm = 16, cs.bk = 256, cs.density = 0.5, cs.n = 7, cs.bl = Layout::RowMajor;
      run_case(cs, rng, 100);
      cs.m = 2 * 208, cs.k = 10 * 32, cs.bm = 208, cs.bk = 32, cs.n = 16, cs.bl = Layout::ColMajor, cs.ldb_pad = 8;
      run_case(cs, rng, 100);
      cs.m = 5 * 48, cs.k = 9 * 80, cs.bm = 48, cs.bk = 80, cs.n = 50, cs.ldb_pad = 0, cs.act = Activation::Relu;
      run_case(cs, rng, 100);
    }
    std::printf("%d passed, %d failed", g_pass, g_fail);
    if (g_skip > 0) std::printf(", %d skipped", g_skip);
    std::printf("\n");
  }
  if (do_time) {
    probe_bandwidth(14336.0 * 4096 * 2 * 0.5);
    probe_bandwidth(4096.0 * 4096 * 2 * 0.5);
    for (int64_t m : {int64_t(14336), int64_t(4096)})
      for (int n : {1, 16, 64}) time_case(m, 4096, n, rng);
  }
  return g_fail == 0 ? 0 : 1;
}
