//! The CPU reference backend: the oracle for every GPU test, and what runs without a GPU.
//! Parallel over block-rows (rayon), f32 accumulation, inner loops blocked over `n` so a
//! block's rows of B stay in cache.

use rayon::prelude::*;

use crate::dense::{DenseShape, Layout};
use crate::element::Element;
use crate::epilogue::Activation;
use crate::format::BsrMatrix;

/// The epilogue's scalars and vector: `C = act(α·A·B + bias + β·C)`; `bias` has `m`
/// values (checked by the caller).
pub(crate) struct Scalars<'a, T> {
    pub alpha: f32,
    pub beta: f32,
    pub bias: Option<&'a [T]>,
    pub activation: Activation,
}

/// Columns of B processed together: 256 f32 x bk rows of B stay in L2.
const N_CHUNK: usize = 256;

/// `C = α·A·B + β·C`. Shapes were checked by the caller (`spmm::check_view`): B holds
/// `(outer - 1) * ld + extent >= k * n` elements and C `>= m * n`, so every product and
/// offset below (`k * n`, `m * n`, `(k0 + kk) * n`, `i * n + j`, the views' offsets) is
/// below a length that exists and cannot overflow; `j * bm * bk` and `r * bk + kk` are
/// below `values.len() = nnzb * bm * bk` (validated when A was built).
pub(crate) fn spmm<T: Element, O: Element>(
    a: &BsrMatrix<T>,
    b: &[T],
    b_shape: &DenseShape,
    c: &mut [O],
    c_shape: &DenseShape,
    scalars: Scalars<'_, T>,
) {
    let Scalars {
        alpha,
        beta,
        bias,
        activation,
    } = scalars;
    let (m, n) = (a.m(), c_shape.cols);
    if m == 0 || n == 0 {
        return;
    }
    // B once as packed row-major f32: every layout and type then shares one inner loop.
    let mut bf = vec![0f32; a.k() * n];
    bf.par_chunks_mut(n).enumerate().for_each(|(kk, row)| {
        for (j, v) in row.iter_mut().enumerate() {
            *v = b[b_shape.layout.offset_in_view(kk, j, b_shape.ld)].to_f32();
        }
    });

    let (bm, bk) = (a.block().rows, a.block().cols);
    let mut acc = vec![0f32; m * n];
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

    // Epilogue: act(α·acc + bias + β·C). β = 0 never reads C, so a NaN-poisoned C is fully
    // overwritten.
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
