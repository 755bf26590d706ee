//! GPU tests of FP8 as a dtype of the one product (`--features full`): on device operands
//! the unified entry points (`spmm_fused` / `spmm` with an FP8 `DeviceBsr`,
//! `gpu::can_implement`, `SparseLinear::new_device` / `forward` / `forward_scaled`,
//! `SparseMlp::forward`) launch what the deprecated names (`spmm_fp8`, `can_implement_fp8`,
//! `new_fp8_device` / `forward_fp8`) launch, bit for bit, W8A16 (Decode) everywhere and W8A8
//! (Hopper) on sm_90; the bias-type rule's refusal launches nothing. Without a GPU each test
//! says SKIPPED on stderr and returns.
#![cfg(feature = "full")]
#![allow(deprecated)]

mod common;

use std::sync::Arc;

use common::fp8::{make, quantize_per_token, random_e4m3_weight, Attach, BOperand, Case};
use common::{device, download, is_hopper, random_vec, seed, upload, PatternKind};
use cudarc::driver::CudaContext;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, gpu, spmm, spmm_fp8, spmm_fused, Activation, BlockMask, BlockShape, BsrMatrix,
    ColumnScales, DType, Dense, DenseMut, DeviceBsr, Element, Epilogue, Error, Fp8, Layout,
    QuantizedBsr, ScaleKind, SparseLinear, SparseMlp, SpmmOptions, TakesB, TakesBias, Vector,
    F8E4M3, F8E5M2,
};

fn same_bits<T: Element>(x: &[T], y: &[T]) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|(a, b)| a.to_f32().to_bits() == b.to_f32().to_bits())
}

/// One case on the device through `spmm_fused` (and `spmm` without epilogue) and through
/// `spmm_fp8`: the same backend chosen (`gpu::can_implement` and `can_implement_fp8`) and
/// the same bits.
fn same_as_spmm_fp8<Q, TB, O>(ctx: &Arc<CudaContext>, case: &Case, rng: &mut StdRng)
where
    Q: Fp8 + TakesB<TB> + TakesBias<O>,
    TB: BOperand,
    O: Element,
{
    let stream = ctx.default_stream();
    let d = make::<Q, TB, O>(case, rng);
    let (m, k, n) = d.dims();
    let what = format!("{case:?} {}/{}/{}", Q::DTYPE, TB::DTYPE, O::DTYPE);
    let q = QuantizedBsr::new(d.a.clone(), d.a_scales.clone()).unwrap();
    let da = DeviceBsr::upload_quantized(&q, &stream).unwrap();
    let (db, dbs, dbias) = (
        upload(&stream, &d.b),
        upload(&stream, &d.b_scales),
        upload(&stream, &d.bias),
    );
    let opts = SpmmOptions::new().alpha(case.alpha).beta(case.beta);
    let b = || {
        Dense::device(&db, k, n, case.b_layout)
            .with_ld(d.b_shape.ld)
            .attach(d.column_scales(Vector::Device(&dbs)))
    };
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Device(&dbias));
    }
    let (mut c_new, mut c_old) = (upload(&stream, &d.c0), upload(&stream, &d.c0));
    {
        let c = DenseMut::device(&mut c_new, m, n, case.c_layout).with_ld(d.c_shape.ld);
        let chosen = gpu::can_implement(&da, &b(), &c, &opts).unwrap();
        let before = gpu::can_implement_fp8(&da, &b(), &c, &opts).unwrap();
        assert_eq!(chosen, before, "{what}: can_implement");
    }
    spmm_fused(
        &da,
        b(),
        DenseMut::device(&mut c_new, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &opts,
    )
    .unwrap_or_else(|e| panic!("{what}: spmm_fused: {e}"));
    spmm_fp8(
        &da,
        b(),
        DenseMut::device(&mut c_old, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &opts,
    )
    .unwrap_or_else(|e| panic!("{what}: spmm_fp8: {e}"));
    let (new, old) = (download(&stream, &c_new), download(&stream, &c_old));
    assert!(same_bits(&new, &old), "{what}: spmm_fused != spmm_fp8");
    // No epilogue: spmm against spmm_fp8 with the identity epilogue.
    let (mut p_new, mut p_old) = (upload(&stream, &d.c0), upload(&stream, &d.c0));
    spmm(
        &da,
        b(),
        DenseMut::device(&mut p_new, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &opts,
    )
    .unwrap();
    spmm_fp8(
        &da,
        b(),
        DenseMut::device(&mut p_old, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &Epilogue::new(),
        &opts,
    )
    .unwrap();
    assert!(
        same_bits(&download(&stream, &p_new), &download(&stream, &p_old)),
        "{what}: spmm != spmm_fp8"
    );
}

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::GeluTanh,
    Activation::Silu,
];

/// W8A16 (the Decode family) on every device; W8A8 (the Hopper family: 128x128 blocks, B
/// column-major) and W8A16 of 64 columns and more (Hopper's W8A16 rows) on sm_90.
#[test]
fn fp8_device_products_match_spmm_fp8_bitwise() {
    let test = "fp8_device_products_match_spmm_fp8_bitwise";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut count = 0;
    for i in 0..8 {
        let mut c = Case::new(4, 3 + i % 2, BlockShape::new(64, 64), [1, 7, 16, 33][i % 4]);
        c.kind = PatternKind::Random(0.6);
        c.b_layout = Layout::ColMajor;
        c.c_layout = common::layouts()[i % 2];
        (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][i % 4];
        c.bias = i % 3 != 0;
        c.activation = ACTS[i % 4];
        c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor][i % 2];
        c.b_scale = ScaleKind::None;
        match i % 4 {
            0 => same_as_spmm_fp8::<F8E4M3, f16, f32>(&ctx, &c, &mut rng),
            1 => same_as_spmm_fp8::<F8E4M3, bf16, bf16>(&ctx, &c, &mut rng),
            2 => same_as_spmm_fp8::<F8E5M2, f16, f16>(&ctx, &c, &mut rng),
            _ => same_as_spmm_fp8::<F8E5M2, bf16, f32>(&ctx, &c, &mut rng),
        }
        count += 1;
    }
    if is_hopper(&ctx) {
        for i in 0..6 {
            let mut c = Case::new(2, 3, BlockShape::new(128, 128), [64, 128, 256][i % 3]);
            c.kind = PatternKind::Random(0.6);
            c.b_layout = Layout::ColMajor;
            c.c_layout = common::layouts()[i % 2];
            (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (2.0, 0.0)][i % 3];
            c.bias = i % 2 == 0;
            c.activation = ACTS[i % 4];
            c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][i % 3];
            c.b_scale = [ScaleKind::PerColumn, ScaleKind::PerTensor][i % 2];
            match i % 3 {
                0 => same_as_spmm_fp8::<F8E4M3, F8E4M3, f32>(&ctx, &c, &mut rng),
                1 => same_as_spmm_fp8::<F8E4M3, F8E4M3, f16>(&ctx, &c, &mut rng),
                _ => same_as_spmm_fp8::<F8E5M2, F8E5M2, bf16>(&ctx, &c, &mut rng),
            }
            count += 1;
        }
        // W8A16 from 64 columns: the Hopper family's W8A16 rows (e4m3 A, f16 B).
        for (i, n) in [64usize, 200].into_iter().enumerate() {
            let mut c = Case::new(3, 2, BlockShape::new(128, 128), n);
            c.kind = PatternKind::Random(0.6);
            c.b_layout = Layout::ColMajor;
            c.c_layout = common::layouts()[i % 2];
            c.bias = i == 0;
            c.activation = ACTS[i + 1];
            c.a_scale = ScaleKind::PerBlock;
            c.b_scale = ScaleKind::None;
            if i == 0 {
                same_as_spmm_fp8::<F8E4M3, f16, f16>(&ctx, &c, &mut rng);
            } else {
                same_as_spmm_fp8::<F8E4M3, f16, f32>(&ctx, &c, &mut rng);
            }
            count += 1;
        }
    }
    println!("{test}: {count} cases bitwise");
}

/// The bias has C's type with an FP8 A: a device bias of another type is `OperandTypes`,
/// nothing launched, C untouched.
#[test]
fn fp8_device_bias_of_another_type_is_refused() {
    let test = "fp8_device_bias_of_another_type_is_refused";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (m, k, n) = (128, 256, 8);
    let q = random_e4m3_weight(m, k, 64, 0.5, &mut rng);
    let da = DeviceBsr::upload_quantized(&q, &stream).unwrap();
    let db = upload(&stream, &random_vec::<f16>(k * n, &mut rng));
    let c0 = vec![7.0f32; m * n];
    let mut dc = upload(&stream, &c0);
    let dbias = upload(&stream, &random_vec::<f16>(m, &mut rng));
    let e = spmm_fused(
        &da,
        Dense::device(&db, k, n, Layout::ColMajor),
        DenseMut::device(&mut dc, m, n, Layout::ColMajor),
        &Epilogue::new().bias(Vector::Device(&dbias)),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::OperandTypes {
                bias: Some(DType::F16),
                c: DType::F32,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        same_bits(&download(&stream, &dc), &c0),
        "C written by a refused call"
    );
    println!("{test}: passed");
}

/// `SparseLinear::new_device` / `forward` (W8A16) / `forward_scaled` (W8A8, sm_90) on FP8
/// weights: the bits of `new_fp8_device` / `forward_fp8`.
#[test]
fn sparse_linear_device_one_forward_for_every_weight() {
    let test = "sparse_linear_device_one_forward_for_every_weight";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (out_f, in_f, batch) = (512, 1024, 24);
    let q = random_e4m3_weight(out_f, in_f, 128, 0.5, &mut rng);
    let bias = random_vec::<f32>(out_f, &mut rng);
    let new = SparseLinear::new_device(
        DeviceBsr::upload_quantized(&q, &stream).unwrap(),
        Some(upload(&stream, &bias)),
        Activation::GeluTanh,
    )
    .unwrap();
    let old = SparseLinear::new_fp8_device(
        DeviceBsr::upload_quantized(&q, &stream).unwrap(),
        Some(upload(&stream, &bias)),
        Activation::GeluTanh,
    )
    .unwrap();
    let x = random_vec::<f32>(batch * in_f, &mut rng);
    let y0 = vec![f32::NAN; batch * out_f];
    // W8A16.
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let dxb = upload(&stream, &xb);
    let (mut y_new, mut y_old) = (upload(&stream, &y0), upload(&stream, &y0));
    new.forward(&dxb, batch, &mut y_new).unwrap();
    old.forward_fp8(&dxb, ColumnScales::None, batch, &mut y_old)
        .unwrap();
    let got = download(&stream, &y_new);
    assert!(got.iter().all(|v| v.is_finite()), "W8A16: y unwritten");
    assert!(
        same_bits(&got, &download(&stream, &y_old)),
        "W8A16: forward != forward_fp8"
    );
    // W8A8: x quantized per token.
    if is_hopper(&ctx) {
        let xq = quantize_per_token(&x, in_f, batch);
        let (dx, ds) = (upload(&stream, xq.values()), upload(&stream, xq.scales()));
        let scales = ColumnScales::PerColumn(Vector::Device(&ds));
        let (mut y_new, mut y_old) = (upload(&stream, &y0), upload(&stream, &y0));
        new.forward_scaled(&dx, scales, batch, &mut y_new).unwrap();
        old.forward_fp8(&dx, scales, batch, &mut y_old).unwrap();
        let got = download(&stream, &y_new);
        assert!(got.iter().all(|v| v.is_finite()), "W8A8: y unwritten");
        assert!(
            same_bits(&got, &download(&stream, &y_old)),
            "W8A8: forward_scaled != forward_fp8"
        );
    }
    println!("{test}: passed");
}

/// `SparseMlp::new` and the device `forward` on FP8 weights (W8A16): h and y bit for bit
/// `forward_fp8`'s.
#[test]
fn sparse_mlp_device_one_forward_for_every_weight() {
    let test = "sparse_mlp_device_one_forward_for_every_weight";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter, gb) = (512, 1024, 128);
    let blk = BlockShape::new(gb, gb);
    let w = |rows, cols, rng: &mut StdRng| {
        let mask = BlockMask::random(rows / gb, cols / gb, 0.5, rng).unwrap();
        BsrMatrix::from_block_mask(&mask, blk, |_, _| rng.random_range(-2.0f32..2.0)).unwrap()
    };
    let q = |m: &BsrMatrix<f32>| {
        m.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap()
    };
    let (gq, uq, dq) = (
        q(&w(inter, hidden, &mut rng)),
        q(&w(inter, hidden, &mut rng)),
        q(&w(hidden, inter, &mut rng)),
    );
    let dev = SparseMlp::new(&gq, &uq, dq, Activation::Silu)
        .unwrap()
        .upload(&stream)
        .unwrap();
    for batch in [1usize, 16] {
        let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
        let dx = upload(&stream, &x);
        let (h0, y0) = (
            vec![f16::NAN; batch * inter],
            vec![f32::NAN; batch * hidden],
        );
        let (mut h1, mut y1) = (upload(&stream, &h0), upload(&stream, &y0));
        let (mut h2, mut y2) = (upload(&stream, &h0), upload(&stream, &y0));
        dev.forward(&dx, batch, &mut h1, &mut y1).unwrap();
        dev.forward_fp8(&dx, batch, &mut h2, &mut y2).unwrap();
        let (h1, y1) = (download(&stream, &h1), download(&stream, &y1));
        assert!(
            y1.iter().all(|v| v.is_finite()),
            "batch {batch}: y unwritten"
        );
        assert!(
            same_bits(&h1, &download(&stream, &h2)),
            "batch {batch}: h differs"
        );
        assert!(
            same_bits(&y1, &download(&stream, &y2)),
            "batch {batch}: y differs"
        );
    }
    println!("{test}: passed");
}
