//! FP8 on the host: the quantizers' error bound and scales (property tests), the CPU
//! reference of `spmm_fp8` against the f64 oracle (W8A8 and W8A16, every scale kind, f16 /
//! bf16 / f32 out, α/β, bias, activations, NaN-poisoned C, ld padding), the quantized
//! product against the unquantized one, `SparseLinear` with FP8 weights, and every typed
//! refusal (C untouched).
#![allow(deprecated)]

mod common;

use common::fp8::{make, quantize_per_token, tolerance, Attach, BOperand, Case};
use common::{outside_untouched, random_vec, rel_err, seed, PatternKind};
use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedBsr, QuantizedDense};
use sparsek::{
    bf16, f16, sddmm, spmm, spmm_fp8, Activation, Backend, BlockMask, BlockScales, BlockShape,
    BsrMatrix, ColumnScales, DType, Dense, DenseMut, DenseShape, Element, Epilogue, Error, Fp8,
    Fp8Operand, Layout, ScaleKind, SparseLinear, SpmmOptions, Vector, F8E4M3, F8E5M2,
};

// ---------------------------------------------------------------------------------------
// The quantizers.

/// Half the FP8 spacing at magnitude `x` (in units of the stored values): the subnormal
/// spacing below the smallest normal, the binade's above (the top binade's past MAX).
fn half_ulp<Q: Fp8>(x: f64) -> f64 {
    if x < Q::MIN_POSITIVE as f64 {
        return Q::MIN_SUBNORMAL as f64 / 2.0;
    }
    let e = x.min(Q::MAX as f64).log2().floor();
    (e - Q::MANTISSA_BITS as f64).exp2() / 2.0
}

/// Every value of `v` against its dequantized `q * s`: within half an FP8 spacing of
/// `v / s` (scaled back), i.e. a relative error of at most 2^-(mantissa bits + 1) in the
/// normal range; plus the f32 roundings of `v / s` and `q * s`.
fn check_value<Q: Fp8>(v: f32, q: Q, s: f32) -> Result<(), String> {
    let (v, s64) = (v as f64, s as f64);
    let deq = (q.to_f32() * s) as f64;
    let x = (v / s64).abs();
    let bound = half_ulp::<Q>(x) * s64 * (1.0 + 1e-6) + v.abs() * 2f64.powi(-22);
    if (deq - v).abs() > bound {
        return Err(format!(
            "{v} quantized to {} * {s} = {deq}: error {} above {bound}",
            q.to_f32(),
            (deq - v).abs()
        ));
    }
    if x >= Q::MIN_POSITIVE as f64 {
        let rel = 2f64.powi(-(Q::MANTISSA_BITS as i32) - 1) * (1.0 + 1e-5);
        if (deq - v).abs() > v.abs() * rel {
            return Err(format!("{v} -> {deq}: relative error above {rel}"));
        }
    }
    Ok(())
}

fn check_scale(s: f32) -> Result<(), String> {
    if !(s.is_normal() && s > 0.0) {
        return Err(format!("scale {s} is not positive, finite and normal"));
    }
    Ok(())
}

/// A part's largest magnitude lands on ±MAX (its scale is amax / MAX), unless the part is
/// all zeros (scale 1) or so small that the scale was raised to the smallest normal f32.
fn check_amax<Q: Fp8>(vals: &[f32], qs: &[Q], s: f32) -> Result<(), String> {
    let amax = vals.iter().fold(0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        return if s == 1.0 {
            Ok(())
        } else {
            Err(format!("an all-zero part has scale {s}, not 1"))
        };
    }
    if amax / Q::MAX < f32::MIN_POSITIVE {
        return Ok(());
    }
    let top = qs.iter().fold(0f32, |m, q| m.max(q.to_f32().abs()));
    if top != Q::MAX {
        return Err(format!(
            "the largest stored magnitude is {top}, not {}",
            Q::MAX
        ));
    }
    Ok(())
}

fn quantize_bsr_case<T: Element, Q: Fp8>(
    a: &BsrMatrix<T>,
    g: BlockGranularity,
) -> Result<(), String> {
    let q = a.quantize_fp8::<Q>(g).map_err(|e| e.to_string())?;
    if q.matrix().row_ptr() != a.row_ptr() || q.matrix().col_idx() != a.col_idx() {
        return Err("the pattern changed".into());
    }
    let blk = a.block().len();
    let vals: Vec<f32> = a.values().iter().map(|v| v.to_f32()).collect();
    match (g, q.scales()) {
        (BlockGranularity::PerTensor, BlockScales::PerTensor(s)) => {
            check_scale(*s)?;
            check_amax(&vals, q.matrix().values(), *s)?;
        }
        (BlockGranularity::PerBlock, BlockScales::PerBlock(v)) => {
            if v.len() != a.nnz_blocks() {
                return Err(format!("{} scales for {} blocks", v.len(), a.nnz_blocks()));
            }
            for (i, &s) in v.iter().enumerate() {
                check_scale(s)?;
                check_amax(
                    &vals[i * blk..][..blk],
                    &q.matrix().values()[i * blk..][..blk],
                    s,
                )?;
            }
        }
        (g, s) => return Err(format!("{g:?} gave {:?} scales", s.kind())),
    }
    for (i, (&v, &qv)) in vals.iter().zip(q.matrix().values()).enumerate() {
        let s = q.scales().of_block(i / blk).unwrap();
        check_value(v, qv, s)?;
    }
    // dequantize() is q * s, exactly as checked.
    let d = q.dequantize().map_err(|e| e.to_string())?;
    for (i, (&x, &qv)) in d.values().iter().zip(q.matrix().values()).enumerate() {
        let s = q.scales().of_block(i / blk).unwrap();
        if x.to_bits() != (qv.to_f32() * s).to_bits() {
            return Err(format!("dequantized value {i} is {x}"));
        }
    }
    Ok(())
}

fn quantize_dense_case<Q: Fp8>(
    data: &[f32],
    shape: DenseShape,
    g: ColumnGranularity,
) -> Result<(), String> {
    let q = QuantizedDense::<Q>::quantize(data, shape, g).map_err(|e| e.to_string())?;
    let packed = DenseShape::packed(shape.rows, shape.cols, shape.layout);
    if q.shape() != packed {
        return Err(format!("shape {:?}", q.shape()));
    }
    let scale = |j: usize| match g {
        ColumnGranularity::PerTensor => q.scales()[0],
        ColumnGranularity::PerColumn => q.scales()[j],
    };
    let want_scales = match g {
        ColumnGranularity::PerTensor => 1,
        ColumnGranularity::PerColumn => shape.cols,
    };
    if q.scales().len() != want_scales {
        return Err(format!("{} scales", q.scales().len()));
    }
    let deq = q.dequantize().map_err(|e| e.to_string())?;
    for j in 0..shape.cols {
        check_scale(scale(j))?;
        let col: Vec<f32> = (0..shape.rows)
            .map(|i| data[shape.layout.offset(i, j, shape.ld).unwrap()])
            .collect();
        let qcol: Vec<Q> = (0..shape.rows)
            .map(|i| q.values()[packed.layout.offset(i, j, packed.ld).unwrap()])
            .collect();
        if g == ColumnGranularity::PerColumn {
            check_amax(&col, &qcol, scale(j))?;
        }
        for i in 0..shape.rows {
            check_value(col[i], qcol[i], scale(j))?;
            let d = deq[packed.layout.offset(i, j, packed.ld).unwrap()];
            if d.to_bits() != (qcol[i].to_f32() * scale(j)).to_bits() {
                return Err(format!("dequantized ({i}, {j}) is {d}"));
            }
        }
    }
    if g == ColumnGranularity::PerTensor {
        let all: Vec<f32> = (0..shape.rows)
            .flat_map(|i| (0..shape.cols).map(move |j| (i, j)))
            .map(|(i, j)| data[shape.layout.offset(i, j, shape.ld).unwrap()])
            .collect();
        check_amax(&all, q.values(), q.scales()[0])?;
    }
    Ok(())
}

/// A random BSR matrix of values `u · 2^e` (u in ±[0, 1), some exact zeros, some zero
/// blocks), every binade from tiny to large.
fn bsr_values(
    br: usize,
    bc: usize,
    block: BlockShape,
    p: f64,
    e: i32,
    seed: u64,
) -> BsrMatrix<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mask = BlockMask::random(br, bc, p, &mut rng).unwrap();
    let zero_block = rng.random_range(0..4);
    let mut count = 0usize;
    let blk = block.len();
    BsrMatrix::from_block_mask(&mask, block, |_, _| {
        count += 1;
        if (count - 1) / blk == zero_block || rng.random_bool(0.05) {
            0.0
        } else {
            rng.random_range(-1.0f32..1.0) * 2f32.powi(e)
        }
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// BsrMatrix::quantize_fp8: error within half an FP8 spacing per element, scales
    /// positive and finite, each part's largest value on ±MAX, zero blocks scale 1, for
    /// f32 / f16 / bf16 inputs, both FP8 types, both granularities.
    #[test]
    fn quantize_bsr_error_bound(
        br in 0usize..5, bc in 0usize..5, bm in 1usize..9, bk in 1usize..9,
        p in 0.0f64..1.0, e in -30i32..30, seed in any::<u64>(),
    ) {
        let a = bsr_values(br, bc, BlockShape::new(bm, bk), p, e, seed);
        let a16: BsrMatrix<f16> = BsrMatrix::from_parts(a.m(), a.k(), a.block(), a.row_ptr().to_vec(),
            a.col_idx().to_vec(), a.values().iter().map(|&v| f16::from_f32(v.clamp(-6e4, 6e4))).collect()).unwrap();
        let ab: BsrMatrix<bf16> = BsrMatrix::from_parts(a.m(), a.k(), a.block(), a.row_ptr().to_vec(),
            a.col_idx().to_vec(), a.values().iter().map(|&v| bf16::from_f32(v)).collect()).unwrap();
        for g in [BlockGranularity::PerTensor, BlockGranularity::PerBlock] {
            prop_assert_eq!(quantize_bsr_case::<f32, F8E4M3>(&a, g), Ok(()));
            prop_assert_eq!(quantize_bsr_case::<f32, F8E5M2>(&a, g), Ok(()));
            prop_assert_eq!(quantize_bsr_case::<f16, F8E4M3>(&a16, g), Ok(()));
            prop_assert_eq!(quantize_bsr_case::<bf16, F8E5M2>(&ab, g), Ok(()));
        }
    }

    /// QuantizedDense::quantize: the same bound per tensor and per column, for every layout
    /// and leading dimension (the padding is never read).
    #[test]
    fn quantize_dense_error_bound(
        rows in 0usize..9, cols in 0usize..9, col_major in any::<bool>(), pad in 0usize..3,
        e in -30i32..30, seed in any::<u64>(),
    ) {
        let layout = if col_major { Layout::ColMajor } else { Layout::RowMajor };
        let mut shape = DenseShape::packed(rows, cols, layout);
        shape.ld += pad;
        let len = shape.required_len().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let zero_col = rng.random_range(0..cols.max(1));
        let mut data: Vec<f32> = (0..len).map(|_| rng.random_range(-1.0f32..1.0) * 2f32.powi(e)).collect();
        for i in 0..rows.min(if cols > 0 { rows } else { 0 }) {
            data[shape.layout.offset(i, zero_col, shape.ld).unwrap()] = 0.0;
        }
        // NaN in the padding: never read.
        if pad > 0 && len > shape.contiguous_extent() {
            data[shape.contiguous_extent()] = f32::NAN;
        }
        for g in [ColumnGranularity::PerTensor, ColumnGranularity::PerColumn] {
            prop_assert_eq!(quantize_dense_case::<F8E4M3>(&data, shape, g), Ok(()));
            prop_assert_eq!(quantize_dense_case::<F8E5M2>(&data, shape, g), Ok(()));
        }
    }
}

#[test]
fn quantizers_refuse_non_finite_values() {
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let a = BsrMatrix::from_parts(
            2,
            4,
            BlockShape::new(2, 2),
            vec![0, 2],
            vec![0, 1],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, bad, 0.0, 0.0],
        )
        .unwrap();
        for g in [BlockGranularity::PerTensor, BlockGranularity::PerBlock] {
            let e = a.quantize_fp8::<F8E4M3>(g).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::NonFinite {
                        operand: "A",
                        index: 5,
                        ..
                    }
                ),
                "{e}"
            );
        }
        let b = [0.0f32, 1.0, bad, 2.0];
        let e = QuantizedDense::<F8E5M2>::quantize(
            &b,
            DenseShape::packed(2, 2, Layout::ColMajor),
            ColumnGranularity::PerColumn,
        )
        .unwrap_err();
        assert!(matches!(e, Error::NonFinite { index: 2, .. }), "{e}");
    }
    // A view its buffer does not hold.
    let e = QuantizedDense::<F8E4M3>::quantize(
        &[1.0f32; 3],
        DenseShape::packed(2, 2, Layout::RowMajor),
        ColumnGranularity::PerTensor,
    )
    .unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { .. }), "{e}");
}

// ---------------------------------------------------------------------------------------
// The CPU reference of spmm_fp8.

/// Runs `case` on the CPU backend; returns the relative error against the oracle (after
/// checking that every output was written and nothing outside C's view).
fn run_host<Q: Fp8, TB: BOperand, O: Element>(case: &Case, rng: &mut StdRng) -> f64 {
    let d = make::<Q, TB, O>(case, rng);
    let (m, k, n) = d.dims();
    let mut c = d.c0.clone();
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Host(&d.bias));
    }
    let b = Dense::host(&d.b, k, n, case.b_layout)
        .with_ld(d.b_shape.ld)
        .attach(d.column_scales(Vector::Host(&d.b_scales)));
    spmm_fp8(
        Fp8Operand::Host(&d.a, &d.a_scales),
        b,
        DenseMut::host(&mut c, m, n, case.c_layout).with_ld(d.c_shape.ld),
        &epi,
        &SpmmOptions::new()
            .alpha(case.alpha)
            .beta(case.beta)
            .backend(case.backend),
    )
    .unwrap_or_else(|e| panic!("{case:?} {}/{}/{}: {e}", Q::DTYPE, TB::DTYPE, O::DTYPE));
    let (err, bad) = rel_err(&c, &d.c_shape, &d.want);
    assert_eq!(bad, 0, "{case:?}: {bad} outputs unwritten or non-finite");
    assert!(
        outside_untouched(&c, &d.c0, &d.c_shape),
        "{case:?}: written outside the view"
    );
    err
}

fn host_cases(rng: &mut StdRng) -> Vec<Case> {
    let blocks = [
        BlockShape::new(16, 32),
        BlockShape::new(32, 32),
        BlockShape::new(8, 24),
        BlockShape::new(64, 64),
    ];
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::GeluTanh,
        Activation::Silu,
    ];
    let kinds = [
        PatternKind::Random(0.4),
        PatternKind::Full,
        PatternKind::EmptyAndFullRows,
        PatternKind::Single,
        PatternKind::Empty,
    ];
    let mut out = Vec::new();
    for i in 0..36 {
        let block = blocks[i % blocks.len()];
        let mut c = Case::new(
            (192 / block.rows).max(2) - (i % 2),
            (256 / block.cols).max(2) + (i % 3),
            block,
            [1, 7, 16, 33, 64][i % 5],
        );
        c.kind = kinds[i % kinds.len()];
        c.b_layout = common::layouts()[i % 2];
        c.c_layout = common::layouts()[(i / 2) % 2];
        (c.alpha, c.beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)][i % 4];
        c.ld_pad = [0, 3, 0, 1][(i / 3) % 4];
        c.bias = i % 3 != 0;
        c.activation = acts[(i / 4) % 4];
        c.a_scale = [ScaleKind::PerBlock, ScaleKind::PerTensor, ScaleKind::None][i % 3];
        c.b_scale = [ScaleKind::PerColumn, ScaleKind::PerTensor, ScaleKind::None][(i / 3) % 3];
        c.backend = if rng.random_bool(0.5) {
            Backend::Auto
        } else {
            Backend::Cpu
        };
        out.push(c);
    }
    out
}

#[test]
fn w8a8_cpu_matches_reference() {
    let mut rng = StdRng::seed_from_u64(seed());
    let list = host_cases(&mut rng);
    for (i, case) in list.iter().enumerate() {
        let (err, out) = match i % 6 {
            0 => (run_host::<F8E4M3, F8E4M3, f32>(case, &mut rng), DType::F32),
            1 => (run_host::<F8E4M3, F8E4M3, f16>(case, &mut rng), DType::F16),
            2 => (
                run_host::<F8E4M3, F8E4M3, bf16>(case, &mut rng),
                DType::Bf16,
            ),
            3 => (run_host::<F8E5M2, F8E5M2, f32>(case, &mut rng), DType::F32),
            4 => (run_host::<F8E5M2, F8E5M2, f16>(case, &mut rng), DType::F16),
            _ => (
                run_host::<F8E5M2, F8E5M2, bf16>(case, &mut rng),
                DType::Bf16,
            ),
        };
        // The CPU reference accumulates in f32 in a fixed order: far inside the GPU's
        // tolerance.
        let tol = if out == DType::F32 {
            1e-5
        } else {
            tolerance(out)
        };
        assert!(
            err <= tol,
            "{case:?} -> {out}: rel err {err:.3e} > {tol:.0e}"
        );
    }
}

#[test]
fn w8a16_cpu_matches_reference() {
    let mut rng = StdRng::seed_from_u64(seed());
    let list = host_cases(&mut rng);
    for (i, case) in list.iter().enumerate() {
        let (err, out) = match i % 6 {
            0 => (run_host::<F8E4M3, f16, f32>(case, &mut rng), DType::F32),
            1 => (run_host::<F8E4M3, bf16, bf16>(case, &mut rng), DType::Bf16),
            2 => (run_host::<F8E5M2, f16, f16>(case, &mut rng), DType::F16),
            3 => (run_host::<F8E5M2, bf16, f32>(case, &mut rng), DType::F32),
            4 => (run_host::<F8E4M3, f16, f16>(case, &mut rng), DType::F16),
            _ => (run_host::<F8E5M2, bf16, bf16>(case, &mut rng), DType::Bf16),
        };
        let tol = if out == DType::F32 {
            1e-5
        } else {
            tolerance(out)
        };
        assert!(
            err <= tol,
            "{case:?} -> {out}: rel err {err:.3e} > {tol:.0e}"
        );
    }
}

/// Quantizing A per block and B per column (or per tensor), the product stays within a few
/// FP8 spacings of the unquantized f64 product: the quantizers and the product compose.
#[test]
fn quantized_product_close_to_unquantized() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (br, bc, block, n) = (6, 8, BlockShape::new(32, 32), 24);
    let mask = BlockMask::random(br, bc, 0.5, &mut rng).unwrap();
    let a =
        BsrMatrix::from_block_mask(&mask, block, |_, _| rng.random_range(-1.0f32..1.0)).unwrap();
    let (m, k) = (a.m(), a.k());
    let x = random_vec::<f32>(k * n, &mut rng);
    let bs = DenseShape::packed(k, n, Layout::ColMajor);
    let dense = a.to_dense().unwrap();
    let want: Vec<f64> = (0..m * n)
        .map(|idx| {
            let (i, j) = (idx / n, idx % n);
            (0..k)
                .map(|kk| dense[i * k + kk] as f64 * x[j * k + kk] as f64)
                .sum()
        })
        .collect();
    fn run<Q: Fp8>(
        a: &BsrMatrix<f32>,
        x: &[f32],
        bs: DenseShape,
        ag: BlockGranularity,
        bg: Option<ColumnGranularity>,
        want: &[f64],
    ) -> f64 {
        let (m, n) = (a.m(), bs.cols);
        let aq = a.quantize_fp8::<Q>(ag).unwrap();
        let mut y = vec![0f32; m * n];
        let c = DenseMut::host(&mut y, m, n, Layout::RowMajor);
        match bg {
            Some(g) => {
                let xq = QuantizedDense::<Q>::quantize(x, bs, g).unwrap();
                spmm_fp8(&aq, xq.view(), c, &Epilogue::new(), &SpmmOptions::new()).unwrap();
            }
            None => {
                let xh: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
                let b = Dense::host(&xh, bs.rows, bs.cols, bs.layout);
                spmm_fp8(&aq, b, c, &Epilogue::new(), &SpmmOptions::new()).unwrap();
            }
        }
        rel_err(&y, &DenseShape::packed(m, n, Layout::RowMajor), want).0
    }
    for ag in [BlockGranularity::PerBlock, BlockGranularity::PerTensor] {
        for bg in [
            Some(ColumnGranularity::PerColumn),
            Some(ColumnGranularity::PerTensor),
            None,
        ] {
            // Independent errors of at most 2^-4 (E4M3), 2^-3 (E5M2) per factor, about a
            // third of that rms: the products' relative error measured 3.6% and 7.2% here
            // (2.6% and 5.2% with a bf16 B).
            let e4 = run::<F8E4M3>(&a, &x, bs, ag, bg, &want);
            let e5 = run::<F8E5M2>(&a, &x, bs, ag, bg, &want);
            assert!(e4 < 0.05, "{ag:?} {bg:?}: e4m3 rel err {e4}");
            assert!(e5 < 0.1, "{ag:?} {bg:?}: e5m2 rel err {e5}");
            assert!(e4 < e5, "{ag:?} {bg:?}: e4m3 {e4} not below e5m2 {e5}");
        }
    }
}

/// NaN in A or B propagates to C (nothing is skipped or clamped); β = 0 ignores NaN in C.
#[test]
fn nan_values_propagate() {
    let a = BsrMatrix::from_parts(
        2,
        2,
        BlockShape::new(1, 2),
        vec![0, 1, 2],
        vec![0, 0],
        vec![
            F8E4M3::from_f32(1.0),
            F8E4M3::from_f32(2.0),
            F8E4M3::from_bits(0x7f),
            F8E4M3::from_f32(1.0),
        ],
    )
    .unwrap();
    let b = [F8E4M3::from_f32(1.0); 2];
    let mut c = [f32::NAN; 2];
    spmm_fp8(
        &a,
        Dense::host(&b, 2, 1, Layout::ColMajor),
        DenseMut::host(&mut c, 2, 1, Layout::ColMajor),
        &Epilogue::new(),
        &SpmmOptions::new(),
    )
    .unwrap();
    assert_eq!(c[0], 3.0);
    assert!(c[1].is_nan());
}

// ---------------------------------------------------------------------------------------
// SparseLinear with FP8 weights.

#[test]
fn sparse_linear_fp8() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (out_f, in_f, batch) = (96, 128, 5);
    let mask = BlockMask::random(3, 4, 0.6, &mut rng).unwrap();
    let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |_, _| {
        rng.random_range(-1.0f32..1.0)
    })
    .unwrap();
    let wq = w
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap();
    let wd = wq.dequantize().unwrap().to_dense().unwrap();
    let bias: Vec<bf16> = (0..out_f)
        .map(|_| bf16::from_f32(rng.random_range(-1.0..1.0)))
        .collect();
    let layer = SparseLinear::new_fp8(wq, Some(bias.clone()), Activation::Silu).unwrap();
    assert_eq!(layer.weight().m(), out_f);
    let x = random_vec::<f32>(batch * in_f, &mut rng);
    // W8A16: x in f16 as it is.
    let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    // W8A8: x quantized per token (x row-major = xᵀ column-major, a token per column).
    let xq = quantize_per_token(&x, in_f, batch);
    let xqd = xq.dequantize().unwrap();
    let want = |xv: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
        (0..batch * out_f)
            .map(|idx| {
                let (b, o) = (idx / out_f, idx % out_f);
                let dot: f64 = (0..in_f).map(|i| wd[o * in_f + i] as f64 * xv(b, i)).sum();
                common::act64(Activation::Silu, dot + bias[o].to_f32() as f64)
            })
            .collect()
    };
    let yshape = DenseShape::packed(batch, out_f, Layout::RowMajor);
    let mut y = vec![bf16::from_f32(f32::NAN); batch * out_f];
    layer
        .forward_fp8(&xh, ColumnScales::None, batch, &mut y)
        .unwrap();
    let (err, bad) = rel_err(&y, &yshape, &want(&|b, i| xh[b * in_f + i].to_f32() as f64));
    assert!(bad == 0 && err < 1e-2, "W8A16: {err} ({bad} bad)");
    let mut y = vec![bf16::from_f32(f32::NAN); batch * out_f];
    layer
        .forward_fp8(xq.values(), xq.column_scales(), batch, &mut y)
        .unwrap();
    let (err, bad) = rel_err(&y, &yshape, &want(&|b, i| xqd[b * in_f + i] as f64));
    assert!(bad == 0 && err < 1e-2, "W8A8: {err} ({bad} bad)");
    // Scales on an f16 x: refused, y untouched.
    let before = y.clone();
    let e = layer
        .forward_fp8(&xh, xq.column_scales(), batch, &mut y)
        .unwrap_err();
    assert!(
        matches!(e, Error::ScalesNotTaken { operand: "B", .. }),
        "{e}"
    );
    assert!(y
        .iter()
        .zip(&before)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    // A bias of the wrong length.
    let wq2 = w
        .quantize_fp8::<F8E5M2>(BlockGranularity::PerTensor)
        .unwrap();
    assert!(matches!(
        SparseLinear::new_fp8(wq2, Some(vec![0f32; out_f - 1]), Activation::None),
        Err(Error::ShapeMismatch { .. })
    ));
}

// ---------------------------------------------------------------------------------------
// Typed refusals, C untouched.

/// A small valid W8A8 problem: A 4 x 8 (2x4 blocks, 3 stored), B 8 x 3, C 4 x 3.
struct Small {
    a: BsrMatrix<F8E4M3>,
    scales: BlockScales,
    b: Vec<F8E4M3>,
    bs: Vec<f32>,
    c: Vec<f32>,
}

fn small() -> Small {
    let a = BsrMatrix::from_parts(
        4,
        8,
        BlockShape::new(2, 4),
        vec![0, 2, 3],
        vec![0, 1, 1],
        vec![F8E4M3::from_f32(0.5); 24],
    )
    .unwrap();
    Small {
        a,
        scales: BlockScales::PerBlock(vec![1.0, 2.0, 0.5]),
        b: vec![F8E4M3::from_f32(1.0); 24],
        bs: vec![1.0, 0.5, 0.25],
        c: vec![7.0; 12],
    }
}

/// Runs `f` on a fresh small problem and checks that it fails as `want` says and leaves
/// C as it was.
fn refused(what: &str, want: fn(&Error) -> bool, f: impl FnOnce(&mut Small) -> Result<(), Error>) {
    let mut s = small();
    let e = f(&mut s).expect_err(what);
    assert!(want(&e), "{what}: {e:?}");
    assert!(s.c.iter().all(|&v| v == 7.0), "{what}: C written");
    // Every message starts readable.
    assert!(!e.to_string().is_empty());
}

#[test]
fn typed_refusals() {
    let opts = SpmmOptions::new();
    let cm = Layout::ColMajor;
    // The valid problem runs.
    let mut s = small();
    spmm_fp8(
        Fp8Operand::Host(&s.a, &s.scales),
        Dense::host(&s.b, 8, 3, cm).with_scales(ColumnScales::PerColumn(Vector::Host(&s.bs))),
        DenseMut::host(&mut s.c, 4, 3, Layout::RowMajor),
        &Epilogue::new(),
        &opts,
    )
    .unwrap();
    assert_eq!(s.c[0], 0.5 * 4.0 + 0.5 * 2.0 * 4.0);

    refused(
        "op(A) = Aᵀ",
        |e| matches!(e, Error::NotSupported { .. }),
        |s| {
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&s.b, 4, 1, cm),
                DenseMut::host(&mut s.c, 8, 1, cm),
                &Epilogue::new(),
                &SpmmOptions::new().transpose_a(true),
            )
        },
    );
    refused(
        "per-block scales of the wrong length",
        |e| {
            matches!(
                e,
                Error::ScaleLength {
                    operand: "A",
                    kind: ScaleKind::PerBlock,
                    expected: 3,
                    got: 2
                }
            )
        },
        |s| {
            let bad = BlockScales::PerBlock(vec![1.0, 2.0]);
            spmm_fp8(
                Fp8Operand::Host(&s.a, &bad),
                Dense::host(&s.b, 8, 3, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "per-column scales of the wrong length",
        |e| {
            matches!(
                e,
                Error::ScaleLength {
                    operand: "B",
                    kind: ScaleKind::PerColumn,
                    expected: 3,
                    got: 2
                }
            )
        },
        |s| {
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&s.b, 8, 3, cm)
                    .with_scales(ColumnScales::PerColumn(Vector::Host(&s.bs[..2]))),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "per-tensor scales of two values",
        |e| {
            matches!(
                e,
                Error::ScaleLength {
                    operand: "B",
                    expected: 1,
                    ..
                }
            )
        },
        |s| {
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&s.b, 8, 3, cm)
                    .with_scales(ColumnScales::PerTensor(Vector::Host(&s.bs[..2]))),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "per-column scales of a transposed view",
        |e| {
            matches!(
                e,
                Error::ScalesNotTaken {
                    operand: "B",
                    kind: ScaleKind::PerColumn,
                    ..
                }
            )
        },
        |s| {
            // B stored 3 x 8 row-major with scales per column (8), viewed as its 8 x 3
            // transpose: the scales would scale its rows.
            let s8 = [1.0f32; 8];
            let b = Dense::host(&s.b, 3, 8, Layout::RowMajor)
                .with_scales(ColumnScales::PerColumn(Vector::Host(&s8)))
                .t();
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                b,
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "B of the other FP8 type",
        |e| {
            matches!(
                e,
                Error::Fp8Types {
                    a: DType::E4M3,
                    b: DType::E5M2,
                    ..
                }
            )
        },
        |s| {
            let b = vec![F8E5M2::from_f32(1.0); 24];
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&b, 8, 3, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "an f32 B",
        |e| matches!(e, Error::Fp8Types { b: DType::F32, .. }),
        |s| {
            let b = vec![1f32; 24];
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&b, 8, 3, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "a bias of the wrong length",
        |e| matches!(e, Error::ShapeMismatch { .. }),
        |s| {
            let bias = [0f32; 3];
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&s.b, 8, 3, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new().bias(Vector::Host(&bias)),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "a GPU backend with host operands",
        |e| {
            matches!(
                e,
                Error::BackendUnavailable {
                    backend: Backend::Hopper,
                    ..
                }
            )
        },
        |s| {
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&s.b, 8, 3, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new().backend(Backend::Hopper),
            )
        },
    );
    refused(
        "B's rows are not k",
        |e| matches!(e, Error::ShapeMismatch { .. }),
        |s| {
            spmm_fp8(
                Fp8Operand::Host(&s.a, &s.scales),
                Dense::host(&s.b, 6, 4, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &Epilogue::new(),
                &SpmmOptions::new(),
            )
        },
    );
    refused(
        "the generic spmm with FP8 operands",
        |e| {
            matches!(
                e,
                Error::UnsupportedTypes {
                    input: DType::E4M3,
                    ..
                }
            )
        },
        |s| {
            spmm(
                &s.a,
                Dense::host(&s.b, 8, 3, cm),
                DenseMut::host(&mut s.c, 4, 3, cm),
                &SpmmOptions::new(),
            )
        },
    );

    // An FP8 C (the output of FP8 products is f16, bf16 or f32).
    let s = small();
    let mut c8 = vec![F8E4M3::from_f32(7.0); 12];
    let e = spmm_fp8(
        Fp8Operand::Host(&s.a, &s.scales),
        Dense::host(&s.b, 8, 3, cm),
        DenseMut::host(&mut c8, 4, 3, cm),
        &Epilogue::new(),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Fp8Types { c: DType::E4M3, .. }), "{e}");
    assert!(c8.iter().all(|v| v.to_f32() == 7.0));
    // The SDDMM takes no FP8.
    let mut sm = BsrMatrix::from_parts(
        4,
        3,
        BlockShape::new(2, 3),
        vec![0, 1, 1],
        vec![0],
        vec![F8E4M3::from_f32(7.0); 6],
    )
    .unwrap();
    let e = sddmm(
        Dense::host(&s.b, 4, 6, cm),
        Dense::host(&s.b, 6, 3, cm),
        &mut sm,
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "{e}");
    assert!(sm.values().iter().all(|v| v.to_f32() == 7.0));
    // QuantizedBsr pairs values with scales of the right length only.
    assert!(matches!(
        QuantizedBsr::new(s.a.clone(), BlockScales::PerBlock(vec![1.0; 4])),
        Err(Error::ScaleLength {
            expected: 3,
            got: 4,
            ..
        })
    ));
}
