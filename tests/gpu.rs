//! GPU tests (`--features cuda`). Without a GPU each test says SKIPPED on stdout and
//! stderr and returns; with SPARSEK_REQUIRE_GPU=1 (set by the bundle's run script on the
//! GPU machine) a missing GPU is a failure instead.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use common::{device, is_hopper, random_vec, reference, rel_err, seed, tolerance, PatternKind};
use cudarc::driver::CudaContext;
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, f16, gpu, spmm, spmm_fused, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Dense,
    DenseMut, DenseShape, DeviceBsr, Element, Epilogue, Error, Layout, SparseLinear, SpmmOptions,
    Vector,
};

#[derive(Debug, Clone, Copy)]
struct Case {
    block_rows: usize,
    block_cols: usize,
    block: BlockShape,
    kind: PatternKind,
    n: usize,
    b_layout: Layout,
    c_layout: Layout,
    alpha: f32,
    beta: f32,
    backend: Backend,
    /// Extra elements of leading dimension for B and C (0: packed).
    ld_pad: usize,
    bias: bool,
    activation: Activation,
}

/// The activation in f64, written independently of `Activation::apply`.
fn act64(a: Activation, x: f64) -> f64 {
    match a {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(3))).tanh())
        }
        Activation::Silu => x / (1.0 + (-x).exp()),
    }
}

/// Runs one case on the GPU (C poisoned with NaN when β = 0) and returns
/// (rel. error vs f64, non-finite outputs, rel. error of the CPU backend vs f64).
fn run_case<T: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) -> Result<(f64, usize, f64), Error> {
    let stream = ctx.default_stream();
    let a = common::random_bsr::<T>(case.kind, case.block_rows, case.block_cols, case.block, rng);
    let (m, k, n) = (a.m(), a.k(), case.n);
    let mut bs = DenseShape::packed(k, n, case.b_layout);
    let mut cs = DenseShape::packed(m, n, case.c_layout);
    bs.ld += case.ld_pad;
    cs.ld += case.ld_pad;
    let (b_len, c_len) = (bs.required_len().unwrap(), cs.required_len().unwrap());
    let b: Vec<T> = random_vec(b_len, rng);
    let c0: Vec<O> = if case.beta == 0.0 {
        vec![O::from_f32(f32::NAN); c_len]
    } else {
        random_vec(c_len, rng)
    };
    let bias: Vec<T> = random_vec(m, rng);
    let base = reference(&a, &b, &bs, &c0, &cs, case.alpha, case.beta);
    let want: Vec<f64> = (0..m * n)
        .map(|idx| {
            let add = if case.bias {
                bias[idx / n.max(1)].to_f32() as f64
            } else {
                0.0
            };
            act64(case.activation, base[idx] + add)
        })
        .collect();
    let opts = SpmmOptions::new().alpha(case.alpha).beta(case.beta);
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Host(&bias));
    }

    let mut c_cpu = c0.clone();
    spmm_fused(
        &a,
        Dense::host(&b, k, n, case.b_layout).with_ld(bs.ld),
        DenseMut::host(&mut c_cpu, m, n, case.c_layout).with_ld(cs.ld),
        &epi,
        &opts,
    )?;
    let (cpu_err, _) = rel_err(&c_cpu, &cs, &want);

    let da = DeviceBsr::upload(&a, &stream)?;
    let db = stream.clone_htod(&b)?;
    let dbias = stream.clone_htod(&bias)?;
    let mut dc = stream.clone_htod(&c0)?;
    let mut depi = Epilogue::new().activation(case.activation);
    if case.bias {
        depi = depi.bias(Vector::Device(&dbias));
    }
    spmm_fused(
        &da,
        Dense::device(&db, k, n, case.b_layout).with_ld(bs.ld),
        DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(cs.ld),
        &depi,
        &opts.backend(case.backend),
    )?;
    let out = stream.clone_dtoh(&dc)?;
    stream.synchronize()?;
    let (err, bad) = rel_err(&out, &cs, &want);
    // Outside the view (the ld padding) nothing may be written.
    let view_untouched = (0..c_len).all(|i| {
        let (outer, inner) = (i / cs.ld, i % cs.ld);
        let in_view = match cs.layout {
            Layout::RowMajor => inner < n && outer < m,
            Layout::ColMajor => inner < m && outer < n,
        };
        in_view || out[i].to_f32().to_bits() == c0[i].to_f32().to_bits()
    });
    assert!(view_untouched, "{case:?}: written outside the view");
    Ok((err, bad, cpu_err))
}

fn check_case<T: Element, O: Element>(ctx: &Arc<CudaContext>, case: &Case, rng: &mut StdRng) {
    let (err, bad, cpu_err) = run_case::<T, O>(ctx, case, rng)
        .unwrap_or_else(|e| panic!("{case:?} {:?}->{:?}: {e}", T::DTYPE, O::DTYPE));
    let tol = tolerance(T::DTYPE, O::DTYPE);
    assert_eq!(
        bad,
        0,
        "{case:?} {:?}->{:?}: {bad} outputs unwritten or non-finite",
        T::DTYPE,
        O::DTYPE
    );
    assert!(
        err <= tol,
        "{case:?} {:?}->{:?}: rel err {err:.3e} > {tol:.0e}",
        T::DTYPE,
        O::DTYPE
    );
    assert!(cpu_err <= tol, "CPU backend off: {cpu_err:.3e}");
}

/// Case `idx` with input and output types alternating over f16→f32, f16→f16, bf16→f32 and
/// bf16→bf16, so a list of cases covers every combination.
fn check_combination(ctx: &Arc<CudaContext>, case: &Case, idx: usize, rng: &mut StdRng) {
    match idx % 4 {
        0 => check_case::<f16, f32>(ctx, case, rng),
        1 => check_case::<f16, f16>(ctx, case, rng),
        2 => check_case::<bf16, f32>(ctx, case, rng),
        _ => check_case::<bf16, bf16>(ctx, case, rng),
    }
}

const SIDES: [usize; 4] = [16, 32, 64, 128];
const KINDS: [PatternKind; 5] = [
    PatternKind::Single,
    PatternKind::Random(0.125),
    PatternKind::Random(0.5),
    PatternKind::Full,
    PatternKind::EmptyAndFullRows,
];

/// A spread of cases for one backend: every block shape given, patterns from one block to
/// full (with empty rows), both layouts, α/β, n not a power of two.
fn cases(backend: Backend, blocks: &[BlockShape], rng: &mut StdRng) -> Vec<Case> {
    let mut out = Vec::new();
    for (i, &block) in blocks.iter().enumerate() {
        for (j, &kind) in KINDS.iter().enumerate() {
            let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, -1.0)][(i + j) % 4];
            out.push(Case {
                // Grids chosen so m and k are not powers of two and stay a few hundred wide.
                block_rows: (640 / block.rows).max(3) - (i % 2),
                block_cols: (768 / block.cols).max(3) - (j % 2),
                block,
                kind,
                n: [264, 520, 136, 1000][(i + 2 * j) % 4],
                b_layout: common::layouts()[(i + j) % 2],
                c_layout: common::layouts()[(i / 2 + j) % 2],
                alpha,
                beta,
                backend,
                ld_pad: 0,
                bias: false,
                activation: Activation::None,
            });
            let _ = rng;
        }
    }
    out
}

fn all_blocks() -> Vec<BlockShape> {
    SIDES
        .iter()
        .flat_map(|&r| SIDES.iter().map(move |&c| BlockShape::new(r, c)))
        .collect()
}

fn sweep(test: &str, backend: Backend, blocks: &[BlockShape]) {
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = cases(backend, blocks, &mut rng);
    for (idx, case) in list.iter().enumerate() {
        // Alternate input types and outputs so every combination is covered (on the Hopper
        // path, f32 output runs on the any-block rows).
        check_combination(&ctx, case, idx, &mut rng);
    }
    println!("{test}: {} cases passed", list.len());
}

#[test]
fn wmma_matches_reference() {
    sweep("wmma_matches_reference", Backend::Wmma, &all_blocks());
}

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
        Backend::Cutlass,
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
    let mut list = cases(Backend::Cutlass, &any_blocks(), &mut rng);
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
        Backend::Cutlass,
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
/// CTAs and adds the pieces in a fixed order (cpp/sm90/scheduler.hpp, "Split tiles").
/// Each shape has fewer tiles than half of an H100's 132 SMs and at least 32 k-iterations per
/// block-row on average, so `choose_split` (cpp/sm90/kernel.hpp) gives it 2 or more pieces;
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
                backend: Backend::Cutlass,
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
    let opts = SpmmOptions::new().backend(Backend::Cutlass);
    assert_repeats_bitwise::<f16, f16>(&stream, &a, n, Layout::RowMajor, &opts, &mut rng);
    println!("{test}: 100 split runs bitwise identical");
}

/// The cluster rows (two CTAs share a block-row's sparse tiles by TMA multicast), which Auto
/// takes for f16, row-major B and C, n <= 2048 in whole cluster groups (cpp/sm90/configs.hpp).
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
                backend: [Backend::Auto, Backend::Cutlass][j % 2],
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

/// The Hopper row that `SPARSEK_VARIANT` forces: the ping-pong, cluster and split-tile rows
/// (f16 or bf16, B and C both row- or both column-major, bm 64 or 128), which Auto takes only
/// on some problems. `run.sh test` runs this once per such row (the split rows with
/// SPARSEK_SM90_SPLIT=3, so every launch splits); without the variable there is no row to
/// test.
#[test]
fn forced_row_matches_reference() {
    let test = "forced_row_matches_reference";
    let Ok(row) = std::env::var("SPARSEK_VARIANT") else {
        println!("SKIPPED {test}: SPARSEK_VARIANT names no row");
        return;
    };
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
                backend: Backend::Cutlass,
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
        determinism::<bf16>(test, Backend::Cutlass, BlockShape::new(bm, 64), layout);
    } else {
        determinism::<f16>(test, Backend::Cutlass, BlockShape::new(bm, 64), layout);
    }
}

/// Auto resolves to the Hopper path on sm_90 for the block shapes where it is faster, to WMMA
/// elsewhere.
#[test]
fn auto_picks_the_fastest_available() {
    let Some(ctx) = device("auto_picks_the_fastest_available") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    // 16x16: Auto leaves it to WMMA (measured faster, cpp/sm90/family.cu).
    for (bs, want_hopper) in [(16, false), (32, true), (48, true), (64, true), (128, true)] {
        let a = common::random_bsr::<f16>(
            PatternKind::Random(0.5),
            4,
            4,
            BlockShape::new(bs, bs),
            &mut rng,
        );
        let da = DeviceBsr::upload(&a, &stream).unwrap();
        let db = stream.alloc_zeros::<f16>(a.k() * 256).unwrap();
        let mut dc = stream.alloc_zeros::<f16>(a.m() * 256).unwrap();
        let (b, c) = (
            Dense::device(&db, a.k(), 256, Layout::RowMajor),
            DenseMut::device(&mut dc, a.m(), 256, Layout::RowMajor),
        );
        let got = gpu::can_implement(&da, &b, &c, &SpmmOptions::new()).unwrap();
        let want = if want_hopper && is_hopper(&ctx) {
            Backend::Cutlass
        } else {
            Backend::Wmma
        };
        assert_eq!(got, want, "block {bs}");
    }
}

/// Uploads A and a fresh random B (`k x n`), runs the same launch 100 times with a zeroed C
/// (`m x n`), both of `layout`, and asserts that C is bitwise the same every time.
fn assert_repeats_bitwise<T: Element, O: Element>(
    stream: &Arc<cudarc::driver::CudaStream>,
    a: &BsrMatrix<T>,
    n: usize,
    layout: Layout,
    opts: &SpmmOptions,
    rng: &mut StdRng,
) {
    let da = DeviceBsr::upload(a, stream).unwrap();
    let db = stream.clone_htod(&random_vec::<T>(a.k() * n, rng)).unwrap();
    let (da, db) = (&da, &db);
    let (m, k) = (da.m(), da.k());
    let mut dc = stream.alloc_zeros::<O>(m * n).unwrap();
    let mut first: Option<Vec<u32>> = None;
    for run in 0..100 {
        spmm(
            da,
            Dense::device(db, k, n, layout),
            DenseMut::device(&mut dc, m, n, layout),
            opts,
        )
        .unwrap();
        // f16/bf16 -> f32 is exact, so the f32 bits tell every output bit apart.
        let bits: Vec<u32> = stream
            .clone_dtoh(&dc)
            .unwrap()
            .iter()
            .map(|v| v.to_f32().to_bits())
            .collect();
        match &first {
            None => first = Some(bits),
            Some(f) => assert!(*f == bits, "n {n}: run {run} differs from run 0"),
        }
    }
}

/// The same launch 100 times gives bitwise the same C (inputs and C of type T).
fn determinism<T: Element>(test: &str, backend: Backend, block: BlockShape, layout: Layout) {
    let Some(ctx) = device(test) else { return };
    if backend == Backend::Cutlass && !is_hopper(&ctx) {
        println!("SKIPPED {test}: not an sm_90 device");
        return;
    }
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let mask = BlockMask::random_per_row(
        2048 / block.rows,
        2048 / block.cols,
        (2048 / block.cols) / 4,
        &mut rng,
    )
    .unwrap();
    let a =
        BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<T>(&mut rng)).unwrap();
    let n = 1024;
    let opts = SpmmOptions::new().backend(backend);
    assert_repeats_bitwise::<T, T>(&stream, &a, n, layout, &opts, &mut rng);
    println!("{test}: 100 runs bitwise identical");
}

#[test]
fn wmma_is_deterministic() {
    determinism::<f16>(
        "wmma_is_deterministic",
        Backend::Wmma,
        BlockShape::new(64, 64),
        Layout::RowMajor,
    );
}

#[test]
fn cutlass_is_deterministic() {
    // The TMA-epilogue rows (128x128) and the any-block rows (32x32, 112-high blocks).
    for (r, c) in [(128, 128), (32, 32), (112, 48)] {
        determinism::<f16>(
            "cutlass_is_deterministic",
            Backend::Cutlass,
            BlockShape::new(r, c),
            Layout::RowMajor,
        );
    }
}

/// A few full block-rows among sparse ones.
#[test]
fn skewed_pattern() {
    let Some(ctx) = device("skewed_pattern") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let stream = ctx.default_stream();
    for backend in [Backend::Wmma, Backend::Cutlass] {
        if backend == Backend::Cutlass && !is_hopper(&ctx) {
            continue;
        }
        let block = BlockShape::new(128, 64);
        let mask = BlockMask::skewed(12, 20, 5, 2, &mut rng).unwrap();
        let a = BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<f16>(&mut rng))
            .unwrap();
        let (m, k, n) = (a.m(), a.k(), 384);
        let b: Vec<f16> = random_vec(k * n, &mut rng);
        let (bs, cs) = (
            DenseShape::packed(k, n, Layout::RowMajor),
            DenseShape::packed(m, n, Layout::RowMajor),
        );
        let want = reference(&a, &b, &bs, &[f16::ZERO], &cs, 1.0, 0.0);
        let da = DeviceBsr::upload(&a, &stream).unwrap();
        let db = stream.clone_htod(&b).unwrap();
        let mut dc = stream.clone_htod(&vec![f16::NAN; m * n]).unwrap();
        spmm(
            &da,
            Dense::device(&db, k, n, Layout::RowMajor),
            DenseMut::device(&mut dc, m, n, Layout::RowMajor),
            &SpmmOptions::new().backend(backend),
        )
        .unwrap();
        let out = stream.clone_dtoh(&dc).unwrap();
        let (err, bad) = rel_err(&out, &cs, &want);
        assert!(bad == 0 && err < 2e-3, "{backend:?}: err {err}, bad {bad}");
    }
}

/// Bad device input: a typed error, and C untouched (nothing launched).
#[test]
fn device_errors_launch_nothing() {
    let Some(ctx) = device("device_errors_launch_nothing") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let a = common::random_bsr::<f16>(PatternKind::Full, 2, 2, BlockShape::new(64, 64), &mut rng);
    let da = DeviceBsr::upload(&a, &stream).unwrap();
    let db = stream
        .clone_htod(&random_vec::<f16>(128 * 64, &mut rng))
        .unwrap();
    let sentinel = f16::from_f32(7.0);
    let mut dc = stream.clone_htod(&vec![sentinel; 128 * 64 + 1]).unwrap();
    let untouched = |dc: &cudarc::driver::CudaSlice<f16>| {
        stream
            .clone_dtoh(dc)
            .unwrap()
            .iter()
            .all(|v| *v == sentinel)
    };

    // f16 in, bf16 out: no GPU kernel takes it.
    let mut dc_bf = stream.alloc_zeros::<bf16>(128 * 64).unwrap();
    let e = spmm(
        &da,
        Dense::device(&db, 128, 64, Layout::RowMajor),
        DenseMut::device(&mut dc_bf, 128, 64, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "{e}");
    // The CPU backend with device operands.
    let e = spmm(
        &da,
        Dense::device(&db, 128, 64, Layout::RowMajor),
        DenseMut::device(&mut dc, 128, 64, Layout::RowMajor),
        &SpmmOptions::new().backend(Backend::Cpu),
    )
    .unwrap_err();
    assert!(matches!(e, Error::BackendUnavailable { .. }), "{e}");
    // Host B with device A and C.
    let hb = vec![f16::ZERO; 128 * 64];
    let e = spmm(
        &da,
        Dense::host(&hb, 128, 64, Layout::RowMajor),
        DenseMut::device(&mut dc, 128, 64, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::MixedLocations(_)), "{e}");
    // A block shape WMMA does not take (sides must be multiples of 16).
    let a24 = common::random_bsr::<f16>(PatternKind::Full, 2, 2, BlockShape::new(24, 24), &mut rng);
    let da24 = DeviceBsr::upload(&a24, &stream).unwrap();
    let db24 = stream
        .clone_htod(&random_vec::<f16>(48 * 64, &mut rng))
        .unwrap();
    let e = spmm(
        &da24,
        Dense::device(&db24, 48, 64, Layout::RowMajor),
        DenseMut::device(&mut dc, 48, 64, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    // CUTLASS on a block shape it cannot run (bk not a multiple of 16).
    let a32 = common::random_bsr::<f16>(PatternKind::Full, 2, 2, BlockShape::new(32, 24), &mut rng);
    let da32 = DeviceBsr::upload(&a32, &stream).unwrap();
    let e = spmm(
        &da32,
        Dense::device(&db, 48, 64, Layout::RowMajor),
        DenseMut::device(&mut dc, 64, 64, Layout::RowMajor),
        &SpmmOptions::new().backend(Backend::Cutlass),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    // One message, one prefix: the family is named once.
    let msg = e.to_string();
    assert_eq!(msg.matches("cutlass").count(), 1, "{msg}");
    assert!(!msg.contains("sparsek: sparsek:"), "{msg}");
    // A leading dimension that breaks 16-byte alignment (odd ld): the tensor-core families
    // refuse it (Auto would run it on the decode family, which takes any ld).
    let e = spmm(
        &da,
        Dense::device(&db, 128, 56, Layout::RowMajor),
        DenseMut::device(&mut dc, 128, 56, Layout::RowMajor).with_ld(57),
        &SpmmOptions::new().backend(Backend::Wmma),
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::NotSupported { .. } | Error::InvalidArgument(_)),
        "{e}"
    );
    stream.synchronize().unwrap();
    assert!(untouched(&dc), "C was written by a refused call");
    println!("device errors: every refusal typed, C untouched");
}

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

/// The fused epilogue on every GPU family that runs the problem, against the f64 oracle.
#[test]
fn epilogue_on_every_family() {
    let Some(ctx) = device("epilogue_on_every_family") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut families = vec![Backend::Wmma, Backend::Decode];
    if is_hopper(&ctx) {
        families.push(Backend::Cutlass);
    }
    let mut ran = 0;
    for (i, &backend) in families.iter().enumerate() {
        for (j, act) in [Activation::Relu, Activation::GeluTanh, Activation::Silu]
            .into_iter()
            .enumerate()
        {
            // The Hopper family's two epilogue orientations: bm 64 runs transposed (the
            // bias per GEMM column), bm 128 not (per GEMM row).
            let side = if j == 1 { 128 } else { 64 };
            let case = Case {
                block_rows: 6,
                block_cols: 5,
                block: BlockShape::new(side, side),
                kind: PatternKind::Random(0.5),
                n: if backend == Backend::Decode { 24 } else { 264 },
                // Hopper: j = 0, 1 take the fused TMA-epilogue rows (column-major B and C,
                // the layout of y = x·Wᵀ); j = 2 writes f32 through an any-block row.
                b_layout: if backend == Backend::Cutlass {
                    [Layout::ColMajor, Layout::ColMajor, Layout::RowMajor][j]
                } else {
                    common::layouts()[(i + j) % 2]
                },
                c_layout: if backend == Backend::Cutlass {
                    Layout::ColMajor
                } else {
                    common::layouts()[j % 2]
                },
                alpha: 1.5,
                beta: [0.0, 0.5, -1.0][j],
                backend,
                ld_pad: 0,
                bias: true,
                activation: act,
            };
            match (j, backend) {
                (0, _) => check_case::<f16, f16>(&ctx, &case, &mut rng),
                (1, Backend::Cutlass) => check_case::<bf16, bf16>(&ctx, &case, &mut rng),
                _ => check_case::<bf16, f32>(&ctx, &case, &mut rng),
            }
            ran += 1;
        }
    }
    println!("epilogue_on_every_family: {ran} cases passed ({families:?})");
}

/// `SparseLinear` on the device agrees with the host layer.
#[test]
fn sparse_linear_on_device() {
    let Some(ctx) = device("sparse_linear_on_device") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let w = common::random_bsr::<f16>(
        PatternKind::Random(0.5),
        12,
        8,
        BlockShape::new(64, 64),
        &mut rng,
    );
    let (out_f, in_f) = (w.m(), w.k());
    let bias: Vec<f16> = random_vec(out_f, &mut rng);
    for batch in [1, 5, 32] {
        let x: Vec<f16> = random_vec(batch * in_f, &mut rng);
        let host = SparseLinear::new(w.clone(), Some(bias.clone()), Activation::Silu).unwrap();
        let mut y_host = vec![0f32; batch * out_f];
        host.forward(&x, batch, &mut y_host).unwrap();
        let dev = SparseLinear::new_device(
            DeviceBsr::upload(&w, &stream).unwrap(),
            Some(stream.clone_htod(&bias).unwrap()),
            Activation::Silu,
        )
        .unwrap();
        let dx = stream.clone_htod(&x).unwrap();
        let mut dy = stream.alloc_zeros::<f32>(batch * out_f).unwrap();
        dev.forward(&dx, batch, &mut dy).unwrap();
        let y_dev = stream.clone_dtoh(&dy).unwrap();
        let want: Vec<f64> = y_host.iter().map(|&v| v as f64).collect();
        let shape = DenseShape::packed(batch, out_f, Layout::RowMajor);
        let (err, bad) = rel_err(&y_dev, &shape, &want);
        assert!(
            bad == 0 && err < 1e-3,
            "batch {batch}: err {err}, bad {bad}"
        );
    }
    println!("sparse_linear_on_device: batches 1, 5, 32 agree with the host layer");
}
