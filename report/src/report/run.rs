//! `bench_report run`: one table of every backend beside dense cuBLAS, with each row's
//! roofline floor and efficiency E, written as JSON (`--json`), as a PNG plot (`--png`) and
//! as a markdown table (`--markdown`), and gated against a recorded baseline (`--baseline`).
//!
//! `run` first measures its ceilings: the L2 and HBM read bandwidth (kernels/bandwidth.cu)
//! and, per dtype, dense cuBLAS at the full M, N, K. Each row's floor is the largest of its
//! FLOPs at dense cuBLAS's rate, B's L2 traffic at the L2 rate and its A + B + C bytes at
//! the HBM rate (`sparsek_report::roofline`); E = floor ÷ measured median time. Timing is
//! device-side (CUDA events around `iters` back-to-back launches), repeated `repeats`
//! times; the table shows medians. The gate fails a (config, backend) only when even the
//! fastest repeat is slower than the baseline's median by more than the tolerance, so one
//! noisy repeat does not fail it. `--slowdown N` enqueues every timed operation N times:
//! a deliberately slowed run, to show that the gate fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::CudaStream;
use indicatif::ProgressBar;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    bf16, f16, gpu, spmm, Backend, BsrMatrix, Dense, DenseMut, DeviceBsr, Element, Layout,
    SpmmOptions,
};

use super::device::{
    cublas_full, mask, memory_ceilings, open, parse_block, parse_density, progress, random_device,
    time, Settings,
};
use super::gate::{gate, tolerance};
use super::markdown::write_markdown;
use super::plot::plot;
use super::spmm::{load, print_table, Report, Row};
use super::{backend_key, flag, list, timing, write_json};
use crate::{baseline, roofline::Problem};

/// `bench_report run ARGS` (the usage in `src/bin/bench_report.rs`).
pub fn command(args: &[String]) -> Result<()> {
    let s = Settings::from_args(args)?;
    let lists = [
        list(args, "--blocks", "128x128,64x64,32x32"),
        list(args, "--densities", "1/16,1/8,1/4"),
        list(args, "--patterns", "topk"),
        list(args, "--dtypes", "f16"),
        list(args, "--layouts", "row/row"),
        list(args, "--backends", "hopper,wmma"),
    ];
    let (device, stream, blas) = open()?;
    let report = measure(&s, &lists, device.clone(), &stream, &blas, None)?;
    print_table(&report);
    write_json(args, &report)?;
    if let Some(path) = flag(args, "--png") {
        if let Err(e) = plot(&report, Path::new(path)) {
            println!("no plot: {e}");
        }
    }
    if let Some(path) = flag(args, "--markdown") {
        write_markdown(&report, path)?;
    }
    if let Some(base) = flag(args, "--baseline") {
        let tol = tolerance(args)?;
        let base = load(base)?;
        let rechecks: usize = flag(args, "--rechecks")
            .map(str::parse)
            .transpose()?
            .unwrap_or(1);
        let mut found = gate(&report, &base, tol, None);
        // A config the gate finds slower is timed again, in a round of its own (fresh
        // ceilings and repeats, the same matrices: each config's are drawn from its own
        // seed), and fails only if it is slower in every round. One lease's noise moves a
        // few rows past the tolerance, different ones each run (2 then 3 of 168 in two runs
        // of one lease, no row twice); a regression stays.
        for round in 1..=rechecks {
            if found.slower.is_empty() || found.missing > 0 {
                break;
            }
            println!(
                "\nrecheck {round} of {rechecks}: timing again the {} config(s) the gate found slower",
                found.slower.len()
            );
            let again = measure(
                &s,
                &lists,
                device.clone(),
                &stream,
                &blas,
                Some(&found.slower),
            )?;
            print_table(&again);
            found = gate(&again, &base, tol, Some(&found.slower));
        }
        if !found.passed() {
            std::process::exit(1);
        }
    }
    Ok(())
}

/// One sweep: the memory ceilings, then per dtype its dense cuBLAS ceiling and every
/// (block, density, pattern, layout, backend) of the lists; with `only`, just those configs.
fn measure(
    s: &Settings,
    lists: &[Vec<String>; 6],
    device: String,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    only: Option<&BTreeSet<String>>,
) -> Result<Report> {
    let [blocks, densities, patterns, dtypes, layouts, backends] = lists;
    // The memory ceilings, first (the cuBLAS one is measured per dtype in the sweep).
    let (l2_tbs, hbm_tbs) = memory_ceilings(stream);
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
    let lists = (
        &blocks[..],
        &densities[..],
        &patterns[..],
        &layouts[..],
        &backends[..],
    );
    for dtype in dtypes {
        match dtype.as_str() {
            "f16" => sweep_dtype::<f16>(s, stream, blas, &mut report, &bar, lists, only)?,
            "bf16" => sweep_dtype::<bf16>(s, stream, blas, &mut report, &bar, lists, only)?,
            other => bail!("dtype `{other}`: f16 or bf16"),
        }
    }
    bar.finish_and_clear();
    Ok(report)
}

/// The seed of one part of the sweep, from its name: a config's matrices are the same in
/// every round and whatever else the lists hold.
fn seed(name: &str) -> u64 {
    // FNV-1a.
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn layout(s: &str) -> Result<Layout> {
    match s {
        "row" => Ok(Layout::RowMajor),
        "col" => Ok(Layout::ColMajor),
        _ => bail!("layout `{s}`: row or col"),
    }
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
    (blocks, densities, patterns, layouts, backends): Lists<'_>,
    only: Option<&BTreeSet<String>>,
) -> Result<()>
where
    CudaBlas: Gemm<T>,
{
    let dtype = format!("{}", T::DTYPE);
    let (m, n, k) = (s.m, s.n, s.k);
    let rng = &mut StdRng::seed_from_u64(seed(&dtype));
    let b = random_device::<T>(stream, k * n, rng)?;
    let mut c = stream.alloc_zeros::<T>(m * n)?;
    let full = cublas_full(s, stream, blas, rng, &b, &mut c)?;
    report.cublas_full.insert(dtype.clone(), full);
    let ceilings = report.ceilings(&dtype);
    let base_opts = SpmmOptions::new();
    for block in blocks {
        let block = parse_block(block)?;
        for density_arg in densities {
            let density = parse_density(density_arg)?;
            for pattern in patterns {
                let rng = &mut StdRng::seed_from_u64(seed(&format!(
                    "{dtype} {block} {density_arg} {pattern}"
                )));
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
                let config_of =
                    |lay: &str| format!("{block} d={:.4} {pattern} {dtype} {lay}", a.density());
                if only.is_some_and(|o| !layouts.iter().any(|lay| o.contains(&config_of(lay)))) {
                    bar.inc(layouts.len() as u64);
                    continue;
                }
                let cublas_gathered = {
                    let ag = random_device::<T>(stream, m * kg, rng)?;
                    let bg = random_device::<T>(stream, kg * n, rng)?;
                    let runs = time(stream, s, || {
                        Ok(baseline::dense_gemm(blas, (m, n, kg), &ag, &bg, &mut c)?)
                    })?;
                    Some(timing(runs, flops))
                };
                for lay in layouts {
                    let (bl, cl) = lay
                        .split_once('/')
                        .context("layouts are written B/C, e.g. row/col")?;
                    let (bl, cl) = (layout(bl)?, layout(cl)?);
                    let config = config_of(lay);
                    if only.is_some_and(|o| !o.contains(&config)) {
                        bar.inc(1);
                        continue;
                    }
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
                        let key = backend_key(name);
                        let backend = match key {
                            "hopper" => Backend::Hopper,
                            "wmma" => Backend::Wmma,
                            _ => bail!("backend `{name}`: hopper (old name: cutlass) or wmma"),
                        };
                        if row.backends.contains_key(key) {
                            continue;
                        }
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
                        row.backends.insert(key.to_owned(), timing(runs, flops));
                    }
                    report.rows.push(row);
                    bar.inc(1);
                }
            }
        }
    }
    Ok(())
}
