//! sparsek's benchmark report: one table of every backend beside dense cuBLAS, with each
//! row's roofline floor and efficiency E, written as JSON, as a PNG plot and as a markdown
//! table, and a regression gate against a recorded baseline.
//!
//! ```text
//! bench_report run   [--m 8192 --n 8192 --k 8192] [--blocks 128x128,64x64,32x32]
//!                    [--densities 1/16,1/8,1/4] [--patterns topk,skewed,random,causal]
//!                    [--dtypes f16,bf16] [--layouts row/row,col/col] [--backends cutlass,wmma]
//!                    [--repeats 7] [--iters 20] [--json report.json] [--png report.png]
//!                    [--markdown report.md]
//!                    [--baseline bench/baseline/h100.json] [--tolerance 0.05] [--slowdown N]
//! bench_report decode [--shapes 4096x4096,14336x4096,4096x14336] [--ns 1,8,16,32,64,128,256]
//!                    [--densities 0.25,0.5] [--blocks 128x128,64x64,32x32] [--json decode.json]
//! bench_report products [--m 8192 --n 8192 --k 8192] [--blocks 128x128,64x64]
//!                    [--densities 1/8,1/4] [--dtypes f16,bf16] [--repeats 7] [--iters 20]
//!                    [--json products.json]
//! bench_report attention FILE.jsonl... [--json OUT]
//! bench_report check REPORT.json BASELINE.json [--tolerance 0.05]
//! bench_report plot  REPORT.json OUT.png
//! bench_report markdown REPORT.json OUT.md
//! ```
//!
//! `run`, `decode` and `products` need the `cuda` feature and a GPU; `attention`, `check`,
//! `plot` and `markdown` run anywhere (`attention` tabulates the JSON lines that
//! `run.sh attention` collects on the GPU machine: sparsek's `attention_check --time` beside
//! `bench/peers/attention_torch.py`, same run).
//! `run` first measures its ceilings: the L2 and HBM read bandwidth (kernels/bandwidth.cu)
//! and, per dtype, dense cuBLAS at the full M, N, K. Each row's floor is the largest of its
//! FLOPs at dense cuBLAS's rate, B's L2 traffic at the L2 rate and its A + B + C bytes at
//! the HBM rate (`sparsek_bench::roofline`); E = floor ÷ measured median time. Timing is
//! device-side (CUDA events around `iters` back-to-back launches), repeated `repeats`
//! times; the table shows medians. The gate fails a (config, backend) only when even the
//! fastest repeat is slower than the baseline's median by more than the tolerance, so one
//! noisy repeat does not fail it. `--slowdown N` enqueues every timed operation N times:
//! a deliberately slowed run, to show that the gate fails.
//!
//! `products` times, per top-k matrix A (`m x k`) and `Backend::Auto`, four products of the
//! same nonzero work: `A*B` with row-major B and C (the reference), `A^T*B` on the same
//! `DeviceBsr` (B `m x n`, C `k x n`, row-major), `A*B` with column-major B and C (the
//! linear-layer layout; the reference) and `D*A` through `dense_spmm` with row-major
//! D (`n x m`) and C (`n x k`), which runs as `C^T = A^T*D^T` on column-major views. Each
//! runs once first and is timed only if that returns Ok (else the row says why). The table
//! gives per row the backend Auto took (`gpu::can_implement`), median µs, TFLOPS on nonzero
//! work, E = the roofline floor of `run` (FLOPs at dense cuBLAS's rate, B's L2 traffic at
//! the L2 rate, A + B + C at the HBM rate, all measured in the same run) ÷ time, and the
//! ratio `A^T*B ÷ A*B` and `D*A ÷ A*B (col/col)` against the 1.10 target.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use sparsek_bench::plot_font;
use sparsek_bench::roofline::{Ceilings, Floor};

const PEAK_TFLOPS: f64 = 989.0;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Timing {
    /// Median microseconds per operation over the repeats.
    median_us: f64,
    /// Fastest repeat.
    min_us: f64,
    /// Every repeat, microseconds per operation.
    runs_us: Vec<f64>,
    /// TFLOPS on nonzero work at the median.
    tflops: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    /// Unique key, e.g. `128x128 d=0.125 topk f16 row/row`.
    config: String,
    block: String,
    density: f64,
    pattern: String,
    dtype: String,
    layout: String,
    flops: f64,
    /// cuBLAS on the gathered dense problem (same M, N; K = mean nnz per block-row × bk).
    cublas_gathered: Option<Timing>,
    /// By backend name (`cutlass`, `wmma`).
    backends: BTreeMap<String, Timing>,
    /// The roofline floor against this run's ceilings (absent in reports without them).
    #[serde(default)]
    floor: Option<Floor>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Report {
    device: String,
    m: usize,
    n: usize,
    k: usize,
    repeats: usize,
    iters: usize,
    slowdown: usize,
    /// Dense cuBLAS at the full K, per dtype: the compute ceiling of the floors.
    cublas_full: BTreeMap<String, Timing>,
    /// L2 read bandwidth of this run, TB/s (absent in reports before the ceilings).
    #[serde(default)]
    l2_tbs: Option<f64>,
    /// HBM read bandwidth of this run, TB/s (absent in reports before the ceilings).
    #[serde(default)]
    hbm_tbs: Option<f64>,
    rows: Vec<Row>,
}

impl Report {
    /// The ceilings of this run for rows of `dtype`, where all three were measured.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn ceilings(&self, dtype: &str) -> Option<Ceilings> {
        Some(Ceilings {
            dense_tflops: self.cublas_full.get(dtype)?.tflops,
            l2_tbs: self.l2_tbs?,
            hbm_tbs: self.hbm_tbs?,
        })
    }

    /// Backend names over all rows, in order.
    fn backend_names(&self) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> =
            self.rows.iter().flat_map(|r| r.backends.keys()).collect();
        names.into_iter().cloned().collect()
    }

    /// The ceilings of this run on one line, `sep` between them.
    fn ceilings_line(&self, sep: &str) -> String {
        let dense: Vec<String> = self
            .cublas_full
            .iter()
            .map(|(dtype, t)| format!("{dtype} {:.0} TFLOPS", t.tflops))
            .collect();
        let tbs =
            |v: Option<f64>| v.map_or_else(|| "not measured".into(), |v| format!("{v:.2} TB/s"));
        format!(
            "dense cuBLAS {}{sep}L2 read {}{sep}HBM read {}",
            if dense.is_empty() {
                "not measured".into()
            } else {
                dense.join(", ")
            },
            tbs(self.l2_tbs),
            tbs(self.hbm_tbs)
        )
    }
}

/// `bench_report attention FILE.jsonl... [--json OUT]`: the attention table (markdown) of
/// sparsek's and the peers' JSON lines (`run.sh attention`); `--json` writes the rows.
fn attention(args: &[String]) -> Result<()> {
    let mut rows = Vec::new();
    let mut files = args.iter();
    let mut json_out = None;
    while let Some(a) = files.next() {
        if a == "--json" {
            json_out = files.next();
            continue;
        }
        rows.extend(sparsek_bench::attention::parse(&std::fs::read_to_string(
            a,
        )?));
    }
    if rows.is_empty() {
        bail!("usage: bench_report attention FILE.jsonl... [--json OUT] (no rows read)");
    }
    print!("{}", sparsek_bench::attention::table(&rows));
    if let Some(out) = json_out {
        std::fs::write(out, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("decode") => decode(&args[1..]),
        Some("products") => products(&args[1..]),
        Some("attention") => attention(&args[1..]),
        Some("check") => {
            let (report, baseline) = match (args.get(1), args.get(2)) {
                (Some(r), Some(b)) => (r, b),
                _ => bail!("usage: bench_report check REPORT.json BASELINE.json [--tolerance 0.05]"),
            };
            let tol = flag(&args[3..], "--tolerance").map(|t| t.parse()).transpose()?.unwrap_or(0.05);
            let report = load(report)?;
            print_table(&report);
            let ok = check(&report, &load(baseline)?, tol);
            std::process::exit(if ok { 0 } else { 1 });
        }
        Some("plot") => match (args.get(1), args.get(2)) {
            (Some(r), Some(out)) => plot(&load(r)?, Path::new(out)),
            _ => bail!("usage: bench_report plot REPORT.json OUT.png"),
        },
        Some("markdown") => match (args.get(1), args.get(2)) {
            (Some(r), Some(out)) => write_markdown(&load(r)?, out),
            _ => bail!("usage: bench_report markdown REPORT.json OUT.md"),
        },
        _ => bail!("usage: bench_report run|decode|products|attention|check|plot|markdown ... (see the doc comment of src/bin/bench_report.rs)"),
    }
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn list(args: &[String], name: &str, default: &str) -> Vec<String> {
    flag(args, name)
        .unwrap_or(default)
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn load(path: &str) -> Result<Report> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {path}"))
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn timing(runs_us: Vec<f64>, flops: f64) -> Timing {
    let mut sorted = runs_us.clone();
    sorted.sort_by(f64::total_cmp);
    let median_us = sorted[sorted.len() / 2];
    Timing {
        median_us,
        min_us: sorted[0],
        runs_us,
        tflops: flops / (median_us * 1e-6) / 1e12,
    }
}

/// The table: per row the floor and the bound that sets it, then per backend the median
/// µs, TFLOPS and E; dense cuBLAS on the gathered K beside.
fn print_table(r: &Report) {
    println!(
        "\nsparsek report: {} | M={} N={} K={} | {} repeats x {} launches{}",
        r.device,
        r.m,
        r.n,
        r.k,
        r.repeats,
        r.iters,
        if r.slowdown > 1 {
            format!(" | SLOWED x{}", r.slowdown)
        } else {
            String::new()
        }
    );
    println!("ceilings (this run): {}", r.ceilings_line(" | "));
    let names = r.backend_names();
    let mut header = format!("{:<36} {:>9} {:<7}", "config", "floor us", "set by");
    for name in &names {
        header += &format!(" | {:>12} {:>6} {:>5}", format!("{name} us"), "TFLOPS", "E");
    }
    header += &format!(" | {:>8} {:>8} {:>8}", "cublas_g", "best/cbG", "best/cbF");
    println!("{header}");
    for row in &r.rows {
        let mut line = match &row.floor {
            Some(f) => format!("{:<36} {:>9.1} {:<7}", row.config, f.us, f.bound),
            None => format!("{:<36} {:>9} {:<7}", row.config, "-", "-"),
        };
        for name in &names {
            line += &match row.backends.get(name) {
                Some(t) => format!(
                    " | {:>12.1} {:>6.0} {:>5}",
                    t.median_us,
                    t.tflops,
                    row.floor.map_or_else(
                        || "-".into(),
                        |f| format!("{:.2}", f.efficiency(t.median_us))
                    )
                ),
                None => format!(" | {:>12} {:>6} {:>5}", "-", "-", "-"),
            };
        }
        let best = row
            .backends
            .values()
            .map(|t| t.tflops)
            .fold(f64::NAN, f64::max);
        let full = r.cublas_full.get(&row.dtype).map_or(f64::NAN, |t| t.tflops);
        line += &match &row.cublas_gathered {
            Some(cg) => format!(" | {:>8.0} {:>8.2}", cg.tflops, best / cg.tflops),
            None => format!(" | {:>8} {:>8}", "-", "-"),
        };
        line += &format!(" {:>8.2}", best / full);
        println!("{line}");
    }
    println!(
        "(medians; floor = the largest of FLOPs on nonzero blocks / dense cuBLAS, B's L2 \
         traffic / L2 read, A + B + C bytes / HBM read; E = floor / measured; cbG / cbF: \
         best TFLOPS / dense cuBLAS on the gathered / full K)"
    );
}

/// `128x128` as the README writes it: `128×128`.
fn block_label(block: &str) -> String {
    block.replace('x', "×")
}

/// A density as the README writes it: `1/16` where it is one over a whole number, else
/// two decimals.
fn density_label(d: f64) -> String {
    let inv = 1.0 / d;
    if d > 0.0 && d < 1.0 && (inv - inv.round()).abs() < 1e-6 {
        format!("1/{}", inv.round())
    } else {
        format!("{d:.2}")
    }
}

/// The markdown table the README embeds: one line naming the device and the ceilings,
/// then a row per (config, backend): blocks, density, backend, TFLOPS, floor set by, E.
/// Pattern, dtype and layout get a column each only where the report has more than one.
fn markdown(r: &Report) -> String {
    let mut out = format!(
        "{}, M = {}, N = {}, K = {}; ceilings measured in the same run: {}.\n\n",
        r.device,
        r.m,
        r.n,
        r.k,
        r.ceilings_line(", ")
    );
    // The optional columns, each where the report has more than one value of it.
    type Field = fn(&Row) -> &str;
    let optional: [(&str, Field); 3] = [
        ("pattern", |row| &row.pattern),
        ("dtype", |row| &row.dtype),
        ("B/C layout", |row| &row.layout),
    ];
    let extra: Vec<(&str, Field)> = optional
        .into_iter()
        .filter(|(_, f)| {
            let values: std::collections::BTreeSet<&str> = r.rows.iter().map(f).collect();
            values.len() > 1
        })
        .collect();
    let mut head = String::from("| blocks | density |");
    for (name, _) in &extra {
        head += &format!(" {name} |");
    }
    head += " backend | TFLOPS | floor set by | E |\n";
    out += &head;
    out += &"|---".repeat(6 + extra.len());
    out += "|\n";
    let names = r.backend_names();
    for row in &r.rows {
        for name in &names {
            let mut line = format!(
                "| {} | {} |",
                block_label(&row.block),
                density_label(row.density)
            );
            for (_, f) in &extra {
                line += &format!(" {} |", f(row));
            }
            let bound = row
                .floor
                .map_or_else(|| "–".into(), |f| f.bound.to_string());
            line += &match row.backends.get(name) {
                Some(t) => format!(
                    " {} | {:.0} | {bound} | {} |",
                    name.to_uppercase(),
                    t.tflops,
                    row.floor.map_or_else(
                        || "–".into(),
                        |f| format!("{:.2}", f.efficiency(t.median_us))
                    )
                ),
                None => format!(" {} | refused | {bound} | – |", name.to_uppercase()),
            };
            out += &line;
            out += "\n";
        }
    }
    out
}

fn write_markdown(r: &Report, path: &str) -> Result<()> {
    std::fs::write(path, markdown(r)).with_context(|| format!("writing {path}"))?;
    println!("wrote {path}");
    Ok(())
}

/// The regression gate. Returns whether every (config, backend) of the baseline holds.
fn check(new: &Report, base: &Report, tol: f64) -> bool {
    let mut ok = true;
    let mut compared = 0;
    println!(
        "regression check: tolerance {:.1}% (fail only when the fastest repeat is still slower)",
        tol * 100.0
    );
    for b in &base.rows {
        let Some(n) = new.rows.iter().find(|r| r.config == b.config) else {
            println!("  missing  {}: not in the new report", b.config);
            ok = false;
            continue;
        };
        for (backend, bt) in &b.backends {
            let Some(nt) = n.backends.get(backend) else {
                println!("  missing  {} {backend}", b.config);
                ok = false;
                continue;
            };
            compared += 1;
            let limit = bt.median_us * (1.0 + tol);
            let change = nt.median_us / bt.median_us - 1.0;
            let verdict = if nt.min_us > limit {
                ok = false;
                "SLOWER"
            } else {
                "ok"
            };
            println!(
                "  {verdict:<8} {:<36} {backend:<8} {:>8.1} us -> {:>8.1} us ({:+.1}%)",
                b.config,
                bt.median_us,
                nt.median_us,
                change * 100.0
            );
        }
    }
    println!(
        "regression check: {} ({compared} compared)",
        if ok { "PASSED" } else { "FAILED" }
    );
    ok
}

/// TFLOPS against density, one line per (block, backend), for the `topk` rows.
fn plot(r: &Report, out: &Path) -> Result<()> {
    use plotters::prelude::*;
    plot_font::register().map_err(anyhow::Error::msg)?;
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for row in r.rows.iter().filter(|row| row.pattern == "topk") {
        let tag = format!("{} {}", row.dtype, row.layout);
        for (backend, t) in &row.backends {
            series
                .entry(format!("{backend} {} {tag}", row.block))
                .or_default()
                .push((row.density, t.tflops));
        }
        if let Some(t) = &row.cublas_gathered {
            series
                .entry(format!("cuBLAS gathered {} {tag}", row.block))
                .or_default()
                .push((row.density, t.tflops));
        }
    }
    if series.is_empty() {
        bail!("no top-k rows to plot");
    }
    let xmax = series.values().flatten().map(|p| p.0).fold(0.0, f64::max) * 1.1;
    let root = BitMapBackend::new(out, (1100, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "sparsek on {} (M=N=K={}): TFLOPS on nonzero work",
                r.device, r.k
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xmax, 0.0..PEAK_TFLOPS)?;
    chart
        .configure_mesh()
        .x_desc("block density")
        .y_desc("TFLOPS")
        .draw()?;
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        let style =
            ShapeStyle::from(&color).stroke_width(if name.starts_with("cuBLAS") { 1 } else { 3 });
        chart
            .draw_series(LineSeries::new(pts.clone(), style))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    println!("wrote {}", out.display());
    Ok(())
}

/// `bench_report decode [--shapes 4096x4096,14336x4096,4096x14336] [--ns 1,8,16,32,64,128,256]
/// [--densities 0.25,0.5] [--blocks 128x128,64x64,32x32] [--repeats 5] [--iters 20]
/// [--json decode.json]`: the decode-sized sweep (sparsek_bench::decode).
#[cfg(feature = "cuda")]
fn decode(args: &[String]) -> Result<()> {
    sparsek_bench::decode::print_header();
    let report = sparsek_bench::decode::run(args, |name| flag(args, name).map(str::to_string))?;
    if let Some(path) = flag(args, "--json") {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {path}");
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn decode(_: &[String]) -> Result<()> {
    bail!("`bench_report decode` needs the GPU backends: build with --features cuda")
}

#[cfg(not(feature = "cuda"))]
fn run(_: &[String]) -> Result<()> {
    bail!("`bench_report run` needs the GPU backends: build with --features cuda")
}

#[cfg(feature = "cuda")]
fn run(args: &[String]) -> Result<()> {
    sweep::run(args)
}

#[cfg(feature = "cuda")]
mod sweep {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;

    use anyhow::{bail, Context, Result};
    use cudarc::cublas::{CudaBlas, Gemm};
    use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream};
    use indicatif::{ProgressBar, ProgressStyle};
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use sparsek::{
        bf16, f16, gpu, spmm, Backend, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut,
        DeviceBsr, Element, Layout, SpmmOptions,
    };

    use sparsek_bench::roofline::Problem;

    use super::{
        check, flag, list, load, plot, print_table, timing, write_markdown, Report, Row, Timing,
    };

    pub(super) struct Settings {
        pub(super) m: usize,
        pub(super) n: usize,
        pub(super) k: usize,
        pub(super) repeats: usize,
        pub(super) iters: usize,
        pub(super) slowdown: usize,
    }

    impl Settings {
        /// `--m --n --k` (8192 each), `--repeats` (7), `--iters` (20), `--slowdown` (1).
        pub(super) fn from_args(args: &[String]) -> Result<Self> {
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
    pub(super) fn open() -> Result<(String, Arc<CudaStream>, CudaBlas)> {
        let ctx = gpu::open_device().map_err(anyhow::Error::msg)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone())?;
        Ok((ctx.name()?, stream, blas))
    }

    /// A progress bar of `total` steps, the current configuration as its message.
    pub(super) fn progress(total: usize) -> Result<ProgressBar> {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(ProgressStyle::with_template(
            "{bar:40} {pos}/{len} {msg} [{elapsed}]",
        )?);
        Ok(bar)
    }

    /// Dense cuBLAS at the full M, N, K of `s` (the compute ceiling), into `c`; `b` is
    /// the `k x n` operand.
    pub(super) fn cublas_full<T: Element>(
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
            Ok(sparsek_bench::baseline::dense_gemm(
                blas,
                (m, n, k),
                &a_full,
                b,
                c,
            )?)
        })?;
        Ok(timing(runs, 2.0 * (m * n * k) as f64))
    }

    /// Device microseconds per operation: `iters` launches (each `slowdown` times)
    /// between two events, `repeats` times, after a warm-up.
    pub(super) fn time(
        stream: &Arc<CudaStream>,
        s: &Settings,
        mut op: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        for _ in 0..3 {
            op()?;
        }
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut out = Vec::with_capacity(s.repeats);
        for _ in 0..s.repeats {
            let start = stream.record_event(flags)?;
            for _ in 0..s.iters * s.slowdown {
                op()?;
            }
            let end = stream.record_event(flags)?;
            end.synchronize()?;
            out.push(start.elapsed_ms(&end)? as f64 * 1e3 / s.iters as f64);
        }
        Ok(out)
    }

    pub(super) fn random_device<T: Element>(
        stream: &Arc<CudaStream>,
        len: usize,
        rng: &mut StdRng,
    ) -> Result<CudaSlice<T>> {
        let host: Vec<T> = (0..len)
            .map(|_| T::from_f32(rng.random_range(-1.0..1.0)))
            .collect();
        Ok(stream.clone_htod(&host)?)
    }

    pub(super) fn parse_block(s: &str) -> Result<BlockShape> {
        let (r, c) = s.split_once('x').context("block shapes are written RxC")?;
        Ok(BlockShape::new(r.parse()?, c.parse()?))
    }

    pub(super) fn parse_density(s: &str) -> Result<f64> {
        Ok(match s.split_once('/') {
            Some((a, b)) => a.parse::<f64>()? / b.parse::<f64>()?,
            None => s.parse()?,
        })
    }

    fn layout(s: &str) -> Result<Layout> {
        match s {
            "row" => Ok(Layout::RowMajor),
            "col" => Ok(Layout::ColMajor),
            _ => bail!("layout `{s}`: row or col"),
        }
    }

    /// The block pattern of one row of the table.
    pub(super) fn mask(
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
            // Causal with a band giving about this density (sliding-window attention).
            "causal" => BlockMask::causal(
                rows.min(cols),
                Some((cols as f64 * density).ceil().max(1.0) as usize),
            )?,
            _ => bail!("pattern `{pattern}`: topk, random, skewed or causal"),
        })
    }

    /// The L2 and HBM read bandwidth of this run in TB/s (kernels/bandwidth.cu), or None
    /// (said on stdout) when they cannot be measured: then no floors or E.
    pub fn memory_ceilings(stream: &Arc<CudaStream>) -> (Option<f64>, Option<f64>) {
        match (
            sparsek_bench::ceilings::l2_read(stream),
            sparsek_bench::ceilings::hbm_read(stream),
        ) {
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

    pub fn run(args: &[String]) -> Result<()> {
        let s = Settings::from_args(args)?;
        let blocks = list(args, "--blocks", "128x128,64x64,32x32");
        let densities = list(args, "--densities", "1/16,1/8,1/4");
        let patterns = list(args, "--patterns", "topk");
        let dtypes = list(args, "--dtypes", "f16");
        let layouts = list(args, "--layouts", "row/row");
        let backends = list(args, "--backends", "cutlass,wmma");

        let (device, stream, blas) = open()?;
        // The memory ceilings, first (the cuBLAS one is measured per dtype in the sweep).
        let (l2_tbs, hbm_tbs) = memory_ceilings(&stream);
        let mut report = Report {
            device,
            m: s.m,
            n: s.n,
            k: s.k,
            repeats: s.repeats,
            iters: s.iters,
            slowdown: s.slowdown,
            cublas_full: BTreeMap::new(),
            l2_tbs,
            hbm_tbs,
            rows: Vec::new(),
        };
        let total = blocks.len() * densities.len() * patterns.len() * dtypes.len() * layouts.len();
        let bar = progress(total)?;
        let mut rng = StdRng::seed_from_u64(42);
        for dtype in &dtypes {
            match dtype.as_str() {
                "f16" => sweep_dtype::<f16>(
                    &s,
                    &stream,
                    &blas,
                    &mut report,
                    &bar,
                    &mut rng,
                    (&blocks, &densities, &patterns, &layouts, &backends),
                )?,
                "bf16" => sweep_dtype::<bf16>(
                    &s,
                    &stream,
                    &blas,
                    &mut report,
                    &bar,
                    &mut rng,
                    (&blocks, &densities, &patterns, &layouts, &backends),
                )?,
                other => bail!("dtype `{other}`: f16 or bf16"),
            }
        }
        bar.finish_and_clear();
        print_table(&report);
        if let Some(path) = flag(args, "--json") {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
            println!("wrote {path}");
        }
        if let Some(path) = flag(args, "--png") {
            if let Err(e) = plot(&report, Path::new(path)) {
                println!("no plot: {e}");
            }
        }
        if let Some(path) = flag(args, "--markdown") {
            write_markdown(&report, path)?;
        }
        if let Some(base) = flag(args, "--baseline") {
            let tol = flag(args, "--tolerance")
                .map(str::parse)
                .transpose()?
                .unwrap_or(0.05);
            if !check(&report, &load(base)?, tol) {
                std::process::exit(1);
            }
        }
        Ok(())
    }

    type Lists<'a> = (
        &'a [String],
        &'a [String],
        &'a [String],
        &'a [String],
        &'a [String],
    );

    fn sweep_dtype<T: Element>(
        s: &Settings,
        stream: &Arc<CudaStream>,
        blas: &CudaBlas,
        report: &mut Report,
        bar: &ProgressBar,
        rng: &mut StdRng,
        (blocks, densities, patterns, layouts, backends): Lists<'_>,
    ) -> Result<()>
    where
        CudaBlas: Gemm<T>,
    {
        let dtype = format!("{}", T::DTYPE);
        let (m, n, k) = (s.m, s.n, s.k);
        let b = random_device::<T>(stream, k * n, rng)?;
        let mut c = stream.alloc_zeros::<T>(m * n)?;
        let full = cublas_full(s, stream, blas, rng, &b, &mut c)?;
        report.cublas_full.insert(dtype.clone(), full);
        let ceilings = report.ceilings(&dtype);
        let base_opts = SpmmOptions::new();
        for block in blocks {
            let block = parse_block(block)?;
            for density in densities {
                let density = parse_density(density)?;
                for pattern in patterns {
                    let mask = mask(pattern, m / block.rows, k / block.cols, density, rng)?;
                    let a = BsrMatrix::from_block_mask(&mask, block, |_, _| {
                        T::from_f32(rng.random_range(-1.0..1.0))
                    })?;
                    let da = DeviceBsr::upload(&a, stream)?;
                    // A block side that does not divide M or K (e.g. bk = 112 at K = 8192)
                    // runs on the largest multiple below it.
                    let (m, k) = (a.m(), a.k());
                    let flops = a.flops(n);
                    let elem = std::mem::size_of::<T>();
                    let floor = ceilings.map(|c| {
                        Problem {
                            m,
                            n,
                            k,
                            bm: block.rows,
                            bk: block.cols,
                            nnzb: a.nnz_blocks(),
                            in_bytes: elem,
                            out_bytes: elem,
                            reads_c: base_opts.get_beta() != 0.0,
                        }
                        .floor(&c)
                    });
                    // cuBLAS on the gathered dense problem, once per matrix.
                    let kg = (a.nnz_blocks() * block.cols)
                        .div_ceil(a.num_block_rows())
                        .next_multiple_of(8);
                    let cublas_gathered = {
                        let ag = random_device::<T>(stream, m * kg, rng)?;
                        let bg = random_device::<T>(stream, kg * n, rng)?;
                        let runs = time(stream, s, || {
                            Ok(sparsek_bench::baseline::dense_gemm(
                                blas,
                                (m, n, kg),
                                &ag,
                                &bg,
                                &mut c,
                            )?)
                        })?;
                        Some(timing(runs, flops))
                    };
                    for lay in layouts {
                        let (bl, cl) = lay
                            .split_once('/')
                            .context("layouts are written B/C, e.g. row/col")?;
                        let (bl, cl) = (layout(bl)?, layout(cl)?);
                        let config =
                            format!("{block} d={:.4} {pattern} {dtype} {lay}", a.density());
                        bar.set_message(config.clone());
                        let mut row = Row {
                            config,
                            block: format!("{block}"),
                            density: a.density(),
                            pattern: pattern.clone(),
                            dtype: dtype.clone(),
                            layout: lay.clone(),
                            flops,
                            cublas_gathered: cublas_gathered.clone(),
                            backends: BTreeMap::new(),
                            floor,
                        };
                        for name in backends {
                            let backend = match name.as_str() {
                                "cutlass" => Backend::Cutlass,
                                "wmma" => Backend::Wmma,
                                other => bail!("backend `{other}`: cutlass or wmma"),
                            };
                            let opts = base_opts.backend(backend);
                            let view_b = || Dense::device(&b, k, n, bl);
                            if gpu::can_implement(
                                &da,
                                &view_b(),
                                &DenseMut::device(&mut c, m, n, cl),
                                &opts,
                            )
                            .is_err()
                            {
                                continue;
                            }
                            let runs = time(stream, s, || {
                                Ok(spmm(
                                    &da,
                                    view_b(),
                                    DenseMut::device(&mut c, m, n, cl),
                                    &opts,
                                )?)
                            })?;
                            row.backends.insert(name.clone(), timing(runs, flops));
                        }
                        report.rows.push(row);
                        bar.inc(1);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(not(feature = "cuda"))]
fn products(_: &[String]) -> Result<()> {
    bail!("`bench_report products` needs the GPU backends: build with --features cuda")
}

#[cfg(feature = "cuda")]
fn products(args: &[String]) -> Result<()> {
    products::run(args)
}

/// `bench_report products`: every product on the same matrix, each beside the one it must
/// keep up with (`Aᵀ·B` beside `A·B`, `D·A` beside `A·B` in the linear-layer layout).
#[cfg(feature = "cuda")]
mod products {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use anyhow::{bail, Result};
    use cudarc::cublas::{CudaBlas, Gemm};
    use cudarc::driver::{CudaSlice, CudaStream};
    use indicatif::ProgressBar;
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use serde::Serialize;
    use sparsek::{
        bf16, dense_spmm, f16, gpu, spmm, Backend, BsrMatrix, Dense, DenseMut, DeviceBsr, Element,
        Layout, SpmmOptions,
    };
    use sparsek_bench::decode::backend_name;

    use super::sweep::{
        cublas_full, mask, memory_ceilings, open, parse_block, parse_density, progress,
        random_device, time, Settings,
    };
    use super::{flag, list, timing, Timing};
    use sparsek_bench::roofline::{Ceilings, Problem};

    /// The L2 and HBM read bandwidth of the run, TB/s, where measured.
    type MemoryCeilings = (Option<f64>, Option<f64>);

    /// How much slower than its reference a product may be (the issue's target).
    const TARGET: f64 = 1.10;

    /// One product of `m x k` A with `n` dense columns, `Backend::Auto`.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Product {
        /// `C (m x n) = A·B (k x n)`, B and C in this layout.
        Ab(Layout),
        /// `C (k x n) = Aᵀ·B (m x n)` on the same A, B and C row-major.
        AtB,
        /// `C (n x k) = D (n x m)·A` through `dense_spmm`, D and C row-major.
        Da,
    }

    /// Each reference first, then the product compared with it.
    const PRODUCTS: [Product; 4] = [
        Product::Ab(Layout::RowMajor),
        Product::AtB,
        Product::Ab(Layout::ColMajor),
        Product::Da,
    ];

    impl Product {
        fn name(self) -> &'static str {
            match self {
                Product::Ab(_) => "A*B",
                Product::AtB => "A^T*B",
                Product::Da => "D*A",
            }
        }

        /// Layouts of the dense operands, `B/C` (`D/C` for `D*A`).
        fn layout(self) -> &'static str {
            match self {
                Product::Ab(Layout::ColMajor) => "col/col",
                _ => "row/row",
            }
        }

        /// The product this one must keep up with.
        fn reference(self) -> Option<Product> {
            match self {
                Product::Ab(_) => None,
                Product::AtB => Some(Product::Ab(Layout::RowMajor)),
                Product::Da => Some(Product::Ab(Layout::ColMajor)),
            }
        }

        /// B, C and `transpose_a` as `spmm` runs the product: for `D*A`, `dense_spmm`'s
        /// `Cᵀ = Aᵀ·Dᵀ` on the transposed (column-major) views of D and C.
        fn views<'a, T: Element>(
            self,
            (m, n, k): (usize, usize, usize),
            b: &'a CudaSlice<T>,
            c: &'a mut CudaSlice<T>,
        ) -> (Dense<'a, T>, DenseMut<'a, T>, bool) {
            let row = Layout::RowMajor;
            match self {
                Product::Ab(l) => (
                    Dense::device(b, k, n, l),
                    DenseMut::device(c, m, n, l),
                    false,
                ),
                Product::AtB => (
                    Dense::device(b, m, n, row),
                    DenseMut::device(c, k, n, row),
                    true,
                ),
                Product::Da => (
                    Dense::device(b, n, m, row).t(),
                    DenseMut::device(c, n, k, row).t(),
                    true,
                ),
            }
        }

        /// The backend `Auto` takes for it, or why none can.
        fn select<T: Element>(
            self,
            a: &DeviceBsr<T>,
            dims: (usize, usize, usize),
            b: &CudaSlice<T>,
            c: &mut CudaSlice<T>,
            opts: &SpmmOptions,
        ) -> Result<Backend, sparsek::Error> {
            let (b, c, transpose) = self.views(dims, b, c);
            gpu::can_implement(a, &b, &c, &opts.transpose_a(transpose))
        }

        /// Enqueues the product through its entry point (`spmm`, `dense_spmm`).
        fn call<T: Element>(
            self,
            a: &DeviceBsr<T>,
            dims: (usize, usize, usize),
            b: &CudaSlice<T>,
            c: &mut CudaSlice<T>,
            opts: &SpmmOptions,
        ) -> Result<(), sparsek::Error> {
            let (b, c, transpose) = self.views(dims, b, c);
            match self {
                Product::Da => dense_spmm(b.t(), a, c.t(), opts),
                _ => spmm(a, b, c, &opts.transpose_a(transpose)),
            }
        }
    }

    #[derive(Debug, Clone, Serialize)]
    struct ProductRow {
        /// Unique key, e.g. `128x128 d=0.1250 topk f16 A^T*B row/row`.
        config: String,
        block: String,
        density: f64,
        pattern: String,
        dtype: String,
        /// `A*B`, `A^T*B` or `D*A`.
        product: String,
        /// `B/C` layouts (`D/C` for `D*A`).
        layout: String,
        /// Nonzero FLOPs, the same for the four products of one matrix.
        flops: f64,
        /// What `Auto` took (`can_implement`).
        backend: Option<String>,
        /// Why the product did not run, where it did not.
        refused: Option<String>,
        timing: Option<Timing>,
        /// (FLOPs at dense cuBLAS's rate) / median time.
        e: Option<f64>,
        /// The config of the reference row, and this row's median time over its.
        reference: Option<String>,
        ratio: Option<f64>,
    }

    #[derive(Debug, Clone, Serialize)]
    struct ProductsReport {
        device: String,
        m: usize,
        n: usize,
        k: usize,
        repeats: usize,
        iters: usize,
        /// Dense cuBLAS at the full M, N, K, per dtype: E's compute ceiling.
        cublas_full: BTreeMap<String, Timing>,
        rows: Vec<ProductRow>,
    }

    pub fn run(args: &[String]) -> Result<()> {
        let s = Settings::from_args(args)?;
        let blocks = list(args, "--blocks", "128x128,64x64");
        let densities = list(args, "--densities", "1/8,1/4");
        let dtypes = list(args, "--dtypes", "f16,bf16");
        let (device, stream, blas) = open()?;
        let memory = memory_ceilings(&stream);
        let mut report = ProductsReport {
            device,
            m: s.m,
            n: s.n,
            k: s.k,
            repeats: s.repeats,
            iters: s.iters,
            cublas_full: BTreeMap::new(),
            rows: Vec::new(),
        };
        let bar = progress(blocks.len() * densities.len() * dtypes.len() * PRODUCTS.len())?;
        let mut rng = StdRng::seed_from_u64(42);
        for dtype in &dtypes {
            let sweep = match dtype.as_str() {
                "f16" => sweep_dtype::<f16>,
                "bf16" => sweep_dtype::<bf16>,
                other => bail!("dtype `{other}`: f16 or bf16"),
            };
            sweep(
                &s,
                &stream,
                &blas,
                &mut report,
                &bar,
                &mut rng,
                (&blocks, &densities, memory),
            )?;
        }
        bar.finish_and_clear();
        print_table(&report);
        if let Some(path) = flag(args, "--json") {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
            println!("wrote {path}");
        }
        Ok(())
    }

    fn sweep_dtype<T: Element>(
        s: &Settings,
        stream: &Arc<CudaStream>,
        blas: &CudaBlas,
        report: &mut ProductsReport,
        bar: &ProgressBar,
        rng: &mut StdRng,
        (blocks, densities, (l2_tbs, hbm_tbs)): (&[String], &[String], MemoryCeilings),
    ) -> Result<()>
    where
        CudaBlas: Gemm<T>,
    {
        let dtype = format!("{}", T::DTYPE);
        let pattern = "topk";
        let n = s.n;
        // One B and one C for every product: B is k x n, m x n or D n x m; C m x n or k x n.
        let side = s.m.max(s.k);
        let b = random_device::<T>(stream, side * n, rng)?;
        let mut c = stream.alloc_zeros::<T>(side * n)?;
        let full = cublas_full(s, stream, blas, rng, &b, &mut c)?;
        let dense_tflops = full.tflops;
        report.cublas_full.insert(dtype.clone(), full);
        let opts = SpmmOptions::new();
        for block in blocks {
            let block = parse_block(block)?;
            for density in densities {
                let density = parse_density(density)?;
                let mask = mask(pattern, s.m / block.rows, s.k / block.cols, density, rng)?;
                let a = BsrMatrix::from_block_mask(&mask, block, |_, _| {
                    T::from_f32(rng.random_range(-1.0..1.0))
                })?;
                let da = DeviceBsr::upload(&a, stream)?;
                // A block side that does not divide M or K runs on the largest multiple below.
                let dims = (a.m(), n, a.k());
                let flops = da.flops(n);
                let first = report.rows.len();
                for product in PRODUCTS {
                    let config = format!(
                        "{block} d={:.4} {pattern} {dtype} {} {}",
                        a.density(),
                        product.name(),
                        product.layout()
                    );
                    bar.set_message(config.clone());
                    // Run once first: only a product that runs is timed.
                    let selected = product.select(&da, dims, &b, &mut c, &opts);
                    let mut call = || product.call(&da, dims, &b, &mut c, &opts);
                    let checked = selected.map_err(anyhow::Error::from).and_then(|backend| {
                        call()?;
                        stream.synchronize()?;
                        Ok(backend)
                    });
                    let timed = match &checked {
                        Ok(_) => Some(timing(time(stream, s, || Ok(call()?))?, flops)),
                        Err(_) => None,
                    };
                    let reference = product.reference().map(|r| {
                        let i = first + PRODUCTS.iter().position(|&p| p == r).expect("listed");
                        &report.rows[i]
                    });
                    let ratio = match (&timed, reference.and_then(|r| r.timing.as_ref())) {
                        (Some(t), Some(r)) => Some(t.median_us / r.median_us),
                        _ => None,
                    };
                    let row = ProductRow {
                        config,
                        block: format!("{block}"),
                        density: a.density(),
                        pattern: pattern.into(),
                        dtype: dtype.clone(),
                        product: product.name().into(),
                        layout: product.layout().into(),
                        flops,
                        backend: checked.as_ref().ok().map(|&b| backend_name(b).into()),
                        refused: checked.err().map(|e| format!("{e:#}")),
                        // The roofline floor of the product as spmm runs it (op(A) is A, or
                        // Aᵀ with its blocks bk x bm; square here).
                        e: timed.as_ref().and_then(|t| {
                            let ceilings = Ceilings {
                                dense_tflops,
                                l2_tbs: l2_tbs?,
                                hbm_tbs: hbm_tbs?,
                            };
                            let (rows, cols) = match product {
                                Product::Ab(_) => (block.rows, block.cols),
                                _ => (block.cols, block.rows),
                            };
                            let problem = Problem {
                                m: if rows == block.rows { dims.0 } else { dims.2 },
                                n,
                                k: if rows == block.rows { dims.2 } else { dims.0 },
                                bm: rows,
                                bk: cols,
                                nnzb: da.nnz_blocks(),
                                in_bytes: 2,
                                out_bytes: 2,
                                reads_c: false,
                            };
                            Some(problem.floor(&ceilings).efficiency(t.median_us))
                        }),
                        timing: timed,
                        reference: reference.map(|r| r.config.clone()),
                        ratio,
                    };
                    report.rows.push(row);
                    bar.inc(1);
                }
            }
        }
        Ok(())
    }

    /// Per row: product, layouts, Auto's backend, median µs, TFLOPS, E and the ratio to its
    /// reference; a refused row says why.
    fn print_table(r: &ProductsReport) {
        println!(
            "\nsparsek products: {} | M={} N={} K={} | {} repeats x {} launches",
            r.device, r.m, r.n, r.k, r.repeats, r.iters
        );
        let dense: Vec<String> = r
            .cublas_full
            .iter()
            .map(|(dtype, t)| format!("{dtype} {:.0} TFLOPS", t.tflops))
            .collect();
        println!("dense cuBLAS at M, N, K (this run): {}", dense.join(", "));
        println!(
            "{:<28} {:<6} {:<8} {:<8} {:>9} {:>6} {:>5} {:>6}",
            "matrix", "op", "B/C", "auto", "us", "TFLOPS", "E", "ratio"
        );
        for row in &r.rows {
            let matrix = format!(
                "{} d={:.4} {} {}",
                row.block, row.density, row.pattern, row.dtype
            );
            let head = format!(
                "{matrix:<28} {:<6} {:<8} {:<8}",
                row.product,
                row.layout,
                row.backend.as_deref().unwrap_or("-")
            );
            let tail = match (&row.timing, &row.refused) {
                (Some(t), _) => format!(
                    " {:>9.1} {:>6.0} {:>5.2} {}",
                    t.median_us,
                    t.tflops,
                    row.e.unwrap_or(f64::NAN),
                    match row.ratio {
                        Some(q) => format!("{q:>6.3} {}", if q <= TARGET { "ok" } else { "OVER" }),
                        None if row.reference.is_some() => format!("{:>6}", "-"),
                        None => format!("{:>6}", "ref"),
                    }
                ),
                (None, refused) => format!(" refused: {}", refused.as_deref().unwrap_or("?")),
            };
            println!("{head}{tail}");
        }
        println!(
            "(medians; TFLOPS on nonzero work; E = roofline floor (cuBLAS, L2, HBM of this run) / time; \
             ratio = A^T*B / A*B (row/row) and D*A / A*B (col/col), target <= {TARGET:.2}; \
             D*A: D (N x M) and C (N x K) row-major, run by dense_spmm as C^T = A^T * D^T)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparsek_bench::roofline::{Bound, Problem};

    const BASELINE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/baseline/h100.json");

    fn timed(us: f64, flops: f64) -> Timing {
        Timing {
            median_us: us,
            min_us: us,
            runs_us: vec![us],
            tflops: flops / (us * 1e-6) / 1e12,
        }
    }

    /// A report of one 128x128, 1/8 row at M = N = K = 8192, with ceilings.
    fn one_row() -> Report {
        let p = Problem {
            m: 8192,
            n: 8192,
            k: 8192,
            bm: 128,
            bk: 128,
            nnzb: 512,
            in_bytes: 2,
            out_bytes: 2,
            reads_c: false,
        };
        let dense_flops = 2.0 * 8192f64.powi(3);
        let mut r = Report {
            device: "Test GPU".into(),
            m: 8192,
            n: 8192,
            k: 8192,
            repeats: 1,
            iters: 1,
            slowdown: 1,
            cublas_full: BTreeMap::from([("f16".into(), timed(dense_flops / 710e6, dense_flops))]),
            l2_tbs: Some(7.6),
            hbm_tbs: Some(3.1),
            rows: Vec::new(),
        };
        let floor = p.floor(&r.ceilings("f16").unwrap());
        r.rows.push(Row {
            config: "128x128 d=0.1250 topk f16 row/row".into(),
            block: "128x128".into(),
            density: 0.125,
            pattern: "topk".into(),
            dtype: "f16".into(),
            layout: "row/row".into(),
            flops: p.flops(),
            cublas_gathered: None,
            backends: BTreeMap::from([("cutlass".into(), timed(2.0 * floor.us, p.flops()))]),
            floor: Some(floor),
        });
        r
    }

    #[test]
    fn old_reports_load_without_ceilings_and_still_gate() {
        let base = load(BASELINE).unwrap();
        assert!(base.l2_tbs.is_none() && base.hbm_tbs.is_none());
        assert!(base.rows.iter().all(|r| r.floor.is_none()));
        assert!(base.ceilings("f16").is_none());
        print_table(&base);
        assert!(check(&base, &base, 0.05));
        let md = markdown(&base);
        assert!(md.contains("L2 read not measured"));
        assert!(md.contains("| blocks | density | pattern | backend | TFLOPS | floor set by | E |"));
        assert!(md.contains("| 32×32 | 1/16 | topk | CUTLASS | refused | – | – |"));
    }

    #[test]
    fn new_reports_round_trip_and_render_e() {
        let r = one_row();
        let f = r.rows[0].floor.unwrap();
        assert_eq!(f.bound, Bound::Compute);
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.l2_tbs, Some(7.6));
        assert_eq!(back.rows[0].floor, Some(f));
        print_table(&back);
        let md = markdown(&back);
        assert!(md.starts_with("Test GPU, M = 8192, N = 8192, K = 8192; ceilings measured"));
        assert!(md.contains("dense cuBLAS f16 710 TFLOPS, L2 read 7.60 TB/s, HBM read 3.10 TB/s"));
        assert!(md.contains("| blocks | density | backend | TFLOPS | floor set by | E |\n|---|---|---|---|---|---|\n"));
        assert!(
            md.contains("| 128×128 | 1/8 | CUTLASS | 355 | compute | 0.50 |"),
            "{md}"
        );
    }

    #[test]
    fn density_labels() {
        assert_eq!(density_label(0.0625), "1/16");
        assert_eq!(density_label(0.25), "1/4");
        assert_eq!(density_label(0.09375), "0.09");
        assert_eq!(density_label(1.0), "1.00");
    }
}
