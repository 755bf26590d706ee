#!/usr/bin/env python3
"""PyTorch peers of sparsek's attention, on the masks sparsek ran (`attention_check --time`).

    python3 attention_torch.py [--iters N] CASE.json [CASE.json ...]

Each CASE.json is what `attention_check --time ... CASE.json` wrote: the case (mask name,
dtype, batch, heads, seq, head_dim, kept pairs) and its mask (stacked BSR over 128x128
blocks, one pattern per (batch, head), or none for dense/causal; the causal flag). For each
case it prints JSON lines in attention_check's schema (TFLOPS on the same kept pairs, 4 *
pairs * head_dim FLOPs):

    flex               FlexAttention (torch.compile'd flex_attention) with the same mask: the
                       block mask from the BSR directly (BlockMask.from_kv_blocks: listed
                       blocks full, diagonal blocks partial when causal), causal through
                       create_block_mask;
    sdpa_flash_dense   SDPA's flash backend without a mask, and
    sdpa_flash_causal  with is_causal: the dense ceilings of this shape (their own pairs);
    sdpa_cudnn_dense   the same on SDPA's cuDNN backend (Hopper's fastest dense attention in
    sdpa_cudnn_causal  PyTorch), when this build has it.

Times are CUDA events around each call after warm-up, median of N. Exit status non-zero when
torch or FlexAttention is missing.
"""
import argparse
import json
import sys

try:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError as e:  # pragma: no cover - the GPU machine has torch
    print(f"attention_torch.py: needs torch with FlexAttention: {e}", file=sys.stderr)
    sys.exit(2)

BLOCK = 128


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def line(case, impl, ms, pairs, **extra):
    row = {
        "impl": impl,
        "mask": case["mask"],
        "dtype": case["dtype"],
        "batch": case["batch"],
        "heads": case["heads"],
        "seq": case["seq"],
        "head_dim": case["head_dim"],
        "kept_pairs": pairs,
        "ms": round(ms, 5),
        "tflops": round(4.0 * pairs * case["head_dim"] / (ms * 1e-3) / 1e12, 2),
    }
    row.update(extra)
    print(json.dumps(row), flush=True)


def block_mask_from_bsr(case, device):
    """The stacked BSR as a FlexAttention BlockMask: listed blocks are full, except the
    diagonal ones of a causal mask, which are partial (mask_mod q >= kv)."""
    b, h, q_blocks, k_blocks = case["batch"], case["heads"], case["q_blocks"], case["k_blocks"]
    row_ptr = torch.tensor(case["row_ptr"], dtype=torch.int64)
    col = torch.tensor(case["col_idx"], dtype=torch.int64)
    rows = b * h * q_blocks
    counts = row_ptr[1:] - row_ptr[:-1]
    row_of = torch.repeat_interleave(torch.arange(rows), counts)
    dense = torch.zeros(rows, k_blocks, dtype=torch.bool)
    dense[row_of, col] = True
    qi = torch.arange(rows) % q_blocks
    diag = torch.zeros_like(dense)
    if case["causal"]:
        cols = torch.arange(k_blocks)
        diag = dense & (cols[None, :] == qi[:, None])
    full = dense & ~diag

    def indices(m):
        num = m.sum(dim=1).to(torch.int32)
        # Kept columns first (ascending), then the rest: the order from_kv_blocks reads.
        key = (~m).to(torch.int64) * k_blocks + torch.arange(k_blocks)[None, :]
        idx = key.argsort(dim=1).to(torch.int32)
        return (num.view(b, h, q_blocks).to(device), idx.view(b, h, q_blocks, k_blocks).to(device))

    kv_num, kv_idx = indices(diag)
    full_num, full_idx = indices(full)

    def causal(bb, hh, q, kv):
        return q >= kv

    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=BLOCK,
                                    mask_mod=causal if case["causal"] else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    flex = torch.compile(flex_attention)
    ceilings = {}
    for path in args.cases:
        with open(path) as f:
            case = json.load(f)
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[case["dtype"]]
        b, h, s, d = case["batch"], case["heads"], case["seq"], case["head_dim"]
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dtype) for _ in range(3))
        pairs = case["kept_pairs"]
        key = (case["dtype"], b, h, s, d)
        if key not in ceilings:
            causal_pairs = b * h * sum(min(i + 1, s) for i in range(s))
            rows = []
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        sdpa = torch.nn.functional.scaled_dot_product_attention
                        rows.append((f"sdpa_{name}_dense", median_ms(lambda: sdpa(q, k, v), args.iters), b * h * s * s))
                        rows.append((f"sdpa_{name}_causal", median_ms(lambda: sdpa(q, k, v, is_causal=True), args.iters),
                                     causal_pairs))
                except RuntimeError as e:  # no such backend for this shape or build
                    print(f"attention_torch.py: SDPA {name}: {str(e)[:200]}", file=sys.stderr)
            ceilings[key] = rows
        for impl, ms, pairs_of in ceilings[key]:
            line(case, impl, ms, pairs_of)
        try:
            if case["patterns"] > 0:
                bm = block_mask_from_bsr(case, dev)
            elif case["causal"]:
                bm = create_block_mask(lambda bb, hh, qq, kv: qq >= kv, None, None, s, s, device=dev,
                                       BLOCK_SIZE=BLOCK)
            else:
                bm = None
            ms = median_ms(lambda: flex(q, k, v, block_mask=bm), args.iters)
            line(case, "flex", ms, pairs)
        except Exception as e:  # a failed compile is a row with the reason, not a crash
            print(json.dumps({"impl": "flex", "mask": case["mask"], "dtype": case["dtype"], "batch": b,
                              "heads": h, "seq": s, "head_dim": d, "error": str(e)[:300]}), flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
