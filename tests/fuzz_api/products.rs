//! Targets: the products (spmm, spmm_fused, dense_spmm, sddmm) on host views.

use std::fmt::Debug;

use rand::Rng;
use sparsek::{bf16, f16, Activation, Backend, BsrMatrix, Element, SpmmOptions};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome};
use crate::inputs::{act_f64, dim, huge, rel_err, same_bits, sentinel_above, tol2, Ty, CAP};
use crate::operands::{build_bsr, gen_bsr_spec, gen_dview, BsrSpec, DView};
use crate::DRIVER;

/// Which product a case calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Prod {
    Spmm,
    Fused,
    DenseSpmm,
    Sddmm,
}

#[derive(Debug, Clone)]
pub struct ProdCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    pub clean: bool,
    pub tin: Ty,
    pub tout: Ty,
    pub a: BsrSpec,
    /// B (spmm), D (dense_spmm), A (sddmm).
    pub x: DView,
    /// C (spmm, dense_spmm), B (sddmm).
    pub y: DView,
    pub transpose: bool,
    pub alpha: f32,
    pub beta: f32,
    /// The bias's length (spmm_fused).
    pub bias: Option<usize>,
    pub act: Activation,
    pub backend: Backend,
    /// With β = 0, the output's addressed elements start as NaN (never read).
    pub nan_poison: bool,
}

pub fn gen_prod(rng: &mut FuzzRng, op: Prod) -> ProdCase {
    let clean = rng.random_bool(0.5);
    let (tin, tout) = [
        (Ty::F32, Ty::F32),
        (Ty::F32, Ty::F32),
        (Ty::F32, Ty::F32),
        (Ty::F32, Ty::F32),
        (Ty::Bf16, Ty::F32),
        (Ty::F16, Ty::F32),
        (Ty::Bf16, Ty::Bf16),
        (Ty::F16, Ty::F16),
        (Ty::F32, Ty::Bf16),
    ][rng.random_range(0..9)];
    let a = gen_bsr_spec(rng, clean);
    let (m, k) = (a.m(), a.k());
    let transpose = op != Prod::Sddmm && rng.random_bool(0.4)
        || (op == Prod::Sddmm && !clean && rng.random_bool(0.1));
    let (om, ok) = if transpose && op != Prod::Sddmm {
        (k, m)
    } else {
        (m, k)
    };
    let n = rng.random_range(0..=6);
    // (x, y) dims: B, C (spmm); D, C (dense_spmm: D p x om, C p x ok); A, B (sddmm: S m x k,
    // A m x kk, B kk x k).
    let mut dims = match op {
        Prod::Spmm | Prod::Fused => [[ok, n], [om, n]],
        Prod::DenseSpmm => [[n, om], [n, ok]],
        Prod::Sddmm => {
            let kk = rng.random_range(0..=6);
            [[m, kk], [kk, k]]
        }
    };
    if !clean && rng.random_bool(0.3) {
        let (t, i) = (rng.random_range(0..2), rng.random_range(0..2));
        dims[t][i] = match rng.random_range(0..3) {
            0 => dims[t][i] ^ 1,
            1 => huge(rng),
            _ => rng.random_range(0..=6),
        };
    }
    let x = gen_dview(rng, dims[0][0], dims[0][1], clean);
    let y = gen_dview(rng, dims[1][0], dims[1][1], clean);
    let alpha = [1.0, 1.0, 0.0, -1.0, 0.5, rng.random_range(-2.0f32..2.0)][rng.random_range(0..6)];
    let beta = if rng.random_bool(0.3) {
        [1.0, -0.5, rng.random_range(-2.0f32..2.0)][rng.random_range(0..3)]
    } else {
        0.0
    };
    let bias = (op == Prod::Fused && rng.random_bool(0.7)).then(|| {
        if clean || rng.random_bool(0.7) {
            y.rows.min(CAP)
        } else {
            dim(rng, 8, 0.0)
        }
    });
    let act = if op == Prod::Fused {
        [
            Activation::None,
            Activation::Relu,
            Activation::GeluTanh,
            Activation::Silu,
        ][rng.random_range(0..4)]
    } else {
        Activation::None
    };
    let backend = match rng.random_range(0..if clean { 10 } else { 14 }) {
        0..=5 => Backend::Auto,
        6..=9 => Backend::Cpu,
        10 | 11 => Backend::Wmma,
        _ => Backend::Decode,
    };
    ProdCase {
        clean,
        tin,
        tout,
        a,
        x,
        y,
        transpose,
        alpha,
        beta,
        bias,
        act,
        backend,
        nan_poison: rng.random_bool(0.3),
    }
}

/// The documented acceptance of each product, from the shapes alone.
fn prod_valid(c: &ProdCase, op: Prod) -> bool {
    let (m, k) = (c.a.m(), c.a.k());
    let (x, y) = (&c.x, &c.y);
    if !matches!(c.backend, Backend::Auto | Backend::Cpu) {
        return false;
    }
    let (om, ok) = if c.transpose { (k, m) } else { (m, k) };
    let shapes = match op {
        Prod::Spmm | Prod::Fused => x.rows == ok && y.rows == om && y.cols == x.cols,
        Prod::DenseSpmm => x.cols == om && y.rows == x.rows && y.cols == ok,
        Prod::Sddmm => !c.transpose && x.rows == m && y.cols == k && y.rows == x.cols,
    };
    let bias = match c.bias {
        Some(len) if op == Prod::Fused => len == y.rows,
        _ => true,
    };
    shapes && bias && x.ok() && y.ok()
}

fn run_prod<T: Element, O: Element>(c: &ProdCase, op: Prod, rng: &mut FuzzRng) -> Check {
    let a: BsrMatrix<T> = build_bsr(rng, &c.a, |rng| T::from_f32(rng.random_range(-1.0f32..1.0)));
    let (m, k) = (a.m(), a.k());
    // A's dense form where it is small (else A stores nothing: all zero).
    let dense_a: Option<Vec<f64>> = match m.checked_mul(k) {
        Some(len) if len <= CAP * 4 => Some(
            a.to_dense()
                .map_err(|e| format!("to_dense: {e}"))?
                .iter()
                .map(|v| v.to_f32() as f64)
                .collect(),
        ),
        _ => {
            ensure!(a.nnz_blocks() == 0, "a large matrix with blocks");
            None
        }
    };
    let a_at = |i: usize, j: usize| dense_a.as_ref().map_or(0.0, |d| d[i * k + j]);
    let op_a = |i: usize, j: usize| if c.transpose { a_at(j, i) } else { a_at(i, j) };
    let opts = SpmmOptions::new()
        .alpha(c.alpha)
        .beta(c.beta)
        .transpose_a(c.transpose)
        .backend(c.backend);
    let valid = prod_valid(c, op);
    let xd: Vec<T> = random_values(rng, c.x.len);
    let x_at = |i: usize, j: usize| xd[c.x.offset(i, j)].to_f32() as f64;
    // Every reduction here is over one of these lengths.
    let longest = [
        c.a.br * c.a.bm,
        c.a.bc * c.a.bk,
        c.x.rows,
        c.x.cols,
        c.y.rows,
        c.y.cols,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    let bound = c.alpha.abs() as f64 * longest as f64 + c.beta.abs() as f64 + 1.0;
    let sentinel = O::from_f32(sentinel_above(bound));
    let poison = if c.beta == 0.0 && c.nan_poison {
        O::from_f32(f32::NAN)
    } else {
        sentinel
    };

    if op == Prod::Sddmm {
        let yd: Vec<T> = random_values(rng, c.y.len);
        let y_at = |i: usize, j: usize| yd[c.y.offset(i, j)].to_f32() as f64;
        // S: A's pattern, its values the old ones (random with β ≠ 0, else poison).
        let mut s: BsrMatrix<O> = build_bsr(rng, &c.a, |rng| {
            if c.beta != 0.0 {
                O::from_f32(rng.random_range(-1.0f32..1.0))
            } else {
                poison
            }
        });
        let before = s.clone();
        let r = sparsek::sddmm(c.x.dense(&xd), c.y.dense(&yd), &mut s, &opts);
        ensure!(
            r.is_ok() == valid,
            "sddmm gave {:?}, the oracle says valid = {valid}",
            r.as_ref().err()
        );
        ensure!(
            s.row_ptr() == before.row_ptr() && s.col_idx() == before.col_idx(),
            "sddmm changed S's pattern"
        );
        if r.is_err() {
            ensure!(
                s.values()
                    .iter()
                    .zip(before.values())
                    .all(|(&x, &y)| x.to_f32().to_bits() == y.to_f32().to_bits()),
                "S written by a call that failed ({:?})",
                r.err()
            );
            return Ok(Outcome::Rejected);
        }
        let (bm, bn) = (c.a.bm, c.a.bk);
        let kk = c.x.cols;
        let mut pairs = Vec::new();
        let mut blk = 0;
        for (r, w) in before.row_ptr().windows(2).enumerate() {
            for &col in &before.col_idx()[w[0] as usize..w[1] as usize] {
                for i in 0..bm {
                    for j in 0..bn {
                        let (gi, gj) = (r * bm + i, col as usize * bn + j);
                        let dot: f64 = (0..kk).map(|l| x_at(gi, l) * y_at(l, gj)).sum();
                        let at = blk * bm * bn + i * bn + j;
                        let old = before.values()[at].to_f32() as f64;
                        let want = c.alpha as f64 * dot
                            + if c.beta != 0.0 {
                                c.beta as f64 * old
                            } else {
                                0.0
                            };
                        let got = s.values()[at];
                        ensure!(
                            c.beta != 0.0 || !same_bits(got, poison),
                            "S value {at} not written"
                        );
                        pairs.push((got.to_f32() as f64, want));
                    }
                }
                blk += 1;
            }
        }
        let err = rel_err(&pairs, 0.1);
        ensure!(err <= tol2(c.tin, c.tout), "S off the reference by {err:e}");
        return Ok(Outcome::Accepted);
    }

    // spmm, spmm_fused, dense_spmm: C poisoned outside its view and (β = 0) inside it,
    // random old values inside it with β ≠ 0.
    let y = c.y;
    let (mut yd, addressed) = y.output(sentinel, poison, c.beta, rng);
    let before = yd.clone();
    let bias: Option<Vec<T>> = c.bias.map(|n| random_values(rng, n));
    let r = match op {
        Prod::Spmm => sparsek::spmm(&a, c.x.dense(&xd), y.dense_mut(&mut yd), &opts),
        Prod::Fused => {
            let mut e = sparsek::Epilogue::new().activation(c.act);
            if let Some(b) = &bias {
                e = e.bias(sparsek::Vector::Host(b));
            }
            sparsek::spmm_fused(&a, c.x.dense(&xd), y.dense_mut(&mut yd), &e, &opts)
        }
        _ => sparsek::dense_spmm(c.x.dense(&xd), &a, y.dense_mut(&mut yd), &opts),
    };
    ensure!(
        r.is_ok() == valid,
        "{op:?} gave {:?}, the oracle says valid = {valid}",
        r.as_ref().err()
    );
    if r.is_err() {
        ensure!(
            yd.iter()
                .zip(&before)
                .all(|(&x, &y)| x.to_f32().to_bits() == y.to_f32().to_bits()),
            "C written by a call that failed ({:?})",
            r.err()
        );
        return Ok(Outcome::Rejected);
    }
    let inner = match op {
        Prod::DenseSpmm => c.x.cols,
        _ => c.x.rows,
    };
    let mut pairs = Vec::with_capacity(addressed.len());
    let mut seen = vec![false; yd.len()];
    for i in 0..y
        .rows
        .min(if addressed.is_empty() { 0 } else { usize::MAX })
    {
        for j in 0..y.cols {
            let dot: f64 = (0..inner)
                .map(|l| match op {
                    Prod::DenseSpmm => x_at(i, l) * op_a(l, j),
                    _ => op_a(i, l) * x_at(l, j),
                })
                .sum();
            let off = y.offset(i, j);
            seen[off] = true;
            let mut v = c.alpha as f64 * dot;
            if let Some(b) = &bias {
                v += b[i].to_f32() as f64;
            }
            if c.beta != 0.0 {
                v += c.beta as f64 * before[off].to_f32() as f64;
            }
            let want = act_f64(c.act, v);
            ensure!(
                c.beta != 0.0 || !same_bits(yd[off], poison),
                "C({i}, {j}) not written"
            );
            pairs.push((yd[off].to_f32() as f64, want));
        }
    }
    for (i, (&x, &b)) in yd.iter().zip(&before).enumerate() {
        ensure!(
            seen[i] || x.to_f32().to_bits() == b.to_f32().to_bits(),
            "C[{i}] outside the view written"
        );
    }
    let err = rel_err(&pairs, 0.1);
    ensure!(
        err <= tol2(c.tin, c.tout),
        "C off the reference by {err:e} (tolerance {:e})",
        tol2(c.tin, c.tout)
    );
    Ok(Outcome::Accepted)
}

fn fuzz_prod(name: &str, salt: u64, op: Prod) {
    DRIVER.run(
        name,
        salt,
        |rng| gen_prod(rng, op),
        |c, rng| match (c.tin, c.tout) {
            (Ty::F32, Ty::F32) => run_prod::<f32, f32>(c, op, rng),
            (Ty::Bf16, Ty::F32) => run_prod::<bf16, f32>(c, op, rng),
            (Ty::F16, Ty::F32) => run_prod::<f16, f32>(c, op, rng),
            (Ty::Bf16, Ty::Bf16) => run_prod::<bf16, bf16>(c, op, rng),
            (Ty::F16, Ty::F16) => run_prod::<f16, f16>(c, op, rng),
            (Ty::F32, Ty::Bf16) => run_prod::<f32, bf16>(c, op, rng),
            other => Err(format!("no type pair {other:?} in the fuzz")),
        },
    );
}

#[test]
fn fuzz_spmm() {
    fuzz_prod("spmm", 8, Prod::Spmm);
}

#[test]
fn fuzz_spmm_fused() {
    fuzz_prod("spmm_fused", 9, Prod::Fused);
}

#[test]
fn fuzz_dense_spmm() {
    fuzz_prod("dense_spmm", 10, Prod::DenseSpmm);
}

#[test]
fn fuzz_sddmm() {
    fuzz_prod("sddmm", 11, Prod::Sddmm);
}
