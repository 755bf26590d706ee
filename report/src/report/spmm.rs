//! The report of `bench_report run` (a row per configuration with a timing per backend and
//! its roofline floor against the ceilings of the same run) as its JSON holds it, loaded back
//! by `check`, `plot` and `markdown`, and its table on stdout.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{backend_key, Timing};
use crate::roofline::{Ceilings, Floor};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Unique key, e.g. `128x128 d=0.125 topk f16 row/row`.
    pub config: String,
    pub block: String,
    pub density: f64,
    pub pattern: String,
    pub dtype: String,
    pub layout: String,
    pub flops: f64,
    /// cuBLAS on the gathered dense problem (same M, N; K = mean nnz per block-row × bk).
    pub cublas_gathered: Option<Timing>,
    /// By backend name (`hopper`, `wmma`; [`super::backend_key`]).
    pub backends: BTreeMap<String, Timing>,
    /// The roofline floor against this run's ceilings (absent in reports without them).
    #[serde(default)]
    pub floor: Option<Floor>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub device: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub repeats: usize,
    pub iters: usize,
    pub slowdown: usize,
    /// Dense cuBLAS at the full K, per dtype: the compute ceiling of the floors.
    pub cublas_full: BTreeMap<String, Timing>,
    /// L2 read bandwidth of this run, TB/s (absent in reports before the ceilings).
    #[serde(default)]
    pub l2_tbs: Option<f64>,
    /// HBM read bandwidth of this run, TB/s (absent in reports before the ceilings).
    #[serde(default)]
    pub hbm_tbs: Option<f64>,
    pub rows: Vec<Row>,
}

impl Report {
    /// The ceilings of this run for rows of `dtype`, where all three were measured.
    pub fn ceilings(&self, dtype: &str) -> Option<Ceilings> {
        Some(Ceilings {
            dense_tflops: self.cublas_full.get(dtype)?.tflops,
            l2_tbs: self.l2_tbs?,
            hbm_tbs: self.hbm_tbs?,
        })
    }

    /// Backend names over all rows, in order.
    pub fn backend_names(&self) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> =
            self.rows.iter().flat_map(|r| r.backends.keys()).collect();
        names.into_iter().cloned().collect()
    }

    /// The ceilings of this run on one line, `sep` between them.
    pub fn ceilings_line(&self, sep: &str) -> String {
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

/// The report in the JSON file `path`.
pub fn load(path: &str) -> Result<Report> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    from_json(&text).with_context(|| format!("parsing {path}"))
}

/// The report a JSON text holds, its backends keyed by [`backend_key`] (a report that keys
/// the Hopper family `cutlass` gates against one that keys it `hopper`).
pub fn from_json(text: &str) -> serde_json::Result<Report> {
    let mut report: Report = serde_json::from_str(text)?;
    for row in &mut report.rows {
        row.backends = std::mem::take(&mut row.backends)
            .into_iter()
            .map(|(name, t)| (backend_key(&name).to_owned(), t))
            .collect();
    }
    Ok(report)
}

/// The table: per row the floor and the bound that sets it, then per backend the median
/// µs, TFLOPS and E; dense cuBLAS on the gathered K beside.
pub fn print_table(r: &Report) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::gate::{check, gate, lease_drift};
    use crate::report::markdown::markdown;
    use crate::roofline::{Bound, Problem};
    use std::collections::BTreeSet;

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
            backends: BTreeMap::from([("hopper".into(), timed(2.0 * floor.us, p.flops()))]),
            floor: Some(floor),
        });
        r
    }

    /// `r` as a report from before the ceilings: no bandwidths, no floors.
    fn without_ceilings(mut r: Report) -> Report {
        r.l2_tbs = None;
        r.hbm_tbs = None;
        for row in &mut r.rows {
            row.floor = None;
        }
        // Written as the old reports were: without the fields at all.
        let mut json = serde_json::to_value(&r).unwrap();
        let o = json.as_object_mut().unwrap();
        o.remove("l2_tbs");
        o.remove("hbm_tbs");
        for row in o["rows"].as_array_mut().unwrap() {
            row.as_object_mut().unwrap().remove("floor");
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_baseline_loads_with_its_ceilings_and_passes_itself() {
        let base = load(BASELINE).unwrap();
        assert!(base.l2_tbs.is_some() && base.hbm_tbs.is_some());
        assert!(base.rows.iter().all(|r| r.floor.is_some()));
        assert!(base.ceilings("f16").is_some());
        assert_eq!(base.backend_names(), ["hopper", "wmma"]);
        print_table(&base);
        assert!(check(&base, &base, 0.05));
        let md = markdown(&base);
        assert!(
            md.contains(
                "| blocks | density | pattern | dtype | backend | TFLOPS | floor set by | E |"
            ),
            "{md}"
        );
    }

    #[test]
    fn reports_keying_hopper_cutlass_load_keyed_hopper_and_gate() {
        let r = one_row();
        let json = serde_json::to_string(&r).unwrap();
        let old = json.replace("\"hopper\"", "\"cutlass\"");
        assert_ne!(old, json);
        let back = from_json(&old).unwrap();
        assert_eq!(back.backend_names(), ["hopper"]);
        assert!(check(&back, &r, 0.05) && check(&r, &back, 0.05));
    }

    #[test]
    fn old_reports_load_without_ceilings_and_gate_on_time() {
        let old = without_ceilings(one_row());
        assert!(old.l2_tbs.is_none() && old.rows[0].floor.is_none());
        assert!(old.ceilings("f16").is_none());
        print_table(&old);
        assert!(check(&old, &old, 0.05));
        assert!(markdown(&old).contains("L2 read not measured"));
        // 10 % slower in every repeat: fails on time.
        let mut slow = old.clone();
        let t = slow.rows[0].backends.get_mut("hopper").unwrap();
        t.median_us *= 1.1;
        t.min_us *= 1.1;
        assert!(!check(&slow, &old, 0.05));
    }

    /// `r` on a lease whose dense cuBLAS runs `by` times slower (the rows unchanged).
    fn cublas_slower(r: &Report, by: f64) -> Report {
        let mut out = r.clone();
        for t in out.cublas_full.values_mut() {
            t.median_us *= by;
            t.min_us *= by;
            t.tflops /= by;
        }
        out
    }

    /// A lease whose clocks run 10 % slower moves cuBLAS (the compute floor) and the kernel
    /// alike: the gate on E passes it, and still fails a kernel that alone got slower.
    #[test]
    fn the_gate_compares_e_where_both_reports_have_floors() {
        let base = one_row();
        let mut drift = cublas_slower(&base, 1.1);
        let row = &mut drift.rows[0];
        let f = row.floor.as_mut().unwrap();
        f.us *= 1.1;
        f.compute_us *= 1.1;
        let t = row.backends.get_mut("hopper").unwrap();
        t.median_us *= 1.1;
        t.min_us *= 1.1;
        assert!(check(&drift, &base, 0.05), "uniform drift is no regression");
        // On time alone the same report fails.
        assert!(!check(
            &without_ceilings(drift.clone()),
            &without_ceilings(base.clone()),
            0.05
        ));
        // The kernel 10 % slower on an unchanged machine: fails.
        let mut slow = base.clone();
        let t = slow.rows[0].backends.get_mut("hopper").unwrap();
        t.median_us *= 1.1;
        t.min_us *= 1.1;
        assert!(!check(&slow, &base, 0.05));
        // One slow repeat with a fast best: passes (the best repeat decides).
        let mut noisy = base.clone();
        noisy.rows[0].backends.get_mut("hopper").unwrap().median_us *= 1.1;
        assert!(check(&noisy, &base, 0.05));
    }

    /// A lease whose SM clock runs 10 % slower (cuBLAS 10 % slower; the L2 and HBM ceilings,
    /// and so an L2-bound row's floor, unchanged): a row 8 % slower has lost E but not more
    /// time than the lease's drift, and passes; 20 % slower fails; and without the drift
    /// (a report lacking cuBLAS) the 8 % row fails on E.
    #[test]
    fn the_gate_allows_the_leases_drift_and_no_more() {
        let base = one_row();
        let lease = cublas_slower(&base, 1.1);
        let slowed = |by: f64| {
            let mut r = lease.clone();
            let t = r.rows[0].backends.get_mut("hopper").unwrap();
            t.median_us *= by;
            t.min_us *= by;
            r
        };
        let dtype = base.rows[0].dtype.clone();
        let drift = lease_drift(&lease, &base, &dtype).unwrap();
        assert!((drift - 1.1).abs() < 1e-9, "{drift}");
        assert!(check(&slowed(1.08), &base, 0.05));
        assert!(!check(&slowed(1.2), &base, 0.05));
        let mut no_cublas = slowed(1.08);
        no_cublas.cublas_full.clear();
        assert!(!check(&no_cublas, &base, 0.05));
    }

    /// The gate names the slower configs, so that `run` can time just those again; a
    /// pass restricted to them skips the others, and a config missing from the new report
    /// fails whatever the rest says.
    #[test]
    fn the_gate_names_what_it_found_slower() {
        let base = one_row();
        let config = base.rows[0].config.clone();
        let mut slow = base.clone();
        let t = slow.rows[0].backends.get_mut("hopper").unwrap();
        t.median_us *= 1.1;
        t.min_us *= 1.1;
        let found = gate(&slow, &base, 0.05, None);
        assert_eq!(found.slower, BTreeSet::from([config.clone()]));
        assert_eq!(found.missing, 0);
        assert!(!found.passed());
        // The recheck round is timed again and holds: passes.
        assert!(gate(&base, &base, 0.05, Some(&found.slower)).passed());
        // Restricted to configs the baseline lacks: nothing compared, nothing failed.
        let elsewhere = BTreeSet::from(["another config".to_string()]);
        assert!(gate(&slow, &base, 0.05, Some(&elsewhere)).passed());
        // A new report without the row: missing, whatever the restriction.
        let mut empty = base.clone();
        empty.rows.clear();
        let found = gate(&empty, &base, 0.05, Some(&BTreeSet::from([config])));
        assert!(found.missing > 0 && !found.passed());
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
            md.contains("| 128×128 | 1/8 | HOPPER | 355 | compute | 0.50 |"),
            "{md}"
        );
    }
}
