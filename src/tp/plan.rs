//! The host half of a tensor-parallel linear layer (no GPU, no NCCL): the layer cut into one
//! layer per rank ([`TpLinearPlan`]), each with its shard of the weight, its slice of the
//! bias and the layer's options (α, β, backend), every check done here. The NCCL layer
//! (`TpSparseLinear::new`, feature `nccl`) uploads a plan as it is, so what a rank computes
//! is what its host layer computes on the CPU: the column-parallel ranks' outputs side by
//! side, or the row-parallel ranks' outputs summed, are the layer's output.

use std::ops::Range;

use crate::element::Element;
use crate::epilogue::Activation;
use crate::error::{BsrError, Error};
use crate::format::{BsrMatrix, ShardAxis};
use crate::linear::SparseLinear;

/// How a linear layer is split ([`TpLinearPlan`], and over NCCL `TpSparseLinear`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpSplit {
    /// By output features (block-rows): rank `r` computes its range of y's features from the
    /// whole x, with its slice of the bias, the activation, α and β; no collective (the
    /// outputs stay split, as a row-parallel layer wants them). A rank with no features
    /// (more ranks than block-rows) holds no weight blocks and no bias.
    Column,
    /// By input features (block-columns): rank `r` reads its range of x's features; the
    /// partial ys are summed by one all-reduce (f32). Every rank scales its product by α;
    /// the bias and `β·y` are added once, by rank 0 (the others take β = 0 and never read
    /// their y), so the sum is the layer's `α·x·Wᵀ + bias + β·y` with rank 0's y as the old
    /// y. An activation cannot come before the sum, so the layer takes none.
    Row,
}

/// A host linear layer cut over `ranks` ranks ([`TpSplit`]), nnz-balanced
/// ([`BsrMatrix::shard`]): rank `r`'s layer ([`ranks`](Self::ranks)) runs as it is on the CPU
/// (with a CPU backend) or is uploaded to rank `r`'s GPU by `TpSparseLinear::new`.
///
/// ```
/// use sparsek::tp::{TpLinearPlan, TpSplit};
/// use sparsek::{Activation, Backend, BlockMask, BlockShape, BsrMatrix, SparseLinear, SpmmOptions};
///
/// // 4 outputs x 6 inputs of 2x2 blocks; α = 0.5, β = 1 (accumulate into y).
/// let mask = BlockMask::from_fn(2, 3, |r, c| r == 0 || c == 2)?;
/// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(2, 2), |_, _| 1.0f32)?;
/// let opts = SpmmOptions::new().alpha(0.5).beta(1.0).backend(Backend::Cpu);
/// let layer = SparseLinear::new(w, Some(vec![1.0; 4]), Activation::None)?.with_options(opts);
/// let x = [1.0f32; 6]; // batch 1
/// let mut want = [2.0f32; 4];
/// layer.forward(&x, 1, &mut want)?;
/// // Row-parallel over 3 ranks: each reads its inputs; the sum is the layer's output.
/// let plan = TpLinearPlan::new(&layer, TpSplit::Row, 3)?;
/// let mut sum = [0f32; 4];
/// for (r, (rank, range)) in plan.ranks().iter().zip(plan.ranges()).enumerate() {
///     let mut y = [2.0f32; 4]; // every rank's y holds the old y; only rank 0 reads it
///     rank.forward(&x[range.clone()], 1, &mut y)?;
///     sum.iter_mut().zip(y).for_each(|(s, v)| *s += v);
/// }
/// assert_eq!(sum, want);
/// # Ok::<(), sparsek::Error>(())
/// ```
pub struct TpLinearPlan<T> {
    split: TpSplit,
    ranges: Vec<Range<usize>>,
    ranks: Vec<SparseLinear<BsrMatrix<T>, Vec<T>>>,
    imbalance: f64,
}

impl<T: Element> TpLinearPlan<T> {
    /// `layer` cut `split`-wise into `ranks` shards ([`BsrMatrix::shard`]): rank `r`'s layer
    /// holds its shard, its part of the bias and the layer's options, β as [`TpSplit`] says.
    /// `ranks` from 1 to [`crate::MAX_SHARDS`] (else [`BsrError::ShardCount`] as
    /// [`Error::Bsr`]); a row-parallel layer with an activation is
    /// [`Error::InvalidArgument`].
    pub fn new(
        layer: &SparseLinear<BsrMatrix<T>, Vec<T>>,
        split: TpSplit,
        ranks: usize,
    ) -> Result<Self, Error> {
        if split == TpSplit::Row && layer.activation() != Activation::None {
            return Err(Error::InvalidArgument(
                "a row-parallel layer takes no activation (it would apply before the all-reduce's sum)".into(),
            ));
        }
        let w = layer.weight();
        let (axis, unit) = match split {
            TpSplit::Column => (ShardAxis::BlockRows, w.block().rows),
            TpSplit::Row => (ShardAxis::BlockCols, w.block().cols),
        };
        let shards = w.shard(axis, ranks)?;
        // The ranges cover m / bm block-rows (k / bk block-columns): times the block side,
        // each bound is at most m (k), so no product overflows.
        let ranges: Vec<Range<usize>> = shards
            .ranges()
            .iter()
            .map(|r| r.start * unit..r.end * unit)
            .collect();
        let imbalance = shards.imbalance();
        let options = layer.options();
        let mut out = Vec::new();
        out.try_reserve_exact(ranks)
            .map_err(|_| BsrError::Allocation {
                what: "tensor-parallel ranks",
                elements: ranks,
            })?;
        for (r, (shard, range)) in shards.into_shards().into_iter().zip(&ranges).enumerate() {
            let (bias, activation, options) = match split {
                // A rank without features gets no bias: its layer has 0 outputs, and a
                // device buffer of 0 values cannot be allocated.
                TpSplit::Column => (
                    layer
                        .bias()
                        .filter(|_| !range.is_empty())
                        .map(|b| b[range.clone()].to_vec()),
                    layer.activation(),
                    options,
                ),
                TpSplit::Row if r == 0 => (layer.bias().cloned(), Activation::None, options),
                TpSplit::Row => (None, Activation::None, options.beta(0.0)),
            };
            out.push(SparseLinear::new(shard, bias, activation)?.with_options(options));
        }
        Ok(Self {
            split,
            ranges,
            ranks: out,
            imbalance,
        })
    }

    /// How the layer is split.
    pub fn split(&self) -> TpSplit {
        self.split
    }
    /// Each rank's range of output features (column-parallel) or input features
    /// (row-parallel), in rank order, together covering them (a range may be empty when
    /// there are more ranks than block-rows or -columns).
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }
    /// Each rank's layer: column-parallel, `ranges()[r].len() x in` with the bias's slice;
    /// row-parallel, `out x ranges()[r].len()`, rank 0 with the bias and β.
    pub fn ranks(&self) -> &[SparseLinear<BsrMatrix<T>, Vec<T>>] {
        &self.ranks
    }
    /// The largest rank's nonzero blocks over the mean.
    pub fn imbalance(&self) -> f64 {
        self.imbalance
    }
}
