//! The checks the operations share, below both them and the device layer: a dense view fits
//! its buffer, a scale buffer holds what its kind needs, dimensions agree, no FP8 operand
//! where the FP8 rules do not apply, and what the generated rule modules compute with
//! ([`rules`]). Each operation keeps its own checks next to it (`spmm/check.rs`,
//! `sddmm/check.rs`, `attention/check.rs`): the rules its table generates (`rules/<op>.toml`
//! into `src/<op>/rules.rs`) and what only Rust's operands carry (lengths, locations).

use crate::dense::DenseShape;
use crate::element::Element;
use crate::error::Error;
use crate::options::Backend;
use crate::scale::ScaleKind;

/// The view fits its buffer and its rows (columns) do not overlap.
pub(crate) fn check_view(
    operand: &'static str,
    shape: &DenseShape,
    len: usize,
) -> Result<(), Error> {
    let min = shape.contiguous_extent().max(1);
    if shape.ld < min {
        return Err(Error::LeadingDimension {
            operand,
            ld: shape.ld,
            min,
        });
    }
    // A view whose extent overflows usize fits no buffer: say so, not "needs usize::MAX".
    let needed = shape.required_len().ok_or(Error::SizeOverflow {
        operand,
        rows: shape.rows,
        cols: shape.cols,
        ld: shape.ld,
    })?;
    if len < needed {
        return Err(Error::BufferTooSmall {
            operand,
            needed,
            got: len,
        });
    }
    Ok(())
}

/// `Error::ShapeMismatch` unless a dimension `got` equals what it must (`what` names both).
pub(crate) fn same(what: &'static str, expected: usize, got: usize) -> Result<(), Error> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            what,
            expected,
            got,
        })
    }
}

/// No FP8 operand where the FP8 rules do not apply (an FP8 value means `stored * scale`): the
/// SDDMM, attention, and a product whose A is read as it is (no FP8 A with its scales).
pub(crate) fn refuse_fp8<T: Element, O: Element>(backend: Backend) -> Result<(), Error> {
    let (input, output) = (T::DTYPE, O::DTYPE);
    if input.is_fp8() || output.is_fp8() {
        return Err(Error::UnsupportedTypes {
            backend,
            input,
            output,
        });
    }
    Ok(())
}

/// `ScaleLength` unless `got` values are what `kind` needs for `parts` blocks or columns.
/// `device`: a buffer for no value may hold 1 (CUDA has no empty allocations).
pub(crate) fn check_scale_len(
    operand: &'static str,
    kind: ScaleKind,
    parts: usize,
    got: usize,
    device: bool,
) -> Result<(), Error> {
    let expected = kind.count(parts);
    if kind == ScaleKind::None || got == expected || (device && expected == 0 && got == 1) {
        Ok(())
    } else {
        Err(Error::ScaleLength {
            operand,
            kind,
            expected,
            got,
        })
    }
}

/// What the generated rule modules (`src/<op>/rules.rs`, from `rules/<op>.toml` by
/// `scripts/gen-rules.py`) compute with: 128-bit integers (every `usize` fits), saturating, so
/// no input overflows or panics; `x / 0 = 0` and `x % 0 = x` as the generator's own evaluator
/// and the C++ side (`cpp/core/rules.hpp`) define them.
pub(crate) mod rules {
    #[allow(dead_code)]
    pub(crate) fn add(a: i128, b: i128) -> i128 {
        a.saturating_add(b)
    }

    #[allow(dead_code)]
    pub(crate) fn sub(a: i128, b: i128) -> i128 {
        a.saturating_sub(b)
    }

    #[allow(dead_code)]
    pub(crate) fn mul(a: i128, b: i128) -> i128 {
        a.saturating_mul(b)
    }

    #[allow(dead_code)]
    pub(crate) fn div(a: i128, b: i128) -> i128 {
        if b == 0 {
            0
        } else {
            a.saturating_div(b)
        }
    }

    #[allow(dead_code)]
    pub(crate) fn rem(a: i128, b: i128) -> i128 {
        a.checked_rem(b).unwrap_or(if b == 0 { a } else { 0 })
    }

    /// A size for an error's fields (a rule's sizes are `usize` values or simple functions of
    /// them; anything outside `usize` saturates).
    pub(crate) fn size(x: i128) -> usize {
        usize::try_from(x.max(0)).unwrap_or(usize::MAX)
    }

    /// A size as a rule reads it.
    pub(crate) fn int(x: usize) -> i128 {
        x as i128
    }

    /// The golden cases (`rules/<op>.golden`): one per line, `rust=<rule or ok> cpp=<rule or
    /// ok>` then `fact=value` words.
    #[cfg(test)]
    pub(crate) mod golden {
        use std::collections::HashMap;

        use crate::element::DType;
        use crate::options::Backend;
        use crate::scale::ScaleKind;

        pub(crate) struct Case {
            /// The first rule Rust's side breaks (`None`: every rule holds).
            pub rust: Option<String>,
            /// The facts by name.
            pub v: Values,
        }

        pub(crate) struct Values(HashMap<String, String>);

        impl Values {
            fn get(&self, name: &str) -> &str {
                self.0
                    .get(name)
                    .unwrap_or_else(|| panic!("a golden case without {name}"))
            }
            pub(crate) fn int(&self, name: &str) -> i128 {
                self.get(name).parse().expect("an integer")
            }
            pub(crate) fn bool(&self, name: &str) -> bool {
                self.get(name).parse().expect("true or false")
            }
            pub(crate) fn dtype(&self, name: &str) -> DType {
                match self.get(name) {
                    "f16" => DType::F16,
                    "bf16" => DType::Bf16,
                    "f32" => DType::F32,
                    "e4m3" => DType::E4M3,
                    "e5m2" => DType::E5M2,
                    other => panic!("dtype {other}"),
                }
            }
            pub(crate) fn scale(&self, name: &str) -> ScaleKind {
                match self.get(name) {
                    "none" => ScaleKind::None,
                    "per_tensor" => ScaleKind::PerTensor,
                    "per_block" => ScaleKind::PerBlock,
                    "per_column" => ScaleKind::PerColumn,
                    other => panic!("scale kind {other}"),
                }
            }
            pub(crate) fn backend(&self, name: &str) -> Backend {
                match self.get(name) {
                    "auto" => Backend::Auto,
                    "cpu" => Backend::Cpu,
                    "wmma" => Backend::Wmma,
                    "hopper" => Backend::Hopper,
                    "decode" => Backend::Decode,
                    other => panic!("backend {other}"),
                }
            }
        }

        pub(crate) fn cases(text: &str) -> impl Iterator<Item = Case> + '_ {
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .map(|line| {
                    let words: HashMap<String, String> = line
                        .split_whitespace()
                        .map(|w| {
                            let (k, v) = w.split_once('=').expect("name=value");
                            (k.to_string(), v.to_string())
                        })
                        .collect();
                    let rust = words.get("rust").filter(|r| *r != "ok").cloned();
                    Case {
                        rust,
                        v: Values(words),
                    }
                })
        }
    }
}
