// The attention_sm90 rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// attention/sm90/kernel.hpp's SPARSEK_ATTENTION_SM90_INSTANTIATE.
#include "attention/sm90/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::attention_sm90 {
namespace {

const units::Registration kRows(units::table_rows<kAttentionSm90Variants>(
    "attention_sm90", "attention/sm90/kernel.hpp", "SPARSEK_ATTENTION_SM90_INSTANTIATE",
    units::ArchClass::kSm90a, kFeatureAttention));

}  // namespace
}  // namespace sparsek::detail::attention_sm90
