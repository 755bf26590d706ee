//! The CPU reference of SDDMM: f32 accumulation in ascending k, blocks in parallel (rayon).

use rayon::prelude::*;

use crate::dense::{packed_f32, DenseShape};
use crate::element::Element;
use crate::format::BsrMatrix;

/// SDDMM: `S = α·(A·B) ⊙ mask + β·S` on S's blocks only (S's pattern is the mask). A is
/// `m x k`, B `k x n` (views checked by the caller against S's `m x n`); each block of S is
/// `bm x bn` dot products of A's rows and B's columns, accumulated in f32 in ascending k.
/// β = 0 never reads S's old values.
pub(crate) fn sddmm<T: Element, O: Element>(
    a: &[T],
    a_shape: &DenseShape,
    b: &[T],
    b_shape: &DenseShape,
    s: &mut BsrMatrix<O>,
    alpha: f32,
    beta: f32,
) {
    let k = a_shape.cols;
    let (bm, bn) = (s.block().rows, s.block().cols);
    if s.nnz_blocks() == 0 || bm * bn == 0 {
        return;
    }
    let af = packed_f32(a, a_shape);
    // B's columns contiguous: Bᵀ packed row-major (n x k).
    let btf = packed_f32(b, &b_shape.t());
    let col_idx = s.col_idx().to_vec();
    let row_ptr = s.row_ptr().to_vec();
    // Block j of S is values[j * bm * bn ..][.. bm * bn]; its block-row is found from row_ptr.
    s.values_mut()
        .par_chunks_mut(bm * bn)
        .enumerate()
        .for_each(|(j, blk)| {
            // row_ptr is non-decreasing from 0 to nnzb: the block-row holding block j.
            let r = row_ptr.partition_point(|&p| p as usize <= j) - 1;
            let c = col_idx[j] as usize;
            for i in 0..bm {
                let arow = &af[(r * bm + i) * k..][..k];
                for jj in 0..bn {
                    let bcol = &btf[(c * bn + jj) * k..][..k];
                    let dot: f32 = arow.iter().zip(bcol).fold(0f32, |s, (x, y)| s + x * y);
                    let out = &mut blk[i * bn + jj];
                    let mut v = alpha * dot;
                    if beta != 0.0 {
                        v += beta * out.to_f32();
                    }
                    *out = O::from_f32(v);
                }
            }
        });
}
