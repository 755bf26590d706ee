//! FP8 as a dtype of the one `spmm`: the unified entry points (`spmm`, `spmm_fused`,
//! `dense_spmm`, `SparseLinear::new` / `forward` / `forward_scaled`, `SparseMlp::new` /
//! `forward`) on f16, bf16, W8A16 and W8A8 host operands (CPU backend) against the f64
//! oracle, each FP8 call equal bit for bit to its deprecated alias (`spmm_fp8`,
//! `new_fp8` / `forward_fp8`), and the bias-type rule's typed refusal (C untouched).
#![allow(deprecated)]

mod common;

use common::fp8::{make, tolerance, Attach, BOperand, Case};
use common::{act64, rel_err, seed, PatternKind};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedBsr, QuantizedDense};
use sparsek::{
    bf16, dense_spmm, f16, spmm, spmm_fp8, spmm_fused, Activation, BlockScales, BlockShape,
    BsrMatrix, BsrOperand, ColumnScales, DType, Dense, DenseMut, DenseShape, Element, Epilogue,
    Error, Fp8, Fp8Operand, Layout, ScaleKind, SparseLinear, SparseMlp, SpmmOptions, TakesB,
    TakesBias, Vector, F8E4M3, F8E5M2,
};

/// Whether two outputs hold the same bits.
fn same_bits<O: Element>(x: &[O], y: &[O]) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|(a, b)| a.to_f32().to_bits() == b.to_f32().to_bits())
}

// ---------------------------------------------------------------------------------------
// f16 / bf16: the unified entry as it always was.

/// `spmm_fused` on a 16-bit A (its B and bias of A's type, inferred from A) against the f64
/// oracle, and the same A passed with no scales (`BsrOperand::Scaled`, `BlockScales::None`)
/// bit for bit.
fn run_16bit<T: Element, O: Element>(rng: &mut StdRng, out: DType) {
    let (block, n) = (BlockShape::new(32, 16), 24);
    let a: BsrMatrix<T> = common::random_bsr(PatternKind::Random(0.5), 4, 5, block, rng);
    let (m, k) = (a.m(), a.k());
    let b = common::random_vec(k * n, rng);
    let bias = common::random_vec(m, rng);
    let c0: Vec<O> = common::random_vec(m * n, rng);
    let (alpha, beta) = (1.5f32, 0.5f32);
    let opts = SpmmOptions::new().alpha(alpha).beta(beta);
    let epi = Epilogue::new()
        .bias(Vector::Host(&bias))
        .activation(Activation::Silu);
    let mut c = c0.clone();
    spmm_fused(
        &a,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c, m, n, Layout::ColMajor),
        &epi,
        &opts,
    )
    .unwrap();
    let c_shape = DenseShape::packed(m, n, Layout::ColMajor);
    let prod = common::reference(
        &a,
        &b,
        &DenseShape::packed(k, n, Layout::RowMajor),
        &c0,
        &c_shape,
        alpha,
        beta,
    );
    let want: Vec<f64> = prod
        .iter()
        .enumerate()
        .map(|(idx, v)| act64(Activation::Silu, v + bias[idx / n].to_f32() as f64))
        .collect();
    let (err, bad) = rel_err(&c, &c_shape, &want);
    let tol = common::tolerance(T::DTYPE, out);
    assert!(
        bad == 0 && err <= tol,
        "{} -> {out}: {err:.2e} ({bad} bad)",
        T::DTYPE
    );
    let mut c2 = c0.clone();
    spmm_fused(
        BsrOperand::Scaled(&a, &BlockScales::None),
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c2, m, n, Layout::ColMajor),
        &epi,
        &opts,
    )
    .unwrap();
    assert!(same_bits(&c, &c2), "{}: Scaled(None) differs", T::DTYPE);
    // Scales on a 16-bit A: refused, C untouched.
    let e = spmm(
        BsrOperand::Scaled(&a, &BlockScales::PerTensor(2.0)),
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c2, m, n, Layout::ColMajor),
        &opts,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::ScalesNotTaken { operand: "A", .. }),
        "{e}"
    );
    assert!(
        same_bits(&c, &c2),
        "{}: C written by a refused call",
        T::DTYPE
    );
}

#[test]
fn unified_spmm_takes_f16_and_bf16_as_before() {
    let mut rng = StdRng::seed_from_u64(seed());
    run_16bit::<f16, f32>(&mut rng, DType::F32);
    run_16bit::<f16, f16>(&mut rng, DType::F16);
    run_16bit::<bf16, f32>(&mut rng, DType::F32);
    run_16bit::<bf16, bf16>(&mut rng, DType::Bf16);
}

// ---------------------------------------------------------------------------------------
// FP8: spmm / spmm_fused with scaled operands, bit for bit the deprecated spmm_fp8.

/// One FP8 case through `spmm_fused` (A a `QuantizedBsr`, or a matrix with its scales),
/// `spmm` (no epilogue) and `spmm_fp8`: the unified calls equal the alias bit for bit, and
/// the result is within the oracle's tolerance.
fn run_fp8<Q, TB, O>(case: &Case, rng: &mut StdRng)
where
    // Generic code names the pairs the unified entry takes (FP8 A: its B, C's bias).
    Q: Fp8 + TakesB<TB> + TakesBias<O>,
    TB: BOperand,
    O: Element,
{
    let d = make::<Q, TB, O>(case, rng);
    let (m, k, n) = d.dims();
    let q = QuantizedBsr::new(d.a.clone(), d.a_scales.clone()).unwrap();
    let opts = SpmmOptions::new().alpha(case.alpha).beta(case.beta);
    let b = || {
        Dense::host(&d.b, k, n, case.b_layout)
            .with_ld(d.b_shape.ld)
            .attach(d.column_scales(Vector::Host(&d.b_scales)))
    };
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Host(&d.bias));
    }
    let what = format!("{case:?} {}/{}/{}", Q::DTYPE, TB::DTYPE, O::DTYPE);

    let mut old = d.c0.clone();
    spmm_fp8(
        Fp8Operand::Host(&d.a, &d.a_scales),
        b(),
        DenseMut::host(&mut old, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &opts,
    )
    .unwrap_or_else(|e| panic!("{what}: spmm_fp8: {e}"));
    let (err, bad) = rel_err(&old, &d.c_shape, &d.want);
    let tol = if O::DTYPE == DType::F32 {
        1e-5
    } else {
        tolerance(O::DTYPE)
    };
    assert!(bad == 0 && err <= tol, "{what}: {err:.2e} ({bad} bad)");

    let mut new = d.c0.clone();
    spmm_fused(
        &q,
        b(),
        DenseMut::host(&mut new, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &opts,
    )
    .unwrap_or_else(|e| panic!("{what}: spmm_fused: {e}"));
    assert!(same_bits(&new, &old), "{what}: spmm_fused != spmm_fp8");

    let mut new = d.c0.clone();
    spmm_fused(
        BsrOperand::Scaled(&d.a, &d.a_scales),
        b(),
        DenseMut::host(&mut new, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &opts,
    )
    .unwrap_or_else(|e| panic!("{what}: spmm_fused (Scaled): {e}"));
    assert!(same_bits(&new, &old), "{what}: Scaled != spmm_fp8");

    // No epilogue: spmm against spmm_fp8 with the identity epilogue.
    let (mut plain_old, mut plain_new) = (d.c0.clone(), d.c0.clone());
    spmm_fp8(
        &q,
        b(),
        DenseMut::host(&mut plain_old, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &Epilogue::new(),
        &opts,
    )
    .unwrap();
    spmm(
        &q,
        b(),
        DenseMut::host(&mut plain_new, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &opts,
    )
    .unwrap();
    assert!(
        same_bits(&plain_new, &plain_old),
        "{what}: spmm != spmm_fp8"
    );
}

#[test]
fn unified_spmm_takes_fp8_bit_for_bit_as_spmm_fp8() {
    let mut rng = StdRng::seed_from_u64(seed());
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::GeluTanh,
        Activation::Silu,
    ];
    for i in 0..16 {
        let block = [BlockShape::new(16, 32), BlockShape::new(32, 32)][i % 2];
        let mut c = Case::new(4 + i % 3, 3 + i % 2, block, [1, 7, 16, 33][i % 4]);
        c.b_layout = common::layouts()[(i / 2) % 2];
        c.c_layout = common::layouts()[(i / 4) % 2];
        (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][i % 4];
        c.ld_pad = [0, 3][(i / 3) % 2];
        c.bias = i % 3 != 0;
        c.activation = acts[(i / 2) % 4];
        c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][i % 3];
        c.b_scale = [ScaleKind::PerColumn, ScaleKind::PerTensor, ScaleKind::None][(i / 3) % 3];
        match i % 8 {
            // W8A8
            0 => run_fp8::<F8E4M3, F8E4M3, f32>(&c, &mut rng),
            1 => run_fp8::<F8E4M3, F8E4M3, bf16>(&c, &mut rng),
            2 => run_fp8::<F8E5M2, F8E5M2, f16>(&c, &mut rng),
            3 => run_fp8::<F8E5M2, F8E5M2, f32>(&c, &mut rng),
            // W8A16
            4 => run_fp8::<F8E4M3, f16, f32>(&c, &mut rng),
            5 => run_fp8::<F8E4M3, bf16, bf16>(&c, &mut rng),
            6 => run_fp8::<F8E5M2, f16, f16>(&c, &mut rng),
            _ => run_fp8::<F8E5M2, bf16, f32>(&c, &mut rng),
        }
    }
}

/// `dense_spmm` with an FP8 A: `y = x·Wᵀ` as `D·op(A)` with `op(A) = Aᵀ` runs the product
/// `W·xᵀ` (op(A) = A), bit for bit the layer's.
#[test]
fn dense_spmm_takes_a_quantized_weight() {
    let mut rng = StdRng::seed_from_u64(seed());
    let w: BsrMatrix<f32> = common::random_bsr(
        PatternKind::Random(0.5),
        3,
        4,
        BlockShape::new(32, 16),
        &mut rng,
    );
    let wq = w
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap();
    let (out_f, in_f, batch) = (w.m(), w.k(), 5);
    let x: Vec<bf16> = common::random_vec(batch * in_f, &mut rng);
    let mut y = vec![f32::NAN; batch * out_f];
    dense_spmm(
        Dense::host(&x, batch, in_f, Layout::RowMajor),
        &wq,
        DenseMut::host(&mut y, batch, out_f, Layout::RowMajor),
        &SpmmOptions::new().transpose_a(true),
    )
    .unwrap();
    let layer = SparseLinear::new(wq.clone(), None::<Vec<f32>>, Activation::None).unwrap();
    let mut y2 = vec![f32::NAN; batch * out_f];
    layer.forward(&x, batch, &mut y2).unwrap();
    assert!(same_bits(&y, &y2), "dense_spmm != SparseLinear::forward");
    // op(A) = A would be D·W, i.e. op(A) = Aᵀ inside: FP8 takes no Aᵀ.
    let mut y3 = vec![f32::NAN; batch * in_f];
    let xo: Vec<bf16> = common::random_vec(batch * out_f, &mut rng);
    let e = dense_spmm(
        Dense::host(&xo, batch, out_f, Layout::RowMajor),
        &wq,
        DenseMut::host(&mut y3, batch, in_f, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    assert!(y3.iter().all(|v| v.is_nan()), "C written by a refused call");
}

// ---------------------------------------------------------------------------------------
// The bias's type.

/// The bias has the type of A's values: C's for an FP8 A. Another type is a typed error
/// found before anything runs (C untouched); an FP8 matrix without its scales is refused as
/// before (`UnsupportedTypes`).
#[test]
fn the_bias_type_rule_is_a_typed_error() {
    let mut rng = StdRng::seed_from_u64(seed());
    let w: BsrMatrix<f32> =
        common::random_bsr(PatternKind::Full, 2, 2, BlockShape::new(16, 16), &mut rng);
    let wq = w
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerTensor)
        .unwrap();
    let (m, k, n) = (w.m(), w.k(), 3);
    let b: Vec<f16> = common::random_vec(k * n, &mut rng);
    let c0 = vec![f32::NAN; m * n];
    let untouched = |c: &[f32]| c.iter().all(|v| v.is_nan());

    // A bias of f16 with C f32: the bias must be C's (f32).
    let bias16: Vec<f16> = common::random_vec(m, &mut rng);
    let mut c = c0.clone();
    let e = spmm_fused(
        &wq,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c, m, n, Layout::RowMajor),
        &Epilogue::new().bias(Vector::Host(&bias16)),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::OperandTypes {
                a: DType::E4M3,
                c: DType::F32,
                bias: Some(DType::F16),
                ..
            }
        ),
        "{e}"
    );
    assert!(untouched(&c), "C written by a refused call");
    assert!(e.to_string().contains("bias"), "{e}");

    // A bias of A's own FP8 type (it compiles for code generic over Element): refused.
    let bias8: Vec<F8E4M3> = common::random_vec(m, &mut rng);
    let e = spmm_fused(
        &wq,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c, m, n, Layout::RowMajor),
        &Epilogue::new().bias(Vector::Host(&bias8)),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::OperandTypes {
                bias: Some(DType::E4M3),
                ..
            }
        ),
        "{e}"
    );
    assert!(untouched(&c), "C written by a refused call");

    // The bias of C's type runs, as spmm_fp8's did.
    let bias32: Vec<f32> = common::random_vec(m, &mut rng);
    let mut c_old = c0.clone();
    spmm_fused(
        &wq,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c, m, n, Layout::RowMajor),
        &Epilogue::new().bias(Vector::Host(&bias32)),
        &SpmmOptions::new(),
    )
    .unwrap();
    spmm_fp8(
        &wq,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c_old, m, n, Layout::RowMajor),
        &Epilogue::new().bias(Vector::Host(&bias32)),
        &SpmmOptions::new(),
    )
    .unwrap();
    assert!(same_bits(&c, &c_old));

    // An FP8 matrix without its scales: refused as before, C untouched.
    let mut c = c0.clone();
    let e = spmm(
        wq.matrix(),
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c, m, n, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::UnsupportedTypes {
                input: DType::E4M3,
                ..
            }
        ),
        "{e}"
    );
    assert!(untouched(&c), "C written by a refused call");

    // An FP8 C of a 16-bit product: UnsupportedTypes, as before.
    let a16: BsrMatrix<f16> =
        common::random_bsr(PatternKind::Full, 2, 2, BlockShape::new(16, 16), &mut rng);
    let mut c8 = vec![F8E5M2::from_f32(3.0); m * n];
    let e = spmm(
        &a16,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c8, m, n, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "{e}");
    assert!(c8.iter().all(|v| v.to_f32() == 3.0));
}

// ---------------------------------------------------------------------------------------
// The layers.

/// `SparseLinear::new` / `forward` / `forward_scaled` on FP8 weights, bit for bit
/// `new_fp8` / `forward_fp8` (W8A16 and W8A8), within tolerance of f64; and a bias of
/// another type than y's refused before anything is written.
#[test]
fn sparse_linear_one_forward_for_every_weight() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (out_f, in_f, batch) = (64, 96, 5);
    let w: BsrMatrix<f32> = common::random_bsr(
        PatternKind::Random(0.5),
        2,
        3,
        BlockShape::new(32, 32),
        &mut rng,
    );
    let wq = w
        .quantize_fp8::<F8E5M2>(BlockGranularity::PerBlock)
        .unwrap();
    let bias: Vec<bf16> = common::random_vec(out_f, &mut rng);
    let new = SparseLinear::new(wq.clone(), Some(bias.clone()), Activation::GeluTanh).unwrap();
    let old = SparseLinear::new_fp8(wq.clone(), Some(bias.clone()), Activation::GeluTanh).unwrap();

    // W8A16.
    let x: Vec<f16> = common::random_vec(batch * in_f, &mut rng);
    let (mut y_new, mut y_old) = (
        vec![bf16::NAN; batch * out_f],
        vec![bf16::NAN; batch * out_f],
    );
    new.forward(&x, batch, &mut y_new).unwrap();
    old.forward_fp8(&x, ColumnScales::None, batch, &mut y_old)
        .unwrap();
    assert!(same_bits(&y_new, &y_old), "W8A16: forward != forward_fp8");
    let wd = wq.dequantize().unwrap().to_dense().unwrap();
    let want: Vec<f64> = (0..batch * out_f)
        .map(|idx| {
            let (bt, o) = (idx / out_f, idx % out_f);
            let dot: f64 = (0..in_f)
                .map(|i| wd[o * in_f + i] as f64 * x[bt * in_f + i].to_f32() as f64)
                .sum();
            act64(Activation::GeluTanh, dot + bias[o].to_f32() as f64)
        })
        .collect();
    let yshape = DenseShape::packed(batch, out_f, Layout::RowMajor);
    let (err, bad) = rel_err(&y_new, &yshape, &want);
    assert!(bad == 0 && err < 1e-2, "W8A16: {err} ({bad} bad)");

    // W8A8: x quantized per token, its scales given with forward_scaled.
    let xf: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    let xq = QuantizedDense::<F8E5M2>::quantize(
        &xf,
        DenseShape::packed(in_f, batch, Layout::ColMajor),
        ColumnGranularity::PerColumn,
    )
    .unwrap();
    new.forward_scaled(xq.values(), xq.column_scales(), batch, &mut y_new)
        .unwrap();
    old.forward_fp8(xq.values(), xq.column_scales(), batch, &mut y_old)
        .unwrap();
    assert!(
        same_bits(&y_new, &y_old),
        "W8A8: forward_scaled != forward_fp8"
    );

    // A y of another type than the bias's: the bias must be C's (y's).
    let mut y32 = vec![f32::NAN; batch * out_f];
    let e = new.forward(&x, batch, &mut y32).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OperandTypes {
                bias: Some(DType::Bf16),
                c: DType::F32,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        y32.iter().all(|v| v.is_nan()),
        "y written by a refused call"
    );
    // Without a bias, any y type the product takes.
    let plain = SparseLinear::new(wq, None::<Vec<f32>>, Activation::None).unwrap();
    plain.forward(&x, batch, &mut y32).unwrap();
    assert!(y32.iter().all(|v| v.is_finite()));

    // f16 weights: new / forward as before, forward_scaled without scales the same bits.
    let w16: BsrMatrix<f16> = common::random_bsr(
        PatternKind::Random(0.5),
        2,
        3,
        BlockShape::new(32, 32),
        &mut rng,
    );
    let layer = SparseLinear::new(w16, None, Activation::Relu).unwrap();
    let (mut y1, mut y2) = (vec![0f32; batch * out_f], vec![0f32; batch * out_f]);
    layer.forward(&x, batch, &mut y1).unwrap();
    layer
        .forward_scaled(&x, ColumnScales::None, batch, &mut y2)
        .unwrap();
    assert!(same_bits(&y1, &y2));
    let e = layer
        .forward_scaled(&x, xq.column_scales(), batch, &mut y2)
        .unwrap_err();
    assert!(
        matches!(e, Error::ScalesNotTaken { operand: "B", .. }),
        "{e}"
    );
}

/// `SparseMlp::new` and `forward` on FP8 weights: h and y bit for bit `new_fp8` /
/// `forward_fp8`'s.
#[test]
fn sparse_mlp_one_forward_for_every_weight() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter, batch) = (64, 96, 3);
    let (gb, db) = (BlockShape::new(16, 32), BlockShape::new(32, 16));
    let weight = |r: usize, c: usize, b: BlockShape, rng: &mut StdRng| -> BsrMatrix<f32> {
        common::random_bsr(PatternKind::Random(0.6), r, c, b, rng)
    };
    let g = weight(inter / 16, hidden / 32, gb, &mut rng);
    let u = weight(inter / 16, hidden / 32, gb, &mut rng);
    let d = weight(hidden / 32, inter / 16, db, &mut rng);
    let (gq, uq, dq) = (
        g.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap(),
        u.quantize_fp8::<F8E4M3>(BlockGranularity::PerTensor)
            .unwrap(),
        d.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap(),
    );
    let new = SparseMlp::new(&gq, &uq, dq.clone(), Activation::Silu).unwrap();
    let old = SparseMlp::new_fp8(&gq, &uq, dq, Activation::Silu).unwrap();
    let x: Vec<bf16> = common::random_vec(batch * hidden, &mut rng);
    let (mut h1, mut y1) = (
        vec![bf16::NAN; batch * inter],
        vec![f32::NAN; batch * hidden],
    );
    let (mut h2, mut y2) = (h1.clone(), y1.clone());
    new.forward(&x, batch, &mut h1, &mut y1).unwrap();
    old.forward_fp8(&x, batch, &mut h2, &mut y2).unwrap();
    assert!(same_bits(&h1, &h2), "h: forward != forward_fp8");
    assert!(same_bits(&y1, &y2), "y: forward != forward_fp8");
    assert!(y1.iter().all(|v| v.is_finite()));
    // An FP8 y: the down product's Fp8Types, h and y untouched.
    let y0 = vec![F8E4M3::from_f32(2.0); batch * hidden];
    let (mut h3, mut y3) = (vec![bf16::NAN; batch * inter], y0.clone());
    let e = new.forward(&x, batch, &mut h3, &mut y3).unwrap_err();
    assert!(matches!(e, Error::Fp8Types { .. }), "{e}");
    assert!(h3.iter().all(|v| v.is_nan()) && same_bits(&y3, &y0));
}
