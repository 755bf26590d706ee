//! `bench_report decode`: pruned linear layers at decode-sized batches, `y = x·Wᵀ` with a
//! block-sparse `W` (`out x in`), beside dense cuBLAS on the full `W` and the HBM read
//! bandwidth measured in the same run.
//!
//! Every timed operation reads its weights from HBM, as a layer of a model does: the
//! sparse and the dense weights are each held in enough copies (≥ 160 MB, three times the
//! L2) and the launches cycle through them.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Result};
use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sparsek::{
    gpu, spmm, Backend, BlockShape, BsrMatrix, Dense, DenseMut, DeviceBsr, Layout, SpmmOptions,
};

use super::device::{backend_name, device_us, mask, open, parse_pair, random_device};
use super::{flag, list, median, write_json};
use crate::roofline::Problem;
use crate::{baseline, ceilings};

/// `bench_report decode [--shapes 4096x4096,14336x4096,4096x14336] [--ns 1,8,16,32,64,128,256]
/// [--densities 0.25,0.5] [--blocks 128x128,64x64,32x32] [--repeats 5] [--iters 20]
/// [--json decode.json]` and the MLP rows' options (`super::mlp::rows`; `--no-mlp`,
/// `--mlp-only`): the header, the tables row by row, and the report as JSON.
pub fn command(args: &[String]) -> Result<()> {
    print_header();
    write_json(args, &run(args)?)
}

/// Bytes of weights every timed loop cycles through (3× an H100's 50 MB L2).
const CYCLE_BYTES: usize = 160 << 20;

/// One (shape, density, block, n) row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecodeRow {
    /// `out x in`, e.g. `14336x4096`.
    pub shape: String,
    pub block: String,
    pub density: f64,
    pub n: usize,
    /// Bytes that must move: A's nonzero blocks + B + C.
    pub bytes: f64,
    /// Median µs per call of `Auto`, and the family it picked.
    pub auto_us: f64,
    pub auto_backend: String,
    /// Median µs per call of each family that takes the problem (`decode`, `hopper`, `wmma`).
    pub families_us: BTreeMap<String, f64>,
    /// Dense cuBLAS on the full `W`, same n.
    pub dense_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecodeReport {
    pub device: String,
    /// HBM read bandwidth of this run, GB/s.
    pub hbm_gbs: f64,
    pub rows: Vec<DecodeRow>,
    /// The SwiGLU MLP rows (`super::mlp`), in the same run.
    #[serde(default)]
    pub mlp: Vec<super::mlp::MlpRow>,
}

/// Median µs per call over `repeats` timings of `iters` calls, after a warm-up;
/// `op(i)` is call number i (to cycle through weight copies).
fn time(
    stream: &Arc<CudaStream>,
    repeats: usize,
    iters: usize,
    op: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    Ok(median(device_us(stream, repeats, iters, iters, op)?))
}

/// `AxB` sizes.
fn parse_size(s: &str) -> Result<(usize, usize)> {
    parse_pair(s, "sizes are written AxB")
}

/// Runs the sweep (arguments as `bench_report decode --help` shows) and prints the table.
pub fn run(args: &[String]) -> Result<DecodeReport> {
    let shapes = list(args, "--shapes", "4096x4096,14336x4096,4096x14336");
    let ns = list(args, "--ns", "1,8,16,32,64,128,256");
    let densities = list(args, "--densities", "0.25,0.5");
    let blocks = list(args, "--blocks", "128x128,64x64,32x32");
    let repeats: usize = flag(args, "--repeats")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(5);
    let iters: usize = flag(args, "--iters")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(20);

    let (device, stream, blas) = open()?;
    let hbm = ceilings::hbm_read(&stream)?;
    let mut report = DecodeReport {
        device,
        hbm_gbs: hbm / 1e9,
        rows: Vec::new(),
        mlp: Vec::new(),
    };
    println!(
        "decode sweep on {}: HBM read {:.0} GB/s (this run)",
        report.device, report.hbm_gbs
    );
    let mut rng = StdRng::seed_from_u64(11);
    // --mlp-only: the MLP rows alone; --no-mlp: the layers alone.
    let layers = !args.iter().any(|a| a == "--mlp-only");
    let shapes = if layers { shapes } else { Vec::new() };
    for shape in &shapes {
        let (out_f, in_f) = parse_size(shape)?;
        // Dense cuBLAS on the full W, per n: copies of W to cycle through.
        let w_bytes = out_f * in_f * 2;
        let copies = CYCLE_BYTES.div_ceil(w_bytes).max(1);
        let mut dense_us = BTreeMap::new();
        {
            let ws: Vec<CudaSlice<f16>> = (0..copies)
                .map(|_| random_device::<f16>(&stream, out_f * in_f, &mut rng))
                .collect::<Result<_>>()?;
            for n in &ns {
                let n: usize = n.parse()?;
                let x = random_device::<f16>(&stream, in_f * n, &mut rng)?;
                let mut y = stream.alloc_zeros::<f16>(out_f * n)?;
                // Row-major y (n x out) = x (n x in) · Wᵀ  <=>  column-major yᵀ = W·xᵀ; the
                // baseline computes the same FLOPs as row-major C (out x n) = W (out x in) · B.
                let us = time(&stream, repeats, iters, |i| {
                    Ok(baseline::dense_gemm(
                        &blas,
                        (out_f, n, in_f),
                        &ws[i % copies],
                        &x,
                        &mut y,
                    )?)
                })?;
                dense_us.insert(n, us);
            }
        }
        for block in &blocks {
            let (bm, bk) = parse_size(block)?;
            let block = BlockShape::new(bm, bk);
            for density in &densities {
                let density: f64 = density.parse()?;
                let mask = mask("topk", out_f / bm, in_f / bk, density, &mut rng)?;
                let a = BsrMatrix::from_block_mask(&mask, block, |_, _| {
                    f16::from_f32(rng.random_range(-1.0..1.0))
                })?;
                let a_bytes = a.values().len() * 2;
                let copies = CYCLE_BYTES.div_ceil(a_bytes).max(1);
                let das: Vec<DeviceBsr<f16>> = (0..copies)
                    .map(|_| DeviceBsr::upload(&a, &stream))
                    .collect::<Result<_, _>>()?;
                for n in &ns {
                    let n: usize = n.parse()?;
                    let x = random_device::<f16>(&stream, in_f * n, &mut rng)?;
                    let mut y = stream.alloc_zeros::<f16>(out_f * n)?;
                    let mut families_us = BTreeMap::new();
                    let mut timed = |backend: Backend| -> Result<Option<(f64, Backend)>> {
                        let opts = SpmmOptions::new().backend(backend);
                        let picked = match gpu::can_implement(
                            &das[0],
                            &Dense::device(&x, in_f, n, Layout::ColMajor),
                            &DenseMut::device(&mut y, out_f, n, Layout::ColMajor),
                            &opts,
                        ) {
                            Ok(b) => b,
                            Err(_) => return Ok(None),
                        };
                        let us = time(&stream, repeats, iters, |i| {
                            Ok(spmm(
                                &das[i % copies],
                                Dense::device(&x, in_f, n, Layout::ColMajor),
                                DenseMut::device(&mut y, out_f, n, Layout::ColMajor),
                                &opts,
                            )?)
                        })?;
                        Ok(Some((us, picked)))
                    };
                    let Some((auto_us, picked)) = timed(Backend::Auto)? else {
                        bail!("{shape} {block} n={n}: Auto runs nothing");
                    };
                    for b in [Backend::Decode, Backend::Hopper, Backend::Wmma] {
                        if let Some((us, _)) = timed(b)? {
                            families_us.insert(backend_name(b).to_string(), us);
                        }
                    }
                    report.rows.push(DecodeRow {
                        shape: shape.clone(),
                        block: format!("{block}"),
                        density,
                        n,
                        bytes: Problem {
                            m: out_f,
                            n,
                            k: in_f,
                            bm,
                            bk,
                            nnzb: a.nnz_blocks(),
                            in_bytes: 2,
                            out_bytes: 2,
                            reads_c: false,
                        }
                        .hbm_bytes(),
                        auto_us,
                        auto_backend: backend_name(picked).to_string(),
                        families_us,
                        dense_us: dense_us[&n],
                    });
                    print_row(report.rows.last().expect("just pushed"), report.hbm_gbs);
                }
            }
        }
    }
    if !args.iter().any(|a| a == "--no-mlp") {
        report.mlp = super::mlp::rows(args, &stream, report.hbm_gbs)?;
    }
    Ok(report)
}

/// One line of the table.
pub fn print_row(r: &DecodeRow, hbm_gbs: f64) {
    let gbs = r.bytes / (r.auto_us * 1e-6) / 1e9;
    let fam = |name: &str| {
        r.families_us
            .get(name)
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "{:<11} {:<8} d={:<4} n={:<4} auto {:>8.1} us ({:<7}) dense {:>8.1} us  ratio {:>5.2}  {:>6.0} GB/s  E_hbm {:>4.2}  | decode {:>7} hopper {:>7} wmma {:>7}",
        r.shape,
        r.block,
        r.density,
        r.n,
        r.auto_us,
        r.auto_backend,
        r.dense_us,
        r.auto_us / r.dense_us,
        gbs,
        gbs / hbm_gbs,
        fam("decode"),
        fam("hopper"),
        fam("wmma"),
    );
}

/// The header of the table.
pub fn print_header() {
    println!("(µs per call, medians; ratio = sparse / dense cuBLAS on the full W; GB/s on A's nonzero blocks + B + C; E_hbm = that / HBM read GB/s of this run)");
}
