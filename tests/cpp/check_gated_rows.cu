// The gated rows of the Hopper family compiled into tests/cpp/check_gated.cu (not a library
// source): a measuring build that launches a named row directly, without the registry, so
// one process times several rows (SPARSEK_VARIANT is read once per process) and a library
// built before the rows existed still serves the rest of the harness (Decode, the down
// product, sparse_mlp). Problems are the harness's own, valid for the rows by construction:
// nothing is checked here beyond the row's block height. Unnamed, a problem gets the table's
// first automatic row for its dtype, B layout, block height and n, as Auto would; "k64" asks
// for the same among the rows of 64-wide k-tiles.
//
//   NVCC=third_party/py/nvidia/cu13/bin/nvcc
//   F="$(grep -v '^#' cpp/nvcc_flags.txt | tr '\n' ' ') -gencode=arch=compute_90a,code=sm_90a \
//      -Iinclude -Icpp -Ithird_party/py/cutlass_library/source/include"
//   $NVCC $F -DCHECK_GATED_ROWS -c tests/cpp/check_gated.cu -o check_gated.o
//   $NVCC $F -c tests/cpp/check_gated_rows.cu -o check_gated_rows.o
//   $NVCC check_gated.o check_gated_rows.o <libsparsek_kernels.a> -o check_gated
#include <cstdio>
#include <cstring>

#include <sparsek/sparsek.hpp>

#include "core/result.hpp"
#include "spmm/problem.hpp"
#include "spmm/sm90/kernel.hpp"

namespace {

using namespace sparsek;
using detail::spmm_sm90::kSm90Variants;
using detail::spmm_sm90::sm90_row;

using Launch = cudaError_t (*)(const detail::Problem&, cudaStream_t);

// What the pick below needs of a row, copied from the table at compile time.
struct GatedRow {
  const char* name;
  DType input;
  Layout b_layout;
  int bm;
  int64_t max_n;
  int tile_k;
  bool automatic;
  Launch launch;
};

template <int kRow>
constexpr GatedRow gated_row() {
  constexpr auto v = kSm90Variants[kRow];
  static_assert(v.gated, "a gated row");
  return {v.name, v.input, v.b_layout, v.bm, v.max_n, v.tile_k, v.automatic, &detail::spmm_sm90::launch_row<kRow>};
}

#define SPARSEK_GATED_ROW(NAME) gated_row<sm90_row(NAME)>()
// In table order. CHECK_GATED_ROWS_F16_BCOL: the automatic f16 rows of column-major x alone
// (the rows --time measures; a quarter of the compile), the other problems going to the
// library's rows.
#ifdef CHECK_GATED_ROWS_F16_BCOL
constexpr GatedRow kRows[] = {
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le64_k64_bcol"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k128_bcol_128x64"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k64_bcol_128x64"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k64_bcol"),
};
#else
constexpr GatedRow kRows[] = {
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le64_k64_bcol"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le64_k64_brow"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le64_k64_bcol"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le64_k64_brow"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k128_bcol_128x64"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k64_bcol_128x64"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k128_brow_128x64"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k64_brow_128x64"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le128_k128_bcol_128x64"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le128_k64_bcol_128x64"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le128_k128_brow_128x64"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le128_k64_brow_128x64"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k64_bcol"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k64_brow"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le128_k64_bcol"),
    SPARSEK_GATED_ROW("sm90_bf16_gated_bm_le128_k64_brow"),
    SPARSEK_GATED_ROW("sm90_f16_gated_bm_le128_k128_bcol"),
};
#endif
#undef SPARSEK_GATED_ROW

Result fail(Status s, const char* what) {
  Result r;
  r.status = s;
  std::snprintf(r.message, sizeof r.message, "sparsek: %s", what);
  return r;
}

}  // namespace

sparsek::Result launch_gated_row(const char* name, const sparsek::BsrView& a, const sparsek::DenseView& b,
                                 const sparsek::DenseMutView& c, const sparsek::SpmmOptions& o, cudaStream_t stream) {
  using namespace sparsek;
  const GatedRow* pick = nullptr;
  const bool k64 = name != nullptr && std::strcmp(name, "k64") == 0;
  if (k64) name = nullptr;
  for (const GatedRow& g : kRows) {
    const bool named = name != nullptr && std::strcmp(g.name, name) == 0;
    // The fit of a row's k-tile (family.cu): up to 1/8 of the last one empty (1/4 transposed).
    const int padded = (a.bk + g.tile_k - 1) / g.tile_k * g.tile_k;
    const bool k_fits = (g.bm == 64 ? 4 : 8) * (padded - a.bk) <= padded;
    const bool first = name == nullptr && g.automatic && !(k64 && g.tile_k != 64) && k_fits && g.input == a.dtype &&
                       g.b_layout == b.layout && a.bm <= g.bm && (g.max_n == 0 || c.cols <= g.max_n);
    if (named || first) {
      pick = &g;
      break;
    }
  }
  if (pick == nullptr) {
#ifdef CHECK_GATED_ROWS_F16_BCOL
    if (name == nullptr) {  // not an f16 row of column-major x: the library's row
      SpmmOptions lib = o;
      lib.backend = Backend::Hopper;
      return sparsek::spmm(a, b, c, lib, stream);
    }
#endif
    return fail(Status::NotSupported, "no gated row compiled in for this problem");
  }
  if (a.bm > pick->bm) return fail(Status::NotSupported, "bm is above the row's tile");
  detail::DeviceInfo dev;
  const Result d = detail::current_device(&dev);
  if (!d.ok()) return d;
  const detail::Problem p = detail::Problem::from_rust(a, b, c, o.alpha, 0.0f, Backend::Hopper, o.bias, o.activation,
                                                       dev, false, nullptr, true);
  const cudaError_t e = pick->launch(p, stream);
  if (e != cudaSuccess) {
    Result r = fail(Status::CudaError, cudaGetErrorString(e));
    r.cuda_error = e;
    return r;
  }
  return Result{};
}
