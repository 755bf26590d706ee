//! `bench_report`'s subcommands (`src/bin/bench_report.rs` dispatches), one module each,
//! each entered through its `command(args)` (the arguments after the subcommand's name):
//!
//! - [`run`]: the sweep of every backend beside dense cuBLAS, with floors and E (GPU);
//! - [`decode`]: pruned linear layers at decode-sized batches (GPU);
//! - [`products`]: `Aᵀ·B` and `D·A` beside `A·B` on the same matrix (GPU);
//! - [`fp8`]: the FP8 products beside dense FP8 cuBLASLt and the f16 products (GPU);
//! - [`tp`]: the pruned MLP on one GPU and tensor-parallel on two over NCCL (two GPUs);
//! - [`attention`]: the attention table of sparsek's and the peers' JSON lines;
//! - [`gate`] (`check`): the regression gate of a report against a baseline;
//! - [`plot`] and [`markdown`]: a report as a PNG plot and as the README's table.
//!
//! [`spmm`] holds the report of `run` that `check`, `plot` and `markdown` read; this module
//! the argument helpers and the timing record the sweeps share; `device` (with `cuda`)
//! what the GPU sweeps share: the device, the event timer, random operands, patterns and
//! the measured ceilings.

use anyhow::Result;
use serde::{Deserialize, Serialize};

pub mod attention;
pub mod gate;
pub mod markdown;
pub mod plot;
pub mod spmm;

#[cfg(feature = "cuda")]
pub mod decode;
#[cfg(feature = "cuda")]
pub mod device;
#[cfg(feature = "cuda")]
pub mod fp8;
#[cfg(feature = "cuda")]
pub mod mlp;
#[cfg(feature = "cuda")]
pub mod products;
#[cfg(feature = "cuda")]
pub mod run;
#[cfg(feature = "cuda")]
pub mod tp;

/// Without the `cuda` feature, each GPU subcommand's `command` only says what it needs.
#[cfg(not(feature = "cuda"))]
macro_rules! gpu_only {
    ($($name:ident),*) => {$(
        pub mod $name {
            pub fn command(_: &[String]) -> anyhow::Result<()> {
                anyhow::bail!(concat!(
                    "`bench_report ",
                    stringify!($name),
                    "` needs the GPU backends: build with --features cuda"
                ))
            }
        }
    )*};
}

#[cfg(not(feature = "cuda"))]
gpu_only!(run, decode, products, fp8, tp);

/// The value after `name` in `args`, if both are there.
pub fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The comma-separated list after `name` (else `default`), trimmed, empty items dropped.
pub fn list(args: &[String], name: &str, default: &str) -> Vec<String> {
    flag(args, name)
        .unwrap_or(default)
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A backend's name as the reports key it (`hopper`, `wmma`, `decode`): `cutlass`, the
/// Hopper family's old name, is `hopper`, so that `--backends cutlass` and reports that
/// key the family `cutlass` still work.
pub fn backend_key(name: &str) -> &str {
    match name {
        "cutlass" => "hopper",
        other => other,
    }
}

/// Writes `report` as pretty JSON where `--json` says, if it does.
pub fn write_json(args: &[String], report: &impl Serialize) -> Result<()> {
    if let Some(path) = flag(args, "--json") {
        std::fs::write(path, serde_json::to_string_pretty(report)?)?;
        println!("wrote {path}");
    }
    Ok(())
}

/// The median of some timings (the upper one of an even count).
pub fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    /// Median microseconds per operation over the repeats.
    pub median_us: f64,
    /// Fastest repeat.
    pub min_us: f64,
    /// Every repeat, microseconds per operation.
    pub runs_us: Vec<f64>,
    /// TFLOPS on nonzero work at the median.
    pub tflops: f64,
}

/// The timing of the repeats `runs_us` (µs per operation) of an operation of `flops`.
pub fn timing(runs_us: Vec<f64>, flops: f64) -> Timing {
    let median_us = median(runs_us.clone());
    let min_us = runs_us
        .iter()
        .copied()
        .min_by(f64::total_cmp)
        .expect("at least one repeat");
    Timing {
        median_us,
        min_us,
        runs_us,
        tflops: flops / (median_us * 1e-6) / 1e12,
    }
}
