//! Fuzz of the tensor-parallel constructors and the CPU-checkable half of their forwards:
//! the linear layer's cut ([`TpLinearPlan`], what `TpSparseLinear::new` uploads) and the
//! gated MLP's ([`SparseMlp::shard`], [`SparseMlp::shard_equal`],
//! [`MlpShards::check_cut_of`], what `TpSparseMlp::new` / `from_shards` upload). Each case
//! draws a small layer (block shapes, densities from empty to full, a bias or not, α, β, the
//! activation, the backend), a split and a rank count from 0 to past `MAX_SHARDS` (more
//! ranks than block-rows or -columns included), and, now and then, a layer of i32::MAX
//! columns holding a few blocks. Every case must
//! - not panic, not abort and finish within `DRIVER.case_limit` (tests/common/fuzz.rs's
//!   driver, as tests/fuzz_api/main.rs's: every case under `catch_unwind`, a global
//!   allocator refusing any allocation above 16 MiB, a watchdog for hangs),
//! - be refused with the documented typed error exactly when the oracle says so,
//! - on `Ok`, give each rank what its part says: its weight's shape, its slice of the bias
//!   (none for a rank without outputs), the layer's activation and options (α, backend; β
//!   on every column-parallel rank, on row-parallel rank 0 alone),
//! - and the ranks' outputs, computed on the CPU, give the layer's output: side by side
//!   (column-parallel) bit for bit, summed (row-parallel) within f32 rounding of the sum's
//!   terms; the MLP shards' h side by side bit for bit and their ys summed likewise.
//!
//! `SPARSEK_FUZZ_SEED=<u64>` replays a run (the seed is printed; random by default),
//! `SPARSEK_FUZZ_CASES=<n>` sets the number of cases per test (by default 100 000 in an
//! optimized build and 10 000 in a debug one; CI runs it again with 100 000),
//! `SPARSEK_FUZZ_ONLY=<i>` runs case `i` alone.

use std::ops::Range;
use std::time::Duration;

use rand::Rng;
use sparsek::mlp::MlpShards;
use sparsek::tp::{TpLinearPlan, TpSplit};
use sparsek::{
    f16, Activation, Backend, BlockMask, BlockShape, BsrError, BsrMatrix, Element, Error,
    SparseLinear, SparseMlp, SpmmOptions, MAX_SHARDS,
};

#[path = "common/fuzz.rs"]
mod fuzz;

use fuzz::{ensure, random_values, Check, Driver, FuzzRng, Outcome, I32_MAX};

/// How these targets run: a case within 1.5 s (a cut into `MAX_SHARDS` ranks takes a few
/// hundred milliseconds in a debug build; a cut that walked i32::MAX columns one by one would
/// take seconds), on two rayon workers (the CPU products' parallel loops); no allocation
/// above the guard's limit, whatever the call returns.
const DRIVER: Driver = Driver {
    case_limit: Duration::from_millis(1500),
    workers: 2,
    refusal_may_reject: false,
};

// ---------------------------------------------------------------------------------------
// Inputs shared by the targets.

/// Most ranks whose forwards a case runs (a cut into more is checked without them).
const FORWARD_RANKS: usize = 64;

/// Element types of the weights and activations (the outputs are f32).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ty {
    F32,
    F16,
}

const ACTIVATIONS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::GeluTanh,
    Activation::Silu,
];

const BACKENDS: [Backend; 5] = [
    Backend::Auto,
    Backend::Cpu,
    Backend::Hopper,
    Backend::Wmma,
    Backend::Decode,
];

/// A rank count: past `units` now and then, 0 and past `MAX_SHARDS` sometimes (refused),
/// `MAX_SHARDS` itself rarely (a cut into that many is slow in a debug build).
fn gen_ranks(rng: &mut FuzzRng, units: usize) -> usize {
    match rng.random_range(0..10_000) {
        0..=499 => 0,
        500..=799 => MAX_SHARDS + rng.random_range(1..3),
        800..=899 => usize::MAX,
        900..=901 => MAX_SHARDS,
        _ => rng.random_range(1..=units + 4),
    }
}

/// A scalar: 1 and 0 often, else in [-2, 2].
fn gen_scalar(rng: &mut FuzzRng, one: f32) -> f32 {
    match rng.random_range(0..4) {
        0 => one,
        1 => 1.0 - one,
        _ => rng.random_range(-2.0f32..2.0),
    }
}

/// A small BSR pattern: block sides 1 to 3, 0 to `most` block-rows and -columns, a density.
#[derive(Debug, Clone, Copy)]
struct Pattern {
    block: BlockShape,
    br: usize,
    bc: usize,
    p: f64,
}

fn gen_pattern(rng: &mut FuzzRng, most: usize) -> Pattern {
    Pattern {
        block: BlockShape::new(rng.random_range(1..=3), rng.random_range(1..=3)),
        br: rng.random_range(0..=most),
        bc: rng.random_range(0..=most),
        p: [0.0, 0.3, 0.7, 1.0][rng.random_range(0..4)],
    }
}

fn build<T: Element>(rng: &mut FuzzRng, p: &Pattern) -> BsrMatrix<T> {
    let mask = BlockMask::from_fn(p.br, p.bc, |_, _| rng.random_bool(p.p)).expect("a small mask");
    BsrMatrix::from_block_mask(&mask, p.block, |_, _| {
        T::from_f32(rng.random_range(-1.0f32..1.0))
    })
    .expect("a valid matrix")
}

/// A matrix of `rows` block-rows of 1x1 blocks and i32::MAX block-columns holding a block
/// at each of a few random columns per row: a wide layer cut by the blocks it holds.
fn build_wide<T: Element>(rng: &mut FuzzRng, rows: usize) -> BsrMatrix<T> {
    let (mut row_ptr, mut col_idx) = (vec![0i32], Vec::new());
    for _ in 0..rows {
        let mut cols: Vec<i32> = (0..rng.random_range(0..4))
            .map(|_| match rng.random_range(0..3) {
                0 => rng.random_range(0..8),
                1 => i32::MAX - 1 - rng.random_range(0..8),
                _ => rng.random_range(0..i32::MAX),
            })
            .collect();
        cols.sort_unstable();
        cols.dedup();
        col_idx.extend_from_slice(&cols);
        row_ptr.push(col_idx.len() as i32);
    }
    let values = random_values(rng, col_idx.len());
    BsrMatrix::from_parts(
        rows,
        I32_MAX,
        BlockShape::new(1, 1),
        row_ptr,
        col_idx,
        values,
    )
    .expect("a valid wide matrix")
}

fn dense_f64<T: Element>(a: &BsrMatrix<T>) -> Result<Vec<f64>, String> {
    Ok(a.to_dense()
        .map_err(|e| format!("to_dense: {e}"))?
        .iter()
        .map(|v| v.to_f32() as f64)
        .collect())
}

/// `layer` as it is, on the CPU backend (the ranks' layers carry the layer's backend,
/// which may be a GPU one).
fn on_cpu<T: Element>(
    l: &SparseLinear<BsrMatrix<T>, Vec<T>>,
) -> Result<SparseLinear<BsrMatrix<T>, Vec<T>>, String> {
    Ok(
        SparseLinear::new(l.weight().clone(), l.bias().cloned(), l.activation())
            .map_err(|e| format!("rebuilding a layer: {e}"))?
            .with_options(l.options().backend(Backend::Cpu)),
    )
}

/// The ranges run contiguously from 0 to `total`, each on multiples of `unit`.
fn covers(ranges: &[Range<usize>], total: usize, unit: usize) -> bool {
    let mut at = 0;
    for r in ranges {
        if r.start != at || r.end < r.start || r.start % unit != 0 || r.end % unit != 0 {
            return false;
        }
        at = r.end;
    }
    at == total
}

/// `|got - want| <= 1e-5·scale` for every element: a sum of f32 partials against one f32
/// accumulation of the same terms, whose magnitudes add up to `scale`.
fn within(got: &[f64], want: &[f32], scale: &[f64]) -> Result<(), String> {
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let bound = 1e-5 * s + 1e-30;
        if (g - w as f64).abs() > bound || !g.is_finite() {
            return Err(format!(
                "element {i}: the ranks give {g}, the layer {w} (bound {bound:e})"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Target: TpLinearPlan::new (TpSparseLinear's cut) and the ranks' forwards on the CPU.

#[derive(Debug, Clone)]
struct LinearCase {
    ty: Ty,
    w: Pattern,
    /// Block-rows of a wide layer (i32::MAX columns of 1x1 blocks) instead of `w`.
    wide: Option<usize>,
    bias: bool,
    alpha: f32,
    beta: f32,
    act: Activation,
    backend: Backend,
    split: TpSplit,
    ranks: usize,
    batch: usize,
}

fn gen_linear(rng: &mut FuzzRng) -> LinearCase {
    let w = gen_pattern(rng, 5);
    let wide = rng.random_bool(0.03).then(|| rng.random_range(0..=3));
    let split = if rng.random_bool(0.5) {
        TpSplit::Column
    } else {
        TpSplit::Row
    };
    let units = match (wide, split) {
        (Some(_), TpSplit::Row) => 8,
        (Some(rows), TpSplit::Column) => rows,
        (None, TpSplit::Column) => w.br,
        (None, TpSplit::Row) => w.bc,
    };
    // A row-parallel layer takes no activation: drawn mostly without one.
    let act = if split == TpSplit::Row && rng.random_bool(0.75) {
        Activation::None
    } else {
        ACTIVATIONS[rng.random_range(0..4)]
    };
    LinearCase {
        ty: if rng.random_bool(0.8) {
            Ty::F32
        } else {
            Ty::F16
        },
        w,
        wide,
        bias: rng.random_bool(0.6),
        alpha: gen_scalar(rng, 1.0),
        beta: gen_scalar(rng, 0.0),
        act,
        backend: BACKENDS[rng.random_range(0..5)],
        split,
        ranks: gen_ranks(rng, units),
        batch: rng.random_range(0..=3),
    }
}

fn run_linear<T: Element>(c: &LinearCase, rng: &mut FuzzRng) -> Check {
    let w: BsrMatrix<T> = match c.wide {
        Some(rows) => build_wide(rng, rows),
        None => build(rng, &c.w),
    };
    let (out, inp) = (w.m(), w.k());
    let bias: Option<Vec<T>> = c.bias.then(|| random_values(rng, out));
    let options = SpmmOptions::new()
        .alpha(c.alpha)
        .beta(c.beta)
        .backend(c.backend);
    let layer = SparseLinear::new(w.clone(), bias.clone(), c.act)
        .map_err(|e| format!("SparseLinear::new: {e}"))?
        .with_options(options);
    let plan = TpLinearPlan::new(&layer, c.split, c.ranks);

    // The oracle: the activation first, then the rank count.
    let row_act = c.split == TpSplit::Row && c.act != Activation::None;
    let count_ok = (1..=MAX_SHARDS).contains(&c.ranks);
    match (&plan, row_act, count_ok) {
        (Err(Error::InvalidArgument(_)), true, _) => return Ok(Outcome::Rejected),
        (Err(Error::Bsr(BsrError::ShardCount { got, max })), false, false)
            if *got == c.ranks && *max == MAX_SHARDS =>
        {
            return Ok(Outcome::Rejected)
        }
        (Ok(_), false, true) => {}
        (r, _, _) => {
            return Err(format!(
                "TpLinearPlan::new gave {:?}; the oracle says activation refused = {row_act}, \
                 count valid = {count_ok}",
                r.as_ref().err()
            ))
        }
    }
    let plan = plan.map_err(|e| e.to_string())?;

    // The plan: one layer per rank, each its part of the layer with the layer's options.
    let n = c.ranks;
    let (axis_len, unit) = match c.split {
        TpSplit::Column => (out, w.block().rows),
        TpSplit::Row => (inp, w.block().cols),
    };
    ensure!(plan.split() == c.split, "split {:?}", plan.split());
    ensure!(
        plan.ranks().len() == n && plan.ranges().len() == n,
        "{} layers and {} ranges for {n} ranks",
        plan.ranks().len(),
        plan.ranges().len()
    );
    ensure!(
        covers(plan.ranges(), axis_len, unit),
        "ranges {:?} do not cover 0..{axis_len} on multiples of {unit}",
        plan.ranges()
    );
    ensure!(
        plan.imbalance().is_finite() && plan.imbalance() >= 1.0 - 1e-12,
        "imbalance {}",
        plan.imbalance()
    );
    let mut blocks = 0;
    for (r, (rank, range)) in plan.ranks().iter().zip(plan.ranges()).enumerate() {
        let rw = rank.weight();
        let dims = match c.split {
            TpSplit::Column => (range.len(), inp),
            TpSplit::Row => (out, range.len()),
        };
        ensure!(
            (rw.m(), rw.k()) == dims && rw.block() == w.block(),
            "rank {r} ({range:?}): a {} x {} weight of {} blocks",
            rw.m(),
            rw.k(),
            rw.block()
        );
        blocks += rw.nnz_blocks();
        let want_bias: Option<&[T]> = match c.split {
            TpSplit::Column if !range.is_empty() => bias.as_deref().map(|b| &b[range.clone()]),
            TpSplit::Column => None,
            TpSplit::Row if r == 0 => bias.as_deref(),
            TpSplit::Row => None,
        };
        let got_bias = rank.bias().map(Vec::as_slice);
        ensure!(
            got_bias.map(|b| b.iter().map(|v| v.to_f32().to_bits()).collect::<Vec<_>>())
                == want_bias.map(|b| b.iter().map(|v| v.to_f32().to_bits()).collect()),
            "rank {r} ({range:?}): bias of {:?} values, {:?} expected",
            got_bias.map(<[T]>::len),
            want_bias.map(<[T]>::len)
        );
        let (want_act, want_beta) = match c.split {
            TpSplit::Column => (c.act, c.beta),
            TpSplit::Row if r == 0 => (Activation::None, c.beta),
            TpSplit::Row => (Activation::None, 0.0),
        };
        let o = rank.options();
        ensure!(
            rank.activation() == want_act
                && o.get_alpha().to_bits() == c.alpha.to_bits()
                && o.get_beta().to_bits() == want_beta.to_bits()
                && o.get_backend() == c.backend
                && !o.get_transpose_a(),
            "rank {r}: {:?} with {o:?}; expected {want_act:?}, alpha {}, beta {want_beta}, {:?}",
            rank.activation(),
            c.alpha,
            c.backend
        );
    }
    ensure!(
        blocks == w.nnz_blocks(),
        "the ranks hold {blocks} blocks of {}",
        w.nnz_blocks()
    );
    if c.wide.is_some() || n > FORWARD_RANKS {
        return Ok(Outcome::Accepted);
    }

    // The forwards: the un-split layer on the CPU against the ranks' on the CPU.
    let batch = c.batch;
    let x: Vec<T> = random_values(rng, batch * inp);
    let y_old: Vec<f32> = random_values(rng, batch * out);
    let mut want = y_old.clone();
    on_cpu(&layer)?
        .forward(&x, batch, &mut want)
        .map_err(|e| format!("the layer's forward: {e}"))?;
    match c.split {
        TpSplit::Column => {
            let mut got = vec![f32::NAN; batch * out];
            for (r, (rank, range)) in plan.ranks().iter().zip(plan.ranges()).enumerate() {
                let len = range.len();
                // Rank r's y: its features of every row of the old y (β reads them).
                let mut y: Vec<f32> = (0..batch)
                    .flat_map(|b| y_old[b * out + range.start..b * out + range.end].to_vec())
                    .collect();
                on_cpu(rank)?
                    .forward(&x, batch, &mut y)
                    .map_err(|e| format!("rank {r}'s forward: {e}"))?;
                for b in 0..batch {
                    got[b * out + range.start..b * out + range.end]
                        .copy_from_slice(&y[b * len..(b + 1) * len]);
                }
            }
            ensure!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()),
                "the ranks' outputs side by side differ from the layer's: {got:?} vs {want:?}"
            );
        }
        TpSplit::Row => {
            let mut sum = vec![0f64; batch * out];
            for (r, (rank, range)) in plan.ranks().iter().zip(plan.ranges()).enumerate() {
                let xr: Vec<T> = (0..batch)
                    .flat_map(|b| x[b * inp + range.start..b * inp + range.end].to_vec())
                    .collect();
                // Rank 0 holds the old y; the others must not read theirs (β = 0).
                let mut y = if r == 0 {
                    y_old.clone()
                } else {
                    vec![f32::NAN; batch * out]
                };
                on_cpu(rank)?
                    .forward(&xr, batch, &mut y)
                    .map_err(|e| format!("rank {r}'s forward: {e}"))?;
                sum.iter_mut().zip(&y).for_each(|(s, &v)| *s += v as f64);
            }
            // The magnitude of each output's terms: |α|·Σ|w·x| + |bias| + |β·y|.
            let dw = dense_f64(&w)?;
            let mut scale = vec![0f64; batch * out];
            for b in 0..batch {
                for i in 0..out {
                    let wx: f64 = (0..inp)
                        .map(|k| (dw[i * inp + k] * x[b * inp + k].to_f32() as f64).abs())
                        .sum();
                    let bias_i = bias.as_ref().map_or(0.0, |v| v[i].to_f32() as f64);
                    scale[b * out + i] = (c.alpha as f64).abs() * wx
                        + bias_i.abs()
                        + (c.beta as f64 * y_old[b * out + i] as f64).abs();
                }
            }
            within(&sum, &want, &scale)?;
        }
    }
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_tp_linear() {
    DRIVER.run("TpLinearPlan", 1, gen_linear, |c, rng| match c.ty {
        Ty::F32 => run_linear::<f32>(c, rng),
        Ty::F16 => run_linear::<f16>(c, rng),
    });
}

// ---------------------------------------------------------------------------------------
// Target: SparseMlp::shard / shard_equal and MlpShards::check_cut_of (TpSparseMlp's cut),
// and the shards' forwards on the CPU.

#[derive(Debug, Clone)]
struct MlpCase {
    ty: Ty,
    /// Gate's pattern (up's shape, its own blocks).
    gate: Pattern,
    /// Down's block-rows, block shape and density (its block-columns follow the gate's rows).
    down: Pattern,
    /// Down of i32::MAX intermediate rows: gate and up one empty block-row of that many rows.
    wide: bool,
    act: Activation,
    backend: Backend,
    equal: bool,
    ranks: usize,
    batch: usize,
}

fn gen_mlp(rng: &mut FuzzRng) -> MlpCase {
    let gate = gen_pattern(rng, 4);
    let mut down = gen_pattern(rng, 3);
    let inter = gate.br * gate.block.rows;
    // down's block-columns divide the intermediate rows.
    let bk = (1..=3)
        .filter(|d| inter % d == 0)
        .nth(rng.random_range(0..3))
        .unwrap_or(1);
    down.block = BlockShape::new(down.block.rows, bk);
    down.bc = inter / bk;
    let wide = rng.random_bool(0.03);
    let units = if wide { 1 } else { gate.br.max(1) };
    MlpCase {
        ty: if rng.random_bool(0.8) {
            Ty::F32
        } else {
            Ty::F16
        },
        gate,
        down,
        wide,
        act: ACTIVATIONS[rng.random_range(0..4)],
        backend: BACKENDS[rng.random_range(0..5)],
        equal: rng.random_bool(0.3),
        ranks: gen_ranks(rng, units),
        batch: rng.random_range(0..=3),
    }
}

/// An MLP's weights rebuilt on the CPU backend.
fn mlp_on_cpu<T: Element>(m: &SparseMlp<BsrMatrix<T>>) -> Result<SparseMlp<BsrMatrix<T>>, String> {
    Ok(
        SparseMlp::from_interleaved(m.gate_up().clone(), m.down().clone(), m.activation())
            .map_err(|e| format!("rebuilding an MLP: {e}"))?
            .with_backend(Backend::Cpu),
    )
}

fn run_mlp<T: Element>(c: &MlpCase, rng: &mut FuzzRng) -> Check {
    let (gate, up, down): (BsrMatrix<T>, BsrMatrix<T>, BsrMatrix<T>) = if c.wide {
        let tall = BlockShape::new(I32_MAX, 1);
        let empty = BsrMatrix::from_parts(I32_MAX, 1, tall, vec![0, 0], vec![], vec![])
            .map_err(|e| format!("the wide gate: {e}"))?;
        (empty.clone(), empty, build_wide(rng, 1))
    } else {
        (
            build(rng, &c.gate),
            build(rng, &c.gate),
            build(rng, &c.down),
        )
    };
    let mlp = SparseMlp::new(&gate, &up, down.clone(), c.act)
        .map_err(|e| format!("SparseMlp::new: {e}"))?
        .with_backend(c.backend);
    let cut = if c.equal {
        mlp.shard_equal(c.ranks)
    } else {
        mlp.shard(c.ranks)
    };
    let count_ok = (1..=MAX_SHARDS).contains(&c.ranks);
    let shards: MlpShards<T> = match cut {
        Err(Error::Bsr(BsrError::ShardCount { got, max }))
            if !count_ok && got == c.ranks && max == MAX_SHARDS =>
        {
            return Ok(Outcome::Rejected)
        }
        Ok(s) if count_ok => s,
        other => {
            return Err(format!(
                "the cut gave {:?}; the oracle says count valid = {count_ok}",
                other.err()
            ))
        }
    };
    let n = c.ranks;
    let (inter, hidden, out) = (gate.m(), gate.k(), down.m());
    shards
        .check_cut_of(&mlp)
        .map_err(|e| format!("a cut of the MLP refused as one: {e}"))?;
    ensure!(
        shards.shards().len() == n && shards.ranges().len() == n && shards.work().len() == n,
        "{} shards, {} ranges, {} work counts for {n} ranks",
        shards.shards().len(),
        shards.ranges().len(),
        shards.work().len()
    );
    let total_work = mlp.gate_up().values().len() + mlp.down().values().len();
    ensure!(
        shards.work().iter().sum::<usize>() == total_work,
        "work {:?} of {total_work}",
        shards.work()
    );
    for (i, (s, &w)) in shards.shards().iter().zip(shards.work()).enumerate() {
        ensure!(
            s.gate_up().values().len() + s.down().values().len() == w,
            "shard {i}'s work {w}"
        );
    }
    // Another MLP's options or shape: not a cut of it.
    let other_backend = BACKENDS[(BACKENDS.iter().position(|&b| b == c.backend).unwrap() + 1) % 5];
    let other = SparseMlp::new(&gate, &up, down.clone(), c.act)
        .map_err(|e| e.to_string())?
        .with_backend(other_backend);
    ensure!(
        matches!(shards.check_cut_of(&other), Err(Error::InvalidArgument(_))),
        "shards of a {:?} MLP taken as a cut of a {other_backend:?} one",
        c.backend
    );
    let other_act = ACTIVATIONS[(ACTIVATIONS.iter().position(|&a| a == c.act).unwrap() + 1) % 4];
    let other = SparseMlp::new(&gate, &up, down.clone(), other_act)
        .map_err(|e| e.to_string())?
        .with_backend(c.backend);
    ensure!(
        matches!(shards.check_cut_of(&other), Err(Error::InvalidArgument(_))),
        "shards of a {:?} MLP taken as a cut of a {other_act:?} one",
        c.act
    );
    if c.wide || n > FORWARD_RANKS {
        return Ok(Outcome::Accepted);
    }

    // The forwards on the CPU: the shards' h side by side is the MLP's h, their ys sum to its y.
    let batch = c.batch;
    let x: Vec<T> = random_values(rng, batch * hidden);
    let mut h = vec![T::from_f32(f32::NAN); batch * inter];
    let mut want = vec![f32::NAN; batch * out];
    mlp_on_cpu(&mlp)?
        .forward(&x, batch, &mut h, &mut want)
        .map_err(|e| format!("the MLP's forward: {e}"))?;
    let mut sum = vec![0f64; batch * out];
    for (i, (s, r)) in shards.shards().iter().zip(shards.ranges()).enumerate() {
        let len = r.len();
        let mut hs = vec![T::from_f32(f32::NAN); batch * len];
        let mut ys = vec![f32::NAN; batch * out];
        mlp_on_cpu(s)?
            .forward(&x, batch, &mut hs, &mut ys)
            .map_err(|e| format!("shard {i}'s forward: {e}"))?;
        for b in 0..batch {
            ensure!(
                hs[b * len..(b + 1) * len]
                    .iter()
                    .zip(&h[b * inter + r.start..b * inter + r.end])
                    .all(|(a, w)| a.to_f32().to_bits() == w.to_f32().to_bits()),
                "shard {i}'s h (rows {r:?}) differs from the MLP's"
            );
        }
        sum.iter_mut().zip(&ys).for_each(|(s, &v)| *s += v as f64);
    }
    let dd = dense_f64(&down)?;
    let scale: Vec<f64> = (0..batch * out)
        .map(|bi| {
            let (b, o) = (bi / out.max(1), bi % out.max(1));
            (0..inter)
                .map(|j| (dd[o * inter + j] * h[b * inter + j].to_f32() as f64).abs())
                .sum()
        })
        .collect();
    within(&sum, &want, &scale)?;
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_tp_mlp() {
    DRIVER.run("SparseMlp::shard", 2, gen_mlp, |c, rng| match c.ty {
        Ty::F32 => run_mlp::<f32>(c, rng),
        Ty::F16 => run_mlp::<f16>(c, rng),
    });
}
