// The Decode kernel family of the product (kDecodeFamily, spmm/operation.hpp; the registry:
// core/registry.hpp): memory-bound kernels for few columns of B (decode-sized batches),
// sm_80+, with the fused bias/activation and the gated epilogues. What it supports, when a
// row of its table (configs.hpp) fits a problem, and the dispatch to the row's launch (the
// row units, generated from the table by the units generator). Sees the kernel only through
// launch.hpp, so this file compiles no kernel.
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "spmm/decode/launch.hpp"
#include "core/family_util.hpp"
#include "core/launch_table.hpp"
#include "spmm/operation.hpp"

namespace sparsek::detail {
namespace spmm_decode {
namespace {

// This family's answer to "is there an image for this device" (family_util.hpp).
const char* missing_image(const Problem& p) {
  static ImageCache cache;
  return detail::missing_image(p, probe_kernel<0>(), cache);
}

constexpr int kFirstFp8Row = decode_first_fp8_row();
static_assert(kFirstFp8Row >= 0, "the table has FP8 (W8A16) rows");

// Null when the device's image of `probe` is code of compute capability >= `version`
// (binary and PTX), else `why`; asked once per device (`known`: 0 not yet, 1 yes, -1 no).
// Assumes missing_image answered for the probe.
const char* image_below(const Problem& p, const void* probe, int version,
                        std::atomic<signed char> (&known)[ImageCache::kMaxDevices], const char* why) {
  const int dev = p.device.id;
  const bool cached = dev >= 0 && dev < ImageCache::kMaxDevices;
  const signed char state = cached ? known[dev].load(std::memory_order_relaxed) : 0;
  if (state != 0) return state > 0 ? nullptr : why;
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, probe) != cudaSuccess) {
    (void)cudaGetLastError();  // not about the image (missing_image answered): asked again next time
    return "cudaFuncGetAttributes failed on a Decode kernel";
  }
  const bool ok = attr.binaryVersion >= version && attr.ptxVersion >= version;
  if (cached) known[dev].store(ok ? 1 : -1, std::memory_order_relaxed);
  return ok ? nullptr : why;
}

// Why FP8 A cannot run here, or null: the FP8 rows must be built (kRow: the first), and the
// device's image of them must be sm_89+ code (cvt.rn.f16x2.e4m3x2; an sm_80 image, e.g. an
// sm_80 cubin on an sm_89 device, would convert in software: refused, never run).
template <int kRow>
const char* missing_fp8_image(const Problem& p) {
  if constexpr (!built(needs(kDecodeVariants[kRow]))) {
    (void)p;
    return "FP8 weights (W8A16) need the feature `fp8` (not built)";
  } else {
    const void* probe = probe_kernel<kRow>();
    static ImageCache cache;
    if (const char* why = detail::missing_image(p, probe, cache)) return why;
    static std::atomic<signed char> known[ImageCache::kMaxDevices] = {};
    return image_below(p, probe, 89, known,
                       "this build's Decode FP8 kernels for this GPU are sm_80 code (FP8 conversion needs sm_89+)");
  }
}

// Why a gated (GLU) product cannot run here, or null: its gate and up halves meet in a
// thread-block cluster (kernel.cuh), so the device and its image must be sm_90+.
const char* missing_cluster_image(const Problem& p, const void* probe) {
  if (p.device.cc_major < 9)
    return "a gated (GLU) product needs thread-block clusters (compute capability >= 9.0)";
  static std::atomic<signed char> known[ImageCache::kMaxDevices] = {};
  return image_below(p, probe, 90, known,
                     "a gated (GLU) product needs sm_90 code (thread-block clusters); this build's Decode kernels "
                     "for this GPU are older");
}

VariantInfo info(int row) {
  const DecodeVariant& v = kDecodeVariants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by, v.chunked};
  i.needs = needs(v);
  return i;
}

// 16-bit inputs: C of the input type or f32, which this family runs in every combination.
// FP8 A (W8A16): B f16 or bf16 without scales (the entry's checks), C f16, bf16 or f32 with
// a bias of C's type, A's scales none, per tensor or per block: every combination runs; W8A8
// (FP8 B) is the Hopper family's. B and C take any ld and need only their elements'
// alignment, which the Problem's invariants give (the entries refuse a pointer misaligned for
// its dtype): the kernel reads B element-wise through 16-bit loads unless its columns are
// 16-byte aligned (then with the TMA or cp.async), and writes C element-wise; bias is 16-byte
// aligned by the Problem's invariants (the kernel reads it element-wise anyway).
const char* supports(const Problem& p) {
  const bool fp8 = detail::is_fp8(p.input());
  if (fp8) {
    if (!DecodeFp8DTypes::contains(p.input())) return "A's FP8 type is not e4m3 or e5m2";
    if (!DecodeDTypes::contains(p.b.dtype))
      return "FP8 A takes f16 or bf16 B here (W8A16); W8A8 (FP8 B) runs on the Hopper family";
    if (p.b.dtype == DType::BF16 && !built(kFeatureBf16))
      return "bf16 B needs the feature `bf16` (not built)";
    if (p.a.scale_kind != ScaleKind::None && p.a.scale_kind != ScaleKind::PerTensor &&
        p.a.scale_kind != ScaleKind::PerBlock)
      return "A's scales must be none, per tensor or per block";
    if (p.b.scale_kind != ScaleKind::None) return "W8A16 takes no scales on B";
    if (p.device.cc_major < 8 || (p.device.cc_major == 8 && p.device.cc_minor < 9))
      return "FP8 weights (W8A16) need compute capability >= 8.9 (cvt.rn.f16x2.e4m3x2)";
  } else if (!DecodeDTypes::contains(p.input())) {
    return "A and B must be f16 or bf16";
  }
  if (p.device.cc_major < 8) return "needs compute capability >= 8.0 (cp.async, ldmatrix, bf16 mma.sync)";
  if (p.a_transposed) return "op(A) = A^T is not in this family (the Hopper and WMMA families run it)";
  const int bm = p.a.bm, bk = p.a.bk;
  if (bm < 16 || bm > 256 || bm % 16 != 0) return "bm must be a multiple of 16 in [16, 256]";
  if (bk < 16 || bk > 256 || bk % 16 != 0) return "bk must be a multiple of 16 in [16, 256]";
  if (p.a.nnzb > 0 && !aligned16(p.a.values)) return "A.values must be 16-byte aligned";
  // The kernel counts a CTA's k16-slabs (at most k/16) and slab positions past them in int32.
  if (p.k() / 16 > INT_MAX - (1 << 16)) return "k is too large (k/16 must fit in int32)";
  // Grid: one CTA per (block-row, slice) before the split; slices <= bm/16.
  if (p.block_rows() * (bm / 16) > INT_MAX) return "m is too large for the grid (m/16 CTAs must fit in int32)";
  const char* why = fp8 ? missing_fp8_image<kFirstFp8Row>(p) : missing_image(p);
  // Every row is built for the same architectures: row 0's image answers for all.
  if (why == nullptr && p.gated) why = missing_cluster_image(p, probe_kernel<0>());
  return why;
}

const char* fits(const Problem& p, int row) {
  const DecodeVariant& v = kDecodeVariants[row];
  if (v.fp8_a != detail::is_fp8(p.input()))
    return v.fp8_a ? "the row takes FP8 A (W8A16)" : "the row takes f16 or bf16 A";
  if (p.n() > v.n_max && !v.chunked) return "n is larger than the row's n_max";
  if (decode_total_smem_bytes(v) > p.device.smem_optin)
    return "its shared memory exceeds the device's per-block opt-in limit";
  return nullptr;
}

// Auto passes over a fill_only row unless its grid is preferred (launch.hpp's decode_prefers:
// more of A in flight, or as much with a smaller split) over every later row of its group,
// its partner's included (configs.hpp; launch_row.cuh's fill_score); on a tie, the later row.
// Asks the runtime for the rows' occupancy once per device (cached); launches nothing.
using ScoreFn = DecodeFill (*)(const Problem&);
struct ScoreRows {
  template <int kRow>
  static constexpr ScoreFn launch() {
    return &fill_score<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kDecodeVariants[kRow]);
  }
};
constexpr auto kScore = detail::launch_table<ScoreFn, ScoreRows, kDecodeRows>();

bool auto_skips(const Problem& p, int row) {
  if (!kDecodeVariants[row].fill_only) return false;
  const int partner = decode_fill_partner(row);
  if (partner < 0 || kScore[row] == nullptr) return true;
  const DecodeFill fill = kScore[row](p);
  for (int later = row + 1; later <= partner; ++later)  // the group's later rows (launch.hpp)
    if (kScore[later] == nullptr || !decode_prefers(fill, kScore[later](p))) return true;
  return false;
}

using LaunchFn = cudaError_t (*)(const Problem&, cudaStream_t);

// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kDecodeVariants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kDecodeRows>();


// A view of columns [j0, j0 + width) of a dense matrix.
template <class View>
View columns(const View& v, int64_t j0, int64_t width) {
  View out = v;
  const int64_t offset = v.layout == Layout::RowMajor ? j0 : j0 * v.ld;  // elements
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<decltype(v.data)>>, const char, char>;
  out.data = static_cast<Byte*>(v.data) + offset * dtype_bytes(v.dtype);
  out.cols = width;
  return out;
}

cudaError_t launch(const Problem& p, int row, cudaStream_t stream) {
  const DecodeVariant& v = kDecodeVariants[row];
  if (!v.chunked || p.n() <= v.n_max) return kLaunch[row](p, stream);
  // Column chunks are independent products (C's columns depend only on B's same columns),
  // so the result is the same as one launch would give, chunk after chunk in order.
  for (int64_t j0 = 0; j0 < p.n(); j0 += v.n_max) {
    const int64_t width = p.n() - j0 < v.n_max ? p.n() - j0 : v.n_max;
    Problem chunk = p;
    chunk.b = columns(p.b, j0, width);
    chunk.c = columns(p.c, j0, width);
    const cudaError_t e = kLaunch[row](chunk, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace
}  // namespace spmm_decode

extern const Family kDecodeFamily = {
    Backend::Decode,          "decode",
    spmm_decode::kDecodeRows, /*epilogue=*/true,
    &spmm_decode::info,       &spmm_decode::supports,
    &spmm_decode::fits,       &spmm_decode::launch,
    &spmm_decode::auto_skips, /*gated=*/true,
};

}  // namespace sparsek::detail
