//! GPU tests of the Hopper family (`Backend::Hopper`, sm_90; `--features cuda`): the TMA
//! rows and the any-block rows against the f64 oracle, split tiles, the cluster rows, the
//! rows `SPARSEK_VARIANT` forces, and bitwise determinism (the cases: `common::gpu_spmm`).
//! Without a GPU each test says SKIPPED on stdout and stderr and returns; with
//! SPARSEK_REQUIRE_GPU=1 (set by the bundle's run script on the GPU machine) a missing GPU
//! is a failure instead. On a GPU other than sm_90 each test says SKIPPED and returns.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::gpu_spmm::{
    assert_repeats_bitwise, cases, check_case, check_combination, determinism, sweep, Case, KINDS,
};
use common::{device, is_hopper, seed, PatternKind};
use cudarc::driver::CudaContext;
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, f16, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Element, Layout, SpmmOptions,
};

/// The block shapes the Hopper path instantiates.
fn cutlass_blocks() -> Vec<BlockShape> {
    [(64, 64), (128, 64), (64, 128), (128, 128)]
        .iter()
        .map(|&(r, c)| BlockShape::new(r, c))
        .collect()
}

/// The device for a test of the Hopper path: None (the test says it is skipped) without
/// a GPU or on another architecture.
fn hopper(test: &str) -> Option<Arc<CudaContext>> {
    let ctx = device(test)?;
    if !is_hopper(&ctx) {
        println!("SKIPPED {test}: not an sm_90 device");
        return None;
    }
    Some(ctx)
}

#[test]
fn cutlass_matches_reference() {
    if hopper("cutlass_matches_reference").is_none() {
        return;
    }
    sweep(
        "cutlass_matches_reference",
        Backend::Hopper,
        &cutlass_blocks(),
    );
}

/// Blocks the Hopper path runs through its any-block rows (sm90/direct_epilogue.hpp): every
/// bm up to 256, zero-padded to the row's tile, and bk a multiple of 16; odd ones included.
fn any_blocks() -> Vec<BlockShape> {
    [
        (16, 16),
        (32, 32),
        (24, 48),
        (48, 80),
        (64, 112),
        (112, 64),
        (128, 112),
        (96, 32),
        (144, 16),
        (176, 48),
        (256, 256),
        (8, 16),
        (20, 32),
    ]
    .iter()
    .map(|&(r, c)| BlockShape::new(r, c))
    .collect()
}

#[test]
fn cutlass_any_block_matches_reference() {
    let test = "cutlass_any_block_matches_reference";
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut list = cases(Backend::Hopper, &any_blocks(), &mut rng);
    for (i, case) in list.iter_mut().enumerate() {
        // The any-block rows take the epilogue in every layout: some cases ask for it.
        if i % 3 == 0 {
            case.bias = true;
            case.activation = [Activation::Relu, Activation::GeluTanh, Activation::Silu][i % 9 / 3];
        }
        case.ld_pad = if i % 4 == 1 { 8 } else { 0 };
    }
    // Odd and tiny n: column-major B needs no n alignment on this path.
    for (i, n) in [1, 7, 33, 130].into_iter().enumerate() {
        let mut case = list[i * 7];
        case.n = n;
        case.b_layout = Layout::ColMajor;
        case.c_layout = common::layouts()[i % 2];
        case.ld_pad = 8 * (i % 2);
        list.push(case);
    }
    for (idx, case) in list.iter().enumerate() {
        check_combination(&ctx, case, idx, &mut rng);
    }
    println!("{test}: {} cases passed", list.len());
}

/// A few any-block cases, small enough for compute-sanitizer (run.sh sanitize): padded bm
/// in both orientations, padded bk, f32 and input-type output, bias, β ≠ 0, padded ld.
#[test]
fn any_block_sanitized() {
    let test = "any_block_sanitized";
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    // 24×48 and 128×112 run a k-tile that reaches past bk (zero-filled, mainloop.hpp).
    let mut list: Vec<Case> = cases(
        Backend::Hopper,
        &[
            BlockShape::new(24, 48),
            BlockShape::new(144, 16),
            BlockShape::new(128, 112),
        ],
        &mut rng,
    )
    .into_iter()
    .step_by(2)
    .collect();
    for (i, case) in list.iter_mut().enumerate() {
        case.block_rows = 5;
        case.block_cols = 4;
        case.n = [40, 72, 264][i % 3];
        case.bias = i % 2 == 0;
        case.ld_pad = 8 * (i % 2);
    }
    for (idx, case) in list.iter().enumerate() {
        if idx % 2 == 0 {
            check_case::<f16, f32>(&ctx, case, &mut rng)
        } else {
            check_case::<bf16, bf16>(&ctx, case, &mut rng)
        }
    }
    println!("{test}: {} cases passed", list.len());
}

/// Few tiles with long block-rows: the Hopper path splits each tile's k-iterations across
/// CTAs and adds the pieces in a fixed order (cpp/spmm/sm90/scheduler.hpp, "Split tiles").
/// Each shape has fewer tiles than half of an H100's 132 SMs and at least 32 k-iterations per
/// block-row on average, so `choose_split` (cpp/spmm/sm90/kernel.hpp) gives it 2 or more pieces;
/// `run.sh test` runs this test again with SPARSEK_SM90_SPLIT=3 (every launch split).
#[test]
fn split_tiles_match_reference() {
    let test = "split_tiles_match_reference";
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    // (block, block-rows, block-cols, n): TMA rows (128x128, 64x64), any-block rows in both
    // orientations (32x32, 24x48 on k16, 128x112 on k64 with a zero-filled k-tile).
    let shapes = [
        ((128, 128), 3, 48, 264),
        ((64, 64), 4, 96, 520),
        ((32, 32), 6, 200, 136),
        ((24, 48), 5, 64, 40),
        ((128, 112), 3, 40, 1000),
    ];
    let kinds = [
        PatternKind::Full,
        PatternKind::Random(0.5),
        PatternKind::EmptyAndFullRows,
    ];
    let mut list = Vec::new();
    for (i, &((r, c), block_rows, block_cols, n)) in shapes.iter().enumerate() {
        for (j, &kind) in kinds.iter().enumerate() {
            let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75)][(i + j) % 3];
            list.push(Case {
                block_rows,
                block_cols,
                block: BlockShape::new(r, c),
                kind,
                n,
                b_layout: Layout::RowMajor,
                c_layout: common::layouts()[(i + j) % 2],
                alpha,
                beta,
                backend: Backend::Hopper,
                ld_pad: 8 * ((i + j) % 2),
                bias: false,
                activation: Activation::None,
            });
        }
    }
    for (idx, case) in list.iter().enumerate() {
        check_combination(&ctx, case, idx, &mut rng);
    }
    println!("{test}: {} cases passed", list.len());
    // 100 repeats of a split launch are bitwise identical.
    let stream = ctx.default_stream();
    let mask = BlockMask::random_per_row(4, 64, 48, &mut rng).unwrap();
    let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |_, _| {
        common::nonzero::<f16>(&mut rng)
    })
    .unwrap();
    // n = 520: not a whole number of cluster groups, so the split (not the cluster) row runs.
    let n = 520;
    let opts = SpmmOptions::new().backend(Backend::Hopper);
    assert_repeats_bitwise::<f16, f16>(&stream, &a, n, Layout::RowMajor, &opts, &mut rng);
    println!("{test}: 100 split runs bitwise identical");
}

/// The cluster rows (two CTAs share a block-row's sparse tiles by TMA multicast), which Auto
/// takes for f16, row-major B and C, n <= 2048 in whole cluster groups (cpp/spmm/sm90/configs.hpp).
#[test]
fn cluster_rows_match_reference() {
    let test = "cluster_rows_match_reference";
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut list = Vec::new();
    for (i, &(bm, n)) in [(128, 1024), (128, 2048), (64, 512), (64, 1536)]
        .iter()
        .enumerate()
    {
        for (j, &kind) in KINDS.iter().enumerate() {
            let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75)][(i + j) % 3];
            list.push(Case {
                block_rows: [7, 5][j % 2],
                block_cols: [9, 6, 12][(i + j) % 3],
                block: BlockShape::new(bm, [bm, 128, 64][(i + j) % 3]),
                kind,
                n,
                b_layout: Layout::RowMajor,
                c_layout: Layout::RowMajor,
                alpha,
                beta,
                backend: [Backend::Auto, Backend::Hopper][j % 2],
                ld_pad: 8 * (j % 2),
                bias: false,
                activation: Activation::None,
            });
        }
    }
    for case in &list {
        check_case::<f16, f16>(&ctx, case, &mut rng);
    }
    println!("{test}: {} cases passed", list.len());
}

/// The row `SPARSEK_VARIANT` forces, or None (the test says it is skipped): without the
/// variable a forced-row test has no row to test.
fn forced_row(test: &str) -> Option<String> {
    let row = std::env::var("SPARSEK_VARIANT").ok();
    if row.is_none() {
        println!("SKIPPED {test}: SPARSEK_VARIANT names no row");
    }
    row
}

/// The Hopper row that `SPARSEK_VARIANT` forces: the ping-pong, cluster and split-tile rows
/// (f16 or bf16, B and C both row- or both column-major, bm 64 or 128), which Auto takes only
/// on some problems. `run.sh test` runs this once per such row (the split rows with
/// SPARSEK_SM90_SPLIT=3, so every launch splits); without the variable there is no row to
/// test.
#[test]
fn forced_row_matches_reference() {
    let test = "forced_row_matches_reference";
    let Some(row) = forced_row(test) else { return };
    let Some(ctx) = hopper(test) else { return };
    let bm = match (row.contains("_bm128_"), row.contains("_bm64_")) {
        (true, false) => 128,
        (false, true) => 64,
        _ => panic!("{test}: {row} is not a bm=64 or bm=128 TMA row"),
    };
    // Cluster rows need n in whole cluster groups (512 columns); the others take partial tiles.
    let ns: &[usize] = if row.ends_with("_c2") {
        &[512, 1536, 3072]
    } else {
        &[520, 1032, 136, 2056]
    };
    let layout = match (row.contains("_brow_crow"), row.contains("_bcol_ccol")) {
        (true, false) => Layout::RowMajor,
        (false, true) => Layout::ColMajor,
        _ => panic!("{test}: {row} is not a brow_crow or bcol_ccol row"),
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut list = Vec::new();
    for (i, &n) in ns.iter().enumerate() {
        for (j, &kind) in KINDS.iter().enumerate() {
            let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75)][(i + j) % 3];
            list.push(Case {
                block_rows: [7, 5, 12][(i + j) % 3],
                block_cols: [9, 6, 12][(i + 2 * j) % 3],
                block: BlockShape::new(bm, [64, 128][(i + j) % 2]),
                kind,
                n,
                b_layout: layout,
                c_layout: layout,
                alpha,
                beta,
                backend: Backend::Hopper,
                ld_pad: 8 * ((i + j) % 2),
                bias: false,
                activation: Activation::None,
            });
        }
    }
    let bf16_row = row.contains("_bf16_");
    for case in &list {
        if bf16_row {
            check_case::<bf16, bf16>(&ctx, case, &mut rng);
        } else {
            check_case::<f16, f16>(&ctx, case, &mut rng);
        }
    }
    println!("{test}: {row}: {} cases passed", list.len());
    if bf16_row {
        determinism::<bf16>(test, Backend::Hopper, BlockShape::new(bm, 64), layout);
    } else {
        determinism::<f16>(test, Backend::Hopper, BlockShape::new(bm, 64), layout);
    }
}

/// The 16-bit rows on 128-deep k-tiles (`*_bm_le128_k128_bcol_128x64`, the narrow rows Auto
/// takes for n <= 512 where their tiles fit one wave, and `*_bm_le128_k128_bcol_128x128`, for
/// n <= 128 where those do not and up to 512 where their own do or the 128x256 rows' last tile
/// would be at most half full: configs.hpp), forced by `SPARSEK_VARIANT`: `run.sh test` runs
/// this once per row by the rule's split and once with every launch in 3 pieces
/// (SPARSEK_SM90_SPLIT=3). Few block-rows of many blocks (so the rule splits), blocks up to the
/// tile's 128 rows (padded ones too) and 128 or 256 wide (112: a k-tile an eighth empty), odd
/// and partial n on both sides of the 64-column tile, C in either layout and in the input type
/// or f32, alpha, beta, the bias and activations, padded leading dimensions; then 100 repeats
/// bitwise.
#[test]
fn k128_row_matches_reference() {
    let test = "k128_row_matches_reference";
    let Some(row) = forced_row(test) else { return };
    assert!(
        row.contains("_bm_le128_k128_bcol_128x"),
        "{test}: {row} is not a 16-bit row on 128-deep k-tiles"
    );
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let blocks = [
        (128, 128),
        (96, 128),
        (128, 256),
        (64, 128),
        (128, 112),
        (40, 128),
    ];
    let ns = [1, 7, 16, 33, 64, 65, 100, 128, 129, 300];
    let kinds = [
        PatternKind::Random(0.5),
        PatternKind::Full,
        PatternKind::EmptyAndFullRows,
    ];
    let mut list = Vec::new();
    for (i, &n) in ns.iter().enumerate() {
        let (r, c) = blocks[i % blocks.len()];
        let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75)][i % 3];
        list.push(Case {
            block_rows: [3, 5, 2, 4][i % 4],
            block_cols: [40, 24, 64, 33][i % 4] * 128 / c,
            block: BlockShape::new(r, c),
            kind: kinds[i % kinds.len()],
            n,
            b_layout: Layout::ColMajor,
            c_layout: common::layouts()[i % 2],
            alpha,
            beta,
            backend: Backend::Hopper,
            ld_pad: 8 * (i % 2),
            bias: i % 3 == 2,
            activation: [Activation::None, Activation::Silu, Activation::GeluTanh][i % 3],
        });
    }
    let bf16_row = row.contains("_bf16_");
    for (i, case) in list.iter().enumerate() {
        match (bf16_row, i % 2) {
            (false, 0) => check_case::<f16, f16>(&ctx, case, &mut rng),
            (false, _) => check_case::<f16, f32>(&ctx, case, &mut rng),
            (true, 0) => check_case::<bf16, bf16>(&ctx, case, &mut rng),
            (true, _) => check_case::<bf16, f32>(&ctx, case, &mut rng),
        }
    }
    println!("{test}: {row}: {} cases passed", list.len());
    // 100 repeats of a split launch (4 block-rows of 40 blocks, n = 100) are bitwise identical.
    if bf16_row {
        split_launch_repeats_bitwise::<bf16>(&ctx, &mut rng);
    } else {
        split_launch_repeats_bitwise::<f16>(&ctx, &mut rng);
    }
    println!("{test}: {row}: 100 runs bitwise identical");
}

/// 100 launches of one split product (4 block-rows of 40 blocks of 128x128 at density 3/4, n =
/// 100, B column-major) on the Hopper family: bitwise the same C every time.
fn split_launch_repeats_bitwise<T: Element>(ctx: &Arc<CudaContext>, rng: &mut StdRng) {
    let stream = ctx.default_stream();
    let mask = BlockMask::random_per_row(4, 40, 30, rng).unwrap();
    let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |_, _| {
        common::nonzero::<T>(rng)
    })
    .unwrap();
    let opts = SpmmOptions::new().backend(Backend::Hopper);
    assert_repeats_bitwise::<T, T>(&stream, &a, 100, Layout::ColMajor, &opts, rng);
}

#[test]
fn cutlass_is_deterministic() {
    // The TMA-epilogue rows (128x128) and the any-block rows (32x32, 112-high blocks).
    for (r, c) in [(128, 128), (32, 32), (112, 48)] {
        determinism::<f16>(
            "cutlass_is_deterministic",
            Backend::Hopper,
            BlockShape::new(r, c),
            Layout::RowMajor,
        );
    }
}
