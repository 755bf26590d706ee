//! The f64 oracle's view of FP8 weights, shared by tests/mlp.rs and the fuzz_api targets.

use sparsek::{Fp8, QuantizedBsr};

/// Dense f64 form (row-major) of FP8 weights with their scales: `stored * scale` (its
/// block's, or the tensor's), the product taken in f64.
pub fn dequantized64<Q: Fp8>(q: &QuantizedBsr<Q>) -> Vec<f64> {
    let m = q.matrix();
    let (bm, bk) = (m.block().rows, m.block().cols);
    let mut out = vec![0f64; m.m() * m.k()];
    for row in m.block_rows() {
        let first = m.row_ptr()[row.index] as usize;
        for (j, &col) in row.col_idx.iter().enumerate() {
            let s = q.scales().of_block(first + j).unwrap_or(1.0) as f64;
            for r in 0..bm {
                for c in 0..bk {
                    out[(row.index * bm + r) * m.k() + col as usize * bk + c] =
                        row.values[j * bm * bk + r * bk + c].to_f32() as f64 * s;
                }
            }
        }
    }
    out
}
