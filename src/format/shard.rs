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
    // sum(weights) cannot overflow for a matrix's counts (each at most i32::MAX blocks in
    // all); a caller's weights are checked here.
    weights
        .iter()
        .try_fold(0usize, |s, &w| s.checked_add(w))
        .ok_or(BsrError::InvalidPattern(
            "shard weights sum past usize".into(),
        ))?;
    balanced_cut(weights.len(), weights.iter().copied().enumerate(), n)
}

/// [`balanced_ranges`] of `len` weights given as `(position, weight)` in ascending
/// position, every position left out weighing 0 (a block-column count lists only the
/// block-columns holding blocks). Time and memory grow with the entries and `n`, not with
/// `len`, and the ranges are those [`balanced_ranges`] cuts from the dense weights.
///
/// The sum of the weights must fit `usize` (the caller's to check).
fn balanced_cut<I>(len: usize, entries: I, n: usize) -> Result<Vec<Range<usize>>, BsrError>
where
    I: Iterator<Item = (usize, usize)> + Clone,
{
    check_shard_count(n)?;
    // A zero weight never closes a range in this greedy test: `sum` stays at most `cap`,
    // since `cap` starts at the largest weight.
    let fits = |cap: usize| {
        let (mut parts, mut sum) = (1usize, 0usize);
        for (_, w) in entries.clone() {
            if sum + w > cap {
                parts += 1;
                sum = 0;
            }
            sum += w;
        }
        parts <= n
    };
    let (max, total) = entries
        .clone()
        .fold((0usize, 0usize), |(m, t), (_, w)| (m.max(w), t + w));
    let (mut lo, mut hi) = (max, total);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let mut cut = Cut {
        len,
        n,
        cap: lo,
        ranges: try_vec("shard ranges", n)?,
        start: 0,
        sum: 0,
    };
    let mut next = 0; // the first position not yet visited
    for (i, w) in entries {
        cut.zeros(next, i);
        cut.visit(i, w);
        next = i + 1;
    }
    cut.zeros(next, len);
    let Cut {
        mut ranges, start, ..
    } = cut;
    ranges.push(start..len);
    while ranges.len() < n {
        ranges.push(len..len);
    }
    Ok(ranges)
}

/// The state of [`balanced_cut`]'s left-to-right pass: the ranges closed so far, the open
/// one's start and weight.
struct Cut {
    len: usize,
    n: usize,
    cap: usize,
    ranges: Vec<Range<usize>>,
    start: usize,
    sum: usize,
}

impl Cut {
    /// Closes the open range before position `i`.
    fn close(&mut self, i: usize) {
        self.ranges.push(self.start..i);
        self.start = i;
        self.sum = 0;
    }

    /// Position `i`, of weight `w`: the range closes before it when `w` would pass the
    /// capacity, or when the positions left (`i` included) are fewer than the ranges left
    /// (the open one included), so that no range stays empty; never the last range.
    fn visit(&mut self, i: usize, w: usize) {
        let ranges_left = self.n - self.ranges.len();
        let must_close = i > self.start && self.len - i < ranges_left;
        if i > self.start
            && (self.sum + w > self.cap || must_close)
            && self.ranges.len() + 1 < self.n
        {
            self.close(i);
        }
        self.sum += w;
    }

    /// Positions `from..to`, all of weight 0, in O(1) plus one step per range closed: each
    /// would close the range only where [`visit`](Self::visit) says so for a zero weight.
    fn zeros(&mut self, from: usize, to: usize) {
        while self.ranges.len() + 1 < self.n {
            // The first position p > start where `sum + 0 > cap` or `len - p < ranges left`.
            let ranges_left = self.n - self.ranges.len();
            let tail = if self.sum > self.cap {
                0
            } else {
                (self.len + 1).saturating_sub(ranges_left)
            };
            let p = from.max(self.start + 1).max(tail);
            if p >= to {
                return;
            }
            self.close(p);
        }
    }
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

/// The runs of a sorted list of block-columns (each in `0..i32::MAX`, validated) as
/// `(block-column, blocks in it)`, ascending.
#[derive(Clone)]
struct ColumnRuns<'a>(&'a [i32]);

impl Iterator for ColumnRuns<'_> {
    type Item = (usize, usize);
    fn next(&mut self) -> Option<(usize, usize)> {
        let &first = self.0.first()?;
        let run = self.0.iter().take_while(|&&c| c == first).count();
        self.0 = &self.0[run..];
        Some((first as usize, run))
    }
}

impl<T: Element> BsrMatrix<T> {
    /// The nonzero blocks of each block-row ([`ShardAxis::BlockRows`]) or block-column: one
    /// value per block-row or -column, however few blocks there are ([`BsrMatrix::shard`]
    /// counts without this list).
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
        // The counts go to the cut without a value per block-column: a matrix may have up to
        // i32::MAX of them and few blocks, so the cut's memory follows the blocks and `n`.
        // Every count sum is at most nnzb <= i32::MAX: no overflow.
        let ranges = match axis {
            ShardAxis::BlockRows => balanced_cut(
                self.num_block_rows(),
                self.row_ptr()
                    .windows(2)
                    .map(|w| (w[1] - w[0]) as usize)
                    .enumerate(),
                n,
            )?,
            ShardAxis::BlockCols => {
                let mut cols = try_vec("sorted block columns", self.col_idx().len())?;
                cols.extend_from_slice(self.col_idx());
                cols.sort_unstable();
                balanced_cut(self.num_block_cols(), ColumnRuns(&cols), n)?
            }
        };
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
