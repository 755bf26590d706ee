//! The fused epilogue (bias, activation) and `SparseLinear` on the CPU backend, against
//! the f64 oracle.

mod common;

use common::{act64, random_vec, reference, rel_err, PatternKind};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    f16, spmm_fused, Activation, BlockShape, Dense, DenseMut, DenseShape, Epilogue, Error, Layout,
    SparseLinear, SpmmOptions, Vector,
};

const ACTIVATIONS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::GeluTanh,
    Activation::Silu,
];

#[test]
fn fused_epilogue_matches_reference() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut cases = 0;
    for (i, &act) in ACTIVATIONS.iter().enumerate() {
        for with_bias in [false, true] {
            for c_layout in common::layouts() {
                let a = common::random_bsr::<f16>(
                    PatternKind::Random(0.4),
                    5,
                    7,
                    BlockShape::new(16, 32),
                    &mut rng,
                );
                let (m, k, n) = (a.m(), a.k(), 13 + i);
                let bs = DenseShape::packed(k, n, Layout::RowMajor);
                let cs = DenseShape::packed(m, n, c_layout);
                let b: Vec<f16> = random_vec(k * n, &mut rng);
                let c0: Vec<f32> = random_vec(m * n, &mut rng);
                let bias: Vec<f16> = random_vec(m, &mut rng);
                let (alpha, beta) = (1.5, 0.5);
                let base = reference(&a, &b, &bs, &c0, &cs, alpha, beta);
                let want: Vec<f64> = (0..m * n)
                    .map(|idx| {
                        let row = idx / n;
                        let bias = if with_bias {
                            bias[row].to_f32() as f64
                        } else {
                            0.0
                        };
                        act64(act, base[idx] + bias)
                    })
                    .collect();
                let mut c = c0.clone();
                let mut epi = Epilogue::new().activation(act);
                if with_bias {
                    epi = epi.bias(Vector::Host(&bias));
                }
                spmm_fused(
                    &a,
                    Dense::host(&b, k, n, Layout::RowMajor),
                    DenseMut::host(&mut c, m, n, c_layout),
                    &epi,
                    &SpmmOptions::new().alpha(alpha).beta(beta),
                )
                .unwrap();
                let (err, bad) = rel_err(&c, &cs, &want);
                assert!(
                    bad == 0 && err < 1e-5,
                    "{act:?} bias {with_bias}: err {err}"
                );
                cases += 1;
            }
        }
    }
    println!("fused epilogue: {cases} cases passed");
}

#[test]
fn sparse_linear_forward_matches_reference() {
    let mut rng = StdRng::seed_from_u64(11);
    for (batch, act) in [
        (1, Activation::Silu),
        (3, Activation::Relu),
        (17, Activation::GeluTanh),
    ] {
        // W: out 96 x in 128, 32x32 blocks.
        let w = common::random_bsr::<f16>(
            PatternKind::Random(0.5),
            3,
            4,
            BlockShape::new(32, 32),
            &mut rng,
        );
        let (out_f, in_f) = (w.m(), w.k());
        let bias: Vec<f16> = random_vec(out_f, &mut rng);
        let x: Vec<f16> = random_vec(batch * in_f, &mut rng);
        // y = x·Wᵀ: y[b][o] = Σ_i x[b][i]·W[o][i], computed densely in f64.
        let dense = w.to_dense().unwrap();
        let mut want = vec![0f64; batch * out_f];
        for bt in 0..batch {
            for o in 0..out_f {
                let mut s = 0f64;
                for i in 0..in_f {
                    s += x[bt * in_f + i].to_f32() as f64 * dense[o * in_f + i].to_f32() as f64;
                }
                want[bt * out_f + o] = act64(act, s + bias[o].to_f32() as f64);
            }
        }
        let layer = SparseLinear::new(w, Some(bias), act).unwrap();
        let mut y = vec![f32::NAN; batch * out_f];
        layer.forward(&x, batch, &mut y).unwrap();
        let (err, bad) = rel_err(
            &y,
            &DenseShape::packed(batch, out_f, Layout::RowMajor),
            &want,
        );
        assert!(
            bad == 0 && err < 1e-5,
            "batch {batch}: err {err}, bad {bad}"
        );
    }
}

#[test]
fn bias_of_the_wrong_length_is_refused() {
    let mut rng = StdRng::seed_from_u64(3);
    let w = common::random_bsr::<f16>(PatternKind::Full, 2, 2, BlockShape::new(16, 16), &mut rng);
    let e = SparseLinear::new(w.clone(), Some(vec![f16::ZERO; 31]), Activation::None)
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 32,
                got: 31,
                ..
            }
        ),
        "{e}"
    );
    let b = vec![f16::ONE; 32 * 4];
    let sentinel = 7.0f32;
    let mut c = vec![sentinel; 32 * 4];
    let bias = vec![f16::ZERO; 33];
    let e = spmm_fused(
        &w,
        Dense::host(&b, 32, 4, Layout::RowMajor),
        DenseMut::host(&mut c, 32, 4, Layout::RowMajor),
        &Epilogue::new().bias(Vector::Host(&bias)),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 32,
                got: 33,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        c.iter().all(|&v| v == sentinel),
        "C written by a refused call"
    );
}
