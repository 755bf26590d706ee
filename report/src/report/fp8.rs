//! `bench_report fp8`: the FP8 products beside their dense and f16 peers, in one run.
//!
//! - **Prefill** (`--m --n --k`, 8192 each): per block shape, density and pattern, W8A8 on
//!   the Hopper family (A e4m3 with one f32 scale per block, B e4m3 column-major (K-major)
//!   with one scale per column, C f16) beside the f16 product of the same pattern (B and C
//!   row-major, f16's usual layout). Floors against this run's ceilings: dense e4m3
//!   cuBLASLt (`crate::dense_fp8`; the faster of its promoting and fast-accumulation modes)
//!   for the FP8 row, dense f16 cuBLAS for the f16 row, and the L2 and HBM read bandwidth.
//! - **Decode** (`--decode-shapes`, `--ns`, `--decode-density`): `y = x·Wᵀ` with W8A16 through
//!   Auto (W e4m3, per-block scales; x and y f16: the Decode family, and on sm_90 from
//!   n = 64 the Hopper family's W8A16 rows) beside the f16 product (Auto) of the
//!   same pattern, the weights cycled through copies that exceed the L2 (as a model's
//!   layers do); E_hbm = bytes that must move ÷ time ÷ HBM read bandwidth.
//!
//! ```text
//! bench_report fp8 [--m 8192 --n 8192 --k 8192] [--blocks 128x128,64x64] [--densities 1/8,1/4]
//!                  [--patterns topk,random] [--repeats 7] [--iters 20]
//!                  [--decode-shapes 4096x4096,14336x4096] [--ns 1,8,16] [--decode-density 0.5]
//!                  [--decode-block 128x128] [--json fp8.json] [--markdown fp8.md]
//! ```
#![allow(deprecated)]

use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
use sparsek::{
    gpu, spmm, spmm_fp8, Backend, BsrMatrix, ColumnScales, Dense, DenseMut, DenseShape, DeviceBsr,
    Epilogue, Layout, SpmmOptions, Vector, F8E4M3,
};

use super::device::{
    cublas_full, device_us, mask, memory_ceilings, open, parse_block, parse_density, parse_pair,
    random_device, time, Settings,
};
use super::{flag, list, median, timing, write_json, Timing};
use crate::dense_fp8::DenseFp8;
use crate::roofline::{Ceilings, Floor, Problem};

/// Bytes of weights every timed decode loop cycles through (3× an H100's 50 MB L2).
const CYCLE_BYTES: usize = 160 << 20;

/// One prefill configuration: the FP8 and f16 products of one pattern.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrefillRow {
    pub block: String,
    pub density: f64,
    pub pattern: String,
    /// FLOPs on the nonzero blocks.
    pub flops: f64,
    /// W8A8 e4m3 on the Hopper family, and its floor (dense e4m3, 1-byte operands).
    pub fp8: Option<Timing>,
    pub fp8_floor: Option<Floor>,
    /// f16 on the Hopper family, and its floor (dense f16).
    pub f16: Option<Timing>,
    pub f16_floor: Option<Floor>,
}

/// One decode configuration: W8A16 and f16 on the same pattern, same n.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecodeRow {
    /// `out x in`.
    pub shape: String,
    pub block: String,
    pub density: f64,
    pub n: usize,
    /// Bytes that must move for W8A16: A's nonzero blocks (1 byte each) and their scales,
    /// x and y.
    pub fp8_bytes: f64,
    /// The same for f16 (2-byte weights, no scales).
    pub f16_bytes: f64,
    /// Median µs of W8A16 on the Decode family, or why it was refused.
    pub fp8_us: Option<f64>,
    pub fp8_refused: Option<String>,
    /// Median µs of the f16 product (Auto's choice, the Decode family at these n).
    pub f16_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fp8Report {
    pub device: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Dense at the full M, N, K: `e4m3` (cuBLASLt, promoting), `e4m3_fast` (cuBLASLt,
    /// fast accumulation), `f16` (cuBLAS).
    pub dense: std::collections::BTreeMap<String, Timing>,
    pub l2_tbs: Option<f64>,
    pub hbm_tbs: Option<f64>,
    pub prefill: Vec<PrefillRow>,
    pub decode: Vec<DecodeRow>,
}

impl Fp8Report {
    /// The dense FP8 ceiling: the faster of cuBLASLt's two modes.
    fn fp8_tflops(&self) -> Option<f64> {
        ["e4m3", "e4m3_fast"]
            .iter()
            .filter_map(|k| self.dense.get(*k).map(|t| t.tflops))
            .reduce(f64::max)
    }

    fn ceilings(&self, dense_tflops: Option<f64>) -> Option<Ceilings> {
        Some(Ceilings {
            dense_tflops: dense_tflops?,
            l2_tbs: self.l2_tbs?,
            hbm_tbs: self.hbm_tbs?,
        })
    }
}

/// `bench_report fp8 ARGS` (the module's usage).
pub fn command(args: &[String]) -> Result<()> {
    let s = Settings::from_args(args)?;
    let (device, stream, blas) = open()?;
    let (l2_tbs, hbm_tbs) = memory_ceilings(&stream);
    let mut report = Fp8Report {
        device,
        m: s.m,
        n: s.n,
        k: s.k,
        dense: Default::default(),
        l2_tbs,
        hbm_tbs,
        prefill: Vec::new(),
        decode: Vec::new(),
    };
    let mut rng = StdRng::seed_from_u64(27);
    prefill(args, &s, &stream, &blas, &mut report, &mut rng)?;
    decode(args, &stream, &mut report, &mut rng)?;
    let md = markdown(&report);
    println!("\n{md}");
    write_json(args, &report)?;
    if let Some(path) = flag(args, "--markdown") {
        std::fs::write(path, &md).with_context(|| format!("writing {path}"))?;
        println!("wrote {path}");
    }
    Ok(())
}

/// `len` values uniform in [-1, 1) on the host.
fn random_host(len: usize, rng: &mut StdRng) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
}

fn prefill(
    args: &[String],
    s: &Settings,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    report: &mut Fp8Report,
    rng: &mut StdRng,
) -> Result<()> {
    let (m, n, k) = (s.m, s.n, s.k);
    // B in both types: f16 row-major (k x n); e4m3 column-major with per-column scales.
    let b16 = random_device::<f16>(stream, k * n, rng)?;
    let b8 = QuantizedDense::<F8E4M3>::quantize(
        &random_host(k * n, rng),
        DenseShape::packed(k, n, Layout::ColMajor),
        ColumnGranularity::PerColumn,
    )?;
    let db8: CudaSlice<F8E4M3> = stream.clone_htod(b8.values())?;
    let db8_scales: CudaSlice<f32> = stream.clone_htod(b8.scales())?;
    let mut c = stream.alloc_zeros::<f16>(m * n)?;

    // The dense ceilings at the full M, N, K.
    let f16_dense = cublas_full(s, stream, blas, rng, &b16, &mut c)?;
    report.dense.insert("f16".into(), f16_dense);
    {
        let a8: CudaSlice<F8E4M3> = stream.clone_htod(
            &random_host(m * k, rng)
                .into_iter()
                .map(F8E4M3::from_f32)
                .collect::<Vec<_>>(),
        )?;
        for (name, fast) in [("e4m3", false), ("e4m3_fast", true)] {
            let plan = DenseFp8::new(stream, (m, n, k), fast)?;
            let runs = time(stream, s, || plan.run(stream, &a8, &db8, &mut c))?;
            report
                .dense
                .insert(name.into(), timing(runs, 2.0 * (m * n * k) as f64));
        }
    }
    for (name, t) in &report.dense {
        println!(
            "dense {name}: {:.1} us, {:.0} TFLOPS",
            t.median_us, t.tflops
        );
    }
    let fp8_ceilings = report.ceilings(report.fp8_tflops());
    let f16_ceilings = report.ceilings(report.dense.get("f16").map(|t| t.tflops));

    let hopper = SpmmOptions::new().backend(Backend::Hopper);
    for block in list(args, "--blocks", "128x128,64x64") {
        let block = parse_block(&block)?;
        for density in list(args, "--densities", "1/8,1/4") {
            let density = parse_density(&density)?;
            for pattern in list(args, "--patterns", "topk,random") {
                let mask = mask(&pattern, m / block.rows, k / block.cols, density, rng)?;
                let a16 = BsrMatrix::from_block_mask(&mask, block, |_, _| {
                    f16::from_f32(rng.random_range(-1.0..1.0))
                })?;
                let a8 = a16.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
                let da16 = DeviceBsr::upload(&a16, stream)?;
                let da8 = DeviceBsr::upload_quantized(&a8, stream)?;
                let (am, ak) = (a16.m(), a16.k());
                let problem = |in_bytes| Problem {
                    m: am,
                    n,
                    k: ak,
                    bm: block.rows,
                    bk: block.cols,
                    nnzb: a16.nnz_blocks(),
                    in_bytes,
                    out_bytes: 2,
                    reads_c: false,
                };
                let flops = a16.flops(n);
                let b8_view = || {
                    Dense::device(&db8, ak, n, Layout::ColMajor)
                        .with_scales(ColumnScales::PerColumn(Vector::Device(&db8_scales)))
                };
                let epilogue = Epilogue::new();
                let fp8 = match gpu::can_implement_fp8(
                    &da8,
                    &b8_view(),
                    &DenseMut::device(&mut c, am, n, Layout::RowMajor),
                    &hopper,
                ) {
                    Ok(_) => Some(timing(
                        time(stream, s, || {
                            Ok(spmm_fp8(
                                &da8,
                                b8_view(),
                                DenseMut::device(&mut c, am, n, Layout::RowMajor),
                                &epilogue,
                                &hopper,
                            )?)
                        })?,
                        flops,
                    )),
                    Err(e) => {
                        println!("{block} d={density:.4} {pattern}: FP8 refused: {e}");
                        None
                    }
                };
                let b16_view = || Dense::device(&b16, ak, n, Layout::RowMajor);
                let f16 = match gpu::can_implement(
                    &da16,
                    &b16_view(),
                    &DenseMut::device(&mut c, am, n, Layout::RowMajor),
                    &hopper,
                ) {
                    Ok(_) => Some(timing(
                        time(stream, s, || {
                            Ok(spmm(
                                &da16,
                                b16_view(),
                                DenseMut::device(&mut c, am, n, Layout::RowMajor),
                                &hopper,
                            )?)
                        })?,
                        flops,
                    )),
                    Err(e) => {
                        println!("{block} d={density:.4} {pattern}: f16 refused: {e}");
                        None
                    }
                };
                let row = PrefillRow {
                    block: format!("{block}"),
                    density: a16.density(),
                    pattern,
                    flops,
                    fp8,
                    fp8_floor: fp8_ceilings.map(|c| problem(1).floor(&c)),
                    f16,
                    f16_floor: f16_ceilings.map(|c| problem(2).floor(&c)),
                };
                println!("{}", prefill_line(&row));
                report.prefill.push(row);
            }
        }
    }
    Ok(())
}

fn decode(
    args: &[String],
    stream: &Arc<CudaStream>,
    report: &mut Fp8Report,
    rng: &mut StdRng,
) -> Result<()> {
    let repeats: usize = flag(args, "--repeats")
        .map(str::parse)
        .transpose()?
        .unwrap_or(7);
    let iters: usize = flag(args, "--iters")
        .map(str::parse)
        .transpose()?
        .unwrap_or(20);
    let density: f64 = parse_density(flag(args, "--decode-density").unwrap_or("0.5"))?;
    let block = parse_block(flag(args, "--decode-block").unwrap_or("128x128"))?;
    let median_us = |op: &mut dyn FnMut(usize) -> Result<()>| -> Result<f64> {
        Ok(median(device_us(stream, repeats, iters, iters, op)?))
    };
    for shape in list(args, "--decode-shapes", "4096x4096,14336x4096") {
        let (out_f, in_f) = parse_pair(&shape, "shapes are written OUTxIN")?;
        let mask = mask("topk", out_f / block.rows, in_f / block.cols, density, rng)?;
        let a16 = BsrMatrix::from_block_mask(&mask, block, |_, _| {
            f16::from_f32(rng.random_range(-1.0..1.0))
        })?;
        let a8 = a16.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
        let values = a16.values().len();
        let copies16 = CYCLE_BYTES.div_ceil(values * 2).max(1);
        let copies8 = CYCLE_BYTES.div_ceil(values).max(1);
        let da16: Vec<DeviceBsr<f16>> = (0..copies16)
            .map(|_| DeviceBsr::upload(&a16, stream))
            .collect::<Result<_, _>>()?;
        let da8: Vec<DeviceBsr<F8E4M3>> = (0..copies8)
            .map(|_| DeviceBsr::upload_quantized(&a8, stream))
            .collect::<Result<_, _>>()?;
        let (am, ak) = (a16.m(), a16.k());
        for n in list(args, "--ns", "1,8,16") {
            let n: usize = n.parse()?;
            // x row-major (n x in) is B column-major (in x n); y likewise.
            let x = random_device::<f16>(stream, ak * n, rng)?;
            let mut y = stream.alloc_zeros::<f16>(am * n)?;
            let auto = SpmmOptions::new();
            let f16_us = median_us(&mut |i| {
                Ok(spmm(
                    &da16[i % copies16],
                    Dense::device(&x, ak, n, Layout::ColMajor),
                    DenseMut::device(&mut y, am, n, Layout::ColMajor),
                    &auto,
                )?)
            })?;
            let w8a16 = SpmmOptions::new();
            let epilogue = Epilogue::new();
            let (fp8_us, fp8_refused) = match gpu::can_implement_fp8(
                &da8[0],
                &Dense::device(&x, ak, n, Layout::ColMajor),
                &DenseMut::device(&mut y, am, n, Layout::ColMajor),
                &w8a16,
            ) {
                Ok(_) => (
                    Some(median_us(&mut |i| {
                        Ok(spmm_fp8(
                            &da8[i % copies8],
                            Dense::device(&x, ak, n, Layout::ColMajor),
                            DenseMut::device(&mut y, am, n, Layout::ColMajor),
                            &epilogue,
                            &w8a16,
                        )?)
                    })?),
                    None,
                ),
                Err(e) => (None, Some(e.to_string())),
            };
            let io = 2.0 * (ak * n + am * n) as f64;
            let nnzb = a16.nnz_blocks() as f64;
            let row = DecodeRow {
                shape: shape.clone(),
                block: format!("{block}"),
                density: a16.density(),
                n,
                fp8_bytes: values as f64 + 4.0 * nnzb + io,
                f16_bytes: 2.0 * values as f64 + io,
                fp8_us,
                fp8_refused,
                f16_us,
            };
            println!("{}", decode_line(&row, report.hbm_tbs));
            report.decode.push(row);
        }
    }
    Ok(())
}

fn prefill_line(r: &PrefillRow) -> String {
    let cell = |t: &Option<Timing>, f: &Option<Floor>| match t {
        Some(t) => format!(
            "{:>8.1} us {:>5.0} TFLOPS E {}",
            t.median_us,
            t.tflops,
            f.map_or_else(
                || "-".into(),
                |f| format!("{:.2}", f.efficiency(t.median_us))
            )
        ),
        None => "refused".into(),
    };
    let ratio = match (&r.fp8, &r.f16) {
        (Some(a), Some(b)) => format!("{:.2}x", b.median_us / a.median_us),
        _ => "-".into(),
    };
    format!(
        "{} d={:.4} {:<7} | e4m3 {} | f16 {} | e4m3/f16 speed {}",
        r.block,
        r.density,
        r.pattern,
        cell(&r.fp8, &r.fp8_floor),
        cell(&r.f16, &r.f16_floor),
        ratio
    )
}

fn decode_line(r: &DecodeRow, hbm_tbs: Option<f64>) -> String {
    let e = |bytes: f64, us: f64| {
        hbm_tbs.map_or_else(
            || "-".into(),
            |h| format!("{:.2}", bytes / (us * 1e-6) / (h * 1e12)),
        )
    };
    let fp8 = match (r.fp8_us, &r.fp8_refused) {
        (Some(us), _) => format!(
            "W8A16 {us:>7.1} us E_hbm {} | time ratio {:.2}",
            e(r.fp8_bytes, us),
            us / r.f16_us
        ),
        (None, Some(why)) => format!("W8A16 refused: {why}"),
        (None, None) => "W8A16 -".into(),
    };
    format!(
        "{} {} d={:.2} n={:<3} | f16 {:>7.1} us E_hbm {} | {fp8}",
        r.shape,
        r.block,
        r.density,
        r.n,
        r.f16_us,
        e(r.f16_bytes, r.f16_us)
    )
}

/// The README's tables of a report.
pub fn markdown(r: &Fp8Report) -> String {
    let dense: Vec<String> = r
        .dense
        .iter()
        .map(|(name, t)| format!("{name} {:.0} TFLOPS", t.tflops))
        .collect();
    let tbs = |v: Option<f64>| v.map_or_else(|| "not measured".into(), |v| format!("{v:.2} TB/s"));
    let mut out = format!(
        "{}, M = {}, N = {}, K = {}; ceilings measured in the same run: dense {}, L2 read {}, HBM read {}.\n\n",
        r.device,
        r.m,
        r.n,
        r.k,
        dense.join(", "),
        tbs(r.l2_tbs),
        tbs(r.hbm_tbs)
    );
    out += "| blocks | density | pattern | e4m3 TFLOPS | E (vs dense e4m3) | f16 TFLOPS | E (vs dense f16) | e4m3 ÷ f16 speed |\n|---|---|---|---|---|---|---|---|\n";
    for row in &r.prefill {
        let cell = |t: &Option<Timing>, f: &Option<Floor>| match t {
            Some(t) => (
                format!("{:.0}", t.tflops),
                f.map_or_else(
                    || "-".into(),
                    |f| format!("{:.2}", f.efficiency(t.median_us)),
                ),
            ),
            None => ("refused".into(), "-".into()),
        };
        let (t8, e8) = cell(&row.fp8, &row.fp8_floor);
        let (t16, e16) = cell(&row.f16, &row.f16_floor);
        let ratio = match (&row.fp8, &row.f16) {
            (Some(a), Some(b)) => format!("{:.2}×", b.median_us / a.median_us),
            _ => "-".into(),
        };
        out += &format!(
            "| {} | {:.4} | {} | {t8} | {e8} | {t16} | {e16} | {ratio} |\n",
            row.block.replace('x', "×"),
            row.density,
            row.pattern
        );
    }
    if !r.decode.is_empty() {
        out += "\n| W (out × in) | blocks | density | n | f16 µs | f16 E_hbm | W8A16 µs | W8A16 E_hbm | W8A16 ÷ f16 time |\n|---|---|---|---|---|---|---|---|---|\n";
        let e = |bytes: f64, us: f64| {
            r.hbm_tbs.map_or_else(
                || "-".into(),
                |h| format!("{:.2}", bytes / (us * 1e-6) / (h * 1e12)),
            )
        };
        for row in &r.decode {
            let (us8, e8, ratio) = match row.fp8_us {
                Some(us) => (
                    format!("{us:.1}"),
                    e(row.fp8_bytes, us),
                    format!("{:.2}", us / row.f16_us),
                ),
                None => ("refused".into(), "-".into(), "-".into()),
            };
            out += &format!(
                "| {} | {} | {:.2} | {} | {:.1} | {} | {us8} | {e8} | {ratio} |\n",
                row.shape.replace('x', " × "),
                row.block.replace('x', "×"),
                row.density,
                row.n,
                row.f16_us,
                e(row.f16_bytes, row.f16_us)
            );
        }
    }
    out
}
