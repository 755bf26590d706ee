// sddmm_check: checks sparsek::sddmm (include/sparsek/sddmm.hpp) through the public C++
// headers only, against a double-precision host reference on every stored value.
//
//   sddmm_check            ~20 built-in cases (block shapes, dtypes, layouts, alpha/beta,
//                          k tails, empty block-rows), S's indices checked on the device
//                          (check_indices); malformed views and bad indices refused with
//                          S untouched. One PASS/FAIL line each, then "N passed, N failed".
//   sddmm_check --time M N K BLOCK DENSITY f16|bf16 row|col row|col ITERS [PATTERN_FILE]
//                          times S = A*B on S's blocks (a random pattern of that block
//                          density, every block-row alike, f32 accumulate, S of the input
//                          type): median of 5 repeats of ITERS launches, CUDA events; the
//                          pattern is written to PATTERN_FILE (block-rows, block-columns,
//                          block, then row_ptr and col_idx) for the peers' script
//                          (report/peers/sddmm_torch.py) to run the same one.
//
// S's values are poisoned with NaN when beta == 0 (they must not be read), so an unwritten
// or wrongly read value shows as a failure. Exit status 0 only when everything passed.
#include <sparsek/sddmm.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check_common.hpp"  // CUDA_CHECK, Rng, print_device

namespace {

using check_common::Rng;
using sparsek::Backend;
using sparsek::DType;
using sparsek::Layout;

// Host values of one dtype, stored as the device will see them.
struct Buf {
  DType t;
  std::vector<uint8_t> raw;
  Buf(DType type, size_t n) : t(type), raw(n * (type == DType::F32 ? 4 : 2)) {}
  size_t size() const { return raw.size() / (t == DType::F32 ? 4 : 2); }
  void set(size_t i, float v) {
    if (t == DType::F32) std::memcpy(&raw[4 * i], &v, 4);
    else if (t == DType::F16) {
      const __half h = __float2half(v);
      std::memcpy(&raw[2 * i], &h, 2);
    } else {
      const __nv_bfloat16 h = __float2bfloat16(v);
      std::memcpy(&raw[2 * i], &h, 2);
    }
  }
  float get(size_t i) const {
    if (t == DType::F32) {
      float v;
      std::memcpy(&v, &raw[4 * i], 4);
      return v;
    }
    if (t == DType::F16) {
      __half h;
      std::memcpy(&h, &raw[2 * i], 2);
      return __half2float(h);
    }
    __nv_bfloat16 h;
    std::memcpy(&h, &raw[2 * i], 2);
    return __bfloat162float(h);
  }
};

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 16)); }
  Dev(const void* host, size_t bytes) : Dev(bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

struct Case {
  int64_t m, n, k;
  int bm, bn;
  double density;
  DType in, out;
  Layout a_layout, b_layout;
  float alpha, beta;
  Backend backend;
  int64_t ld_pad;
};

const char* name(DType t) { return t == DType::F16 ? "f16" : t == DType::BF16 ? "bf16" : "f32"; }
const char* name(Layout l) { return l == Layout::RowMajor ? "row" : "col"; }

bool run(const Case& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t rows = c.m / c.bm, cols = c.n / c.bn;
  std::vector<int32_t> row_ptr(static_cast<size_t>(rows + 1), 0), col_idx;
  for (int64_t r = 0; r < rows; ++r) {
    if (r % 4 != 3)  // every fourth block-row empty
      for (int64_t q = 0; q < cols; ++q)
        if (rng.uniform() < c.density) col_idx.push_back(static_cast<int32_t>(q));
    row_ptr[r + 1] = static_cast<int32_t>(col_idx.size());
  }
  const size_t nnzb = col_idx.size(), block = size_t(c.bm) * c.bn;
  const bool a_row = c.a_layout == Layout::RowMajor, b_row = c.b_layout == Layout::RowMajor;
  // ld >= 1 even for an empty extent (k = 0).
  const int64_t lda = std::max<int64_t>(1, (a_row ? c.k : c.m) + c.ld_pad);
  const int64_t ldb = std::max<int64_t>(1, (b_row ? c.n : c.k) + c.ld_pad);
  Buf a(c.in, size_t((a_row ? c.m : c.k) * lda)), b(c.in, size_t((b_row ? c.k : c.n) * ldb));
  for (size_t i = 0; i < a.size(); ++i) a.set(i, rng.sym());
  for (size_t i = 0; i < b.size(); ++i) b.set(i, rng.sym());
  Buf s(c.out, nnzb * block);
  for (size_t i = 0; i < s.size(); ++i) s.set(i, c.beta != 0 ? rng.sym() : NAN);
  const Buf s_in = s;

  Dev d_rp(row_ptr.data(), row_ptr.size() * 4), d_ci(col_idx.data(), col_idx.size() * 4),
      d_a(a.raw.data(), a.raw.size()), d_b(b.raw.data(), b.raw.size()), d_s(s.raw.data(), s.raw.size());
  const sparsek::DenseView av{d_a.p, c.m, c.k, lda, c.a_layout, c.in};
  const sparsek::DenseView bv{d_b.p, c.k, c.n, ldb, c.b_layout, c.in};
  sparsek::BsrMutView sv;
  sv.m = c.m, sv.n = c.n, sv.bm = c.bm, sv.bn = c.bn, sv.nnzb = int64_t(nnzb);
  sv.row_ptr = static_cast<const int32_t*>(d_rp.p), sv.col_idx = static_cast<const int32_t*>(d_ci.p);
  sv.values = d_s.p, sv.dtype = c.out;
  sparsek::SddmmOptions opt;
  opt.alpha = c.alpha, opt.beta = c.beta, opt.backend = c.backend, opt.check_indices = true;

  char desc[256];
  std::snprintf(desc, sizeof(desc), "m=%lld n=%lld k=%lld block=%dx%d %s->%s A=%s B=%s alpha=%g beta=%g ld_pad=%lld",
                (long long)c.m, (long long)c.n, (long long)c.k, c.bm, c.bn, name(c.in), name(c.out),
                name(c.a_layout), name(c.b_layout), c.alpha, c.beta, (long long)c.ld_pad);
  Backend chosen = Backend::Auto;
  sparsek::Result r = sparsek::can_implement(av, bv, sv, opt, &chosen);
  if (r.ok()) r = sparsek::sddmm(av, bv, sv, opt, nullptr);
  if (!r.ok()) {
    std::printf("FAIL %s: %s\n", desc, r.message);
    return false;
  }
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  Buf got(c.out, s.size());
  CUDA_CHECK(cudaMemcpy(got.raw.data(), d_s.p, got.raw.size(), cudaMemcpyDeviceToHost));

  double err2 = 0, ref2 = 0;
  int64_t bad = 0;
  auto at_a = [&](int64_t i, int64_t kk) { return a.get(size_t(a_row ? i * lda + kk : kk * lda + i)); };
  auto at_b = [&](int64_t kk, int64_t j) { return b.get(size_t(b_row ? kk * ldb + j : j * ldb + kk)); };
  for (int64_t br = 0; br < rows; ++br)
    for (int32_t jb = row_ptr[br]; jb < row_ptr[br + 1]; ++jb)
      for (int i = 0; i < c.bm; ++i)
        for (int q = 0; q < c.bn; ++q) {
          const int64_t gi = br * c.bm + i, gq = int64_t(col_idx[jb]) * c.bn + q;
          double acc = 0;
          for (int64_t kk = 0; kk < c.k; ++kk) acc += double(at_a(gi, kk)) * at_b(kk, gq);
          const size_t idx = size_t(jb) * block + size_t(i) * c.bn + q;
          double ref = double(c.alpha) * acc;
          if (c.beta != 0) ref += double(c.beta) * s_in.get(idx);
          const double v = got.get(idx);
          if (!std::isfinite(v)) ++bad;
          else err2 += (v - ref) * (v - ref), ref2 += ref * ref;
        }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  const double tol = (c.in == DType::BF16 || c.out == DType::BF16) ? 1e-2 : 2e-3;
  const bool ok = bad == 0 && rel <= tol;
  std::printf("%s %s nnzb=%zu backend=%s rel_err=%.3g tol=%.0e non_finite=%lld\n", ok ? "PASS" : "FAIL", desc, nnzb,
              chosen == Backend::Hopper ? "hopper" : chosen == Backend::Wmma ? "wmma" : "?", rel, tol,
              (long long)bad);
  return ok;
}

// Malformed views and bad indices: refused, S untouched.
int refusals() {
  int failures = 0;
  const int64_t m = 128, n = 128, k = 64;
  std::vector<int32_t> row_ptr = {0, 1, 2}, col_idx = {1, 0};
  std::vector<uint16_t> s_host(2 * 64 * 64, 0x3c00);  // f16 ones
  Dev d_rp(row_ptr.data(), 12), d_ci(col_idx.data(), 8), d_a(size_t(m * k * 2)), d_b(size_t(k * n * 2)),
      d_s(s_host.data(), s_host.size() * 2);
  auto base = [&](sparsek::DenseView& a, sparsek::DenseView& b, sparsek::BsrMutView& s) {
    a = sparsek::DenseView{d_a.p, m, k, k, Layout::RowMajor, DType::F16};
    b = sparsek::DenseView{d_b.p, k, n, n, Layout::RowMajor, DType::F16};
    s = sparsek::BsrMutView{};
    s.m = m, s.n = n, s.bm = 64, s.bn = 64, s.nnzb = 2;
    s.row_ptr = static_cast<const int32_t*>(d_rp.p), s.col_idx = static_cast<const int32_t*>(d_ci.p);
    s.values = d_s.p, s.dtype = DType::F16;
  };
  struct Bad {
    const char* what;
    sparsek::Status want;
    void (*apply)(sparsek::DenseView&, sparsek::DenseView&, sparsek::BsrMutView&, sparsek::SddmmOptions&);
  };
  const Bad bad[] = {
      {"B rows != A cols", sparsek::Status::InvalidArgument,
       [](sparsek::DenseView&, sparsek::DenseView& b, sparsek::BsrMutView&, sparsek::SddmmOptions&) { b.rows = 32; }},
      {"A rows != S m", sparsek::Status::InvalidArgument,
       [](sparsek::DenseView& a, sparsek::DenseView&, sparsek::BsrMutView&, sparsek::SddmmOptions&) { a.rows = 64; }},
      {"null S values", sparsek::Status::InvalidArgument,
       [](sparsek::DenseView&, sparsek::DenseView&, sparsek::BsrMutView& s, sparsek::SddmmOptions&) {
         s.values = nullptr;
       }},
      {"S bf16 with f16 inputs", sparsek::Status::NotSupported,
       [](sparsek::DenseView&, sparsek::DenseView&, sparsek::BsrMutView& s, sparsek::SddmmOptions&) {
         s.dtype = DType::BF16;
       }},
      {"Backend::Decode", sparsek::Status::NotSupported,
       [](sparsek::DenseView&, sparsek::DenseView&, sparsek::BsrMutView&, sparsek::SddmmOptions& o) {
         o.backend = Backend::Decode;
       }},
      {"backend = 9", sparsek::Status::InvalidArgument,
       [](sparsek::DenseView&, sparsek::DenseView&, sparsek::BsrMutView&, sparsek::SddmmOptions& o) {
         o.backend = static_cast<Backend>(9);
       }},
  };
  for (const Bad& x : bad) {
    sparsek::DenseView a, b;
    sparsek::BsrMutView s;
    sparsek::SddmmOptions o;
    base(a, b, s);
    x.apply(a, b, s, o);
    const sparsek::Result r = sparsek::sddmm(a, b, s, o, nullptr);
    const bool ok = r.status == x.want && std::strncmp(r.message, "sparsek: ", 9) == 0;
    std::printf("%s refused '%s': status=%d message=\"%s\"\n", ok ? "PASS" : "FAIL", x.what, int(r.status), r.message);
    failures += !ok;
  }
  // A column out of range behind a well-formed view: only check_indices sees it.
  col_idx[1] = 5;
  CUDA_CHECK(cudaMemcpy(d_ci.p, col_idx.data(), 8, cudaMemcpyHostToDevice));
  sparsek::DenseView a, b;
  sparsek::BsrMutView s;
  base(a, b, s);
  sparsek::SddmmOptions o;
  o.check_indices = true;
  const sparsek::Result r = sparsek::sddmm(a, b, s, o, nullptr);
  const bool ok = r.status == sparsek::Status::InvalidArgument && std::strstr(r.message, "S's indices") != nullptr;
  std::printf("%s refused 'col_idx out of range' (check_indices): \"%s\"\n", ok ? "PASS" : "FAIL", r.message);
  failures += !ok;
  std::vector<uint16_t> after(s_host.size());
  CUDA_CHECK(cudaMemcpy(after.data(), d_s.p, after.size() * 2, cudaMemcpyDeviceToHost));
  const bool untouched = after == s_host;
  std::printf("%s refused calls left S untouched\n", untouched ? "PASS" : "FAIL");
  return failures + !untouched;
}

// --time: one timing; see the file comment.
int time_case(int argc, char** argv) {
  if (argc < 11) {
    std::printf("usage: sddmm_check --time M N K BLOCK DENSITY f16|bf16 row|col row|col ITERS [PATTERN_FILE]\n");
    return 2;
  }
  const int64_t m = std::atoll(argv[2]), n = std::atoll(argv[3]), k = std::atoll(argv[4]);
  const int blk = std::atoi(argv[5]);
  const double density = std::atof(argv[6]);
  const DType in = std::strcmp(argv[7], "bf16") == 0 ? DType::BF16 : DType::F16;
  const Layout al = std::strcmp(argv[8], "col") == 0 ? Layout::ColMajor : Layout::RowMajor;
  const Layout bl = std::strcmp(argv[9], "col") == 0 ? Layout::ColMajor : Layout::RowMajor;
  const int iters = std::max(1, std::atoi(argv[10]));
  if (blk <= 0 || m % blk != 0 || n % blk != 0 || k <= 0) {
    std::printf("FAIL bad shape\n");
    return 2;
  }
  Rng rng(7);
  const int64_t rows = m / blk, cols = n / blk;
  const int64_t per_row = std::max<int64_t>(1, std::llround(density * cols));
  std::vector<int32_t> row_ptr(size_t(rows + 1), 0), col_idx, pick(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t q = 0; q < cols; ++q) pick[q] = int32_t(q);
    for (int64_t i = 0; i < per_row; ++i) std::swap(pick[i], pick[i + int64_t(rng.next() % uint64_t(cols - i))]);
    std::sort(pick.begin(), pick.begin() + per_row);
    col_idx.insert(col_idx.end(), pick.begin(), pick.begin() + per_row);
    row_ptr[r + 1] = int32_t(col_idx.size());
  }
  if (argc > 11) {
    FILE* f = std::fopen(argv[11], "w");
    if (f == nullptr) {
      std::printf("FAIL cannot write %s\n", argv[11]);
      return 2;
    }
    std::fprintf(f, "%lld %lld %d\n", (long long)rows, (long long)cols, blk);
    for (int32_t v : row_ptr) std::fprintf(f, "%d ", v);
    std::fprintf(f, "\n");
    for (int32_t v : col_idx) std::fprintf(f, "%d ", v);
    std::fprintf(f, "\n");
    std::fclose(f);
  }
  const size_t nnzb = col_idx.size();
  Buf a(in, size_t(m * k)), b(in, size_t(k * n));
  for (size_t i = 0; i < a.size(); ++i) a.set(i, rng.sym());
  for (size_t i = 0; i < b.size(); ++i) b.set(i, rng.sym());
  Dev d_rp(row_ptr.data(), row_ptr.size() * 4), d_ci(col_idx.data(), col_idx.size() * 4),
      d_a(a.raw.data(), a.raw.size()), d_b(b.raw.data(), b.raw.size()), d_s(nnzb * blk * blk * 2);
  const sparsek::DenseView av{d_a.p, m, k, al == Layout::RowMajor ? k : m, al, in};
  const sparsek::DenseView bv{d_b.p, k, n, bl == Layout::RowMajor ? n : k, bl, in};
  sparsek::BsrMutView sv;
  sv.m = m, sv.n = n, sv.bm = blk, sv.bn = blk, sv.nnzb = int64_t(nnzb);
  sv.row_ptr = static_cast<const int32_t*>(d_rp.p), sv.col_idx = static_cast<const int32_t*>(d_ci.p);
  sv.values = d_s.p, sv.dtype = in;
  sparsek::SddmmOptions opt;
  Backend chosen = Backend::Auto;
  sparsek::Result r = sparsek::can_implement(av, bv, sv, opt, &chosen);
  for (int i = 0; r.ok() && i < 3; ++i) r = sparsek::sddmm(av, bv, sv, opt, nullptr);  // warm-up
  if (!r.ok()) {
    std::printf("FAIL %s\n", r.message);
    return 1;
  }
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0, nullptr));
    for (int i = 0; i < iters && r.ok(); ++i) r = sparsek::sddmm(av, bv, sv, opt, nullptr);
    CUDA_CHECK(cudaEventRecord(e1, nullptr));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    us.push_back(1e3 * ms / iters);
  }
  CUDA_CHECK(cudaGetLastError());
  if (!r.ok()) {
    std::printf("FAIL %s\n", r.message);
    return 1;
  }
  std::sort(us.begin(), us.end());
  const double flops = 2.0 * double(nnzb) * blk * blk * double(k);
  std::printf("sddmm m=%lld n=%lld k=%lld block=%d density=%.4f %s A=%s B=%s backend=%s nnzb=%zu time_us=%.1f "
              "tflops=%.1f\n",
              (long long)m, (long long)n, (long long)k, blk, double(nnzb) / double(rows * cols), argv[7], argv[8],
              argv[9], chosen == Backend::Hopper ? "hopper" : "wmma", nnzb, us[2], flops / us[2] / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--time") == 0) return time_case(argc, argv);
  check_common::print_device();
  const Layout R = Layout::RowMajor, C = Layout::ColMajor;
  const DType H = DType::F16, B = DType::BF16, F = DType::F32;
  const Case cases[] = {
      {512, 512, 256, 128, 128, 0.5, H, H, R, C, 1, 0, Backend::Auto, 0},
      {512, 512, 264, 128, 128, 0.5, B, B, C, R, 0.5f, 1, Backend::Auto, 8},
      {512, 512, 512, 128, 128, 0.4, H, F, C, R, 1, 0.25f, Backend::Auto, 0},
      {512, 384, 200, 64, 64, 0.5, B, F, C, R, -1, 0, Backend::Auto, 0},
      {512, 512, 136, 64, 64, 0.3, H, H, R, C, 2, 0.5f, Backend::Auto, 16},
      {256, 256, 64, 64, 64, 1.0, B, B, R, C, 1, 0, Backend::Auto, 0},
      {512, 512, 256, 128, 128, 0.5, H, H, R, C, 1, 0.5f, Backend::Wmma, 0},
      {512, 512, 96, 64, 64, 0.5, H, H, R, R, 1, 0, Backend::Auto, 0},
      {512, 512, 77, 64, 64, 0.5, B, B, C, R, 1, 0, Backend::Auto, 0},
      {384, 640, 48, 32, 32, 0.3, H, F, C, C, 1, 1, Backend::Auto, 8},
      {256, 256, 40, 16, 16, 0.3, B, B, R, C, 1, 0, Backend::Auto, 0},
      {480, 480, 128, 48, 80, 0.3, H, H, R, C, 0.5f, 0, Backend::Auto, 0},
      {512, 512, 1, 64, 64, 0.3, H, H, C, R, 1, 0, Backend::Wmma, 0},
      {512, 512, 0, 64, 64, 0.3, H, F, R, C, 1, 0.5f, Backend::Auto, 0},
      {1024, 1024, 1024, 128, 128, 0.125, B, B, C, R, 1, 0, Backend::Auto, 0},
      {1024, 1024, 1024, 64, 64, 0.125, H, H, R, C, 1, 0, Backend::Auto, 0},
  };
  int passed = 0, failed = 0;
  uint64_t seed = 1;
  for (const Case& c : cases) (run(c, seed++) ? passed : failed)++;
  const int bad = refusals();
  failed += bad;
  passed += 8 - bad;
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
