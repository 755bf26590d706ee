//! Tensor-parallel shards of a BSR matrix: a layer `y = x·Wᵀ` split over devices.
//!
//! - [`ShardAxis::BlockRows`] (column-parallel, as for gate/up and QKV): shard `i` holds the
//!   block-rows of its range, all block-columns; its product is rows `range × bm` of the
//!   layer's output, so the outputs concatenated in shard order are the layer's output.
//! - [`ShardAxis::BlockCols`] (row-parallel, as for down and O): shard `i` holds the
//!   block-columns of its range of every block-row (its `col_idx` counted from the range's
//!   start); it reads rows `range × bk` of the input, and the layer's output is the sum of
//!   the shards' outputs (one all-reduce).
//!
//! A pruned layer's nonzero blocks are not spread evenly (top-k or magnitude pruning keeps
//! more in some rows and columns), so equal ranges give unequal work and the slowest device
//! sets the step time. [`BsrMatrix::shard`] cuts contiguous ranges whose largest block count
//! is the least any contiguous cut into that many shards allows ([`balanced_ranges`]);
//! [`Shards::imbalance`] says how far it stays from equal, [`equal_ranges`] gives the naive
//! cut for comparison. Ranges are contiguous so each shard's rows or input slice is one
//! piece of memory and the outputs need no permutation beyond their order.

use std::ops::Range;

use super::{try_vec, BsrMatrix};
use crate::element::Element;
use crate::error::BsrError;

/// The most shards a matrix is cut into: far above any device count, and it bounds what a
/// cut allocates.
pub const MAX_SHARDS: usize = 1 << 16;

/// Which side of the matrix the shards split (the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardAxis {
    /// Block-rows (output features): column-parallel.
    BlockRows,
    /// Block-columns (input features): row-parallel.
    BlockCols,
}

/// A matrix cut into contiguous shards ([`BsrMatrix::shard`], [`BsrMatrix::shard_ranges`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Shards<T> {
    axis: ShardAxis,
    ranges: Vec<Range<usize>>,
    shards: Vec<BsrMatrix<T>>,
}

impl<T> Shards<T> {
    /// The side split.
    pub fn axis(&self) -> ShardAxis {
        self.axis
    }

    /// Each shard's range of block-rows or block-columns, in order, together covering the
    /// matrix (a range may be empty when there are more shards than block-rows or -columns).
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// The shards, in the order of [`Shards::ranges`].
    pub fn shards(&self) -> &[BsrMatrix<T>] {
        &self.shards
    }

    /// The shards, by value.
    pub fn into_shards(self) -> Vec<BsrMatrix<T>> {
        self.shards
    }

    /// The nonzero blocks of each shard.
    pub fn nnz_blocks(&self) -> Vec<usize> {
        self.shards.iter().map(BsrMatrix::nnz_blocks).collect()
    }

    /// The largest shard's nonzero blocks over the mean: 1 for equal shards (and for a
    /// matrix with no blocks), the shard count when one shard holds everything.
    pub fn imbalance(&self) -> f64 {
        imbalance_of(&self.nnz_blocks())
    }
}

/// The largest of `counts` over their mean (1 when they are all zero or there are none).
fn imbalance_of(counts: &[usize]) -> f64 {
    let total: usize = counts.iter().sum();
    let max = counts.iter().copied().max().unwrap_or(0);
    if total == 0 {
        1.0
    } else {
        max as f64 * counts.len() as f64 / total as f64
    }
}

/// The largest part of `weights` cut into `n` contiguous ranges whose largest sum is the
/// least possible, and no range empty where there are at least `n` weights (the trailing
/// ranges are empty where there are fewer).
///
/// The least largest sum is found by bisection on the capacity (a greedy cut from the left
/// shows whether a capacity fits in `n` ranges); the cut then closes a range when the next
/// weight would pass that capacity, or when the weights left are just enough to give each
/// remaining range one (so it never leaves a range empty).
///
/// ```
/// use sparsek::balanced_ranges;
///
/// // Block-row weights (nonzero blocks per block-row) of a skewed layer, over 3 devices.
/// let w = [1, 1, 1, 8, 1, 1, 1, 1, 1];
/// let r = balanced_ranges(&w, 3)?;
/// let largest = |r: &[std::ops::Range<usize>]| r.iter().map(|r| w[r.clone()].iter().sum::<usize>()).max();
/// assert_eq!(largest(&r), Some(8)); // the least possible: one block-row holds 8
/// assert_eq!(largest(&sparsek::equal_ranges(9, 3)?), Some(10)); // equal thirds: 3, 10, 3
/// # Ok::<(), sparsek::BsrError>(())
/// ```
pub fn balanced_ranges(weights: &[usize], n: usize) -> Result<Vec<Range<usize>>, BsrError> {
    check_shard_count(n)?;
    let fits = |cap: usize| {
        let (mut parts, mut sum) = (1usize, 0usize);
        for &w in weights {
            if sum + w > cap {
                parts += 1;
                sum = 0;
            }
            sum += w;
        }
        parts <= n
    };
    // sum(weights) cannot overflow: each is a count of blocks of one matrix (<= i32::MAX
    // in all), or the caller's, checked here.
    let total = weights
        .iter()
        .try_fold(0usize, |s, &w| s.checked_add(w))
        .ok_or(BsrError::InvalidPattern(
            "shard weights sum past usize".into(),
        ))?;
    let (mut lo, mut hi) = (weights.iter().copied().max().unwrap_or(0), total);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let cap = lo;
    let mut ranges = try_vec("shard ranges", n)?;
    let (mut start, mut sum) = (0usize, 0usize);
    for (i, &w) in weights.iter().enumerate() {
        let ranges_left = n - ranges.len(); // including the open one
        let must_close = i > start && weights.len() - i < ranges_left;
        if i > start && (sum + w > cap || must_close) && ranges.len() + 1 < n {
            ranges.push(start..i);
            start = i;
            sum = 0;
        }
        sum += w;
    }
    ranges.push(start..weights.len());
    while ranges.len() < n {
        ranges.push(weights.len()..weights.len());
    }
    Ok(ranges)
}

/// `len` items cut into `n` contiguous ranges of equal length (the first `len % n` one
/// longer): the naive split, to compare [`balanced_ranges`] with.
pub fn equal_ranges(len: usize, n: usize) -> Result<Vec<Range<usize>>, BsrError> {
    check_shard_count(n)?;
    let mut ranges = try_vec("shard ranges", n)?;
    let (q, r) = (len / n, len % n);
    let mut start = 0;
    for i in 0..n {
        let end = start + q + usize::from(i < r);
        ranges.push(start..end);
        start = end;
    }
    Ok(ranges)
}

fn check_shard_count(n: usize) -> Result<(), BsrError> {
    if n == 0 || n > MAX_SHARDS {
        return Err(BsrError::ShardCount {
            got: n,
            max: MAX_SHARDS,
        });
    }
    Ok(())
}

impl<T: Element> BsrMatrix<T> {
    /// The nonzero blocks of each block-row ([`ShardAxis::BlockRows`]) or block-column.
    pub fn block_counts(&self, axis: ShardAxis) -> Result<Vec<usize>, BsrError> {
        match axis {
            ShardAxis::BlockRows => {
                let mut out = try_vec("block counts", self.num_block_rows())?;
                out.extend(self.row_ptr().windows(2).map(|w| (w[1] - w[0]) as usize));
                Ok(out)
            }
            ShardAxis::BlockCols => {
                let mut out = try_vec("block counts", self.num_block_cols())?;
                out.resize(self.num_block_cols(), 0);
                // Every col_idx is in range (validated when the matrix was built).
                for &c in self.col_idx() {
                    out[c as usize] += 1;
                }
                Ok(out)
            }
        }
    }

    /// This matrix cut into `n` shards along `axis` with block counts as equal as
    /// contiguous ranges allow ([`balanced_ranges`]). `n` from 1 to [`MAX_SHARDS`], else
    /// [`BsrError::ShardCount`]; more shards than block-rows (or -columns) leaves the last
    /// ones empty.
    ///
    /// ```
    /// use sparsek::{BlockMask, BlockShape, BsrMatrix, ShardAxis};
    ///
    /// // 8 block-rows; the first holds every block, the others one each.
    /// let mask = BlockMask::from_fn(8, 8, |r, c| r == 0 || r == c)?;
    /// let w = BsrMatrix::<f32>::from_block_mask(&mask, BlockShape::new(2, 2), |_, _| 1.0)?;
    /// let s = w.shard(ShardAxis::BlockRows, 2)?;
    /// assert_eq!(s.ranges(), &[0..1, 1..8]);
    /// assert_eq!(s.nnz_blocks(), vec![8, 7]);
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn shard(&self, axis: ShardAxis, n: usize) -> Result<Shards<T>, BsrError> {
        let ranges = balanced_ranges(&self.block_counts(axis)?, n)?;
        self.shard_ranges(axis, &ranges)
    }

    /// This matrix cut along `axis` at the given ranges, which must be in order and cover
    /// the block-rows (or block-columns) exactly, each starting where the last ended (empty
    /// ones allowed); else [`BsrError::ShardRanges`]. At most [`MAX_SHARDS`] ranges.
    pub fn shard_ranges(
        &self,
        axis: ShardAxis,
        ranges: &[Range<usize>],
    ) -> Result<Shards<T>, BsrError> {
        check_shard_count(ranges.len())?;
        let units = match axis {
            ShardAxis::BlockRows => self.num_block_rows(),
            ShardAxis::BlockCols => self.num_block_cols(),
        };
        let mut at = 0;
        for (index, r) in ranges.iter().enumerate() {
            if r.start != at || r.end < r.start || r.end > units {
                return Err(BsrError::ShardRanges {
                    index,
                    detail: format!(
                        "{r:?} after {at} of {units}: ranges must run contiguously from 0"
                    ),
                });
            }
            at = r.end;
        }
        if at != units {
            return Err(BsrError::ShardRanges {
                index: ranges.len(),
                detail: format!("the ranges end at {at}, not at {units}"),
            });
        }
        let mut shards = try_vec("shards", ranges.len())?;
        for r in ranges {
            shards.push(match axis {
                ShardAxis::BlockRows => self.block_row_shard(r.clone())?,
                ShardAxis::BlockCols => self.block_col_shard(r.clone())?,
            });
        }
        Ok(Shards {
            axis,
            ranges: ranges.to_vec(),
            shards,
        })
    }

    /// Block-rows `r` (within range, checked by the caller).
    fn block_row_shard(&self, r: Range<usize>) -> Result<BsrMatrix<T>, BsrError> {
        let bs = self.block();
        let blk = bs.rows * bs.cols; // fits: the matrix's values exist
        let (b0, b1) = (self.row_ptr()[r.start], self.row_ptr()[r.end]);
        let mut row_ptr = try_vec("shard row_ptr", r.len() + 1)?;
        row_ptr.extend(self.row_ptr()[r.start..=r.end].iter().map(|&p| p - b0));
        let cols = &self.col_idx()[b0 as usize..b1 as usize];
        let mut col_idx = try_vec("shard col_idx", cols.len())?;
        col_idx.extend_from_slice(cols);
        let vals = &self.values()[b0 as usize * blk..b1 as usize * blk];
        let mut values = try_vec("shard values", vals.len())?;
        values.extend_from_slice(vals);
        BsrMatrix::from_parts(r.len() * bs.rows, self.k(), bs, row_ptr, col_idx, values)
    }

    /// Block-columns `r` of every block-row, columns counted from `r.start`.
    fn block_col_shard(&self, r: Range<usize>) -> Result<BsrMatrix<T>, BsrError> {
        let bs = self.block();
        let blk = bs.rows * bs.cols;
        let in_range = |c: i32| (r.start..r.end).contains(&(c as usize));
        let nnz = self.col_idx().iter().filter(|&&c| in_range(c)).count();
        let mut row_ptr = try_vec("shard row_ptr", self.num_block_rows() + 1)?;
        let mut col_idx = try_vec("shard col_idx", nnz)?;
        let mut values = try_vec("shard values", nnz * blk)?;
        row_ptr.push(0);
        for w in self.row_ptr().windows(2) {
            for j in w[0] as usize..w[1] as usize {
                let c = self.col_idx()[j];
                if in_range(c) {
                    col_idx.push(c - r.start as i32);
                    values.extend_from_slice(&self.values()[j * blk..(j + 1) * blk]);
                }
            }
            // <= nnzb <= i32::MAX.
            row_ptr.push(col_idx.len() as i32);
        }
        BsrMatrix::from_parts(self.m(), r.len() * bs.cols, bs, row_ptr, col_idx, values)
    }
}
