//! The CPU reference backend: the oracle for every GPU test, and what runs without a GPU.
//! `spmm` (`op(A)` = `A` or `Aᵀ`) and `sddmm`, parallel over output block-rows or blocks
//! (rayon), f32 accumulation in a fixed order, inner loops blocked over `n` so a block's
//! rows of B stay in cache.

use rayon::prelude::*;

use crate::dense::{packed_f32, DenseShape, Layout};
use crate::element::Element;
use crate::epilogue::Activation;
use crate::error::{BsrError, Error};
use crate::format::{BsrMatrix, TransposeIndex};
use crate::quantize::{dequantize_bsr, BlockScales};

/// The epilogue's scalars and vector: `C = act(α·A·B + bias + β·C)`; `bias` has `m`
/// values (checked by the caller). Gated (`Epilogue::gated`, its rules checked by the
/// caller): `C[i·bm + r] = act(α·g + bias[g]) · (α·u + bias[u])` for A's rows
/// `g = 2i·bm + r` and `u = g + bm`.
pub(crate) struct Scalars<'a, T> {
    pub alpha: f32,
    pub beta: f32,
    pub bias: Option<&'a [T]>,
    pub activation: Activation,
    pub gated: bool,
}

/// Columns of B processed together: 256 f32 x bk rows of B stay in L2.
const N_CHUNK: usize = 256;

/// `C = α·op(A)·B + β·C`, `op(A)` = `A` or (`transpose`) `Aᵀ`. Shapes were checked by the
/// caller (`spmm::check_operands`): B holds `(outer - 1) * ld + extent >= rows * n` elements
/// and C `>= rows * n`, so every product and offset below (`k * n`, `m * n`,
/// `(k0 + kk) * n`, `i * n + j`, the views' offsets) is below a length that exists and
/// cannot overflow; `j * bm * bk` and `r * bk + kk` are below `values.len() = nnzb * bm *
/// bk` (validated when A was built). `Aᵀ` needs the transpose index: `BsrError::Allocation`
/// when it cannot be allocated, with C untouched.
pub(crate) fn spmm<T: Element, TB: Element, V: Element, O: Element>(
    a: &BsrMatrix<T>,
    transpose: bool,
    b: &[TB],
    b_shape: &DenseShape,
    c: &mut [O],
    c_shape: &DenseShape,
    scalars: Scalars<'_, V>,
) -> Result<(), BsrError> {
    let (rows, n) = (c_shape.rows, c_shape.cols);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let bf = packed_f32(b, b_shape);
    spmm_packed(a, transpose, &bf, n, c, c_shape, scalars)
}

/// [`spmm`] from B already packed row-major in f32 (`op(A)`'s columns x `n`).
pub(crate) fn spmm_packed<T: Element, V: Element, O: Element>(
    a: &BsrMatrix<T>,
    transpose: bool,
    bf: &[f32],
    n: usize,
    c: &mut [O],
    c_shape: &DenseShape,
    scalars: Scalars<'_, V>,
) -> Result<(), BsrError> {
    if c_shape.rows == 0 || n == 0 {
        return Ok(());
    }
    let acc = if transpose {
        accumulate_transposed(a, &a.transpose_index()?, bf, n)
    } else {
        accumulate(a, bf, n)
    };
    if scalars.gated {
        // The halves meet in f32 as on the device; C then takes them as they are.
        let glu = gate(&acc, n, a.block().rows, &scalars);
        let plain = Scalars::<V> {
            alpha: 1.0,
            beta: 0.0,
            bias: None,
            activation: Activation::None,
            gated: false,
        };
        epilogue(&glu, c, c_shape, plain);
    } else {
        epilogue(&acc, c, c_shape, scalars);
    }
    Ok(())
}

/// The gated rows (`m/2 x n`, row-major) from A·B's `m` rows (gate and up block-rows
/// interleaved, `bm` rows each): `act(α·g + bias[g]) · (α·u + bias[u])`.
fn gate<V: Element>(acc: &[f32], n: usize, bm: usize, s: &Scalars<'_, V>) -> Vec<f32> {
    let mut out = vec![0f32; acc.len() / 2];
    out.par_chunks_mut(bm * n).enumerate().for_each(|(p, out)| {
        for r in 0..bm {
            let (g, u) = (2 * p * bm + r, (2 * p + 1) * bm + r);
            for j in 0..n {
                let mut gv = s.alpha * acc[g * n + j];
                let mut uv = s.alpha * acc[u * n + j];
                if let Some(bias) = s.bias {
                    gv += bias[g].to_f32();
                    uv += bias[u].to_f32();
                }
                out[r * n + j] = s.activation.apply(gv) * uv;
            }
        }
    });
    out
}

/// The CPU reference of the FP8 products: A dequantized (`stored * scale`, its block's
/// scale) and B dequantized when FP8 (its column's scale, or the tensor's), both to f32,
/// then the f32 product and epilogue of [`spmm`] (the bias of C's type). `crate::spmm`
/// checked the shapes, types and scales' lengths. `BsrError::Allocation` when the
/// dequantized A cannot be allocated, with C untouched.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spmm_fp8<Q: Element, TB: Element, V: Element, O: Element>(
    a: &BsrMatrix<Q>,
    a_scales: &BlockScales,
    b: &[TB],
    b_shape: &DenseShape,
    b_scales: Option<&[f32]>,
    c: &mut [O],
    c_shape: &DenseShape,
    scalars: Scalars<'_, V>,
) -> Result<(), Error> {
    let n = c_shape.cols;
    if c_shape.rows == 0 || n == 0 {
        return Ok(());
    }
    let af = dequantize_bsr(a, a_scales)?;
    let mut bf = packed_f32(b, b_shape);
    // One scale per tensor (1 value) or per column (n values, checked).
    if let Some(s) = b_scales {
        if s.len() == 1 {
            bf.par_iter_mut().for_each(|v| *v *= s[0]);
        } else {
            bf.par_chunks_mut(n).for_each(|row| {
                for (v, s) in row.iter_mut().zip(s) {
                    *v *= s;
                }
            });
        }
    }
    Ok(spmm_packed(&af, false, &bf, n, c, c_shape, scalars)?)
}

/// `A·B` in f32 (`m x n`, row-major) from B packed row-major.
fn accumulate<T: Element>(a: &BsrMatrix<T>, bf: &[f32], n: usize) -> Vec<f32> {
    let (bm, bk) = (a.block().rows, a.block().cols);
    let mut acc = vec![0f32; a.m() * n];
    acc.par_chunks_mut(bm * n)
        .zip(a.block_rows().collect::<Vec<_>>())
        .for_each(|(acc, row)| {
            for n0 in (0..n).step_by(N_CHUNK) {
                let n1 = (n0 + N_CHUNK).min(n);
                for (j, &col) in row.col_idx.iter().enumerate() {
                    let blk = &row.values[j * bm * bk..][..bm * bk];
                    let k0 = col as usize * bk;
                    for r in 0..bm {
                        let out = &mut acc[r * n + n0..r * n + n1];
                        for kk in 0..bk {
                            let av = blk[r * bk + kk].to_f32();
                            let brow = &bf[(k0 + kk) * n + n0..(k0 + kk) * n + n1];
                            for (o, bv) in out.iter_mut().zip(brow) {
                                *o += av * bv;
                            }
                        }
                    }
                }
            }
        });
    acc
}

/// `Aᵀ·B` in f32 (`k x n`, row-major) from B (`m x n`) packed row-major, walking A's
/// transpose index: block-column `c` of A is block-row `c` of `Aᵀ`, each of its blocks read
/// in place and transposed. Offsets as in `accumulate` (`id < nnzb`, `r < block-rows`).
fn accumulate_transposed<T: Element>(
    a: &BsrMatrix<T>,
    idx: &TransposeIndex,
    bf: &[f32],
    n: usize,
) -> Vec<f32> {
    let (bm, bk) = (a.block().rows, a.block().cols);
    let mut acc = vec![0f32; a.k() * n];
    acc.par_chunks_mut(bk * n).enumerate().for_each(|(c, acc)| {
        let listed = idx.col_ptr()[c] as usize..idx.col_ptr()[c + 1] as usize;
        for n0 in (0..n).step_by(N_CHUNK) {
            let n1 = (n0 + N_CHUNK).min(n);
            for j in listed.clone() {
                let (r, id) = (idx.row_idx()[j] as usize, idx.block_id()[j] as usize);
                let blk = &a.values()[id * bm * bk..][..bm * bk];
                for rr in 0..bm {
                    let brow = &bf[(r * bm + rr) * n + n0..(r * bm + rr) * n + n1];
                    for kk in 0..bk {
                        let av = blk[rr * bk + kk].to_f32();
                        let out = &mut acc[kk * n + n0..kk * n + n1];
                        for (o, bv) in out.iter_mut().zip(brow) {
                            *o += av * bv;
                        }
                    }
                }
            }
        }
    });
    acc
}

/// `C = act(α·acc + bias + β·C)` for `acc` row-major (`rows x n`, C's shape). β = 0 never
/// reads C, so a NaN-poisoned C is fully overwritten.
fn epilogue<T: Element, O: Element>(
    acc: &[f32],
    c: &mut [O],
    c_shape: &DenseShape,
    scalars: Scalars<'_, T>,
) {
    let Scalars {
        alpha,
        beta,
        bias,
        activation,
        ..
    } = scalars;
    let (m, n) = (c_shape.rows, c_shape.cols);
    let epilogue = |i: usize, acc: f32, old: O| -> O {
        let mut v = alpha * acc;
        if let Some(bias) = bias {
            v += bias[i].to_f32();
        }
        if beta != 0.0 {
            v += beta * old.to_f32();
        }
        O::from_f32(activation.apply(v))
    };
    let ld = c_shape.ld;
    match c_shape.layout {
        Layout::RowMajor => c
            .par_chunks_mut(ld)
            .take(m)
            .enumerate()
            .for_each(|(i, row)| {
                for (j, out) in row[..n].iter_mut().enumerate() {
                    *out = epilogue(i, acc[i * n + j], *out);
                }
            }),
        Layout::ColMajor => c
            .par_chunks_mut(ld)
            .take(n)
            .enumerate()
            .for_each(|(j, col)| {
                for (i, out) in col[..m].iter_mut().enumerate() {
                    *out = epilogue(i, acc[i * n + j], *out);
                }
            }),
    }
}
