//! Magnitude pruning by blocks: which blocks of a dense weight to keep.

use candle_core::{DType, Tensor};
use sparsek::{BlockMask, BlockShape};

use crate::error::{Error, Result};

const OP: &str = "sparsek-candle prune";

/// The squared L2 norm of every `block` of `w` (`rows x cols`), row-major over the block
/// grid, summed in f64.
fn block_sq_norms(w: &Tensor, block: BlockShape) -> Result<(usize, usize, Vec<f64>)> {
    let (rows, cols) = crate::linear::dims2(OP, "weight", w)?;
    if block.rows == 0 || block.cols == 0 || rows % block.rows != 0 || cols % block.cols != 0 {
        return Err(Error::Shape {
            op: OP,
            operand: "weight",
            got: vec![rows, cols],
            expected: format!(
                "multiples of the {} x {} block in both dims",
                block.rows, block.cols
            ),
        });
    }
    let (br, bc) = (rows / block.rows, cols / block.cols);
    let values = w.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let mut norms = vec![0f64; br * bc];
    for (r, row) in values.chunks_exact(cols).enumerate() {
        let grid_row = &mut norms[(r / block.rows) * bc..][..bc];
        for (c, v) in row.iter().enumerate() {
            grid_row[c / block.cols] += v * v;
        }
    }
    Ok((br, bc, norms))
}

/// The mask keeping the `ceil(density · blocks)` blocks of largest `norms` (ties: the
/// earlier block in row-major order, so the mask is the same on every run).
fn keep_top(br: usize, bc: usize, norms: &[f64], density: f64) -> Result<BlockMask> {
    if !(density > 0.0 && density <= 1.0) {
        return Err(Error::InvalidArgument {
            op: OP,
            what: format!("density {density} is not in (0, 1]"),
        });
    }
    if let Some(i) = norms.iter().position(|n| !n.is_finite()) {
        return Err(Error::InvalidArgument {
            op: OP,
            what: format!("block {i} (row-major) has a NaN or infinite norm"),
        });
    }
    let total = norms.len();
    let keep = ((density * total as f64).ceil() as usize).clamp(1.min(total), total);
    let mut order: Vec<usize> = (0..total).collect();
    order.sort_by(|&a, &b| norms[b].total_cmp(&norms[a]).then(a.cmp(&b)));
    let mut bits = vec![false; total];
    for &i in &order[..keep] {
        bits[i] = true;
    }
    Ok(BlockMask::new(br, bc, bits)?)
}

/// Keeps the `ceil(density · blocks)` blocks of `weight` (`[rows, cols]`, any dtype and
/// device; read to the host once) with the largest L2 norms.
pub fn by_block_norm(weight: &Tensor, block: BlockShape, density: f64) -> Result<BlockMask> {
    let (br, bc, norms) = block_sq_norms(weight, block)?;
    keep_top(br, bc, &norms, density)
}

/// One mask for several weights of one shape, by their combined block norms (`‖g‖² + ‖u‖²`
/// per block): for a gated MLP's gate and up, so both keep the same blocks and every kept
/// row of the product `act(g) ⊙ u` has both its factors.
pub fn by_joint_block_norm(
    weights: &[&Tensor],
    block: BlockShape,
    density: f64,
) -> Result<BlockMask> {
    let Some((first, rest)) = weights.split_first() else {
        return Err(Error::InvalidArgument {
            op: OP,
            what: "no weight to prune".into(),
        });
    };
    let (br, bc, mut norms) = block_sq_norms(first, block)?;
    for w in rest {
        if w.dims() != first.dims() {
            return Err(Error::Shape {
                op: OP,
                operand: "weight",
                got: w.dims().to_vec(),
                expected: format!("{:?} (the first weight's shape)", first.dims()),
            });
        }
        let (_, _, n) = block_sq_norms(w, block)?;
        for (a, b) in norms.iter_mut().zip(n) {
            *a += b;
        }
    }
    keep_top(br, bc, &norms, density)
}
