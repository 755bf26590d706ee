// The kernel of row sddmm_sm90_f16_b64_acol_brow of kSddmmSm90Variants (cpp/sddmm/sm90/configs.hpp).
#include "sddmm/sm90/kernel.hpp"

SPARSEK_SDDMM_SM90_INSTANTIATE("sddmm_sm90_f16_b64_acol_brow")
