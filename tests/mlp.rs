//! The gated product (`Epilogue::gated`) and `SparseMlp` on the host: the interleaving of
//! gate and up, the CPU backend against an f64 oracle written here, every refusal typed and
//! leaving the outputs untouched, FP8 weights' scales through the interleave.
#![allow(deprecated)]

mod common;

use common::dequantize::dequantized64;
use common::{act64, nonzero, random_vec, seed};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, interleave_bias, spmm_fused, Activation, Backend, BlockMask, BlockShape, BsrError,
    BsrMatrix, Dense, DenseMut, Element, Epilogue, Error, Layout, MlpBias, QuantizedBsr, SparseMlp,
    SpmmOptions, Vector, F8E4M3, F8E5M2,
};

fn weight<T: Element>(
    rows: usize,
    cols: usize,
    block: BlockShape,
    p: f64,
    rng: &mut StdRng,
) -> BsrMatrix<T> {
    let mask = BlockMask::random(rows, cols, p, rng).unwrap();
    BsrMatrix::from_block_mask(&mask, block, |_, _| nonzero(rng)).unwrap()
}

fn dense64<T: Element>(m: &BsrMatrix<T>) -> Vec<f64> {
    m.to_dense()
        .unwrap()
        .iter()
        .map(|v| v.to_f32() as f64)
        .collect()
}

#[test]
fn interleave_puts_gate_and_up_block_rows_in_turn() {
    let mut rng = StdRng::seed_from_u64(seed());
    for &(rows, cols, bm, bk) in &[
        (4usize, 3usize, 16usize, 32usize),
        (1, 5, 8, 8),
        (0, 2, 4, 4),
        (3, 1, 2, 6),
    ] {
        let block = BlockShape::new(bm, bk);
        let g = weight::<f32>(rows, cols, block, 0.5, &mut rng);
        let u = weight::<f32>(rows, cols, block, 0.7, &mut rng);
        let gu = BsrMatrix::interleave_block_rows(&g, &u).unwrap();
        assert_eq!((gu.m(), gu.k(), gu.block()), (2 * g.m(), g.k(), block));
        assert_eq!(gu.nnz_blocks(), g.nnz_blocks() + u.nnz_blocks());
        let (dg, du, dgu) = (dense64(&g), dense64(&u), dense64(&gu));
        let k = g.k();
        for i in 0..gu.m() {
            let (pair, r) = (i / (2 * bm), i % (2 * bm));
            let (src, row) = if r < bm {
                (&dg, pair * bm + r)
            } else {
                (&du, pair * bm + r - bm)
            };
            assert_eq!(&dgu[i * k..][..k], &src[row * k..][..k], "row {i}");
        }
        assert_eq!(gu.deinterleave_block_rows().unwrap(), (g, u));
    }
    let a = weight::<f32>(2, 2, BlockShape::new(4, 4), 0.5, &mut rng);
    let b = weight::<f32>(3, 2, BlockShape::new(4, 4), 0.5, &mut rng);
    let c = weight::<f32>(2, 2, BlockShape::new(4, 8), 0.5, &mut rng);
    assert!(matches!(
        BsrMatrix::interleave_block_rows(&a, &b),
        Err(BsrError::Interleave { what: "rows", .. })
    ));
    assert!(matches!(
        BsrMatrix::interleave_block_rows(&a, &c),
        Err(BsrError::Interleave { .. })
    ));
    assert!(matches!(
        b.deinterleave_block_rows(),
        Err(BsrError::Interleave { .. })
    ));
}

#[test]
fn gated_product_on_the_cpu_matches_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    let acts = [
        Activation::Silu,
        Activation::GeluTanh,
        Activation::Relu,
        Activation::None,
    ];
    for (case, &(pairs, cols, bm, bk, n)) in [
        (3usize, 4usize, 16usize, 16usize, 5usize),
        (2, 3, 32, 8, 1),
        (5, 2, 8, 24, 17),
    ]
    .iter()
    .enumerate()
    {
        let block = BlockShape::new(bm, bk);
        let g = weight::<f16>(pairs, cols, block, 0.6, &mut rng);
        let u = weight::<f16>(pairs, cols, block, 0.6, &mut rng);
        let gu = BsrMatrix::interleave_block_rows(&g, &u).unwrap();
        let (m, k) = (g.m(), g.k());
        let x: Vec<f16> = random_vec(k * n, &mut rng);
        let bias: Vec<f16> = random_vec(2 * m, &mut rng);
        let (dg, du) = (dense64(&g), dense64(&u));
        for (layout, with_bias, alpha) in [
            (Layout::ColMajor, true, 1.0f32),
            (Layout::RowMajor, false, -0.5),
        ] {
            let act = acts[case];
            let mut c = vec![f32::NAN; m * n];
            let mut epi = Epilogue::new().activation(act).gated(true);
            if with_bias {
                epi = epi.bias(Vector::Host(&bias));
            }
            spmm_fused(
                &gu,
                Dense::host(&x, k, n, layout),
                DenseMut::host(&mut c, m, n, layout),
                &epi,
                &SpmmOptions::new().alpha(alpha),
            )
            .unwrap();
            let (mut num, mut den) = (0f64, 0f64);
            for i in 0..m {
                let (gr, ur) = (2 * (i / bm) * bm + i % bm, (2 * (i / bm) + 1) * bm + i % bm);
                for j in 0..n {
                    let xv = |kk: usize| {
                        x[layout
                            .offset(kk, j, if layout == Layout::ColMajor { k } else { n })
                            .unwrap()]
                        .to_f32() as f64
                    };
                    let gv: f64 = (0..k).map(|kk| dg[i * k + kk] * xv(kk)).sum();
                    let uv: f64 = (0..k).map(|kk| du[i * k + kk] * xv(kk)).sum();
                    let (bg, bu) = if with_bias {
                        (bias[gr].to_f32() as f64, bias[ur].to_f32() as f64)
                    } else {
                        (0.0, 0.0)
                    };
                    let want = act64(act, alpha as f64 * gv + bg) * (alpha as f64 * uv + bu);
                    let got = c[layout
                        .offset(i, j, if layout == Layout::ColMajor { m } else { n })
                        .unwrap()] as f64;
                    assert!(got.is_finite(), "case {case}: C[{i}][{j}] not written");
                    num += (got - want).powi(2);
                    den += want * want;
                }
            }
            let err = (num / den.max(1e-30)).sqrt();
            assert!(err < 1e-5, "case {case} {layout:?}: rel err {err:.3e}");
        }
    }
}

#[test]
fn gated_refusals_are_typed_and_write_nothing() {
    let mut rng = StdRng::seed_from_u64(seed());
    let block = BlockShape::new(8, 8);
    let gu = BsrMatrix::interleave_block_rows(
        &weight::<f16>(2, 2, block, 1.0, &mut rng),
        &weight::<f16>(2, 2, block, 1.0, &mut rng),
    )
    .unwrap();
    let odd = weight::<f16>(3, 2, block, 1.0, &mut rng);
    let x: Vec<f16> = random_vec(16 * 2, &mut rng);
    let c0 = vec![7.0f32; 32 * 2];
    let epi = Epilogue::new().gated(true);
    let run = |a: &BsrMatrix<f16>, c_rows: usize, opts: SpmmOptions, bias: Option<&[f16]>| {
        let mut c = c0.clone();
        let mut e = epi;
        if let Some(b) = bias {
            e = e.bias(Vector::Host(b));
        }
        let r = spmm_fused(
            a,
            Dense::host(
                &x,
                if opts.get_transpose_a() { a.m() } else { 16 },
                2,
                Layout::ColMajor,
            ),
            DenseMut::host(&mut c, c_rows, 2, Layout::ColMajor),
            &e,
            &opts,
        );
        assert_eq!(c, c0, "C written by a refused call ({r:?})");
        r.unwrap_err()
    };
    assert!(matches!(
        run(&gu, 16, SpmmOptions::new().beta(1.0), None),
        Error::Gated(_)
    ));
    assert!(matches!(
        run(&gu, 16, SpmmOptions::new().transpose_a(true), None),
        Error::Gated(_)
    ));
    assert!(matches!(
        run(&odd, 12, SpmmOptions::new(), None),
        Error::Gated(_)
    ));
    assert!(matches!(
        run(&gu, 32, SpmmOptions::new(), None),
        Error::ShapeMismatch { expected: 16, .. }
    ));
    let short = vec![f16::ZERO; 16];
    assert!(matches!(
        run(&gu, 16, SpmmOptions::new(), Some(&short)),
        Error::ShapeMismatch { expected: 32, .. }
    ));
}

#[test]
fn sparse_mlp_on_the_host_matches_f64_and_checks_both_products_first() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter, batch) = (48, 64, 3);
    let gb = BlockShape::new(16, 16);
    let db = BlockShape::new(16, 32);
    let g = weight::<f32>(inter / 16, hidden / 16, gb, 0.6, &mut rng);
    let u = weight::<f32>(inter / 16, hidden / 16, gb, 0.6, &mut rng);
    let d = weight::<f32>(hidden / 16, inter / 32, db, 0.6, &mut rng);
    let mlp = SparseMlp::new(&g, &u, d.clone(), Activation::Silu).unwrap();
    let x: Vec<f32> = random_vec(batch * hidden, &mut rng);
    let mut h = vec![f32::NAN; batch * inter];
    let mut y = vec![f32::NAN; batch * hidden];
    mlp.forward(&x, batch, &mut h, &mut y).unwrap();
    let (dg, du, dd) = (dense64(&g), dense64(&u), dense64(&d));
    for b in 0..batch {
        let hv: Vec<f64> = (0..inter)
            .map(|i| {
                let gv: f64 = (0..hidden)
                    .map(|k| dg[i * hidden + k] * x[b * hidden + k] as f64)
                    .sum();
                let uv: f64 = (0..hidden)
                    .map(|k| du[i * hidden + k] * x[b * hidden + k] as f64)
                    .sum();
                act64(Activation::Silu, gv) * uv
            })
            .collect();
        for o in 0..hidden {
            let want: f64 = (0..inter).map(|i| dd[o * inter + i] * hv[i]).sum();
            let got = y[b * hidden + o] as f64;
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "y[{b}][{o}] = {got}, want {want}"
            );
        }
    }
    // y too short: refused before the gated product writes h.
    let mut h2 = vec![f32::NAN; batch * inter];
    let mut y2 = vec![0f32; batch * hidden - 1];
    assert!(mlp.forward(&x, batch, &mut h2, &mut y2).is_err());
    assert!(
        h2.iter().all(|v| v.is_nan()),
        "h written before y was checked"
    );
    // Weights that disagree.
    let d_bad = weight::<f32>(hidden / 16, 1, BlockShape::new(16, 16), 1.0, &mut rng);
    assert!(matches!(
        SparseMlp::new(&g, &u, d_bad, Activation::Silu),
        Err(Error::ShapeMismatch { .. })
    ));
    let u_bad = weight::<f32>(inter / 16 + 1, hidden / 16, gb, 0.6, &mut rng);
    assert!(matches!(
        SparseMlp::new(&g, &u_bad, d, Activation::Silu),
        Err(Error::Bsr(BsrError::Interleave { .. }))
    ));
}

/// `forward_with_bias`: the gate's and up's biases (interleaved by `interleave_bias`) added
/// before the GLU, the down's after its product, against f64; a bias of the wrong length or
/// type refused before h is written; `interleave_bias` refuses lengths that disagree.
#[test]
fn sparse_mlp_biases_match_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter, batch) = (48, 64, 5);
    let gb = BlockShape::new(16, 16);
    let db = BlockShape::new(16, 32);
    let g = weight::<f32>(inter / 16, hidden / 16, gb, 0.6, &mut rng);
    let u = weight::<f32>(inter / 16, hidden / 16, gb, 0.6, &mut rng);
    let d = weight::<f32>(hidden / 16, inter / 32, db, 0.6, &mut rng);
    let mlp = SparseMlp::new(&g, &u, d.clone(), Activation::Silu).unwrap();
    let x: Vec<f32> = random_vec(batch * hidden, &mut rng);
    let (bg, bu, bd): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        random_vec(inter, &mut rng),
        random_vec(inter, &mut rng),
        random_vec(hidden, &mut rng),
    );
    let bgu = interleave_bias(&bg, &bu, 16).unwrap();
    assert_eq!(bgu.len(), 2 * inter);
    assert_eq!((bgu[16], bgu[32]), (bu[0], bg[16]));
    let bias = MlpBias {
        gate_up: Some(Vector::Host(&bgu)),
        down: Some(Vector::Host(&bd)),
    };
    let mut h = vec![f32::NAN; batch * inter];
    let mut y = vec![f32::NAN; batch * hidden];
    mlp.forward_with_bias(&x, batch, &mut h, &mut y, &bias)
        .unwrap();
    let (dg, du, dd) = (dense64(&g), dense64(&u), dense64(&d));
    for b in 0..batch {
        let hv: Vec<f64> = (0..inter)
            .map(|i| {
                let dot = |w: &[f64]| -> f64 {
                    (0..hidden)
                        .map(|k| w[i * hidden + k] * x[b * hidden + k] as f64)
                        .sum()
                };
                act64(Activation::Silu, dot(&dg) + bg[i] as f64) * (dot(&du) + bu[i] as f64)
            })
            .collect();
        for o in 0..hidden {
            let want: f64 =
                (0..inter).map(|i| dd[o * inter + i] * hv[i]).sum::<f64>() + bd[o] as f64;
            let got = y[b * hidden + o] as f64;
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "y[{b}][{o}] = {got}, want {want}"
            );
        }
    }
    // A down bias one short, or a gate_up bias of another type: refused, h untouched.
    let mut h2 = vec![f32::NAN; batch * inter];
    let short = MlpBias {
        gate_up: Some(Vector::Host(&bgu)),
        down: Some(Vector::Host(&bd[1..])),
    };
    assert!(mlp
        .forward_with_bias(&x, batch, &mut h2, &mut y, &short)
        .is_err());
    let half: Vec<f16> = bgu.iter().map(|&v| f16::from_f32(v)).collect();
    let typed = MlpBias::<f16, f32> {
        gate_up: Some(Vector::Host(&half)),
        down: None,
    };
    assert!(matches!(
        mlp.forward_with_bias(&x, batch, &mut h2, &mut y, &typed),
        Err(Error::OperandTypes { .. })
    ));
    assert!(h2.iter().all(|v| v.is_nan()), "h written by a refused call");
    assert!(interleave_bias(&bg, &bu[1..], 16).is_err());
    assert!(interleave_bias(&bg[1..], &bu[1..], 16).is_err());
    assert!(interleave_bias(&bg, &bu, 0).is_err());
}

#[test]
fn fp8_interleave_keeps_each_blocks_scale() {
    let mut rng = StdRng::seed_from_u64(seed());
    let block = BlockShape::new(16, 16);
    let g = weight::<f32>(3, 2, block, 0.7, &mut rng);
    let mut u = weight::<f32>(3, 2, block, 0.7, &mut rng);
    // Different magnitudes: different per-tensor scales.
    let scaled: Vec<f32> = u.values().iter().map(|v| v * 9.0).collect();
    u.values_mut().copy_from_slice(&scaled);
    for gran in [BlockGranularity::PerBlock, BlockGranularity::PerTensor] {
        let (gq, uq) = (
            g.quantize_fp8::<F8E4M3>(gran).unwrap(),
            u.quantize_fp8::<F8E4M3>(gran).unwrap(),
        );
        let gu = QuantizedBsr::interleave_block_rows(&gq, &uq).unwrap();
        let (dg, du, dgu) = (dequantized64(&gq), dequantized64(&uq), dequantized64(&gu));
        let k = g.k();
        for i in 0..2 * g.m() {
            let (pair, r) = (i / 32, i % 32);
            let (src, row) = if r < 16 {
                (&dg, pair * 16 + r)
            } else {
                (&du, pair * 16 + r - 16)
            };
            assert_eq!(&dgu[i * k..][..k], &src[row * k..][..k], "{gran:?} row {i}");
        }
    }
}

/// The tensor-parallel cut of an MLP (`SparseMlp::shard`): every block in exactly one shard,
/// the shards' h slices concatenated bit for bit the MLP's h, their partial ys summing to its
/// y, for any shard count (empty shards included) and skewed patterns; the balanced cut
/// never worse than equal slices.
#[test]
fn mlp_shards_recompose_the_mlp() {
    let mut rng = StdRng::seed_from_u64(seed());
    for case in 0..12 {
        let (hidden, gb, db) = match case % 3 {
            0 => (64, BlockShape::new(16, 16), BlockShape::new(16, 16)),
            1 => (48, BlockShape::new(8, 16), BlockShape::new(16, 24)),
            _ => (32, BlockShape::new(24, 8), BlockShape::new(8, 16)),
        };
        // inter: a multiple of lcm(gate bm, down bk), a few units.
        let unit = (gb.rows * db.cols) / gcd(gb.rows, db.cols);
        let inter = unit * (1 + case % 5);
        // Skewed: later block-rows and columns denser.
        let skew = |rows: usize, cols: usize, block: BlockShape, rng: &mut StdRng| {
            let mask = BlockMask::from_fn(rows, cols, |r, c| {
                rand::Rng::random_bool(rng, ((r + c + 1) as f64 / (rows + cols) as f64).min(1.0))
            })
            .unwrap();
            BsrMatrix::from_block_mask(&mask, block, |_, _| nonzero::<f32>(rng)).unwrap()
        };
        let g = skew(inter / gb.rows, hidden / gb.cols, gb, &mut rng);
        let u = skew(inter / gb.rows, hidden / gb.cols, gb, &mut rng);
        let d = skew(hidden / db.rows, inter / db.cols, db, &mut rng);
        let mlp = SparseMlp::new(&g, &u, d.clone(), Activation::Silu).unwrap();
        let batch = 1 + case % 4;
        let x: Vec<f32> = random_vec(batch * hidden, &mut rng);
        let mut h = vec![f32::NAN; batch * inter];
        let mut y = vec![f32::NAN; batch * hidden];
        mlp.forward(&x, batch, &mut h, &mut y).unwrap();
        for n in 1..=6 {
            let shards = mlp.shard(n).unwrap();
            let equal = mlp.shard_equal(n).unwrap();
            assert!(
                shards.imbalance() <= equal.imbalance() + 1e-12,
                "case {case} n {n}"
            );
            let ranges = shards.ranges();
            assert_eq!(ranges.len(), n);
            assert_eq!(ranges.first().unwrap().start, 0);
            assert_eq!(ranges.last().unwrap().end, inter);
            let (mut gu_blocks, mut dn_blocks) = (0, 0);
            let mut y_sum = vec![0f64; batch * hidden];
            for (s, r) in shards.shards().iter().zip(ranges) {
                assert_eq!(r.start % unit, 0);
                gu_blocks += s.gate_up().nnz_blocks();
                dn_blocks += s.down().nnz_blocks();
                let li = r.len();
                let mut hs = vec![f32::NAN; batch * li];
                let mut ys = vec![f32::NAN; batch * hidden];
                s.forward(&x, batch, &mut hs, &mut ys).unwrap();
                for b in 0..batch {
                    for i in 0..li {
                        assert_eq!(
                            hs[b * li + i].to_bits(),
                            h[b * inter + r.start + i].to_bits(),
                            "case {case} n {n}: h[{b}][{}]",
                            r.start + i
                        );
                    }
                }
                for (acc, v) in y_sum.iter_mut().zip(&ys) {
                    *acc += *v as f64;
                }
            }
            assert_eq!(gu_blocks, mlp.gate_up().nnz_blocks());
            assert_eq!(dn_blocks, mlp.down().nnz_blocks());
            let (num, den) = y
                .iter()
                .zip(&y_sum)
                .fold((0f64, 0f64), |(nu, de), (&a, &b)| {
                    (nu + (a as f64 - b).powi(2), de + b * b)
                });
            assert!(
                (num / den.max(1e-30)).sqrt() < 1e-5,
                "case {case} n {n}: partial sums off"
            );
        }
    }
    assert!(matches!(
        SparseMlp::new(
            &weight::<f32>(2, 2, BlockShape::new(8, 8), 1.0, &mut rng),
            &weight::<f32>(2, 2, BlockShape::new(8, 8), 1.0, &mut rng),
            weight::<f32>(2, 2, BlockShape::new(8, 8), 1.0, &mut rng),
            Activation::Silu
        )
        .unwrap()
        .shard(0),
        Err(Error::Bsr(BsrError::ShardCount { .. }))
    ));
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Bit for bit equal (every element type widens to f32 exactly).
fn unchanged<T: Element>(now: &[T], before: &[T]) -> bool {
    now.len() == before.len()
        && now
            .iter()
            .zip(before)
            .all(|(a, b)| a.to_f32().to_bits() == b.to_f32().to_bits())
}

/// A host MLP (`T` weights, `O` output) whose y type the products refuse: the call is the
/// typed error of the down product, and h and y (poisoned) are untouched: the down
/// product's type checks ran before the gated product wrote h.
fn refuses_y_type<T: Element, O: Element>(rng: &mut StdRng) -> Error {
    let (hidden, inter, batch) = (32, 48, 3);
    let b = BlockShape::new(16, 16);
    let mlp = SparseMlp::new(
        &weight::<T>(inter / 16, hidden / 16, b, 0.7, rng),
        &weight::<T>(inter / 16, hidden / 16, b, 0.7, rng),
        weight::<T>(hidden / 16, inter / 16, b, 0.7, rng),
        Activation::Silu,
    )
    .unwrap();
    let x: Vec<T> = random_vec(batch * hidden, rng);
    let h0: Vec<T> = vec![T::from_f32(f32::NAN); batch * inter];
    let y0: Vec<O> = random_vec(batch * hidden, rng);
    let (mut h, mut y) = (h0.clone(), y0.clone());
    let e = mlp.forward(&x, batch, &mut h, &mut y).unwrap_err();
    assert!(
        unchanged(&h, &h0),
        "{} -> {}: h written ({e})",
        T::DTYPE,
        O::DTYPE
    );
    assert!(
        unchanged(&y, &y0),
        "{} -> {}: y written ({e})",
        T::DTYPE,
        O::DTYPE
    );
    e
}

/// Issue 45: an f32, f16 or bf16 MLP with an FP8 y is `UnsupportedTypes`, found before the
/// gated product runs: h and y are untouched (h used to be overwritten first).
#[test]
fn sparse_mlp_refuses_an_fp8_y_before_writing_h() {
    let mut rng = StdRng::seed_from_u64(seed());
    for e in [
        refuses_y_type::<f32, F8E4M3>(&mut rng),
        refuses_y_type::<f16, F8E5M2>(&mut rng),
        refuses_y_type::<bf16, F8E4M3>(&mut rng),
    ] {
        assert!(matches!(e, Error::UnsupportedTypes { .. }), "{e}");
    }
}

/// Issue 45: an FP8 MLP (`forward_fp8`) with a y the down product refuses (FP8: `Fp8Types`;
/// a device backend for host operands) leaves h and y untouched; the accepted call matches an
/// f64 reference of the dequantized weights.
#[test]
fn sparse_mlp_fp8_checks_both_products_before_writing_h() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter, batch) = (64, 96, 3);
    let (gb, db) = (BlockShape::new(16, 32), BlockShape::new(32, 16));
    let g = weight::<f32>(inter / 16, hidden / 32, gb, 0.7, &mut rng);
    let u = weight::<f32>(inter / 16, hidden / 32, gb, 0.7, &mut rng);
    let d = weight::<f32>(hidden / 32, inter / 16, db, 0.7, &mut rng);
    let (gq, uq, dq) = (
        g.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap(),
        u.quantize_fp8::<F8E4M3>(BlockGranularity::PerTensor)
            .unwrap(),
        d.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap(),
    );
    let mlp = SparseMlp::new_fp8(&gq, &uq, dq.clone(), Activation::GeluTanh).unwrap();
    let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
    let h0 = vec![f16::NAN; batch * inter];

    // An FP8 y: the down product's Fp8Types, h and y untouched.
    for e in [
        {
            let y0: Vec<F8E5M2> = random_vec(batch * hidden, &mut rng);
            let (mut h, mut y) = (h0.clone(), y0.clone());
            let e = mlp.forward_fp8(&x, batch, &mut h, &mut y).unwrap_err();
            assert!(
                unchanged(&h, &h0) && unchanged(&y, &y0),
                "E5M2 y: written ({e})"
            );
            e
        },
        {
            let y0: Vec<F8E4M3> = random_vec(batch * hidden, &mut rng);
            let (mut h, mut y) = (h0.clone(), y0.clone());
            let e = mlp.forward_fp8(&x, batch, &mut h, &mut y).unwrap_err();
            assert!(
                unchanged(&h, &h0) && unchanged(&y, &y0),
                "E4M3 y: written ({e})"
            );
            e
        },
    ] {
        assert!(matches!(e, Error::Fp8Types { .. }), "{e}");
    }
    // y one short, and a device backend for host operands: refused, nothing written.
    let y0: Vec<f32> = random_vec(batch * hidden, &mut rng);
    let (mut h, mut y) = (h0.clone(), y0.clone());
    let e = mlp
        .forward_fp8(&x, batch, &mut h, &mut y[..batch * hidden - 1])
        .unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { .. }), "{e}");
    assert!(unchanged(&h, &h0) && unchanged(&y, &y0), "short y: written");
    let hopper = SparseMlp::new_fp8(&gq, &uq, dq.clone(), Activation::GeluTanh)
        .unwrap()
        .with_backend(Backend::Hopper);
    let e = hopper.forward_fp8(&x, batch, &mut h, &mut y).unwrap_err();
    assert!(matches!(e, Error::BackendUnavailable { .. }), "{e}");
    assert!(
        unchanged(&h, &h0) && unchanged(&y, &y0),
        "device backend: written"
    );

    // Accepted: h and y against f64 (h from the dequantized gate and up; y from the h written).
    mlp.forward_fp8(&x, batch, &mut h, &mut y).unwrap();
    let (dg, du, dd) = (dequantized64(&gq), dequantized64(&uq), dequantized64(&dq));
    let (mut h_num, mut h_den, mut y_num, mut y_den) = (0f64, 0f64, 0f64, 0f64);
    for b in 0..batch {
        let xv = |k: usize| x[b * hidden + k].to_f32() as f64;
        for i in 0..inter {
            let gv: f64 = (0..hidden).map(|k| dg[i * hidden + k] * xv(k)).sum();
            let uv: f64 = (0..hidden).map(|k| du[i * hidden + k] * xv(k)).sum();
            let want = act64(Activation::GeluTanh, gv) * uv;
            let got = h[b * inter + i].to_f32() as f64;
            h_num += (got - want).powi(2);
            h_den += want * want;
        }
        for o in 0..hidden {
            let want: f64 = (0..inter)
                .map(|i| dd[o * inter + i] * h[b * inter + i].to_f32() as f64)
                .sum();
            let got = y[b * hidden + o] as f64;
            assert!(got.is_finite(), "y[{b}][{o}] not written");
            y_num += (got - want).powi(2);
            y_den += want * want;
        }
    }
    let (eh, ey) = ((h_num / h_den).sqrt(), (y_num / y_den).sqrt());
    assert!(eh < 2e-3, "h rel err {eh:.3e}");
    assert!(ey < 1e-5, "y rel err {ey:.3e}");
}
