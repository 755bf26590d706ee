//! The regression gate: `bench_report check REPORT.json BASELINE.json [--tolerance 0.05]`,
//! and `run --baseline`. It fails a (config, backend) of the baseline only when even the
//! fastest repeat of the new report is worse than the baseline's median by more than the
//! tolerance, so one noisy repeat does not fail it; a config or backend the new report
//! lacks fails too. Where both reports carry floors it compares E = floor ÷ time: the H100's
//! clocks drift between leases (dense cuBLAS 695–775 TFLOPS f16 across report/NOTES.md
//! sessions 16–18) and move every kernel with them, which absolute times cannot tell from a
//! regression.

use std::collections::BTreeSet;

use anyhow::{bail, Result};

use super::flag;
use super::spmm::{load, print_table, Report, Row};
use super::Timing;

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

/// How one (config, backend) compares: by efficiency E = floor ÷ time where both reports
/// carry the row's floor (each from its own run's ceilings, so a lease whose clocks or cuBLAS
/// run slower moves the floor with the kernel), by absolute time otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// New ÷ baseline of the compared measure: E (higher is better) or time (lower is better).
    pub ratio: f64,
    /// Whether the ratio is of E.
    pub by_e: bool,
    /// The new report's best repeat is worse than the baseline's median by more than tol.
    pub slower: bool,
}

/// The verdict on one (config, backend): the new report's fastest repeat against the
/// baseline's median.
pub fn verdict(new: &Row, new_t: &Timing, base: &Row, base_t: &Timing, tol: f64) -> Verdict {
    match (new.floor, base.floor) {
        (Some(nf), Some(bf)) => {
            let e_base = bf.us / base_t.median_us;
            let e_best = nf.us / new_t.min_us;
            Verdict {
                ratio: (nf.us / new_t.median_us) / e_base,
                by_e: true,
                slower: e_best < e_base * (1.0 - tol),
            }
        }
        _ => Verdict {
            ratio: new_t.median_us / base_t.median_us,
            by_e: false,
            slower: new_t.min_us > base_t.median_us * (1.0 + tol),
        },
    }
}

/// The regression gate. Returns whether every (config, backend) of the baseline holds.
pub fn check(new: &Report, base: &Report, tol: f64) -> bool {
    gate(new, base, tol, None).passed()
}

/// What one pass of the gate found.
#[derive(Debug, Default, PartialEq)]
pub struct Gate {
    /// The configs with a backend worse than the baseline by more than the tolerance.
    pub slower: BTreeSet<String>,
    /// The baseline's (config, backend) pairs the new report lacks.
    pub missing: usize,
}

impl Gate {
    /// Nothing slower and nothing missing.
    pub fn passed(&self) -> bool {
        self.slower.is_empty() && self.missing == 0
    }
}

/// One pass of the gate over the baseline's rows (those of `only`, where given), printed.
pub fn gate(new: &Report, base: &Report, tol: f64, only: Option<&BTreeSet<String>>) -> Gate {
    let mut found = Gate::default();
    let mut compared = 0;
    println!(
        "regression check: tolerance {:.1}%, on E = floor / time where both reports have \
         floors (each run's own ceilings), else on time; fail only when the fastest repeat \
         is still worse",
        tol * 100.0
    );
    for b in base
        .rows
        .iter()
        .filter(|b| only.is_none_or(|o| o.contains(&b.config)))
    {
        let Some(n) = new.rows.iter().find(|r| r.config == b.config) else {
            println!("  missing  {}: not in the new report", b.config);
            found.missing += b.backends.len().max(1);
            continue;
        };
        for (backend, bt) in &b.backends {
            let Some(nt) = n.backends.get(backend) else {
                println!("  missing  {} {backend}", b.config);
                found.missing += 1;
                continue;
            };
            compared += 1;
            let v = verdict(n, nt, b, bt, tol);
            if v.slower {
                found.slower.insert(b.config.clone());
            }
            let measure = match (v.by_e, n.floor, b.floor) {
                (true, Some(nf), Some(bf)) => format!(
                    "E {:.3} -> {:.3}",
                    bf.us / bt.median_us,
                    nf.us / nt.median_us
                ),
                _ => String::new(),
            };
            println!(
                "  {:<8} {:<36} {backend:<8} {:>8.1} us -> {:>8.1} us  {measure} ({}{:+.1}%)",
                if v.slower { "SLOWER" } else { "ok" },
                b.config,
                bt.median_us,
                nt.median_us,
                if v.by_e { "E " } else { "time " },
                (v.ratio - 1.0) * 100.0
            );
        }
    }
    println!(
        "regression check: {} ({compared} compared)",
        if found.passed() { "PASSED" } else { "FAILED" }
    );
    found
}
