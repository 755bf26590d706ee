// The C++ API's validation, without a GPU: every malformed view must be refused by both
// sparsek::can_implement and sparsek::spmm (with and without check_indices) before any
// device query, with Status::InvalidArgument (NotSupported where only the dtype
// combination is unsupported) and a message that starts with exactly one "sparsek: " and
// names the defect; nothing may be touched. Each case is a defect the old API accepted or
// mishandled (negative n, enum values outside their range, int64 overflow of block counts,
// value counts and dense spans, ...), then the same of dense_spmm, sddmm, attention, the
// top-k gating and quantize_fp8.
//
// The "device" pointers point into host buffers filled with a poison pattern: a refused
// call must not read or write them (checked after every call). The test hides every GPU
// (CUDA_VISIBLE_DEVICES="" before the first CUDA call), so on any machine a call that got
// as far as the device query returns CudaError instead of the expected status, and a few
// well-formed controls must do exactly that (so validation rejects the defects, not
// everything). One PASS/FAIL line per case, then "N passed, N failed"; exit status 1 on
// failure.
//
// The device part runs first, in a child process forked before any CUDA call (so its GPUs
// stay visible): on a GPU, pointers misaligned for their type are refused with nothing
// written and the CUDA context still healthy afterwards (a misaligned access would be a
// sticky fault), the stream's device check is CUDA-graph capturable, and with two GPUs a
// stream of another device than the current one is refused by every entry, nothing written.
// Without a GPU (or with one, for the two-GPU cases) it says SKIPPED, unless
// SPARSEK_REQUIRE_GPU (any GPU) or SPARSEK_REQUIRE_GPUS=2 (two) is set: then that is a failure.
//
//   cmake --build build --target sparsek_test_api_errors && (cd build && ctest -R api_errors)
#include <sparsek/attention.hpp>
#include <sparsek/dense_sparse.hpp>
#include <sparsek/mlp.hpp>
#include <sparsek/quantize.hpp>
#include <sparsek/sddmm.hpp>
#include <sparsek/sparsek.hpp>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using sparsek::Activation;
using sparsek::Backend;
using sparsek::BsrView;
using sparsek::DenseMutView;
using sparsek::DenseView;
using sparsek::DType;
using sparsek::Layout;
using sparsek::ScaleKind;
using sparsek::SpmmOptions;
using sparsek::Status;

constexpr uint8_t kPoison = 0xA5;
constexpr size_t kArenaBytes = 1 << 16;  // every view of a case fits its arena
constexpr int64_t kHuge = int64_t(1) << 62;

// Host memory standing in for device buffers; no refused call may touch it.
struct Arena {
  std::vector<uint8_t> row_ptr, col_idx, values, b, c;
  Arena()
      : row_ptr(kArenaBytes, kPoison),
        col_idx(kArenaBytes, kPoison),
        values(kArenaBytes, kPoison),
        b(kArenaBytes, kPoison),
        c(kArenaBytes, kPoison) {}
  bool intact() const {
    for (const auto* buf : {&row_ptr, &col_idx, &values, &b, &c})
      for (uint8_t x : *buf)
        if (x != kPoison) return false;
    return true;
  }
};

struct Views {
  BsrView a;
  DenseView b;
  DenseMutView c;
  SpmmOptions options;
};

// A well-formed problem (f16, m = k = 128 in 64x64 blocks, nnzb = 2, n = 64, row-major);
// every case below breaks it in one way. It is never run as it is.
Views base(Arena& mem) {
  Views v;
  v.a.m = 128, v.a.k = 128, v.a.bm = 64, v.a.bk = 64, v.a.nnzb = 2;
  v.a.row_ptr = reinterpret_cast<const int32_t*>(mem.row_ptr.data());
  v.a.col_idx = reinterpret_cast<const int32_t*>(mem.col_idx.data());
  v.a.values = mem.values.data();
  v.a.dtype = DType::F16;
  v.b = DenseView{mem.b.data(), 128, 64, 64, Layout::RowMajor, DType::F16};
  v.c = DenseMutView{mem.c.data(), 128, 64, 64, Layout::RowMajor, DType::F16};
  return v;
}

// Shapes A (m x k in bm x bk blocks, nnzb), B (k x n) and C (m x n), row-major, ld = n.
void shape(Views& v, int64_t m, int64_t k, int64_t n, int32_t bm, int32_t bk, int64_t nnzb) {
  v.a.m = m, v.a.k = k, v.a.bm = bm, v.a.bk = bk, v.a.nnzb = nnzb;
  v.b.rows = k, v.b.cols = n, v.b.ld = n;
  v.c.rows = m, v.c.cols = n, v.c.ld = n;
}

// `p` moved by `bytes` as an address (it may leave its buffer: the pointer is never used).
void* shifted(const void* p, int64_t bytes) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes));
}

struct Case {
  const char* name;
  Status want;
  const char* keyword;  // must appear in the message (case-insensitive)
  std::function<void(Views&)> apply;
};

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

bool contains_nocase(const char* hay, const char* needle) {
  std::string h(hay), n(needle);
  for (auto& ch : h) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (auto& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return h.find(n) != std::string::npos;
}

// What is wrong with one call's Result ("" when nothing).
std::string judge(const char* call, const sparsek::Result& r, const Case& c) {
  const char* prefix = "sparsek: ";
  const size_t plen = std::strlen(prefix);
  if (r.status != c.want)
    return std::string(call) + " returned " + status_name(r.status) + ", want " + status_name(c.want) +
           " (message \"" + r.message + "\")";
  if (std::memchr(r.message, '\0', sizeof(r.message)) == nullptr) return std::string(call) + ": unterminated message";
  if (std::strncmp(r.message, prefix, plen) != 0)
    return std::string(call) + ": message does not start with \"sparsek: \": \"" + r.message + "\"";
  if (std::strstr(r.message + 1, prefix) != nullptr || std::strncmp(r.message + plen, "sparsek", 7) == 0)
    return std::string(call) + ": message carries the prefix more than once: \"" + r.message + "\"";
  if (r.message[plen] == '\0') return std::string(call) + ": message is only the prefix";
  if (!contains_nocase(r.message, c.keyword))
    return std::string(call) + ": message does not mention \"" + c.keyword + "\": \"" + r.message + "\"";
  return "";
}

Status bad_status() { return Status::InvalidArgument; }

std::vector<Case> cases() {
  const int64_t i32max = INT32_MAX;
  std::vector<Case> v;
  auto add = [&](const char* name, Status want, const char* keyword, std::function<void(Views&)> f) {
    v.push_back(Case{name, want, keyword, std::move(f)});
  };
  const Status bad = Status::InvalidArgument, unsupported = Status::NotSupported;

  // (a) Negative n: B and C with cols = -8 (the old can_implement accepted it).
  add("n = -8 (B and C cols = -8), row-major", bad, "negative", [](Views& v) { v.b.cols = v.c.cols = -8; });
  add("n = -8, column-major B and C", bad, "negative", [](Views& v) {
    v.b.cols = v.c.cols = -8;
    v.b.layout = v.c.layout = Layout::ColMajor;
    v.b.ld = v.b.rows, v.c.ld = v.c.rows;
  });
  add("n = -8 with ld = 0", bad, "negative", [](Views& v) {
    v.b.cols = v.c.cols = -8;
    v.b.ld = v.c.ld = 0;
  });

  // (b) Enum values outside their range.
  add("B.layout = 7", bad, "layout", [](Views& v) { v.b.layout = static_cast<Layout>(7); });
  add("C.layout = 7", bad, "layout", [](Views& v) { v.c.layout = static_cast<Layout>(7); });
  add("C.layout = -1", bad, "layout", [](Views& v) { v.c.layout = static_cast<Layout>(-1); });
  add("A.dtype = 9", bad, "dtype", [](Views& v) { v.a.dtype = static_cast<DType>(9); });
  add("B.dtype = 9", bad, "dtype", [](Views& v) { v.b.dtype = static_cast<DType>(9); });
  add("C.dtype = -1", bad, "dtype", [](Views& v) { v.c.dtype = static_cast<DType>(-1); });
  add("all dtypes = 7", bad, "dtype",
      [](Views& v) { v.a.dtype = v.b.dtype = v.c.dtype = static_cast<DType>(7); });
  add("backend = 4", bad, "backend", [](Views& v) { v.options.backend = static_cast<Backend>(4); });
  add("backend = -1", bad, "backend", [](Views& v) { v.options.backend = static_cast<Backend>(-1); });
  add("activation = 4", bad, "activation", [](Views& v) { v.options.activation = static_cast<Activation>(4); });
  add("activation = INT32_MIN", bad, "activation",
      [](Views& v) { v.options.activation = static_cast<Activation>(INT32_MIN); });
  add("bias not 16-byte aligned", bad, "bias",
      [](Views& v) { v.options.bias = static_cast<const uint8_t*>(v.b.data) + 2; });

  // (c) Block counts and value counts overflowing.
  add("(m/bm)*(k/bk) overflows int64: m = k = 2^62, bm = bk = 1", bad, "block",
      [](Views& v) { shape(v, kHuge, kHuge, 8, 1, 1, 2); });
  add("m/bm beyond int32: m = 2^62, bm = 1", bad, "block", [](Views& v) { shape(v, kHuge, 128, 8, 1, 64, 2); });
  add("k/bk beyond int32: k = 2^40, bk = 64", bad, "block",
      [](Views& v) { shape(v, 128, int64_t(1) << 40, 8, 64, 64, 2); });
  add("nnzb*bm*bk overflows int64: bm = bk = INT32_MAX, nnzb = 3", bad, "overflow",
      [=](Views& v) { shape(v, i32max, 3 * i32max, 8, INT32_MAX, INT32_MAX, 3); });
  add("nnzb*bm*bk fits but its bytes overflow int64: nnzb = 2", bad, "overflow",
      [=](Views& v) { shape(v, i32max, 2 * i32max, 8, INT32_MAX, INT32_MAX, 2); });
  add("nnzb > (m/bm)*(k/bk)", bad, "nnzb", [](Views& v) { v.a.nnzb = 5; });
  add("nnzb > INT32_MAX (2^40 blocks)", bad, "nnzb",
      [](Views& v) { shape(v, int64_t(1) << 40, int64_t(1) << 40, 8, 1 << 20, 1 << 20, int64_t(1) << 31); });

  // (d) Dense spans overflowing, negative dims, bad blocks, null pointers, mismatches.
  add("B: (rows-1)*ld overflows int64 (row-major, k = 2^40, ld = 2^30)", bad, "overflow", [](Views& v) {
    shape(v, 128, int64_t(1) << 40, 8, 64, 1 << 20, 0);
    v.b.ld = int64_t(1) << 30;
  });
  add("B: (cols-1)*ld overflows int64 (column-major, n = 2^60)", bad, "overflow", [](Views& v) {
    shape(v, 128, 64, int64_t(1) << 60, 64, 64, 0);
    v.b.layout = v.c.layout = Layout::ColMajor;
    v.b.ld = 64, v.c.ld = 128;
  });
  add("B: span fits but its bytes overflow int64 (k = 2^32, ld = 2^31)", bad, "overflow", [](Views& v) {
    shape(v, 128, int64_t(1) << 32, 8, 64, 1 << 16, 0);  // (2^32 - 1) * 2^31 + 8 < 2^63 elements
    v.b.ld = int64_t(1) << 31;
  });
  add("C: (rows-1)*ld overflows int64 (row-major, m = 2^40, ld = 2^24)", bad, "overflow", [](Views& v) {
    shape(v, int64_t(1) << 40, 128, 8, 1 << 20, 64, 0);
    v.c.ld = int64_t(1) << 24;
  });
  add("C: (cols-1)*ld overflows int64 (column-major, n = 2^57)", bad, "overflow", [](Views& v) {
    shape(v, 128, 16, int64_t(1) << 57, 64, 16, 0);  // B row-major: 16 x 2^57 fits
    v.c.layout = Layout::ColMajor, v.c.ld = 128;
  });
  add("C: ld = INT64_MAX", bad, "overflow", [](Views& v) { v.c.ld = INT64_MAX; });
  add("negative m", bad, "negative", [](Views& v) { v.a.m = v.c.rows = -128; });
  add("negative k", bad, "negative", [](Views& v) { v.a.k = v.b.rows = -128; });
  add("negative nnzb", bad, "negative", [](Views& v) { v.a.nnzb = -1; });
  add("negative B.ld", bad, "negative", [](Views& v) { v.b.ld = -64; });
  add("negative C.ld", bad, "negative", [](Views& v) { v.c.ld = -1; });
  add("INT64_MIN m", bad, "negative", [](Views& v) { v.a.m = v.c.rows = INT64_MIN; });
  add("bm = 0", bad, "block", [](Views& v) { v.a.bm = 0; });
  add("bk = 0", bad, "block", [](Views& v) { v.a.bk = 0; });
  add("bm = -64", bad, "block", [](Views& v) { v.a.bm = -64; });
  add("bk = INT32_MIN", bad, "block", [](Views& v) { v.a.bk = INT32_MIN; });
  add("m not a multiple of bm", bad, "multiple", [](Views& v) { v.a.m = v.c.rows = 96; });
  add("k not a multiple of bk", bad, "multiple", [](Views& v) { v.a.k = v.b.rows = 96; });
  add("B.ld < n (row-major)", bad, "ld", [](Views& v) { v.b.ld = 32; });
  add("C.ld < m (column-major)", bad, "ld", [](Views& v) {
    v.c.layout = Layout::ColMajor;
    v.c.ld = 64;
  });
  add("ld = 0 with n = 0", bad, "ld", [](Views& v) {
    v.b.cols = v.c.cols = 0;
    v.b.ld = v.c.ld = 0;
  });
  add("null row_ptr", bad, "row_ptr", [](Views& v) { v.a.row_ptr = nullptr; });
  add("null row_ptr with m = 0", bad, "row_ptr", [](Views& v) {
    v.a.m = v.c.rows = 0, v.a.nnzb = 0;
    v.a.row_ptr = nullptr;
  });
  add("null col_idx with nnzb > 0", bad, "col_idx", [](Views& v) { v.a.col_idx = nullptr; });
  add("null values with nnzb > 0", bad, "values", [](Views& v) { v.a.values = nullptr; });
  add("null B.data", bad, "data", [](Views& v) { v.b.data = nullptr; });
  add("null C.data", bad, "data", [](Views& v) { v.c.data = nullptr; });
  add("B.rows != k", bad, "rows", [](Views& v) { v.b.rows = 64; });
  add("C.rows != m", bad, "rows", [](Views& v) { v.c.rows = 64; });
  add("C.cols != B.cols", bad, "columns", [](Views& v) { v.c.cols = 32; });

  // C is written: its bytes may not overlap an input's. With n = 8, B and C take 2 KiB, so
  // every view of these cases lies inside the arenas (the arenas' own order is unknown).
  auto narrow = [](Views& v) { shape(v, 128, 128, 8, 64, 64, 2); };
  add("C overlaps B (the same buffer)", bad, "C overlaps B", [=](Views& v) {
    narrow(v);
    v.c.data = shifted(v.b.data, 0);
  });
  add("C's last element on B's first", bad, "C overlaps B", [=](Views& v) {
    narrow(v);
    v.b.data = shifted(v.b.data, 8192);
    v.c.data = shifted(v.b.data, -(128 * 8 - 1) * 2);
  });
  add("C overlaps A.values", bad, "A.values", [=](Views& v) {
    narrow(v);
    v.c.data = const_cast<void*>(v.a.values);
  });
  add("C overlaps A.row_ptr", bad, "A.row_ptr", [=](Views& v) {
    narrow(v);
    v.c.data = shifted(v.a.row_ptr, 8);
  });
  add("C overlaps A.col_idx", bad, "A.col_idx", [=](Views& v) {
    narrow(v);
    v.c.data = shifted(v.a.col_idx, 4);
  });
  add("C overlaps the bias", bad, "bias", [=](Views& v) {
    narrow(v);
    v.options.bias = v.c.data;
  });
  add("C's first element on A's last value, column-major C with padded ld", bad, "A.values", [=](Views& v) {
    narrow(v);
    v.c.layout = Layout::ColMajor, v.c.ld = 136;
    v.c.data = shifted(v.a.values, 2 * 64 * 64 * 2 - 2);
  });
  // ... but an empty C, or one that only touches an input's end, overlaps nothing.
  add("control: C just past B's last byte", Status::CudaError, "device", [=](Views& v) {
    narrow(v);
    v.c.data = shifted(v.b.data, 128 * 8 * 2);
  });
  add("control: C ending just before B", Status::CudaError, "device", [=](Views& v) {
    narrow(v);
    v.b.data = shifted(v.b.data, 8192);
    v.c.data = shifted(v.b.data, -128 * 8 * 2);
  });
  add("control: empty C (n = 0) at B's address", Status::CudaError, "device", [](Views& v) {
    v.b.cols = v.c.cols = 0;
    v.b.ld = v.c.ld = 1;
    v.c.data = shifted(v.b.data, 0);
  });

  // Valid views whose dtype combination is merely unsupported.
  add("f32 inputs", unsupported, "f32", [](Views& v) { v.a.dtype = v.b.dtype = v.c.dtype = DType::F32; });
  add("A f16, B bf16", unsupported, "bf16", [](Views& v) { v.b.dtype = DType::BF16; });
  add("C bf16 with f16 inputs", unsupported, "bf16", [](Views& v) { v.c.dtype = DType::BF16; });
  // ... but a malformed view stays InvalidArgument whatever its dtypes.
  add("f32 inputs and n = -8", bad, "negative", [](Views& v) {
    v.a.dtype = v.b.dtype = v.c.dtype = DType::F32;
    v.b.cols = v.c.cols = -8;
  });

  // Controls: well-formed views pass validation and stop at the device query (no GPU is
  // visible), so CudaError. A validation that refused these would be too strict.
  const Status reached = Status::CudaError;
  add("control: the base problem", reached, "device", [](Views&) {});
  add("control: nnzb = 0 with null col_idx and values", reached, "device", [](Views& v) {
    v.a.nnzb = 0;
    v.a.col_idx = nullptr, v.a.values = nullptr;
  });
  add("control: m = 0, C empty with null data", reached, "device", [](Views& v) {
    v.a.m = v.c.rows = 0, v.a.nnzb = 0;
    v.c.data = nullptr;
  });
  add("control: k = 0, B empty with null data", reached, "device", [](Views& v) {
    v.a.k = v.b.rows = 0, v.a.nnzb = 0;
    v.b.data = nullptr;
  });
  add("control: n = 0 with ld = 1", reached, "device", [](Views& v) {
    v.b.cols = v.c.cols = 0;
    v.b.ld = v.c.ld = 1;
  });
  add("control: column-major B and C, padded ld", reached, "device", [](Views& v) {
    v.b.layout = v.c.layout = Layout::ColMajor;
    v.b.ld = v.c.ld = 136;
  });
  add("control: bf16 inputs, f32 C", reached, "device", [](Views& v) {
    v.a.dtype = v.b.dtype = DType::BF16;
    v.c.dtype = DType::F32;
  });
  add("control: 16-byte aligned bias, SiLU, Backend::Decode", reached, "device", [](Views& v) {
    v.options.bias = v.b.data;
    v.options.activation = Activation::Silu;
    v.options.backend = Backend::Decode;
  });

  // op(A) = A^T (options.transpose_a): B is m x n, C k x n, and the transpose index must be
  // given. A is 128 x 256 here so that the swapped shapes differ.
  auto transposed = [](Views& v) {
    shape(v, 128, 256, 64, 64, 64, 2);
    v.b.rows = 128, v.c.rows = 256;
    v.options.transpose_a = true;
    v.options.transpose_index.col_ptr = v.a.row_ptr;  // poisoned stand-ins, never read
    v.options.transpose_index.row_idx = v.a.col_idx;
    v.options.transpose_index.block_id = v.a.col_idx;
  };
  add("A^T: B with k rows (A^T*B needs m)", bad, "rows", [=](Views& v) {
    transposed(v);
    v.b.rows = 256;
  });
  add("A^T: C with m rows (A^T*B has k)", bad, "rows", [=](Views& v) {
    transposed(v);
    v.c.rows = 128;
  });
  add("A^T: null transpose_index.col_ptr", bad, "col_ptr", [=](Views& v) {
    transposed(v);
    v.options.transpose_index.col_ptr = nullptr;
  });
  add("A^T: null transpose_index.block_id with nnzb > 0", bad, "block_id", [=](Views& v) {
    transposed(v);
    v.options.transpose_index.block_id = nullptr;
  });
  add("A^T: f32 inputs", unsupported, "f32", [=](Views& v) {
    transposed(v);
    v.a.dtype = v.b.dtype = v.c.dtype = DType::F32;
  });
  add("control: A^T with its transpose index", reached, "device", [=](Views& v) { transposed(v); });
  add("control: A^T, nnzb = 0 with null row_idx and block_id", reached, "device", [=](Views& v) {
    transposed(v);
    v.a.nnzb = 0;
    v.options.transpose_index.row_idx = v.options.transpose_index.block_id = nullptr;
  });
  add("A^T: C overlaps transpose_index.block_id", bad, "block_id", [=](Views& v) {
    transposed(v);
    v.b.cols = v.c.cols = v.b.ld = v.c.ld = 8;  // C: 4 KiB, inside its arena
    v.options.transpose_index.block_id = static_cast<const int32_t*>(v.c.data);
  });

  // Every pointer a kernel addresses through a typed pointer must be aligned to its type (a
  // misaligned access faults and ends the CUDA context): the index arrays to 4 bytes, values,
  // B and C to their dtype's size. Wider vector accesses are the families' own concern.
  add("A.row_ptr 2 bytes off 4-byte alignment", bad, "row_ptr", [](Views& v) {
    v.a.row_ptr = static_cast<const int32_t*>(shifted(v.a.row_ptr, 2));
  });
  add("A.row_ptr 1 byte off, m = 0 (nothing stored)", bad, "4-byte aligned", [](Views& v) {
    v.a.m = v.c.rows = 0, v.a.nnzb = 0;
    v.a.row_ptr = static_cast<const int32_t*>(shifted(v.a.row_ptr, 1));
  });
  add("A.col_idx 3 bytes off 4-byte alignment", bad, "col_idx", [](Views& v) {
    v.a.col_idx = static_cast<const int32_t*>(shifted(v.a.col_idx, 3));
  });
  add("A.values at an odd address (f16)", bad, "A.values is not 2-byte aligned", [](Views& v) {
    v.a.values = shifted(v.a.values, 1);
  });
  add("B.data at an odd address (f16)", bad, "B.data is not 2-byte aligned", [](Views& v) {
    v.b.data = shifted(v.b.data, 1);
  });
  add("C.data at an odd address (f16)", bad, "C.data is not 2-byte aligned", [](Views& v) {
    v.c.data = shifted(v.c.data, 1);
  });
  add("f32 C.data 2 bytes off 4-byte alignment", bad, "C.data is not 4-byte aligned", [](Views& v) {
    v.c.dtype = DType::F32;
    v.c.data = shifted(v.c.data, 2);
  });
  add("B.data at an odd address with n = 0 (no element)", bad, "B.data", [](Views& v) {
    v.b.cols = v.c.cols = 0;
    v.b.ld = v.c.ld = 1;
    v.b.data = shifted(v.b.data, 1);
  });
  add("A^T: transpose_index.block_id 2 bytes off", bad, "transpose_index.block_id", [=](Views& v) {
    transposed(v);
    v.options.transpose_index.block_id = static_cast<const int32_t*>(shifted(v.a.col_idx, 2));
  });
  add("A^T: transpose_index.col_ptr 1 byte off", bad, "transpose_index.col_ptr", [=](Views& v) {
    transposed(v);
    v.options.transpose_index.col_ptr = static_cast<const int32_t*>(shifted(v.a.row_ptr, 1));
  });
  // ... but element alignment is all validation asks: a 2-byte aligned B and C (the Decode
  // family reads them element-wise), FP8 values at any address, and a misaligned transpose
  // index that op(A) = A never reads all reach the device.
  add("control: B and C 2 bytes off 16-byte alignment", reached, "device", [](Views& v) {
    v.b.data = shifted(v.b.data, 2);
    v.c.data = shifted(v.c.data, 6);
  });
  add("control: E4M3 A.values at an odd address, f16 B (W8A16)", reached, "device", [](Views& v) {
    v.a.dtype = DType::E4M3;
    v.a.values = shifted(v.a.values, 1);
  });
  add("control: op(A) = A with a misaligned (unread) transpose index", reached, "device", [](Views& v) {
    v.options.transpose_index.col_ptr = static_cast<const int32_t*>(shifted(v.a.row_ptr, 1));
  });
  return v;
}


// ---- the device part (a child process with the GPUs visible) ---------------------------

struct DeviceTally {
  int passed = 0, failed = 0;
  void report(bool ok, const std::string& name, const std::string& detail) {
    (ok ? passed : failed)++;
    std::printf("%s device: %s: %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
    std::fflush(stdout);
  }
};

std::string cuda_why(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// A device buffer of `bytes` (and some slack, so that a pointer moved by a few bytes stays
// inside it), filled with the poison; freed when the process exits.
struct DeviceBuffer {
  static constexpr size_t kSlack = 64;
  uint8_t* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    void* raw = nullptr;
    if (cudaMalloc(&raw, n + kSlack) != cudaSuccess || cudaMemset(raw, kPoison, n + kSlack) != cudaSuccess) {
      std::printf("FAIL device: setup: cudaMalloc/cudaMemset of %zu bytes\n", n);
      std::fflush(stdout);
      _exit(1);
    }
    ptr = static_cast<uint8_t*>(raw);
  }
  // The poison again (a buffer an earlier, accepted call wrote); false if it could not be set.
  bool repoison() const { return cudaMemset(ptr, kPoison, bytes + kSlack) == cudaSuccess; }
  // Whether every byte (the slack too) still holds the poison.
  bool poisoned() const {
    std::vector<uint8_t> host(bytes + kSlack);
    if (cudaMemcpy(host.data(), ptr, host.size(), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    return std::all_of(host.begin(), host.end(), [](uint8_t x) { return x == kPoison; });
  }
  void upload(const void* src, size_t n) const {
    if (cudaMemcpy(ptr, src, n, cudaMemcpyHostToDevice) != cudaSuccess) {
      std::printf("FAIL device: setup: cudaMemcpy\n");
      std::fflush(stdout);
      _exit(1);
    }
  }
};

// Uniform in [-1, -1/8] u [1/8, 1]: never zero.
struct Lcg {
  uint64_t x;
  float next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const float mag = 0.125f + 0.875f * float((x >> 40) & 0xffffff) / float(1 << 24);
    return ((x >> 39) & 1) != 0 ? mag : -mag;
  }
};

// The device operands of C = A * B (f16): A 128 x 128 in 64 x 64 blocks (0, 0), (0, 1),
// (1, 1); B 128 x 8 and C 128 x 8, column-major (x and y^T of y = x W^T); every array in a
// poisoned buffer of its own; `ref` the f64 product of the f16 values.
struct Product {
  static constexpr int kM = 128, kK = 128, kN = 8, kB = 64, kNnzb = 3;
  DeviceBuffer row_ptr{3 * 4}, col_idx{kNnzb * 4}, values{size_t(kNnzb) * kB * kB * 2}, b{size_t(kK) * kN * 2},
      c{size_t(kM) * kN * 2};
  std::vector<double> ref = std::vector<double>(size_t(kM) * kN, 0.0);

  explicit Product(uint64_t seed) {
    const int32_t rp[] = {0, 2, 3}, ci[] = {0, 1, 1}, block_row[] = {0, 0, 1};
    row_ptr.upload(rp, sizeof(rp));
    col_idx.upload(ci, sizeof(ci));
    Lcg rng{seed};
    std::vector<__half> a_h(size_t(kNnzb) * kB * kB), b_h(size_t(kK) * kN);
    std::vector<double> a_d(a_h.size()), b_d(b_h.size());
    for (size_t i = 0; i < a_h.size(); ++i) a_h[i] = __float2half(rng.next()), a_d[i] = __half2float(a_h[i]);
    for (size_t i = 0; i < b_h.size(); ++i) b_h[i] = __float2half(rng.next()), b_d[i] = __half2float(b_h[i]);
    values.upload(a_h.data(), a_h.size() * 2);
    b.upload(b_h.data(), b_h.size() * 2);
    for (int blk = 0; blk < kNnzb; ++blk)
      for (int r = 0; r < kB; ++r)
        for (int q = 0; q < kB; ++q)
          for (int j = 0; j < kN; ++j) {
            const int row = block_row[blk] * kB + r, col = ci[blk] * kB + q;
            ref[size_t(j) * kM + row] += a_d[(size_t(blk) * kB + r) * kB + q] * b_d[size_t(j) * kK + col];
          }
  }
  BsrView a() const {
    BsrView v;
    v.m = kM, v.k = kK, v.bm = kB, v.bk = kB, v.nnzb = kNnzb;
    v.row_ptr = reinterpret_cast<const int32_t*>(row_ptr.ptr);
    v.col_idx = reinterpret_cast<const int32_t*>(col_idx.ptr);
    v.values = values.ptr;
    v.dtype = DType::F16;
    return v;
  }
  DenseView b_view() const { return DenseView{b.ptr, kK, kN, kK, Layout::ColMajor, DType::F16}; }
  DenseMutView c_view() const { return DenseMutView{c.ptr, kM, kN, kM, Layout::ColMajor, DType::F16}; }
  // ||C - ref|| / ||ref|| of C as the device holds it (infinite when unreadable).
  double rel_err() const {
    std::vector<__half> got(size_t(kM) * kN);
    if (cudaMemcpy(got.data(), c.ptr, got.size() * 2, cudaMemcpyDeviceToHost) != cudaSuccess) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = double(__half2float(got[i])) - ref[i];
      num += d * d, den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
  }
};

// "" when no CUDA error is pending and the device synchronizes (the context is healthy).
std::string context_why() {
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return cuda_why(e, "cudaDeviceSynchronize");
  e = cudaPeekAtLastError();
  if (e != cudaSuccess) return cuda_why(e, "a pending error");
  return "";
}

// A refusal: InvalidArgument with `keyword`, `outputs` still poisoned, the context healthy.
void expect_refused(DeviceTally& t, const char* name, const sparsek::Result& r, const char* keyword,
                    std::initializer_list<const DeviceBuffer*> outputs) {
  std::string why;
  if (r.status != Status::InvalidArgument)
    why = std::string("returned ") + status_name(r.status) + ", want InvalidArgument: \"" + r.message + "\"";
  else if (!contains_nocase(r.message, keyword))
    why = std::string("message does not mention \"") + keyword + "\": \"" + r.message + "\"";
  if (why.empty()) why = context_why();
  for (const DeviceBuffer* b : outputs)
    if (why.empty() && !b->poisoned()) why = "an output was written";
  t.report(why.empty(), name, why.empty() ? r.message : why);
}

// "" when `r` succeeded, the work on `stream` completed and C matches the reference.
std::string ran_right(const sparsek::Result& r, cudaStream_t stream, const Product& p, double* err) {
  *err = INFINITY;
  if (!r.ok()) return std::string("returned ") + status_name(r.status) + ": " + r.message;
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return cuda_why(e, "cudaStreamSynchronize");
  std::string why = context_why();
  if (!why.empty()) return why;
  *err = p.rel_err();
  return *err < 1e-2 ? "" : "relative error " + std::to_string(*err);
}

// An MLP over the product's arrays, for refusals only (its down weight's indices do not
// describe it): gate_up = A (one gate and up pair of 64-row blocks, hidden 128), down A's
// arrays as a 128 x 64 weight of two blocks, x = B; h 64 x 8 and y 128 x 8 of their own.
struct Mlp {
  const Product& p;
  DeviceBuffer h{64 * Product::kN * 2}, y{128 * Product::kN * 2};
  sparsek::MlpView view() const {
    sparsek::MlpView m;
    m.gate_up = p.a();
    m.down = p.a();
    m.down.k = 64, m.down.nnzb = 2;
    return m;
  }
  DenseMutView h_view() const { return DenseMutView{h.ptr, 64, Product::kN, 64, Layout::ColMajor, DType::F16}; }
  DenseMutView y_view() const { return DenseMutView{y.ptr, 128, Product::kN, 128, Layout::ColMajor, DType::F16}; }
};

int device_part() {
  DeviceTally t;
  const bool require = std::getenv("SPARSEK_REQUIRE_GPU") != nullptr;
  const char* gpus = std::getenv("SPARSEK_REQUIRE_GPUS");
  const bool require_two = gpus != nullptr && std::atoi(gpus) >= 2;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    const std::string why = e != cudaSuccess ? cuda_why(e, "cudaGetDeviceCount") : "no device";
    if (require || require_two) {
      t.report(false, "a GPU", "SPARSEK_REQUIRE_GPU(S) is set but " + why);
      return 1;
    }
    std::printf("SKIPPED the device part: no GPU (%s)\n", why.c_str());
    return 0;
  }
  if (cudaSetDevice(0) != cudaSuccess) {
    t.report(false, "setup", "cudaSetDevice(0)");
    return 1;
  }
  const Product p(20250045);
  const BsrView a = p.a();
  const SpmmOptions plain;

  // Pointers misaligned for their type, on device memory: refused before any launch (a
  // launch would fault on the misaligned address and end the context, so the next calls and
  // cudaDeviceSynchronize would fail), nothing written.
  {
    DenseView b = p.b_view();
    b.data = shifted(b.data, 1);
    expect_refused(t, "spmm: B at an odd address", sparsek::spmm(a, b, p.c_view(), plain, nullptr), "B.data", {&p.c});
    DenseMutView c = p.c_view();
    c.data = shifted(c.data, 1);
    expect_refused(t, "spmm: C at an odd address", sparsek::spmm(a, p.b_view(), c, plain, nullptr), "C.data", {&p.c});
    BsrView bad = a;
    bad.row_ptr = static_cast<const int32_t*>(shifted(a.row_ptr, 2));
    SpmmOptions checked;
    checked.check_indices = true;  // the index check's kernel reads row_ptr first
    expect_refused(t, "spmm(check_indices): A.row_ptr 2 bytes off",
                   sparsek::spmm(bad, p.b_view(), p.c_view(), checked, nullptr), "row_ptr", {&p.c});
    bad = a, bad.values = shifted(a.values, 1);
    const DeviceBuffer q_values{size_t(Product::kNnzb) * 64 * 64}, q_scales{Product::kNnzb * 4};
    sparsek::QuantizedBsrOut out;
    out.values = q_values.ptr;
    out.scales = reinterpret_cast<float*>(q_scales.ptr);
    expect_refused(t, "quantize_fp8: f16 A.values at an odd address", sparsek::quantize_fp8(bad, out, nullptr),
                   "A.values", {&q_values, &q_scales});
    const Mlp mlp{p};
    DenseView x = p.b_view();
    x.data = shifted(x.data, 1);
    expect_refused(t, "sparse_mlp: x at an odd address",
                   sparsek::sparse_mlp(mlp.view(), x, mlp.h_view(), mlp.y_view(), nullptr), "x.data",
                   {&mlp.h, &mlp.y});
    DenseMutView h = mlp.h_view();
    h.data = shifted(h.data, 1);
    expect_refused(t, "sparse_mlp: h at an odd address",
                   sparsek::sparse_mlp(mlp.view(), p.b_view(), h, mlp.y_view(), nullptr), "h.data",
                   {&mlp.h, &mlp.y});
    DenseMutView y = mlp.y_view();
    y.data = shifted(y.data, 1);
    expect_refused(t, "sparse_mlp: y at an odd address",
                   sparsek::sparse_mlp(mlp.view(), p.b_view(), mlp.h_view(), y, nullptr), "y.data",
                   {&mlp.h, &mlp.y});
    // The context is alive: the product, well-formed, runs and is right.
    double err = 0;
    const std::string why = ran_right(sparsek::spmm(a, p.b_view(), p.c_view(), plain, nullptr), nullptr, p, &err);
    t.report(why.empty(), "after the refusals, a well-formed spmm runs right",
             why.empty() ? "rel err " + std::to_string(err) : why);
  }

  // The stream's device check inside CUDA-graph capture (it synchronizes nothing): spmm
  // captured on a stream of the current device, replayed, against the f64 reference.
  {
    cudaStream_t s = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::string why;
    cudaError_t ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaMemset(p.c.ptr, 0xff, p.c.bytes);  // NaN (beta = 0: C is not read)
    if (ce == cudaSuccess) ce = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (ce != cudaSuccess) why = cuda_why(ce, "setting up the capture");
    sparsek::Result r;
    if (why.empty()) {
      r = sparsek::spmm(a, p.b_view(), p.c_view(), plain, s);
      ce = cudaStreamEndCapture(s, &graph);
      if (!r.ok()) why = std::string("spmm while capturing: ") + r.message;
      else if (ce != cudaSuccess) why = cuda_why(ce, "cudaStreamEndCapture");
    }
    if (why.empty() && (ce = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess)
      why = cuda_why(ce, "cudaGraphInstantiate");
    if (why.empty() && (ce = cudaGraphLaunch(exec, s)) != cudaSuccess) why = cuda_why(ce, "cudaGraphLaunch");
    double err = 0;
    if (why.empty()) why = ran_right(r, s, p, &err);
    t.report(why.empty(), "spmm captured into a CUDA graph on a stream of the current device, replayed",
             why.empty() ? "rel err " + std::to_string(err) : why);
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    if (s != nullptr) (void)cudaStreamDestroy(s);
  }

  // A stream of another device than the current one: refused by every entry before anything
  // is enqueued (row selection, device limits and scratch memory are the current device's).
  if (count < 2) {
    if (require_two)
      t.report(false, "two GPUs", "SPARSEK_REQUIRE_GPUS=2 is set but one GPU was found");
    else
      std::printf("SKIPPED the two-GPU part (a stream of another device): one GPU\n");
  } else {
    cudaStream_t s1 = nullptr, s0 = nullptr;
    if (cudaSetDevice(1) != cudaSuccess || cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess ||
        cudaSetDevice(0) != cudaSuccess || cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking) != cudaSuccess) {
      t.report(false, "setup", "a stream on each of devices 0 and 1");
      return 1;
    }
    const char* foreign = "stream belongs to device 1";
    // C holds the result of the accepted calls above: poisoned again, so a write shows.
    if (!p.c.repoison() || cudaDeviceSynchronize() != cudaSuccess) {
      t.report(false, "setup", "poisoning C again");
      return 1;
    }
    expect_refused(t, "spmm on device 1's stream, device 0 current",
                   sparsek::spmm(a, p.b_view(), p.c_view(), plain, s1), foreign, {&p.c});
    SpmmOptions checked;
    checked.check_indices = true;
    expect_refused(t, "spmm(check_indices) on device 1's stream",
                   sparsek::spmm(a, p.b_view(), p.c_view(), checked, s1), foreign, {&p.c});
    const Mlp mlp{p};
    expect_refused(t, "sparse_mlp on device 1's stream",
                   sparsek::sparse_mlp(mlp.view(), p.b_view(), mlp.h_view(), mlp.y_view(), s1), foreign,
                   {&mlp.h, &mlp.y});
    const DeviceBuffer q_values{size_t(Product::kNnzb) * 64 * 64}, q_scales{Product::kNnzb * 4};
    sparsek::QuantizedBsrOut out;
    out.values = q_values.ptr;
    out.scales = reinterpret_cast<float*>(q_scales.ptr);
    expect_refused(t, "quantize_fp8 on device 1's stream", sparsek::quantize_fp8(a, out, s1), foreign,
                   {&q_values, &q_scales});
    // SDDMM: S (A's pattern, values of its own) = X (128 x 8) * Y (8 x 128), both B's memory.
    const DeviceBuffer s_values{size_t(Product::kNnzb) * 64 * 64 * 2};
    sparsek::BsrMutView sv;
    sv.m = 128, sv.n = 128, sv.bm = 64, sv.bn = 64, sv.nnzb = Product::kNnzb;
    sv.row_ptr = a.row_ptr, sv.col_idx = a.col_idx, sv.values = s_values.ptr;
    const DenseView sx{p.b.ptr, 128, 8, 128, Layout::ColMajor, DType::F16};
    const DenseView sy{p.b.ptr, 8, 128, 8, Layout::ColMajor, DType::F16};
    expect_refused(t, "sddmm on device 1's stream", sparsek::sddmm(sx, sy, sv, sparsek::SddmmOptions{}, s1), foreign,
                   {&s_values});
    // Attention: Q = K = V (A's values as [1, 1, 128, 64] f16), O of its own.
    const DeviceBuffer o_buf{size_t(128) * 64 * 2};
    const sparsek::HeadsView qkv = sparsek::packed_heads(p.values.ptr, 1, 1, 128, 64, DType::F16);
    const sparsek::HeadsMutView o = sparsek::packed_heads_mut(o_buf.ptr, 1, 1, 128, 64, DType::F16);
    expect_refused(t, "attention on device 1's stream",
                   sparsek::attention(qkv, qkv, qkv, o, nullptr, nullptr, sparsek::AttentionOptions{}, s1), foreign,
                   {&o_buf});
    const DeviceBuffer rows{4 * 4}, cols{4 * 4};
    sparsek::TopkGatingOptions go;
    go.top_k = 1;
    sparsek::BlockMaskView mask;
    mask.block_q = -7;
    expect_refused(t, "block_topk on device 1's stream",
                   sparsek::block_topk(qkv, qkv, go, reinterpret_cast<int32_t*>(rows.ptr),
                                       reinterpret_cast<int32_t*>(cols.ptr), &mask, s1),
                   foreign, {&rows, &cols});
    expect_refused(t, "block_topk_scores on device 1's stream",
                   sparsek::block_topk_scores(reinterpret_cast<const float*>(p.values.ptr), 1, 1, 128, 128, go,
                                              reinterpret_cast<int32_t*>(rows.ptr),
                                              reinterpret_cast<int32_t*>(cols.ptr), &mask, s1),
                   foreign, {&rows, &cols});
    t.report(mask.block_q == -7, "block_topk*: the mask view unwritten after the refusals", "");
    // Device 1 current, device 0's stream: refused the other way round.
    if (cudaSetDevice(1) != cudaSuccess) {
      t.report(false, "setup", "cudaSetDevice(1)");
    } else {
      expect_refused(t, "spmm on device 0's stream, device 1 current",
                     sparsek::spmm(a, p.b_view(), p.c_view(), plain, s0), "stream belongs to device 0", {});
      (void)cudaSetDevice(0);
    }
    // ... and on device 0's own stream the product runs, right.
    double err = 0;
    const std::string why = ran_right(sparsek::spmm(a, p.b_view(), p.c_view(), plain, s0), s0, p, &err);
    t.report(why.empty(), "spmm on device 0's stream, device 0 current",
             why.empty() ? "rel err " + std::to_string(err) : why);
  }
  std::printf("device part: %d passed, %d failed\n", t.passed, t.failed);
  return t.failed == 0 ? 0 : 1;
}

}  // namespace

int main() {
  // The device part in a child process forked before any CUDA call, so that it sees the GPUs
  // this process hides next.
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    const int rc = device_part();
    std::fflush(stdout);
    _exit(rc);
  }
  int child_status = 0;
  const bool device_ok = child > 0 && waitpid(child, &child_status, 0) == child && WIFEXITED(child_status) &&
                         WEXITSTATUS(child_status) == 0;
  // Hide every GPU before the first CUDA call: a view that validation lets through then
  // fails at the device query on every machine, with or without a GPU.
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  int passed = 0, failed = 0;
  Arena mem;
  for (const Case& c : cases()) {
    Views v = base(mem);
    c.apply(v);
    std::string why;
    sparsek::Result last;

    const Backend sentinel = static_cast<Backend>(0x5a5a);
    Backend chosen = sentinel;
    sparsek::Result r = sparsek::can_implement(v.a, v.b, v.c, v.options, &chosen);
    why = judge("can_implement", r, c);
    if (why.empty() && chosen != Backend::Auto) why = "can_implement left *chosen other than Auto on failure";
    if (why.empty() && !mem.intact()) why = "can_implement touched the buffers";
    last = r;

    if (why.empty()) {
      r = sparsek::spmm(v.a, v.b, v.c, v.options, /*stream=*/nullptr);
      why = judge("spmm", r, c);
      if (why.empty() && std::strcmp(r.message, last.message) != 0)
        why = std::string("spmm and can_implement disagree: \"") + r.message + "\" vs \"" + last.message + "\"";
      if (why.empty() && !mem.intact()) why = "spmm touched the buffers";
    }
    if (why.empty()) {
      SpmmOptions checked = v.options;
      checked.check_indices = true;
      r = sparsek::spmm(v.a, v.b, v.c, checked, nullptr);
      why = judge("spmm(check_indices)", r, c);
      if (why.empty() && !mem.intact()) why = "spmm(check_indices) touched the buffers";
    }

    if (why.empty()) {
      ++passed;
      std::printf("PASS %s: %s \"%s\"\n", c.name, status_name(r.status), r.message);
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", c.name, why.c_str());
      if (!mem.intact()) mem = Arena();  // keep later cases meaningful
    }
  }

  // dense_spmm (dense_sparse.hpp) and sddmm (sddmm.hpp) go through the same validation:
  // a shape defect is InvalidArgument, a well-formed call reaches the (hidden) device.
  auto expect = [&](const char* name, const sparsek::Result& r, Status want, const char* keyword) {
    Case c{name, want, keyword, nullptr};
    std::string why = judge(name, r, c);
    if (why.empty() && !mem.intact()) why = "touched the buffers";
    std::printf("%s %s: %s\n", why.empty() ? "PASS" : "FAIL", name, why.empty() ? r.message : why.c_str());
    (why.empty() ? passed : failed)++;
  };
  {
    Views v = base(mem);  // A 128 x 128: D is p x 128, C p x 128 (both row-major)
    const DenseView d{mem.b.data(), 48, 128, 128, Layout::RowMajor, DType::F16};
    DenseMutView c{mem.c.data(), 48, 128, 128, Layout::RowMajor, DType::F16};
    SpmmOptions o;
    o.transpose_index.col_ptr = v.a.row_ptr, o.transpose_index.row_idx = v.a.col_idx;
    o.transpose_index.block_id = v.a.col_idx;
    expect("dense_spmm: control", sparsek::dense_spmm(d, v.a, c, o, nullptr), Status::CudaError, "device");
    c.rows = 40;
    expect("dense_spmm: C rows != D rows", sparsek::dense_spmm(d, v.a, c, o, nullptr), bad_status(), "columns");
    c.rows = 48;
    o.transpose_index.col_ptr = nullptr;
    expect("dense_spmm: D*A without A's transpose index", sparsek::dense_spmm(d, v.a, c, o, nullptr), bad_status(),
           "col_ptr");
  }
  {
    // S 128 x 128 in 64 x 64 blocks (nnzb 2) = A (128 x 64) * B (64 x 128).
    const DenseView a{mem.b.data(), 128, 64, 64, Layout::RowMajor, DType::F16};
    DenseView b{mem.c.data(), 64, 128, 64, Layout::ColMajor, DType::F16};
    sparsek::BsrMutView s;
    s.m = 128, s.n = 128, s.bm = 64, s.bn = 64, s.nnzb = 2;
    s.row_ptr = reinterpret_cast<const int32_t*>(mem.row_ptr.data());
    s.col_idx = reinterpret_cast<const int32_t*>(mem.col_idx.data());
    s.values = mem.values.data();
    sparsek::SddmmOptions o;
    expect("sddmm: control", sparsek::sddmm(a, b, s, o, nullptr), Status::CudaError, "device");
    b.rows = 32;
    expect("sddmm: B rows != A cols", sparsek::sddmm(a, b, s, o, nullptr), bad_status(), "rows");
    b.rows = 64;
    s.nnzb = 5;
    expect("sddmm: nnzb > blocks", sparsek::sddmm(a, b, s, o, nullptr), bad_status(), "nnzb");
    s.nnzb = 2;
    o.backend = static_cast<Backend>(7);
    expect("sddmm: backend = 7", sparsek::can_implement(a, b, s, o, nullptr), bad_status(), "backend");
    o.backend = Backend::Auto;
    // S's values are written: they may overlap neither A, B nor S's index arrays.
    sparsek::BsrMutView so = s;
    so.values = shifted(a.data, 0);
    expect("sddmm: S overlaps A", sparsek::sddmm(a, b, so, o, nullptr), bad_status(), "S.values overlaps A");
    // One block (8 KiB of values): every S below lies inside an arena.
    so.nnzb = 1;
    so.values = shifted(b.data, 64);
    expect("sddmm: S overlaps B", sparsek::can_implement(a, b, so, o, nullptr), bad_status(), "S.values overlaps B");
    so.values = shifted(s.col_idx, 2);
    expect("sddmm: S overlaps S.col_idx", sparsek::sddmm(a, b, so, o, nullptr), bad_status(), "S.col_idx");
    so.values = shifted(s.row_ptr, 4);
    expect("sddmm: S overlaps S.row_ptr", sparsek::sddmm(a, b, so, o, nullptr), bad_status(), "S.row_ptr");
    so.values = shifted(s.col_idx, 4);
    expect("sddmm: control, S just past S.col_idx (one entry)", sparsek::sddmm(a, b, so, o, nullptr),
           Status::CudaError, "device");
  }
  {
    // Attention (attention.hpp): Q, K, V, O [1, 2, 8, 64] packed in the arena, one 128-row
    // block each way.
    using sparsek::HeadsMutView;
    using sparsek::HeadsView;
    const HeadsView q = sparsek::packed_heads(mem.b.data(), 1, 2, 8, 64, DType::BF16);
    const HeadsView kv = sparsek::packed_heads(mem.values.data(), 1, 2, 8, 64, DType::BF16);
    const HeadsMutView o = sparsek::packed_heads_mut(mem.c.data(), 1, 2, 8, 64, DType::BF16);
    sparsek::BlockMaskView m;
    m.q_blocks = 1, m.k_blocks = 1, m.patterns = 1, m.nnzb = 1;
    m.row_ptr = reinterpret_cast<const int32_t*>(mem.row_ptr.data());
    m.col_idx = reinterpret_cast<const int32_t*>(mem.col_idx.data());
    float* lse = reinterpret_cast<float*>(mem.row_ptr.data() + 64);
    sparsek::AttentionOptions opt;
    auto run = [&](HeadsView q_, HeadsView k_, HeadsMutView o_, float* l, const sparsek::BlockMaskView* mk,
                   sparsek::AttentionOptions op) { return sparsek::attention(q_, k_, k_, o_, l, mk, op, nullptr); };
    expect("attention: control", run(q, kv, o, lse, &m, opt), Status::CudaError, "device");
    HeadsView bad = kv;
    bad.head_dim = 32;
    expect("attention: K head_dim != Q's", run(q, bad, o, lse, &m, opt), bad_status(), "head_dim of K (= head_dim of Q): 32 given, 64 expected");
    HeadsMutView bad_o = o;
    bad_o.dtype = DType::F32;
    expect("attention: f32 O", run(q, kv, bad_o, lse, &m, opt), Status::NotSupported, "one dtype");
    bad = q;
    bad.stride_s = -64;
    expect("attention: negative stride", run(bad, kv, o, lse, &m, opt), bad_status(), "negative");
    bad = kv;
    bad.stride_s = 32, bad.stride_h = 8 * 64;  // rows of 64 elements 32 apart: an input's rows overlap
    expect("attention: K with stride_s < head_dim", run(q, bad, o, lse, &m, opt), bad_status(), "rows overlap");
    bad = q;
    bad.stride_b = kHuge;
    bad.batch = 4;
    HeadsView kv4 = kv;
    HeadsMutView o4 = o;
    kv4.batch = o4.batch = 4;
    expect("attention: Q's extent overflows", run(bad, kv4, o4, lse, nullptr, opt), bad_status(), "overflow");
    sparsek::BlockMaskView bm = m;
    bm.k_blocks = 2;
    expect("attention: mask of the wrong size", run(q, kv, o, lse, &bm, opt), bad_status(), "blocks of the mask");
    bm = m;
    bm.patterns = 3;
    expect("attention: 3 patterns for 2 heads", run(q, kv, o, lse, &bm, opt), bad_status(), "patterns");
    bm = m;
    bm.block_q = 0;
    expect("attention: mask block 0", run(q, kv, o, lse, &bm, opt), bad_status(), "blocks");
    expect("attention: misaligned LSE",
           run(q, kv, o, reinterpret_cast<float*>(mem.row_ptr.data() + 66), &m, opt), bad_status(), "aligned");
    sparsek::AttentionOptions nan = opt;
    nan.scale = NAN;
    expect("attention: NaN scale", run(q, kv, o, lse, &m, nan), bad_status(), "scale");
    sparsek::AttentionOptions be = opt;
    be.backend = static_cast<Backend>(7);
    expect("attention: backend = 7", run(q, kv, o, lse, &m, be), bad_status(), "backend");

    // O may not overlap itself ...
    bad_o = o;
    bad_o.stride_h = 0;  // both heads on one [8, 64] tile
    expect("attention: O with stride_h = 0 and 2 heads", run(q, kv, bad_o, lse, &m, opt), bad_status(),
           "O overlaps itself");
    bad_o = o;
    bad_o.stride_s = 32;  // rows of 64 elements 32 apart
    bad_o.stride_h = 8 * 64;
    expect("attention: O with stride_s < head_dim", run(q, kv, bad_o, lse, &m, opt), bad_status(),
           "O.stride_s = 32 is below head_dim = 64: its rows overlap");
    bad_o = o;
    bad_o.stride_h = 7 * 64;  // head 1's first row on head 0's last
    expect("attention: O's heads overlapping by one row", run(q, kv, bad_o, lse, &m, opt), bad_status(),
           "O overlaps itself");
    bad_o = o;
    bad_o.stride_s = 2 * 64, bad_o.stride_h = 64;  // [seq, heads, d] storage: interleaved, not overlapping
    expect("attention: control, O as [seq, heads, d]", run(q, kv, bad_o, lse, &m, opt), Status::CudaError, "device");
    bad_o = o;
    bad_o.stride_h = 0, bad_o.heads = 1;  // a stride of extent 1 is never stepped
    {
      HeadsView q1 = q, k1 = kv;
      q1.heads = k1.heads = 1;
      expect("attention: control, stride_h = 0 with one head", run(q1, k1, bad_o, lse, nullptr, opt),
             Status::CudaError, "device");
    }
    // ... nor an input, nor LSE; neither may LSE.
    bad_o = o;
    bad_o.data = shifted(q.data, 64);
    expect("attention: O overlaps Q", run(q, kv, bad_o, lse, &m, opt), bad_status(), "O overlaps Q");
    bad_o.data = shifted(kv.data, 0);
    expect("attention: O is K (and V)", run(q, kv, bad_o, lse, &m, opt), bad_status(), "O overlaps K");
    expect("attention: O overlaps LSE", run(q, kv, o, reinterpret_cast<float*>(shifted(o.data, 1024)), &m, opt),
           bad_status(), "O overlaps LSE");
    bad_o.data = const_cast<int32_t*>(m.row_ptr);
    expect("attention: O overlaps mask.row_ptr", run(q, kv, bad_o, nullptr, &m, opt), bad_status(), "mask.row_ptr");
    expect("attention: LSE overlaps K", run(q, kv, o, reinterpret_cast<float*>(shifted(kv.data, 4)), &m, opt),
           bad_status(), "LSE overlaps K");
    expect("attention: control, LSE just past O",
           run(q, kv, o, reinterpret_cast<float*>(shifted(o.data, 2 * 8 * 64 * 2)), &m, opt), Status::CudaError,
           "device");

    // Per-head patterns carry the (batch, heads) they were made for.
    {
      const HeadsView q32 = sparsek::packed_heads(mem.b.data(), 3, 2, 8, 64, DType::BF16);
      const HeadsView kv32 = sparsek::packed_heads(mem.values.data(), 3, 2, 8, 64, DType::BF16);
      const HeadsMutView o32 = sparsek::packed_heads_mut(mem.c.data(), 3, 2, 8, 64, DType::BF16);
      sparsek::BlockMaskView ph = m;
      ph.patterns = 6, ph.nnzb = 6;
      ph.batch = 2, ph.heads = 3;
      expect("attention: per-head mask made for (2, 3), Q is (3, 2)", run(q32, kv32, o32, nullptr, &ph, opt),
             bad_status(), "made for");
      ph.batch = ph.heads = 0;
      expect("attention: per-head mask with batch/heads unset", run(q32, kv32, o32, nullptr, &ph, opt), bad_status(),
             "made for");
      ph.batch = 3, ph.heads = 2;
      expect("attention: control, per-head mask made for (3, 2)", run(q32, kv32, o32, nullptr, &ph, opt),
             Status::CudaError, "device");
      // batch * heads = 0: zero patterns are per-head ones, made for (0, 2).
      const HeadsView q0 = sparsek::packed_heads(mem.b.data(), 0, 2, 8, 64, DType::BF16);
      const HeadsMutView o0 = sparsek::packed_heads_mut(mem.c.data(), 0, 2, 8, 64, DType::BF16);
      sparsek::BlockMaskView none = m;
      none.patterns = 0, none.nnzb = 0;
      none.batch = 5, none.heads = 7;
      expect("attention: no patterns made for (5, 7), Q is (0, 2)", run(q0, q0, o0, nullptr, &none, opt),
             bad_status(), "made for");
      none.batch = 0, none.heads = 2;
      expect("attention: control, no patterns made for (0, 2)", run(q0, q0, o0, nullptr, &none, opt),
             Status::CudaError, "device");
      sparsek::BlockMaskView one = m;
      one.batch = 5, one.heads = 7;  // ignored with one pattern
      expect("attention: control, one pattern, batch/heads ignored", run(q32, kv32, o32, nullptr, &one, opt),
             Status::CudaError, "device");
    }
    // Grouped-query attention: K and V have heads_kv heads, a divisor of Q's; a per-head mask
    // is made for Q's heads or K's; the causal alignment is one of the enum's values.
    {
      HeadsView k3 = kv;
      k3.heads = 3;
      expect("attention: K with 3 heads, Q 2", run(q, k3, o, lse, &m, opt), bad_status(), "must divide");
      HeadsView k0 = kv;
      k0.heads = 0;
      expect("attention: K with 0 heads, Q 2", run(q, k0, o, lse, &m, opt), bad_status(), "must divide");
      HeadsView k1 = kv;
      k1.heads = 1, k1.stride_b = 8 * 64;
      expect("attention: control, MQA (K and V with 1 head, Q 2)", run(q, k1, o, lse, &m, opt), Status::CudaError,
             "device");
      expect("attention: V with 2 heads, K 1",
             sparsek::attention(q, k1, kv, o, lse, &m, opt, nullptr), bad_status(), "heads of V (= heads of K): 2 given, 1 expected");
      const HeadsView q32 = sparsek::packed_heads(mem.b.data(), 3, 2, 8, 64, DType::BF16);
      const HeadsView kv31 = sparsek::packed_heads(mem.values.data(), 3, 1, 8, 64, DType::BF16);
      const HeadsMutView o32 = sparsek::packed_heads_mut(mem.c.data(), 3, 2, 8, 64, DType::BF16);
      sparsek::BlockMaskView ph = m;
      ph.patterns = 3, ph.nnzb = 3, ph.batch = 3, ph.heads = 1;
      expect("attention: control, a mask per KV head (3 patterns for (3, 1))", run(q32, kv31, o32, nullptr, &ph, opt),
             Status::CudaError, "device");
      ph.patterns = 6, ph.nnzb = 6, ph.heads = 2;
      expect("attention: control, a mask per query head (6 patterns for (3, 2)), K 1 head",
             run(q32, kv31, o32, nullptr, &ph, opt), Status::CudaError, "device");
      ph.patterns = 3, ph.nnzb = 3, ph.batch = 1, ph.heads = 3;
      expect("attention: mask made for (1, 3): heads neither Q's 2 nor K's 1", run(q32, kv31, o32, nullptr, &ph, opt),
             bad_status(), "made for");
      ph.patterns = 6, ph.nnzb = 6, ph.batch = 3, ph.heads = 1;
      expect("attention: 6 patterns made for (3, 1)", run(q32, kv31, o32, nullptr, &ph, opt), bad_status(),
             "patterns");
      sparsek::AttentionOptions ca = opt;
      ca.causal = true;
      ca.causal_alignment = sparsek::CausalAlignment::BottomRight;
      expect("attention: control, bottom-right causal", run(q, kv, o, lse, &m, ca), Status::CudaError, "device");
      ca.causal_alignment = static_cast<sparsek::CausalAlignment>(2);
      expect("attention: causal_alignment = 2", run(q, kv, o, lse, &m, ca), bad_status(), "causal_alignment");
      ca.causal = false;  // checked whether or not causal is on
      ca.causal_alignment = static_cast<sparsek::CausalAlignment>(-1);
      expect("attention: causal_alignment = -1, not causal", run(q, kv, o, lse, &m, ca), bad_status(),
             "causal_alignment");
      int64_t n = -1;
      sparsek::TopkGatingOptions ga;
      ga.causal = true;
      ga.causal_alignment = static_cast<sparsek::CausalAlignment>(3);
      expect("block_topk_nnzb: causal_alignment = 3", sparsek::block_topk_nnzb(1, 2, 8, 8, ga, &n), bad_status(),
             "causal_alignment");
      sparsek::BlockMaskView gv;
      expect("block_topk: K with 3 heads, Q 2",
             sparsek::block_topk(q, k3, sparsek::TopkGatingOptions{}, reinterpret_cast<int32_t*>(mem.row_ptr.data()),
                                 reinterpret_cast<int32_t*>(mem.col_idx.data()), &gv, nullptr),
             bad_status(), "must divide");
      expect("block_topk: control, K with 1 head, Q 2",
             sparsek::block_topk(q, k1, sparsek::TopkGatingOptions{}, reinterpret_cast<int32_t*>(mem.row_ptr.data()),
                                 reinterpret_cast<int32_t*>(mem.col_idx.data()), &gv, nullptr),
             Status::CudaError, "device");
    }
    // The serving layout (SequenceLayout): per-sequence key counts and paged K/V. Q, K, V and
    // O [2, 2, 8, 64]; seqlens_k and the page table in the row_ptr arena past the LSE.
    {
      const HeadsView q2 = sparsek::packed_heads(mem.b.data(), 2, 2, 8, 64, DType::BF16);
      const HeadsView kv2 = sparsek::packed_heads(mem.values.data(), 2, 2, 8, 64, DType::BF16);
      const HeadsMutView o2 = sparsek::packed_heads_mut(mem.c.data(), 2, 2, 8, 64, DType::BF16);
      const int32_t* lens = reinterpret_cast<const int32_t*>(mem.row_ptr.data() + 2048);
      const int32_t* table = reinterpret_cast<const int32_t*>(mem.row_ptr.data() + 4096);
      auto run2 = [&](HeadsView k_, HeadsView v_, HeadsMutView o_, float* l, const sparsek::BlockMaskView* mk,
                      const sparsek::SequenceLayout& layout) {
        sparsek::AttentionOptions op = opt;
        op.layout = layout;
        return sparsek::attention(q2, k_, v_, o_, l, mk, op, nullptr);
      };
      sparsek::SequenceLayout sl;
      sl.seqlens_k = lens, sl.batch = 2, sl.max_seqlen_k = 8;
      expect("attention: control, seqlens_k", run2(kv2, kv2, o2, lse, nullptr, sl), Status::CudaError, "device");
      expect("attention: control, seqlens_k with a mask of ceil(max_seqlen_k / 128) key blocks",
             run2(kv2, kv2, o2, lse, &m, sl), Status::CudaError, "device");
      sparsek::SequenceLayout bad_l = sparsek::SequenceLayout{};
      bad_l.batch = 2, bad_l.max_seqlen_k = 8;
      expect("attention: layout counts without arrays", run2(kv2, kv2, o2, lse, nullptr, bad_l), bad_status(),
             "none of its arrays");
      bad_l = sl;
      bad_l.batch = 3;
      expect("attention: layout batch 3, Q's 2", run2(kv2, kv2, o2, lse, nullptr, bad_l), bad_status(),
             "batch of the layout (= batch of Q): 3 given, 2 expected");
      bad_l = sl;
      bad_l.max_seqlen_q = 5;
      expect("attention: max_seqlen_q 5, Q's seq 8", run2(kv2, kv2, o2, lse, nullptr, bad_l), bad_status(),
             "max_seqlen_q");
      bad_l = sl;
      bad_l.max_seqlen_q = 8;
      expect("attention: control, max_seqlen_q = Q's seq", run2(kv2, kv2, o2, lse, nullptr, bad_l),
             Status::CudaError, "device");
      bad_l = sl;
      bad_l.max_seqlen_k = 9;
      expect("attention: seqlens_k, max_seqlen_k 9 above K's 8 keys", run2(kv2, kv2, o2, lse, nullptr, bad_l),
             bad_status(), "max_seqlen_k exceeds seq of K");
      bad_l = sl;
      bad_l.batch = -1;
      expect("attention: layout batch -1", run2(kv2, kv2, o2, lse, nullptr, bad_l), bad_status(), "negative");
      bad_l = sl;
      bad_l.seqlens_k = reinterpret_cast<const int32_t*>(mem.row_ptr.data() + 2050);
      expect("attention: seqlens_k 2 bytes off", run2(kv2, kv2, o2, lse, nullptr, bad_l), bad_status(), "aligned");
      bad_l = sl;
      bad_l.max_pages = 4;
      expect("attention: max_pages without a page table", run2(kv2, kv2, o2, lse, nullptr, bad_l), bad_status(),
             "max_pages is set without a page table");
      HeadsMutView bad_o2 = o2;
      bad_o2.data = shifted(lens, -64);
      expect("attention: O overlaps layout.seqlens_k", run2(kv2, kv2, bad_o2, nullptr, nullptr, sl), bad_status(),
             "layout.seqlens_k");

      // Paged: K and V a pool of 5 pages of 8 keys, 4 entries per sequence (32 keys).
      const HeadsView pool = sparsek::packed_heads(mem.values.data(), 5, 2, 8, 64, DType::BF16);
      sparsek::SequenceLayout pl = sl;
      pl.page_table = table, pl.max_pages = 4, pl.max_seqlen_k = 30;
      expect("attention: control, paged", run2(pool, pool, o2, lse, nullptr, pl), Status::CudaError, "device");
      bad_l = pl;
      bad_l.seqlens_k = nullptr;
      expect("attention: a page table without seqlens_k", run2(pool, pool, o2, lse, nullptr, bad_l), bad_status(),
             "needs seqlens_k");
      bad_l = pl;
      bad_l.max_pages = 0;
      expect("attention: a page table with max_pages 0", run2(pool, pool, o2, lse, nullptr, bad_l), bad_status(),
             "max_pages >= 1");
      bad_l = pl;
      bad_l.max_seqlen_k = 33;
      expect("attention: paged, max_seqlen_k 33 above 4 pages of 8", run2(pool, pool, o2, lse, nullptr, bad_l),
             bad_status(), "exceeds max_pages * page_size");
      bad_l = pl;
      bad_l.max_pages = int64_t(1) << 30;
      expect("attention: paged, 2 * 2^30 table entries", run2(pool, pool, o2, lse, nullptr, bad_l), bad_status(),
             "fit int32");
      HeadsView pool4 = pool;
      pool4.batch = 4;
      expect("attention: paged, V with 4 pages, K 5", run2(pool, pool4, o2, lse, nullptr, pl), bad_status(),
             "batch of V (= pages of K): 4 given, 5 expected");
      HeadsView empty_pool = pool;
      empty_pool.batch = 0;
      expect("attention: paged, a pool of no page", run2(empty_pool, empty_pool, o2, lse, nullptr, pl), bad_status(),
             "at least one page");
      sparsek::BlockMaskView pm = m;
      pm.block_k = 12, pm.k_blocks = 3;  // ceil(30 / 12)
      expect("attention: paged, mask block_k 12 over pages of 8", run2(pool, pool, o2, lse, &pm, pl), bad_status(),
             "multiple of the page size");
      pm.block_k = 16, pm.k_blocks = 2;
      expect("attention: control, paged, mask block_k 16 over pages of 8", run2(pool, pool, o2, lse, &pm, pl),
             Status::CudaError, "device");
      pm.block_k = 4, pm.k_blocks = 8;
      expect("attention: control, paged, mask block_k 4 over pages of 8", run2(pool, pool, o2, lse, &pm, pl),
             Status::CudaError, "device");
      pm.block_k = 16, pm.k_blocks = 1;  // counted from K's 8 keys: ceil(max_seqlen_k / 16) = 2 expected
      expect("attention: paged, mask's key blocks from the page size", run2(pool, pool, o2, lse, &pm, pl),
             bad_status(), "max_seqlen_k");
      expect("attention: LSE overlaps layout.page_table",
             run2(pool, pool, o2, reinterpret_cast<float*>(const_cast<int32_t*>(table) + 4), nullptr, pl),
             bad_status(), "layout.page_table");
      expect("attention: control, LSE just past layout.page_table",
             run2(pool, pool, o2, reinterpret_cast<float*>(const_cast<int32_t*>(table) + 8), nullptr, pl),
             Status::CudaError, "device");

      // Packed sequences (varlen): 3 sequences packed into Q and O [1, 2, 20, 64] and K and V
      // [1, 2, 24, 64] (K and V fused [total, heads, d]); the offsets in the row_ptr arena.
      int32_t* cu_q = reinterpret_cast<int32_t*>(mem.row_ptr.data() + 6144);
      int32_t* cu_k = cu_q + 8;
      const HeadsView qp = sparsek::packed_heads(mem.b.data(), 1, 2, 20, 64, DType::BF16);
      HeadsView kp = sparsek::packed_heads(mem.values.data(), 1, 2, 24, 64, DType::BF16);
      kp.stride_s = 2 * 64, kp.stride_h = 64;
      const HeadsMutView op = sparsek::packed_heads_mut(mem.c.data(), 1, 2, 20, 64, DType::BF16);
      auto run3 = [&](HeadsView q_, HeadsView k_, HeadsMutView o_, float* l, const sparsek::BlockMaskView* mk,
                      const sparsek::SequenceLayout& layout) {
        sparsek::AttentionOptions op_ = opt;
        op_.layout = layout;
        return sparsek::attention(q_, k_, k_, o_, l, mk, op_, nullptr);
      };
      sparsek::SequenceLayout vl;
      vl.cu_seqlens_q = cu_q, vl.cu_seqlens_k = cu_k, vl.batch = 3, vl.max_seqlen_q = 10, vl.max_seqlen_k = 12;
      expect("attention: control, packed Q and K", run3(qp, kp, op, lse, nullptr, vl), Status::CudaError, "device");
      expect("attention: control, packed, a mask over the longest sequences", run3(qp, kp, op, lse, &m, vl),
             Status::CudaError, "device");
      sparsek::BlockMaskView vm = m;
      vm.patterns = 6, vm.nnzb = 6, vm.batch = 3, vm.heads = 2;
      expect("attention: control, packed, a mask per (sequence, head)", run3(qp, kp, op, lse, &vm, vl),
             Status::CudaError, "device");
      vm.batch = 1;
      expect("attention: packed, 6 patterns made for Q's batch 1", run3(qp, kp, op, lse, &vm, vl), bad_status(),
             "batch the per-head mask was made for (= the layout's batch with packed queries): 1 given, 3 expected");
      vm.patterns = 2, vm.nnzb = 2;
      expect("attention: packed, 2 patterns (Q's batch 1 * heads 2)", run3(qp, kp, op, lse, &vm, vl), bad_status(),
             "patterns of the mask (1, or the layout's batch * heads of Q or of K with packed queries): 2 given");
      vm = m;
      vm.block_q = 8, vm.q_blocks = 3;  // counted from Q's total 20, not max_seqlen_q 10
      expect("attention: packed, a mask's query blocks from the total", run3(qp, kp, op, lse, &vm, vl), bad_status(),
             "ceil(max_seqlen_q / block_q)");
      vm.q_blocks = 2;
      expect("attention: control, packed, block_q 8 over max_seqlen_q 10", run3(qp, kp, op, lse, &vm, vl),
             Status::CudaError, "device");
      HeadsView q_batch2 = sparsek::packed_heads(mem.b.data(), 2, 2, 10, 64, DType::BF16);
      HeadsMutView o_batch2 = sparsek::packed_heads_mut(mem.c.data(), 2, 2, 10, 64, DType::BF16);
      expect("attention: packed queries in a Q of batch 2", run3(q_batch2, kp, o_batch2, lse, nullptr, vl),
             bad_status(), "batch of Q (= 1: packed queries, cu_seqlens_q): 2 given, 1 expected");
      const HeadsView k_padded = sparsek::packed_heads(mem.values.data(), 3, 2, 12, 64, DType::BF16);
      expect("attention: packed keys in a K of batch 3", run3(qp, k_padded, op, lse, nullptr, vl), bad_status(),
             "batch of K (= 1: packed keys, cu_seqlens_k): 3 given, 1 expected");
      sparsek::SequenceLayout bad_v = vl;
      bad_v.max_seqlen_q = 6;  // 3 sequences of at most 6 cannot hold 20 queries
      expect("attention: packed, 20 queries past 3 * max_seqlen_q 6", run3(qp, kp, op, lse, nullptr, bad_v),
             bad_status(), "exceeds the layout's batch * max_seqlen_q");
      bad_v = vl;
      bad_v.max_seqlen_k = 7;
      expect("attention: packed, 24 keys past 3 * max_seqlen_k 7", run3(qp, kp, op, lse, nullptr, bad_v), bad_status(),
             "exceeds the layout's batch * max_seqlen_k");
      bad_v = vl;
      bad_v.batch = 0;
      expect("attention: packed, no sequence for 20 queries", run3(qp, kp, op, lse, nullptr, bad_v), bad_status(),
             "batch * max_seqlen_q");
      bad_v = vl;
      bad_v.batch = INT32_MAX;
      expect("attention: packed, 2^31 - 1 sequences", run3(qp, kp, op, lse, nullptr, bad_v), bad_status(),
             "below 2^31 - 1");
      bad_v = vl;
      bad_v.cu_seqlens_q = reinterpret_cast<const int32_t*>(mem.row_ptr.data() + 6146);
      expect("attention: cu_seqlens_q 2 bytes off", run3(qp, kp, op, lse, nullptr, bad_v), bad_status(), "aligned");
      bad_v = vl;
      bad_v.page_table = table, bad_v.max_pages = 4, bad_v.seqlens_k = lens;
      expect("attention: packed keys with a page table", run3(qp, kp, op, lse, nullptr, bad_v), bad_status(),
             "exclusive");
      // One side packed: padded K and V of one entry per sequence, or padded Q and O.
      bad_v = vl;
      bad_v.cu_seqlens_k = nullptr, bad_v.max_seqlen_k = 0;
      expect("attention: control, packed Q, padded K [3, 2, 12, 64]", run3(qp, k_padded, op, lse, nullptr, bad_v),
             Status::CudaError, "device");
      const HeadsView k_padded2 = sparsek::packed_heads(mem.values.data(), 2, 2, 12, 64, DType::BF16);
      expect("attention: packed Q, padded K of batch 2 for 3 sequences",
             run3(qp, k_padded2, op, lse, nullptr, bad_v), bad_status(),
             "batch of K (= the layout's batch: packed queries, padded keys): 2 given, 3 expected");
      bad_v.max_seqlen_k = 5;
      expect("attention: packed Q, padded K, max_seqlen_k 5 of K's 12", run3(qp, k_padded, op, lse, nullptr, bad_v),
             bad_status(), "max_seqlen_k of the layout");
      const HeadsView q_padded = sparsek::packed_heads(mem.b.data(), 3, 2, 6, 64, DType::BF16);
      const HeadsMutView o_padded = sparsek::packed_heads_mut(mem.c.data(), 3, 2, 6, 64, DType::BF16);
      bad_v = vl;
      bad_v.cu_seqlens_q = nullptr, bad_v.max_seqlen_q = 0;
      expect("attention: control, padded Q [3, 2, 6, 64], packed K", run3(q_padded, kp, o_padded, lse, nullptr, bad_v),
             Status::CudaError, "device");
      bad_v.batch = 2;
      expect("attention: padded Q of batch 3, packed K, layout batch 2",
             run3(q_padded, kp, o_padded, lse, nullptr, bad_v), bad_status(), "batch of the layout (= batch of Q)");
      HeadsMutView o_on_cu = op;
      o_on_cu.data = shifted(cu_q, -64);
      expect("attention: O overlaps layout.cu_seqlens_q", run3(qp, kp, o_on_cu, nullptr, nullptr, vl), bad_status(),
             "layout.cu_seqlens_q");
      expect("attention: LSE overlaps layout.cu_seqlens_k",
             run3(qp, kp, op, reinterpret_cast<float*>(cu_k + 3), nullptr, vl), bad_status(), "layout.cu_seqlens_k");
      expect("attention: control, LSE just past layout.cu_seqlens_k",
             run3(qp, kp, op, reinterpret_cast<float*>(cu_k + 4), nullptr, vl), Status::CudaError, "device");
    }
    int64_t nnzb = -1;
    sparsek::TopkGatingOptions go;
    go.top_k = -1;
    expect("block_topk_nnzb: top_k -1", sparsek::block_topk_nnzb(1, 2, 8, 8, go, &nnzb), bad_status(), "top_k");
    go.top_k = 4;
    expect("block_topk_nnzb: batch*heads*blocks overflow", sparsek::block_topk_nnzb(kHuge, 4, 8, 8, go, &nnzb),
           bad_status(), "batch * heads overflows int64");
    expect("block_topk_nnzb: batch*heads overflows int64", sparsek::block_topk_nnzb(INT64_MAX, 2, 8, 8, go, &nnzb),
           bad_status(), "batch * heads overflows int64");
    {
      int32_t* rp = reinterpret_cast<int32_t*>(mem.row_ptr.data());
      int32_t* ci = reinterpret_cast<int32_t*>(mem.col_idx.data());
      sparsek::BlockMaskView out_view;
      // 2^31 * 2^31 patterns of two query blocks: the scores' count overflows int64.
      const int64_t half = int64_t(1) << 31;
      expect("block_topk_scores: batch*heads*q_blocks*k_blocks overflows",
             sparsek::block_topk_scores(reinterpret_cast<const float*>(mem.b.data()), half, half, 256, 256, go, rp,
                                        ci, &out_view, nullptr),
             bad_status(), "must fit i32");
      expect("block_topk_scores: batch*heads overflows int64",
             sparsek::block_topk_scores(reinterpret_cast<const float*>(mem.b.data()), INT64_MAX, INT64_MAX, 256, 256,
                                        go, rp, ci, &out_view, nullptr),
             bad_status(), "batch * heads overflows int64");
      // The outputs may overlap neither each other nor an input.
      const float* scores = reinterpret_cast<const float*>(mem.b.data());
      expect("block_topk_scores: row_ptr overlaps col_idx",
             sparsek::block_topk_scores(scores, 1, 2, 256, 256, go, rp, rp + 2, &out_view, nullptr), bad_status(),
             "row_ptr overlaps col_idx");
      expect("block_topk_scores: col_idx overlaps the scores",
             sparsek::block_topk_scores(scores, 1, 2, 256, 256, go, rp, reinterpret_cast<int32_t*>(mem.b.data()) + 4,
                                        &out_view, nullptr),
             bad_status(), "col_idx overlaps scores");
      expect("block_topk: row_ptr overlaps Q",
             sparsek::block_topk(q, kv, go, static_cast<int32_t*>(shifted(q.data, 0)), ci, &out_view, nullptr), bad_status(),
             "row_ptr overlaps Q");
      expect("block_topk: col_idx overlaps K",
             sparsek::block_topk(q, kv, go, rp, static_cast<int32_t*>(shifted(kv.data, 32)), &out_view, nullptr),
             bad_status(), "col_idx overlaps K");
      expect("block_topk_scores: control", sparsek::block_topk_scores(scores, 1, 2, 256, 256, go, rp, ci, &out_view,
                                                                      nullptr),
             Status::CudaError, "device");
    }
    // block_topk_nnzb sums the kept blocks in closed form: no loop over 2^30 query blocks.
    {
      sparsek::TopkGatingOptions big;
      big.causal = true;
      big.top_k = INT32_MAX;
      big.block_q = big.block_k = 1024;
      const int64_t seq = int64_t(1) << 40;  // 2^30 blocks each way
      struct Timed {
        const char* name;
        int64_t batch, heads;
        Status want;
        int64_t nnzb;
      };
      const Timed timed[] = {
          {"block_topk_nnzb: batch 0, seq_q 2^40 (2^30 query blocks)", 0, 3, Status::Success, 0},
          {"block_topk_nnzb: heads 0, seq_q 2^40", 5, 0, Status::Success, 0},
          {"block_topk_nnzb: one head, 2^30 causal rows (2^59 blocks)", 1, 1, Status::InvalidArgument, -1},
      };
      for (const Timed& t : timed) {
        int64_t got = -1;
        const auto t0 = std::chrono::steady_clock::now();
        const sparsek::Result r = sparsek::block_topk_nnzb(t.batch, t.heads, seq, seq, big, &got);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string why;
        if (r.status != t.want) why = std::string("returned ") + status_name(r.status) + ": " + r.message;
        else if (t.want == Status::Success && got != t.nnzb) why = "nnzb = " + std::to_string(got);
        else if (t.want != Status::Success && std::strncmp(r.message, "sparsek: ", 9) != 0) why = "no prefix";
        else if (secs > 0.25) why = "took " + std::to_string(secs) + " s";
        std::printf("%s %s: %s (%.6f s)\n", why.empty() ? "PASS" : "FAIL", t.name,
                    why.empty() ? r.message : why.c_str(), secs);
        (why.empty() ? passed : failed)++;
      }
      // The closed form against the row-by-row sum (causal, unequal blocks, small top_k), both
      // alignments; bottom-right with more queries than keys (rows with no candidate) and fewer.
      struct Lengths {
        sparsek::CausalAlignment alignment;
        int64_t sq, sk;
      };
      const Lengths lengths[] = {{sparsek::CausalAlignment::TopLeft, 5000, 3000},
                                 {sparsek::CausalAlignment::BottomRight, 5000, 3000},
                                 {sparsek::CausalAlignment::BottomRight, 700, 9000},
                                 {sparsek::CausalAlignment::BottomRight, 3000, 3000}};
      for (const Lengths& l : lengths) {
        sparsek::TopkGatingOptions small;
        small.causal = true, small.top_k = 3, small.block_q = 96, small.block_k = 160;
        small.causal_alignment = l.alignment;
        const int64_t off = l.alignment == sparsek::CausalAlignment::BottomRight ? l.sk - l.sq : 0;
        int64_t got = -1, want = 0;
        const int64_t qb = (l.sq + 95) / 96, kb = (l.sk + 159) / 160;
        for (int64_t i = 0; i < qb; ++i) {
          const int64_t last = (i + 1) * 96 - 1 + off;  // key block j is a candidate when j*160 <= last
          const int64_t cand = last < 0 ? 0 : std::min<int64_t>(kb, last / 160 + 1);
          want += std::min<int64_t>(small.top_k, cand);
        }
        const sparsek::Result r = sparsek::block_topk_nnzb(2, 3, l.sq, l.sk, small, &got);
        const bool ok = r.ok() && got == 6 * want;
        std::printf("%s block_topk_nnzb: closed form = row sum (%s, seq %lld / %lld: %lld, want %lld)\n",
                    ok ? "PASS" : "FAIL", l.alignment == sparsek::CausalAlignment::TopLeft ? "top-left" : "bottom-right",
                    (long long)l.sq, (long long)l.sk, (long long)got, (long long)(6 * want));
        (ok ? passed : failed)++;
      }
    }
    sparsek::BlockMaskView out;
    expect("block_topk_scores: null scores",
           sparsek::block_topk_scores(nullptr, 1, 2, 256, 256, go, reinterpret_cast<int32_t*>(mem.row_ptr.data()),
                                      reinterpret_cast<int32_t*>(mem.col_idx.data()), &out, nullptr),
           bad_status(), "scores");
    bad = kv;
    bad.dtype = DType::F16;
    expect("block_topk: Q and K of two dtypes",
           sparsek::block_topk(q, bad, go, reinterpret_cast<int32_t*>(mem.row_ptr.data()),
                               reinterpret_cast<int32_t*>(mem.col_idx.data()), &out, nullptr),
           Status::NotSupported, "one dtype");
  }
  {
    // quantize_fp8: A (f16, 128 x 128 in 64 x 64 blocks, nnzb 2) into E4M3 values and
    // per-block scales, each in a buffer of its own.
    const Views v = base(mem);
    sparsek::QuantizedBsrOut out;
    out.values = mem.b.data();
    out.scales = reinterpret_cast<float*>(mem.c.data());
    auto q = [&](const BsrView& a, const sparsek::QuantizedBsrOut& o) { return sparsek::quantize_fp8(a, o, nullptr); };
    expect("quantize_fp8: control", q(v.a, out), Status::CudaError, "device");
    sparsek::QuantizedBsrOut o = out;
    o.granularity = ScaleKind::PerTensor;
    expect("quantize_fp8: control, per tensor", q(v.a, o), Status::CudaError, "device");
    o = out, o.granularity = ScaleKind::PerColumn;
    expect("quantize_fp8: per-column granularity", q(v.a, o), bad_status(), "granularity");
    o = out, o.granularity = static_cast<ScaleKind>(9);
    expect("quantize_fp8: granularity = 9", q(v.a, o), bad_status(), "ScaleKind");
    o = out, o.dtype = static_cast<DType>(9);
    expect("quantize_fp8: out.dtype = 9", q(v.a, o), bad_status(), "DType");
    o = out, o.dtype = DType::F16;
    expect("quantize_fp8: out.dtype f16", q(v.a, o), Status::NotSupported, "e4m3 or e5m2");
    o = out, o.values = nullptr;
    expect("quantize_fp8: null out.values", q(v.a, o), bad_status(), "out.values");
    o = out, o.scales = nullptr;
    expect("quantize_fp8: null out.scales", q(v.a, o), bad_status(), "out.scales");
    o = out, o.scales = reinterpret_cast<float*>(mem.c.data() + 4);
    expect("quantize_fp8: misaligned out.scales", q(v.a, o), bad_status(), "aligned");
    o = out, o.values = const_cast<void*>(v.a.values);
    expect("quantize_fp8: out.values on A.values", q(v.a, o), bad_status(), "overlaps A.values");
    o = out, o.scales = reinterpret_cast<float*>(mem.b.data() + 16);
    expect("quantize_fp8: out.scales inside out.values", q(v.a, o), bad_status(), "overlaps out.scales");
    o = out, o.scales = reinterpret_cast<float*>(const_cast<int32_t*>(v.a.row_ptr));
    expect("quantize_fp8: out.scales on A.row_ptr", q(v.a, o), bad_status(), "A.row_ptr");
    BsrView a = v.a;
    a.dtype = DType::E4M3;
    expect("quantize_fp8: an E4M3 source", q(a, out), Status::NotSupported, "f16, bf16 or f32");
    a = v.a, a.scales = reinterpret_cast<const float*>(mem.c.data()), a.scale_kind = ScaleKind::PerBlock;
    expect("quantize_fp8: scales on an f16 source", q(a, out), bad_status(), "scales");
    a = v.a, a.nnzb = 5;
    expect("quantize_fp8: nnzb > blocks", q(a, out), bad_status(), "nnzb");
    a = v.a, a.m = 100;
    expect("quantize_fp8: m not a multiple of bm", q(a, out), bad_status(), "multiple");
    a = v.a, a.bm = a.bk = 1 << 30, a.m = a.k = int64_t(1) << 31, a.nnzb = 4;
    expect("quantize_fp8: value count overflows", q(a, out), bad_status(), "overflow");
    a = v.a, a.nnzb = 0;
    o = out, o.values = nullptr;
    expect("quantize_fp8: control, nnzb 0 without out.values", q(a, o), Status::CudaError, "device");
  }
  // The gated epilogue (SpmmOptions::gated) and the MLP (mlp.hpp): their shape rules, and
  // both of the MLP's products checked before anything is launched.
  {
    Views v = base(mem);  // A 128 x 128 in 64 x 64 blocks: one (gate, up) pair of block-rows
    SpmmOptions g = v.options;
    g.gated = true;
    DenseMutView half = v.c;
    half.rows = 64;
    expect("gated: control", sparsek::spmm(v.a, v.b, half, g, nullptr), Status::CudaError, "device");
    expect("gated: C with m rows", sparsek::spmm(v.a, v.b, v.c, g, nullptr), bad_status(), "rows of C (= m/2 of A, gated): 128 given, 64 expected");
    SpmmOptions gb = g;
    gb.beta = 1.0f;
    expect("gated: beta = 1", sparsek::spmm(v.a, v.b, half, gb, nullptr), bad_status(), "beta");
    SpmmOptions gt = g;
    gt.transpose_a = true;
    gt.transpose_index.col_ptr = v.a.row_ptr, gt.transpose_index.row_idx = v.a.col_idx;
    gt.transpose_index.block_id = v.a.col_idx;
    expect("gated: op(A) = A^T", sparsek::spmm(v.a, v.b, half, gt, nullptr), bad_status(), "op(A) = A only");
    BsrView odd = v.a;
    odd.m = 192;
    DenseMutView third = v.c;
    third.rows = 96;
    expect("gated: three block-rows", sparsek::spmm(odd, v.b, third, g, nullptr), bad_status(), "even number");
    SpmmOptions gbias = g;
    // The bias has A's m = 128 values (256 bytes): at 64 bytes before C it reaches into C,
    // where C's 64 rows alone (128 bytes) would not.
    gbias.bias = mem.c.data() + 64;
    DenseMutView late = half;
    late.data = mem.c.data() + 256;
    expect("gated: a bias whose m values reach C", sparsek::spmm(v.a, v.b, late, gbias, nullptr), bad_status(),
           "overlaps the bias");
    gbias.bias = mem.c.data() + 64 * 64 * 2 + 16;  // past C (64 x 64): allowed
    expect("gated: control, a bias past C", sparsek::spmm(v.a, v.b, half, gbias, nullptr), Status::CudaError,
           "device");

    // The MLP: gate_up = A (2 * 64 x 128: hidden 128, inter 64), down 128 x 64 (64 x 64 blocks),
    // x 128 x 64 in B's arena, h 64 x 64 at the start of C's, y 128 x 64 after it.
    sparsek::MlpView mlp;
    mlp.gate_up = v.a;
    mlp.down = v.a;
    mlp.down.k = 64, mlp.down.nnzb = 2;
    mlp.down.values = mem.values.data() + 32768;  // its own values, after gate_up's 16 KiB
    const DenseView x = v.b;
    DenseMutView h{mem.c.data(), 64, 64, 64, Layout::RowMajor, DType::F16};
    DenseMutView y{mem.c.data() + 64 * 64 * 2, 128, 64, 64, Layout::RowMajor, DType::F16};
    auto run = [&](const sparsek::MlpView& m, const DenseMutView& hh, const DenseMutView& yy) {
      return sparsek::sparse_mlp(m, x, hh, yy, nullptr);
    };
    expect("sparse_mlp: control", run(mlp, h, y), Status::CudaError, "device");
    DenseMutView bad = y;
    bad.rows = 100;
    expect("sparse_mlp: y rows != down's m", run(mlp, h, bad), bad_status(), "the down product: rows of C (= m of A): 100 given");
    bad = h, bad.rows = 128;
    expect("sparse_mlp: h rows != inter", run(mlp, bad, y), bad_status(), "the gate and up product");
    sparsek::MlpView m2 = mlp;
    m2.down.k = 128;
    expect("sparse_mlp: down takes 128 inputs, inter is 64", run(m2, h, y), bad_status(), "down product");
    bad = y, bad.data = const_cast<void*>(x.data);
    expect("sparse_mlp: y on x", run(mlp, h, bad), bad_status(), "y overlaps x");
    bad = h, bad.data = const_cast<void*>(mlp.down.values);
    expect("sparse_mlp: h on down.values", run(mlp, bad, y), bad_status(), "h overlaps down.values");
    m2 = mlp, m2.activation = static_cast<Activation>(9);
    expect("sparse_mlp: activation = 9", run(m2, h, y), bad_status(), "activation");
    m2 = mlp, m2.gate_up.m = 192;
    expect("sparse_mlp: gate_up of three block-rows", run(m2, h, y), bad_status(), "even number");
  }
  // Pointers misaligned for their type, entry by entry (spmm's are cases above): refused
  // before the device query, naming the operand, nothing touched.
  {
    const Views v = base(mem);
    // dense_spmm: D (f16) at an odd address.
    {
      SpmmOptions o;
      o.transpose_index.col_ptr = v.a.row_ptr, o.transpose_index.row_idx = v.a.col_idx;
      o.transpose_index.block_id = v.a.col_idx;
      const DenseView d{shifted(mem.b.data(), 1), 48, 128, 128, Layout::RowMajor, DType::F16};
      DenseMutView c{mem.c.data(), 48, 128, 128, Layout::RowMajor, DType::F16};
      expect("dense_spmm: D at an odd address", sparsek::dense_spmm(d, v.a, c, o, nullptr), bad_status(),
             "2-byte aligned");
    }
    // sddmm: A, B, S.values, S.row_ptr, S.col_idx.
    {
      const DenseView a{mem.b.data(), 128, 64, 64, Layout::RowMajor, DType::F16};
      const DenseView b{mem.c.data(), 64, 128, 64, Layout::ColMajor, DType::F16};
      sparsek::BsrMutView s;
      s.m = 128, s.n = 128, s.bm = 64, s.bn = 64, s.nnzb = 2;
      s.row_ptr = reinterpret_cast<const int32_t*>(mem.row_ptr.data());
      s.col_idx = reinterpret_cast<const int32_t*>(mem.col_idx.data());
      s.values = mem.values.data();
      sparsek::SddmmOptions o;
      DenseView odd = a;
      odd.data = shifted(a.data, 1);
      expect("sddmm: A at an odd address", sparsek::sddmm(odd, b, s, o, nullptr), bad_status(), "A.data");
      odd = b, odd.data = shifted(b.data, 3);
      expect("sddmm: B at an odd address", sparsek::can_implement(a, odd, s, o, nullptr), bad_status(), "B.data");
      sparsek::BsrMutView so = s;
      so.dtype = DType::F32;
      so.values = shifted(s.values, 2);
      expect("sddmm: f32 S.values 2 bytes off", sparsek::sddmm(a, b, so, o, nullptr), bad_status(),
             "S.values is not 4-byte aligned");
      so = s, so.row_ptr = static_cast<const int32_t*>(shifted(s.row_ptr, 2));
      expect("sddmm: S.row_ptr 2 bytes off", sparsek::sddmm(a, b, so, o, nullptr), bad_status(), "S.row_ptr");
      so = s, so.col_idx = static_cast<const int32_t*>(shifted(s.col_idx, 1));
      expect("sddmm: S.col_idx 1 byte off", sparsek::sddmm(a, b, so, o, nullptr), bad_status(), "S.col_idx");
    }
    // attention: Q, K, V, O at odd addresses (the lse and mask arrays were checked before).
    {
      using sparsek::HeadsMutView;
      using sparsek::HeadsView;
      const HeadsView q = sparsek::packed_heads(mem.b.data(), 1, 2, 8, 64, DType::BF16);
      const HeadsView kv = sparsek::packed_heads(mem.values.data(), 1, 2, 8, 64, DType::BF16);
      const HeadsMutView o = sparsek::packed_heads_mut(mem.c.data(), 1, 2, 8, 64, DType::BF16);
      const sparsek::AttentionOptions opt;
      HeadsView odd = q;
      odd.data = shifted(q.data, 1);
      expect("attention: Q at an odd address", sparsek::attention(odd, kv, kv, o, nullptr, nullptr, opt, nullptr),
             bad_status(), "Q.data is not 2-byte aligned");
      odd = kv, odd.data = shifted(kv.data, 1);
      expect("attention: V at an odd address", sparsek::attention(q, kv, odd, o, nullptr, nullptr, opt, nullptr),
             bad_status(), "V.data");
      HeadsMutView odd_o = o;
      odd_o.data = shifted(o.data, 1);
      expect("attention: O at an odd address",
             sparsek::can_implement(q, kv, kv, odd_o, nullptr, nullptr, opt, nullptr), bad_status(), "O.data");
      // The top-k gating reads Q and K the same way.
      sparsek::TopkGatingOptions go;
      go.top_k = 1;
      sparsek::BlockMaskView out;
      out.block_q = -7;
      odd = kv, odd.data = shifted(kv.data, 1);
      expect("block_topk: K at an odd address",
             sparsek::block_topk(q, odd, go, reinterpret_cast<int32_t*>(mem.row_ptr.data()),
                                 reinterpret_cast<int32_t*>(mem.col_idx.data()), &out, nullptr),
             bad_status(), "K.data");
      const bool untouched = out.block_q == -7;
      std::printf("%s block_topk: the mask view unwritten after the refusal\n", untouched ? "PASS" : "FAIL");
      (untouched ? passed : failed)++;
    }
    // quantize_fp8: A's values (f16 at an odd address, f32 at 2 bytes off) and index arrays.
    {
      sparsek::QuantizedBsrOut out;
      out.values = mem.b.data();
      out.scales = reinterpret_cast<float*>(mem.c.data());
      BsrView a = v.a;
      a.values = shifted(v.a.values, 1);
      expect("quantize_fp8: f16 A.values at an odd address", sparsek::quantize_fp8(a, out, nullptr), bad_status(),
             "A.values is not 2-byte aligned");
      a = v.a, a.dtype = DType::F32, a.values = shifted(v.a.values, 2);
      expect("quantize_fp8: f32 A.values 2 bytes off", sparsek::quantize_fp8(a, out, nullptr), bad_status(),
             "A.values is not 4-byte aligned");
      a = v.a, a.row_ptr = static_cast<const int32_t*>(shifted(v.a.row_ptr, 2));
      expect("quantize_fp8: A.row_ptr 2 bytes off", sparsek::quantize_fp8(a, out, nullptr), bad_status(), "row_ptr");
      a = v.a, a.dtype = DType::F32, a.values = shifted(v.a.values, 4);
      expect("quantize_fp8: control, f32 A.values 4-byte aligned (not 16)", sparsek::quantize_fp8(a, out, nullptr),
             Status::CudaError, "device");
      sparsek::QuantizedBsrOut odd = out;
      odd.values = shifted(out.values, 1);
      expect("quantize_fp8: control, E4M3 out.values at an odd address", sparsek::quantize_fp8(v.a, odd, nullptr),
             Status::CudaError, "device");
    }
    // sparse_mlp: x, h and y, named as the MLP's operands; the weights' arrays as each
    // product's A.
    {
      sparsek::MlpView mlp;
      mlp.gate_up = v.a;
      mlp.down = v.a;
      mlp.down.k = 64, mlp.down.nnzb = 2;
      mlp.down.values = mem.values.data() + 32768;
      const DenseView x = v.b;
      // y well after h, so that h moved by a byte still overlaps nothing.
      const DenseMutView h{mem.c.data(), 64, 64, 64, Layout::RowMajor, DType::F16};
      const DenseMutView y{mem.c.data() + 16384, 128, 64, 64, Layout::RowMajor, DType::F16};
      expect("sparse_mlp: control for the cases below", sparsek::sparse_mlp(mlp, x, h, y, nullptr), Status::CudaError,
             "device");
      DenseView odd_x = x;
      odd_x.data = shifted(x.data, 1);
      expect("sparse_mlp: x at an odd address", sparsek::sparse_mlp(mlp, odd_x, h, y, nullptr), bad_status(),
             "x.data is not 2-byte aligned");
      DenseMutView odd = h;
      odd.data = shifted(h.data, 1);
      expect("sparse_mlp: h at an odd address", sparsek::sparse_mlp(mlp, x, odd, y, nullptr), bad_status(),
             "h.data is not 2-byte aligned");
      odd = y, odd.data = shifted(y.data, 1);
      expect("sparse_mlp: y at an odd address", sparsek::sparse_mlp(mlp, x, h, odd, nullptr), bad_status(),
             "y.data is not 2-byte aligned");
      odd = y, odd.dtype = DType::F32, odd.data = shifted(y.data, 2);
      expect("sparse_mlp: f32 y 2 bytes off", sparsek::sparse_mlp(mlp, x, h, odd, nullptr), bad_status(),
             "y.data is not 4-byte aligned");
      sparsek::MlpView m2 = mlp;
      m2.down.col_idx = static_cast<const int32_t*>(shifted(mlp.down.col_idx, 2));
      expect("sparse_mlp: down.col_idx 2 bytes off", sparsek::sparse_mlp(m2, x, h, y, nullptr), bad_status(),
             "the down product: A.row_ptr or A.col_idx");
      m2 = mlp, m2.gate_up.values = shifted(mlp.gate_up.values, 1);
      expect("sparse_mlp: gate_up.values at an odd address", sparsek::sparse_mlp(m2, x, h, y, nullptr), bad_status(),
             "the gate and up product: A.values");
    }
  }
  // CUDA errors without a GPU: the device query's refusal carries its cudaError_t, and a
  // runtime that cannot start (every GPU hidden, or no driver) is reported as that
  // CudaError, not as an error the caller left pending. The pending-error cases need a GPU
  // (a clearable error): tests/cpp/index_check.cpp.
  {
    Views v = base(mem);
    auto check = [&](const char* name, bool ok, const std::string& detail) {
      std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name, detail.c_str());
      (ok ? passed : failed)++;
    };
    const sparsek::Result r = sparsek::spmm(v.a, v.b, v.c, v.options, nullptr);
    check("CudaError carries its cudaError_t",
          r.status == Status::CudaError && r.cuda_error != cudaSuccess &&
              std::strstr(r.message, cudaGetErrorString(r.cuda_error)) != nullptr,
          std::string(r.message) + " (cuda_error " + std::to_string(int(r.cuda_error)) + ")");
    const sparsek::Result ok{};
    check("Result{} is success with cudaSuccess", ok.ok() && ok.cuda_error == cudaSuccess && ok.message[0] == 0, "");
    Backend chosen = Backend::Hopper;
    const sparsek::Result c = sparsek::can_implement(v.a, v.b, v.c, v.options, &chosen);
    check("can_implement writes *chosen = Auto on failure", !c.ok() && chosen == Backend::Auto, c.message);
  }
  if (!device_ok) {
    std::printf("FAIL the device part (%s)\n", child < 0 ? "fork failed" : "its lines are above");
    ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
