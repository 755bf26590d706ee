// The rows that tests/cpp/time_fp8.cu launches directly (not a library source), compiled
// three times: -DTIME_FP8_GROUP=0 for the W8A8 rows, 1 for the f16 rows they are compared
// with (Auto's rows for 128- and 64-high blocks with column-major B and C at the timed shapes,
// none of which splits, and the two f16 rows on 128-deep k-tiles), 2 for the W8A16 rows, so a
// change to one FP8 path recompiles only its object. Problems are time_fp8.cu's own, valid for
// the rows by construction (family.cu's supports() and fits() are not run here). Build: see
// time_fp8.cu.
#include "spmm/problem.hpp"
#include "spmm/sm90/kernel.hpp"

#include <cstring>

namespace {

using Launch = cudaError_t (*)(const sparsek::detail::Problem&, cudaStream_t);
struct Row {
  const char* name;
  Launch launch;
};
// A row the table lacks (a tree from before the row) gets no launch.
template <int kRow>
constexpr Launch launch_of() {
  if constexpr (kRow >= 0) {
    return &sparsek::detail::spmm_sm90::launch_row<kRow>;
  } else {
    return nullptr;
  }
}
#define TIME_FP8_ROW(NAME) \
  Row { NAME, launch_of<sparsek::detail::spmm_sm90::sm90_row(NAME)>() }

#if TIME_FP8_GROUP == 0
const Row kRows[] = {
    TIME_FP8_ROW("sm90_e4m3_bm_le128_k128_bcol"),
    TIME_FP8_ROW("sm90_e4m3_bm_le64_k64_bcol"),
    TIME_FP8_ROW("sm90_e4m3_bm_le128_k128_bcol_128x256_c2"),
    TIME_FP8_ROW("sm90_e4m3_bm128_k128_bcol_ccol"),
    TIME_FP8_ROW("sm90_e4m3_bm128_k128_bcol_crow"),
    TIME_FP8_ROW("sm90_e4m3_bm128_k128_bcol_ccol_128x256_c2"),
    TIME_FP8_ROW("sm90_e4m3_bm128_k128_bcol_crow_128x256_c2"),
    TIME_FP8_ROW("sm90_e4m3_bm128_k128_bcol_ccol_128x256"),
    TIME_FP8_ROW("sm90_e4m3_bm128_k128_bcol_crow_128x256"),
    TIME_FP8_ROW("sm90_e4m3_bm64_k64_bcol_ccol"),
    TIME_FP8_ROW("sm90_e4m3_bm64_k64_bcol_crow"),
};
#define TIME_FP8_GROUP_FN time_fp8_group_fp8
#elif TIME_FP8_GROUP == 1
const Row kRows[] = {
    TIME_FP8_ROW("sm90_f16_bm128_bcol_ccol"),
    TIME_FP8_ROW("sm90_f16_bm64_bcol_ccol"),
    TIME_FP8_ROW("sm90_f16_bm_le128_k128_bcol_128x128"),
    TIME_FP8_ROW("sm90_f16_bm_le128_k128_bcol_128x64"),
};
#define TIME_FP8_GROUP_FN time_fp8_group_f16
#else
const Row kRows[] = {
    TIME_FP8_ROW("sm90_e4m3_f16_bm_le128_k128_bcol"),
    TIME_FP8_ROW("sm90_e4m3_f16_bm_le128_k128_bcol_128x64"),
};
#define TIME_FP8_GROUP_FN time_fp8_group_w8a16
#endif
#undef TIME_FP8_ROW

}  // namespace

// Launches row `name` of this group on `*p` (p null: launches nothing): false when the group
// has no such row.
bool TIME_FP8_GROUP_FN(const char* name, const sparsek::detail::Problem* p, cudaStream_t stream, cudaError_t* err) {
  for (const Row& r : kRows)
    if (r.launch != nullptr && std::strcmp(r.name, name) == 0) {
      if (p != nullptr) *err = r.launch(*p, stream);
      return true;
    }
  return false;
}
