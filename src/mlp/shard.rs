//! The tensor-parallel cut of a gated MLP: the gate and up weights column-parallel (each
//! shard a contiguous range of intermediate rows, gate and up together), the down weight
//! row-parallel over the same range of its input columns, so a shard's MLP reads x, writes
//! its slice of h and a partial y, and the layer's y is the sum of the shards' (one
//! all-reduce). The cut balances each shard's weight elements (its gate, up and down
//! blocks), not its rows: a pruned MLP's blocks are not spread evenly.

use std::ops::Range;

use super::SparseMlp;
use crate::element::Element;
use crate::error::{BsrError, Error};
use crate::format::{balanced_ranges, equal_ranges, BsrMatrix, ShardAxis};

/// An MLP cut into shards ([`SparseMlp::shard`], [`SparseMlp::shard_equal`]).
pub struct MlpShards<T> {
    ranges: Vec<Range<usize>>,
    work: Vec<usize>,
    shards: Vec<SparseMlp<BsrMatrix<T>>>,
}

impl<T> MlpShards<T> {
    /// Each shard's range of intermediate rows (of h), in order, together covering them (a
    /// range may be empty when there are more shards than units to cut).
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }
    /// The shards' MLPs: shard `i` takes x and writes rows `ranges()[i]` of h (as its own h)
    /// and a partial y; the sum of the partial ys is the MLP's y.
    pub fn shards(&self) -> &[SparseMlp<BsrMatrix<T>>] {
        &self.shards
    }
    /// The shards, by value.
    pub fn into_shards(self) -> Vec<SparseMlp<BsrMatrix<T>>> {
        self.shards
    }
    /// Each shard's weight elements (its gate, up and down blocks' values).
    pub fn work(&self) -> &[usize] {
        &self.work
    }
    /// Whether these shards are a cut of `mlp` (as [`SparseMlp::shard`] and
    /// [`SparseMlp::shard_equal`] make): their ranges run contiguously over `mlp`'s
    /// intermediate rows, shard `i`'s gate and up weights are `2·len x hidden` and its down
    /// weight `out x len` (`len` its range's), of `mlp`'s block shapes, activation and
    /// backend, and the shards' blocks add up to `mlp`'s. Else [`Error::InvalidArgument`]
    /// naming the first difference. Shapes and counts only: values are not compared.
    pub fn check_cut_of(&self, mlp: &SparseMlp<BsrMatrix<T>>) -> Result<(), Error>
    where
        T: Element,
    {
        let bad = |what: String| {
            Err(Error::InvalidArgument(format!(
                "not a cut of the MLP: {what}"
            )))
        };
        let (gu, dn) = (&mlp.gate_up, &mlp.down);
        let (inter, hidden, out) = (gu.m() / 2, gu.k(), dn.m());
        if self.shards.len() != self.ranges.len() || self.work.len() != self.ranges.len() {
            return bad(format!(
                "{} shards, {} ranges and {} work counts",
                self.shards.len(),
                self.ranges.len(),
                self.work.len()
            ));
        }
        let mut at = 0;
        let (mut gu_blocks, mut dn_blocks) = (0usize, 0usize);
        for (i, (s, r)) in self.shards.iter().zip(&self.ranges).enumerate() {
            if r.start != at || r.end < r.start || r.end > inter {
                return bad(format!("shard {i}'s rows {r:?} after {at} of {inter}"));
            }
            at = r.end;
            // r.len() <= inter and gu.m() = 2 * inter: no overflow.
            let (sg, sd) = (&s.gate_up, &s.down);
            if (sg.m(), sg.k(), sg.block()) != (2 * r.len(), hidden, gu.block()) {
                return bad(format!(
                    "shard {i}'s gate and up are {} x {} of {} blocks, not {} x {hidden} of {}",
                    sg.m(),
                    sg.k(),
                    sg.block(),
                    2 * r.len(),
                    gu.block()
                ));
            }
            if (sd.m(), sd.k(), sd.block()) != (out, r.len(), dn.block()) {
                return bad(format!(
                    "shard {i}'s down is {} x {} of {} blocks, not {out} x {} of {}",
                    sd.m(),
                    sd.k(),
                    sd.block(),
                    r.len(),
                    dn.block()
                ));
            }
            if (s.activation, s.backend) != (mlp.activation, mlp.backend) {
                return bad(format!(
                    "shard {i} runs {:?} on {:?}, the MLP {:?} on {:?}",
                    s.activation, s.backend, mlp.activation, mlp.backend
                ));
            }
            gu_blocks = gu_blocks.saturating_add(sg.nnz_blocks());
            dn_blocks = dn_blocks.saturating_add(sd.nnz_blocks());
        }
        if at != inter {
            return bad(format!("the shards' rows end at {at}, not at {inter}"));
        }
        if (gu_blocks, dn_blocks) != (gu.nnz_blocks(), dn.nnz_blocks()) {
            return bad(format!(
                "the shards hold {gu_blocks} gate-and-up and {dn_blocks} down blocks, the MLP {} and {}",
                gu.nnz_blocks(),
                dn.nnz_blocks()
            ));
        }
        Ok(())
    }
    /// The largest shard's work over the mean (1: equal; the shard count: one holds all).
    pub fn imbalance(&self) -> f64 {
        let total: usize = self.work.iter().sum();
        if total == 0 || self.work.is_empty() {
            return 1.0;
        }
        let max = self.work.iter().copied().max().unwrap_or(0);
        max as f64 * self.work.len() as f64 / total as f64
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl<T: Element> SparseMlp<BsrMatrix<T>> {
    /// This MLP cut into `n` shards of contiguous intermediate rows whose largest weight
    /// (elements of gate, up and down blocks) is the least a contiguous cut allows. Cuts fall
    /// on multiples of lcm(gate's bm, down's bk) rows, so every block lies in one shard.
    /// [`BsrError::ShardCount`] for `n` = 0 or above [`crate::MAX_SHARDS`].
    pub fn shard(&self, n: usize) -> Result<MlpShards<T>, Error> {
        let (weights, unit) = self.unit_weights()?;
        let ranges = balanced_ranges(&weights, n)?;
        self.cut(&ranges, &weights, unit)
    }

    /// The naive cut for comparison: `n` ranges of equal row counts (as near as the units
    /// allow), whatever the blocks in them.
    pub fn shard_equal(&self, n: usize) -> Result<MlpShards<T>, Error> {
        let (weights, unit) = self.unit_weights()?;
        let ranges = equal_ranges(weights.len(), n)?;
        self.cut(&ranges, &weights, unit)
    }

    /// The weight elements of each unit of `unit` intermediate rows, and `unit`.
    fn unit_weights(&self) -> Result<(Vec<usize>, usize), Error> {
        let (gu, dn) = (&self.gate_up, &self.down);
        let (bm, bk_down) = (gu.block().rows, dn.block().cols);
        // bm, bk >= 1 (validated blocks); lcm <= inter when inter > 0 (both divide it).
        let unit = (bm / gcd(bm, bk_down))
            .checked_mul(bk_down)
            .ok_or(BsrError::SizeOverflow {
                what: "lcm(bm, bk)",
                value: bm as u128 * bk_down as u128,
            })?;
        let inter = gu.m() / 2;
        let units = inter / unit;
        let (gu_len, dn_len) = (gu.block().len(), dn.block().len());
        let mut weights = Vec::new();
        weights
            .try_reserve_exact(units)
            .map_err(|_| BsrError::Allocation {
                what: "shard weights",
                elements: units,
            })?;
        // Unit u holds gate-and-up block-rows 2u·pairs..2(u+1)·pairs and down block-columns
        // u·cols_per..(u+1)·cols_per. The down counts are added block by block rather than
        // from a count per block-column: down may have up to i32::MAX block-columns and few
        // blocks, and `units` is at most half of gate_up's block-rows (whose row_ptr exists).
        let (pairs, cols_per) = (unit / bm, unit / bk_down);
        let row_ptr = gu.row_ptr();
        for u in 0..units {
            // row_ptr is validated: non-decreasing from 0, so the difference is a count.
            let g = (row_ptr[2 * (u + 1) * pairs] - row_ptr[2 * u * pairs]) as usize;
            weights.push(g * gu_len);
        }
        for &c in dn.col_idx() {
            // unit divides inter (both bm and bk_down do), so every block-column of down
            // (< inter / bk_down = units · cols_per) falls in a unit.
            if let Some(w) = weights.get_mut(c as usize / cols_per) {
                // Every count times its block size is at most the values' length: the sum of
                // the two weights fits, as both arrays exist.
                *w += dn_len;
            }
        }
        Ok((weights, unit))
    }

    fn cut(
        &self,
        ranges: &[Range<usize>],
        weights: &[usize],
        unit: usize,
    ) -> Result<MlpShards<T>, Error> {
        let (bm, bk_down) = (self.gate_up.block().rows, self.down.block().cols);
        let map = |f: &dyn Fn(usize) -> usize| -> Vec<Range<usize>> {
            ranges.iter().map(|r| f(r.start)..f(r.end)).collect()
        };
        let gu = self
            .gate_up
            .shard_ranges(ShardAxis::BlockRows, &map(&|u| 2 * u * unit / bm))?;
        let dn = self
            .down
            .shard_ranges(ShardAxis::BlockCols, &map(&|u| u * unit / bk_down))?;
        let mut shards = Vec::new();
        shards
            .try_reserve_exact(ranges.len())
            .map_err(|_| BsrError::Allocation {
                what: "MLP shards",
                elements: ranges.len(),
            })?;
        for (g, d) in gu.into_shards().into_iter().zip(dn.into_shards()) {
            shards.push(SparseMlp {
                gate_up: g,
                down: d,
                activation: self.activation,
                backend: self.backend,
            });
        }
        Ok(MlpShards {
            ranges: map(&|u| u * unit),
            work: ranges
                .iter()
                .map(|r| weights[r.clone()].iter().sum())
                .collect(),
            shards,
        })
    }
}
