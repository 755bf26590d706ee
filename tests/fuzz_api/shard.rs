//! Target: BsrMatrix::shard / shard_ranges (tensor-parallel shards): any count (0 and huge
//! refused), any ranges (contiguous from 0 and covering, else refused); on Ok, every block
//! in exactly one shard with its values, and the cut no worse than equal slices.

use std::fmt::Debug;

use rand::Rng;
use sparsek::BsrMatrix;

use crate::fuzz::{ensure, Check, FuzzRng, Outcome};
use crate::inputs::huge;
use crate::operands::{build_bsr, gen_bsr_spec, BsrSpec};
use crate::DRIVER;

#[derive(Debug, Clone)]
struct ShardCase {
    a: BsrSpec,
    rows: bool,
    count: usize,
    /// Explicit ranges (shard_ranges) instead of a count.
    ranges: Option<Vec<std::ops::Range<usize>>>,
}

fn gen_shard(rng: &mut FuzzRng) -> ShardCase {
    let clean = rng.random_bool(0.7);
    let a = gen_bsr_spec(rng, clean);
    let rows = rng.random_bool(0.5);
    let units = if rows { a.br } else { a.bc };
    let count = match rng.random_range(0..10) {
        0 => 0,
        1 => huge(rng),
        2 => sparsek::MAX_SHARDS + rng.random_range(1..3),
        _ => rng.random_range(1..=units + 3),
    };
    let ranges = rng.random_bool(0.4).then(|| {
        // Cuts of 0..units, then maybe one defect.
        let mut cuts: Vec<usize> = (0..rng.random_range(0..4))
            .map(|_| rng.random_range(0..=units))
            .collect();
        cuts.sort();
        let mut r = Vec::new();
        let mut at = 0;
        for c in cuts {
            r.push(at..c);
            at = c;
        }
        r.push(at..units);
        match rng.random_range(0..6) {
            0 if !r.is_empty() => {
                let i = rng.random_range(0..r.len());
                r[i].end += 1; // overlaps the next or passes the end
            }
            1 if r.len() > 1 => {
                r.remove(rng.random_range(0..r.len())); // a gap, or stops short
            }
            2 => r.push(units..units + 1),
            _ => {}
        }
        r
    });
    ShardCase {
        a,
        rows,
        count,
        ranges,
    }
}

fn run_shard(c: &ShardCase, rng: &mut FuzzRng) -> Check {
    use sparsek::{ShardAxis, MAX_SHARDS};
    let a: BsrMatrix<f32> = build_bsr(rng, &c.a, |rng| rng.random_range(-1.0f32..1.0));
    let (axis, units) = if c.rows {
        (ShardAxis::BlockRows, a.num_block_rows())
    } else {
        (ShardAxis::BlockCols, a.num_block_cols())
    };
    let (r, valid) = match &c.ranges {
        None => (a.shard(axis, c.count), (1..=MAX_SHARDS).contains(&c.count)),
        Some(ranges) => {
            let mut at = 0;
            let contiguous = ranges.iter().all(|r| {
                let ok = r.start == at && r.end >= r.start && r.end <= units;
                at = r.end;
                ok
            });
            let valid = !ranges.is_empty() && contiguous && at == units;
            (a.shard_ranges(axis, ranges), valid)
        }
    };
    ensure!(
        r.is_ok() == valid,
        "shard gave {:?}, the oracle says valid = {valid}",
        r.as_ref().err()
    );
    let Ok(s) = r else {
        return Ok(Outcome::Rejected);
    };
    ensure!(
        s.nnz_blocks().iter().sum::<usize>() == a.nnz_blocks(),
        "blocks lost or doubled: {:?} of {}",
        s.nnz_blocks(),
        a.nnz_blocks()
    );
    // Every block, back in the matrix's coordinates, with its values: the matrix's list.
    let blocks = |m: &BsrMatrix<f32>, dr: usize, dc: usize| {
        let blk = m.block().rows * m.block().cols;
        let mut out = Vec::new();
        for (row, w) in m.row_ptr().windows(2).enumerate() {
            for j in w[0] as usize..w[1] as usize {
                let v: Vec<u32> = m.values()[j * blk..(j + 1) * blk]
                    .iter()
                    .map(|x| x.to_bits())
                    .collect();
                out.push((row + dr, m.col_idx()[j] as usize + dc, v));
            }
        }
        out
    };
    let mut back = Vec::new();
    for (sh, r) in s.shards().iter().zip(s.ranges()) {
        ensure!(
            sh.block() == a.block()
                && if c.rows {
                    sh.k() == a.k() && sh.num_block_rows() == r.len()
                } else {
                    sh.m() == a.m() && sh.num_block_cols() == r.len()
                },
            "shard {r:?}: {} x {}",
            sh.m(),
            sh.k()
        );
        back.extend(if c.rows {
            blocks(sh, r.start, 0)
        } else {
            blocks(sh, 0, r.start)
        });
    }
    back.sort();
    let mut want = blocks(&a, 0, 0);
    want.sort();
    ensure!(back == want, "the shards' blocks are not the matrix's");
    if c.ranges.is_none() {
        let counts = a.block_counts(axis).map_err(|e| e.to_string())?;
        let largest = |rs: &[std::ops::Range<usize>]| {
            rs.iter()
                .map(|r| counts[r.clone()].iter().sum::<usize>())
                .max()
                .unwrap_or(0)
        };
        let equal = sparsek::equal_ranges(units, c.count).map_err(|e| e.to_string())?;
        ensure!(
            largest(s.ranges()) <= largest(&equal),
            "balanced {:?} worse than equal {equal:?}",
            s.ranges()
        );
    }
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_shard() {
    DRIVER.run("BsrMatrix::shard", 17, gen_shard, run_shard);
}
