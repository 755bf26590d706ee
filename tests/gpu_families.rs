//! GPU tests across the families (`--features cuda`): the family Auto picks, a skewed
//! pattern on WMMA and Hopper, refused device calls that launch nothing, the fused epilogue
//! on every family, and `SparseLinear` on the device (the cases: `common::gpu_spmm`).
//! Without a GPU each test says SKIPPED on stdout and stderr and returns; with
//! SPARSEK_REQUIRE_GPU=1 (set by the bundle's run script on the GPU machine) a missing GPU
//! is a failure instead.
#![cfg(feature = "full")]

mod common;

use common::gpu_spmm::{check_case, Case};
use common::{device, is_hopper, random_vec, reference, rel_err, seed, PatternKind};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, f16, gpu, spmm, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut,
    DenseShape, DeviceBsr, Error, Layout, SparseLinear, SpmmOptions,
};

/// Auto resolves to the Hopper path on sm_90 for the block shapes where it is faster, to WMMA
/// elsewhere.
#[test]
fn auto_picks_the_fastest_available() {
    let Some(ctx) = device("auto_picks_the_fastest_available") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    // 16x16: Auto leaves it to WMMA (measured faster; the Auto policy, cpp/spmm/operation.hpp).
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
            Backend::Hopper
        } else {
            Backend::Wmma
        };
        assert_eq!(got, want, "block {bs}");
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
    for backend in [Backend::Wmma, Backend::Hopper] {
        if backend == Backend::Hopper && !is_hopper(&ctx) {
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
        &SpmmOptions::new().backend(Backend::Hopper),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    // One message, one prefix: the family is named once.
    let msg = e.to_string();
    assert_eq!(msg.matches("hopper").count(), 1, "{msg}");
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

/// The fused epilogue on every GPU family that runs the problem, against the f64 oracle.
#[test]
fn epilogue_on_every_family() {
    let Some(ctx) = device("epilogue_on_every_family") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut families = vec![Backend::Wmma, Backend::Decode];
    if is_hopper(&ctx) {
        families.push(Backend::Hopper);
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
                b_layout: if backend == Backend::Hopper {
                    [Layout::ColMajor, Layout::ColMajor, Layout::RowMajor][j]
                } else {
                    common::layouts()[(i + j) % 2]
                },
                c_layout: if backend == Backend::Hopper {
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
                (1, Backend::Hopper) => check_case::<bf16, bf16>(&ctx, &case, &mut rng),
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
