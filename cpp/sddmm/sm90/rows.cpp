// The sddmm_sm90 rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// sddmm/sm90/kernel.hpp's SPARSEK_SDDMM_SM90_INSTANTIATE.
#include "sddmm/sm90/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::sddmm_sm90 {
namespace {

const units::Registration kRows(units::table_rows<kSddmmSm90Variants>(
    "sddmm_sm90", "sddmm/sm90/kernel.hpp", "SPARSEK_SDDMM_SM90_INSTANTIATE",
    units::ArchClass::kSm90a, kFeatureSddmm));

}  // namespace
}  // namespace sparsek::detail::sddmm_sm90
