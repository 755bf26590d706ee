// A fuzz target of the C++ API's validation, without a GPU: random problems (seeded; the
// seed is printed and SPARSEK_FUZZ_SEED=<seed> replays a run) for every entry point —
// spmm, can_implement, dense_spmm, can_implement_dense_spmm, sddmm and its can_implement,
// attention and its can_implement, block_topk_nnzb, block_topk, block_topk_scores,
// quantize_fp8 — with
// huge, zero, negative and INT64_MIN/MAX sizes, strides and leading dimensions, enum values
// outside their range, null, misaligned (by 1 .. alignment - 1 bytes off what the pointer's
// type needs), wild and overlapping pointers, and mismatched dims. Each draw also goes to
// the entry's validator (sparsek::detail, cpp/ on the include path) with the devices drawn:
// the current one and the stream's, another one a quarter of the time (see "the validators,
// handed their devices" below).
//
// Every pointer is null, wild (never mapped) or points into a poisoned host arena of one page;
// the arenas sit 2 MiB apart in a reserved region whose other pages are inaccessible, so a
// call that wrote into an arena would break its poison (checked after every call) and one that
// touched a view past an arena's page would crash.
// GPUs are hidden (CUDA_VISIBLE_DEVICES="" before the first CUDA call): a call that passes
// validation stops at the device query with Status::CudaError.
//
// Each case is also judged by a model of the documented rules written here, independently
// of the library (__int128 arithmetic: dims, block counts, overflow of every size, enums,
// null pointers and pointers misaligned for their type, output overlap): the library must
// return InvalidArgument exactly where the model finds a malformed view, NotSupported where
// only the dtype combination is unsupported, and CudaError (the device query) everywhere else
// (a validator handed its devices: InvalidArgument for a stream of another device, else
// Success). Checked as
// well: every status is a Status value, every failure's message starts with exactly one
// "sparsek: ", *chosen is Auto after a failure, outputs (*nnzb, *mask) are written only on success, and
// block_topk_nnzb's count equals the model's. One line per entry point, then
// "N passed, N failed"; exit status 1 on any failure.
//
//   SPARSEK_FUZZ_SEED=<u64>   replay a run;  SPARSEK_FUZZ_ITERS=<n>   draws per entry point
//   (default 100000);  SPARSEK_FUZZ_VERBOSE=1   count the messages (digits dropped).
#include <sparsek/attention.hpp>
#include <sparsek/dense_sparse.hpp>
#include <sparsek/mlp.hpp>
#include <sparsek/quantize.hpp>
#include <sparsek/sddmm.hpp>
#include <sparsek/sparsek.hpp>

// The entries' validators (not installed: the build puts cpp/ on this test's include path).
#include "attention/gating.hpp"
#include "attention/problem.hpp"
#include "core/validate.hpp"
#include "mlp/problem.hpp"
#include "quantize/problem.hpp"
#include "sddmm/problem.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using sparsek::Activation;
using sparsek::Backend;
using sparsek::BlockMaskView;
using sparsek::BsrMutView;
using sparsek::BsrView;
using sparsek::DenseView;
using sparsek::DType;
using sparsek::HeadsView;
using sparsek::Layout;
using sparsek::Result;
using sparsek::ScaleKind;
using sparsek::SpmmOptions;
using sparsek::Status;
using i128 = __int128;

constexpr i128 kI64Max = INT64_MAX;
constexpr i128 kI32Max = INT32_MAX;
constexpr i128 kU64Max = UINT64_MAX;

// ---- the arenas ------------------------------------------------------------------------

constexpr int kSlots = 10;
constexpr size_t kArena = 4096;                // poisoned, readable and writable
constexpr size_t kSlotStride = size_t(2) << 20;  // the rest of each slot is PROT_NONE
constexpr uint8_t kPoison = 0xA5;

struct Arenas {
  uint8_t* base = nullptr;
  uint8_t poison[kArena];
  Arenas() {
    void* p = mmap(nullptr, kSlots * kSlotStride, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::exit(2);
    }
    base = static_cast<uint8_t*>(p);
    std::memset(poison, kPoison, sizeof(poison));
    for (int i = 0; i < kSlots; ++i) {
      if (mprotect(slot(i), kArena, PROT_READ | PROT_WRITE) != 0) {
        std::perror("mprotect");
        std::exit(2);
      }
      std::memcpy(slot(i), poison, kArena);
    }
  }
  uint8_t* slot(int i) const { return base + size_t(i) * kSlotStride; }
  bool intact() const {
    for (int i = 0; i < kSlots; ++i)
      if (std::memcmp(slot(i), poison, kArena) != 0) return false;
    return true;
  }
  void repair() {
    for (int i = 0; i < kSlots; ++i) std::memcpy(slot(i), poison, kArena);
  }
};

// ---- random values ---------------------------------------------------------------------

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  uint64_t bits() { return g(); }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(bits() % uint64_t(hi - lo + 1)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(g) < p; }
  template <class T, size_t N>
  T pick(const T (&xs)[N]) {
    return xs[bits() % N];
  }

  int64_t wild64() {
    static const int64_t kEdges[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 1000, 65536,
                                     INT32_MAX - 1, INT32_MAX, int64_t(INT32_MAX) + 1, int64_t(1) << 32,
                                     int64_t(1) << 40, int64_t(1) << 47, int64_t(1) << 61, int64_t(1) << 62,
                                     INT64_MAX / 2, INT64_MAX / 2 + 1, INT64_MAX - 1, INT64_MAX, -1, -2, -128,
                                     INT32_MIN, INT64_MIN + 1, INT64_MIN};
    switch (bits() % 5) {
      case 0:
      case 1: return pick(kEdges);
      case 2: return range(0, 300);
      case 3: {  // a power of two, +- 1
        const int64_t p = int64_t(1) << range(0, 62);
        return p + range(-1, 1);
      }
      default: return int64_t(bits());
    }
  }
  int32_t wild32() {
    static const int32_t kEdges[] = {0,   1,   2,   3,   7,       8,       15,            16,        17, 32, 64, 96,
                                     127, 128, 129, 256, 1 << 20, 1 << 30, INT32_MAX - 1, INT32_MAX, -1, -64,
                                     INT32_MIN};
    switch (bits() % 4) {
      case 0:
      case 1: return pick(kEdges);
      case 2: return int32_t(range(0, 300));
      default: return int32_t(uint32_t(bits()));
    }
  }
  template <class E>
  E wild_enum() {
    static const int32_t kValues[] = {0, 1, 2, 3, 4, 5, 7, -1, INT32_MIN, INT32_MAX, 0x5a5a};
    return static_cast<E>(pick(kValues));
  }
  float wild_float() {
    static const float kValues[] = {0.0f, -0.0f, 1.0f, 0.125f, -1.0f, 1e30f, 1e-40f, NAN, INFINITY, -INFINITY};
    return chance(0.7) ? float(range(0, 100)) / 64.0f : pick(kValues);
  }
};

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
// x clamped to int64 (the draws' arithmetic on wild values never overflows).
int64_t sat(i128 x) { return int64_t(std::max<i128>(std::min<i128>(x, INT64_MAX), INT64_MIN)); }
void* at(uintptr_t a) { return reinterpret_cast<void*>(a); }

// A pointer: null, into an arena (16-byte aligned or not), near another operand's, or wild.
void* wild_ptr(Rng& rng, const Arenas& mem, const std::vector<const void*>& others) {
  static const uintptr_t kWild[] = {1, 2, 4, 16, 4096, uintptr_t(1) << 47, uintptr_t(1) << 63, UINTPTR_MAX,
                                    UINTPTR_MAX - 1, UINTPTR_MAX - 15, UINTPTR_MAX & ~uintptr_t(4095),
                                    (UINTPTR_MAX & ~uintptr_t(4095)) - (uintptr_t(1) << 20)};
  const uint64_t r = rng.bits() % 20;
  if (r < 3) return nullptr;
  if (r < 10) return mem.slot(int(rng.bits() % kSlots)) + (rng.bits() % kArena) / 16 * 16;
  if (r < 12) return mem.slot(int(rng.bits() % kSlots)) + rng.bits() % kArena;
  if (r < 17 && !others.empty()) {
    const void* o = others[rng.bits() % others.size()];
    const int64_t delta = rng.chance(0.5) ? 2 * rng.range(-64, 64) : rng.range(-4096, 4096);
    return at(addr(o) + uintptr_t(delta));
  }
  return at(rng.pick(kWild));
}

// The base pointer of an arena at a random 16-byte aligned offset in its first half.
void* in_slot(Rng& rng, const Arenas& mem, int slot) {
  return mem.slot(slot) + (rng.bits() % (kArena / 2)) / 16 * 16;
}

// `p` moved off an `align`-byte boundary by 1 .. align - 1 bytes (the alignment a pointer of
// its type needs; by 1 .. 15 where that is one byte), or one time in four by a multiple of
// `align` (still aligned: a control). Null stays null.
template <class T>
T* misalign(Rng& rng, T* p, int64_t align) {
  if (p == nullptr) return p;
  const int64_t a = std::max<int64_t>(align, 1);
  const int64_t delta = rng.chance(0.25) ? a * rng.range(-2, 2) : a > 1 ? rng.range(1, a - 1) : rng.range(1, 15);
  using Byte = std::conditional_t<std::is_const_v<T>, const uint8_t, uint8_t>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + delta);
}

// ---- the model: the documented rules, in __int128 --------------------------------------

enum class Want { Invalid, Unsupported, Reached };

const char* want_name(Want w) {
  switch (w) {
    case Want::Invalid: return "InvalidArgument";
    case Want::Unsupported: return "NotSupported";
    case Want::Reached: return "the device query (CudaError; block_topk_nnzb: Success)";
  }
  return "?";
}

struct Range {
  i128 begin = 0, end = 0;  // [begin, end); empty when begin >= end
};
// `bytes` from `p` (empty for null or none), ending at the top of the address space at most.
Range range_of(const void* p, i128 bytes) {
  if (p == nullptr || bytes <= 0) return Range{};
  const i128 b = i128(addr(p));
  i128 e = b + bytes;
  if (e > i128(UINTPTR_MAX)) e = i128(UINTPTR_MAX);
  return Range{b, e};
}
bool overlaps(const Range& x, const Range& y) {
  return x.begin < x.end && y.begin < y.end && x.begin < y.end && y.begin < x.end;
}

bool valid_dtype(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::E4M3 || t == DType::E5M2;
}
bool valid_backend(Backend b) { return int32_t(b) >= 0 && int32_t(b) <= 3; }
bool valid_activation(Activation a) { return int32_t(a) >= 0 && int32_t(a) <= 3; }
bool half(DType t) { return t == DType::F16 || t == DType::BF16; }
bool fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }
i128 bytes_of(DType t) { return t == DType::F32 ? 4 : fp8(t) ? 1 : 2; }
bool misaligned(const void* p, uintptr_t n) { return addr(p) % n != 0; }

// An operand's scales (ScaleKind): `per_part` is the kind beside PerTensor it takes (PerBlock
// for A, PerColumn for B, None when it takes none), `parts` how many values that kind holds.
bool scales_ok(DType t, ScaleKind kind, const float* scales, ScaleKind per_part, i128 parts, Range* bytes) {
  *bytes = Range{};
  if (int32_t(kind) < 0 || int32_t(kind) > 3) return false;
  if (kind == ScaleKind::None) return scales == nullptr;
  if (!fp8(t) || (kind != ScaleKind::PerTensor && kind != per_part) || scales == nullptr || misaligned(scales, 16))
    return false;
  *bytes = range_of(scales, (kind == ScaleKind::PerTensor ? 1 : parts) * 4);
  return true;
}

// A dense view: well-formed, and its bytes.
bool dense_ok(const DenseView& v, Range* bytes) {
  *bytes = Range{};
  if (v.layout != Layout::RowMajor && v.layout != Layout::ColMajor) return false;
  if (!valid_dtype(v.dtype)) return false;
  if (v.rows < 0 || v.cols < 0 || v.ld < 0) return false;
  const bool row = v.layout == Layout::RowMajor;
  const i128 extent = row ? v.cols : v.rows, outer = row ? v.rows : v.cols;
  if (i128(v.ld) < std::max<i128>(extent, 1)) return false;
  if (misaligned(v.data, uintptr_t(bytes_of(v.dtype)))) return false;  // typed accesses, even with no element
  if (v.rows == 0 || v.cols == 0) return true;
  if (v.data == nullptr) return false;
  const i128 span = (outer - 1) * i128(v.ld) + extent;  // < 2^127: factors below 2^63
  if (span > kI64Max || span * bytes_of(v.dtype) > kI64Max) return false;
  *bytes = range_of(v.data, span * bytes_of(v.dtype));
  return true;
}

// A BSR pattern of m x k in bm x bk blocks with values of `t`: well-formed, and its bytes.
struct BsrBytes {
  Range values, row_ptr, col_idx;
};
bool bsr_ok(int64_t m, int64_t k, int32_t bm, int32_t bk, int64_t nnzb, const void* row_ptr, const void* col_idx,
            const void* values, DType t, BsrBytes* out) {
  if (!valid_dtype(t) || bm <= 0 || bk <= 0 || m < 0 || k < 0 || nnzb < 0) return false;
  if (m % bm != 0 || k % bk != 0) return false;
  const i128 rows = m / bm, cols = k / bk;
  if (rows > kI32Max || cols > kI32Max) return false;
  if (nnzb > rows * cols || nnzb > kI32Max) return false;
  const i128 value_bytes = i128(nnzb) * bm * bk * bytes_of(t);
  if (value_bytes > kI64Max) return false;
  if (row_ptr == nullptr || (nnzb > 0 && (col_idx == nullptr || values == nullptr))) return false;
  if (misaligned(row_ptr, 4) || misaligned(col_idx, 4) || misaligned(values, uintptr_t(bytes_of(t)))) return false;
  out->values = range_of(values, value_bytes);
  out->row_ptr = range_of(row_ptr, (rows + 1) * 4);
  out->col_idx = range_of(col_idx, i128(nnzb) * 4);
  return true;
}

Want model_spmm(const BsrView& a, const DenseView& b, const DenseView& c, const SpmmOptions& o) {
  if (!valid_backend(o.backend) || !valid_activation(o.activation) || misaligned(o.bias, 16)) return Want::Invalid;
  BsrBytes ab;
  Range bb, cb;
  if (!bsr_ok(a.m, a.k, a.bm, a.bk, a.nnzb, a.row_ptr, a.col_idx, a.values, a.dtype, &ab)) return Want::Invalid;
  if (!dense_ok(b, &bb) || !dense_ok(c, &cb)) return Want::Invalid;
  Range asb, bsb;
  if (!scales_ok(a.dtype, a.scale_kind, a.scales, ScaleKind::PerBlock, a.nnzb, &asb) ||
      !scales_ok(b.dtype, b.scale_kind, b.scales, ScaleKind::PerColumn, b.cols, &bsb))
    return Want::Invalid;
  const bool t = o.transpose_a;
  const int64_t op_rows = t ? a.k : a.m, op_cols = t ? a.m : a.k;
  // Gated: (gate, up) pairs of block-rows, op(A) = A, beta = 0, C of m/2 rows.
  if (o.gated && (t || o.beta != 0.0f || a.m % (2 * i128(a.bm)) != 0)) return Want::Invalid;
  const int64_t c_rows = o.gated ? op_rows / 2 : op_rows;
  if (b.rows != op_cols || c.rows != c_rows || c.cols != b.cols) return Want::Invalid;
  const sparsek::TransposeIndexView& ti = o.transpose_index;
  if (t && (ti.col_ptr == nullptr || (a.nnzb > 0 && (ti.row_idx == nullptr || ti.block_id == nullptr))))
    return Want::Invalid;
  if (t && (misaligned(ti.col_ptr, 4) || misaligned(ti.row_idx, 4) || misaligned(ti.block_id, 4)))
    return Want::Invalid;
  // C is written: it overlaps no input.
  const Range inputs[] = {ab.values,
                          ab.row_ptr,
                          ab.col_idx,
                          bb,
                          range_of(o.bias, i128(op_rows) * bytes_of(fp8(a.dtype) ? c.dtype : a.dtype)),
                          asb,
                          bsb,
                          t ? range_of(ti.col_ptr, (i128(a.k) / a.bk + 1) * 4) : Range{},
                          t ? range_of(ti.row_idx, i128(a.nnzb) * 4) : Range{},
                          t ? range_of(ti.block_id, i128(a.nnzb) * 4) : Range{}};
  for (const Range& r : inputs)
    if (overlaps(cb, r)) return Want::Invalid;
  if (fp8(a.dtype)) {  // W8A8 or W8A16; C f16, bf16 or f32; op(A) = A
    if ((b.dtype != a.dtype && !half(b.dtype)) || fp8(c.dtype) || t) return Want::Unsupported;
  } else if (!half(a.dtype) || b.dtype != a.dtype || (c.dtype != a.dtype && c.dtype != DType::F32)) {
    return Want::Unsupported;
  }
  return Want::Reached;
}

Want model_sddmm(const DenseView& a, const DenseView& b, const BsrMutView& s, const sparsek::SddmmOptions& o) {
  if (!valid_backend(o.backend)) return Want::Invalid;
  BsrBytes sb;
  Range ab, bb;
  if (!bsr_ok(s.m, s.n, s.bm, s.bn, s.nnzb, s.row_ptr, s.col_idx, s.values, s.dtype, &sb)) return Want::Invalid;
  if (!dense_ok(a, &ab) || !dense_ok(b, &bb)) return Want::Invalid;
  Range unused;
  if (!scales_ok(a.dtype, a.scale_kind, a.scales, ScaleKind::None, 0, &unused) ||
      !scales_ok(b.dtype, b.scale_kind, b.scales, ScaleKind::None, 0, &unused))
    return Want::Invalid;
  if (a.rows != s.m || b.cols != s.n || b.rows != a.cols) return Want::Invalid;
  if (overlaps(sb.values, ab) || overlaps(sb.values, bb) || overlaps(sb.values, sb.row_ptr) ||
      overlaps(sb.values, sb.col_idx))
    return Want::Invalid;
  if (!half(a.dtype) || b.dtype != a.dtype || (s.dtype != a.dtype && s.dtype != DType::F32)) return Want::Unsupported;
  return Want::Reached;
}

// A [batch, heads, seq, head_dim] view with these dims: well-formed, and its bytes.
// (An element type of the enum that the kernels do not take is NotSupported, checked last: the
// models' type rules below.)
bool heads_ok(const HeadsView& t, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim, Range* bytes) {
  *bytes = Range{};
  if (!valid_dtype(t.dtype)) return false;
  if (t.batch != batch || t.heads != heads || t.seq != seq || t.head_dim != head_dim) return false;
  if (t.stride_b < 0 || t.stride_h < 0 || t.stride_s < 0) return false;
  if (t.seq > 1 && t.stride_s < t.head_dim) return false;  // rows overlap
  if (misaligned(t.data, 2)) return false;
  if (t.batch == 0 || t.heads == 0 || t.seq == 0) return true;
  if (t.data == nullptr) return false;
  // Each term is below 2^126; their sum is checked term by term (it could pass 2^127).
  i128 extent = t.head_dim;
  const i128 terms[] = {i128(t.batch - 1) * t.stride_b, i128(t.heads - 1) * t.stride_h, i128(t.seq - 1) * t.stride_s};
  for (const i128 term : terms) {
    extent += term;
    if (extent > kI64Max) return false;
  }
  if (extent * 2 > kI64Max) return false;
  *bytes = range_of(t.data, extent * 2);
  return true;
}

// No element of the view is addressed twice (head_dim contiguous): the documented rule.
bool no_self_overlap(const HeadsView& t) {
  if (t.batch == 0 || t.heads == 0 || t.seq == 0) return true;
  std::vector<std::pair<i128, i128>> dims;  // (stride, extent), extent > 1
  if (t.seq > 1) dims.push_back({t.stride_s, t.seq});
  if (t.heads > 1) dims.push_back({t.stride_h, t.heads});
  if (t.batch > 1) dims.push_back({t.stride_b, t.batch});
  std::sort(dims.begin(), dims.end());
  i128 span = t.head_dim;
  for (const auto& d : dims) {
    if (d.first < span) return false;
    span += d.first * (d.second - 1);
  }
  return true;
}

i128 ceil_div(i128 a, i128 b) { return (a + b - 1) / b; }

// Grouped-query heads: heads_kv divides heads_q (a multiple of it; 0 only divides 0).
bool divides(int64_t heads_kv, int64_t heads_q) {
  if (heads_kv < 0 || heads_q < 0) return false;
  return heads_kv == 0 ? heads_q == 0 : heads_q % heads_kv == 0;
}

bool valid_alignment(sparsek::CausalAlignment a) {
  return a == sparsek::CausalAlignment::TopLeft || a == sparsek::CausalAlignment::BottomRight;
}

Want model_attention(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsView& o,
                     const float* lse, const BlockMaskView* mask, const sparsek::AttentionOptions& opt) {
  const sparsek::SequenceLayout& l = opt.layout;
  // Each view and the layout on their own (Invalid), head_dim >= 1, then packed sequences
  // and how the views and the layout agree.
  Range unused;
  for (const HeadsView* t : {&q, &k, &v, &o})
    if (t->batch < 0 || t->heads < 0 || t->seq < 0 || t->head_dim < 0 ||
        !heads_ok(*t, t->batch, t->heads, t->seq, t->head_dim, &unused))
      return Want::Invalid;
  if (l.batch < 0 || l.max_pages < 0 || l.max_seqlen_q < 0 || l.max_seqlen_k < 0) return Want::Invalid;
  if (misaligned(l.cu_seqlens_q, 4) || misaligned(l.cu_seqlens_k, 4) || misaligned(l.seqlens_k, 4) ||
      misaligned(l.page_table, 4))
    return Want::Invalid;
  if (q.head_dim < 1 || !valid_backend(opt.backend) || !valid_alignment(opt.causal_alignment)) return Want::Invalid;
  // Packed sequences (varlen): Q and O, or K and V, of batch 1 holding `batch` sequences
  // along seq (batch + 1 int32 offsets, batch below 2^31 - 1), their total within int32 and
  // at most batch * max_seqlen; packed keys are not paged.
  const bool packed_q = l.cu_seqlens_q != nullptr, packed_k = l.cu_seqlens_k != nullptr;
  if ((packed_q || packed_k) && l.batch >= kI32Max) return Want::Invalid;
  if (packed_q && (q.batch != 1 || q.seq > kI32Max || i128(q.seq) > i128(l.batch) * l.max_seqlen_q))
    return Want::Invalid;
  if (packed_k && (k.batch != 1 || l.page_table != nullptr || k.seq > kI32Max ||
                   i128(k.seq) > i128(l.batch) * l.max_seqlen_k))
    return Want::Invalid;
  if (packed_q && i128(l.batch) * q.heads > kU64Max) return Want::Invalid;
  // The layout: keys per sequence (seqlens_k), read through a page table (paged: K and V a
  // pool of k.batch pages of k.seq keys).
  const bool paged = l.page_table != nullptr, per_seq = paged || l.seqlens_k != nullptr;
  const bool any = per_seq || packed_q || packed_k;
  if (!any && (l.batch != 0 || l.max_pages != 0 || l.max_seqlen_q != 0 || l.max_seqlen_k != 0))
    return Want::Invalid;
  if (any && !packed_q && (l.batch != q.batch || (l.max_seqlen_q != 0 && l.max_seqlen_q != q.seq)))
    return Want::Invalid;
  if (!paged && l.max_pages != 0) return Want::Invalid;
  if (paged && (l.seqlens_k == nullptr || l.max_pages < 1 || i128(l.batch) * l.max_pages > kI32Max ||
                k.batch < 1 || v.batch != k.batch || k.seq < 1 || i128(l.max_seqlen_k) > i128(l.max_pages) * k.seq))
    return Want::Invalid;
  if (per_seq && !paged && !packed_k && l.max_seqlen_k > k.seq) return Want::Invalid;
  const bool keys_per_seq = per_seq || packed_k;
  if (any && !keys_per_seq && l.max_seqlen_k != 0 && l.max_seqlen_k != k.seq) return Want::Invalid;
  // The sequences (the layout's batch with packed queries, else Q's) and K's batch: its pages,
  // 1 when packed, else one entry per sequence.
  const int64_t seqs = packed_q ? l.batch : q.batch;
  const int64_t kv_batch = paged ? k.batch : packed_k ? 1 : seqs;
  const int64_t keys = keys_per_seq ? l.max_seqlen_k : k.seq;  // the longest key sequence
  const int64_t queries = packed_q ? l.max_seqlen_q : q.seq;   // the longest query sequence
  if (q.batch < 0 || q.heads < 0 || q.seq < 0 || k.seq < 0) return Want::Invalid;
  // K and V have heads_kv heads, a divisor of Q's (0 only when Q has none).
  if (!divides(k.heads, q.heads)) return Want::Invalid;
  Range qr, kr, vr, orr;
  if (!heads_ok(q, q.batch, q.heads, q.seq, q.head_dim, &qr) ||
      !heads_ok(k, kv_batch, k.heads, k.seq, q.head_dim, &kr) ||
      !heads_ok(v, kv_batch, k.heads, k.seq, q.head_dim, &vr) ||
      !heads_ok(o, q.batch, q.heads, q.seq, q.head_dim, &orr))
    return Want::Invalid;
  const i128 bh = i128(q.batch) * q.heads;
  if (bh > kI64Max) return Want::Invalid;
  const i128 rows = bh * q.seq;  // < 2^126
  if (rows > kI64Max / 4) return Want::Invalid;
  if (misaligned(lse, 4)) return Want::Invalid;
  if (!std::isfinite(opt.scale) || opt.scale < 0.0f) return Want::Invalid;
  if (!valid_backend(opt.backend)) return Want::Invalid;
  if (!valid_alignment(opt.causal_alignment)) return Want::Invalid;
  Range rp, ci;
  if (mask != nullptr) {
    const BlockMaskView& m = *mask;
    if (m.block_q < 1 || m.block_k < 1) return Want::Invalid;
    const i128 qb = ceil_div(queries, m.block_q), kb = ceil_div(keys, m.block_k);
    if (qb > kI32Max || kb > kI32Max) return Want::Invalid;
    if (m.q_blocks != qb || m.k_blocks != kb) return Want::Invalid;
    // Paged: the mask's key blocks and the pages nest.
    if (paged && m.block_k % k.seq != 0 && k.seq % m.block_k != 0) return Want::Invalid;
    // One pattern, or batch * mask.heads made for (the sequences, Q's or K's heads).
    if (m.patterns != 1 && (m.batch != seqs || (m.heads != q.heads && m.heads != k.heads) ||
                            i128(m.patterns) != i128(seqs) * m.heads))
      return Want::Invalid;
    const i128 rows_len = i128(m.patterns) * m.q_blocks;
    if (rows_len >= kI32Max) return Want::Invalid;
    if (m.nnzb < 0 || m.nnzb > kI32Max || m.nnzb > rows_len * m.k_blocks) return Want::Invalid;
    if (m.row_ptr == nullptr || misaligned(m.row_ptr, 4) || misaligned(m.col_idx, 4)) return Want::Invalid;
    if (m.nnzb > 0 && m.col_idx == nullptr) return Want::Invalid;
    rp = range_of(m.row_ptr, (rows_len + 1) * 4);
    ci = range_of(m.col_idx, i128(m.nnzb) * 4);
  }
  if (!no_self_overlap(o)) return Want::Invalid;
  const Range lr = range_of(lse, rows * 4);
  const Range sr = range_of(l.seqlens_k, i128(l.batch) * 4);
  const Range pr = paged ? range_of(l.page_table, i128(l.batch) * l.max_pages * 4) : Range{};
  const Range cq = range_of(l.cu_seqlens_q, (i128(l.batch) + 1) * 4), ck = range_of(l.cu_seqlens_k, (i128(l.batch) + 1) * 4);
  for (const Range& r : {qr, kr, vr, rp, ci, sr, pr, cq, ck, lr})
    if (overlaps(orr, r)) return Want::Invalid;
  for (const Range& r : {qr, kr, vr, rp, ci, sr, pr, cq, ck})
    if (overlaps(lr, r)) return Want::Invalid;
  // The element types (rules/attention.toml's types, after the overlaps): one, f16 or bf16.
  if (k.dtype != q.dtype || v.dtype != q.dtype || o.dtype != q.dtype || !half(q.dtype)) return Want::Unsupported;
  return Want::Reached;
}

// sum over i < n of floor((a*i + b) / m), m >= 1, a, b >= 0 (the Euclidean-like reduction).
i128 floor_sum(i128 n, i128 m, i128 a, i128 b) {
  if (n == 0) return 0;
  i128 sum = 0;
  if (a >= m) sum += n * (n - 1) / 2 * (a / m), a %= m;
  if (b >= m) sum += n * (b / m), b %= m;
  const i128 y = a * n + b;
  return y < m ? sum : sum + floor_sum(y / m, a, m, y % m);
}

// The gating's dims: Invalid, or Reached (valid: the counts and nnzb set).
struct Gating {
  i128 q_blocks = 0, k_blocks = 0, patterns = 0, nnzb = 0;
};
Want model_gating_dims(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k,
                       const sparsek::TopkGatingOptions& o, Gating* g) {
  if (batch < 0 || heads < 0 || seq_q < 0 || seq_k < 0) return Want::Invalid;
  if (o.block_q < 1 || o.block_k < 1 || o.top_k < 0) return Want::Invalid;
  if (!valid_alignment(o.causal_alignment)) return Want::Invalid;
  const i128 qb = ceil_div(seq_q, o.block_q), kb = ceil_div(seq_k, o.block_k);
  const i128 bh = i128(batch) * heads;
  if (qb > kI32Max || kb > kI32Max || bh > kI64Max) return Want::Invalid;
  if (bh * qb >= kI32Max) return Want::Invalid;  // < 2^95
  g->q_blocks = qb, g->k_blocks = kb, g->patterns = bh;
  if (bh == 0) {
    g->nnzb = 0;
    return Want::Reached;
  }
  // The blocks one pattern keeps: row i keeps min(top_k, candidates(i)), candidates(i) =
  // f(i) = ((i+1)*block_q - 1 + off)/block_k + 1 (causal, at most k_blocks, 0 when the
  // numerator is negative; off = seq_k - seq_q bottom-right, else 0) or k_blocks. Summed row by
  // row when the rows are few; else by candidate count (sum over c < T of the rows with
  // f(i) > c: f never decreases, and f(i) > c from the first i with (i+1)*block_q >= c*block_k
  // + 1 - off) when T = min(top_k, k_blocks) is small; else in closed form (floor_sum from the
  // first row with a candidate).
  const i128 t = std::min<i128>(o.top_k, kb), bq = o.block_q, bk = o.block_k;
  const i128 off = o.causal && o.causal_alignment == sparsek::CausalAlignment::BottomRight ? i128(seq_k) - seq_q : 0;
  const auto f = [&](i128 i) -> i128 {
    const i128 last = (i + 1) * bq - 1 + off;
    return last < 0 ? 0 : std::min(kb, last / bk + 1);
  };
  i128 per = 0;
  constexpr i128 kLoop = 4096;
  if (!o.causal) {
    per = qb * t;
  } else if (qb <= kLoop) {
    for (i128 i = 0; i < qb; ++i) per += std::min(t, f(i));
  } else if (t <= kLoop) {
    for (i128 c = 0; c < t; ++c) {
      const i128 x = c * bk + 1 - off;  // (i+1)*bq >= x
      per += qb - std::min<i128>(qb, x <= bq ? 0 : ceil_div(x, bq) - 1);
    }
  } else {
    const i128 s0 = off >= 0 ? 0 : ceil_div(1 - off, bq) - 1;  // the first row with a candidate
    if (s0 < qb) {
      const i128 n = qb - s0, c0 = (s0 + 1) * bq - 1 + off;  // row s0 + u: f = (bq*u + c0)/bk + 1
      const i128 need = (t - 1) * bk;
      const i128 below = std::min<i128>(n, need > c0 ? ceil_div(need - c0, bq) : 0);  // rows with f < T
      per = below + floor_sum(below, bk, bq, c0) + (n - below) * t;
    }
  }
  if (per * bh > kI32Max) return Want::Invalid;
  g->nnzb = per * bh;
  return Want::Reached;
}

// run_gating's checks: the output pointers and their overlap with the inputs.
Want model_gating_outputs(const Gating& g, const int32_t* row_ptr, const int32_t* col_idx, const BlockMaskView* out,
                          const Range& in1, const Range& in2) {
  if (row_ptr == nullptr || (g.nnzb > 0 && col_idx == nullptr)) return Want::Invalid;
  if (misaligned(row_ptr, 4) || misaligned(col_idx, 4) || out == nullptr) return Want::Invalid;
  const Range rp = range_of(row_ptr, (g.patterns * g.q_blocks + 1) * 4), ci = range_of(col_idx, g.nnzb * 4);
  if (overlaps(rp, ci) || overlaps(rp, in1) || overlaps(rp, in2) || overlaps(ci, in1) || overlaps(ci, in2))
    return Want::Invalid;
  return Want::Reached;
}

// ---- judging one call ------------------------------------------------------------------

struct Tally {
  const char* name;
  long calls = 0, failures = 0;
  long by_status[5] = {};  // by Status value, PendingCudaError included
  std::map<std::string, long> reasons;  // SPARSEK_FUZZ_VERBOSE: messages, digits dropped
};

// quantize_fp8: A well-formed without scales, the output's enums, pointers and overlaps,
// then the types.
Want model_quantize(const BsrView& a, const sparsek::QuantizedBsrOut& o) {
  BsrBytes ab;
  if (!bsr_ok(a.m, a.k, a.bm, a.bk, a.nnzb, a.row_ptr, a.col_idx, a.values, a.dtype, &ab)) return Want::Invalid;
  Range unused;
  if (!scales_ok(a.dtype, a.scale_kind, a.scales, ScaleKind::None, 0, &unused)) return Want::Invalid;
  if (a.scale_kind != ScaleKind::None) return Want::Invalid;  // the values to quantize take no scales
  if (!valid_dtype(o.dtype) || int32_t(o.granularity) < 0 || int32_t(o.granularity) > 3) return Want::Invalid;
  if (o.granularity != ScaleKind::PerBlock && o.granularity != ScaleKind::PerTensor) return Want::Invalid;
  if ((a.nnzb > 0 && o.values == nullptr) || o.scales == nullptr || misaligned(o.scales, 16)) return Want::Invalid;
  const Range values = range_of(o.values, i128(a.nnzb) * a.bm * a.bk);
  const Range scales = range_of(o.scales, (o.granularity == ScaleKind::PerBlock ? i128(a.nnzb) : 1) * 4);
  for (const Range& r : {ab.values, ab.row_ptr, ab.col_idx})
    if (overlaps(values, r) || overlaps(scales, r)) return Want::Invalid;
  if (overlaps(values, scales)) return Want::Invalid;
  if ((!half(a.dtype) && a.dtype != DType::F32) || !fp8(o.dtype)) return Want::Unsupported;
  return Want::Reached;
}

struct Judge {
  Arenas& mem;
  bool verbose = false;
  int printed = 0;
  long total_failures = 0;

  // What is wrong with r ("" when nothing): its status against the model's, its message.
  // `reached`: the status of a call the model finds valid (CudaError: the device query).
  std::string check(const Result& r, Want want, Status reached) {
    const int32_t s = int32_t(r.status);
    if (s < 0 || s > 3) return "status " + std::to_string(s) + " is not a Status";
    if (std::memchr(r.message, '\0', sizeof(r.message)) == nullptr) return "unterminated message";
    if (r.status == Status::Success) {
      if (r.message[0] != '\0') return std::string("a message on success: ") + r.message;
    } else {
      if (std::strncmp(r.message, "sparsek: ", 9) != 0) return std::string("no \"sparsek: \" prefix: ") + r.message;
      if (std::strstr(r.message + 1, "sparsek: ") != nullptr || std::strncmp(r.message + 9, "sparsek", 7) == 0)
        return std::string("the prefix more than once: ") + r.message;
      if (r.message[9] == '\0') return "only the prefix";
    }
    if (!mem.intact()) return "the arenas were touched";
    const Status expected = want == Want::Invalid       ? Status::InvalidArgument
                            : want == Want::Unsupported ? Status::NotSupported
                                                        : reached;
    if (r.status != expected)
      return std::string("want ") + want_name(want) + ", got status " + std::to_string(s) + " \"" + r.message + "\"";
    return "";
  }

  void record(Tally& t, long index, const char* call, const Result& r, Want want, std::string extra = "",
              Status reached = Status::CudaError) {
    ++t.calls;
    const int32_t s = int32_t(r.status);
    if (s >= 0 && s <= 4) ++t.by_status[s];
    if (verbose) {
      std::string reason;
      for (const char* c = r.message; *c != '\0' && reason.size() < 70; ++c)
        if (*c < '0' || *c > '9') reason += *c;
      ++t.reasons[reason];
    }
    std::string why = check(r, want, reached);
    if (why.empty()) why = extra;
    if (why.empty()) return;
    ++t.failures;
    ++total_failures;
    if (printed++ < 25) std::printf("FAIL %s draw %ld, %s: %s\n", t.name, index, call, why.c_str());
    if (!mem.intact()) mem.repair();
  }
};

// The output views of a case. Cases keep every view as the input type so that one mutation
// reaches any of them; the arenas behind them are writable, so an output may point there.
sparsek::DenseMutView out(const DenseView& v) {
  return sparsek::DenseMutView{const_cast<void*>(v.data), v.rows, v.cols, v.ld, v.layout, v.dtype};
}
sparsek::HeadsMutView out(const HeadsView& v) {
  return sparsek::HeadsMutView{const_cast<void*>(v.data), v.batch,    v.heads,    v.seq, v.head_dim,
                               v.stride_b,                v.stride_h, v.stride_s, v.dtype};
}

// ---- the draws -------------------------------------------------------------------------

struct SpmmCase {
  BsrView a;
  DenseView b, c;
  SpmmOptions o;
  std::vector<const void*> pointers() const {
    return {a.row_ptr, a.col_idx, a.values, b.data, c.data, o.bias, o.transpose_index.col_ptr, a.scales, b.scales};
  }
};

int64_t contiguous(const DenseView& v) { return v.layout == Layout::RowMajor ? v.cols : v.rows; }

// A well-formed product (most of the time; a few dtypes are unsupported) in the arenas.
SpmmCase spmm_base(Rng& rng, const Arenas& mem) {
  static const int32_t kBm[] = {1, 8, 16, 32, 64, 128};
  static const int32_t kBk[] = {16, 32, 64};
  static const int64_t kN[] = {0, 1, 8, 16, 64, 72};
  SpmmCase x;
  x.a.bm = rng.pick(kBm), x.a.bk = rng.pick(kBk);
  const int64_t rows = rng.range(0, 8), cols = rng.range(0, 8);
  x.a.m = rows * x.a.bm, x.a.k = cols * x.a.bk;
  x.a.nnzb = rng.range(0, rows * cols);
  x.a.dtype = rng.chance(0.5) ? DType::F16 : DType::BF16;
  if (rng.chance(0.05)) x.a.dtype = DType::F32;
  const bool fp8_a = rng.chance(0.25);
  if (fp8_a) x.a.dtype = rng.chance(0.5) ? DType::E4M3 : DType::E5M2;
  x.a.row_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 0));
  x.a.col_idx = static_cast<const int32_t*>(in_slot(rng, mem, 1));
  x.a.values = in_slot(rng, mem, 2);
  // A promise about timing (BsrView::settled): the model ignores it, so no validator may read it.
  x.a.settled = rng.chance(0.5);
  x.o.transpose_a = rng.chance(0.3);
  // Gated (the gate and up product): an even number of block-rows, op(A) = A, C of m/2 rows.
  x.o.gated = rng.chance(0.15);
  if (x.o.gated) {
    x.a.m = (rows & ~int64_t(1)) * x.a.bm;
    x.a.nnzb = std::min<int64_t>(x.a.nnzb, (rows & ~int64_t(1)) * cols);
    x.o.transpose_a = rng.chance(0.05);
  }
  const int64_t op_rows = (x.o.transpose_a ? x.a.k : x.a.m) / (x.o.gated ? 2 : 1),
                op_cols = x.o.transpose_a ? x.a.m : x.a.k;
  const int64_t n = rng.pick(kN);
  x.b = DenseView{in_slot(rng, mem, 3), op_cols, n, 0, rng.chance(0.5) ? Layout::RowMajor : Layout::ColMajor,
                  x.a.dtype};
  x.c = DenseView{in_slot(rng, mem, 4), op_rows, n, 0, rng.chance(0.5) ? Layout::RowMajor : Layout::ColMajor,
                  rng.chance(0.7) ? x.a.dtype : DType::F32};
  if (rng.chance(0.03)) x.b.dtype = x.a.dtype == DType::F16 ? DType::BF16 : DType::F16;
  if (fp8_a) {  // W8A8 mostly, with scales in their own slots (8 and 9)
    if (rng.chance(0.2)) x.b.dtype = rng.chance(0.5) ? DType::F16 : DType::BF16;
    if (rng.chance(0.3)) x.c.dtype = rng.chance(0.5) ? DType::F16 : DType::BF16;
    static const ScaleKind kA[] = {ScaleKind::None, ScaleKind::PerTensor, ScaleKind::PerBlock};
    static const ScaleKind kB[] = {ScaleKind::None, ScaleKind::PerTensor, ScaleKind::PerColumn};
    x.a.scale_kind = rng.pick(kA);
    if (x.a.scale_kind != ScaleKind::None) x.a.scales = static_cast<const float*>(in_slot(rng, mem, 8));
    if (fp8(x.b.dtype)) {
      x.b.scale_kind = rng.pick(kB);
      if (x.b.scale_kind != ScaleKind::None) x.b.scales = static_cast<const float*>(in_slot(rng, mem, 9));
    }
  }
  for (DenseView* v : {&x.b, &x.c}) v->ld = std::max<int64_t>(contiguous(*v), 1) + (rng.chance(0.8) ? 0 : 8);
  if (rng.chance(0.3)) x.o.bias = in_slot(rng, mem, 5);
  if (rng.chance(0.3)) x.o.activation = static_cast<Activation>(rng.range(0, 3));
  x.o.backend = static_cast<Backend>(rng.range(0, 3));
  x.o.alpha = rng.wild_float(), x.o.beta = rng.wild_float();
  if (x.o.gated && rng.chance(0.8)) x.o.beta = 0.0f;
  x.o.check_indices = rng.chance(0.5);
  if (x.o.transpose_a || rng.chance(0.2)) {
    x.o.transpose_index.col_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 6));
    x.o.transpose_index.row_idx = static_cast<const int32_t*>(in_slot(rng, mem, 7));
    x.o.transpose_index.block_id = static_cast<const int32_t*>(static_cast<void*>(mem.slot(7) + kArena / 2));
  }
  return x;
}

// One random defect (or a consistent change of size) of a product.
void spmm_mutate(Rng& rng, const Arenas& mem, SpmmCase& x) {
  const std::vector<const void*> others = x.pointers();
  auto dense = [&](DenseView& v) {
    switch (rng.bits() % 6) {
      case 0: v.rows = rng.wild64(); break;
      case 1: v.cols = rng.wild64(); break;
      case 2: v.ld = rng.chance(0.5) ? rng.wild64() : sat(i128(contiguous(v)) + rng.range(-2, 2)); break;
      case 3: v.layout = rng.wild_enum<Layout>(); break;
      case 4: v.dtype = rng.wild_enum<DType>(); break;
      default: v.data = wild_ptr(rng, mem, others); break;
    }
  };
  switch (rng.bits() % 23) {
    case 21:
    case 22: {  // a pointer off its alignment (the index arrays 4 bytes, the rest their dtype's)
      sparsek::TransposeIndexView& ti = x.o.transpose_index;
      switch (rng.bits() % 8) {
        case 0: x.a.row_ptr = misalign(rng, x.a.row_ptr, 4); break;
        case 1: x.a.col_idx = misalign(rng, x.a.col_idx, 4); break;
        case 2: x.a.values = misalign(rng, x.a.values, int64_t(bytes_of(x.a.dtype))); break;
        case 3: x.b.data = misalign(rng, x.b.data, int64_t(bytes_of(x.b.dtype))); break;
        case 4: x.c.data = misalign(rng, x.c.data, int64_t(bytes_of(x.c.dtype))); break;
        case 5: ti.col_ptr = misalign(rng, ti.col_ptr, 4); break;
        case 6:
          if (rng.chance(0.5)) ti.row_idx = misalign(rng, ti.row_idx, 4);
          else ti.block_id = misalign(rng, ti.block_id, 4);
          break;
        default: x.o.bias = misalign(rng, x.o.bias, 16); break;
      }
      break;
    }
    case 0: x.a.m = rng.wild64(); break;
    case 1: x.a.k = rng.wild64(); break;
    case 2: (rng.chance(0.5) ? x.a.bm : x.a.bk) = rng.wild32(); break;
    case 3: x.a.nnzb = rng.wild64(); break;
    case 4: x.a.dtype = rng.wild_enum<DType>(); break;
    case 5: {
      const void* p = wild_ptr(rng, mem, others);
      switch (rng.bits() % 3) {
        case 0: x.a.row_ptr = static_cast<const int32_t*>(p); break;
        case 1: x.a.col_idx = static_cast<const int32_t*>(p); break;
        default: x.a.values = p; break;
      }
      break;
    }
    case 6: dense(x.b); break;
    case 7: dense(x.c); break;
    case 8:
      switch (rng.bits() % 5) {
        case 0: x.o.backend = rng.wild_enum<Backend>(); break;
        case 1: x.o.activation = rng.wild_enum<Activation>(); break;
        case 2: x.o.bias = wild_ptr(rng, mem, others); break;
        case 3: x.o.gated = !x.o.gated; break;
        default: x.o.transpose_a = !x.o.transpose_a; break;
      }
      break;
    case 9: {
      const int32_t* p = static_cast<const int32_t*>(wild_ptr(rng, mem, others));
      switch (rng.bits() % 3) {
        case 0: x.o.transpose_index.col_ptr = p; break;
        case 1: x.o.transpose_index.row_idx = p; break;
        default: x.o.transpose_index.block_id = p; break;
      }
      break;
    }
    case 10:
    case 11: {  // n, consistently (B, C and their lds)
      const int64_t n = rng.chance(0.5) ? rng.wild64() : rng.range(0, 4096);
      x.b.cols = x.c.cols = n;
      for (DenseView* v : {&x.b, &x.c}) v->ld = std::max<int64_t>(contiguous(*v), 1);
      break;
    }
    case 12:
    case 13: {  // m or k, consistently (a multiple of the block, mostly)
      const bool is_m = rng.chance(0.5);
      const int64_t block = is_m ? x.a.bm : x.a.bk;
      const int64_t w = rng.wild64();
      const int64_t size = rng.chance(0.7) && block > 0 && w / block != 0 ? w / block * block : w;
      (is_m ? x.a.m : x.a.k) = size;
      DenseView& bv = x.b;
      DenseView& cv = x.c;
      const bool rows_of_c = is_m != x.o.transpose_a;  // op(A)'s rows are C's
      (rows_of_c ? cv.rows : bv.rows) = size;
      for (DenseView* v : {&x.b, &x.c}) v->ld = std::max<int64_t>(contiguous(*v), 1);
      break;
    }
    case 14:
    case 15: {  // C on an input (or next to it)
      static const int64_t kDelta[] = {0, 0, 2, -2, 16, -16, 64, -64, 4096, -4096};
      const void* target = others[rng.bits() % others.size()];
      if (target != nullptr) x.c.data = at(addr(target) + uintptr_t(rng.pick(kDelta)));
      break;
    }
    case 16: {  // an input on C
      static const int64_t kDelta[] = {0, 2, -2, 16, -16, 256, -256};
      void* p = at(addr(x.c.data) + uintptr_t(rng.pick(kDelta)));
      switch (rng.bits() % 5) {
        case 0: x.b.data = p; break;
        case 1: x.a.values = p; break;
        case 2: x.o.bias = p; break;
        case 3: x.a.row_ptr = static_cast<const int32_t*>(p); break;
        default: x.o.transpose_index.block_id = static_cast<const int32_t*>(p); break;
      }
      break;
    }
    case 17: {  // a block of 1 x 1 or INT32_MAX high, sizes kept
      x.a.bm = rng.chance(0.5) ? 1 : INT32_MAX;
      break;
    }
    case 18: {  // no block, or every block
      x.a.nnzb = rng.chance(0.5) ? 0 : sat(i128(x.a.m / std::max(1, x.a.bm)) * (x.a.k / std::max(1, x.a.bk)));
      break;
    }
    case 19: {  // the scales: a kind (or no kind), a pointer, C on them
      static const ScaleKind kKinds[] = {ScaleKind::None, ScaleKind::PerTensor, ScaleKind::PerBlock,
                                         ScaleKind::PerColumn};
      const bool on_a = rng.chance(0.5);
      ScaleKind& kind = on_a ? x.a.scale_kind : x.b.scale_kind;
      const float*& scales = on_a ? x.a.scales : x.b.scales;
      switch (rng.bits() % 4) {
        case 0: kind = rng.chance(0.8) ? rng.pick(kKinds) : rng.wild_enum<ScaleKind>(); break;
        case 1: scales = static_cast<const float*>(wild_ptr(rng, mem, others)); break;
        case 2: scales = static_cast<const float*>(at(addr(x.c.data) + uintptr_t(rng.range(-8, 8) * 4))); break;
        default: (on_a ? x.a.dtype : x.b.dtype) = rng.chance(0.5) ? DType::E4M3 : DType::F16; break;
      }
      break;
    }
    default: x.c.dtype = rng.wild_enum<DType>(); break;
  }
}

// The MLP (sparse_mlp): its two products as spmm cases sharing h (the first's C, the
// second's B), and the MlpView's own fields.
struct MlpCase {
  SpmmCase first, second;  // gate_up x -> h; down h -> y (their options unused)
  sparsek::MlpView m() const {
    sparsek::MlpView v = view;
    v.gate_up = first.a, v.down = second.a;
    return v;
  }
  sparsek::MlpView view;
};

MlpCase mlp_base(Rng& rng, const Arenas& mem) {
  static const int32_t kBm[] = {1, 8, 16, 64, 128};
  static const int32_t kBk[] = {16, 32, 64};
  static const int64_t kN[] = {0, 1, 8, 16, 72};
  MlpCase x;
  BsrView& g = x.first.a;
  BsrView& d = x.second.a;
  g.bm = rng.pick(kBm), g.bk = rng.pick(kBk);
  const int64_t pairs = rng.range(0, 4), cols = rng.range(0, 6);
  g.m = 2 * pairs * g.bm, g.k = cols * g.bk, g.nnzb = rng.range(0, 2 * pairs * cols);
  const int64_t inter = pairs * g.bm;
  d.bm = rng.pick(kBm), d.bk = g.bm;
  const int64_t out_rows = rng.range(0, 6);
  d.m = out_rows * d.bm, d.k = inter, d.nnzb = rng.range(0, out_rows * pairs);
  g.dtype = d.dtype = rng.chance(0.5) ? DType::F16 : DType::BF16;
  const DType act = g.dtype;
  if (rng.chance(0.2)) g.dtype = d.dtype = rng.chance(0.5) ? DType::E4M3 : DType::E5M2;
  g.row_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 0));
  g.col_idx = static_cast<const int32_t*>(in_slot(rng, mem, 1));
  g.values = in_slot(rng, mem, 2);
  d.row_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 5));
  d.col_idx = static_cast<const int32_t*>(in_slot(rng, mem, 6));
  d.values = in_slot(rng, mem, 7);
  if (fp8(g.dtype) && rng.chance(0.5)) {
    g.scale_kind = d.scale_kind = ScaleKind::PerBlock;
    g.scales = static_cast<const float*>(in_slot(rng, mem, 8));
    d.scales = static_cast<const float*>(in_slot(rng, mem, 9));
  }
  const int64_t n = rng.pick(kN);
  x.first.b = DenseView{in_slot(rng, mem, 3), g.k, n, std::max<int64_t>(g.k, 1), Layout::ColMajor, act};
  x.first.c = DenseView{in_slot(rng, mem, 4), inter, n, std::max<int64_t>(inter, 1), Layout::ColMajor, act};
  x.second.b = x.first.c;
  // y after h in h's slot (a slot is 2 MiB of address space; nothing is read).
  x.second.c = DenseView{mem.slot(4) + kArena, d.m, n, std::max<int64_t>(d.m, 1), Layout::ColMajor,
                         rng.chance(0.7) ? act : DType::F32};
  x.view.activation = static_cast<Activation>(rng.range(0, 3));
  x.view.backend = static_cast<Backend>(rng.range(0, 3));
  x.view.check_indices = rng.chance(0.5);
  // The biases after the index arrays of their weights (small; nothing is read).
  if (rng.chance(0.3)) x.view.gate_up_bias = mem.slot(0) + kArena;
  if (rng.chance(0.3)) x.view.down_bias = mem.slot(5) + kArena;
  return x;
}

void mlp_mutate(Rng& rng, const Arenas& mem, MlpCase& x) {
  // h is an output (a DenseMutView): it carries no scales whatever a mutation gave it.
  struct Unscaled {
    MlpCase& x;
    ~Unscaled() {
      x.first.c.scales = nullptr, x.first.c.scale_kind = ScaleKind::None;
      x.second.b = x.first.c;
    }
  } unscaled{x};
  switch (rng.bits() % 6) {
    case 0:
    case 1:  // a defect of the gate and up product (h follows it into the down product)
      spmm_mutate(rng, mem, x.first);
      x.second.b = x.first.c;
      break;
    case 2:
    case 3:
      spmm_mutate(rng, mem, x.second);
      x.first.c = x.second.b;
      break;
    case 4:
      if (rng.chance(0.4))
        x.view.activation = rng.wild_enum<Activation>();
      else if (rng.chance(0.5))
        x.view.backend = rng.wild_enum<Backend>();
      else if (rng.chance(0.5))
        x.view.gate_up_bias = misalign(rng, x.view.gate_up_bias ? x.view.gate_up_bias : mem.slot(0) + kArena, 16);
      else
        x.view.down_bias = misalign(rng, x.view.down_bias ? x.view.down_bias : mem.slot(5) + kArena, 16);
      break;
    default: {  // the outputs on the other product's operands
      static const int64_t kDelta[] = {0, 2, -2, 64, -64};
      const uintptr_t delta = uintptr_t(rng.pick(kDelta));
      switch (rng.bits() % 6) {
        case 0: x.first.c.data = at(addr(x.second.a.values) + delta); break;
        case 1: x.first.c.data = at(addr(x.second.a.row_ptr) + delta); break;
        case 2: x.second.c.data = at(addr(x.first.b.data) + delta); break;
        case 3: x.second.c.data = at(addr(x.first.a.values) + delta); break;
        case 4:  // h on the down bias, which the second product reads after h is written
          x.view.down_bias = mem.slot(5) + kArena;
          x.first.c.data = at(addr(x.view.down_bias) + delta);
          break;
        default:  // y on the gate and up bias
          x.view.gate_up_bias = mem.slot(0) + kArena;
          x.second.c.data = at(addr(x.view.gate_up_bias) + delta);
          break;
      }
      x.second.b = x.first.c;
      break;
    }
  }
}

// sparse_mlp's rule: x, h and y as views, then the first product's views, then the second's,
// then the outputs across the two (h on the down weight; y on x or the gate and up weight).
Want model_mlp(const MlpCase& x) {
  const sparsek::MlpView v = x.m();
  SpmmOptions first, second;
  first.gated = true, first.activation = v.activation, first.backend = v.backend;
  first.bias = v.gate_up_bias;
  second.backend = v.backend;
  second.bias = v.down_bias;
  // x, h and y as views of their own first.
  Range unused;
  if (!dense_ok(x.first.b, &unused) || !dense_ok(x.first.c, &unused) || !dense_ok(x.second.c, &unused))
    return Want::Invalid;
  Want w = model_spmm(x.first.a, x.first.b, x.first.c, first);
  if (w != Want::Reached) return w;
  w = model_spmm(x.second.a, x.second.b, x.second.c, second);
  if (w != Want::Reached) return w;
  // Every range starts empty: a check that refuses early leaves its range untouched.
  BsrBytes gb{}, db{};
  Range hb{}, yb{}, xb{}, gs{}, ds{};
  bsr_ok(v.gate_up.m, v.gate_up.k, v.gate_up.bm, v.gate_up.bk, v.gate_up.nnzb, v.gate_up.row_ptr,
         v.gate_up.col_idx, v.gate_up.values, v.gate_up.dtype, &gb);
  bsr_ok(v.down.m, v.down.k, v.down.bm, v.down.bk, v.down.nnzb, v.down.row_ptr, v.down.col_idx, v.down.values,
         v.down.dtype, &db);
  scales_ok(v.gate_up.dtype, v.gate_up.scale_kind, v.gate_up.scales, ScaleKind::PerBlock, v.gate_up.nnzb, &gs);
  scales_ok(v.down.dtype, v.down.scale_kind, v.down.scales, ScaleKind::PerBlock, v.down.nnzb, &ds);
  dense_ok(x.first.c, &hb), dense_ok(x.second.c, &yb), dense_ok(x.first.b, &xb);
  // Each bias has its weights' dtype, or with FP8 weights its product's output's.
  const Range gbias = range_of(
      v.gate_up_bias, i128(v.gate_up.m) * bytes_of(fp8(v.gate_up.dtype) ? x.first.c.dtype : v.gate_up.dtype));
  const Range dbias =
      range_of(v.down_bias, i128(v.down.m) * bytes_of(fp8(v.down.dtype) ? x.second.c.dtype : v.down.dtype));
  for (const Range& r : {db.values, db.row_ptr, db.col_idx, ds, dbias})
    if (overlaps(hb, r)) return Want::Invalid;
  for (const Range& r : {xb, gb.values, gb.row_ptr, gb.col_idx, gs, gbias})
    if (overlaps(yb, r)) return Want::Invalid;
  return Want::Reached;
}

struct AttnCase {
  HeadsView q, k, v, o;
  float* lse = nullptr;
  bool has_mask = false;
  BlockMaskView mask;
  sparsek::AttentionOptions opt;
  std::vector<const void*> pointers() const {
    return {q.data,       k.data,
            v.data,       o.data,
            lse,          mask.row_ptr,
            mask.col_idx, opt.layout.seqlens_k,
            opt.layout.page_table, opt.layout.cu_seqlens_q,
            opt.layout.cu_seqlens_k};
  }
};

// A view of [batch, heads, seq, d] packed, or as [batch, seq, heads, d].
HeadsView heads_view(void* data, int64_t batch, int64_t heads, int64_t seq, int64_t d, DType t, bool bshd) {
  HeadsView v = sparsek::packed_heads(data, batch, heads, seq, d, t);
  if (bshd) v.stride_s = heads * d, v.stride_h = d, v.stride_b = seq * heads * d;
  return v;
}

AttnCase attention_base(Rng& rng, const Arenas& mem) {
  static const int64_t kD[] = {64, 128, 64, 128, 1, 8};
  AttnCase x;
  const int64_t batch = rng.range(0, 2), heads = rng.range(0, 4), sq = rng.range(0, 300), sk = rng.range(0, 300);
  // K and V's heads: Q's, or a divisor of them (grouped-query attention).
  const int64_t heads_kv = rng.chance(0.5) || heads == 0 ? heads : (heads % 2 == 0 && rng.chance(0.5) ? 2 : 1);
  const int64_t d = rng.pick(kD);
  const DType t = rng.chance(0.5) ? DType::F16 : DType::BF16;
  x.q = heads_view(in_slot(rng, mem, 0), batch, heads, sq, d, t, rng.chance(0.3));
  x.k = heads_view(in_slot(rng, mem, 1), batch, heads_kv, sk, d, t, rng.chance(0.3));
  x.v = rng.chance(0.2) ? x.k : heads_view(in_slot(rng, mem, 2), batch, heads_kv, sk, d, t, rng.chance(0.3));
  x.o = heads_view(in_slot(rng, mem, 3), batch, heads, sq, d, t, rng.chance(0.3));
  if (rng.chance(0.6)) x.lse = static_cast<float*>(in_slot(rng, mem, 4));
  x.opt.causal = rng.chance(0.5);
  x.opt.scale = rng.chance(0.8) ? 0.0f : rng.wild_float();
  x.opt.backend = rng.chance(0.8) ? Backend::Auto : static_cast<Backend>(rng.range(0, 3));
  x.opt.check_indices = rng.chance(0.3);
  x.opt.causal_alignment = rng.chance(0.5) ? sparsek::CausalAlignment::TopLeft : sparsek::CausalAlignment::BottomRight;
  x.has_mask = rng.chance(0.7);
  BlockMaskView& m = x.mask;
  m.block_q = rng.chance(0.8) ? 128 : int32_t(rng.range(1, 200));
  m.block_k = rng.chance(0.8) ? 128 : int32_t(rng.range(1, 200));
  m.q_blocks = (sq + m.block_q - 1) / m.block_q, m.k_blocks = (sk + m.block_k - 1) / m.block_k;
  // Per-head patterns per query head or per KV head.
  const int64_t mask_heads = rng.chance(0.5) ? heads : heads_kv;
  const bool per_head = rng.chance(0.5) && batch * mask_heads > 1;
  m.patterns = per_head ? batch * mask_heads : 1;
  if (per_head || rng.chance(0.3)) m.batch = batch, m.heads = mask_heads;
  m.nnzb = rng.range(0, m.patterns * m.q_blocks * m.k_blocks);
  m.row_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 5));
  m.col_idx = static_cast<const int32_t*>(in_slot(rng, mem, 6));
  // The serving layout: keys per sequence (a KV cache of sk keys filled to max_seqlen_k), K
  // and V paged (a pool of pages of 1 .. 256 keys) or not.
  if (rng.chance(0.4)) {
    sparsek::SequenceLayout& l = x.opt.layout;
    l.batch = batch;
    l.seqlens_k = static_cast<const int32_t*>(in_slot(rng, mem, 7));
    l.max_seqlen_k = rng.range(0, sk);
    if (rng.chance(0.2)) l.max_seqlen_q = sq;
    if (rng.chance(0.6)) {
      static const int64_t kPage[] = {1, 16, 64, 128, 256, 100};
      const int64_t page = rng.pick(kPage), pages = rng.range(1, 40);
      l.page_table = static_cast<const int32_t*>(in_slot(rng, mem, 8));
      l.max_pages = std::max<int64_t>(1, (l.max_seqlen_k + page - 1) / page + rng.range(0, 2));
      x.k = heads_view(in_slot(rng, mem, 1), pages, heads_kv, page, d, t, rng.chance(0.3));
      x.v = rng.chance(0.2) ? x.k : heads_view(in_slot(rng, mem, 2), pages, heads_kv, page, d, t, rng.chance(0.3));
      // The mask's key blocks nest with the pages (block_k 128 or the page, or its multiple).
      if (rng.chance(0.7)) m.block_k = int32_t(rng.chance(0.5) ? page : page * rng.range(1, 3));
    }
    m.k_blocks = (l.max_seqlen_k + m.block_k - 1) / m.block_k;
    m.nnzb = rng.range(0, m.patterns * m.q_blocks * m.k_blocks);
  } else if (rng.chance(0.4)) {
    // Packed sequences: Q and O, K and V, or both of batch 1 holding `seqs` sequences of at
    // most max_seqlen each along seq (packed, or [total, heads, d] fused); the other side
    // padded with one batch entry per sequence.
    sparsek::SequenceLayout& l = x.opt.layout;
    const int64_t seqs = rng.range(0, 4);
    l.batch = seqs;
    const int side = int(rng.bits() % 3);  // 0: Q packed, 1: K packed, 2: both
    if (side != 1) {
      l.cu_seqlens_q = static_cast<const int32_t*>(in_slot(rng, mem, 9));
      l.max_seqlen_q = rng.range(0, 300);
      const int64_t total = rng.range(0, seqs * l.max_seqlen_q);
      x.q = heads_view(in_slot(rng, mem, 0), 1, heads, total, d, t, rng.chance(0.5));
      x.o = heads_view(in_slot(rng, mem, 3), 1, heads, total, d, t, rng.chance(0.5));
    } else {
      x.q = heads_view(in_slot(rng, mem, 0), seqs, heads, sq, d, t, rng.chance(0.3));
      x.o = heads_view(in_slot(rng, mem, 3), seqs, heads, sq, d, t, rng.chance(0.3));
      if (rng.chance(0.3)) l.max_seqlen_q = sq;
    }
    if (side != 0) {
      l.cu_seqlens_k = static_cast<const int32_t*>(in_slot(rng, mem, 9));
      l.max_seqlen_k = rng.range(0, 300);
      const int64_t total = rng.range(0, seqs * l.max_seqlen_k);
      x.k = heads_view(in_slot(rng, mem, 1), 1, heads_kv, total, d, t, rng.chance(0.5));
      x.v = rng.chance(0.2) ? x.k : heads_view(in_slot(rng, mem, 2), 1, heads_kv, total, d, t, rng.chance(0.5));
    } else {
      x.k = heads_view(in_slot(rng, mem, 1), seqs, heads_kv, sk, d, t, rng.chance(0.3));
      x.v = rng.chance(0.2) ? x.k : heads_view(in_slot(rng, mem, 2), seqs, heads_kv, sk, d, t, rng.chance(0.3));
      if (rng.chance(0.3)) l.max_seqlen_k = sk;
    }
    // The mask over the longest sequences; per-head patterns per (sequence, head).
    const int64_t queries = side != 1 ? l.max_seqlen_q : sq, keys = side != 0 ? l.max_seqlen_k : sk;
    m.q_blocks = (queries + m.block_q - 1) / m.block_q, m.k_blocks = (keys + m.block_k - 1) / m.block_k;
    const bool per_seq_head = rng.chance(0.5) && seqs * mask_heads > 1;
    m.patterns = per_seq_head ? seqs * mask_heads : 1;
    if (per_seq_head || rng.chance(0.3)) m.batch = seqs, m.heads = mask_heads;
    m.nnzb = rng.range(0, m.patterns * m.q_blocks * m.k_blocks);
  }
  return x;
}

void attention_mutate(Rng& rng, const Arenas& mem, AttnCase& x) {
  const std::vector<const void*> others = x.pointers();
  HeadsView* views[] = {&x.q, &x.k, &x.v, &x.o};
  HeadsView& h = *views[rng.bits() % 4];
  switch (rng.bits() % 23) {
    case 22:  // a pointer off its alignment (Q, K, V, O 2 bytes; LSE and the mask's arrays 4)
      switch (rng.bits() % 4) {
        case 0:
        case 1: h.data = misalign(rng, h.data, 2); break;
        case 2: x.lse = misalign(rng, x.lse, 4); break;
        default:
          if (rng.chance(0.5)) x.mask.row_ptr = misalign(rng, x.mask.row_ptr, 4);
          else x.mask.col_idx = misalign(rng, x.mask.col_idx, 4);
          break;
      }
      break;
    case 0: h.batch = rng.wild64(); break;
    case 1: h.heads = rng.wild64(); break;
    case 2: h.seq = rng.wild64(); break;
    case 3: h.head_dim = rng.chance(0.5) ? rng.wild64() : rng.range(-1, 3); break;
    case 4: h.stride_b = rng.wild64(); break;
    case 5: h.stride_h = rng.chance(0.5) ? rng.wild64() : sat(i128(rng.range(0, 2)) * h.head_dim); break;
    case 6: h.stride_s = rng.chance(0.5) ? rng.wild64() : sat(i128(h.head_dim) + rng.range(-2, 1)); break;
    case 7: h.dtype = rng.wild_enum<DType>(); break;
    case 8: h.data = wild_ptr(rng, mem, others); break;
    case 9: x.lse = static_cast<float*>(wild_ptr(rng, mem, others)); break;
    case 10: {  // every view's dim, consistently
      const int64_t w = rng.chance(0.5) ? rng.wild64() : rng.range(0, 5);
      const int which = int(rng.bits() % 3);
      for (HeadsView* v : views) (which == 0 ? v->batch : which == 1 ? v->heads : v->head_dim) = w;
      break;
    }
    case 11: {  // the sequence of Q and O, or of K and V, consistently
      const int64_t w = rng.chance(0.5) ? rng.wild64() : rng.range(0, 1000);
      if (rng.chance(0.5)) x.q.seq = x.o.seq = w;
      else x.k.seq = x.v.seq = w;
      break;
    }
    case 12: {  // O on an input or LSE (or next to it)
      static const int64_t kDelta[] = {0, 2, -2, 64, -64, 1024, -1024};
      const void* target = others[rng.bits() % others.size()];
      if (target != nullptr) x.o.data = at(addr(target) + uintptr_t(rng.pick(kDelta)));
      break;
    }
    case 13: {  // LSE on an input or O
      static const int64_t kDelta[] = {0, 4, -4, 64, -64};
      const void* target = others[rng.bits() % others.size()];
      if (target != nullptr) x.lse = static_cast<float*>(at(addr(target) + uintptr_t(rng.pick(kDelta))));
      break;
    }
    case 14: {  // O overlapping itself, or just not
      static const int64_t kMul[] = {0, 1, 2, 7, 8};
      switch (rng.bits() % 3) {
        case 0: x.o.stride_h = sat(i128(rng.pick(kMul)) * x.o.head_dim); break;
        case 1: x.o.stride_s = rng.chance(0.5) ? sat(i128(x.o.head_dim) - rng.range(0, 1)) : 0; break;
        default: x.o.stride_b = sat(i128(rng.pick(kMul)) * x.o.head_dim); break;
      }
      break;
    }
    case 15:
      switch (rng.bits() % 6) {
        case 0: x.opt.scale = rng.wild_float(); break;
        case 1: x.opt.backend = rng.wild_enum<Backend>(); break;
        case 2: x.has_mask = !x.has_mask; break;
        case 3: x.opt.causal_alignment = rng.wild_enum<sparsek::CausalAlignment>(); break;
        case 4: {  // K and V's heads: a divisor of Q's, or any count
          const int64_t w = rng.chance(0.5) ? rng.range(0, 4) : rng.wild64();
          x.k.heads = w;
          if (rng.chance(0.8)) x.v.heads = w;
          break;
        }
        default: x.opt.causal = !x.opt.causal; break;
      }
      break;
    case 16: (rng.chance(0.5) ? x.mask.block_q : x.mask.block_k) = rng.wild32(); break;
    case 17: (rng.chance(0.5) ? x.mask.q_blocks : x.mask.k_blocks) = rng.wild64(); break;
    case 18:
      switch (rng.bits() % 4) {
        case 0: x.mask.patterns = rng.chance(0.5) ? rng.wild64() : sat(i128(x.q.batch) * x.q.heads); break;
        case 1: x.mask.batch = rng.chance(0.5) ? rng.wild64() : x.q.heads; break;
        case 2:  // made for K's heads (one pattern per KV head), consistently or not
          x.mask.heads = x.k.heads;
          if (rng.chance(0.7)) x.mask.batch = x.q.batch, x.mask.patterns = sat(i128(x.q.batch) * x.k.heads);
          break;
        default: x.mask.heads = rng.chance(0.5) ? rng.wild64() : x.q.batch; break;
      }
      break;
    case 19:
      if (rng.chance(0.5)) {
        x.mask.nnzb = rng.wild64();
        break;
      }
      {  // the layout's counts and arrays
        sparsek::SequenceLayout& l = x.opt.layout;
        switch (rng.bits() % 8) {
          case 0: l.batch = rng.chance(0.5) ? rng.wild64() : rng.range(0, 3); break;
          case 1: l.max_pages = rng.chance(0.5) ? rng.wild64() : rng.range(0, 40); break;
          case 2: l.max_seqlen_k = rng.chance(0.5) ? rng.wild64() : rng.range(0, 1200); break;
          case 3: l.max_seqlen_q = rng.chance(0.5) ? rng.wild64() : x.q.seq + rng.range(-1, 1); break;
          case 4: l.seqlens_k = rng.chance(0.5) ? nullptr : static_cast<const int32_t*>(wild_ptr(rng, mem, others)); break;
          case 5: l.page_table = rng.chance(0.5) ? nullptr : static_cast<const int32_t*>(wild_ptr(rng, mem, others)); break;
          case 6:
            if (rng.chance(0.5)) l.seqlens_k = misalign(rng, l.seqlens_k, 4);
            else l.page_table = misalign(rng, l.page_table, 4);
            break;
          default:  // packed sequences turned on or off, or an offsets array misplaced or misaligned
            switch (rng.bits() % 3) {
              case 0:
                (rng.chance(0.5) ? l.cu_seqlens_q : l.cu_seqlens_k) =
                    rng.chance(0.5) ? nullptr : static_cast<const int32_t*>(in_slot(rng, mem, 9));
                break;
              case 1:
                (rng.chance(0.5) ? l.cu_seqlens_q : l.cu_seqlens_k) =
                    static_cast<const int32_t*>(wild_ptr(rng, mem, others));
                break;
              default:
                if (rng.chance(0.5)) l.cu_seqlens_q = misalign(rng, l.cu_seqlens_q, 4);
                else l.cu_seqlens_k = misalign(rng, l.cu_seqlens_k, 4);
                break;
            }
            break;
        }
      }
      break;
    case 20: {
      const int32_t* p = static_cast<const int32_t*>(wild_ptr(rng, mem, others));
      (rng.chance(0.5) ? x.mask.row_ptr : x.mask.col_idx) = p;
      break;
    }
    default: {  // mask blocks matching new sizes
      const sparsek::SequenceLayout& l = x.opt.layout;
      const bool per_seq = l.seqlens_k != nullptr || l.page_table != nullptr || l.cu_seqlens_k != nullptr;
      const int64_t keys = per_seq ? l.max_seqlen_k : x.k.seq;
      const int64_t queries = l.cu_seqlens_q != nullptr ? l.max_seqlen_q : x.q.seq;
      x.mask.q_blocks = x.mask.block_q > 0 ? sat((i128(queries) + x.mask.block_q - 1) / x.mask.block_q) : 0;
      x.mask.k_blocks = x.mask.block_k > 0 ? sat((i128(keys) + x.mask.block_k - 1) / x.mask.block_k) : 0;
      break;
    }
  }
}

struct SddmmCase {
  DenseView a, b;
  BsrMutView s;
  sparsek::SddmmOptions o;
  std::vector<const void*> pointers() const { return {a.data, b.data, s.row_ptr, s.col_idx, s.values}; }
};

SddmmCase sddmm_base(Rng& rng, const Arenas& mem) {
  static const int32_t kB[] = {1, 16, 32, 64, 128};
  SddmmCase x;
  x.s.bm = rng.pick(kB), x.s.bn = rng.pick(kB);
  const int64_t rows = rng.range(0, 6), cols = rng.range(0, 6), k = rng.range(0, 200);
  x.s.m = rows * x.s.bm, x.s.n = cols * x.s.bn;
  x.s.nnzb = rng.range(0, rows * cols);
  const DType t = rng.chance(0.5) ? DType::F16 : DType::BF16;
  x.s.dtype = rng.chance(0.7) ? t : DType::F32;
  x.s.row_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 0));
  x.s.col_idx = static_cast<const int32_t*>(in_slot(rng, mem, 1));
  x.s.values = in_slot(rng, mem, 2);
  x.a = DenseView{in_slot(rng, mem, 3), x.s.m, k, 0, rng.chance(0.5) ? Layout::RowMajor : Layout::ColMajor, t};
  x.b = DenseView{in_slot(rng, mem, 4), k, x.s.n, 0, rng.chance(0.5) ? Layout::RowMajor : Layout::ColMajor, t};
  if (rng.chance(0.03)) x.b.dtype = DType::F32;
  for (DenseView* v : {&x.a, &x.b}) v->ld = std::max<int64_t>(contiguous(*v), 1) + (rng.chance(0.8) ? 0 : 8);
  x.o.backend = static_cast<Backend>(rng.range(0, 3));
  x.o.check_indices = rng.chance(0.5);
  return x;
}

void sddmm_mutate(Rng& rng, const Arenas& mem, SddmmCase& x) {
  const std::vector<const void*> others = x.pointers();
  DenseView& v = rng.chance(0.5) ? x.a : x.b;
  switch (rng.bits() % 15) {
    case 14:  // a pointer off its alignment (S's index arrays 4 bytes, the rest their dtype's)
      switch (rng.bits() % 4) {
        case 0: v.data = misalign(rng, v.data, int64_t(bytes_of(v.dtype))); break;
        case 1: x.s.values = misalign(rng, x.s.values, int64_t(bytes_of(x.s.dtype))); break;
        case 2: x.s.row_ptr = misalign(rng, x.s.row_ptr, 4); break;
        default: x.s.col_idx = misalign(rng, x.s.col_idx, 4); break;
      }
      break;
    case 0: v.rows = rng.wild64(); break;
    case 1: v.cols = rng.wild64(); break;
    case 2: v.ld = rng.chance(0.5) ? rng.wild64() : sat(i128(contiguous(v)) + rng.range(-2, 2)); break;
    case 3: v.layout = rng.wild_enum<Layout>(); break;
    case 4: (rng.chance(0.5) ? v.dtype : x.s.dtype) = rng.wild_enum<DType>(); break;
    case 5: v.data = wild_ptr(rng, mem, others); break;
    case 6: (rng.chance(0.5) ? x.s.m : x.s.n) = rng.wild64(); break;
    case 7: (rng.chance(0.5) ? x.s.bm : x.s.bn) = rng.wild32(); break;
    case 8: x.s.nnzb = rng.wild64(); break;
    case 9: {
      const void* p = wild_ptr(rng, mem, others);
      switch (rng.bits() % 3) {
        case 0: x.s.row_ptr = static_cast<const int32_t*>(p); break;
        case 1: x.s.col_idx = static_cast<const int32_t*>(p); break;
        default: x.s.values = const_cast<void*>(p); break;
      }
      break;
    }
    case 10: x.o.backend = rng.wild_enum<Backend>(); break;
    case 11: {  // k, consistently
      const int64_t k = rng.chance(0.5) ? rng.wild64() : rng.range(0, 5000);
      x.a.cols = x.b.rows = k;
      for (DenseView* w : {&x.a, &x.b}) w->ld = std::max<int64_t>(contiguous(*w), 1);
      break;
    }
    case 12: {  // S's values on an input (or next to it)
      static const int64_t kDelta[] = {0, 2, -2, 64, -64, 4096, -4096};
      const void* target = others[rng.bits() % others.size()];
      if (target != nullptr) x.s.values = at(addr(target) + uintptr_t(rng.pick(kDelta)));
      break;
    }
    default: {  // m or n, consistently
      const bool is_m = rng.chance(0.5);
      const int32_t block = is_m ? x.s.bm : x.s.bn;
      const int64_t w = rng.wild64();
      const int64_t size = rng.chance(0.7) && block > 0 && w / block != 0 ? w / block * block : w;
      if (is_m) x.s.m = x.a.rows = size;
      else x.s.n = x.b.cols = size;
      for (DenseView* w2 : {&x.a, &x.b}) w2->ld = std::max<int64_t>(contiguous(*w2), 1);
      break;
    }
  }
}

struct GatingCase {
  int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0;
  sparsek::TopkGatingOptions o;
  HeadsView q, k;
  const float* scores = nullptr;
  int32_t* row_ptr = nullptr;
  int32_t* col_idx = nullptr;
  bool null_mask = false;
  std::vector<const void*> pointers() const { return {q.data, k.data, scores, row_ptr, col_idx}; }
};

GatingCase gating_base(Rng& rng, const Arenas& mem) {
  GatingCase x;
  x.batch = rng.range(0, 3), x.heads = rng.range(0, 4);
  x.seq_q = rng.range(0, 2000), x.seq_k = rng.range(0, 2000);
  x.o.top_k = int32_t(rng.range(0, 10));
  x.o.causal = rng.chance(0.5);
  x.o.causal_alignment = rng.chance(0.5) ? sparsek::CausalAlignment::TopLeft : sparsek::CausalAlignment::BottomRight;
  x.o.block_q = rng.chance(0.7) ? 128 : int32_t(rng.range(1, 300));
  x.o.block_k = rng.chance(0.7) ? 128 : int32_t(rng.range(1, 300));
  const int64_t d = rng.chance(0.5) ? 64 : rng.range(1, 130);
  const DType t = rng.chance(0.5) ? DType::F16 : DType::BF16;
  x.q = heads_view(in_slot(rng, mem, 0), x.batch, x.heads, x.seq_q, d, t, rng.chance(0.3));
  // K's heads: Q's, or a divisor of them (grouped-query attention).
  const int64_t heads_kv = rng.chance(0.5) || x.heads == 0 ? x.heads : (x.heads % 2 == 0 && rng.chance(0.5) ? 2 : 1);
  x.k = heads_view(in_slot(rng, mem, 1), x.batch, heads_kv, x.seq_k, d, t, rng.chance(0.3));
  x.scores = static_cast<const float*>(in_slot(rng, mem, 2));
  x.row_ptr = static_cast<int32_t*>(in_slot(rng, mem, 3));
  x.col_idx = static_cast<int32_t*>(in_slot(rng, mem, 4));
  return x;
}

void gating_mutate(Rng& rng, const Arenas& mem, GatingCase& x) {
  const std::vector<const void*> others = x.pointers();
  switch (rng.bits() % 17) {
    case 16:  // a pointer off its alignment (Q and K 2 bytes; the scores and outputs 4)
      switch (rng.bits() % 4) {
        case 0:
          if (rng.chance(0.5)) x.q.data = misalign(rng, x.q.data, 2);
          else x.k.data = misalign(rng, x.k.data, 2);
          break;
        case 1: x.scores = misalign(rng, x.scores, 4); break;
        case 2: x.row_ptr = misalign(rng, x.row_ptr, 4); break;
        default: x.col_idx = misalign(rng, x.col_idx, 4); break;
      }
      break;
    case 0: x.batch = x.q.batch = x.k.batch = rng.wild64(); break;
    case 1: x.heads = x.q.heads = x.k.heads = rng.wild64(); break;
    case 2: x.seq_q = x.q.seq = rng.chance(0.5) ? rng.wild64() : rng.range(0, int64_t(1) << 41); break;
    case 3: x.seq_k = x.k.seq = rng.chance(0.5) ? rng.wild64() : rng.range(0, int64_t(1) << 41); break;
    case 4: x.o.top_k = rng.wild32(); break;
    case 5: (rng.chance(0.5) ? x.o.block_q : x.o.block_k) = rng.wild32(); break;
    case 6:
      if (rng.chance(0.7)) x.o.causal = !x.o.causal;
      else x.o.causal_alignment = rng.wild_enum<sparsek::CausalAlignment>();
      break;
    case 7: {
      HeadsView& h = rng.chance(0.5) ? x.q : x.k;
      switch (rng.bits() % 6) {
        case 0: h.head_dim = rng.chance(0.5) ? rng.wild64() : rng.range(-1, 2); break;
        case 5: (rng.chance(0.5) ? h.batch : h.heads) = rng.range(0, 4); break;
        case 1: h.stride_s = rng.wild64(); break;
        case 2: h.stride_b = rng.wild64(); break;
        case 3: h.dtype = rng.wild_enum<DType>(); break;
        default: h.data = wild_ptr(rng, mem, others); break;
      }
      break;
    }
    case 8: x.scores = static_cast<const float*>(wild_ptr(rng, mem, others)); break;
    case 9: x.row_ptr = static_cast<int32_t*>(wild_ptr(rng, mem, others)); break;
    case 10: x.col_idx = static_cast<int32_t*>(wild_ptr(rng, mem, others)); break;
    case 11: x.null_mask = true; break;
    case 12: {  // an output on an input or the other output
      static const int64_t kDelta[] = {0, 4, -4, 64, -64};
      const void* target = others[rng.bits() % others.size()];
      int32_t* p = static_cast<int32_t*>(at(addr(target) + uintptr_t(rng.pick(kDelta))));
      if (target != nullptr) (rng.chance(0.5) ? x.row_ptr : x.col_idx) = p;
      break;
    }
    case 13: {  // huge sequences, blocks to match (2^20 .. 2^31 blocks)
      const int32_t block = int32_t(1) << rng.range(0, 12);
      x.o.block_q = x.o.block_k = block;
      x.seq_q = x.q.seq = int64_t(block) * rng.range(0, INT32_MAX);
      x.seq_k = x.k.seq = int64_t(block) * rng.range(0, INT32_MAX);
      if (rng.chance(0.5)) x.batch = x.q.batch = x.k.batch = 0;
      x.o.top_k = rng.chance(0.5) ? INT32_MAX : int32_t(rng.range(0, 1000));
      break;
    }
    case 14: x.batch = x.q.batch = x.k.batch = rng.range(0, int64_t(1) << 33); break;
    default: x.heads = x.q.heads = x.k.heads = rng.range(0, int64_t(1) << 33); break;
  }
}

struct QuantizeCase {
  BsrView a;
  sparsek::QuantizedBsrOut out;
  std::vector<const void*> pointers() const {
    return {a.row_ptr, a.col_idx, a.values, a.scales, out.values, out.scales};
  }
};

QuantizeCase quantize_base(Rng& rng, const Arenas& mem) {
  static const int32_t kBlock[] = {1, 16, 32, 48, 64, 128};
  QuantizeCase x;
  x.a.bm = rng.pick(kBlock), x.a.bk = rng.pick(kBlock);
  const int64_t rows = rng.range(0, 6), cols = rng.range(0, 6);
  x.a.m = rows * x.a.bm, x.a.k = cols * x.a.bk;
  x.a.nnzb = rng.range(0, rows * cols);
  static const DType kIn[] = {DType::F16, DType::BF16, DType::F32};
  x.a.dtype = rng.pick(kIn);
  x.a.row_ptr = static_cast<const int32_t*>(in_slot(rng, mem, 0));
  x.a.col_idx = static_cast<const int32_t*>(in_slot(rng, mem, 1));
  x.a.values = in_slot(rng, mem, 2);
  x.out.values = in_slot(rng, mem, 3);
  x.out.dtype = rng.chance(0.5) ? DType::E4M3 : DType::E5M2;
  x.out.scales = static_cast<float*>(in_slot(rng, mem, 4));
  x.out.granularity = rng.chance(0.5) ? ScaleKind::PerBlock : ScaleKind::PerTensor;
  return x;
}

void quantize_mutate(Rng& rng, const Arenas& mem, QuantizeCase& x) {
  const std::vector<const void*> others = x.pointers();
  switch (rng.bits() % 13) {
    case 12:  // a pointer off its alignment (A's values their dtype's, indices 4, scales 16)
      switch (rng.bits() % 4) {
        case 0:
        case 1: x.a.values = misalign(rng, x.a.values, int64_t(bytes_of(x.a.dtype))); break;
        case 2:
          if (rng.chance(0.5)) x.a.row_ptr = misalign(rng, x.a.row_ptr, 4);
          else x.a.col_idx = misalign(rng, x.a.col_idx, 4);
          break;
        default:
          if (rng.chance(0.5)) x.out.values = misalign(rng, x.out.values, 1);
          else x.out.scales = misalign(rng, x.out.scales, 16);
          break;
      }
      break;
    case 0: x.a.m = rng.wild64(); break;
    case 1: x.a.k = rng.wild64(); break;
    case 2: (rng.chance(0.5) ? x.a.bm : x.a.bk) = rng.wild32(); break;
    case 3: x.a.nnzb = rng.wild64(); break;
    case 4: x.a.dtype = rng.wild_enum<DType>(); break;
    case 5: {
      const void* p = wild_ptr(rng, mem, others);
      switch (rng.bits() % 3) {
        case 0: x.a.row_ptr = static_cast<const int32_t*>(p); break;
        case 1: x.a.col_idx = static_cast<const int32_t*>(p); break;
        default: x.a.values = p; break;
      }
      break;
    }
    case 6: x.out.dtype = rng.wild_enum<DType>(); break;
    case 7: x.out.granularity = rng.wild_enum<ScaleKind>(); break;
    case 8: {
      void* p = wild_ptr(rng, mem, others);
      if (rng.chance(0.5)) x.out.values = p;
      else x.out.scales = static_cast<float*>(p);
      break;
    }
    case 9: {  // an output on an input or the other output (or next to it)
      static const int64_t kDelta[] = {0, 0, 4, -4, 16, -16, 64, -64, 4096, -4096};
      const void* target = others[rng.bits() % others.size()];
      void* p = at(addr(target) + uintptr_t(rng.pick(kDelta)));
      if (target != nullptr) {
        if (rng.chance(0.5)) x.out.values = p;
        else x.out.scales = static_cast<float*>(p);
      }
      break;
    }
    case 10: {  // scales on A
      x.a.scale_kind = rng.wild_enum<ScaleKind>();
      x.a.scales = static_cast<const float*>(rng.chance(0.7) ? in_slot(rng, mem, 5) : nullptr);
      break;
    }
    default: {  // no block, or every block
      x.a.nnzb = rng.chance(0.5) ? 0 : sat(i128(x.a.m / std::max(1, x.a.bm)) * (x.a.k / std::max(1, x.a.bk)));
      break;
    }
  }
}

// ---- the validators, handed their devices ----------------------------------------------
//
// Each entry's validator (sparsek::detail) takes the devices its call runs on as an input
// (DeviceSource::given: the current device and the stream's, nothing queried), so the
// stream's device is drawn here without a GPU: the current device 0..3, the stream's the
// same three times in four, else another. The model: a stream of another device is refused
// (InvalidArgument) once every view passed and the types are supported; otherwise the
// validator's answer is the views' (a success carrying the current device's DeviceInfo).

namespace detail = sparsek::detail;

struct Devices {
  int current = 0, stream = 0;
  detail::DeviceSource source() const {
    detail::DeviceInfo d;
    d.id = current, d.cc_major = 9, d.cc_minor = 0, d.sm_count = 132, d.smem_optin = 227 * 1024;
    return detail::DeviceSource::given(d, stream);
  }
};

Devices draw_devices(Rng& rng) {
  Devices d;
  d.current = int(rng.range(0, 3));
  d.stream = rng.chance(0.75) ? d.current : int((d.current + rng.range(1, 3)) % 4);
  return d;
}

Want with_devices(Want views, const Devices& d) {
  return views == Want::Reached && d.stream != d.current ? Want::Invalid : views;
}

// A device id no validator writes: its problem's device after a success must be the current.
constexpr int kUnwritten = -99;
detail::DeviceInfo unwritten_device() {
  detail::DeviceInfo d;
  d.id = kUnwritten;
  return d;
}

// What else is wrong with a validator's answer `r` (finish()ed: prefixed as the entries'), ""
// when nothing: a refusal of the views is the public entry's (`entry`, the same draw with
// the GPUs hidden) word for word; a refused stream is named; a success carries the current
// device (`device_id`: its problem's).
std::string validator_why(const Result& r, Want views, const Devices& d, int device_id, const Result& entry) {
  if (views != Want::Reached) {
    if (r.status == entry.status && std::strcmp(r.message, entry.message) != 0)
      return std::string("the validator and the entry disagree: \"") + r.message + "\" vs \"" + entry.message + "\"";
    return "";
  }
  if (d.stream != d.current) {
    if (!r.ok() && std::strstr(r.message, "stream belongs to device") == nullptr)
      return std::string("the refusal does not name the stream: ") + r.message;
    return "";
  }
  if (r.ok() && device_id != d.current)
    return "the problem carries device " + std::to_string(device_id) + ", not the current " +
           std::to_string(d.current);
  return "";
}

int mutations(Rng& rng) {
  const uint64_t r = rng.bits() % 20;
  return r < 6 ? 0 : r < 13 ? 1 : r < 17 ? 2 : int(r) - 14;
}

uint64_t env_u64(const char* name, uint64_t fallback, bool* given = nullptr) {
  const char* s = std::getenv(name);
  if (given != nullptr) *given = s != nullptr && *s != '\0';
  if (s == nullptr || *s == '\0') return fallback;
  return std::strtoull(s, nullptr, 0);
}

}  // namespace

int main() {
  // Hide every GPU before the first CUDA call: a call that passes validation fails at the
  // device query, with or without a GPU.
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  bool given = false;
  const uint64_t seed = env_u64(
      "SPARSEK_FUZZ_SEED", uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ uint64_t(getpid()),
      &given);
  const long iters = long(env_u64("SPARSEK_FUZZ_ITERS", 100000));
  std::printf("seed %llu%s (SPARSEK_FUZZ_SEED=%llu replays this run), %ld draws per entry point\n",
              (unsigned long long)seed, given ? " (given)" : "", (unsigned long long)seed, iters);
  std::fflush(stdout);
  Arenas mem;
  Judge judge{mem};
  judge.verbose = env_u64("SPARSEK_FUZZ_VERBOSE", 0) != 0;
  Rng rng(seed);
  std::vector<Tally> tallies;
  const auto t0 = std::chrono::steady_clock::now();

  // spmm / can_implement / dense_spmm / can_implement_dense_spmm.
  {
    Tally spmm{"spmm"}, dense{"dense_spmm"}, spmm_v{"spmm's validator, devices drawn"};
    for (long i = 0; i < iters; ++i) {
      SpmmCase x = spmm_base(rng, mem);
      for (int j = mutations(rng); j > 0; --j) spmm_mutate(rng, mem, x);
      const Want want = model_spmm(x.a, x.b, x.c, x.o);
      const Backend sentinel = static_cast<Backend>(0x5a5a);
      Backend chosen = sentinel;
      Result r = sparsek::can_implement(x.a, x.b, out(x.c), x.o, &chosen);
      judge.record(spmm, i, "can_implement", r, want, !r.ok() && chosen != Backend::Auto ? "*chosen not Auto after a failure" : "");
      r = sparsek::spmm(x.a, x.b, out(x.c), x.o, nullptr);
      judge.record(spmm, i, "spmm", r, want);
      {
        const Devices d = draw_devices(rng);
        detail::Problem p = detail::Problem::from_rust(BsrView{}, DenseView{}, sparsek::DenseMutView{}, 1.0f, 0.0f,
                                                       Backend::Auto, nullptr, Activation::None, unwritten_device(),
                                                       false, nullptr, false);
        const Result v = detail::finish(detail::validate(x.a, x.b, out(x.c), x.o, d.source(), &p));
        judge.record(spmm_v, i, "validate", v, with_devices(want, d), validator_why(v, want, d, p.device.id, r),
                     Status::Success);
      }
      // dense_spmm: D * op(A) on the views transposed (it runs spmm on their transposes).
      const DenseView d = sparsek::transposed(x.b);
      const sparsek::DenseMutView c = sparsek::transposed(out(x.c));
      SpmmOptions flipped = x.o;
      flipped.transpose_a = !x.o.transpose_a;
      chosen = sentinel;
      r = sparsek::can_implement_dense_spmm(d, x.a, c, flipped, &chosen);
      judge.record(dense, i, "can_implement_dense_spmm", r, want, !r.ok() && chosen != Backend::Auto ? "*chosen not Auto after a failure" : "");
      r = sparsek::dense_spmm(d, x.a, c, flipped, nullptr);
      judge.record(dense, i, "dense_spmm", r, want);
    }
    tallies.push_back(spmm);
    tallies.push_back(dense);
    tallies.push_back(spmm_v);
  }
  // sddmm / can_implement.
  {
    Tally t{"sddmm"}, tv{"sddmm's validator, devices drawn"};
    for (long i = 0; i < iters; ++i) {
      SddmmCase x = sddmm_base(rng, mem);
      for (int j = mutations(rng); j > 0; --j) sddmm_mutate(rng, mem, x);
      const Want want = model_sddmm(x.a, x.b, x.s, x.o);
      const Backend sentinel = static_cast<Backend>(0x5a5a);
      Backend chosen = sentinel;
      Result r = sparsek::can_implement(x.a, x.b, x.s, x.o, &chosen);
      judge.record(t, i, "can_implement", r, want, !r.ok() && chosen != Backend::Auto ? "*chosen not Auto after a failure" : "");
      r = sparsek::sddmm(x.a, x.b, x.s, x.o, nullptr);
      judge.record(t, i, "sddmm", r, want);
      const Devices d = draw_devices(rng);
      detail::SddmmProblem p = detail::SddmmProblem::from_rust(DenseView{}, DenseView{}, BsrMutView{}, 1.0f, 0.0f,
                                                               Backend::Auto, unwritten_device());
      const Result v = detail::finish(detail::validate(x.a, x.b, x.s, x.o, d.source(), &p));
      judge.record(tv, i, "validate", v, with_devices(want, d), validator_why(v, want, d, p.device.id, r),
                   Status::Success);
    }
    tallies.push_back(t);
    tallies.push_back(tv);
  }
  // attention / can_implement.
  {
    Tally t{"attention"}, tv{"attention's validator, devices drawn"};
    for (long i = 0; i < iters; ++i) {
      AttnCase x = attention_base(rng, mem);
      for (int j = mutations(rng); j > 0; --j) attention_mutate(rng, mem, x);
      const BlockMaskView* mask = x.has_mask ? &x.mask : nullptr;
      const Want want = model_attention(x.q, x.k, x.v, x.o, x.lse, mask, x.opt);
      const Backend sentinel = static_cast<Backend>(0x5a5a);
      Backend chosen = sentinel;
      Result r = sparsek::can_implement(x.q, x.k, x.v, out(x.o), x.lse, mask, x.opt, &chosen);
      judge.record(t, i, "can_implement", r, want, !r.ok() && chosen != Backend::Auto ? "*chosen not Auto after a failure" : "");
      r = sparsek::attention(x.q, x.k, x.v, out(x.o), x.lse, mask, x.opt, nullptr);
      judge.record(t, i, "attention", r, want);
      const Devices d = draw_devices(rng);
      detail::AttentionProblem p = detail::AttentionProblem::from_rust(
          HeadsView{}, HeadsView{}, HeadsView{}, sparsek::HeadsMutView{}, nullptr, nullptr, false,
          sparsek::CausalAlignment::TopLeft, 1.0f, Backend::Auto, unwritten_device());
      const Result v = detail::finish(detail::validate(x.q, x.k, x.v, out(x.o), x.lse, mask, x.opt, d.source(), &p));
      judge.record(tv, i, "validate", v, with_devices(want, d), validator_why(v, want, d, p.device.id, r),
                   Status::Success);
    }
    tallies.push_back(t);
    tallies.push_back(tv);
  }
  // block_topk_nnzb, block_topk, block_topk_scores.
  {
    Tally tn{"block_topk_nnzb"}, tp{"block_topk"}, ts{"block_topk_scores"};
    Tally tpv{"block_topk's validator, devices drawn"}, tsv{"block_topk_scores' validator, devices drawn"};
    for (long i = 0; i < iters; ++i) {
      GatingCase x = gating_base(rng, mem);
      for (int j = mutations(rng); j > 0; --j) gating_mutate(rng, mem, x);
      Gating g;
      const Want dims = model_gating_dims(x.batch, x.heads, x.seq_q, x.seq_k, x.o, &g);
      // block_topk_nnzb: Success with the model's count (CudaError is not reached: no device).
      int64_t nnzb = -7;
      Result r = sparsek::block_topk_nnzb(x.batch, x.heads, x.seq_q, x.seq_k, x.o, &nnzb);
      std::string extra;
      if (dims == Want::Reached && r.ok() && i128(nnzb) != g.nnzb)
        extra = "nnzb " + std::to_string(nnzb) + ", want " + std::to_string((long long)g.nnzb);
      if (!r.ok() && nnzb != -7) extra = "*nnzb written on failure";
      judge.record(tn, i, "block_topk_nnzb", r, dims, extra, Status::Success);

      BlockMaskView out;
      out.block_q = -7;
      BlockMaskView* mask = x.null_mask ? nullptr : &out;
      // block_topk: the dims, Q and K, then the outputs.
      Want want = dims;
      Range qr, kr;
      if (want == Want::Reached) {
        if (x.q.head_dim < 1 || !divides(x.k.heads, x.q.heads) ||
            !heads_ok(x.q, x.q.batch, x.q.heads, x.q.seq, x.q.head_dim, &qr) ||
            !heads_ok(x.k, x.q.batch, x.k.heads, x.k.seq, x.q.head_dim, &kr))
          want = Want::Invalid;
        else
          want = model_gating_outputs(g, x.row_ptr, x.col_idx, mask, qr, kr);
        // The element types (rules/gating.toml's types, after the outputs): one, f16 or bf16.
        if (want == Want::Reached && (x.k.dtype != x.q.dtype || (x.q.dtype != DType::F16 && x.q.dtype != DType::BF16))) want = Want::Unsupported;
      }
      // block_topk takes its dims from Q and K: the model's used x.batch etc.; they agree
      // unless a mutation of Q or K alone changed them, then judged from Q and K's.
      const bool same_dims =
          x.q.batch == x.batch && x.q.heads == x.heads && x.q.seq == x.seq_q && x.k.seq == x.seq_k;
      if (same_dims) {
        r = sparsek::block_topk(x.q, x.k, x.o, x.row_ptr, x.col_idx, mask, nullptr);
        judge.record(tp, i, "block_topk", r, want, !r.ok() && out.block_q != -7 ? "*mask written on failure" : "");
        const Devices d = draw_devices(rng);
        detail::GatingProblem g2;
        g2.device = unwritten_device();
        const Result v = detail::finish(
            detail::validate_block_topk(x.q, x.k, x.o, x.row_ptr, x.col_idx, mask, d.source(), &g2));
        judge.record(tpv, i, "validate_block_topk", v, with_devices(want, d),
                     validator_why(v, want, d, g2.device.id, r), Status::Success);
      }
      // block_topk_scores: the dims, the scores, then the outputs.
      want = dims;
      if (want == Want::Reached) {
        const i128 count = g.patterns * g.q_blocks * g.k_blocks;
        if ((x.scores == nullptr && count > 0) || misaligned(x.scores, 4))
          want = Want::Invalid;
        else
          want = model_gating_outputs(g, x.row_ptr, x.col_idx, mask, range_of(x.scores, count * 4), Range{});
      }
      out.block_q = -7;
      r = sparsek::block_topk_scores(x.scores, x.batch, x.heads, x.seq_q, x.seq_k, x.o, x.row_ptr, x.col_idx, mask,
                                     nullptr);
      judge.record(ts, i, "block_topk_scores", r, want, !r.ok() && out.block_q != -7 ? "*mask written on failure" : "");
      {
        const Devices d = draw_devices(rng);
        detail::GatingProblem g2;
        g2.device = unwritten_device();
        const Result v = detail::finish(detail::validate_block_topk_scores(
            x.scores, x.batch, x.heads, x.seq_q, x.seq_k, x.o, x.row_ptr, x.col_idx, mask, d.source(), &g2));
        judge.record(tsv, i, "validate_block_topk_scores", v, with_devices(want, d),
                     validator_why(v, want, d, g2.device.id, r), Status::Success);
      }
    }
    tallies.push_back(tn);
    tallies.push_back(tp);
    tallies.push_back(ts);
    tallies.push_back(tpv);
    tallies.push_back(tsv);
  }

  // sparse_mlp.
  {
    Tally t{"sparse_mlp"}, tv{"sparse_mlp's validator, devices drawn"};
    for (long i = 0; i < iters; ++i) {
      MlpCase x = mlp_base(rng, mem);
      for (int j = mutations(rng); j > 0; --j) mlp_mutate(rng, mem, x);
      const Result r = sparsek::sparse_mlp(x.m(), x.first.b, out(x.first.c), out(x.second.c), nullptr);
      const Want want = model_mlp(x);
      judge.record(t, i, "sparse_mlp", r, want);
      const Devices d = draw_devices(rng);
      detail::Problem p1 = detail::Problem::from_rust(BsrView{}, DenseView{}, sparsek::DenseMutView{}, 1.0f, 0.0f,
                                                      Backend::Auto, nullptr, Activation::None, unwritten_device(),
                                                      false, nullptr, false);
      detail::Problem p2 = p1;
      const Result v = detail::finish(
          detail::validate_mlp(x.m(), x.first.b, out(x.first.c), out(x.second.c), d.source(), &p1, &p2));
      std::string why = validator_why(v, want, d, p1.device.id, r);
      if (why.empty() && v.ok() && p2.device.id != p1.device.id) why = "the two products carry two devices";
      judge.record(tv, i, "validate_mlp", v, with_devices(want, d), why, Status::Success);
    }
    tallies.push_back(t);
    tallies.push_back(tv);
  }
  // quantize_fp8.
  {
    Tally t{"quantize_fp8"}, tv{"quantize_fp8's validator, devices drawn"};
    for (long i = 0; i < iters; ++i) {
      QuantizeCase x = quantize_base(rng, mem);
      for (int j = mutations(rng); j > 0; --j) quantize_mutate(rng, mem, x);
      const Result r = sparsek::quantize_fp8(x.a, x.out, nullptr);
      const Want want = model_quantize(x.a, x.out);
      judge.record(t, i, "quantize_fp8", r, want);
      const Devices d = draw_devices(rng);
      detail::QuantizeProblem q;
      const Result v = detail::finish(detail::validate_quantize(x.a, x.out, d.source(), &q));
      // A QuantizeProblem carries no device: the current one is the validator's to check only.
      judge.record(tv, i, "validate_quantize", v, with_devices(want, d), validator_why(v, want, d, d.current, r),
                   Status::Success);
    }
    tallies.push_back(t);
    tallies.push_back(tv);
  }

  // Each entry point must have seen both refusals and calls that reached the device query
  // (else the draws are degenerate and test nothing).
  int passed = 0, failed = 0;
  for (const Tally& t : tallies) {
    const long invalid = t.by_status[int(Status::InvalidArgument)], reached = t.by_status[int(Status::CudaError)];
    const bool varied = invalid * 20 >= t.calls && (reached + t.by_status[int(Status::Success)]) * 20 >= t.calls;
    const bool ok = t.failures == 0 && varied;
    std::printf("%s %s: %ld calls, %ld InvalidArgument, %ld NotSupported, %ld reached the device query, %ld "
                "Success%s, %ld failures\n",
                ok ? "PASS" : "FAIL", t.name, t.calls, invalid, t.by_status[int(Status::NotSupported)], reached,
                t.by_status[int(Status::Success)], varied ? "" : " (too few of a kind: degenerate draws)",
                t.failures);
    (ok ? passed : failed)++;
    for (const auto& [reason, count] : t.reasons) std::printf("    %8ld  %s\n", count, reason.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.1f s; seed %llu\n%d passed, %d failed\n", secs, (unsigned long long)seed, passed, failed);
  return failed == 0 ? 0 : 1;
}
