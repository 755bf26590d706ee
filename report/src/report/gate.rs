//! The regression gate: `bench_report check REPORT.json BASELINE.json [--tolerance 0.05]`,
//! and `run --baseline`. It fails a (config, backend) of the baseline only when even the
//! fastest repeat of the new report is slower than the baseline's median by more than the
//! tolerance, so one noisy repeat does not fail it; a config or backend the new report
//! lacks fails too.

use anyhow::{bail, Result};

use super::flag;
use super::spmm::{load, print_table, Report};

/// `bench_report check REPORT.json BASELINE.json [--tolerance 0.05]`: the table of the
/// report, then the gate; exits 1 where it fails.
pub fn command(args: &[String]) -> Result<()> {
    let (report, baseline) = match (args.first(), args.get(1)) {
        (Some(r), Some(b)) => (r, b),
        _ => bail!("usage: bench_report check REPORT.json BASELINE.json [--tolerance 0.05]"),
    };
    let tol = tolerance(&args[2..])?;
    let report = load(report)?;
    print_table(&report);
    let ok = check(&report, &load(baseline)?, tol);
    std::process::exit(if ok { 0 } else { 1 });
}

/// `--tolerance` (0.05).
pub fn tolerance(args: &[String]) -> Result<f64> {
    Ok(flag(args, "--tolerance")
        .map(str::parse)
        .transpose()?
        .unwrap_or(0.05))
}

/// The regression gate. Returns whether every (config, backend) of the baseline holds.
pub fn check(new: &Report, base: &Report, tol: f64) -> bool {
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
