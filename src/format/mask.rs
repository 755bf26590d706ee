//! Block patterns: which blocks of a block grid are stored. Build one here, then fill it
//! with `BsrMatrix::from_block_mask`.
//!
//! Every constructor checks the grid against [`BlockMask::MAX_SIDE`] and
//! [`BlockMask::MAX_BLOCKS`] before allocating anything, so a huge request is a
//! `BsrError::MaskTooLarge`, not an abort.

use rand::Rng;

use crate::error::BsrError;
use crate::format::try_vec;

/// A `rows x cols` grid of blocks, row-major, `true` where a block is stored.
///
/// At most [`MAX_SIDE`](Self::MAX_SIDE) blocks per side and
/// [`MAX_BLOCKS`](Self::MAX_BLOCKS) blocks in all (one byte each).
///
/// The random builders take a generator of the `rand` sparsek re-exports
/// ([`sparsek::rand`](crate::rand)), so no version of your own has to match:
///
/// ```
/// use sparsek::rand::{rngs::StdRng, SeedableRng};
/// use sparsek::BlockMask;
///
/// let mut rng = StdRng::seed_from_u64(42);
/// let topk = BlockMask::random_per_row(8, 16, 4, &mut rng)?;   // 4 random blocks per block-row
/// assert_eq!(topk.count(), 8 * 4);
///
/// let causal = BlockMask::causal(4, Some(2))?;                 // sliding window of 2 blocks
/// assert_eq!(causal.row_cols(3).collect::<Vec<_>>(), [2, 3]);
///
/// // Top-2 of each row of a score matrix (ties to the lower column).
/// let scores = [0.1, 0.9, 0.5, 0.7, /* row 1: */ 1.0, 0.0, 0.0, 1.0];
/// let m = BlockMask::topk_per_row(&scores, 2, 4, 2)?;
/// assert_eq!(m.row_cols(0).collect::<Vec<_>>(), [1, 3]);
/// assert_eq!(m.row_cols(1).collect::<Vec<_>>(), [0, 3]);
/// # Ok::<(), sparsek::BsrError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMask {
    rows: usize,
    cols: usize,
    /// `rows * cols` of them; that product was checked by [`BlockMask::check_size`].
    bits: Vec<bool>,
}

fn invalid(msg: String) -> BsrError {
    BsrError::InvalidPattern(msg)
}

fn topk_error(k: usize, cols: usize) -> BsrError {
    invalid(format!("top-{k} of a row of {cols} blocks"))
}

/// Marks in `out` the `k` highest entries of `row` (ties to the lower index, NaN lowest);
/// `order` is scratch space with room for `row.len()` entries. `k <= row.len()` and
/// `out.len() == row.len()`.
pub(crate) fn select_top(row: &[f32], k: usize, order: &mut Vec<usize>, out: &mut [bool]) {
    order.clear();
    order.extend(0..row.len());
    let key = |c: &usize| {
        if row[*c].is_nan() {
            f32::NEG_INFINITY
        } else {
            row[*c]
        }
    };
    order.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.cmp(b)));
    for &c in &order[..k] {
        out[c] = true;
    }
}

impl BlockMask {
    /// Most blocks per side: block indices are `i32` on the device.
    pub const MAX_SIDE: usize = i32::MAX as usize;
    /// Most blocks in all, `2^32` (4 GiB of mask): a larger grid is refused before
    /// anything is allocated. (Stored blocks, `nnzb`, must fit `i32` anyway.)
    pub const MAX_BLOCKS: u64 = 1 << 32;

    /// The number of blocks of a `rows x cols` mask, `rows * cols`, or
    /// `BsrError::MaskTooLarge` beyond [`MAX_SIDE`](Self::MAX_SIDE) per side or
    /// [`MAX_BLOCKS`](Self::MAX_BLOCKS) in all.
    pub fn check_size(rows: usize, cols: usize) -> Result<usize, BsrError> {
        let too_large = BsrError::MaskTooLarge {
            rows,
            cols,
            max_side: Self::MAX_SIDE,
            max_blocks: Self::MAX_BLOCKS,
        };
        if rows > Self::MAX_SIDE || cols > Self::MAX_SIDE {
            return Err(too_large);
        }
        // Both sides are below 2^31, so the u64 product cannot overflow.
        let total = rows as u64 * cols as u64;
        if total > Self::MAX_BLOCKS {
            return Err(too_large);
        }
        usize::try_from(total).map_err(|_| too_large)
    }

    /// A mask of `rows * cols` unset bits, allocated fallibly.
    fn zeros(rows: usize, cols: usize) -> Result<Self, BsrError> {
        let len = Self::check_size(rows, cols)?;
        let mut bits = try_vec("mask bits", len)?;
        bits.resize(len, false);
        Ok(Self { rows, cols, bits })
    }

    /// From row-major bits (`rows * cols` of them).
    pub fn new(rows: usize, cols: usize, bits: Vec<bool>) -> Result<Self, BsrError> {
        let expected = Self::check_size(rows, cols)?;
        if bits.len() != expected {
            return Err(BsrError::InputLength {
                expected,
                got: bits.len(),
            });
        }
        Ok(Self { rows, cols, bits })
    }

    /// Block `(r, c)` is kept where `keep(r, c)`; `keep` is called in row-major order.
    pub fn from_fn(
        rows: usize,
        cols: usize,
        mut keep: impl FnMut(usize, usize) -> bool,
    ) -> Result<Self, BsrError> {
        let len = Self::check_size(rows, cols)?;
        let mut bits = try_vec("mask bits", len)?;
        // An empty grid may still have up to MAX_SIDE rows (or cols): skip the loop.
        if len > 0 {
            for r in 0..rows {
                for c in 0..cols {
                    bits.push(keep(r, c));
                }
            }
        }
        Ok(Self { rows, cols, bits })
    }

    /// Every block kept with probability `density` (uniform random pattern).
    pub fn random(
        rows: usize,
        cols: usize,
        density: f64,
        rng: &mut impl Rng,
    ) -> Result<Self, BsrError> {
        if !(0.0..=1.0).contains(&density) {
            return Err(invalid(format!("density {density} is outside [0, 1]")));
        }
        Self::from_fn(rows, cols, |_, _| rng.random_bool(density))
    }

    /// Exactly `per_row` blocks in every block-row, chosen uniformly at random: the top-k
    /// pattern with random scores (the benchmarks' "top-k per row" case). Scores are drawn
    /// row by row, one row in memory at a time.
    pub fn random_per_row(
        rows: usize,
        cols: usize,
        per_row: usize,
        rng: &mut impl Rng,
    ) -> Result<Self, BsrError> {
        let mut mask = Self::zeros(rows, cols)?;
        if per_row > cols {
            return Err(topk_error(per_row, cols));
        }
        if mask.bits.is_empty() {
            return Ok(mask);
        }
        let mut scores = try_vec::<f32>("scores", cols)?;
        let mut order = try_vec("top-k order", cols)?;
        // cols > 0 here (the grid is not empty).
        for out in mask.bits.chunks_mut(cols) {
            scores.clear();
            scores.extend((0..cols).map(|_| rng.random::<f32>()));
            select_top(&scores, per_row, &mut order, out);
        }
        Ok(mask)
    }

    /// The `k` highest-scoring blocks of each block-row of a row-major `rows x cols` score
    /// matrix (ties go to the lower column; NaN scores rank lowest).
    pub fn topk_per_row(
        scores: &[f32],
        rows: usize,
        cols: usize,
        k: usize,
    ) -> Result<Self, BsrError> {
        let len = Self::check_size(rows, cols)?;
        if scores.len() != len {
            return Err(BsrError::InputLength {
                expected: len,
                got: scores.len(),
            });
        }
        if k > cols {
            return Err(topk_error(k, cols));
        }
        let mut mask = Self::zeros(rows, cols)?;
        if len == 0 {
            return Ok(mask);
        }
        // cols > 0 and cols <= scores.len(): the scratch is no larger than the input.
        let mut order = try_vec("top-k order", cols)?;
        for (row, out) in scores.chunks(cols).zip(mask.bits.chunks_mut(cols)) {
            select_top(row, k, &mut order, out);
        }
        Ok(mask)
    }

    /// Lower-triangular (causal) `n x n` pattern; with `band = Some(w)`, only the `w`
    /// blocks ending at the diagonal in each row (sliding-window attention).
    pub fn causal(n: usize, band: Option<usize>) -> Result<Self, BsrError> {
        if band == Some(0) {
            return Err(invalid("a band of width 0 keeps nothing".into()));
        }
        let w = band.unwrap_or(usize::MAX);
        // `c <= r` is tested first, so `r - c` cannot underflow.
        Self::from_fn(n, n, |r, c| c <= r && r - c < w)
    }

    /// A few dense block-rows among sparse ones: every `period`-th block-row is full, the
    /// others hold `sparse_per_row` random blocks. Long rows like these must not serialize
    /// a GPU kernel; the benchmarks use this.
    pub fn skewed(
        rows: usize,
        cols: usize,
        period: usize,
        sparse_per_row: usize,
        rng: &mut impl Rng,
    ) -> Result<Self, BsrError> {
        if period == 0 {
            return Err(invalid("skew period 0".into()));
        }
        let mut mask = Self::random_per_row(rows, cols, sparse_per_row, rng)?;
        // chunks_mut(0) would panic; an empty grid has nothing to fill anyway.
        if cols > 0 {
            for row in mask.bits.chunks_mut(cols).step_by(period) {
                row.fill(true);
            }
        }
        Ok(mask)
    }

    /// Block-rows of the grid.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Block-columns of the grid.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Whether block `(r, c)` is kept; `None` outside the grid.
    pub fn get(&self, r: usize, c: usize) -> Option<bool> {
        if r < self.rows && c < self.cols {
            // r * cols + c < rows * cols = bits.len().
            Some(self.bits[r * self.cols + c])
        } else {
            None
        }
    }
    /// Number of kept blocks.
    pub fn count(&self) -> usize {
        self.bits.iter().filter(|b| **b).count()
    }
    /// The kept columns of block-row `r`, ascending (none when `r` is outside the grid).
    pub fn row_cols(&self, r: usize) -> impl Iterator<Item = usize> + '_ {
        let row: &[bool] = if r < self.rows {
            // (r + 1) * cols <= rows * cols = bits.len().
            &self.bits[r * self.cols..(r + 1) * self.cols]
        } else {
            &[]
        };
        row.iter().enumerate().filter(|(_, b)| **b).map(|(c, _)| c)
    }
}
