//! The MLP rows of `bench_report decode`: a pruned SwiGLU MLP (`SparseMlp`: the gated
//! gate-and-up product, then down) at decode-sized batches, beside the dense MLP through
//! cuBLAS (the gate and up GEMM stacked, the SiLU-and-multiply kernel, the down GEMM) in the
//! same run, eager and replayed from a CUDA graph, with f16 and FP8 (W8A16) weights.
//! Weights are cycled out of L2 as in the decode rows.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sparsek::quantize::BlockGranularity;
use sparsek::{BlockShape, BsrMatrix, DeviceBsr, SparseMlp, F8E4M3};

use super::device::{device_us, mask, parse_pair, random_device};
use super::{flag, list, median};
use crate::{baseline, ceilings};

/// Bytes of weights every timed loop cycles through (3× an H100's 50 MB L2).
const CYCLE_BYTES: usize = 160 << 20;

/// One (weights, block, density, n) row of the MLP.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MlpRow {
    /// `hidden x inter`, e.g. `4096x14336`.
    pub shape: String,
    pub block: String,
    pub density: f64,
    /// The weights' type: `f16` or `e4m3` (W8A16, per-block scales).
    pub weights: String,
    pub n: usize,
    /// Bytes that must move: both products' nonzero blocks, indices and scales, x, h
    /// (written and read) and y.
    pub bytes: f64,
    /// Median µs per MLP call, eager (two launches) and replayed from a CUDA graph.
    pub sparse_us: f64,
    pub sparse_graph_us: f64,
    /// The dense f16 MLP (two cuBLAS GEMMs and the SiLU-and-multiply), eager and from a
    /// graph (None where cuBLAS would not capture).
    pub dense_us: f64,
    pub dense_graph_us: Option<f64>,
}

/// The MLP's options: `--mlp-shape 4096x14336 --mlp-blocks 128x128,64x64
/// --mlp-densities 0.5,0.25 --mlp-ns 1,8,16,64 --mlp-weights f16,e4m3`.
pub fn rows(args: &[String], stream: &Arc<CudaStream>, hbm_gbs: f64) -> Result<Vec<MlpRow>> {
    let (hidden, inter) = parse_pair(
        flag(args, "--mlp-shape").unwrap_or("4096x14336"),
        "--mlp-shape is hidden x inter",
    )?;
    let blocks = list(args, "--mlp-blocks", "128x128,64x64");
    let densities = list(args, "--mlp-densities", "0.5,0.25");
    let ns: Vec<usize> = list(args, "--mlp-ns", "1,8,16,64")
        .iter()
        .map(|n| n.parse())
        .collect::<Result<_, _>>()?;
    let weights = list(args, "--mlp-weights", "f16,e4m3");
    let repeats: usize = flag(args, "--repeats")
        .map(str::parse)
        .transpose()?
        .unwrap_or(5);
    let iters: usize = flag(args, "--iters")
        .map(str::parse)
        .transpose()?
        .unwrap_or(20);
    let ctx = stream.context();
    // A stream of its own: the legacy default stream cannot be captured.
    let stream = &ctx.new_stream()?;
    // SAFETY: every buffer of this section lives and is used on `stream` alone, so stream
    // order is the only synchronization needed; cudarc's per-buffer events (recorded on
    // other streams' behalf) are not wanted inside a graph capture.
    unsafe { ctx.disable_event_tracking() };
    let glu = ceilings::kernel(stream, "silu_mul_f16")?;
    let blas = cudarc::cublas::CudaBlas::new(stream.clone())?;
    let mut rng = StdRng::seed_from_u64(29);

    // The dense MLP per n: gate and up stacked (2·inter x hidden), then down.
    let mut dense = BTreeMap::new();
    {
        let per_copy = 3 * hidden * inter * 2;
        let copies = CYCLE_BYTES.div_ceil(per_copy).max(1);
        let gus: Vec<CudaSlice<f16>> = (0..copies)
            .map(|_| random_device::<f16>(stream, 2 * inter * hidden, &mut rng))
            .collect::<Result<_>>()?;
        let downs: Vec<CudaSlice<f16>> = (0..copies)
            .map(|_| random_device::<f16>(stream, hidden * inter, &mut rng))
            .collect::<Result<_>>()?;
        for &n in &ns {
            let x = random_device::<f16>(stream, hidden * n, &mut rng)?;
            let mut gu_out = stream.alloc_zeros::<f16>(2 * inter * n)?;
            let mut h = stream.alloc_zeros::<f16>(inter * n)?;
            let mut y = stream.alloc_zeros::<f16>(hidden * n)?;
            let count = (inter * n) as i64;
            let cfg = LaunchConfig {
                grid_dim: (((inter * n).div_ceil(256)).min(65535) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut step = |i: usize| -> Result<()> {
                let c = i % copies;
                baseline::dense_gemm(&blas, (2 * inter, n, hidden), &gus[c], &x, &mut gu_out)?;
                let mut b = stream.launch_builder(&glu);
                b.arg(&gu_out).arg(&mut h).arg(&count);
                // SAFETY: the kernel reads 2·count f16 of gu_out (2·inter·n) and writes count
                // of h (inter·n), both live on this stream.
                unsafe { b.launch(cfg) }?;
                baseline::dense_gemm(&blas, (hidden, n, inter), &downs[c], &h, &mut y)?;
                Ok(())
            };
            let eager = median(device_us(stream, repeats, iters, iters, &mut step)?);
            let graphs = capture_each(stream, copies, &mut step);
            let graph = match graphs {
                Ok(g) => Some(replay_us(stream, &g, repeats, iters)?),
                Err(e) => {
                    println!("dense MLP n={n}: no graph ({e:#})");
                    None
                }
            };
            dense.insert(n, (eager, graph));
        }
    }

    let mut out = Vec::new();
    for block in &blocks {
        let (bm, bk) = parse_pair(block, "blocks are written RxC")?;
        let shape = BlockShape::new(bm, bk);
        for density in &densities {
            let density: f64 = density.parse()?;
            let w = |rows: usize, cols: usize, rng: &mut StdRng| -> Result<BsrMatrix<f16>> {
                let m = mask("topk", rows / bm, cols / bk, density, rng)?;
                Ok(BsrMatrix::from_block_mask(&m, shape, |_, _| {
                    f16::from_f32(rng.random_range(-0.05..0.05))
                })?)
            };
            let (g, u, d) = (
                w(inter, hidden, &mut rng)?,
                w(inter, hidden, &mut rng)?,
                w(hidden, inter, &mut rng)?,
            );
            let host = SparseMlp::new(&g, &u, d, sparsek::Activation::Silu)?;
            for kind in &weights {
                let (elem, mlps) = match kind.as_str() {
                    "f16" => (2usize, Mlps::F16(Vec::new())),
                    "e4m3" => (1, Mlps::Fp8(Vec::new())),
                    other => bail!("--mlp-weights: f16 or e4m3, not {other}"),
                };
                let nnzb = host.gate_up().nnz_blocks() + host.down().nnz_blocks();
                let weight_bytes = nnzb * bm * bk * elem;
                let copies = CYCLE_BYTES.div_ceil(weight_bytes).max(1);
                let mlps = match mlps {
                    Mlps::F16(_) => Mlps::F16(
                        (0..copies)
                            .map(|_| host.upload(stream))
                            .collect::<Result<_, _>>()?,
                    ),
                    Mlps::Fp8(_) => {
                        let q = |m: &BsrMatrix<f16>| {
                            m.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
                        };
                        let (gq, uq, dq) = (q(&g)?, q(&u)?, q(host.down())?);
                        let h8 = SparseMlp::new_fp8(&gq, &uq, dq, sparsek::Activation::Silu)?;
                        Mlps::Fp8(
                            (0..copies)
                                .map(|_| h8.upload(stream))
                                .collect::<Result<_, _>>()?,
                        )
                    }
                };
                for &n in &ns {
                    let x = random_device::<f16>(stream, hidden * n, &mut rng)?;
                    let mut h = stream.alloc_zeros::<f16>(inter * n)?;
                    let mut y = stream.alloc_zeros::<f16>(hidden * n)?;
                    let mut step = |i: usize| -> Result<()> {
                        match &mlps {
                            Mlps::F16(m) => m[i % copies].forward(&x, n, &mut h, &mut y)?,
                            Mlps::Fp8(m) => m[i % copies].forward_fp8(&x, n, &mut h, &mut y)?,
                        }
                        Ok(())
                    };
                    let sparse_us = median(device_us(stream, repeats, iters, iters, &mut step)?);
                    let graphs = capture_each(stream, copies, &mut step)
                        .context("capturing the sparse MLP")?;
                    let sparse_graph_us = replay_us(stream, &graphs, repeats, iters)?;
                    let index_bytes = 4 * (nnzb + 3 * inter / bm + hidden / bm + 2);
                    let scale_bytes = if elem == 1 { 4 * nnzb } else { 0 };
                    let act_bytes = 2 * n * (hidden + 2 * inter + hidden);
                    let (dense_us, dense_graph_us) = dense[&n];
                    let row = MlpRow {
                        shape: format!("{hidden}x{inter}"),
                        block: format!("{shape}"),
                        density,
                        weights: kind.clone(),
                        n,
                        bytes: (weight_bytes + index_bytes + scale_bytes + act_bytes) as f64,
                        sparse_us,
                        sparse_graph_us,
                        dense_us,
                        dense_graph_us,
                    };
                    print_row(&row, hbm_gbs);
                    out.push(row);
                }
            }
        }
    }
    Ok(out)
}

enum Mlps {
    F16(Vec<SparseMlp<DeviceBsr<f16>>>),
    Fp8(Vec<SparseMlp<DeviceBsr<F8E4M3>>>),
}

/// One graph per weight copy, each the step on that copy.
fn capture_each(
    stream: &Arc<CudaStream>,
    copies: usize,
    step: &mut impl FnMut(usize) -> Result<()>,
) -> Result<Vec<CudaGraph>> {
    let mut graphs = Vec::with_capacity(copies);
    for c in 0..copies {
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let r = step(c);
        let g = stream.end_capture(CUgraphInstantiate_flags(0));
        r?;
        graphs.push(g?.context("an empty capture")?);
    }
    Ok(graphs)
}

/// Median µs per replay, cycling through the graphs.
fn replay_us(
    stream: &Arc<CudaStream>,
    graphs: &[CudaGraph],
    repeats: usize,
    iters: usize,
) -> Result<f64> {
    Ok(median(device_us(stream, repeats, iters, iters, |i| {
        Ok(graphs[i % graphs.len()].launch()?)
    })?))
}

/// One line of the MLP table.
pub fn print_row(r: &MlpRow, hbm_gbs: f64) {
    let e = |us: f64| r.bytes / (us * 1e-6) / 1e9 / hbm_gbs;
    println!(
        "MLP {:<10} {:<8} d={:<4} {:<4} n={:<3} sparse {:>7.1} us (graph {:>7.1}, E_hbm {:>4.2})  dense {:>7.1} us (graph {})  sparse/dense {:>4.2} (graph {})",
        r.shape,
        r.block,
        r.density,
        r.weights,
        r.n,
        r.sparse_us,
        r.sparse_graph_us,
        e(r.sparse_graph_us),
        r.dense_us,
        r.dense_graph_us.map_or("-".into(), |v| format!("{v:.1}")),
        r.sparse_us / r.dense_us,
        r.dense_graph_us
            .map_or("-".into(), |v| format!("{:.2}", r.sparse_graph_us / v)),
    );
}
