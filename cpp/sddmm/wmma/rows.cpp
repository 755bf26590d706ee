// The sddmm_wmma rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// sddmm/wmma/kernel.cuh's SPARSEK_SDDMM_WMMA_INSTANTIATE.
#include "sddmm/wmma/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::sddmm_wmma {
namespace {

const units::Registration kRows(units::table_rows<kSddmmWmmaVariants>(
    "sddmm_wmma", "sddmm/wmma/kernel.cuh", "SPARSEK_SDDMM_WMMA_INSTANTIATE", units::ArchClass::kAll,
    kFeatureSddmm));

}  // namespace
}  // namespace sparsek::detail::sddmm_wmma
