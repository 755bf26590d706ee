// The kernel of row sddmm_sm90_bf16_b128_acol_brow_sf32 of kSddmmSm90Variants (cpp/sddmm/sm90/configs.hpp).
#include "sddmm/sm90/kernel.hpp"

SPARSEK_SDDMM_SM90_INSTANTIATE("sddmm_sm90_bf16_b128_acol_brow_sf32")
