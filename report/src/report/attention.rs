//! `bench_report attention`: the attention table from JSON lines of sparsek's timer
//! (`attention_check --time`) and the PyTorch peers (`report/peers/attention_torch.py`), all
//! from one run on the GPU machine (`run.sh attention`).
//!
//! Each line: `impl` (sparsek, flex, sdpa_{flash,cudnn}_{dense,causal}), the case (mask,
//! dtype, batch, heads, seq, head_dim), `kept_pairs`, `ms`, `tflops` (4·pairs·head_dim FLOPs),
//! and `gating_ms` for sparsek's top-k masks. A line with `error` (a peer that failed) is
//! shown as such.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// `bench_report attention FILE.jsonl... [--json OUT]`: the attention table (markdown) of
/// sparsek's and the peers' JSON lines (`run.sh attention`); `--json` writes the rows.
pub fn command(args: &[String]) -> Result<()> {
    let mut rows = Vec::new();
    let mut files = args.iter();
    let mut json_out = None;
    while let Some(a) = files.next() {
        if a == "--json" {
            json_out = files.next();
            continue;
        }
        rows.extend(parse(&std::fs::read_to_string(a)?));
    }
    if rows.is_empty() {
        bail!("usage: bench_report attention FILE.jsonl... [--json OUT] (no rows read)");
    }
    print!("{}", table(&rows));
    if let Some(out) = json_out {
        std::fs::write(out, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}

/// One timed implementation on one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub r#impl: String,
    pub mask: String,
    pub dtype: String,
    pub batch: u64,
    pub heads: u64,
    pub seq: u64,
    pub head_dim: u64,
    #[serde(default)]
    pub kept_pairs: u64,
    #[serde(default)]
    pub ms: f64,
    #[serde(default)]
    pub tflops: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gating_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The rows of JSON-lines text (lines that are not JSON objects are skipped: the peers print
/// nothing else, but a log may be interleaved).
pub fn parse(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

type Key = (String, String, u64, u64, u64, u64);

/// The issue's targets: bf16, seq 8192, head_dim 128, causal and top-k masks: ≥ 500 TFLOPS
/// and ≥ 1.3× FlexAttention.
fn target(key: &Key, ours: Option<&Row>, flex: Option<&Row>) -> String {
    let (mask, dtype, _, _, seq, d) = key;
    let applies =
        dtype == "bf16" && *seq == 8192 && *d == 128 && (mask == "causal" || mask == "topk16");
    if !applies {
        return "—".into();
    }
    let (Some(o), Some(f)) = (ours, flex) else {
        return "not measured".into();
    };
    let met = o.tflops >= 500.0 && f.tflops > 0.0 && o.tflops / f.tflops >= 1.3;
    format!("{} (≥ 500, ≥ 1.3×)", if met { "met" } else { "not met" })
}

/// The markdown table, one line per case, in the order the cases first appear.
pub fn table(rows: &[Row]) -> String {
    let mut order: Vec<Key> = Vec::new();
    let mut by: BTreeMap<Key, BTreeMap<String, Row>> = BTreeMap::new();
    for r in rows {
        let key = (
            r.mask.clone(),
            r.dtype.clone(),
            r.batch,
            r.heads,
            r.seq,
            r.head_dim,
        );
        if !by.contains_key(&key) {
            order.push(key.clone());
        }
        by.entry(key)
            .or_default()
            .insert(r.r#impl.clone(), r.clone());
    }
    let tf = |r: Option<&Row>| match r {
        Some(r) if r.error.is_some() => "failed".to_string(),
        Some(r) => format!("{:.0}", r.tflops),
        None => "—".into(),
    };
    let mut out = String::from(
        "| mask | dtype | batch×heads×seq, d | kept pairs | sparsek ms | sparsek TFLOPS | FlexAttention TFLOPS | \
         sparsek ÷ Flex | SDPA flash dense / causal TFLOPS | SDPA cuDNN dense / causal TFLOPS | \
         gating ms | target |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for key in &order {
        let m = &by[key];
        let (ours, flex) = (m.get("sparsek"), m.get("flex"));
        let dense_pairs = key.2 * key.3 * key.4 * key.4;
        let share = ours.map_or("—".into(), |o| {
            format!("{:.3}", o.kept_pairs as f64 / dense_pairs.max(1) as f64)
        });
        let ratio = match (ours, flex) {
            (Some(o), Some(f)) if f.error.is_none() && f.tflops > 0.0 => {
                format!("{:.2}", o.tflops / f.tflops)
            }
            _ => "—".into(),
        };
        out += &format!(
            "| {} | {} | {}×{}×{}, {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {} |\n",
            key.0,
            key.1,
            key.2,
            key.3,
            key.4,
            key.5,
            share,
            ours.map_or("—".into(), |o| format!("{:.3}", o.ms)),
            tf(ours),
            tf(flex),
            ratio,
            tf(m.get("sdpa_flash_dense")),
            tf(m.get("sdpa_flash_causal")),
            tf(m.get("sdpa_cudnn_dense")),
            tf(m.get("sdpa_cudnn_causal")),
            ours.and_then(|o| o.gating_ms)
                .map_or("—".into(), |g| format!("{g:.3}")),
            target(key, ours, flex),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cases_and_computes_ratios() {
        let text = r#"noise
{"impl":"sparsek","mask":"causal","dtype":"bf16","batch":4,"heads":16,"seq":8192,"head_dim":128,"kept_pairs":2147745792,"ms":1.8,"tflops":610.0}
{"impl":"flex","mask":"causal","dtype":"bf16","batch":4,"heads":16,"seq":8192,"head_dim":128,"kept_pairs":2147745792,"ms":2.8,"tflops":400.0}
{"impl":"sdpa_flash_dense","mask":"causal","dtype":"bf16","batch":4,"heads":16,"seq":8192,"head_dim":128,"kept_pairs":4294967296,"ms":3.4,"tflops":630.0}
{"impl":"sparsek","mask":"topk16","dtype":"f16","batch":4,"heads":16,"seq":8192,"head_dim":128,"kept_pairs":1073741824,"ms":0.9,"tflops":590.0,"gating_ms":0.2}
{"impl":"flex","mask":"topk16","dtype":"f16","batch":4,"heads":16,"seq":8192,"head_dim":128,"error":"compile failed"}
"#;
        let rows = parse(text);
        assert_eq!(rows.len(), 5);
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(
            lines[2].starts_with("| causal | bf16 | 4×16×8192, 128 | 0.500 |"),
            "{t}"
        );
        assert!(
            lines[2].contains("| 610 | 400 | 1.52 | 630 / — | — / — |"),
            "{t}"
        );
        assert!(lines[2].ends_with("| met (≥ 500, ≥ 1.3×) |"), "{t}");
        assert!(lines[3].contains("| 590 | failed | — |"), "{t}");
        assert!(lines[3].contains("| 0.200 | — |"), "{t}");
    }
}
