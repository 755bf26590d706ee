// The Hopper SDDMM family (kSddmmSm90Family, sddmm/operation.hpp; the registry:
// core/registry.hpp), sm_90a: what it supports, when a row of its table (configs.hpp) fits,
// and the dispatch to the row's launch (the row units, generated from the table by the units
// generator; the kernel is kernel.hpp). It checks what the kernels need beyond the
// SddmmProblem's invariants (cpp/sddmm/problem.hpp, not re-checked).
//
// This file is light (no CUTLASS). Built without sm_90a (SPARSEK_NO_SM90A), the family still
// exists, with its table, and refuses every problem with the reason; no launch_row is
// referenced.
#include <climits>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/launch_table.hpp"
#include "core/family_util.hpp"
#include "sddmm/operation.hpp"
#include "sddmm/sm90/configs.hpp"

#ifndef SPARSEK_NO_SM90A
#include <array>
#include <utility>
#endif

namespace sparsek::detail {
namespace sddmm_sm90 {
namespace {

VariantInfo info(int row) {
  const SddmmSm90Variant& v = kSddmmSm90Variants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by};
  i.needs = needs(v);
  return i;
}

// Why row `row` cannot run p: its dtypes, block and layouts are fixed.
const char* fits(const SddmmProblem& p, int row) {
  const SddmmSm90Variant& v = kSddmmSm90Variants[row];
  if (p.input() != v.input) return row_takes(v.input);
  if (v.s_f32 && p.output() != DType::F32) return "the row writes an f32 S";
  if (!v.s_f32 && p.output() != p.input()) return "the row writes S in the input dtype";
  if (p.s.bm != v.block || p.s.bn != v.block)
    return v.block == 128 ? "the row is for 128x128 blocks" : "the row is for 64x64 blocks";
  if (p.a.layout != v.a_layout) return v.a_layout == Layout::RowMajor ? "the row is for row-major A" : "the row is for column-major A";
  if (p.b.layout != v.b_layout) return v.b_layout == Layout::RowMajor ? "the row is for row-major B" : "the row is for column-major B";
  // TMA (and CUTLASS's check of it) needs the contiguous extent of a K-major operand in
  // whole 16-byte units; an MN-major one's contiguous extent is m or n (multiples of the block).
  const bool k_contiguous = p.a.layout == Layout::RowMajor || p.b.layout == Layout::ColMajor;
  if (k_contiguous && p.k() % 8 != 0) return "k must be a multiple of 8 when A is row-major or B column-major";
  return nullptr;
}

#ifdef SPARSEK_NO_SM90A

const char* supports(const SddmmProblem&) { return "sparsek was built without sm_90a (SPARSEK_CUDA_ARCHS)"; }

cudaError_t launch(const SddmmProblem&, int, cudaStream_t) { return cudaErrorInvalidDeviceFunction; }

#else

// TMA: a global stride (bytes) must be below 2^40. The operands' batch stride (ld * outer
// elements, kernel.hpp) is the largest.
bool tma_stride_ok(int64_t ld, int64_t outer, int64_t size) {
  int64_t bytes = 0;
  return !__builtin_mul_overflow(ld, outer, &bytes) && !__builtin_mul_overflow(bytes, size, &bytes) &&
         bytes < (int64_t(1) << 40);
}

const char* missing_image(const SddmmProblem& p) {
  static ImageCache cache;
  return detail::missing_image(p.device.id, probe_kernel<0>(), cache);
}

const char* supports(const SddmmProblem& p) {
  if (p.device.cc_major != 9 || p.device.cc_minor != 0) return "needs compute capability 9.0 (Hopper, sm_90a)";
  if (const char* why = missing_image(p)) return why;
  if (p.empty_output()) return nullptr;  // nothing is launched (core/select.hpp)
  const int64_t m = p.m(), n = p.n(), k = p.k();
  if (k == 0) return "k must be positive";  // S = beta * S: the WMMA family takes it
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return "m, n and k must fit in int32";  // nnzb does
  // TMA loads of A and B and TMA loads/stores of S: 16-byte aligned base addresses, leading
  // dimensions in whole 16-byte units, strides below 2^40 bytes. (S's strides are bn and
  // bm*bn elements: 16-byte multiples for the rows' blocks.)
  if (!aligned16(p.a.data) || !aligned16(p.b.data) || !aligned16(p.s.values))
    return "A, B and S's values must be 16-byte aligned";
  if (p.a.ld % 8 != 0 || p.b.ld % 8 != 0) return "the leading dimensions of A and B must be multiples of 8";
  if (!tma_stride_ok(p.a.ld, p.a.layout == Layout::RowMajor ? m : k, dtype_bytes(p.input())) ||
      !tma_stride_ok(p.b.ld, p.b.layout == Layout::RowMajor ? k : n, dtype_bytes(p.input())))
    return "A or B too large for TMA strides (2^40 bytes)";
  return nullptr;
}

// launch_row<0>, launch_row<1>, ...: one per row, each defined in its instantiation file.
using LaunchFn = cudaError_t (*)(const SddmmProblem&, cudaStream_t);
// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kSddmmSm90Variants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kSddmmSm90Rows>();

cudaError_t launch(const SddmmProblem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

#endif  // SPARSEK_NO_SM90A

}  // namespace
}  // namespace sddmm_sm90

extern const SddmmFamily kSddmmSm90Family = {
    Backend::Hopper,
    "hopper",
    sddmm_sm90::kSddmmSm90Rows,
    /*epilogue=*/false,
    &sddmm_sm90::info,
    &sddmm_sm90::supports,
    &sddmm_sm90::fits,
    &sddmm_sm90::launch,
};

}  // namespace sparsek::detail
