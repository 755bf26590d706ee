//! The CPU reference of the row scaling: each value times its row's scale in f32.

use crate::element::Element;
use crate::format::BsrMatrix;

/// `C = diag(s)·A` into `c` (A's values' length; `s` has A's `m` values, both checked by the
/// caller).
pub(crate) fn rowscale<T: Element>(a: &BsrMatrix<T>, s: &[f32], c: &mut [T]) {
    let (bm, bk) = (a.block().rows, a.block().cols);
    let block_len = bm * bk;
    let row_ptr = a.row_ptr();
    for r in 0..row_ptr.len().saturating_sub(1) {
        let blocks = row_ptr[r] as usize..row_ptr[r + 1] as usize;
        for j in blocks {
            let (src, dst) = (
                &a.values()[j * block_len..][..block_len],
                &mut c[j * block_len..][..block_len],
            );
            for (i, (src_row, dst_row)) in src.chunks(bk).zip(dst.chunks_mut(bk)).enumerate() {
                let scale = s[r * bm + i];
                for (x, y) in src_row.iter().zip(dst_row) {
                    *y = T::from_f32(x.to_f32() * scale);
                }
            }
        }
    }
}
