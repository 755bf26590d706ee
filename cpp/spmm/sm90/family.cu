// sparsek SM90: the Hopper kernel family of the product (kSm90Family, spmm/operation.hpp; the
// registry: core/registry.hpp) over the rows of kSm90Variants (configs.hpp). It checks what
// the kernels need beyond the Problem's invariants (cpp/spmm/problem.hpp, not re-checked
// here) and dispatches to launch_row<row>, which the row units instantiate (generated from
// the table by the units generator, a few rows each).
//
// The Fused and Direct rows take the linear-layer epilogue (bias per row of C or none,
// activation), both run-time arguments of their one kernel (sm90/epilogue.hpp,
// sm90/direct_epilogue.hpp); the bias needs nothing beyond the Problem's invariants (null,
// or m input values, 16-byte aligned). The Scaled rows (FP8, f16 C) take the bias but no
// activation and no beta, which the Direct rows after them take. The gated rows (configs.hpp
// `gated`, sm90/gated.hpp) run the gated product and nothing else; every other row refuses it.
//
// This file is light (no CUTLASS): the kernels live in the instantiation files. Built
// without sm_90a (SPARSEK_NO_SM90A), the family still exists, with its table, and refuses
// every problem with the reason; no launch_row is referenced.
#include <climits>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/launch_table.hpp"
#include "spmm/operation.hpp"
#include "spmm/sm90/configs.hpp"
#include "spmm/sm90/split.hpp"

#ifndef SPARSEK_NO_SM90A
#include <array>
#include <utility>
#endif

namespace sparsek::detail::spmm_sm90 {
namespace {

using detail::dtype_bytes;
using detail::Problem;
using detail::VariantInfo;

VariantInfo info(int row) {
  const Sm90Variant& v = kSm90Variants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by, /*fallback=*/false, v.max_n, v.max_row_depth};
  i.needs = needs(v);
  return i;
}

const char* takes_input(DType t) { return detail::row_takes(t); }

bool tma_aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// TMA: a global stride (bytes) must be below 2^40.
bool tma_stride_ok(int64_t ld, int64_t outer, DType t) {
  int64_t bytes = 0;
  const int64_t size = dtype_bytes(t);
  return !__builtin_mul_overflow(ld, outer, &bytes) && !__builtin_mul_overflow(bytes, size, &bytes) &&
         bytes < (int64_t(1) << 40);
}

// Pieces per tile of row v's launch for p (kernel.hpp: cluster and ping-pong launches and
// Never rows do not split; this is what a cooperative launch with split tiles would do).
int launch_split(const Problem& p, const Sm90Variant& v) {
  return choose_split(p, row_tiles(p, v), (p.a.bk + v.tile_k - 1) / v.tile_k, v.tile_k);
}

// Why a row's k-tiles do not take p's blocks (configs.hpp k_tiles_fit).
constexpr const char kDeepTail[] =
    "bk leaves too much of the row's last k tile empty (a row with a shallower k tile takes it)";

// Why row `row` cannot run p (its input dtype, block shapes, B layout and, for the
// TMA-epilogue rows, C are fixed).
const char* fits(const Problem& p, int row) {
  const Sm90Variant& v = kSm90Variants[row];
  if (p.a_transposed != v.a_transposed)
    return v.a_transposed ? "the row is for op(A) = A^T" : "the row is for op(A) = A (A^T: the _at rows)";
  if (p.gated != v.gated)
    return v.gated ? "the row runs the gated (GLU) product only" : "a gated (GLU) product runs on the _gated_ rows";
  if (p.input() != v.input) return takes_input(v.input);
  if (p.b.dtype != v.dense)
    return v.dense == v.input ? "the row takes B of A's dtype (W8A16 runs on the _f16 rows)"
                              : "the row is for FP8 A with f16 B (W8A16)";
  if (p.b.layout != v.b_layout)
    return v.b_layout == Layout::RowMajor ? "the row is for row-major B" : "the row is for column-major B";
  if (v.epilogue == EpilogueKind::Direct) {
    // FP8 rows write f16, bf16 or f32 (the Problem's only outputs for FP8 inputs).
    if (v.output != Output::Wide && p.output() != p.input() && p.output() != DType::F32)
      return "C must have the input dtype or f32";
    if (p.a.bm > v.bm) return "bm is above the row's tile";
    // (Auto leaves 16-high blocks to WMMA: the product's Auto policy, spmm/operation.hpp.)
    // bk % 16 == 0 (supports); the last k-tile may be partly empty (configs.hpp k_tiles_fit).
    if (!k_tiles_fit(v, p.a.bk))
      return kDeepTail;
    if (p.block_rows() > INT32_MAX / table::sparse_extent(v)) return "too many block-rows for the row's tile";
  } else if (v.output == Output::F16 ? p.output() != DType::F16 : p.output() != p.input()) {
    return v.output == Output::F16 ? "the row writes f16 C" : "the row writes C in the input dtype";
  }
  if (v.cluster > 1 || v.schedule == Schedule::PingPong) {
    const int64_t dense_tile = v.transposed ? v.tile_m : v.tile_n;
    if (p.n() % (v.cluster * dense_tile) != 0 && v.cluster > 1)
      return "the row's clusters need n a multiple of their dense extent";
    // Cluster and ping-pong launches do not split tiles (kernel.hpp); where a split pays, a
    // cooperative row with split tiles takes the problem (measured 1.4-1.9x on few long
    // block-rows).
    if (launch_split(p, v) > 1) return "few tiles with long block-rows: a cooperative row with split tiles takes them";
  }
  if (v.epilogue == EpilogueKind::Direct) return nullptr;
  if (p.a.bm != v.bm) return v.bm == 64 ? "the row is for bm = 64" : "the row is for bm = 128";
  if (detail::is_fp8(v.input)) {
    // FP8: the Direct rows' k-tiles (a k-tile never spans two blocks); B's column scales go
    // through the TMA epilogue's row broadcast in 16-byte vectors.
    if (!k_tiles_fit(v, p.a.bk))
      return kDeepTail;
    if (p.b.scale_kind == ScaleKind::PerColumn && !tma_aligned16(p.b.scales))
      return "the row's TMA epilogue needs B's column scales 16-byte aligned";
  } else if (p.a.bk != 64 && p.a.bk != 128) {
    return "the row is for bk = 64 or 128";
  }
  if (p.c.layout != (v.c_layout == CLayout::Col ? Layout::ColMajor : Layout::RowMajor))
    return v.c_layout == CLayout::Row ? "the row is for row-major C" : "the row is for column-major C";
  if (v.epilogue == EpilogueKind::Scaled) {
    if (p.beta != 0.0f) return "the row does not read C (beta = 0): the Direct rows take beta";
    if (p.activation != Activation::None) return "the row applies no activation: the Direct rows take one";
  } else if (p.has_epilogue() && v.epilogue != EpilogueKind::Fused)
    return "a bias or activation needs a fused row (column-major B and C, the layout of y = x*W^T)";
  // The TMA epilogue: C 16-byte aligned, its leading dimension and contiguous extent
  // multiples of 8 elements, its strides < 2^40 bytes.
  if (!tma_aligned16(p.c.data) || p.c.ld % 8 != 0 || p.n() % 8 != 0)
    return "the row's TMA epilogue needs C 16-byte aligned, n and ldc multiples of 8";
  if (!tma_stride_ok(p.c.ld, p.c.layout == Layout::RowMajor ? p.m() : p.n(), p.c.dtype))
    return "C too large for TMA strides (2^40 bytes)";
  return nullptr;
}

// Auto passes over an Only row (configs.hpp `split`) where its launch would not split: its
// split-free twin, further down, runs those problems faster. It passes over a transposed
// TMA-epilogue row (Plain, Fused; 64-high blocks, 256 columns of n per tile) where n leaves a
// partial tile after a whole one: that row's last dense box reaches past B, which the TMA
// loads slowly, while the Direct row further down with the same input, B layout and tile
// (the 64-high k64 row, built with the same features) loads that tile pulled back inside B
// (tile_iterator.hpp's dense_tile_start). Measured on an H100 (spmm_check, 4096 x 4096,
// d 0.5, B and C column-major, us, the Plain row forced vs Auto): 64x64 blocks n = 384 35.1
// vs 21.1, 448 28.1 vs 22.0, 600 55.2 vs 41.9; but 128x128 blocks (the natural 128x256
// tiles) n = 384 27.4 vs 31.7 and 448 25.2 vs 30.7 with the Direct row, so those keep theirs.
// It passes over a row bound to one wave at p's n (configs.hpp `one_wave_from_n`) whose tiles
// outnumber the SMs (unless its tiles leave fewer columns of n empty, `less_waste_than`), and
// over the 16-bit rows of 128-row tiles on 128-deep k-tiles for blocks 64 high or lower: half
// of each of their TMA boxes would lie past the block (zero-filled, slowly), and the
// transposed 64-high rows further down take those blocks.
bool auto_skips(const Problem& p, int row) {
  const Sm90Variant& v = kSm90Variants[row];
  if (v.split == Split::Only && launch_split(p, v) <= 1) return true;
  if (one_wave_skips(p, v)) return true;
  if (v.tile_k == 128 && !v.transposed && !v.gated && !detail::is_fp8(v.input) && p.a.bm <= 64) return true;
  return v.transposed && v.epilogue != EpilogueKind::Direct && p.n() > v.tile_m && p.n() % v.tile_m != 0;
}

#ifdef SPARSEK_NO_SM90A

const char* supports(const Problem&) { return "sparsek was built without sm_90a (SPARSEK_CUDA_ARCHS)"; }

cudaError_t launch(const Problem&, int, cudaStream_t) { return cudaErrorInvalidDeviceFunction; }

#else

// Whether some row takes this A and B dtype.
bool has_inputs(DType a, DType b) {
  for (const Sm90Variant& v : kSm90Variants)
    if (v.input == a && v.dense == b) return true;
  return false;
}

const char* supports(const Problem& p) {
  if (p.device.cc_major != 9 || p.device.cc_minor != 0) return "needs compute capability 9.0 (Hopper, sm_90a)";
  const int bm = p.a.bm, bk = p.a.bk;
  if (detail::is_fp8(p.input())) {
    // W8A8, and W8A16 with e4m3 A and f16 B (its rows convert A in registers); other
    // W8A16 runs on the Decode family.
    if (p.b.dtype != p.input() && !has_inputs(p.input(), p.b.dtype))
      return "W8A16 with this A and B runs on the Decode family (the Hopper rows take e4m3 A with f16 B)";
    // FP8 WGMMA reads both operands K-major from shared memory; the W8A16 rows' B is K-major too.
    if (p.b.layout != Layout::ColMajor)
      return "FP8 needs column-major B (K-major, i.e. x row-major in y = x*W^T): FP8 tensor cores read K-major "
             "operands only";
    if (bm > 128 || bk % 32 != 0) return "FP8 blocks must be at most 128 high with bk a multiple of 32";
  }
  if (!has_inputs(p.input(), p.b.dtype)) return "A and B must be f16, bf16 or FP8";
  if (bm > 256 || bk % 16 != 0) return "blocks must be at most 256 high with bk a multiple of 16";
  if (p.empty_output()) return nullptr;  // nothing is launched (core/select.hpp)
  const int64_t m = p.m(), n = p.n(), k = p.k();
  if (k == 0) return "k must be positive";
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return "m, n and k must fit in int32";  // nnzb does (Problem)
  // TMA loads of A's values and of B: 16-byte aligned base addresses, B's leading dimension
  // and contiguous extent multiples of 8 elements (16 bytes), strides < 2^40 bytes. (bk is
  // a multiple of 16, so the values' strides are too.)
  if (!tma_aligned16(p.b.data) || (p.a.nnzb > 0 && !tma_aligned16(p.a.values)))
    return "A values and B must be 16-byte aligned";
  const int64_t vec = 16 / dtype_bytes(p.b.dtype);  // B's elements of 16 bytes
  if (p.b.ld % vec != 0) return "the leading dimension of B must be a multiple of 16 bytes";
  if (p.b.layout == Layout::RowMajor && n % vec != 0) return "n must be a multiple of 16 bytes with row-major B";
  if (!tma_stride_ok(p.b.ld, p.b.layout == Layout::RowMajor ? k : n, p.b.dtype))
    return "B too large for TMA strides (2^40 bytes)";
  return nullptr;
}

// launch_row<0>, launch_row<1>, ...: one per row, each defined in its instantiation file.
using LaunchFn = cudaError_t (*)(const Problem&, cudaStream_t);
// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kSm90Variants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kSm90Rows>();

cudaError_t launch(const Problem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

#endif  // SPARSEK_NO_SM90A

}  // namespace
}  // namespace sparsek::detail::spmm_sm90

namespace sparsek::detail {

extern const Family kSm90Family = {
    Backend::Hopper,
    "hopper",
    spmm_sm90::kSm90Rows,
    /*epilogue=*/true,  // fused bias/activation (sm90/epilogue.hpp, direct_epilogue.hpp), chosen at run time
    &spmm_sm90::info,
    &spmm_sm90::supports,
    &spmm_sm90::fits,
    &spmm_sm90::launch,
    &spmm_sm90::auto_skips,
    /*gated=*/true,  // the gated rows (sm90/gated.hpp)
};

}  // namespace sparsek::detail
