"""The SDDMM's peers on the GPU machine, on the pattern `sddmm_check --time` used.

    python3 sddmm_torch.py PATTERN_FILE M N K f16|bf16 row|col row|col [--iters 20]

PATTERN_FILE: block-rows, block-columns and block on the first line, then row_ptr and col_idx
(what `sddmm_check --time ... PATTERN_FILE` writes). Prints one line each for
torch.sparse.sampled_addmm on the element CSR of that block pattern (PyTorch runs cuSPARSE's
SDDMM), and the two ceilings of the roofline efficiency E in this run: dense torch.matmul
(cuBLAS) at M x N x K and the HBM read rate of a large device-to-device copy. Timing: CUDA
events, median of 5 repeats of ITERS calls, after a warm-up.
"""
import argparse
import statistics
import warnings

import torch


def time_us(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        runs.append(1e3 * start.elapsed_time(end) / iters)
    return statistics.median(runs)


def dense(rows, cols, layout, dtype):
    """A random rows x cols matrix stored row- or column-major."""
    if layout == "row":
        return torch.randn(rows, cols, device="cuda", dtype=dtype)
    return torch.randn(cols, rows, device="cuda", dtype=dtype).t()


def main():
    warnings.filterwarnings("ignore")  # PyTorch's beta notices about sparse CSR
    p = argparse.ArgumentParser()
    p.add_argument("pattern")
    p.add_argument("m", type=int)
    p.add_argument("n", type=int)
    p.add_argument("k", type=int)
    p.add_argument("dtype", choices=["f16", "bf16"])
    p.add_argument("a_layout", choices=["row", "col"])
    p.add_argument("b_layout", choices=["row", "col"])
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    dtype = torch.float16 if args.dtype == "f16" else torch.bfloat16

    with open(args.pattern) as f:
        rows, cols, blk = (int(v) for v in f.readline().split())
        row_ptr = [int(v) for v in f.readline().split()]
        col_idx = [int(v) for v in f.readline().split()]
    assert rows * blk == args.m and cols * blk == args.n and len(row_ptr) == rows + 1
    nnzb = len(col_idx)
    flops = 2.0 * nnzb * blk * blk * args.k

    # The element CSR of the block pattern: each block-row's blocks expand to blk rows of
    # blk * (its block count) columns, in column order.
    rp = torch.tensor(row_ptr, dtype=torch.int64)
    ci = torch.tensor(col_idx, dtype=torch.int64)
    counts = (rp[1:] - rp[:-1]) * blk  # elements per row of each block-row
    row_counts = counts.repeat_interleave(blk)
    crow = torch.zeros(args.m + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(row_counts, 0)
    cols_of_row = []
    for r in range(rows):
        blocks = ci[row_ptr[r]:row_ptr[r + 1]]
        cols_of_row.append((blocks[:, None] * blk + torch.arange(blk)[None, :]).reshape(-1))
    col = torch.cat([c.repeat(blk) for c in cols_of_row]) if nnzb else torch.zeros(0, dtype=torch.int64)
    a = dense(args.m, args.k, args.a_layout, dtype)
    b = dense(args.k, args.n, args.b_layout, dtype)
    desc = f"m={args.m} n={args.n} k={args.k} block={blk} density={nnzb / (rows * cols):.4f} {args.dtype} " \
           f"A={args.a_layout} B={args.b_layout}"

    for sdtype in (dtype, torch.float32):
        s = torch.sparse_csr_tensor(crow.cuda(), col.cuda(), torch.ones(col.numel(), device="cuda", dtype=sdtype),
                                    size=(args.m, args.n))
        try:
            aa, bb = (a, b) if sdtype == dtype else (a.float(), b.float())
            us = time_us(lambda: torch.sparse.sampled_addmm(s, aa, bb, beta=0.0, alpha=1.0), args.iters)
            print(f"torch.sparse.sampled_addmm (cuSPARSE SDDMM) {desc} values={str(sdtype).split('.')[-1]} "
                  f"time_us={us:.1f} tflops={flops / us / 1e6:.1f}")
            break
        except RuntimeError as e:
            print(f"torch.sparse.sampled_addmm {desc} values={str(sdtype).split('.')[-1]}: refused: "
                  f"{str(e).splitlines()[0]}")

    us = time_us(lambda: torch.matmul(a, b), args.iters)
    print(f"ceiling: dense torch.matmul (cuBLAS) {args.m}x{args.n}x{args.k} {args.dtype} time_us={us:.1f} "
          f"tflops={2.0 * args.m * args.n * args.k / us / 1e6:.1f}")
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), 10)
    print(f"ceiling: HBM read {src.numel() / us / 1e3:.1f} GB/s (1 GiB device-to-device copy, bytes read)")


if __name__ == "__main__":
    main()
