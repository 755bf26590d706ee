//! `bench_report attention`: the attention tables from JSON lines of sparsek's timer
//! (`attention_check --time`) and the PyTorch peers (`report/peers/attention_torch.py`), all
//! from one run on the GPU machine (`run.sh attention`).
//!
//! Each line: `impl` (sparsek; flex; sdpa_cudnn_mask and fa4_sparse on the case's mask;
//! sdpa_{flash,cudnn}_{dense,causal} and fa4_{dense,causal}, the dense rates of the case's
//! shape), the case (mask, dtype, batch, heads, heads_kv, seq, seq_k, head_dim,
//! causal_alignment, kv_repeated), `kept_pairs`, `ms`, `tflops` (4·pairs·head_dim FLOPs),
//! and `gating_ms` for sparsek's top-k masks. Lines of an older timer without heads_kv, seq_k
//! or the alignment read as heads_kv = heads, seq_k = seq, top-left. A line with `error` (a
//! peer that failed) is shown as such.
//!
//! Two tables: every case (sparsek beside FlexAttention and SDPA's dense ceilings), then the
//! cases with grouped-query heads against issue 47's prefill targets: TFLOPS on kept pairs
//! within 5 % of the same mask without GQA (the case with K and V repeated per query head),
//! ≥ 1.5× FlashAttention-4's block-sparse forward on the same mask, and ≥ 0.8 of the best
//! dense rate of the same shape measured in the same run.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// `bench_report attention FILE.jsonl... [--json OUT]`: the attention tables (markdown) of
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
    /// K and V's heads (grouped-query attention); absent: as Q's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads_kv: Option<u64>,
    /// The queries' length.
    pub seq: u64,
    /// The keys' length; absent: as the queries'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_k: Option<u64>,
    pub head_dim: u64,
    /// `top_left` or `bottom_right` (read with a causal mask); absent: top-left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal_alignment: Option<String>,
    /// K and V's values repeated from heads_kv / kv_repeated heads (the same values and mask
    /// as the case with that many KV heads); absent: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_repeated: Option<u64>,
    #[serde(default)]
    pub kept_pairs: u64,
    #[serde(default)]
    pub ms: f64,
    #[serde(default)]
    pub tflops: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gating_ms: Option<f64>,
    /// A peer that refused enable_gqa ran on K and V repeated per query head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_repeated_by_peer: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Row {
    fn case(&self) -> Case {
        Case {
            mask: self.mask.clone(),
            dtype: self.dtype.clone(),
            batch: self.batch,
            heads: self.heads,
            heads_kv: self.heads_kv.unwrap_or(self.heads),
            seq: self.seq,
            seq_k: self.seq_k.unwrap_or(self.seq),
            head_dim: self.head_dim,
            bottom_right: self.causal_alignment.as_deref() == Some("bottom_right"),
            kv_repeated: self.kv_repeated.unwrap_or(1),
        }
    }
}

/// The rows of JSON-lines text (lines that are not JSON objects are skipped: the peers print
/// nothing else, but a log may be interleaved).
pub fn parse(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What identifies a case: every row of one case (sparsek's and each peer's) has these.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Case {
    mask: String,
    dtype: String,
    batch: u64,
    heads: u64,
    heads_kv: u64,
    seq: u64,
    seq_k: u64,
    head_dim: u64,
    bottom_right: bool,
    kv_repeated: u64,
}

impl Case {
    fn gqa(&self) -> bool {
        self.heads_kv != self.heads
    }
    /// The mask's name, with the alignment when it matters (causal, seq_q != seq_k).
    fn mask_label(&self) -> String {
        if self.mask.contains("causal") && self.bottom_right && self.seq != self.seq_k {
            format!("{} (bottom-right)", self.mask)
        } else {
            self.mask.clone()
        }
    }
    /// `32/8` for grouped-query heads (`32/32 (K, V ×4)` for K and V repeated), else `16`.
    fn heads_label(&self) -> String {
        let mut s = if self.gqa() || self.kv_repeated > 1 {
            format!("{}/{}", self.heads, self.heads_kv)
        } else {
            self.heads.to_string()
        };
        if self.kv_repeated > 1 {
            s += &format!(" (K, V ×{})", self.kv_repeated);
        }
        s
    }
    /// `8192`, or `2048/8192` when the keys' length differs.
    fn seq_label(&self) -> String {
        if self.seq == self.seq_k {
            self.seq.to_string()
        } else {
            format!("{}/{}", self.seq, self.seq_k)
        }
    }
    /// The same case without GQA: K and V with Q's heads, their values repeated from this
    /// case's heads_kv (else drawn for every head).
    fn without_gqa(&self, repeated: bool) -> Case {
        Case {
            heads_kv: self.heads,
            kv_repeated: if repeated {
                self.heads / self.heads_kv.max(1)
            } else {
                1
            },
            ..self.clone()
        }
    }
    /// Whether issue 47's prefill targets apply: bf16, d 128, seq 8192 both ways, causal and
    /// top-k masks.
    fn prefill_target(&self) -> bool {
        self.dtype == "bf16"
            && self.head_dim == 128
            && self.seq == 8192
            && self.seq_k == 8192
            && matches!(self.mask.as_str(), "causal" | "topk16" | "topk16_causal")
    }
}

/// The dense rates of a shape: the peers' dense and causal kernels, and sparsek's dense case.
const DENSE_PEERS: [&str; 6] = [
    "sdpa_flash_dense",
    "sdpa_flash_causal",
    "sdpa_cudnn_dense",
    "sdpa_cudnn_causal",
    "fa4_dense",
    "fa4_causal",
];

/// The rows of one run, by case, in the order the cases first appear.
struct Cases {
    order: Vec<Case>,
    by: BTreeMap<Case, BTreeMap<String, Row>>,
}

impl Cases {
    fn new(rows: &[Row]) -> Cases {
        let mut order = Vec::new();
        let mut by: BTreeMap<Case, BTreeMap<String, Row>> = BTreeMap::new();
        for r in rows {
            let case = r.case();
            if !by.contains_key(&case) {
                order.push(case.clone());
            }
            by.entry(case)
                .or_default()
                .insert(r.r#impl.clone(), r.clone());
        }
        Cases { order, by }
    }
    /// A measured row (none with an error or no time).
    fn ok(&self, case: &Case, name: &str) -> Option<&Row> {
        self.by
            .get(case)?
            .get(name)
            .filter(|r| r.error.is_none() && r.tflops > 0.0)
    }
    /// The best dense rate of the case's shape in this run: (TFLOPS, which).
    fn best_dense(&self, case: &Case) -> Option<(f64, String)> {
        let peers = DENSE_PEERS
            .iter()
            .filter_map(|name| self.ok(case, name).map(|r| (r.tflops, name.to_string())));
        let dense_case = Case {
            mask: "dense".into(),
            bottom_right: false,
            ..case.clone()
        };
        let ours = self
            .ok(&dense_case, "sparsek")
            .map(|r| (r.tflops, "sparsek_dense".to_string()));
        peers.chain(ours).max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// A cell's TFLOPS: the number, `failed` for an error line, `—` when not run.
fn tf(r: Option<&Row>) -> String {
    match r {
        Some(r) if r.error.is_some() => "failed".to_string(),
        Some(r) => format!("{:.0}", r.tflops),
        None => "—".into(),
    }
}

/// `a ÷ b` of two measured rows, else `—`.
fn ratio(a: Option<&Row>, b: Option<&Row>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a.error.is_none() && b.error.is_none() && b.tflops > 0.0 => {
            format!("{:.2}", a.tflops / b.tflops)
        }
        _ => "—".into(),
    }
}

/// The earlier target of the multi-head rows: bf16, seq 8192, head_dim 128, causal and top-k
/// masks: ≥ 500 TFLOPS and ≥ 1.3× FlexAttention.
fn target(case: &Case, ours: Option<&Row>, flex: Option<&Row>) -> String {
    let applies = case.dtype == "bf16"
        && case.seq == 8192
        && case.seq_k == 8192
        && case.head_dim == 128
        && !case.gqa()
        && case.kv_repeated == 1
        && (case.mask == "causal" || case.mask == "topk16");
    if !applies {
        return "—".into();
    }
    let (Some(o), Some(f)) = (ours, flex) else {
        return "not measured".into();
    };
    let met = o.tflops >= 500.0 && f.tflops > 0.0 && o.tflops / f.tflops >= 1.3;
    format!("{} (≥ 500, ≥ 1.3×)", if met { "met" } else { "not met" })
}

/// The markdown tables: every case, then the grouped-query cases against issue 47's prefill
/// targets (when the run has any).
pub fn table(rows: &[Row]) -> String {
    let cases = Cases::new(rows);
    let mut out = String::from(
        "| mask | dtype | batch×heads×seq, d | kept pairs | sparsek ms | sparsek TFLOPS | FlexAttention TFLOPS | \
         sparsek ÷ Flex | SDPA flash dense / causal TFLOPS | SDPA cuDNN dense / causal TFLOPS | \
         gating ms | target |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for case in &cases.order {
        let m = &cases.by[case];
        let (ours, flex) = (m.get("sparsek"), m.get("flex"));
        let all_pairs = case.batch * case.heads * case.seq * case.seq_k;
        let share = ours.map_or("—".into(), |o| {
            format!("{:.3}", o.kept_pairs as f64 / all_pairs.max(1) as f64)
        });
        out += &format!(
            "| {} | {} | {}×{}×{}, {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {} |\n",
            case.mask_label(),
            case.dtype,
            case.batch,
            case.heads_label(),
            case.seq_label(),
            case.head_dim,
            share,
            ours.map_or("—".into(), |o| format!("{:.3}", o.ms)),
            tf(ours),
            tf(flex),
            ratio(ours, flex),
            tf(m.get("sdpa_flash_dense")),
            tf(m.get("sdpa_flash_causal")),
            tf(m.get("sdpa_cudnn_dense")),
            tf(m.get("sdpa_cudnn_causal")),
            ours.and_then(|o| o.gating_ms)
                .map_or("—".into(), |g| format!("{g:.3}")),
            target(case, ours, flex),
        );
    }
    if cases.order.iter().any(Case::gqa) {
        out += "\n";
        out += &gqa_table(&cases);
    }
    out
}

/// `met`, `not met`, or `—` (not measured) for a ratio against its floor.
fn verdict(value: Option<f64>, floor: f64) -> &'static str {
    match value {
        Some(v) if v >= floor => "met",
        Some(_) => "not met",
        None => "—",
    }
}

/// The grouped-query cases: sparsek's TFLOPS on kept pairs beside the same mask without GQA,
/// FlexAttention, SDPA's cuDNN backend on the mask, FlashAttention-4's block-sparse forward
/// and the best dense rate of the shape, with issue 47's three prefill targets.
fn gqa_table(cases: &Cases) -> String {
    let mut out = String::from(
        "Prefill with grouped-query heads (TFLOPS on kept pairs; targets where bf16, d 128, seq 8192: \
         GQA ÷ without GQA ≥ 0.95 · sparsek ÷ FA4 block-sparse ≥ 1.5 · sparsek ÷ best dense ≥ 0.8):\n\n\
         | mask | heads Q/KV | batch×seq, d | kept pairs | sparsek TFLOPS | without GQA TFLOPS | GQA ÷ without | \
         FlexAttention TFLOPS | sparsek ÷ Flex | SDPA cuDNN (mask) TFLOPS | FA4 block-sparse TFLOPS | sparsek ÷ FA4 | \
         best dense TFLOPS | sparsek ÷ best dense | targets |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut other_masks = false;
    let mut fa4_seen = false;
    for case in cases.order.iter().filter(|c| c.gqa()) {
        let m = &cases.by[case];
        let ours = m.get("sparsek");
        let plain = cases
            .by
            .get(&case.without_gqa(true))
            .or_else(|| cases.by.get(&case.without_gqa(false)))
            .and_then(|c| c.get("sparsek"));
        // Another draw of the mask (kept pairs differ): the ratio compares different masks.
        let differs = matches!((ours, plain), (Some(o), Some(p)) if o.kept_pairs != p.kept_pairs);
        other_masks |= differs;
        let fa4 = m.get("fa4_sparse");
        fa4_seen |= m.keys().any(|k| k.starts_with("fa4_"));
        let dense = cases.best_dense(case);
        let value = |r: Option<&Row>, of: Option<&Row>| match (r, of) {
            (Some(a), Some(b)) if a.error.is_none() && b.error.is_none() && b.tflops > 0.0 => {
                Some(a.tflops / b.tflops)
            }
            _ => None,
        };
        let vs_plain = value(ours, plain);
        let vs_fa4 = value(ours, fa4);
        let vs_dense = match (ours, &dense) {
            (Some(o), Some((d, _))) if o.error.is_none() && *d > 0.0 => Some(o.tflops / d),
            _ => None,
        };
        let fmt = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.2}"));
        let all_pairs = case.batch * case.heads * case.seq * case.seq_k;
        let targets = if case.prefill_target() {
            format!(
                "{} · {} · {}",
                verdict(vs_plain, 0.95),
                verdict(vs_fa4, 1.5),
                verdict(vs_dense, 0.8)
            )
        } else {
            "—".into()
        };
        out += &format!(
            "| {} | {}/{} | {}×{}, {} | {} | {} | {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            case.mask_label(),
            case.heads,
            case.heads_kv,
            case.batch,
            case.seq_label(),
            case.head_dim,
            ours.map_or("—".into(), |o| format!(
                "{:.3}",
                o.kept_pairs as f64 / all_pairs.max(1) as f64
            )),
            tf(ours),
            tf(plain),
            fmt(vs_plain),
            if differs { " †" } else { "" },
            tf(m.get("flex")),
            ratio(ours, m.get("flex")),
            tf(m.get("sdpa_cudnn_mask")),
            tf(fa4),
            fmt(vs_fa4),
            dense
                .as_ref()
                .map_or("—".into(), |(t, name)| format!("{t:.0} ({name})")),
            fmt(vs_dense),
            targets,
        );
    }
    if other_masks {
        out += "\n† the case without GQA drew another mask (kept pairs differ): run it with \
                `--repeat-kv` for the same values and mask.\n";
    }
    if !fa4_seen {
        out += "\nFlashAttention-4 was not measured in this run (flash_attn.cute not importable). \
                For reference, issue 47's H100 figures: GQA 32/8 causal seq 8k dense 517 TFLOPS \
                (cuDNN 550); its block-sparse SM90 forward 367 (BigBird 16k) and 152–196 (causal \
                window 8k) TFLOPS on kept pairs, dense 716–731.\n";
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

    /// One row of the GQA run in the timer's schema.
    fn gqa_row(
        imp: &str,
        mask: &str,
        heads_kv: u64,
        kv_repeated: u64,
        pairs: u64,
        tflops: f64,
    ) -> String {
        format!(
            r#"{{"impl":"{imp}","mask":"{mask}","dtype":"bf16","batch":2,"heads":32,"heads_kv":{heads_kv},"seq":8192,"seq_k":8192,"head_dim":128,"causal_alignment":"top_left","kv_repeated":{kv_repeated},"kept_pairs":{pairs},"ms":1.0,"tflops":{tflops}}}"#
        )
    }

    #[test]
    fn gqa_table_compares_with_the_same_mask_peers_and_dense() {
        let causal = 2_147_745_792;
        let topk = 1_073_741_824;
        let lines = [
            gqa_row("sparsek", "causal", 8, 1, causal, 600.0),
            gqa_row("sparsek", "topk16", 8, 1, topk, 560.0),
            gqa_row("sparsek", "causal", 32, 4, causal, 610.0),
            gqa_row("sparsek", "topk16", 32, 4, topk, 600.0),
            // The peers: dense rates of the GQA shape, flex and SDPA on the mask, FA4 sparse.
            gqa_row("sdpa_cudnn_dense", "causal", 8, 1, 4_294_967_296, 680.0),
            gqa_row("sdpa_cudnn_causal", "causal", 8, 1, causal, 620.0),
            gqa_row("fa4_causal", "causal", 8, 1, causal, 517.0),
            gqa_row("flex", "causal", 8, 1, causal, 400.0),
            gqa_row("sdpa_cudnn_mask", "causal", 8, 1, causal, 620.0),
            gqa_row("fa4_sparse", "causal", 8, 1, causal, 300.0),
            gqa_row("sdpa_cudnn_dense", "topk16", 8, 1, 4_294_967_296, 680.0),
            r#"{"impl":"fa4_sparse","mask":"topk16","dtype":"bf16","batch":2,"heads":32,"heads_kv":8,"seq":8192,"seq_k":8192,"head_dim":128,"causal_alignment":"top_left","kv_repeated":1,"error":"no"}"#.to_string(),
        ];
        let rows = parse(&lines.join("\n"));
        assert_eq!(rows.len(), lines.len());
        let t = table(&rows);
        // The first table: 4 cases, the GQA heads and the repeated K/V labelled.
        assert!(
            t.contains("| causal | bf16 | 2×32/8×8192, 128 | 0.500 |"),
            "{t}"
        );
        assert!(
            t.contains("| causal | bf16 | 2×32/32 (K, V ×4)×8192, 128 | 0.500 |"),
            "{t}"
        );
        let gqa: Vec<&str> = t
            .lines()
            .skip_while(|l| !l.starts_with("Prefill with grouped-query heads"))
            .filter(|l| l.starts_with("| causal") || l.starts_with("| topk16"))
            .collect();
        assert_eq!(gqa.len(), 2, "{t}");
        // causal: 600 ÷ 610 = 0.98; flex 1.50; SDPA 620; FA4 300 → 2.00; best dense 680 (cuDNN
        // dense) → 0.88: all three met.
        assert!(gqa[0].starts_with("| causal | 32/8 | 2×8192, 128 | 0.500 | 600 | 610 | 0.98 | 400 | 1.50 | 620 | 300 | 2.00 | 680 (sdpa_cudnn_dense) | 0.88 | met · met · met |"), "{}", gqa[0]);
        // topk16: 560 ÷ 600 = 0.93 (not met); FA4 failed; 560 ÷ 680 = 0.82.
        assert!(gqa[1].starts_with("| topk16 | 32/8 | 2×8192, 128 | 0.250 | 560 | 600 | 0.93 | — | — | — | failed | — | 680 (sdpa_cudnn_dense) | 0.82 | not met · — · met |"), "{}", gqa[1]);
        // FA4 rows exist: no quoted figures; the same masks: no dagger.
        assert!(!t.contains("not measured in this run"), "{t}");
        assert!(!t.contains('†'), "{t}");
    }

    #[test]
    fn gqa_table_without_fa4_quotes_the_issue_and_flags_other_masks() {
        let lines = [
            gqa_row("sparsek", "topk16_causal", 8, 1, 900, 550.0),
            gqa_row("sparsek", "topk16_causal", 32, 1, 901, 560.0),
        ];
        let t = table(&parse(&lines.join("\n")));
        assert!(t.contains("| 550 | 560 | 0.98 † |"), "{t}");
        assert!(
            t.contains("† the case without GQA drew another mask"),
            "{t}"
        );
        assert!(
            t.contains("FlashAttention-4 was not measured in this run"),
            "{t}"
        );
        // No dense rate: that target is not measured.
        assert!(t.contains("| met · — · — |"), "{t}");
    }

    #[test]
    fn older_lines_and_bottom_right_keys() {
        // An older line (no heads_kv, seq_k, alignment) is multi-head, top-left, square.
        let old = r#"{"impl":"sparsek","mask":"causal","dtype":"bf16","batch":4,"heads":16,"seq":8192,"head_dim":128,"kept_pairs":1,"ms":1.0,"tflops":500.0}"#;
        let r = &parse(old)[0];
        let c = r.case();
        assert_eq!(
            (c.heads_kv, c.seq_k, c.bottom_right, c.kv_repeated),
            (16, 8192, false, 1)
        );
        // Its JSON stays as it was (no new fields written).
        let back = serde_json::to_string(r).unwrap();
        assert!(
            !back.contains("heads_kv") && !back.contains("seq_k"),
            "{back}"
        );
        // A bottom-right chunk of queries against a longer KV cache: its own case, labelled.
        let chunk = r#"{"impl":"sparsek","mask":"causal","dtype":"bf16","batch":2,"heads":32,"heads_kv":8,"seq":2048,"seq_k":8192,"head_dim":128,"causal_alignment":"bottom_right","kv_repeated":1,"kept_pairs":1,"ms":1.0,"tflops":400.0}"#;
        let t = table(&parse(&format!("{old}\n{chunk}")));
        assert!(
            t.contains("| causal (bottom-right) | bf16 | 2×32/8×2048/8192, 128 |"),
            "{t}"
        );
        // Not a prefill-target shape: no verdicts.
        assert!(
            t.contains("| — |\n")
                && t.contains("| causal (bottom-right) | 32/8 | 2×2048/8192, 128 |"),
            "{t}"
        );
    }
}
