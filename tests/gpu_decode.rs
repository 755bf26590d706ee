//! GPU tests of the decode family (`Backend::Decode`, small n; `--features cuda`): the
//! decode-sized cases against the f64 oracle (a small set of them for compute-sanitizer
//! too) and bitwise determinism (the cases: `common::gpu_spmm`). Without a GPU each test
//! says SKIPPED on stdout and stderr and returns; with SPARSEK_REQUIRE_GPU=1 (set by the
//! bundle's run script on the GPU machine) a missing GPU is a failure instead.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::gpu_spmm::{assert_repeats_bitwise, check_case, Case};
use common::{device, seed, PatternKind};
use cudarc::driver::CudaContext;
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, f16, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Layout, SpmmOptions,
};

/// The decode-sized cases of issue 11: every n of the list, both layouts of B and C, odd
/// leading dimensions, bias and activation on and off, every input/output type pair.
fn decode_cases(ns: &[usize], blocks: &[BlockShape]) -> Vec<Case> {
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::GeluTanh,
        Activation::Silu,
    ];
    let mut out = Vec::new();
    for (i, &n) in ns.iter().enumerate() {
        for (j, &block) in blocks.iter().enumerate() {
            let v = i + j;
            let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][v % 4];
            out.push(Case {
                block_rows: (384 / block.rows).max(2) - (v % 2),
                block_cols: (512 / block.cols).max(2) + (v % 3),
                block,
                kind: [
                    PatternKind::Random(0.5),
                    PatternKind::Random(0.25),
                    PatternKind::EmptyAndFullRows,
                    PatternKind::Full,
                ][v % 4],
                n,
                b_layout: common::layouts()[v % 2],
                c_layout: common::layouts()[(v / 2) % 2],
                alpha,
                beta,
                // Decode serves n <= its rows' n_max; beyond, Auto picks another family.
                backend: if n <= 128 {
                    Backend::Decode
                } else {
                    Backend::Auto
                },
                ld_pad: [0, 3, 1, 0][v % 4],
                bias: v % 3 != 0,
                activation: acts[v % 4],
            });
        }
    }
    out
}

fn run_typed(ctx: &Arc<CudaContext>, list: &[Case], rng: &mut StdRng) {
    for (idx, case) in list.iter().enumerate() {
        match idx % 6 {
            0 => check_case::<f16, f16>(ctx, case, rng),
            1 => check_case::<bf16, bf16>(ctx, case, rng),
            2 => check_case::<f16, f32>(ctx, case, rng),
            3 => check_case::<bf16, f32>(ctx, case, rng),
            4 => check_case::<bf16, bf16>(ctx, case, rng),
            _ => check_case::<f16, f16>(ctx, case, rng),
        }
    }
}

#[test]
fn decode_matches_reference() {
    let Some(ctx) = device("decode_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let ns = [1, 2, 3, 7, 8, 9, 16, 31, 40, 64, 100, 128, 256];
    let blocks = [
        BlockShape::new(32, 32),
        BlockShape::new(64, 64),
        BlockShape::new(128, 128),
        BlockShape::new(16, 48),
    ];
    let list = decode_cases(&ns, &blocks);
    run_typed(&ctx, &list, &mut rng);
    println!("decode_matches_reference: {} cases passed", list.len());
}

/// A few decode cases, small enough for compute-sanitizer (run.sh sanitize).
#[test]
fn decode_sanitized() {
    let Some(ctx) = device("decode_sanitized") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = decode_cases(
        &[1, 9, 64],
        &[BlockShape::new(32, 32), BlockShape::new(64, 64)],
    );
    run_typed(&ctx, &list, &mut rng);
    println!("decode_sanitized: {} cases passed", list.len());
}

#[test]
fn decode_is_deterministic() {
    let Some(ctx) = device("decode_is_deterministic") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    for n in [1, 16, 64] {
        let block = BlockShape::new(64, 64);
        let mask = BlockMask::random_per_row(4096 / 64, 4096 / 64, 32, &mut rng).unwrap();
        let a = BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<f16>(&mut rng))
            .unwrap();
        let opts = SpmmOptions::new().backend(Backend::Decode);
        assert_repeats_bitwise::<f16, f32>(&stream, &a, n, Layout::ColMajor, &opts, &mut rng);
    }
    println!("decode_is_deterministic: 100 runs bitwise identical for n = 1, 16, 64");
}
