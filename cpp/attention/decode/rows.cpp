// The attention_decode rows for the units generator (cpp/units/units.cpp, which compiles every
// cpp/<op>/<family>/rows.cpp): the table is configs.hpp, a row is instantiated by
// attention/decode/kernel.cuh's SPARSEK_ATTENTION_DECODE_INSTANTIATE.
#include "attention/decode/configs.hpp"
#include "units/family_rows.hpp"

namespace sparsek::detail::attention_decode {
namespace {

const units::Registration kRows(units::table_rows<kAttentionDecodeVariants>(
    "attention_decode", "attention/decode/kernel.cuh", "SPARSEK_ATTENTION_DECODE_INSTANTIATE",
    units::ArchClass::kAll, kFeatureAttention));

}  // namespace
}  // namespace sparsek::detail::attention_decode
