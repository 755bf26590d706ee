// The kernel of row attn_sm90_bf16_d128_persist of kAttentionSm90Variants (cpp/attention/sm90/configs.hpp).
#include "attention/sm90/kernel.hpp"

SPARSEK_ATTENTION_SM90_INSTANTIATE("attn_sm90_bf16_d128_persist")
