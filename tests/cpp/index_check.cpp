// SpmmOptions::check_indices on a GPU: valid BSR indices must pass the device check and
// give the right product; every kind of bad index array must be refused with
// InvalidArgument naming the first bad block-row, launching nothing (C bitwise untouched),
// and leaving no CUDA error behind.
//
// Without a GPU it prints "SKIPPED: no GPU" and exits 77 (ctest's SKIP_RETURN_CODE), unless
// SPARSEK_REQUIRE_GPU is set in the environment: then no GPU is a failure. One PASS/FAIL
// line per check, then "N passed, N failed"; exit status 1 on failure.
//
//   cmake --build build --target sparsek_test_index_check && (cd build && ctest -R index_check)
#include <sparsek/sparsek.hpp>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using sparsek::DType;
using sparsek::Layout;
using sparsek::Status;

int passed = 0, failed = 0;

void report(bool ok, const std::string& name, const std::string& detail) {
  (ok ? passed : failed)++;
  std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
  std::fflush(stdout);
}

// "" when e is cudaSuccess, else what failed.
std::string cuda_why(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return "";
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Setup steps: a failure here ends the test.
void must(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  report(false, "setup", cuda_why(e, what));
  std::printf("%d passed, %d failed\n", passed, failed);
  std::exit(1);
}

const char* status_name(Status s) {
  switch (s) {
    case Status::Success: return "Success";
    case Status::InvalidArgument: return "InvalidArgument";
    case Status::NotSupported: return "NotSupported";
    case Status::CudaError: return "CudaError";
    case Status::PendingCudaError: return "PendingCudaError";
  }
  return "?";
}

// "" when the message carries exactly one "sparsek: " prefix (at the start), else why not.
std::string prefix_why(const char* message) {
  if (std::strncmp(message, "sparsek: ", 9) != 0) return std::string("message lacks the prefix: \"") + message + "\"";
  if (std::strstr(message + 1, "sparsek: ") != nullptr || std::strncmp(message + 9, "sparsek", 7) == 0)
    return std::string("message repeats the prefix: \"") + message + "\"";
  return "";
}

// Whether the message names block-row `row` ("block-row 3", not "block-row 31").
bool names_row(const char* message, int64_t row) {
  const std::string want = "block-row " + std::to_string(row);
  for (const char* p = std::strstr(message, want.c_str()); p != nullptr; p = std::strstr(p + 1, want.c_str())) {
    const char next = p[want.size()];
    if (next < '0' || next > '9') return true;
  }
  return false;
}

// splitmix64 for test data.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float sym() { return static_cast<float>((next() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }
};

uint16_t half_bits(float f) { return static_cast<__half_raw>(__float2half_rn(f)).x; }
float half_value(uint16_t x) {
  __half_raw raw;
  raw.x = x;
  return __half2float(__half(raw));
}

// The problem: A is 256 x 320 in 64x64 f16 blocks (4 block-rows, 5 block-columns), B is
// 320 x 128 and C 256 x 128, both row-major. The valid pattern has an empty block-row (2).
constexpr int64_t kM = 256, kK = 320, kN = 128;
constexpr int32_t kBm = 64, kBk = 64;
constexpr int64_t kBlockRows = kM / kBm, kBlockCols = kK / kBk;
const std::vector<int32_t> kRowPtr = {0, 2, 3, 3, 6};
const std::vector<int32_t> kColIdx = {0, 3, 4, 0, 1, 4};
constexpr int64_t kNnzb = 6;
constexpr uint16_t kNaN = 0x7e00;     // f16 quiet NaN: C before a valid run (beta = 0)
constexpr uint16_t kPoison = 0xabcd;  // f16 -0.0609...: C before a refused run

struct Fixture {
  std::vector<uint16_t> values, b;  // host copies (f16 bits)
  int32_t *d_row_ptr = nullptr, *d_col_idx = nullptr;
  void *d_values = nullptr, *d_b = nullptr, *d_c = nullptr;

  Fixture() {
    Rng rng(20240607);
    values.resize(static_cast<size_t>(kBlockRows * kBlockCols) * kBm * kBk);  // enough for a full pattern
    for (auto& x : values) x = half_bits(rng.sym());
    b.resize(static_cast<size_t>(kK * kN));
    for (auto& x : b) x = half_bits(rng.sym());
    must(cudaMalloc(reinterpret_cast<void**>(&d_row_ptr), (kBlockRows + 1) * sizeof(int32_t)), "cudaMalloc row_ptr");
    must(cudaMalloc(reinterpret_cast<void**>(&d_col_idx), kBlockRows * kBlockCols * sizeof(int32_t)),
         "cudaMalloc col_idx");
    must(cudaMalloc(&d_values, values.size() * 2), "cudaMalloc values");
    must(cudaMalloc(&d_b, b.size() * 2), "cudaMalloc B");
    must(cudaMalloc(&d_c, static_cast<size_t>(kM * kN) * 4), "cudaMalloc C");  // room for f32 C
    must(cudaMemcpy(d_values, values.data(), values.size() * 2, cudaMemcpyHostToDevice), "copy values");
    must(cudaMemcpy(d_b, b.data(), b.size() * 2, cudaMemcpyHostToDevice), "copy B");
  }
  ~Fixture() {
    cudaFree(d_row_ptr);
    cudaFree(d_col_idx);
    cudaFree(d_values);
    cudaFree(d_b);
    cudaFree(d_c);
  }

  std::string upload(const std::vector<int32_t>& row_ptr, const std::vector<int32_t>& col_idx) {
    std::string why = cuda_why(
        cudaMemcpy(d_row_ptr, row_ptr.data(), row_ptr.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "copy row_ptr");
    if (why.empty() && !col_idx.empty())
      why = cuda_why(cudaMemcpy(d_col_idx, col_idx.data(), col_idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
                     "copy col_idx");
    return why;
  }

  sparsek::BsrView a(int64_t nnzb) const {
    sparsek::BsrView v;
    v.m = kM, v.k = kK, v.bm = kBm, v.bk = kBk, v.nnzb = nnzb;
    v.row_ptr = d_row_ptr;
    v.col_idx = nnzb > 0 ? d_col_idx : nullptr;
    v.values = nnzb > 0 ? d_values : nullptr;
    v.dtype = DType::F16;
    return v;
  }
  sparsek::DenseView bv() const { return sparsek::DenseView{d_b, kK, kN, kN, Layout::RowMajor, DType::F16}; }
  sparsek::DenseMutView cv(DType out) const { return sparsek::DenseMutView{d_c, kM, kN, kN, Layout::RowMajor, out}; }
};

// spmm with check_indices on the default stream, then every CUDA error check: the call's
// own status is returned; *why gets any CUDA error left behind.
sparsek::Result checked_spmm(const Fixture& f, const sparsek::BsrView& a, DType out, std::string* why) {
  sparsek::SpmmOptions options;
  options.alpha = 1.0f, options.beta = 0.0f;
  options.check_indices = true;
  const sparsek::Result r = sparsek::spmm(a, f.bv(), f.cv(out), options, /*stream=*/nullptr);
  *why = cuda_why(cudaGetLastError(), "cudaGetLastError after spmm");
  if (why->empty()) *why = cuda_why(cudaDeviceSynchronize(), "cudaDeviceSynchronize after spmm");
  if (why->empty()) *why = cuda_why(cudaGetLastError(), "cudaGetLastError after synchronizing");
  return r;
}

// (a) Valid indices: success, every element of C written, within 2e-3 (norm-wise) of a
// double-precision host reference.
void valid_case(Fixture& f, const char* name, const std::vector<int32_t>& row_ptr,
                const std::vector<int32_t>& col_idx, DType out) {
  const int64_t nnzb = row_ptr.back();
  std::string why = f.upload(row_ptr, col_idx);
  const size_t elems = static_cast<size_t>(kM * kN), esize = out == DType::F32 ? 4 : 2;
  std::vector<uint8_t> c(elems * esize);
  for (size_t i = 0; i < elems; ++i) {
    if (out == DType::F32) {
      const float nan = NAN;
      std::memcpy(&c[i * 4], &nan, 4);
    } else {
      std::memcpy(&c[i * 2], &kNaN, 2);
    }
  }
  if (why.empty()) why = cuda_why(cudaMemcpy(f.d_c, c.data(), c.size(), cudaMemcpyHostToDevice), "poison C");
  if (!why.empty()) return report(false, name, why);

  const sparsek::Result r = checked_spmm(f, f.a(nnzb), out, &why);
  if (!r.ok()) return report(false, name, std::string("spmm returned ") + status_name(r.status) + ": " + r.message);
  if (r.message[0] != '\0') return report(false, name, std::string("success with a message: ") + r.message);
  if (!why.empty()) return report(false, name, why);
  why = cuda_why(cudaMemcpy(c.data(), f.d_c, c.size(), cudaMemcpyDeviceToHost), "copy C back");
  if (!why.empty()) return report(false, name, why);

  double err2 = 0, ref2 = 0;
  int64_t unwritten = 0;
  std::vector<double> ref(static_cast<size_t>(kN));
  for (int64_t br = 0; br < kBlockRows; ++br)
    for (int i = 0; i < kBm; ++i) {
      std::fill(ref.begin(), ref.end(), 0.0);
      for (int32_t j = row_ptr[br]; j < row_ptr[br + 1]; ++j)
        for (int kk = 0; kk < kBk; ++kk) {
          const double av = half_value(f.values[(static_cast<size_t>(j) * kBm + i) * kBk + kk]);
          const uint16_t* brow = &f.b[static_cast<size_t>((int64_t(col_idx[j]) * kBk + kk) * kN)];
          for (int64_t col = 0; col < kN; ++col) ref[col] += av * half_value(brow[col]);
        }
      for (int64_t col = 0; col < kN; ++col) {
        const size_t idx = static_cast<size_t>((br * kBm + i) * kN + col);
        double got;
        if (out == DType::F32) {
          float g;
          std::memcpy(&g, &c[idx * 4], 4);
          got = g;
        } else {
          uint16_t g;
          std::memcpy(&g, &c[idx * 2], 2);
          got = half_value(g);
        }
        if (!std::isfinite(got)) {
          ++unwritten;
          continue;
        }
        err2 += (got - ref[col]) * (got - ref[col]);
        ref2 += ref[col] * ref[col];
      }
    }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  char detail[200];
  std::snprintf(detail, sizeof(detail), "nnzb=%lld rel_err=%.2e (tol 2e-3), %lld of %lld elements unwritten",
                (long long)nnzb, rel, (long long)unwritten, (long long)elems);
  report(unwritten == 0 && rel <= 2e-3, name, detail);
}

constexpr int64_t kLastEntry = -1;

// (b)-(e) Bad indices: InvalidArgument naming block-row `bad_row`, C bitwise untouched,
// no CUDA error; can_implement (which reads no device memory) still accepts the views.
void bad_case(Fixture& f, const char* name, const std::vector<int32_t>& row_ptr,
              const std::vector<int32_t>& col_idx, int64_t bad_row, int64_t nnzb = kNnzb) {
  std::string why = f.upload(row_ptr, col_idx);
  const std::vector<uint16_t> poison(static_cast<size_t>(kM * kN), kPoison);
  if (why.empty())
    why = cuda_why(cudaMemcpy(f.d_c, poison.data(), poison.size() * 2, cudaMemcpyHostToDevice), "poison C");
  if (!why.empty()) return report(false, name, why);

  sparsek::SpmmOptions options;
  options.check_indices = true;
  const sparsek::Result can = sparsek::can_implement(f.a(nnzb), f.bv(), f.cv(DType::F16), options);
  if (!can.ok())
    return report(false, name, std::string("can_implement refused the views: ") + can.message);

  const sparsek::Result r = checked_spmm(f, f.a(nnzb), DType::F16, &why);
  std::vector<uint16_t> c(poison.size(), 0);
  if (why.empty()) why = cuda_why(cudaMemcpy(c.data(), f.d_c, c.size() * 2, cudaMemcpyDeviceToHost), "copy C back");
  if (why.empty() && r.status != Status::InvalidArgument)
    why = std::string("status ") + status_name(r.status) + ", want InvalidArgument (\"" + r.message + "\")";
  if (why.empty()) why = prefix_why(r.message);
  // bad_row == kLastEntry: the defect is row_ptr's last entry, named as such.
  const bool named = bad_row == kLastEntry ? std::strstr(r.message, "the last entry") != nullptr
                                           : names_row(r.message, bad_row);
  if (why.empty() && !named)
    why = "message does not name block-row " + std::to_string(bad_row) + ": \"" + r.message + "\"";
  if (why.empty()) {
    int64_t changed = 0;
    for (size_t i = 0; i < c.size(); ++i) changed += c[i] != kPoison;
    if (changed) why = "C was written (" + std::to_string(changed) + " elements changed)";
  }
  report(why.empty(), name, why.empty() ? std::string("\"") + r.message + "\"" : why);
}

int no_gpu(const std::string& reason) {
  if (std::getenv("SPARSEK_REQUIRE_GPU") != nullptr) {
    report(false, "gpu", "SPARSEK_REQUIRE_GPU is set but there is no GPU: " + reason);
    std::printf("%d passed, %d failed\n", passed, failed);
    return 1;
  }
  std::printf("SKIPPED: no GPU (%s)\n", reason.c_str());
  return 77;
}

}  // namespace

int main() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return no_gpu(cuda_why(e, "cudaGetDeviceCount"));
  }
  if (count == 0) return no_gpu("cudaGetDeviceCount found 0 devices");
  int dev = 0;
  cudaDeviceProp prop;
  must(cudaGetDevice(&dev), "cudaGetDevice");
  must(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  std::printf("device %d: %s (cc %d.%d)\n", dev, prop.name, prop.major, prop.minor);

  Fixture f;
  const std::vector<int32_t>& rp = kRowPtr;
  const std::vector<int32_t>& ci = kColIdx;
  auto with = [](std::vector<int32_t> v, size_t i, int32_t x) {
    v[i] = x;
    return v;
  };

  // (a) valid indices
  valid_case(f, "valid indices, f16 C", rp, ci, DType::F16);
  valid_case(f, "valid indices, f32 C", rp, ci, DType::F32);
  valid_case(f, "valid, nnzb = 0 (every block-row empty)", {0, 0, 0, 0, 0}, {}, DType::F16);
  valid_case(f, "valid, every block present", {0, 5, 10, 15, 20}, [] {
    std::vector<int32_t> v;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 5; ++c) v.push_back(c);
    return v;
  }(), DType::F16);

  // (b) out-of-range col_idx
  bad_case(f, "col_idx = k/bk (block-row 1)", rp, with(ci, 2, int32_t(kBlockCols)), 1);
  bad_case(f, "col_idx = INT32_MAX (block-row 3)", rp, with(ci, 5, INT32_MAX), 3);
  // (c) negative col_idx
  bad_case(f, "col_idx = -1 (block-row 3)", rp, with(ci, 3, -1), 3);
  bad_case(f, "col_idx = INT32_MIN (block-row 0)", rp, with(ci, 0, INT32_MIN), 0);
  // (d) unsorted / duplicate col_idx
  bad_case(f, "unsorted col_idx (block-row 0)", rp, {3, 0, 4, 0, 1, 4}, 0);
  bad_case(f, "duplicate col_idx (block-row 3)", rp, {0, 3, 4, 0, 1, 1}, 3);
  bad_case(f, "two defects: the lower block-row wins (0)", rp, {3, 0, 4, 0, 1, 9}, 0);
  // (e) ragged row_ptr
  bad_case(f, "row_ptr decreases (block-row 1)", {0, 2, 1, 3, 6}, ci, 1);
  bad_case(f, "row_ptr[0] = 1 (block-row 0)", {1, 2, 3, 3, 6}, ci, 0);
  bad_case(f, "row_ptr[last] = 5 < nnzb (the last entry)", {0, 2, 3, 3, 5}, ci, kLastEntry);
  bad_case(f, "row_ptr[last] = 7 > nnzb (block-row 3)", {0, 2, 3, 3, 7}, ci, 3);
  bad_case(f, "row_ptr entry past nnzb (block-row 1)", {0, 2, 7, 7, 6}, ci, 1);
  bad_case(f, "row_ptr entry INT32_MAX (block-row 1)", {0, 2, INT32_MAX, 3, 6}, ci, 1);
  bad_case(f, "row_ptr entry negative (block-row 0)", {0, -1, 3, 3, 6}, ci, 0);
  bad_case(f, "nnzb = 5, row_ptr ends at 6 (block-row 3)", rp, ci, 3, 5);

  // After all the refusals the library still runs a valid problem.
  valid_case(f, "valid indices after the refusals", rp, ci, DType::F16);

  // An error the caller left pending (a failed call of its own): every entry reports it as
  // PendingCudaError with its code, runs nothing (C untouched) and leaves it pending; once
  // the caller consumed it, the same call runs.
  {
    const std::string up = f.upload(rp, ci);
    if (!up.empty()) report(false, "upload", up);
    std::vector<uint8_t> poison(size_t(kM * kN) * 2, 0xA5), back(poison.size());
    must(cudaMemcpy(f.d_c, poison.data(), poison.size(), cudaMemcpyHostToDevice), "poison C");
    const cudaError_t made = cudaSetDevice(1 << 20);
    report(made == cudaErrorInvalidDevice && cudaPeekAtLastError() == made, "the caller's failed call is pending",
           cudaGetErrorName(made));
    sparsek::SpmmOptions options;
    const char* want = "sparsek: a CUDA error was pending before this call";
    for (const bool checked : {false, true}) {
      options.check_indices = checked;
      const sparsek::Result r = sparsek::spmm(f.a(6), f.bv(), f.cv(DType::F16), options, nullptr);
      const bool still = cudaPeekAtLastError() == made;
      const bool pending_ok = r.status == Status::PendingCudaError && r.cuda_error == made &&
                              std::strncmp(r.message, want, std::strlen(want)) == 0 && still;
      report(pending_ok, checked ? "spmm(check_indices): the pending error reported, left pending"
                                 : "spmm: the pending error reported, left pending",
             std::string(status_name(r.status)) + " \"" + r.message + "\"");
    }
    sparsek::Backend chosen = sparsek::Backend::Hopper;
    const sparsek::Result c = sparsek::can_implement(f.a(6), f.bv(), f.cv(DType::F16), options, &chosen);
    report(c.status == Status::PendingCudaError && chosen == sparsek::Backend::Auto &&
               cudaPeekAtLastError() == made,
           "can_implement: the pending error reported, *chosen = Auto", c.message);
    const bool copied = cudaMemcpy(back.data(), f.d_c, back.size(), cudaMemcpyDeviceToHost) == cudaSuccess;
    report(copied && back == poison, "C untouched while an error was pending", copied ? "" : "copying C back failed");
    report(cudaGetLastError() == made && cudaPeekAtLastError() == cudaSuccess, "the caller consumes its error", "");
    valid_case(f, "valid indices once the error is consumed", rp, ci, DType::F16);
  }

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
