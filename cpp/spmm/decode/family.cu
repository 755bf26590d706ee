// The Decode kernel family (cpp/registry.hpp): memory-bound kernels for few columns of B
// (decode-sized batches), sm_80+, with the fused bias/activation epilogue. What it
// supports, when a row of its table (configs.hpp) fits a problem, and the dispatch to the
// row's launch (one translation unit per row, cpp/decode/instantiations/). Sees the
// kernel only through launch.hpp, so this file compiles no kernel.
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <utility>

#include "spmm/decode/launch.hpp"
#include "core/family_util.hpp"
#include "core/launch_table.hpp"
#include "core/registry.hpp"

namespace sparsek::detail {
namespace decode_impl {
namespace {

// This family's answer to "is there an image for this device" (family_util.hpp).
const char* missing_image(const Problem& p) {
  static ImageCache cache;
  return detail::missing_image(p, probe_kernel<0>(), cache);
}

VariantInfo info(int row) {
  const DecodeVariant& v = kDecodeVariants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by, v.chunked};
  i.needs = needs(v);
  return i;
}

// The dtypes need no check: every Problem has f16 or bf16 inputs and C of the input type
// or f32, which this family runs in every combination. B and C need no alignment and any
// ld (the kernel reads B element-wise unless its columns are 16-byte aligned, and writes C
// element-wise); bias is 16-byte aligned by the Problem's invariants (the kernel reads it
// element-wise anyway).
const char* supports(const Problem& p) {
  if (!DecodeDTypes::contains(p.input())) return "A and B must be f16 or bf16";
  if (p.device.cc_major < 8) return "needs compute capability >= 8.0 (cp.async, ldmatrix, bf16 mma.sync)";
  if (p.a_transposed) return "op(A) = A^T is not in this family (the Cutlass and Wmma families run it)";
  const int bm = p.a.bm, bk = p.a.bk;
  if (bm < 16 || bm > 256 || bm % 16 != 0) return "bm must be a multiple of 16 in [16, 256]";
  if (bk < 16 || bk > 256 || bk % 16 != 0) return "bk must be a multiple of 16 in [16, 256]";
  if (p.a.nnzb > 0 && !aligned16(p.a.values)) return "A.values must be 16-byte aligned";
  // The kernel counts a CTA's k16-slabs (at most k/16) and slab positions past them in int32.
  if (p.k() / 16 > INT_MAX - (1 << 16)) return "k is too large (k/16 must fit in int32)";
  // Grid: one CTA per (block-row, slice) before the split; slices <= bm/16.
  if (p.block_rows() * (bm / 16) > INT_MAX) return "m is too large for the grid (m/16 CTAs must fit in int32)";
  return missing_image(p);
}

const char* fits(const Problem& p, int row) {
  const DecodeVariant& v = kDecodeVariants[row];
  if (p.n() > v.n_max && !v.chunked) return "n is larger than the row's n_max";
  if (decode_total_smem_bytes(v) > p.device.smem_optin)
    return "its shared memory exceeds the device's per-block opt-in limit";
  return nullptr;
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
DenseView columns(const DenseView& v, int64_t j0, int64_t width) {
  DenseView out = v;
  const int64_t offset = v.layout == Layout::RowMajor ? j0 : j0 * v.ld;  // elements
  out.data = static_cast<char*>(v.data) + offset * dtype_bytes(v.dtype);
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
}  // namespace decode_impl

extern const Family kDecodeFamily = {
    Backend::Decode,          "decode",
    decode_impl::kDecodeRows, /*epilogue=*/true,
    &decode_impl::info,       &decode_impl::supports,
    &decode_impl::fits,       &decode_impl::launch,
};

}  // namespace sparsek::detail
