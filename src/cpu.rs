//! The CPU reference backend: the oracle for every GPU test, and what runs without a GPU.
//! Parallel over block-rows (rayon), f32 accumulation, inner loops blocked over `n` so a
//! block's rows of B stay in cache.

use rayon::prelude::*;

use crate::format::BsrMatrix;
use crate::dense::{DenseShape, Layout};
use crate::element::Element;

/// Columns of B processed together: 256 f32 x bk rows of B stay in L2.
const N_CHUNK: usize = 256;

/// `C = α·A·B + β·C`. Shapes were checked by the caller.
pub(crate) fn spmm<T: Element, O: Element>(
    a: &BsrMatrix<T>,
    b: &[T],
    b_shape: &DenseShape,
    c: &mut [O],
    c_shape: &DenseShape,
    alpha: f32,
    beta: f32,
) {
    let (m, n) = (a.m(), c_shape.cols);
    if m == 0 || n == 0 {
        return;
    }
    // B once as packed row-major f32: every layout and type then shares one inner loop.
    let mut bf = vec![0f32; a.k() * n];
    bf.par_chunks_mut(n).enumerate().for_each(|(kk, row)| {
        for (j, v) in row.iter_mut().enumerate() {
            *v = b[b_shape.layout.offset(kk, j, b_shape.ld)].to_f32();
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

    // Epilogue. β = 0 never reads C, so a NaN-poisoned C is fully overwritten.
    let epilogue = |acc: f32, old: O| -> O {
        let v = if beta == 0.0 {
            alpha * acc
        } else {
            alpha * acc + beta * old.to_f32()
        };
        O::from_f32(v)
    };
    let ld = c_shape.ld;
    match c_shape.layout {
        Layout::RowMajor => c
            .par_chunks_mut(ld)
            .take(m)
            .enumerate()
            .for_each(|(i, row)| {
                for (j, out) in row[..n].iter_mut().enumerate() {
                    *out = epilogue(acc[i * n + j], *out);
                }
            }),
        Layout::ColMajor => c
            .par_chunks_mut(ld)
            .take(n)
            .enumerate()
            .for_each(|(j, col)| {
                for (i, out) in col[..m].iter_mut().enumerate() {
                    *out = epilogue(acc[i * n + j], *out);
                }
            }),
    }
}
