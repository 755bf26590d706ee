//! Target: SparseLinear (new, with_options, forward on the host).

use std::fmt::Debug;

use rand::Rng;
use sparsek::{bf16, f16, Activation, Backend, BsrMatrix, Element, SpmmOptions};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome};
use crate::inputs::{act_f64, buffer_len, huge, rel_err, same_bits, sentinel_above, tol2, Ty, CAP};
use crate::operands::{build_bsr, BsrSpec};
use crate::products::{gen_prod, Prod};
use crate::DRIVER;

#[derive(Debug, Clone)]
struct LinearCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    tin: Ty,
    tout: Ty,
    w: BsrSpec,
    bias: Option<usize>,
    act: Activation,
    /// `with_options(alpha, beta, transpose_a, backend)`, if called.
    options: Option<(f32, f32, bool, Backend)>,
    batch: usize,
    x_len: usize,
    y_len: usize,
    nan_poison: bool,
}

fn gen_linear(rng: &mut FuzzRng) -> LinearCase {
    let clean = rng.random_bool(0.5);
    let p = gen_prod(rng, Prod::Fused);
    let (m, k) = (p.a.m(), p.a.k());
    let batch = if !clean && rng.random_bool(0.05) {
        huge(rng)
    } else {
        rng.random_range(0..=5)
    };
    // Row-major x (batch x in) and y (batch x out): what they need, then a buffer for it.
    let need = |rows: usize, cols: usize| {
        if rows == 0 || cols == 0 {
            Some(0)
        } else {
            (rows as u128 - 1)
                .checked_mul(cols.max(1) as u128)
                .and_then(|x| x.checked_add(cols as u128))
        }
    };
    let x_len = buffer_len(rng, need(batch, k), clean);
    let y_len = buffer_len(rng, need(batch, m), clean);
    let bias = match rng.random_range(0..10) {
        0..=3 => None,
        4 if !clean => Some(m.saturating_add(1).min(CAP)),
        5 if !clean => Some(m.saturating_sub(1).min(CAP)),
        _ => Some(m.min(CAP)),
    };
    let options =
        rng.random_bool(0.5)
            .then_some((p.alpha, p.beta, rng.random_bool(0.3), p.backend));
    LinearCase {
        clean,
        tin: p.tin,
        tout: p.tout,
        w: p.a,
        bias,
        act: p.act,
        options,
        batch,
        x_len,
        y_len,
        nan_poison: p.nan_poison,
    }
}

fn run_linear<T: Element, O: Element>(c: &LinearCase, rng: &mut FuzzRng) -> Check {
    let w: BsrMatrix<T> = build_bsr(rng, &c.w, |rng| T::from_f32(rng.random_range(-1.0f32..1.0)));
    let (out_f, in_f) = (w.m(), w.k());
    let dense_w: Option<Vec<f64>> = match out_f.checked_mul(in_f) {
        Some(len) if len <= CAP * 4 => Some(
            w.to_dense()
                .map_err(|e| format!("to_dense: {e}"))?
                .iter()
                .map(|v| v.to_f32() as f64)
                .collect(),
        ),
        _ => None,
    };
    let bias: Option<Vec<T>> = c.bias.map(|n| random_values(rng, n));
    let layer = sparsek::SparseLinear::new(w, bias.clone(), c.act);
    let bias_ok = c.bias.is_none_or(|n| n == out_f);
    ensure!(
        layer.is_ok() == bias_ok,
        "SparseLinear::new with a bias of {:?} for {out_f} outputs gave {:?}",
        c.bias,
        layer.as_ref().err()
    );
    let Ok(mut layer) = layer else {
        return Ok(Outcome::Rejected);
    };
    ensure!(
        layer.activation() == c.act && layer.weight().m() == out_f,
        "the layer's accessors"
    );
    let (alpha, beta, backend) = match c.options {
        None => (1.0, 0.0, Backend::Auto),
        Some((alpha, beta, transpose, backend)) => {
            layer = layer.with_options(
                SpmmOptions::new()
                    .alpha(alpha)
                    .beta(beta)
                    .transpose_a(transpose)
                    .backend(backend),
            );
            (alpha, beta, backend)
        }
    };
    let x: Vec<T> = random_values(rng, c.x_len);
    let batch = c.batch;
    // y: random old values inside batch x out where β ≠ 0, else poisoned; sentinel after.
    let inside = (batch as u128 * out_f as u128).min(c.y_len as u128) as usize;
    let bound = alpha.abs() as f64 * in_f.max(out_f) as f64 + beta.abs() as f64 + 1.0;
    let sentinel = O::from_f32(sentinel_above(bound));
    let poison = if beta == 0.0 && c.nan_poison {
        O::from_f32(f32::NAN)
    } else {
        sentinel
    };
    let mut y: Vec<O> = (0..c.y_len)
        .map(|i| {
            if i >= inside {
                sentinel
            } else if beta != 0.0 {
                O::from_f32(rng.random_range(-1.0f32..1.0))
            } else {
                poison
            }
        })
        .collect();
    let before = y.clone();
    let r = layer.forward(&x, batch, &mut y);
    let need = |cols: usize| -> Option<u128> {
        if batch == 0 || cols == 0 {
            Some(0)
        } else {
            Some((batch as u128 - 1) * cols as u128 + cols as u128)
        }
    };
    let fits = |cols: usize, len: usize| {
        need(cols).is_some_and(|n| n <= usize::MAX as u128 && n <= len as u128)
    };
    let valid = matches!(backend, Backend::Auto | Backend::Cpu)
        && fits(in_f, x.len())
        && fits(out_f, y.len());
    ensure!(
        r.is_ok() == valid,
        "forward gave {:?}, the oracle says valid = {valid}",
        r.as_ref().err()
    );
    if r.is_err() {
        ensure!(
            y.iter()
                .zip(&before)
                .all(|(&a, &b)| a.to_f32().to_bits() == b.to_f32().to_bits()),
            "y written by a call that failed ({:?})",
            r.err()
        );
        return Ok(Outcome::Rejected);
    }
    let mut pairs = Vec::new();
    if batch > 0 && out_f > 0 {
        for b in 0..batch {
            for o in 0..out_f {
                let dot: f64 = (0..in_f)
                    .map(|i| {
                        dense_w.as_ref().map_or(0.0, |d| d[o * in_f + i])
                            * x[b * in_f + i].to_f32() as f64
                    })
                    .sum();
                let at = b * out_f + o;
                let mut v = alpha as f64 * dot;
                if let Some(bias) = &bias {
                    v += bias[o].to_f32() as f64;
                }
                if beta != 0.0 {
                    v += beta as f64 * before[at].to_f32() as f64;
                }
                ensure!(
                    beta != 0.0 || !same_bits(y[at], poison),
                    "y[{b}][{o}] not written"
                );
                pairs.push((y[at].to_f32() as f64, act_f64(c.act, v)));
            }
        }
    }
    let written = batch.saturating_mul(out_f);
    ensure!(
        y[written.min(y.len())..]
            .iter()
            .all(|&v| same_bits(v, sentinel)),
        "y past batch x out written"
    );
    let err = rel_err(&pairs, 0.1);
    ensure!(err <= tol2(c.tin, c.tout), "y off the reference by {err:e}");
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_sparse_linear() {
    DRIVER.run("SparseLinear", 14, gen_linear, |c, rng| {
        match (c.tin, c.tout) {
            (Ty::F32, Ty::F32) => run_linear::<f32, f32>(c, rng),
            (Ty::Bf16, Ty::F32) => run_linear::<bf16, f32>(c, rng),
            (Ty::F16, Ty::F32) => run_linear::<f16, f32>(c, rng),
            (Ty::Bf16, Ty::Bf16) => run_linear::<bf16, bf16>(c, rng),
            (Ty::F16, Ty::F16) => run_linear::<f16, f16>(c, rng),
            (Ty::F32, Ty::Bf16) => run_linear::<f32, bf16>(c, rng),
            other => Err(format!("no type pair {other:?} in the fuzz")),
        }
    });
}
