// The spmm_decode rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// spmm/decode/kernel.cuh's SPARSEK_DECODE_INSTANTIATE.
#include "spmm/decode/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::spmm_decode {
namespace {

const units::Registration kRows(units::table_rows<kDecodeVariants>(
    "spmm_decode", "spmm/decode/kernel.cuh", "SPARSEK_DECODE_INSTANTIATE", units::ArchClass::kAll));

}  // namespace
}  // namespace sparsek::detail::spmm_decode
