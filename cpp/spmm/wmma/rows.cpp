// The spmm_wmma rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// spmm/wmma/kernel.cuh's SPARSEK_WMMA_INSTANTIATE.
#include "spmm/wmma/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::spmm_wmma {
namespace {

const units::Registration kRows(units::table_rows<kWmmaVariants>(
    "spmm_wmma", "spmm/wmma/kernel.cuh", "SPARSEK_WMMA_INSTANTIATE", units::ArchClass::kAll));

}  // namespace
}  // namespace sparsek::detail::spmm_wmma
