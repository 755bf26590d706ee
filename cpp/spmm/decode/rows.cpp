// The spmm_decode rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// spmm/decode/kernel.cuh's SPARSEK_DECODE_INSTANTIATE.
#include "spmm/decode/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::spmm_decode {
namespace {

// Five rows a unit: a W8A16 row is four kernels (e4m3 / e5m2 A x f16 / bf16 B) and a 16-bit
// row two, so a 12-row unit of either kind was the long pole of a 2-core build (the W8A16
// unit ~2.7 min a architecture, nvcc 13.0).
const units::Registration kRows(units::table_rows<kDecodeVariants>(
    "spmm_decode", "spmm/decode/kernel.cuh", "SPARSEK_DECODE_INSTANTIATE", units::ArchClass::kAll, 0, 5));

}  // namespace
}  // namespace sparsek::detail::spmm_decode
