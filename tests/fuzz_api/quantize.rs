//! Target: the quantizers (BsrMatrix::quantize_fp8, QuantizedDense::quantize).

use std::fmt::Debug;

use rand::Rng;
use sparsek::{bf16, f16, BsrMatrix, Element};

use crate::fuzz::{ensure, Check, FuzzRng, Outcome, ALLOC_LIMIT};
use crate::inputs::{dim, ty, Ty, CAP};
use crate::operands::{build_bsr, gen_bsr_spec, gen_dview, BsrSpec, DView};
use crate::DRIVER;

#[derive(Debug, Clone)]
struct QuantCase {
    /// A BSR matrix (else a dense view).
    bsr: bool,
    e5m2: bool,
    /// Per block / per column (else per tensor).
    per_part: bool,
    /// The input type: f32, f16, bf16.
    ty: Ty,
    a: BsrSpec,
    d: DView,
    /// Where a NaN or infinity goes, if anywhere: an index into the input (taken modulo
    /// its length) and the value.
    bad: Option<(usize, f32)>,
    /// The values' binade: 2^e.
    e: i32,
}

fn gen_quant(rng: &mut FuzzRng) -> QuantCase {
    let clean = rng.random_bool(0.5);
    let a = gen_bsr_spec(rng, clean);
    let (r, c) = (dim(rng, 8, 0.05), dim(rng, 8, 0.05));
    let d = gen_dview(rng, r, c, clean);
    QuantCase {
        bsr: rng.random_bool(0.5),
        e5m2: rng.random_bool(0.5),
        per_part: rng.random_bool(0.5),
        ty: ty(rng),
        a,
        d,
        bad: (!clean && rng.random_bool(0.3)).then(|| {
            (
                rng.random_range(0..CAP),
                [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][rng.random_range(0..3)],
            )
        }),
        e: rng.random_range(-12..12),
    }
}

/// Half an FP8 spacing at `x` (stored units) and the error bound of one value.
fn quant_ok<Q: sparsek::Fp8>(v: f32, q: Q, s: f32) -> bool {
    let (v, s64) = (v as f64, s as f64);
    let x = (v / s64).abs();
    let half = if x < Q::MIN_POSITIVE as f64 {
        Q::MIN_SUBNORMAL as f64 / 2.0
    } else {
        ((x.min(Q::MAX as f64)).log2().floor() - Q::MANTISSA_BITS as f64).exp2() / 2.0
    };
    let deq = (q.to_f32() * s) as f64;
    (deq - v).abs() <= half * s64 * (1.0 + 1e-6) + v.abs() * 2f64.powi(-22)
}

fn run_quant<Q: sparsek::Fp8, T: Element>(c: &QuantCase, rng: &mut FuzzRng) -> Check {
    let scale_e = 2f32.powi(c.e);
    let value = |rng: &mut FuzzRng| T::from_f32(rng.random_range(-1.0f32..1.0) * scale_e);
    let scale_ok = |s: f32| s.is_normal() && s > 0.0;
    if c.bsr {
        let a: BsrMatrix<T> = build_bsr(rng, &c.a, value);
        let mut vals = a.values().to_vec();
        let mut bad_at = None;
        if let Some((i, v)) = c.bad {
            if !vals.is_empty() {
                let i = i % vals.len();
                vals[i] = T::from_f32(v);
                bad_at = Some(i);
            }
        }
        let a = BsrMatrix::from_parts(
            a.m(),
            a.k(),
            a.block(),
            a.row_ptr().to_vec(),
            a.col_idx().to_vec(),
            vals,
        )
        .map_err(|e| e.to_string())?;
        let g = if c.per_part {
            sparsek::BlockGranularity::PerBlock
        } else {
            sparsek::BlockGranularity::PerTensor
        };
        let r = a.quantize_fp8::<Q>(g);
        ensure!(
            r.is_ok() == bad_at.is_none(),
            "quantize_fp8 gave {:?} with a non-finite value at {bad_at:?}",
            r.as_ref().err()
        );
        let Ok(q) = r else {
            ensure!(
                matches!(r, Err(sparsek::Error::NonFinite { index, .. }) if Some(index) == bad_at),
                "not NonFinite at {bad_at:?}: {:?}",
                r.err()
            );
            return Ok(Outcome::Rejected);
        };
        ensure!(
            q.matrix().row_ptr() == a.row_ptr() && q.matrix().col_idx() == a.col_idx(),
            "the pattern changed"
        );
        let blk = a.block().len();
        for (i, (v, &qv)) in a.values().iter().zip(q.matrix().values()).enumerate() {
            let s = q
                .scales()
                .of_block(i / blk)
                .ok_or_else(|| format!("no scale for block {}", i / blk))?;
            ensure!(scale_ok(s), "scale {s}");
            ensure!(
                quant_ok(v.to_f32(), qv, s),
                "value {i}: {} -> {} * {s}",
                v.to_f32(),
                qv.to_f32()
            );
        }
        return Ok(Outcome::Accepted);
    }
    // Dense: a NaN in the buffer matters only inside the view.
    let d = c.d;
    let mut data: Vec<T> = (0..d.len).map(|_| value(rng)).collect();
    let mut bad_in_view = None;
    if let Some((i, v)) = c.bad {
        if !data.is_empty() {
            let i = i % data.len();
            data[i] = T::from_f32(v);
            let inside = d.ok()
                && (0..d.rows.min(CAP))
                    .any(|r| (0..d.cols.min(CAP)).any(|cc| d.offset(r, cc) == i));
            if inside {
                bad_in_view = Some(i);
            }
        }
    }
    let shape = sparsek::DenseShape {
        rows: d.rows,
        cols: d.cols,
        layout: d.layout,
        ld: d.ld,
    };
    let g = if c.per_part {
        sparsek::ColumnGranularity::PerColumn
    } else {
        sparsek::ColumnGranularity::PerTensor
    };
    let r = sparsek::QuantizedDense::<Q>::quantize(&data, shape, g);
    // A 0 x n view with n huge needs n per-column scales: an allocation error is allowed.
    let huge_scales = c.per_part && d.cols as u128 * 4 > ALLOC_LIMIT as u128;
    let valid = d.ok() && bad_in_view.is_none();
    if huge_scales && valid && r.is_err() {
        ensure!(
            matches!(
                r,
                Err(sparsek::Error::Bsr(sparsek::BsrError::Allocation { .. }))
            ),
            "not an allocation error: {:?}",
            r.err()
        );
        return Ok(Outcome::Rejected);
    }
    ensure!(
        r.is_ok() == valid,
        "quantize gave {:?}, the oracle says valid = {valid} (non-finite at {bad_in_view:?})",
        r.as_ref().err()
    );
    let Ok(q) = r else {
        return Ok(Outcome::Rejected);
    };
    let packed = sparsek::DenseShape::packed(d.rows, d.cols, d.layout);
    ensure!(q.shape() == packed, "shape {:?}", q.shape());
    for j in 0..if d.elements() == 0 { 0 } else { d.cols } {
        let s = if c.per_part {
            q.scales()[j]
        } else {
            q.scales()[0]
        };
        ensure!(scale_ok(s), "scale {s}");
        for i in 0..d.rows {
            let v = data[d.offset(i, j)].to_f32();
            let qv = q.values()[packed.layout.offset(i, j, packed.ld).unwrap_or(usize::MAX)];
            ensure!(
                quant_ok(v, qv, s),
                "({i}, {j}): {v} -> {} * {s}",
                qv.to_f32()
            );
        }
    }
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_quantize_fp8() {
    DRIVER.run("quantize_fp8", 16, gen_quant, |c, rng| {
        match (c.e5m2, c.ty) {
            (false, Ty::F32) => run_quant::<sparsek::F8E4M3, f32>(c, rng),
            (false, Ty::F16) => run_quant::<sparsek::F8E4M3, f16>(c, rng),
            (false, Ty::Bf16) => run_quant::<sparsek::F8E4M3, bf16>(c, rng),
            (true, Ty::F32) => run_quant::<sparsek::F8E5M2, f32>(c, rng),
            (true, Ty::F16) => run_quant::<sparsek::F8E5M2, f16>(c, rng),
            (true, Ty::Bf16) => run_quant::<sparsek::F8E5M2, bf16>(c, rng),
        }
    });
}
