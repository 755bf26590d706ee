//! Fuzz of the public entry points on host operands, a module per operation: attention,
//! attention over serving layouts (packed sequences, key counts, paged K/V; `layout`),
//! the gating, block patterns, the products (spmm, spmm_fused, dense_spmm, sddmm), the CSR /
//! COO converters, `SparseLinear`, the FP8 products (spmm / spmm_fused / dense_spmm with an
//! FP8 A and its scales, the FP8 layer, their deprecated names, a bare FP8 matrix refused),
//! the FP8 quantizers, the tensor-parallel shards and the gated MLP
//! (`SparseMlp`, `interleave_block_rows`, the gated epilogue). One `#[test]` per
//! entry point, each drawing random
//! problems, tiny ones that must be accepted mixed with huge, zero, overlapping and
//! mismatched sizes, strides and buffers. Every case must
//! - not panic (each runs under `catch_unwind`; the first failing input is reported),
//! - not abort: a global allocator refuses any single allocation above `ALLOC_LIMIT`
//!   (16 MiB) and counts it; a refused allocation is allowed only when the call returns
//!   `Err` (an infallible one aborts the process: that is a bug),
//! - finish within `DRIVER.case_limit` (a watchdog aborts a case that hangs, naming it),
//! - agree with an independent oracle on accept / reject where one is easy,
//! - on `Err`, leave every output bitwise untouched (outputs are poisoned with a sentinel
//!   first); on `Ok`, write every element the output view addresses and nothing else, and
//!   match a naive f64 reference written here (bit for bit where the contract says so).
//!
//! The driver, the allocation guard and the generator are tests/common/fuzz.rs's;
//! `inputs` and `operands` hold what the targets draw in common.
//! `SPARSEK_FUZZ_SEED=<u64>` replays a run (the seed is printed; random by default),
//! `SPARSEK_FUZZ_CASES=<n>` sets the number of cases per test (by default 100 000 in an
//! optimized build and 10 000 in a debug one; CI runs it a third time with 100 000),
//! `SPARSEK_FUZZ_ONLY=<i>` runs case `i` alone.

// The FP8 targets (fp8, mlp) call the unified entries and the deprecated FP8 names they
// replace (`spmm_fp8`, `Fp8Operand`, `SparseLinear::new_fp8` / `forward_fp8`,
// `SparseMlp::new_fp8` / `forward_fp8`): the aliases must still compile, pass the same
// oracle, and give the unified entries' results bit for bit while they stay.
#![allow(deprecated)]

use std::time::Duration;

#[path = "../common/dequantize.rs"]
mod dequantize;
#[path = "../common/fuzz.rs"]
mod fuzz;

mod inputs;
mod operands;

mod attention;
mod convert;
mod fp8;
mod gating;
mod layout;
mod linear;
mod mlp;
mod patterns;
mod products;
mod quantize;
mod shard;

/// How these targets run: a case within 500 ms, on three rayon workers (attention's waves
/// of (batch, head) pairs and the products' parallel loops run as on a small machine); a
/// call may meet a refused allocation if it then returns `Err`.
pub const DRIVER: fuzz::Driver = fuzz::Driver {
    case_limit: Duration::from_millis(500),
    workers: 3,
    refusal_may_reject: true,
};
