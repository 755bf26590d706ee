#!/usr/bin/env python3
"""PyTorch peers of sparsek's attention, on the masks sparsek ran (`attention_check --time`).

    python3 attention_torch.py [--iters N] [--no-fa4] CASE.json [CASE.json ...]

Each CASE.json is what `attention_check --time ... CASE.json` wrote: the case (mask name,
dtype, batch, heads, heads_kv, seq (the queries'), seq_k, head_dim, causal_alignment, kept
pairs) and its mask (stacked BSR over 128x128 blocks, one pattern per (batch, query head), or
none for dense/causal; the causal flag). Case files of an older timer (no heads_kv, seq_k or
alignment) read as heads_kv = heads, seq_k = seq, top-left. For each case it prints JSON lines
in attention_check's schema (TFLOPS on the same kept pairs, 4 * pairs * head_dim FLOPs):

    flex               FlexAttention (torch.compile'd flex_attention, enable_gqa when K has
                       fewer heads) with the same mask: the block mask from the BSR directly
                       (BlockMask.from_kv_blocks: listed blocks full, blocks crossing the causal
                       diagonal partial), causal through create_block_mask;
    sdpa_cudnn_mask    SDPA's cuDNN backend on the same mask: is_causal for a causal mask PyTorch
                       aligns the same way, else the mask as an additive bf16/f16 bias (dense
                       work: SDPA has no block sparsity); skipped above 24 GiB of bias;
    fa4_sparse         FlashAttention-4 (flash_attn.cute, when importable) on the same mask:
                       its block-sparse forward (listed blocks full, blocks crossing the causal
                       diagonal masked by a causal mask_mod);
    sdpa_flash_dense   the dense ceilings of the shape (their own pairs): SDPA's flash
    sdpa_flash_causal  backend (FlashAttention-2 in PyTorch's builds) without a mask and with
    sdpa_cudnn_dense   is_causal (top-left), the same on SDPA's cuDNN backend (Hopper's fastest
    sdpa_cudnn_causal  dense attention in PyTorch), and FlashAttention-4's dense and causal
    fa4_dense          (bottom-right, FlashAttention's alignment) forward when importable.
    fa4_causal

Grouped-query cases (heads_kv < heads) run with SDPA's and flex_attention's enable_gqa and
FlashAttention-4's native K/V heads; a backend that refuses enable_gqa runs on K and V repeated
per query head instead (the line then has "kv_repeated_by_peer": true). A peer that fails
prints a line with "error" (the reason) instead of a time. Without FlashAttention-4 one line
on stderr says so, and bench_report quotes the issue's FA4 figures for reference.

Times are CUDA events around each call after warm-up, median of N. Exit status non-zero when
torch or FlexAttention is missing.
"""
import argparse
import json
import sys

try:
    import torch
    import torch._dynamo
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError as e:  # pragma: no cover - the GPU machine has torch
    print(f"attention_torch.py: needs torch with FlexAttention: {e}", file=sys.stderr)
    sys.exit(2)

BLOCK = 128
# The largest additive mask materialized for SDPA's masked row (bytes).
SDPA_MASK_LIMIT = 24 << 30


def load_fa4():
    """FlashAttention-4's forward and block-sparse tensors type, or None (and why)."""
    try:
        from flash_attn.cute import flash_attn_func
        from flash_attn.cute.block_sparsity import BlockSparseTensorsTorch
    except Exception as e:  # absent, or a build that does not load here
        return None, f"{type(e).__name__}: {str(e)[:200]}"
    return (flash_attn_func, BlockSparseTensorsTorch), None


def fa4_causal_mask_mod(offset):
    """A CuTe DSL mask_mod keeping key n <= query m + offset (the blocks crossing the
    diagonal); None when this FlashAttention-4 build has no CuTe DSL to write one."""
    try:
        import cutlass
        import cutlass.cute as cute
        from flash_attn.cute import utils as fa4_utils
    except Exception:
        return None

    @cute.jit
    def causal(batch, head, m_idx, n_idx, seqlen_info, aux_tensors):
        return n_idx <= m_idx + fa4_utils.scalar_to_ssa(offset, cutlass.Int32)

    return causal


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


def case_fields(case):
    """The case's identifying fields, as attention_check writes them."""
    return {
        "mask": case["mask"],
        "dtype": case["dtype"],
        "batch": case["batch"],
        "heads": case["heads"],
        "heads_kv": case["heads_kv"],
        "seq": case["seq"],
        "seq_k": case["seq_k"],
        "head_dim": case["head_dim"],
        "causal_alignment": case["causal_alignment"],
        "kv_repeated": case["kv_repeated"],
    }


def line(case, impl, ms, pairs, **extra):
    row = {"impl": impl, **case_fields(case), "kept_pairs": pairs, "ms": round(ms, 5),
           "tflops": round(4.0 * pairs * case["head_dim"] / (ms * 1e-3) / 1e12, 2)}
    row.update(extra)
    print(json.dumps(row), flush=True)


def error_line(case, impl, err):
    print(json.dumps({"impl": impl, **case_fields(case), "error": f"{type(err).__name__}: {str(err)[:300]}"}),
          flush=True)


def causal_offset(case):
    """Key j is kept by query i when j <= i + offset."""
    return case["seq_k"] - case["seq"] if case["causal_alignment"] == "bottom_right" else 0


def causal_pairs(s, sk, offset):
    """Kept pairs of one (batch, head) under causality with this diagonal offset."""
    return sum(min(max(i + offset + 1, 0), sk) for i in range(s))


def listed_blocks(case):
    """The BSR as a dense [batch, heads, q_blocks, k_blocks] bool tensor (on the CPU)."""
    b, h, q_blocks, k_blocks = case["batch"], case["heads"], case["q_blocks"], case["k_blocks"]
    if case["patterns"] == 0:  # dense or causal: every block
        return torch.ones(b, h, q_blocks, k_blocks, dtype=torch.bool)
    row_ptr = torch.tensor(case["row_ptr"], dtype=torch.int64)
    col = torch.tensor(case["col_idx"], dtype=torch.int64)
    rows = b * h * q_blocks
    row_of = torch.repeat_interleave(torch.arange(rows), row_ptr[1:] - row_ptr[:-1])
    dense = torch.zeros(rows, k_blocks, dtype=torch.bool)
    dense[row_of, col] = True
    return dense.view(b, h, q_blocks, k_blocks)


def split_blocks(case):
    """(full, partial): the listed blocks whose keys every query row of the block keeps, and
    those crossing the causal diagonal (some pair kept, some not); blocks wholly after the
    diagonal are dropped. Without causal every listed block is full."""
    listed = listed_blocks(case)
    if not case["causal"]:
        return listed, torch.zeros_like(listed)
    s, sk, off = case["seq"], case["seq_k"], causal_offset(case)
    qi = torch.arange(case["q_blocks"])[:, None]
    kj = torch.arange(case["k_blocks"])[None, :]
    first_row, last_row = qi * BLOCK, torch.clamp((qi + 1) * BLOCK, max=s) - 1
    first_key, last_key = kj * BLOCK, torch.clamp((kj + 1) * BLOCK, max=sk) - 1
    all_kept = last_key <= first_row + off
    some_kept = first_key <= last_row + off
    return listed & all_kept, listed & some_kept & ~all_kept


def ordered(m):
    """A [b, h, rows, cols] bool tensor as (counts [b, h, rows], indices [b, h, rows, cols]):
    the kept columns first, ascending, then the rest (FlexAttention's and FA4's order)."""
    cols = m.shape[-1]
    num = m.sum(dim=-1).to(torch.int32)
    key = (~m).to(torch.int64) * cols + torch.arange(cols)
    return num, key.argsort(dim=-1).to(torch.int32)


def flex_block_mask(case, device):
    """The case's mask as a FlexAttention BlockMask."""
    s, sk, off = case["seq"], case["seq_k"], causal_offset(case)

    def causal(bb, hh, q, kv):
        return q + off >= kv

    if case["patterns"] == 0:
        if not case["causal"]:
            return None
        return create_block_mask(causal, None, None, s, sk, device=device, BLOCK_SIZE=BLOCK)
    full, partial = split_blocks(case)
    kv_num, kv_idx = ordered(partial)
    full_num, full_idx = ordered(full)
    args = (kv_num.to(device), kv_idx.to(device), full_num.to(device), full_idx.to(device))
    kw = {"BLOCK_SIZE": BLOCK, "mask_mod": causal if case["causal"] else None}
    if s % BLOCK == 0 and sk % BLOCK == 0:  # the lengths the blocks imply: any PyTorch takes these
        return BlockMask.from_kv_blocks(*args, **kw)
    return BlockMask.from_kv_blocks(*args, **kw, seq_lengths=(s, sk))


def sdpa_bias(case, dtype, device):
    """The case's mask as an additive bias (0 kept, -inf not): [b, h, seq, seq_k], or
    [1, 1, seq, seq_k] for a causal mask without blocks (the same for every head)."""
    s, sk = case["seq"], case["seq_k"]
    keep = listed_blocks(case).to(device)
    if case["patterns"] == 0:
        keep = keep[:1, :1]
    keep = keep.repeat_interleave(BLOCK, dim=2)[:, :, :s].repeat_interleave(BLOCK, dim=3)[..., :sk]
    if case["causal"]:
        i = torch.arange(s, device=device)[:, None]
        j = torch.arange(sk, device=device)[None, :]
        keep = keep & (j <= i + causal_offset(case))
    bias = torch.zeros(keep.shape, dtype=dtype, device=device)
    bias.masked_fill_(~keep, float("-inf"))
    return bias


def sdpa(q, k, v, gqa, **kw):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, **kw)


def time_sdpa(backend, q, k, v, iters, **kw):
    """(ms, repeated): SDPA on this backend with enable_gqa when K has fewer heads, or on K and
    V repeated per query head when the backend refuses that."""
    gqa = k.shape[1] != q.shape[1]
    with sdpa_kernel(backend):
        try:
            return median_ms(lambda: sdpa(q, k, v, gqa, **kw), iters), False
        except RuntimeError:
            if not gqa:
                raise
        group = q.shape[1] // k.shape[1]
        kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return median_ms(lambda: sdpa(q, kr, vr, False, **kw), iters), True


def ceilings(case, q, k, v, fa4, iters):
    """The dense rates of the case's shape: (impl, ms, pairs, extra) each."""
    b, h, s, sk = case["batch"], case["heads"], case["seq"], case["seq_k"]
    rows = []
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for kind, kw, pairs in (("dense", {}, b * h * s * sk), ("causal", {"is_causal": True},
                                                                b * h * causal_pairs(s, sk, 0))):
            impl = f"sdpa_{name}_{kind}"
            try:
                ms, rep = time_sdpa(backend, q, k, v, iters, **kw)
                rows.append((impl, ms, pairs, {"kv_repeated_by_peer": True} if rep else {}))
            except RuntimeError as e:  # no such backend for this shape or build
                rows.append((impl, None, pairs, {"error": f"{type(e).__name__}: {str(e)[:300]}"}))
    if fa4 is not None:
        fa4_func = fa4[0]
        q4, k4, v4 = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        for kind, causal, pairs in (("dense", False, b * h * s * sk), ("causal", True,
                                                                       b * h * causal_pairs(s, sk, sk - s))):
            try:
                ms = median_ms(lambda: fa4_func(q4, k4, v4, causal=causal), iters)
                rows.append((f"fa4_{kind}", ms, pairs, {}))
            except Exception as e:
                rows.append((f"fa4_{kind}", None, pairs, {"error": f"{type(e).__name__}: {str(e)[:300]}"}))
        del q4, k4, v4
    return rows


def time_fa4_sparse(case, q, k, v, fa4, iters):
    """FlashAttention-4's block-sparse forward on the case's mask (ms)."""
    fa4_func, sparse_tensors = fa4
    device = q.device
    full, partial = split_blocks(case)
    mask_mod = None
    if bool(partial.any()):
        mask_mod = fa4_causal_mask_mod(causal_offset(case))
        if mask_mod is None:
            raise RuntimeError("no CuTe DSL (cutlass.cute) for the causal mask_mod")
    mask_cnt, mask_idx = ordered(partial)
    full_cnt, full_idx = ordered(full)
    fields = {"mask_block_cnt": mask_cnt, "mask_block_idx": mask_idx, "full_block_cnt": full_cnt,
              "full_block_idx": full_idx}
    fields = {name: t.to(device) for name, t in fields.items()}
    if "block_size" in getattr(sparse_tensors, "_fields", ()):  # builds before it assume the tile (128 x 128 here)
        fields["block_size"] = (BLOCK, BLOCK)
    tensors = sparse_tensors(**fields)
    q4, k4, v4 = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    return median_ms(lambda: fa4_func(q4, k4, v4, mask_mod=mask_mod, block_sparse_tensors=tensors), iters)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-fa4", action="store_true", help="skip FlashAttention-4 even when importable")
    args = ap.parse_args()
    dev = torch.device("cuda")
    # One compiled kernel per shape and mask kind: static shapes, and room for every case's.
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)
    flex = torch.compile(flex_attention, dynamic=False)
    fa4, why = (None, "--no-fa4") if args.no_fa4 else load_fa4()
    if fa4 is None:
        print(f"attention_torch.py: FlashAttention-4 (flash_attn.cute) not importable here ({why}): no fa4 rows; "
              "bench_report quotes the issue's FA4 figures for reference", file=sys.stderr, flush=True)
    done = {}
    for path in args.cases:
        with open(path) as f:
            case = json.load(f)
        case.setdefault("heads_kv", case["heads"])
        case.setdefault("seq_k", case["seq"])
        case.setdefault("causal_alignment", "top_left")
        case.setdefault("kv_repeated", 1)
        case.setdefault("k_blocks", case["q_blocks"])
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[case["dtype"]]
        b, h, hk, s, sk, d = (case[x] for x in ("batch", "heads", "heads_kv", "seq", "seq_k", "head_dim"))
        gqa = hk != h
        q = torch.randn(b, h, s, d, device=dev, dtype=dtype)
        k, v = (torch.randn(b, hk, sk, d, device=dev, dtype=dtype) for _ in range(2))
        pairs = case["kept_pairs"]
        key = (case["dtype"], b, h, hk, s, sk, d)
        if key not in done:
            done[key] = ceilings(case, q, k, v, fa4, args.iters)
        for impl, ms, pairs_of, extra in done[key]:
            if ms is None:
                print(json.dumps({"impl": impl, **case_fields(case), **extra}), flush=True)
            else:
                line(case, impl, ms, pairs_of, **extra)
        try:
            bm = flex_block_mask(case, dev)
            ms = median_ms(lambda: flex(q, k, v, block_mask=bm, enable_gqa=gqa), args.iters)
            line(case, "flex", ms, pairs)
        except Exception as e:  # a failed compile is a row with the reason, not a crash
            error_line(case, "flex", e)
        if case["mask"] != "dense":
            try:
                if case["mask"] == "causal" and causal_offset(case) == 0:
                    ms, rep = time_sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, args.iters, is_causal=True)
                elif case["patterns"] > 0 and b * h * s * sk * q.element_size() > SDPA_MASK_LIMIT:
                    raise RuntimeError(f"the additive mask would take more than {SDPA_MASK_LIMIT >> 30} GiB")
                else:
                    bias = sdpa_bias(case, dtype, dev)
                    ms, rep = time_sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, args.iters, attn_mask=bias)
                    del bias
                line(case, "sdpa_cudnn_mask", ms, pairs, **({"kv_repeated_by_peer": True} if rep else {}))
            except Exception as e:
                error_line(case, "sdpa_cudnn_mask", e)
            torch.cuda.empty_cache()
        if fa4 is not None and case["mask"] != "dense":
            try:
                line(case, "fa4_sparse", time_fa4_sparse(case, q, k, v, fa4, args.iters), pairs)
            except Exception as e:
                error_line(case, "fa4_sparse", e)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
