//! GPU tests of the FP8 products (`spmm_fp8`; `--features full`): W8A8 on the Hopper family
//! (E4M3 and E5M2, A's scales per block / per tensor / none, B's per column / per tensor /
//! none) and W8A16 on the Decode family (B f16/bf16, odd n) and on the Hopper family's W8A16
//! rows (e4m3 A, f16 B column-major, n up to 600), every output type, α/β, bias,
//! activations and NaN-poisoned C with β = 0, against the f64 oracle and the CPU reference
//! (the cases: `common::fp8`); 100 launches bitwise identical; `DeviceBsr`'s scales
//! (upload, download, update, device buffers); `SparseLinear` with FP8 weights; the typed
//! refusals, C untouched. One test per kind and FP8 type, so a family or type not built
//! yet fails alone. Without a GPU each test says SKIPPED on stderr and returns; with
//! SPARSEK_REQUIRE_GPU=1 (set by the bundle's run script on the GPU machine) a missing GPU
//! is a failure instead.
#![cfg(feature = "full")]
#![allow(deprecated)]

mod common;

use std::sync::Arc;

use common::fp8::{
    make, quantize_per_token, random_e4m3_weight, tolerance, Attach, BOperand, Case,
};
use common::{
    device, is_hopper, outside_untouched, random_vec, rel_err, seed, upload, PatternKind,
};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::gpu::can_implement_fp8;
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, spmm_fp8, Activation, Backend, BlockMask, BlockScales, BlockShape, BsrMatrix,
    ColumnScales, Dense, DenseMut, DenseShape, DeviceBlockScales, DeviceBsr, Element, Epilogue,
    Error, Fp8, Fp8Operand, Layout, QuantizedBsr, ScaleKind, SparseLinear, SpmmOptions, Vector,
    F8E4M3, F8E5M2,
};

/// Runs `case` on the device and on the CPU: (device rel. error vs f64, non-finite device
/// outputs, CPU rel. error vs f64). Panics if C is written outside its view.
fn run_case<Q: Fp8, TB: BOperand, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) -> Result<(f64, usize, f64), Error> {
    let stream = ctx.default_stream();
    let d = make::<Q, TB, O>(case, rng);
    let (m, k, n) = d.dims();
    let opts = SpmmOptions::new().alpha(case.alpha).beta(case.beta);

    let mut c_cpu = d.c0.clone();
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Host(&d.bias));
    }
    spmm_fp8(
        Fp8Operand::Host(&d.a, &d.a_scales),
        Dense::host(&d.b, k, n, case.b_layout)
            .with_ld(d.b_shape.ld)
            .attach(d.column_scales(Vector::Host(&d.b_scales))),
        DenseMut::host(&mut c_cpu, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &opts,
    )?;
    let (cpu_err, _) = rel_err(&c_cpu, &d.c_shape, &d.want);

    let q = QuantizedBsr::new(d.a.clone(), d.a_scales.clone())?;
    let da = DeviceBsr::upload_quantized(&q, &stream)?;
    let db = upload(&stream, &d.b);
    let dbs = upload(&stream, &d.b_scales);
    let dbias = upload(&stream, &d.bias);
    let mut dc = upload(&stream, &d.c0);
    let mut depi = Epilogue::new().activation(case.activation);
    if case.bias {
        depi = depi.bias(Vector::Device(&dbias));
    }
    let b = Dense::device(&db, k, n, case.b_layout)
        .with_ld(d.b_shape.ld)
        .attach(d.column_scales(Vector::Device(&dbs)));
    let c = DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(d.c_shape.ld);
    let chosen = can_implement_fp8(&da, &b, &c, &opts.backend(case.backend))?;
    assert!(
        case.backend == Backend::Auto || chosen == case.backend,
        "{case:?}: can_implement_fp8 chose {chosen:?}"
    );
    spmm_fp8(&da, b, c, &depi, &opts.backend(case.backend))?;
    let out = stream.clone_dtoh(&dc)?;
    stream.synchronize()?;
    let (err, bad) = rel_err(&out, &d.c_shape, &d.want);
    assert!(
        outside_untouched(&out, &d.c0, &d.c_shape),
        "{case:?}: written outside the view"
    );
    Ok((err, bad, cpu_err))
}

fn check_case<Q: Fp8, TB: BOperand, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) {
    let types = format!("{}/{}/{}", Q::DTYPE, TB::DTYPE, O::DTYPE);
    let (err, bad, cpu_err) =
        run_case::<Q, TB, O>(ctx, case, rng).unwrap_or_else(|e| panic!("{case:?} {types}: {e}"));
    let tol = tolerance(O::DTYPE);
    assert_eq!(
        bad, 0,
        "{case:?} {types}: {bad} outputs unwritten or non-finite"
    );
    assert!(
        err <= tol,
        "{case:?} {types}: rel err {err:.3e} > {tol:.0e}"
    );
    assert!(
        cpu_err <= tol,
        "{case:?} {types}: CPU reference off: {cpu_err:.3e}"
    );
}

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::GeluTanh,
    Activation::Silu,
];

/// W8A8 cases: the Hopper family's FP8 blocks (128x128, 64x64), B column-major, C either
/// layout, every scale kind of A and B, α/β, bias, activations, ld padding.
fn w8a8_cases() -> Vec<Case> {
    let blocks = [BlockShape::new(128, 128), BlockShape::new(64, 64)];
    let kinds = [
        PatternKind::Random(0.5),
        PatternKind::Random(0.125),
        PatternKind::Full,
        PatternKind::EmptyAndFullRows,
        PatternKind::Single,
    ];
    let mut out = Vec::new();
    for i in 0..30 {
        let block = blocks[i % 2];
        let mut c = Case::new(
            (768 / block.rows) - (i % 3),
            (1024 / block.cols) + (i % 2),
            block,
            [264, 64, 136, 8, 520, 200][i % 6],
        );
        c.kind = kinds[i % kinds.len()];
        c.b_layout = Layout::ColMajor;
        c.c_layout = common::layouts()[(i / 2) % 2];
        (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][i % 4];
        // B is FP8: the Hopper family reads it by TMA, whose row pitch is a multiple of 16 bytes.
        c.ld_pad = [0, 16, 0, 48][(i / 4) % 4];
        c.bias = i % 3 != 1;
        c.activation = ACTS[(i / 3) % 4];
        c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][i % 3];
        c.b_scale = [ScaleKind::PerColumn, ScaleKind::PerTensor, ScaleKind::None][(i / 3) % 3];
        c.backend = if i % 2 == 0 {
            Backend::Hopper
        } else {
            Backend::Auto
        };
        out.push(c);
    }
    // Odd n up to 600 on random patterns, and n = 4105 (128x128 blocks: odd n past 4096, its
    // last dense tile partial).
    for (i, n) in [1, 7, 37, 129, 333, 600, 4105].into_iter().enumerate() {
        let block = blocks[i % 2];
        let mut c = Case::new(640 / block.rows, 896 / block.cols, block, n);
        c.kind = PatternKind::Random(0.55);
        c.b_layout = Layout::ColMajor;
        c.c_layout = common::layouts()[i % 2];
        (c.alpha, c.beta) = (0.75, 0.0);
        c.bias = true;
        c.a_scale = ScaleKind::PerBlock;
        c.b_scale = ScaleKind::PerColumn;
        c.backend = Backend::Hopper;
        out.push(c);
    }
    // n a multiple of 512 over enough tiles not to split (34 block-rows): Auto's 128x256
    // cluster row for 128x128 blocks (configs.hpp), beta, both C layouts.
    for (i, n) in [512, 1024].into_iter().enumerate() {
        let mut c = Case::new(34, 5, blocks[0], n);
        c.kind = PatternKind::Random(0.6);
        c.b_layout = Layout::ColMajor;
        c.c_layout = common::layouts()[i % 2];
        (c.alpha, c.beta) = (1.5, 0.5);
        c.bias = i == 0;
        c.a_scale = ScaleKind::PerBlock;
        c.b_scale = [ScaleKind::PerColumn, ScaleKind::PerTensor][i % 2];
        c.backend = Backend::Auto;
        out.push(c);
    }
    out
}

/// The Scaled rows' tiles, for their cases.
#[derive(Clone, Copy, PartialEq)]
enum ScaledTiles {
    /// 128x128 blocks, the 128x128 and 128x256 rows: n = 8-4104 over a few block-rows, split
    /// as the rule splits them.
    Wide,
    /// 128x128 blocks, the 128x256 cluster rows: n = 512 and 1024 over 34 block-rows (none
    /// split).
    Cluster,
    /// 64x64 blocks, the transposed 256x64 rows: n = 8-4104.
    High64,
}

/// W8A8 cases for the Hopper family's Scaled rows (CUTLASS's TMA epilogue with the FP8 scales:
/// e4m3, f16 C, β = 0, no activation, n a multiple of 8) in C's layout `c_layout`: every scale
/// kind of A and B, α, bias or none, ld padding, a pattern of empty and full block-rows.
fn w8a8_scaled_cases(tiles: ScaledTiles, c_layout: Layout) -> Vec<Case> {
    let block = if tiles == ScaledTiles::High64 {
        BlockShape::new(64, 64)
    } else {
        BlockShape::new(128, 128)
    };
    let ns: &[usize] = if tiles == ScaledTiles::Cluster {
        &[512, 1024]
    } else {
        &[8, 136, 264, 520, 4104]
    };
    let kinds = [
        PatternKind::Random(0.5),
        PatternKind::EmptyAndFullRows,
        PatternKind::Random(0.3),
    ];
    let count = if tiles == ScaledTiles::Cluster { 6 } else { 10 };
    (0..count)
        .map(|i| {
            let mut c = match tiles {
                ScaledTiles::Cluster => Case::new(34, 5 + i % 2, block, ns[i % ns.len()]),
                ScaledTiles::Wide => Case::new(6 - i % 2, 8 + i % 3, block, ns[i % ns.len()]),
                ScaledTiles::High64 => Case::new(12 - i % 3, 14 + i % 3, block, ns[i % ns.len()]),
            };
            c.kind = kinds[i % kinds.len()];
            c.b_layout = Layout::ColMajor;
            c.c_layout = c_layout;
            (c.alpha, c.beta) = ([1.0, 0.75, -1.25][i % 3], 0.0);
            c.ld_pad = [0, 16, 48][(i / 2) % 3];
            c.bias = i % 2 == 0;
            c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][i % 3];
            c.b_scale = [ScaleKind::PerColumn, ScaleKind::PerTensor, ScaleKind::None][(i / 3) % 3];
            c.backend = Backend::Hopper;
            c
        })
        .collect()
}

/// The Scaled rows' cases of one tile kind and C layout against the references, then 100
/// launches of the first bitwise identical. run.sh also runs these tests with each Scaled row
/// forced (SPARSEK_VARIANT) on the tests of its tiles and layout, whose every case fits it.
fn w8a8_scaled(test: &str, tiles: ScaledTiles, c_layout: Layout) {
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = w8a8_scaled_cases(tiles, c_layout);
    for case in &list {
        check_case::<F8E4M3, F8E4M3, f16>(&ctx, case, &mut rng);
    }
    repeats_bitwise::<F8E4M3, F8E4M3, f16>(&ctx, &list[0], &mut rng);
    println!(
        "{test}: {} cases passed, 100 runs bitwise identical",
        list.len()
    );
}

#[test]
fn w8a8_scaled_ccol_matches_reference() {
    let test = "w8a8_scaled_ccol_matches_reference";
    w8a8_scaled(test, ScaledTiles::Wide, Layout::ColMajor);
}

#[test]
fn w8a8_scaled_crow_matches_reference() {
    let test = "w8a8_scaled_crow_matches_reference";
    w8a8_scaled(test, ScaledTiles::Wide, Layout::RowMajor);
}

#[test]
fn w8a8_scaled_ccol_cluster_matches_reference() {
    let test = "w8a8_scaled_ccol_cluster_matches_reference";
    w8a8_scaled(test, ScaledTiles::Cluster, Layout::ColMajor);
}

#[test]
fn w8a8_scaled_crow_cluster_matches_reference() {
    let test = "w8a8_scaled_crow_cluster_matches_reference";
    w8a8_scaled(test, ScaledTiles::Cluster, Layout::RowMajor);
}

#[test]
fn w8a8_scaled64_ccol_matches_reference() {
    let test = "w8a8_scaled64_ccol_matches_reference";
    w8a8_scaled(test, ScaledTiles::High64, Layout::ColMajor);
}

#[test]
fn w8a8_scaled64_crow_matches_reference() {
    let test = "w8a8_scaled64_crow_matches_reference";
    w8a8_scaled(test, ScaledTiles::High64, Layout::RowMajor);
}

/// W8A16 cases: the Decode family's blocks, both layouts of B and C, odd n, every scale
/// kind of A (B takes none).
fn w8a16_cases() -> Vec<Case> {
    let blocks = [
        BlockShape::new(32, 32),
        BlockShape::new(64, 64),
        BlockShape::new(128, 128),
        BlockShape::new(16, 48),
    ];
    let mut out = Vec::new();
    for (i, &n) in [1usize, 2, 3, 7, 9, 16, 31, 33, 64, 100, 127, 128]
        .iter()
        .enumerate()
    {
        for (j, &block) in blocks.iter().enumerate() {
            let v = i + j;
            let mut c = Case::new(
                (384 / block.rows).max(2) - (v % 2),
                (512 / block.cols).max(2) + (v % 3),
                block,
                n,
            );
            c.kind = [
                PatternKind::Random(0.5),
                PatternKind::Random(0.25),
                PatternKind::EmptyAndFullRows,
                PatternKind::Full,
            ][v % 4];
            c.b_layout = common::layouts()[v % 2];
            c.c_layout = common::layouts()[(v / 2) % 2];
            (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][v % 4];
            c.ld_pad = [0, 3, 1, 0][v % 4];
            c.bias = v % 3 != 0;
            c.activation = ACTS[v % 4];
            c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][v % 3];
            // Every other per-block case mixes scales of 1/128-1/32 and 150-300 in a row.
            c.a_scale_wide = v % 2 == 0;
            c.b_scale = ScaleKind::None;
            c.backend = Backend::Decode;
            out.push(c);
        }
    }
    out
}

/// W8A16 on the Hopper family's W8A16 rows (e4m3 A converted to f16 in shared memory, f16 B
/// column-major, cpp/spmm/sm90/mainloop.hpp): blocks up to 128 high (shorter ones zero-padded
/// in the 128-row tile), bk 128, 256 or 224 (a k-tile of 128 one eighth empty), odd n up to
/// 600, C either layout with padded ld, every scale kind of A, α/β, bias, activations, empty
/// block-rows.
fn w8a16_hopper_cases() -> Vec<Case> {
    let blocks = [
        BlockShape::new(128, 128),
        BlockShape::new(64, 128),
        BlockShape::new(128, 224),
        BlockShape::new(48, 256),
        BlockShape::new(96, 128),
    ];
    let kinds = [
        PatternKind::Random(0.5),
        PatternKind::EmptyAndFullRows,
        PatternKind::Random(0.2),
        PatternKind::Full,
        PatternKind::Single,
    ];
    let mut out = Vec::new();
    for (i, &n) in [1usize, 7, 37, 64, 129, 333, 600].iter().enumerate() {
        for (j, &block) in blocks.iter().enumerate() {
            let v = i * blocks.len() + j;
            let mut c = Case::new(
                (640 / block.rows).max(3) - (v % 2),
                (768 / block.cols).max(3) + (v % 3),
                block,
                n,
            );
            c.kind = kinds[v % kinds.len()];
            c.b_layout = Layout::ColMajor;
            c.c_layout = common::layouts()[(v / 2) % 2];
            (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][v % 4];
            // B is read by TMA: its ld a multiple of 16 bytes.
            c.ld_pad = [0, 8, 0, 24][(v / 3) % 4];
            c.bias = v % 3 != 1;
            c.activation = ACTS[(v / 2) % 4];
            c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][v % 3];
            // Every other per-block case mixes scales of 1/128-1/32 and 150-300 in a row.
            c.a_scale_wide = v % 2 == 0;
            c.b_scale = ScaleKind::None;
            c.backend = Backend::Hopper;
            out.push(c);
        }
    }
    // Auto at n = 128 and 257 (past the Decode rows' W8A16 range: Hopper).
    for (i, n) in [128usize, 257].into_iter().enumerate() {
        let mut c = Case::new(7, 6, BlockShape::new(128, 128), n);
        c.kind = PatternKind::Random(0.6);
        c.b_layout = Layout::ColMajor;
        c.c_layout = common::layouts()[i % 2];
        (c.alpha, c.beta) = (0.75, 0.5);
        c.bias = true;
        c.a_scale = ScaleKind::PerBlock;
        c.b_scale = ScaleKind::None;
        c.backend = Backend::Auto;
        out.push(c);
    }
    out
}

/// The device for a Hopper-only test, or None (SKIPPED printed).
fn hopper(test: &str) -> Option<Arc<CudaContext>> {
    let ctx = device(test)?;
    if !is_hopper(&ctx) {
        println!("SKIPPED {test}: not an sm_90 device");
        return None;
    }
    Some(ctx)
}

fn w8a8<Q: Fp8 + BOperand>(test: &str) {
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = w8a8_cases();
    for (i, case) in list.iter().enumerate() {
        match i % 3 {
            0 => check_case::<Q, Q, f32>(&ctx, case, &mut rng),
            1 => check_case::<Q, Q, f16>(&ctx, case, &mut rng),
            _ => check_case::<Q, Q, bf16>(&ctx, case, &mut rng),
        }
    }
    println!("{test}: {} cases passed", list.len());
}

fn w8a16<Q: Fp8>(test: &str) {
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = w8a16_cases();
    for (i, case) in list.iter().enumerate() {
        match i % 6 {
            0 => check_case::<Q, f16, f32>(&ctx, case, &mut rng),
            1 => check_case::<Q, bf16, bf16>(&ctx, case, &mut rng),
            2 => check_case::<Q, f16, f16>(&ctx, case, &mut rng),
            3 => check_case::<Q, bf16, f32>(&ctx, case, &mut rng),
            4 => check_case::<Q, bf16, f16>(&ctx, case, &mut rng),
            _ => check_case::<Q, f16, bf16>(&ctx, case, &mut rng),
        }
    }
    println!("{test}: {} cases passed", list.len());
}

#[test]
fn w8a8_e4m3_matches_reference() {
    w8a8::<F8E4M3>("w8a8_e4m3_matches_reference");
}

#[test]
fn w8a8_e5m2_matches_reference() {
    w8a8::<F8E5M2>("w8a8_e5m2_matches_reference");
}

#[test]
fn w8a16_e4m3_matches_reference() {
    w8a16::<F8E4M3>("w8a16_e4m3_matches_reference");
}

#[test]
fn w8a16_e5m2_matches_reference() {
    w8a16::<F8E5M2>("w8a16_e5m2_matches_reference");
}

#[test]
fn w8a16_on_hopper_matches_reference() {
    let test = "w8a16_on_hopper_matches_reference";
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = w8a16_hopper_cases();
    for (i, case) in list.iter().enumerate() {
        match i % 3 {
            0 => check_case::<F8E4M3, f16, f16>(&ctx, case, &mut rng),
            1 => check_case::<F8E4M3, f16, f32>(&ctx, case, &mut rng),
            _ => check_case::<F8E4M3, f16, bf16>(&ctx, case, &mut rng),
        }
    }
    println!("{test}: {} cases passed", list.len());
}

/// The same launch 100 times, C zeroed first: bitwise the same C every time.
fn repeats_bitwise<Q: Fp8, TB: BOperand, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) {
    let stream = ctx.default_stream();
    let d = make::<Q, TB, O>(case, rng);
    let (m, k, n) = d.dims();
    let q = QuantizedBsr::new(d.a.clone(), d.a_scales.clone()).unwrap();
    let da = DeviceBsr::upload_quantized(&q, &stream).unwrap();
    let db = upload(&stream, &d.b);
    let dbs = upload(&stream, &d.b_scales);
    let dbias = upload(&stream, &d.bias);
    let mut dc = stream
        .alloc_zeros::<O>(d.c_shape.required_len().unwrap())
        .unwrap();
    let epi = Epilogue::new()
        .bias(Vector::Device(&dbias))
        .activation(case.activation);
    let mut first: Option<Vec<u32>> = None;
    for run in 0..100 {
        let b = Dense::device(&db, k, n, case.b_layout)
            .with_ld(d.b_shape.ld)
            .attach(d.column_scales(Vector::Device(&dbs)));
        spmm_fp8(
            &da,
            b,
            DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(d.c_shape.ld),
            &epi,
            &SpmmOptions::new().backend(case.backend),
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
            Some(f) => assert!(*f == bits, "{case:?}: run {run} differs from run 0"),
        }
    }
}

#[test]
fn w8a8_is_deterministic() {
    let test = "w8a8_is_deterministic";
    let Some(ctx) = hopper(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    for block in [BlockShape::new(128, 128), BlockShape::new(64, 64)] {
        let mut case = Case::new(2048 / block.rows, 2048 / block.cols, block, 512);
        case.kind = PatternKind::Random(0.25);
        case.backend = Backend::Hopper;
        repeats_bitwise::<F8E4M3, F8E4M3, bf16>(&ctx, &case, &mut rng);
    }
    println!("{test}: 100 runs bitwise identical");
}

#[test]
fn w8a16_is_deterministic() {
    let test = "w8a16_is_deterministic";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    for n in [1, 16, 37] {
        let block = BlockShape::new(64, 64);
        let mut case = Case::new(4096 / 64, 4096 / 64, block, n);
        case.kind = PatternKind::Random(0.5);
        case.b_layout = Layout::ColMajor;
        case.backend = Backend::Decode;
        repeats_bitwise::<F8E4M3, f16, f32>(&ctx, &case, &mut rng);
    }
    // The Hopper family's W8A16 rows (sm_90 only): a plain tile, and split tiles (few
    // block-rows, long ones).
    if is_hopper(&ctx) {
        for (rows, cols, n) in [(32, 32, 200), (4, 64, 96)] {
            let mut case = Case::new(rows, cols, BlockShape::new(128, 128), n);
            case.kind = PatternKind::Random(0.5);
            case.b_layout = Layout::ColMajor;
            case.backend = Backend::Hopper;
            repeats_bitwise::<F8E4M3, f16, f32>(&ctx, &case, &mut rng);
        }
    }
    println!("{test}: 100 runs bitwise identical for n = 1, 16, 37 (and on Hopper 200, 96)");
}

/// DeviceBsr's scales: upload and download the same QuantizedBsr; update_scales; scales from
/// device buffers (with_scales), checked for length and context.
#[test]
fn device_bsr_scales() {
    let test = "device_bsr_scales";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let mask = BlockMask::random(4, 6, 0.5, &mut rng).unwrap();
    let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(64, 64), |_, _| {
        rng.random_range(-2.0f32..2.0)
    })
    .unwrap();
    let nnzb = w.nnz_blocks();
    for g in [BlockGranularity::PerBlock, BlockGranularity::PerTensor] {
        let q = w.quantize_fp8::<F8E4M3>(g).unwrap();
        let dq = DeviceBsr::upload_quantized(&q, &stream).unwrap();
        assert_eq!(dq.download_quantized().unwrap(), q);
        assert_eq!(dq.scale_kind(), q.scales().kind());
    }
    let q = w
        .quantize_fp8::<F8E5M2>(BlockGranularity::PerBlock)
        .unwrap();
    let mut dq = DeviceBsr::upload(q.matrix(), &stream).unwrap();
    assert_eq!(dq.scale_kind(), ScaleKind::None);
    dq.update_scales(q.scales()).unwrap();
    assert_eq!(dq.download_quantized().unwrap(), q);
    let e = dq
        .update_scales(&BlockScales::PerBlock(vec![1.0; nnzb + 1]))
        .unwrap_err();
    assert!(matches!(e, Error::ScaleLength { .. }), "{e}");
    assert_eq!(
        dq.download_quantized().unwrap(),
        q,
        "a refused update changed the scales"
    );
    // Device buffers: the right length is taken, another refused.
    let (rp, ci, vals) = DeviceBsr::upload(q.matrix(), &stream).unwrap().into_parts();
    let parts = DeviceBsr::from_device_parts(w.m(), w.k(), w.block(), rp, ci, vals).unwrap();
    let s = stream.clone_htod(&vec![0.5f32; nnzb]).unwrap();
    let parts = parts.with_scales(DeviceBlockScales::PerBlock(s)).unwrap();
    assert_eq!(
        parts.download_quantized().unwrap().scales(),
        &BlockScales::PerBlock(vec![0.5; nnzb])
    );
    let bad = stream.clone_htod(&vec![0.5f32; nnzb + 2]).unwrap();
    let e = parts
        .with_scales(DeviceBlockScales::PerBlock(bad))
        .err()
        .expect("a scale buffer of the wrong length");
    assert!(matches!(e, Error::ScaleLength { operand: "A", .. }), "{e}");
    let two = stream.clone_htod(&[1.0f32, 2.0]).unwrap();
    let e = DeviceBsr::upload(q.matrix(), &stream)
        .unwrap()
        .with_scales(DeviceBlockScales::PerTensor(two))
        .err()
        .expect("per-tensor scales of two values");
    assert!(matches!(e, Error::ScaleLength { expected: 1, .. }), "{e}");
    // An empty matrix's per-block scales: a one-element buffer.
    let empty = BsrMatrix::from_parts(
        64,
        64,
        BlockShape::new(64, 64),
        vec![0, 0],
        vec![],
        Vec::<F8E4M3>::new(),
    )
    .unwrap();
    let qe = QuantizedBsr::new(empty, BlockScales::PerBlock(vec![])).unwrap();
    let de = DeviceBsr::upload_quantized(&qe, &stream).unwrap();
    assert_eq!(de.download_quantized().unwrap(), qe);
    println!("{test}: passed");
}

/// Device refusals: typed, before anything is launched; C untouched.
#[test]
fn fp8_device_refusals() {
    let test = "fp8_device_refusals";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (m, k, n) = (256, 256, 16);
    let q = random_e4m3_weight(m, k, 128, 0.75, &mut rng);
    let da = DeviceBsr::upload_quantized(&q, &stream).unwrap();
    let x = random_vec::<f32>(k * n, &mut rng);
    let xq = quantize_per_token(&x, k, n);
    let db = stream.clone_htod(xq.values()).unwrap();
    let ds = stream.clone_htod(xq.scales()).unwrap();
    let ds_short = stream.clone_htod(&xq.scales()[..n - 1]).unwrap();
    let c0 = vec![7.0f32; m * n];
    let mut dc = stream.clone_htod(&c0).unwrap();
    let cm = Layout::ColMajor;
    let per_col = |s| ColumnScales::PerColumn(Vector::Device(s));
    let untouched = |dc: &CudaSlice<f32>| {
        let out = stream.clone_dtoh(dc).unwrap();
        stream.synchronize().unwrap();
        out == c0
    };
    // Row-major B with an FP8 B: NotSupported naming why, from the Rust check.
    let e = spmm_fp8(
        &da,
        Dense::device(&db, k, n, Layout::RowMajor).with_scales(per_col(&ds)),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new(),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::NotSupported { reason, .. } if reason.contains("column-major")),
        "{e}"
    );
    let e = spmm_fp8(
        &da,
        Dense::device(&db, k, n, cm).with_scales(per_col(&ds)),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new(),
        &SpmmOptions::new().transpose_a(true),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    let e = spmm_fp8(
        &da,
        Dense::device(&db, k, n, cm).with_scales(per_col(&ds_short)),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new(),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ScaleLength {
                operand: "B",
                expected: 16,
                got: 15,
                ..
            }
        ),
        "{e}"
    );
    let host_scales = xq.scales().to_vec();
    let e = spmm_fp8(
        &da,
        Dense::device(&db, k, n, cm)
            .with_scales(ColumnScales::PerColumn(Vector::Host(&host_scales))),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new(),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::MixedLocations(_)), "{e}");
    let e = spmm_fp8(
        &da,
        Dense::device(&db, k, n, cm),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new(),
        &SpmmOptions::new().backend(Backend::Cpu),
    )
    .unwrap_err();
    assert!(matches!(e, Error::BackendUnavailable { .. }), "{e}");
    // A device A with host B.
    let e = spmm_fp8(
        &da,
        Dense::host(xq.values(), k, n, cm),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new(),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::MixedLocations(_)), "{e}");
    // A bias of A's type is not representable (Epilogue<C's type>); one of C's type on
    // the host with device operands is refused.
    let hb = vec![0f32; m];
    let e = spmm_fp8(
        &da,
        Dense::device(&db, k, n, cm).with_scales(per_col(&ds)),
        DenseMut::device(&mut dc, m, n, cm),
        &Epilogue::new().bias(Vector::Host(&hb)),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::MixedLocations(_)), "{e}");
    // FP8 is a dtype of the one spmm: a device FP8 A (its DeviceBsr holds its scales) takes
    // the FP8 rules there, spmm_fp8's refusal for a row-major FP8 B included, and on Hopper
    // writes spmm_fp8's bits.
    let e = sparsek::spmm(
        &da,
        Dense::device(&db, k, n, Layout::RowMajor).with_scales(per_col(&ds)),
        DenseMut::device(&mut dc, m, n, cm),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::NotSupported { reason, .. } if reason.contains("column-major")),
        "{e}"
    );
    assert!(untouched(&dc), "C written by a refused call");
    if is_hopper(&ctx) {
        let (mut d1, mut d2) = (
            stream.clone_htod(&c0).unwrap(),
            stream.clone_htod(&c0).unwrap(),
        );
        sparsek::spmm(
            &da,
            Dense::device(&db, k, n, cm).with_scales(per_col(&ds)),
            DenseMut::device(&mut d1, m, n, cm),
            &SpmmOptions::new(),
        )
        .unwrap();
        spmm_fp8(
            &da,
            Dense::device(&db, k, n, cm).with_scales(per_col(&ds)),
            DenseMut::device(&mut d2, m, n, cm),
            &Epilogue::new(),
            &SpmmOptions::new(),
        )
        .unwrap();
        let (h1, h2) = (
            stream.clone_dtoh(&d1).unwrap(),
            stream.clone_dtoh(&d2).unwrap(),
        );
        stream.synchronize().unwrap();
        assert!(
            h1.iter().zip(&h2).all(|(x, y)| x.to_bits() == y.to_bits()),
            "spmm and spmm_fp8 differ on a device FP8 A"
        );
    }
    // can_implement_fp8 refuses the same way, and takes the valid problem.
    let c = DenseMut::device(&mut dc, m, n, cm);
    let e = can_implement_fp8(
        &da,
        &Dense::device(&db, k, n, Layout::RowMajor).with_scales(per_col(&ds)),
        &c,
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    if is_hopper(&ctx) {
        let chosen = can_implement_fp8(
            &da,
            &Dense::device(&db, k, n, cm).with_scales(per_col(&ds)),
            &c,
            &SpmmOptions::new(),
        )
        .unwrap();
        assert_eq!(chosen, Backend::Hopper);
    }
    assert!(untouched(&dc), "C written by a refused call");
    // Scales on an f16 x through the FP8 layer: ScalesNotTaken.
    let layer: SparseLinear<DeviceBsr<F8E4M3>, CudaSlice<f32>> = SparseLinear::new_fp8_device(
        DeviceBsr::upload_quantized(&q, &stream).unwrap(),
        None,
        Activation::None,
    )
    .unwrap();
    let xh = stream
        .clone_htod(&x.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>())
        .unwrap();
    let e = layer
        .forward_fp8(&xh, per_col(&ds), n, &mut dc)
        .unwrap_err();
    assert!(
        matches!(e, Error::ScalesNotTaken { operand: "B", .. }),
        "{e}"
    );
    assert!(untouched(&dc), "C written by a refused call");
    println!("{test}: passed");
}

/// SparseLinear with FP8 weights on the device: W8A8 (x quantized per token, Hopper) and
/// W8A16 (x bf16, Decode) against the same layer on the host.
#[test]
fn sparse_linear_fp8_on_device() {
    let test = "sparse_linear_fp8_on_device";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (out_f, in_f, batch) = (512, 1024, 24);
    let q = random_e4m3_weight(out_f, in_f, 128, 0.5, &mut rng);
    let bias = random_vec::<f32>(out_f, &mut rng);
    let host = SparseLinear::new_fp8(q.clone(), Some(bias.clone()), Activation::GeluTanh).unwrap();
    let dev = SparseLinear::new_fp8_device(
        DeviceBsr::upload_quantized(&q, &stream).unwrap(),
        Some(stream.clone_htod(&bias).unwrap()),
        Activation::GeluTanh,
    )
    .unwrap();
    let x = random_vec::<f32>(batch * in_f, &mut rng);
    let shape = DenseShape::packed(batch, out_f, Layout::RowMajor);
    let compare = |want: &[f32], got: &[f32], what: &str| {
        let want64: Vec<f64> = want.iter().map(|&v| v as f64).collect();
        let (err, bad) = rel_err(got, &shape, &want64);
        assert!(
            bad == 0 && err < 1e-3,
            "{what}: rel err {err:.3e}, {bad} bad"
        );
    };
    // W8A8.
    let xq = quantize_per_token(&x, in_f, batch);
    let mut want = vec![0f32; batch * out_f];
    host.forward_fp8(xq.values(), xq.column_scales(), batch, &mut want)
        .unwrap();
    let dx = stream.clone_htod(xq.values()).unwrap();
    let ds = stream.clone_htod(xq.scales()).unwrap();
    let mut dy = stream.alloc_zeros::<f32>(batch * out_f).unwrap();
    if is_hopper(&ctx) {
        dev.forward_fp8(
            &dx,
            ColumnScales::PerColumn(Vector::Device(&ds)),
            batch,
            &mut dy,
        )
        .unwrap();
        let got = stream.clone_dtoh(&dy).unwrap();
        stream.synchronize().unwrap();
        compare(&want, &got, "W8A8");
    }
    // W8A16.
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    host.forward_fp8(&xb, ColumnScales::None, batch, &mut want)
        .unwrap();
    let dxb = stream.clone_htod(&xb).unwrap();
    dev.forward_fp8(&dxb, ColumnScales::None, batch, &mut dy)
        .unwrap();
    let got = stream.clone_dtoh(&dy).unwrap();
    stream.synchronize().unwrap();
    compare(&want, &got, "W8A16");
    println!("{test}: passed");
}

/// The device quantizer against the host's, bit for bit: f16, bf16 and f32 sources, E4M3 and
/// E5M2, per block and per tensor, blocks square and not, values spanning magnitudes (so
/// subnormals, ties and the saturating top all occur), an all-zero block, an empty matrix;
/// `quantize_fp8_from` into existing buffers; a NaN or infinity poisons its part only; the
/// refusals, nothing written.
fn quantize_case<T: Element, Q: Fp8>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    block: BlockShape,
    g: BlockGranularity,
) {
    let mask = BlockMask::random(5, 4, 0.6, rng).unwrap();
    let zero_block = rng.random_range(0..mask.count().max(1));
    let mut n = 0usize;
    let w = BsrMatrix::from_block_mask(&mask, block, |_, _| {
        n += 1;
        if (n - 1) / (block.rows * block.cols) == zero_block {
            return T::from_f32(0.0);
        }
        // Magnitudes 2^-20 .. 2^12 (f16 keeps what it can), either sign.
        let v = rng.random_range(0.5f32..1.0) * 2f32.powi(rng.random_range(-20..12));
        T::from_f32(if rng.random_bool(0.5) { v } else { -v })
    })
    .unwrap();
    let want = w.quantize_fp8::<Q>(g).unwrap();
    let dw = DeviceBsr::upload(&w, stream).unwrap();
    let got = dw.quantize_fp8::<Q>(g).unwrap();
    let got = got.download_quantized().unwrap();
    assert_eq!(got, want, "{} -> {}, {block:?}, {g:?}", T::DTYPE, Q::DTYPE);
    // Into existing buffers (poisoned first): the same bits.
    let poison = QuantizedBsr::new(
        BsrMatrix::from_parts(
            w.m(),
            w.k(),
            block,
            w.row_ptr().to_vec(),
            w.col_idx().to_vec(),
            vec![Q::from_bits(0x55); w.values().len()],
        )
        .unwrap(),
        match g {
            BlockGranularity::PerBlock => BlockScales::PerBlock(vec![-3.0; w.nnz_blocks()]),
            BlockGranularity::PerTensor => BlockScales::PerTensor(-3.0),
        },
    )
    .unwrap();
    let mut into = DeviceBsr::upload_quantized(&poison, stream).unwrap();
    into.quantize_fp8_from(&dw, g).unwrap();
    assert_eq!(
        into.download_quantized().unwrap(),
        want,
        "quantize_fp8_from"
    );
}

#[test]
fn device_quantize_matches_host() {
    let test = "device_quantize_matches_host";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let mut cases = 0;
    for block in [
        BlockShape::new(64, 64),
        BlockShape::new(32, 48),
        BlockShape::new(128, 128),
    ] {
        for g in [BlockGranularity::PerBlock, BlockGranularity::PerTensor] {
            quantize_case::<f16, F8E4M3>(&stream, &mut rng, block, g);
            quantize_case::<bf16, F8E4M3>(&stream, &mut rng, block, g);
            quantize_case::<f32, F8E4M3>(&stream, &mut rng, block, g);
            quantize_case::<f16, F8E5M2>(&stream, &mut rng, block, g);
            quantize_case::<bf16, F8E5M2>(&stream, &mut rng, block, g);
            quantize_case::<f32, F8E5M2>(&stream, &mut rng, block, g);
            cases += 6;
        }
    }
    // An empty matrix: no value; per tensor the scale is 1, as on the host.
    let empty = BsrMatrix::from_parts(
        64,
        64,
        BlockShape::new(64, 64),
        vec![0, 0],
        vec![],
        Vec::<f32>::new(),
    )
    .unwrap();
    let de = DeviceBsr::upload(&empty, &stream).unwrap();
    for g in [BlockGranularity::PerBlock, BlockGranularity::PerTensor] {
        let got = de.quantize_fp8::<F8E4M3>(g).unwrap();
        assert_eq!(
            got.download_quantized().unwrap(),
            empty.quantize_fp8::<F8E4M3>(g).unwrap()
        );
    }
    // A NaN in block 1, an infinity in block 2: their scales and values NaN, every other
    // block as the host quantizes it (per block); per tensor, all of it NaN.
    let block = BlockShape::new(32, 32);
    let mask = BlockMask::from_fn(2, 2, |_, _| true).unwrap();
    let clean =
        BsrMatrix::from_block_mask(&mask, block, |i, j| ((i * 7 + j) % 13) as f32 - 6.0).unwrap();
    let mut values = clean.values().to_vec();
    values[1024 + 5] = f32::NAN;
    values[2048 + 9] = f32::INFINITY;
    let dirty = BsrMatrix::from_parts(
        clean.m(),
        clean.k(),
        block,
        clean.row_ptr().to_vec(),
        clean.col_idx().to_vec(),
        values,
    )
    .unwrap();
    let dd = DeviceBsr::upload(&dirty, &stream).unwrap();
    let got = dd
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap()
        .download_quantized()
        .unwrap();
    let host = clean
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap();
    let (BlockScales::PerBlock(gs), BlockScales::PerBlock(hs)) = (got.scales(), host.scales())
    else {
        panic!("per-block scales expected")
    };
    for b in 0..4 {
        let part = &got.matrix().values()[b * 1024..(b + 1) * 1024];
        if b == 1 || b == 2 {
            assert!(gs[b].is_nan(), "block {b}: scale {}", gs[b]);
            assert!(part.iter().all(|v| v.is_nan()), "block {b}: values not NaN");
        } else {
            assert_eq!(gs[b].to_bits(), hs[b].to_bits(), "block {b}");
            assert_eq!(part, &host.matrix().values()[b * 1024..(b + 1) * 1024]);
        }
    }
    let got = dd
        .quantize_fp8::<F8E5M2>(BlockGranularity::PerTensor)
        .unwrap()
        .download_quantized()
        .unwrap();
    assert!(matches!(got.scales(), BlockScales::PerTensor(s) if s.is_nan()));
    assert!(got.matrix().values().iter().all(|v| v.is_nan()));
    // Refusals, nothing written: another shape, another scale kind, an FP8 source.
    let w = BsrMatrix::from_block_mask(&mask, block, |i, j| (i + j) as f32).unwrap();
    let dw = DeviceBsr::upload(&w, &stream).unwrap();
    let mut into = dw
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap();
    let before = into.download_quantized().unwrap();
    let other = BsrMatrix::from_block_mask(
        &BlockMask::from_fn(2, 3, |_, _| true).unwrap(),
        block,
        |_, _| 1.0f32,
    )
    .unwrap();
    let dother = DeviceBsr::upload(&other, &stream).unwrap();
    let e = into
        .quantize_fp8_from(&dother, BlockGranularity::PerBlock)
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = into
        .quantize_fp8_from(&dw, BlockGranularity::PerTensor)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ScalesNotTaken {
                kind: ScaleKind::PerBlock,
                ..
            }
        ),
        "{e}"
    );
    let e = into
        .quantize_fp8_from(
            &dw.quantize_fp8::<F8E5M2>(BlockGranularity::PerBlock)
                .unwrap(),
            BlockGranularity::PerBlock,
        )
        .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    assert_eq!(
        into.download_quantized().unwrap(),
        before,
        "a refusal wrote"
    );
    println!("{test}: {cases} cases and the edge cases passed");
}

/// The device quantizer runs on its matrix's stream's GPU whatever context the caller left
/// current: with GPU 0's context current, a matrix whose buffers and stream are on GPU 1 (its
/// default stream and a stream of its own) is quantized there, into `quantize_fp8_from`'s
/// existing buffers and by `quantize_fp8`, bit for bit as the host does; GPU 0 is left without
/// an error. Needs two GPUs: SKIPPED with one, a failure with SPARSEK_REQUIRE_GPUS=2.
#[test]
fn quantize_runs_on_the_stream_gpu_not_the_current() {
    let test = "quantize_runs_on_the_stream_gpu_not_the_current";
    let Some(ctx0) = device(test) else { return };
    let count = CudaContext::device_count().unwrap_or(0);
    if count < 2 {
        assert!(
            std::env::var_os("SPARSEK_REQUIRE_GPUS").is_none(),
            "{test}: SPARSEK_REQUIRE_GPUS is set but {count} GPU(s) found"
        );
        eprintln!("SKIPPED {test}: {count} GPU(s), two needed");
        return;
    }
    let ctx1 = CudaContext::new(1).unwrap();
    let mut rng = StdRng::seed_from_u64(seed());
    let block = BlockShape::new(64, 64);
    let mask = BlockMask::random(4, 6, 0.5, &mut rng).unwrap();
    let w =
        BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<f16>(&mut rng)).unwrap();
    // The default stream first: before GPU 1's context has a second stream (cudarc then binds
    // a buffer's context when it orders streams, which would hide a missing bind).
    for which in ["GPU 1's default stream", "a stream of GPU 1"] {
        let stream = if which.contains("default") {
            ctx1.default_stream()
        } else {
            ctx1.new_stream().unwrap()
        };
        for g in [BlockGranularity::PerBlock, BlockGranularity::PerTensor] {
            let want = w.quantize_fp8::<F8E4M3>(g).unwrap();
            let dw = DeviceBsr::upload(&w, &stream).unwrap();
            let poison = QuantizedBsr::new(
                BsrMatrix::from_parts(
                    w.m(),
                    w.k(),
                    block,
                    w.row_ptr().to_vec(),
                    w.col_idx().to_vec(),
                    vec![F8E4M3::from_bits(0x55); w.values().len()],
                )
                .unwrap(),
                match g {
                    BlockGranularity::PerBlock => BlockScales::PerBlock(vec![-3.0; w.nnz_blocks()]),
                    BlockGranularity::PerTensor => BlockScales::PerTensor(-3.0),
                },
            )
            .unwrap();
            let mut into = DeviceBsr::upload_quantized(&poison, &stream).unwrap();
            ctx0.bind_to_thread().unwrap();
            into.quantize_fp8_from(&dw, g).unwrap();
            assert_eq!(
                into.download_quantized().unwrap(),
                want,
                "quantize_fp8_from on {which}, GPU 0 current, {g:?}"
            );
            ctx0.bind_to_thread().unwrap();
            let fresh = dw.quantize_fp8::<F8E4M3>(g).unwrap();
            assert_eq!(fresh.values().stream().context().ordinal(), 1);
            assert_eq!(
                fresh.download_quantized().unwrap(),
                want,
                "quantize_fp8 on {which}, GPU 0 current, {g:?}"
            );
        }
    }
    // Nothing ran on GPU 0 (a launch there on GPU 1's pointers would have faulted).
    ctx0.synchronize().unwrap();
    println!("{test}: quantized on GPU 1 with GPU 0 current, both streams, both granularities");
}
