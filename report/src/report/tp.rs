//! `bench_report tp`: the Llama-3-8B-shaped pruned MLP (hidden 4096, intermediate 14336,
//! f16, SiLU) on one GPU and tensor-parallel on two (`sparsek::tp`: column-parallel gate and
//! up, row-parallel down, one NCCL all-reduce), with the nnz-balanced cut and with naive
//! equal slices, per batch: wall-clock µs per MLP call (both GPUs driven from one thread,
//! synchronized around `iters` calls), each GPU's weight bytes, and the imbalance of both
//! cuts.
//!
//! `bench_report tp [--shape 4096x14336] [--block 128x128] [--density 0.5]
//! [--patterns ramp,topk] [--batches 1,8,32,128,256] [--repeats 5] [--iters 20]
//! [--json tp.json]`

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sparsek::tp::{TpGroup, TpSparseMlp};
use sparsek::{Activation, BlockShape, BsrMatrix, SparseMlp};

use super::device::{mask, parse_pair};
use super::{flag, list, median, write_json};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TpRow {
    pub pattern: String,
    pub batch: usize,
    /// µs per MLP call on one GPU.
    pub one_gpu_us: f64,
    /// µs per call on two GPUs, nnz-balanced cut and equal slices.
    pub tp_us: f64,
    pub tp_equal_us: f64,
    /// Weight bytes per GPU (balanced cut, equal slices), and on one GPU.
    pub bytes_per_gpu: Vec<f64>,
    pub bytes_per_gpu_equal: Vec<f64>,
    pub bytes_one_gpu: f64,
    pub imbalance: f64,
    pub imbalance_equal: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TpReport {
    pub devices: Vec<String>,
    pub shape: String,
    pub block: String,
    pub density: f64,
    pub rows: Vec<TpRow>,
}

pub fn command(args: &[String]) -> Result<()> {
    write_json(args, &run(args)?)
}

/// Median over `repeats` of the wall-clock µs per call of `iters` calls of `op`, both
/// streams synchronized before and after.
fn wall_us(
    streams: &[Arc<CudaStream>],
    repeats: usize,
    iters: usize,
    mut op: impl FnMut() -> Result<()>,
) -> Result<f64> {
    let sync = || -> Result<()> {
        for s in streams {
            s.synchronize()?;
        }
        Ok(())
    };
    for _ in 0..3 {
        op()?;
    }
    let mut runs = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        sync()?;
        let t = Instant::now();
        for _ in 0..iters {
            op()?;
        }
        sync()?;
        runs.push(t.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    Ok(median(runs))
}

pub fn run(args: &[String]) -> Result<TpReport> {
    let (hidden, inter) = parse_pair(
        flag(args, "--shape").unwrap_or("4096x14336"),
        "--shape is hidden x inter",
    )?;
    let (bm, bk) = parse_pair(flag(args, "--block").unwrap_or("128x128"), "--block is RxC")?;
    let density: f64 = flag(args, "--density").unwrap_or("0.5").parse()?;
    let patterns = list(args, "--patterns", "ramp,topk");
    let batches: Vec<usize> = list(args, "--batches", "1,8,32,128,256")
        .iter()
        .map(|b| b.parse())
        .collect::<Result<_, _>>()?;
    let repeats: usize = flag(args, "--repeats")
        .map(str::parse)
        .transpose()?
        .unwrap_or(5);
    let iters: usize = flag(args, "--iters")
        .map(str::parse)
        .transpose()?
        .unwrap_or(20);
    // open_device first: cudarc panics where no libcuda can be loaded at all.
    sparsek::gpu::open_device().map_err(anyhow::Error::msg)?;
    let count = CudaContext::device_count()? as usize;
    if count < 2 {
        bail!("bench_report tp needs two GPUs ({count} found)");
    }
    let ctxs: Vec<Arc<CudaContext>> = (0..2).map(CudaContext::new).collect::<Result<_, _>>()?;
    let streams: Vec<Arc<CudaStream>> = ctxs.iter().map(|c| c.default_stream()).collect();
    for c in &ctxs {
        // SAFETY: every buffer of this bench lives and is used on its GPU's one stream.
        unsafe { c.disable_event_tracking() };
    }
    let group = TpGroup::new(streams.clone())?;
    let mut report = TpReport {
        devices: ctxs.iter().map(|c| c.name()).collect::<Result<_, _>>()?,
        shape: format!("{hidden}x{inter}"),
        block: format!("{bm}x{bk}"),
        density,
        rows: Vec::new(),
    };
    println!(
        "tensor-parallel MLP on {:?}: hidden {hidden}, inter {inter}, {bm}x{bk} blocks, d = {density} (µs per call, wall clock)",
        report.devices
    );
    let mut rng = StdRng::seed_from_u64(37);
    let block = BlockShape::new(bm, bk);
    for pattern in &patterns {
        let w = |rows: usize, cols: usize, rng: &mut StdRng| -> Result<BsrMatrix<f16>> {
            let m = mask(pattern, rows / bm, cols / bk, density, rng)?;
            Ok(BsrMatrix::from_block_mask(&m, block, |_, _| {
                f16::from_f32(rng.random_range(-0.05..0.05))
            })?)
        };
        let (g, u, d) = (
            w(inter, hidden, &mut rng)?,
            w(inter, hidden, &mut rng)?,
            w(hidden, inter, &mut rng)?,
        );
        let mlp = SparseMlp::new(&g, &u, d, Activation::Silu)?;
        let one = mlp.upload(&streams[0])?;
        let tp = TpSparseMlp::new(&mlp, &group)?;
        let eq = TpSparseMlp::from_shards(mlp.shard_equal(2)?, &group, &mlp)?;
        let bytes = |work: &[usize]| work.iter().map(|&w| w as f64 * 2.0).collect::<Vec<_>>();
        let one_bytes =
            ((mlp.gate_up().nnz_blocks() + mlp.down().nnz_blocks()) * bm * bk * 2) as f64;
        for &batch in &batches {
            let x: Vec<f16> = (0..batch * hidden)
                .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
                .collect();
            let s0 = &streams[0];
            let dx = s0.clone_htod(&x)?;
            let mut dh = s0.alloc_zeros::<f16>(batch * inter)?;
            let mut dy = s0.alloc_zeros::<f32>(batch * hidden)?;
            let one_gpu_us = wall_us(&streams[..1], repeats, iters, || {
                Ok(one.forward(&dx, batch, &mut dh, &mut dy)?)
            })?;
            let time_tp = |m: &TpSparseMlp<f16>| -> Result<f64> {
                let xs: Vec<CudaSlice<f16>> = streams
                    .iter()
                    .map(|s| s.clone_htod(&x))
                    .collect::<Result<_, _>>()?;
                let mut hs: Vec<CudaSlice<f16>> = streams
                    .iter()
                    .zip(m.inter())
                    .map(|(s, &i)| s.alloc_zeros::<f16>((batch * i).max(1)))
                    .collect::<Result<_, _>>()?;
                let mut ys: Vec<CudaSlice<f32>> = streams
                    .iter()
                    .map(|s| s.alloc_zeros::<f32>(batch * hidden))
                    .collect::<Result<_, _>>()?;
                wall_us(&streams, repeats, iters, || {
                    Ok(m.forward(&group, &xs, batch, &mut hs, &mut ys)?)
                })
            };
            let tp_us = time_tp(&tp)?;
            let tp_equal_us = time_tp(&eq)?;
            let row = TpRow {
                pattern: pattern.clone(),
                batch,
                one_gpu_us,
                tp_us,
                tp_equal_us,
                bytes_per_gpu: bytes(tp.work()),
                bytes_per_gpu_equal: bytes(eq.work()),
                bytes_one_gpu: one_bytes,
                imbalance: tp.imbalance(),
                imbalance_equal: eq.imbalance(),
            };
            println!(
                "{:<7} batch {:>3}: 1 GPU {:>8.1} us | 2 GPUs balanced {:>8.1} us ({:.2}x, imbalance {:.3}, MB/GPU {:?}) | equal slices {:>8.1} us (imbalance {:.3}, MB/GPU {:?})",
                row.pattern,
                batch,
                one_gpu_us,
                tp_us,
                one_gpu_us / tp_us,
                row.imbalance,
                row.bytes_per_gpu.iter().map(|b| (b / 1e6).round()).collect::<Vec<_>>(),
                tp_equal_us,
                row.imbalance_equal,
                row.bytes_per_gpu_equal.iter().map(|b| (b / 1e6).round()).collect::<Vec<_>>(),
            );
            report.rows.push(row);
        }
    }
    Ok(report)
}
