// The kernel of row sm90_bf16_bm64_brow_crow_at of kSm90Variants (cpp/sm90/configs.hpp).
#include "sm90/kernel.hpp"

SPARSEK_SM90_INSTANTIATE("sm90_bf16_bm64_brow_crow_at")
