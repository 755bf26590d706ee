//! What the GPU subcommands (`run`, `products`, `decode`) share: their settings, the
//! device, the event timer, random operands, block patterns, the measured memory ceilings
//! and the names of the backends.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{rngs::StdRng, Rng};
use sparsek::{gpu, Backend, BlockMask, BlockShape, Element};

use super::{flag, timing, Timing};
use crate::{baseline, ceilings};

/// The problem and the timing of `run` and `products`.
pub struct Settings {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub repeats: usize,
    pub iters: usize,
    pub slowdown: usize,
}

impl Settings {
    /// `--m --n --k` (8192 each), `--repeats` (7), `--iters` (20), `--slowdown` (1).
    pub fn from_args(args: &[String]) -> Result<Self> {
        let num = |name: &str, default: usize| -> Result<usize> {
            Ok(flag(args, name)
                .map(str::parse)
                .transpose()?
                .unwrap_or(default))
        };
        Ok(Settings {
            m: num("--m", 8192)?,
            n: num("--n", 8192)?,
            k: num("--k", 8192)?,
            repeats: num("--repeats", 7)?,
            iters: num("--iters", 20)?,
            slowdown: num("--slowdown", 1)?.max(1),
        })
    }
}

/// The device's name, its default stream and a cuBLAS handle on it.
pub fn open() -> Result<(String, Arc<CudaStream>, CudaBlas)> {
    let ctx = gpu::open_device().map_err(anyhow::Error::msg)?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone())?;
    Ok((ctx.name()?, stream, blas))
}

/// A progress bar of `total` steps, the current configuration as its message.
pub fn progress(total: usize) -> Result<ProgressBar> {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} {msg} [{elapsed}]",
    )?);
    Ok(bar)
}

/// Dense cuBLAS at the full M, N, K of `s` (the compute ceiling), into `c`; `b` is
/// the `k x n` operand.
pub fn cublas_full<T: Element>(
    s: &Settings,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rng: &mut StdRng,
    b: &CudaSlice<T>,
    c: &mut CudaSlice<T>,
) -> Result<Timing>
where
    CudaBlas: Gemm<T>,
{
    let (m, n, k) = (s.m, s.n, s.k);
    let a_full = random_device::<T>(stream, m * k, rng)?;
    let runs = time(stream, s, || {
        Ok(baseline::dense_gemm(blas, (m, n, k), &a_full, b, c)?)
    })?;
    Ok(timing(runs, 2.0 * (m * n * k) as f64))
}

/// Device microseconds per operation: `iters` launches (each `slowdown` times)
/// between two events, `repeats` times, after a warm-up.
pub fn time(
    stream: &Arc<CudaStream>,
    s: &Settings,
    mut op: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    device_us(stream, s.repeats, s.iters * s.slowdown, s.iters, |_| op())
}

/// Device microseconds per operation, once per repeat: `launches` calls of `op(i)` (`i` the
/// call's number in the repeat) between two events, over `per` operations; after a warm-up
/// of 3 calls.
pub fn device_us(
    stream: &Arc<CudaStream>,
    repeats: usize,
    launches: usize,
    per: usize,
    mut op: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    for i in 0..3 {
        op(i)?;
    }
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut out = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = stream.record_event(flags)?;
        for i in 0..launches {
            op(i)?;
        }
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        out.push(start.elapsed_ms(&end)? as f64 * 1e3 / per as f64);
    }
    Ok(out)
}

/// `len` values uniform in [-1, 1) on the device.
pub fn random_device<T: Element>(
    stream: &Arc<CudaStream>,
    len: usize,
    rng: &mut StdRng,
) -> Result<CudaSlice<T>> {
    let host: Vec<T> = (0..len)
        .map(|_| T::from_f32(rng.random_range(-1.0..1.0)))
        .collect();
    Ok(stream.clone_htod(&host)?)
}

/// `AxB` as (A, B); `form` (how such values are written) is the error's context.
pub fn parse_pair(s: &str, form: &'static str) -> Result<(usize, usize)> {
    let (a, b) = s.split_once('x').context(form)?;
    Ok((a.parse()?, b.parse()?))
}

/// A block shape, `RxC`.
pub fn parse_block(s: &str) -> Result<BlockShape> {
    let (r, c) = parse_pair(s, "block shapes are written RxC")?;
    Ok(BlockShape::new(r, c))
}

/// A density, `0.125` or `1/8`.
pub fn parse_density(s: &str) -> Result<f64> {
    Ok(match s.split_once('/') {
        Some((a, b)) => a.parse::<f64>()? / b.parse::<f64>()?,
        None => s.parse()?,
    })
}

/// The block pattern of one row of the table.
pub fn mask(
    pattern: &str,
    rows: usize,
    cols: usize,
    density: f64,
    rng: &mut StdRng,
) -> Result<BlockMask> {
    let per_row = ((cols as f64 * density).round() as usize).clamp(1, cols);
    Ok(match pattern {
        "topk" => BlockMask::random_per_row(rows, cols, per_row, rng)?,
        "random" => BlockMask::random(rows, cols, density, rng)?,
        // Every 16th block-row full, the others half the top-k count.
        "skewed" => BlockMask::skewed(rows, cols, 16, (per_row / 2).max(1), rng)?,
        // Block-row i keeps a random (1/2 + i/rows) share of the top-k count: the density
        // rises from d/2 to 3d/2 down the rows (equal slices of rows get unequal work).
        "ramp" => {
            let keep: Vec<Vec<bool>> = (0..rows)
                .map(|i| {
                    let share = 0.5 + i as f64 / rows.max(1) as f64;
                    let count = ((per_row as f64 * share).round() as usize).clamp(1, cols);
                    let mut row = vec![false; cols];
                    for c in rand::seq::index::sample(rng, cols, count) {
                        row[c] = true;
                    }
                    row
                })
                .collect();
            BlockMask::from_fn(rows, cols, |r, c| keep[r][c])?
        }
        // Causal with a band giving about this density (sliding-window attention).
        "causal" => BlockMask::causal(
            rows.min(cols),
            Some((cols as f64 * density).ceil().max(1.0) as usize),
        )?,
        _ => bail!("pattern `{pattern}`: topk, random, skewed, ramp or causal"),
    })
}

/// The L2 and HBM read bandwidth of the run, TB/s, where measured.
pub type MemoryCeilings = (Option<f64>, Option<f64>);

/// The L2 and HBM read bandwidth of this run in TB/s (kernels/bandwidth.cu), or None
/// (said on stdout) when they cannot be measured: then no floors or E.
pub fn memory_ceilings(stream: &Arc<CudaStream>) -> MemoryCeilings {
    match (ceilings::l2_read(stream), ceilings::hbm_read(stream)) {
        (Ok(l2), Ok(hbm)) => {
            println!(
                "ceilings: L2 read {:.2} TB/s, HBM read {:.2} TB/s (this run)",
                l2 / 1e12,
                hbm / 1e12
            );
            (Some(l2 / 1e12), Some(hbm / 1e12))
        }
        (Err(e), _) | (_, Err(e)) => {
            println!("no bandwidth ceilings, so no floors or E: {e:#}");
            (None, None)
        }
    }
}

/// A backend as the reports name it (`decode`, `hopper`, `wmma`).
pub fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Decode => "decode",
        Backend::Hopper => "hopper",
        Backend::Wmma => "wmma",
        Backend::Cpu => "cpu",
        _ => "auto",
    }
}
