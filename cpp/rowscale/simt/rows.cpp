// The rowscale_simt rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// rowscale/simt/kernel.cuh's SPARSEK_ROWSCALE_SIMT_INSTANTIATE.
#include "rowscale/simt/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::rowscale_simt {
namespace {

const units::Registration kRows(units::table_rows<kRowscaleSimtVariants>(
    "rowscale_simt", "rowscale/simt/kernel.cuh", "SPARSEK_ROWSCALE_SIMT_INSTANTIATE", units::ArchClass::kAll));

}  // namespace
}  // namespace sparsek::detail::rowscale_simt
