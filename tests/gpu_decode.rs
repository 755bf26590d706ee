//! GPU tests of the decode family (`Backend::Decode`, small n; `--features cuda`): the
//! decode-sized cases against the f64 oracle (a small set of them for compute-sanitizer
//! too) and bitwise determinism (the cases: `common::gpu_spmm`); W8A16 at n <= 8 likewise
//! (`common::fp8`), the rows that take it forced one by one by the GPU bundle. Without a GPU each test
//! says SKIPPED on stdout and stderr and returns; with SPARSEK_REQUIRE_GPU=1 (set by the
//! bundle's run script on the GPU machine) a missing GPU is a failure instead.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::fp8::{make, tolerance, Case as Fp8Case};
use common::gpu_spmm::{assert_repeats_bitwise, check_case, Case};
use common::{device, seed, PatternKind};
use common::{outside_untouched, rel_err, upload};
use cudarc::driver::CudaContext;
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, f16, spmm_fused, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut,
    DeviceBsr, Element, Epilogue, Fp8, Layout, QuantizedBsr, ScaleKind, SpmmOptions, TakesB,
    TakesBias, Vector, F8E4M3, F8E5M2,
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

/// The rows of n_max 8, 16, 32, 48 and 64 (n = 1..8, 9..16, 17..32, 33..48, 49..64): Auto
/// picks between the fill rows (`decode_n8_fill`, `decode_n8_wide`, `decode_n16_fill`,
/// `decode_n16`, `decode_n32_fill`, `decode_n32_bparts2`, `decode_n48_bparts2`,
/// `decode_n64_bparts2`) and their partner by the grid; the GPU bundle also runs these with SPARSEK_VARIANT naming each fill
/// row (every case fits it), plain and under compute-sanitizer. Both layouts, ld padding, α/β, bias, activations, empty and full
/// block-rows, five block shapes.
fn fill_rows_match_reference(name: &str, ns: &[usize]) {
    let Some(ctx) = device(name) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let blocks = [
        BlockShape::new(32, 32),
        BlockShape::new(64, 64),
        BlockShape::new(128, 128),
        BlockShape::new(16, 48),
        BlockShape::new(128, 64),
    ];
    let list = decode_cases(ns, &blocks);
    run_typed(&ctx, &list, &mut rng);
    println!("{name}: {} cases passed", list.len());
}

/// 100 launches bitwise identical on a grid of many CTAs (2048 x 4096, 128x128 blocks), at
/// an n the fill row and its partner both take (forced like the test above in the bundle).
fn fill_rows_are_deterministic(name: &str, n: usize) {
    let Some(ctx) = device(name) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let stream = ctx.default_stream();
    let mask = BlockMask::random_per_row(2048 / 128, 4096 / 128, 13, &mut rng).unwrap();
    let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |_, _| {
        common::nonzero::<bf16>(&mut rng)
    })
    .unwrap();
    let opts = SpmmOptions::new().backend(Backend::Decode);
    assert_repeats_bitwise::<bf16, bf16>(&stream, &a, n, Layout::ColMajor, &opts, &mut rng);
    println!("{name}: 100 runs bitwise identical at n = {n}");
}

#[test]
fn decode_n8_rows_match_reference() {
    fill_rows_match_reference("decode_n8_rows_match_reference", &[1, 3, 8]);
}

#[test]
fn decode_n8_rows_are_deterministic() {
    fill_rows_are_deterministic("decode_n8_rows_are_deterministic", 5);
}

#[test]
fn decode_n16_rows_match_reference() {
    fill_rows_match_reference("decode_n16_rows_match_reference", &[9, 12, 16]);
}

#[test]
fn decode_n16_rows_are_deterministic() {
    fill_rows_are_deterministic("decode_n16_rows_are_deterministic", 11);
}

#[test]
fn decode_n32_rows_match_reference() {
    fill_rows_match_reference("decode_n32_rows_match_reference", &[17, 23, 32]);
}

#[test]
fn decode_n32_rows_are_deterministic() {
    fill_rows_are_deterministic("decode_n32_rows_are_deterministic", 27);
}

#[test]
fn decode_n48_rows_match_reference() {
    fill_rows_match_reference("decode_n48_rows_match_reference", &[33, 41, 48]);
}

#[test]
fn decode_n48_rows_are_deterministic() {
    fill_rows_are_deterministic("decode_n48_rows_are_deterministic", 45);
}

#[test]
fn decode_n64_rows_match_reference() {
    fill_rows_match_reference("decode_n64_rows_match_reference", &[49, 57, 64]);
}

#[test]
fn decode_n64_rows_are_deterministic() {
    fill_rows_are_deterministic("decode_n64_rows_are_deterministic", 60);
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

/// One decode step of a pruned model, two layers on the Decode family with SiLU and a bias
/// between them (`h = silu(x·W1ᵀ + b)`, `y = h·W2ᵀ`), captured in a CUDA graph. The step
/// is run eagerly once first (that fills the per-device caches: kernel images, the chosen
/// split), then captured: the capture must succeed (no host synchronization,
/// allocation or host read inside a launch), 100 replays must give the eager result bit for
/// bit, and a replay after new input is copied in must match an eager step on that input
/// (the graph holds pointers, not values).
#[test]
fn decode_step_replays_in_a_cuda_graph() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    use sparsek::{Activation, SparseLinear};
    let Some(ctx) = device("decode_step_replays_in_a_cuda_graph") else {
        return;
    };
    // SAFETY: every buffer of this test is created, used and freed on `stream` alone, so
    // stream order is all the synchronization there is to manage (cudarc's per-buffer
    // events, recorded outside the capture, are not wanted inside it).
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let mut rng = StdRng::seed_from_u64(seed());
    // (batch, hidden, intermediate, W1's blocks, W2's blocks)
    let shapes = [
        (
            1,
            1024,
            4096,
            BlockShape::new(128, 128),
            BlockShape::new(64, 64),
        ),
        (
            7,
            2048,
            1536,
            BlockShape::new(64, 64),
            BlockShape::new(32, 32),
        ),
        (
            16,
            512,
            2048,
            BlockShape::new(32, 32),
            BlockShape::new(128, 128),
        ),
    ];
    for (batch, hidden, inter, b1, b2) in shapes {
        let layer = |out: usize, inp: usize, block: BlockShape, rng: &mut StdRng| {
            let mask = BlockMask::random_per_row(
                out / block.rows,
                inp / block.cols,
                inp / block.cols / 2,
                rng,
            )
            .unwrap();
            BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<f16>(rng)).unwrap()
        };
        let (w1, w2) = (
            layer(inter, hidden, b1, &mut rng),
            layer(hidden, inter, b2, &mut rng),
        );
        let bias: Vec<f16> = common::random_vec(inter, &mut rng);
        let decode = SpmmOptions::new().backend(Backend::Decode);
        let l1 = SparseLinear::new_device(
            sparsek::DeviceBsr::upload(&w1, &stream).unwrap(),
            Some(stream.clone_htod(&bias).unwrap()),
            Activation::Silu,
        )
        .unwrap()
        .with_options(decode);
        let l2 = SparseLinear::new_device(
            sparsek::DeviceBsr::upload(&w2, &stream).unwrap(),
            None,
            Activation::None,
        )
        .unwrap()
        .with_options(decode);
        let x0: Vec<f16> = common::random_vec(batch * hidden, &mut rng);
        let x1: Vec<f16> = common::random_vec(batch * hidden, &mut rng);
        let mut x = stream.clone_htod(&x0).unwrap();
        let mut h = stream.alloc_zeros::<f16>(batch * inter).unwrap();
        let mut y = stream.alloc_zeros::<f32>(batch * hidden).unwrap();
        let step = |x: &cudarc::driver::CudaSlice<f16>,
                    h: &mut cudarc::driver::CudaSlice<f16>,
                    y: &mut cudarc::driver::CudaSlice<f32>| {
            l1.forward(x, batch, h).unwrap();
            l2.forward(h, batch, y).unwrap();
        };
        let poison = vec![f32::NAN; batch * hidden];
        // Eager, on both inputs: the expected outputs (and the set-up the capture needs).
        let mut eager = Vec::new();
        for xi in [&x0, &x1] {
            stream.memcpy_htod(xi, &mut x).unwrap();
            stream.memcpy_htod(&poison, &mut y).unwrap();
            step(&x, &mut h, &mut y);
            eager.push(stream.clone_dtoh(&y).unwrap());
        }
        stream.synchronize().unwrap();
        assert!(
            eager.iter().all(|e| e.iter().all(|v| v.is_finite())),
            "batch {batch}: the eager step left outputs unwritten"
        );
        // The same step against the CPU backend (f64-checked elsewhere): the eager result
        // the graph is compared with is itself right.
        let cpu1 = SparseLinear::new(w1.clone(), Some(bias.clone()), Activation::Silu).unwrap();
        let cpu2 = SparseLinear::new(w2.clone(), None, Activation::None).unwrap();
        let mut hc = vec![f16::ZERO; batch * inter];
        let mut yc = vec![0f32; batch * hidden];
        cpu1.forward(&x1, batch, &mut hc).unwrap();
        cpu2.forward(&hc, batch, &mut yc).unwrap();
        let (num, den) = yc
            .iter()
            .zip(&eager[1])
            .fold((0f64, 0f64), |(n, d), (&r, &g)| {
                (
                    n + (f64::from(g) - f64::from(r)).powi(2),
                    d + f64::from(r).powi(2),
                )
            });
        assert!(
            (num / den).sqrt() < 1e-2,
            "batch {batch}: eager vs CPU rel err {:.3e}",
            (num / den).sqrt()
        );

        stream.memcpy_htod(&x0, &mut x).unwrap();
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        step(&x, &mut h, &mut y);
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .unwrap_or_else(|e| panic!("batch {batch}: the decode step did not capture: {e}"))
            .expect("a captured step has nodes");
        for rep in 0..100 {
            stream.memcpy_htod(&poison, &mut y).unwrap();
            graph.launch().unwrap();
            let got = stream.clone_dtoh(&y).unwrap();
            let same = got
                .iter()
                .zip(&eager[0])
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "batch {batch}: replay {rep} differs from the eager step"
            );
        }
        stream.memcpy_htod(&x1, &mut x).unwrap();
        stream.memcpy_htod(&poison, &mut y).unwrap();
        graph.launch().unwrap();
        let got = stream.clone_dtoh(&y).unwrap();
        assert!(
            got.iter()
                .zip(&eager[1])
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "batch {batch}: a replay on new input differs from the eager step on it"
        );
        stream.synchronize().unwrap();
    }
    println!("decode_step_replays_in_a_cuda_graph: 3 steps captured, 100 replays each bitwise equal to eager");
}

/// One W8A16 product of `case` on the Decode family (`common::fp8`: NaN-poisoned C where β =
/// 0): the first launch against the f64 oracle on the dequantized operands, nothing written
/// outside C's view; `repeats` launches (C reset each time) bitwise identical.
fn w8a16_run<Q: Fp8 + TakesB<TB> + TakesBias<O>, TB: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Fp8Case,
    rng: &mut StdRng,
    repeats: usize,
) {
    let stream = ctx.default_stream();
    let d = make::<Q, TB, O>(case, rng);
    let (m, k, n) = d.dims();
    let q = QuantizedBsr::new(d.a.clone(), d.a_scales.clone()).unwrap();
    let da = DeviceBsr::upload_quantized(&q, &stream).unwrap();
    let db = upload(&stream, &d.b);
    let dbias = upload(&stream, &d.bias);
    let mut dc = upload(&stream, &d.c0);
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Device(&dbias));
    }
    let opts = SpmmOptions::new()
        .alpha(case.alpha)
        .beta(case.beta)
        .backend(Backend::Decode);
    let mut first: Option<Vec<u32>> = None;
    for run in 0..repeats {
        if run > 0 {
            stream.memcpy_htod(&d.c0, &mut dc).unwrap();
        }
        let b = Dense::device(&db, k, n, case.b_layout).with_ld(d.b_shape.ld);
        let c = DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(d.c_shape.ld);
        spmm_fused(&da, b, c, &epi, &opts)
            .unwrap_or_else(|e| panic!("{case:?} {}/{}/{}: {e}", Q::DTYPE, TB::DTYPE, O::DTYPE));
        let out = stream.clone_dtoh(&dc).unwrap();
        let bits: Vec<u32> = out.iter().map(|v| v.to_f32().to_bits()).collect();
        match &first {
            None => {
                let (err, bad) = rel_err(&out, &d.c_shape, &d.want);
                let tol = tolerance(O::DTYPE);
                assert_eq!(bad, 0, "{case:?}: {bad} outputs unwritten or non-finite");
                assert!(err <= tol, "{case:?}: rel err {err:.3e} > {tol:.0e}");
                assert!(
                    outside_untouched(&out, &d.c0, &d.c_shape),
                    "{case:?}: written outside the view"
                );
                first = Some(bits);
            }
            Some(f) => assert!(*f == bits, "{case:?}: run {run} differs from run 0"),
        }
    }
}

/// W8A16 (e4m3/e5m2 A, f16/bf16 B) at each n of `ns` against the f64 oracle: both layouts
/// of B and C, ld padding, every scale kind of A, α/β, bias, activations, empty block-rows,
/// blocks 64x64, 128x128, 32x32 and 16x48.
fn w8a16_cases_match_reference(name: &str, ns: &[usize]) {
    let Some(ctx) = device(name) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::GeluTanh,
        Activation::Silu,
    ];
    let blocks = [
        BlockShape::new(64, 64),
        BlockShape::new(128, 128),
        BlockShape::new(32, 32),
        BlockShape::new(16, 48),
    ];
    let mut count = 0;
    for (i, &n) in ns.iter().enumerate() {
        for (j, &block) in blocks.iter().enumerate() {
            let v = i + j;
            let mut c = Fp8Case::new(
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
            c.activation = acts[v % 4];
            c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][v % 3];
            c.b_scale = ScaleKind::None;
            match v % 4 {
                0 => w8a16_run::<F8E4M3, f16, f32>(&ctx, &c, &mut rng, 1),
                1 => w8a16_run::<F8E5M2, bf16, bf16>(&ctx, &c, &mut rng, 1),
                2 => w8a16_run::<F8E4M3, bf16, f16>(&ctx, &c, &mut rng, 1),
                _ => w8a16_run::<F8E5M2, f16, f16>(&ctx, &c, &mut rng, 1),
            }
            count += 1;
        }
    }
    println!("{name}: {count} cases passed");
}

/// n ≤ 8: Auto picks between `decode_w8_n8_fill`, `decode_w8_n8` and `decode_w8_n8_wide` by
/// the grid; the GPU bundle also runs this with SPARSEK_VARIANT naming each fill row (every
/// case fits them), plain and under compute-sanitizer.
#[test]
fn w8a16_narrow_matches_reference() {
    w8a16_cases_match_reference("w8a16_narrow_matches_reference", &[1, 2, 3, 7, 8]);
}

/// n = 9..16: Auto picks between `decode_w8_n16_fill` and `decode_w8_n16`; the bundle also
/// runs this with SPARSEK_VARIANT=decode_w8_n16_fill, plain and under compute-sanitizer.
#[test]
fn w8a16_n16_rows_match_reference() {
    w8a16_cases_match_reference("w8a16_n16_rows_match_reference", &[9, 12, 13, 16, 10]);
}

/// 100 W8A16 launches bitwise identical on a grid of many CTAs (64x64 blocks, 4096 x 4096,
/// n = 1 and 8); run with SPARSEK_VARIANT=decode_w8_n8_fill too.
#[test]
fn w8a16_narrow_is_deterministic() {
    let Some(ctx) = device("w8a16_narrow_is_deterministic") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    for n in [1usize, 8] {
        let mut c = Fp8Case::new(4096 / 64, 4096 / 64, BlockShape::new(64, 64), n);
        c.b_scale = ScaleKind::None;
        c.b_layout = Layout::ColMajor;
        w8a16_run::<F8E4M3, f16, f32>(&ctx, &c, &mut rng, 100);
    }
    println!("w8a16_narrow_is_deterministic: 100 runs bitwise identical for n = 1, 8");
}
