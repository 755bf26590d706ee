// The spmm_sm90 rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// spmm/sm90/kernel.hpp's SPARSEK_SM90_INSTANTIATE.
#include "spmm/sm90/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::spmm_sm90 {
namespace {

const units::Registration kRows(units::table_rows<kSm90Variants>(
    "spmm_sm90", "spmm/sm90/kernel.hpp", "SPARSEK_SM90_INSTANTIATE", units::ArchClass::kSm90a));

}  // namespace
}  // namespace sparsek::detail::spmm_sm90
