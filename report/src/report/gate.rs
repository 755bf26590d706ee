//! The regression gate: `bench_report check REPORT.json BASELINE.json [--tolerance 0.05]`,
//! and `run --baseline`. It fails a (config, backend) of the baseline only when even the
//! fastest repeat of the new report is worse than the baseline's median by more than the
//! tolerance, so one noisy repeat does not fail it; a config or backend the new report
//! lacks fails too. With floors, a row must also have grown past the lease's drift
//! ([`lease_drift`]) to fail. Where both reports carry floors it compares E = floor ÷ time: the H100's
//! clocks drift between leases (dense cuBLAS f16 has measured 695–775 TFLOPS on different
//! leases) and move every kernel with them, which absolute times cannot tell from a
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

/// How much slower the new report's lease runs its slowest-drifting resource than the
/// baseline's: the largest of the time ratios (new ÷ baseline) of dense cuBLAS in `dtype`,
/// of the L2 read and of the HBM read. None where a report lacks one of them.
///
/// A kernel's speed is set by some mix of the SM clock (what cuBLAS shows) and the memory
/// system; its E is taken against the floor of one resource only, so on a lease whose SM
/// clock runs lower while the L2 ceiling does not move, an L2-floored kernel that is really
/// held back by its issue rate (a WMMA row at E 0.45) looks slower than it is: on leases with
/// cuBLAS f16 10 % and 12 % below the baseline's, 5 and 2 rows failed on E through two
/// rechecks each, while the same rows built from the baseline's commit and from this tree
/// ran within 0.8 % of each other in one lease.
pub fn lease_drift(new: &Report, base: &Report, dtype: &str) -> Option<f64> {
    let cublas = new.cublas_full.get(dtype)?.median_us / base.cublas_full.get(dtype)?.median_us;
    let l2 = base.l2_tbs? / new.l2_tbs?;
    let hbm = base.hbm_tbs? / new.hbm_tbs?;
    Some(cublas.max(l2).max(hbm))
}

/// The verdict on one (config, backend): the new report's fastest repeat against the
/// baseline's median. Where both carry floors, slower means E fell by more than the
/// tolerance *and*, where the lease's drift is known, the time grew by more than the
/// tolerance beyond that drift.
pub fn verdict(
    new: &Row,
    new_t: &Timing,
    base: &Row,
    base_t: &Timing,
    tol: f64,
    drift: Option<f64>,
) -> Verdict {
    match (new.floor, base.floor) {
        (Some(nf), Some(bf)) => {
            let e_base = bf.us / base_t.median_us;
            let e_best = nf.us / new_t.min_us;
            let past_drift =
                drift.is_none_or(|d| new_t.min_us > base_t.median_us * d.max(1.0) * (1.0 + tol));
            Verdict {
                ratio: (nf.us / new_t.median_us) / e_base,
                by_e: true,
                slower: e_best < e_base * (1.0 - tol) && past_drift,
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
         is still worse (and, with floors, its time grew past the lease's drift)",
        tol * 100.0
    );
    for dtype in base.cublas_full.keys() {
        if let Some(d) = lease_drift(new, base, dtype) {
            println!("  lease drift ({dtype}): x{d:.3} (the slowest of cuBLAS, L2 and HBM, new / baseline time)");
        }
    }
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
            let v = verdict(n, nt, b, bt, tol, lease_drift(new, base, &b.dtype));
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
