#!/usr/bin/env python3
"""The validation rules both entries share, written once: rules/<op>.toml generates
src/<op>/rules.rs (the Rust entry's), cpp/<op>/rules.hpp (the C++ entry's) and
rules/<op>.golden (cases both sides replay: the Rust unit test in the generated module and
tests/cpp/rules_golden.cpp).

    python3 scripts/gen-rules.py           # write every generated file
    python3 scripts/gen-rules.py --check   # fail when one is not what the tables generate (CI)

A table (TOML):
    operation = "spmm"          # the folder: src/<operation>/, cpp/<operation>/
    rust_module = "src/format/bsr_rules.rs"   # optional: other paths than the folder's
    cpp_header = "cpp/core/bsr_rules.hpp"     #   rules.rs / rules.hpp, another Rust error
    rust_error = "BsrError"                   #   type than Error, another C++ namespace
    cpp_namespace = "bsr_rules"               #   than <operation>_rules
    doc = "..."
    [facts]                     # what the rules read; each entry fills them from its operands
    name = { type = "int" | "bool" | "dtype" | "scale" | "backend", doc = "...",
             rust_only = true }  # a fact only Rust has (no C++ field; its rules Rust's only)
    [[example]]                 # facts every rule accepts (the golden cases mutate them)
    [[case]]                    # golden cases the draws rarely reach: example 0 with these
                                # facts changed
    [[group]]                   # checked in order; an entry calls each group where its own
    name = "shapes"             # checks fit in between (C++: its overlaps before "types")
    [[group.rule]]
    id = "b_rows"
    when = "!transpose"         # optional: the rule applies only then
    require = "b_rows == k"     # what must hold
    error = { kind = ..., ... } # what a violation is (KINDS below: Rust's Error variant and
                                # C++'s Status and message, worded alike)

Expressions: facts, integer literals, the dtypes f16 bf16 f32 e4m3 e5m2, the scale kinds none
per_tensor per_block per_column, ! && || == != < <= > >= + - * / %, parentheses and the
predicates is_fp8(t), is_half(t). Integers are 128-bit on both sides, the arithmetic
saturating, x / 0 = 0 and x % 0 = x: no input panics or overflows. Evaluated here too, for the
golden cases.
"""
import argparse
import pathlib
import random
import re
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLES = ROOT / "rules"

DTYPES = {"f16": ("F16", "F16"), "bf16": ("Bf16", "BF16"), "f32": ("F32", "F32"),
          "e4m3": ("E4M3", "E4M3"), "e5m2": ("E5M2", "E5M2")}
SCALES = {"none": "None", "per_tensor": "PerTensor", "per_block": "PerBlock", "per_column": "PerColumn"}
BACKENDS = {"auto": ("Auto", "Auto"), "cpu": ("Cpu", None), "wmma": ("Wmma", "Wmma"),
            "hopper": ("Hopper", "Hopper"), "decode": ("Decode", "Decode")}
FP8 = {"e4m3", "e5m2"}
HALF = {"f16", "bf16"}
I128 = (-(1 << 127), (1 << 127) - 1)

# kind: (C++ status, the fields it takes). Messages are the Rust Display's (src/error.rs).
KINDS = {
    "shape": ("InvalidArgument", ["what", "expected", "got"]),
    "gated": ("InvalidArgument", ["reason"]),
    "invalid": ("InvalidArgument", ["message"]),
    "scales_not_taken": ("InvalidArgument", ["operand", "scales", "reason"]),
    "unsupported_types": ("NotSupported", []),
    "operand_types": ("NotSupported", ["reason"]),
    "fp8_types": ("NotSupported", ["reason"]),
    "not_supported": ("NotSupported", ["reason"]),
    # A BSR matrix's grid (rules/bsr.toml, whose Rust error type is BsrError).
    "head_groups": ("InvalidArgument", ["q_heads", "kv_heads"]),
    "zero_block": ("InvalidArgument", []),
    "block_side": ("InvalidArgument", ["dim", "side"]),
    "not_multiple": ("InvalidArgument", ["dim", "len", "block"]),
    "index_overflow": ("InvalidArgument", ["what", "value"]),
}
OPTIONAL = {"operand_types": ["bias"]}


# ---- expressions ----------------------------------------------------------------------------
TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(&&|\|\||==|!=|<=|>=|[!<>+\-*/%(),]))")
BINARY = [["||"], ["&&"], ["==", "!="], ["<", "<=", ">", ">="], ["+", "-"], ["*", "/", "%"]]


def tokenize(text):
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SystemExit(f"gen-rules: cannot read {text[pos:]!r} in {text!r}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


class Parser:
    """Expressions into (op, type, children) trees, type-checked against the facts."""

    def __init__(self, text, facts):
        self.toks, self.i, self.facts, self.text = tokenize(text), 0, facts, text

    def fail(self, why):
        raise SystemExit(f"gen-rules: {why} in {self.text!r}")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want=None):
        t = self.peek()
        if t is None or (want is not None and t != want):
            self.fail(f"expected {want or 'more'}, got {t}")
        self.i += 1
        return t

    def parse(self, want_type=None):
        e = self.binary(0)
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()}")
        if want_type and e[1] != want_type:
            self.fail(f"a {e[1]} where a {want_type} is needed")
        return e

    def binary(self, level):
        if level == len(BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in BINARY[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = self.typed(op, left, right)
        return left

    def typed(self, op, l, r):
        if op in ("&&", "||"):
            if l[1] != "bool" or r[1] != "bool":
                self.fail(f"{op} of {l[1]} and {r[1]}")
            return (op, "bool", [l, r])
        if op in ("==", "!="):
            if l[1] != r[1]:
                self.fail(f"{op} of {l[1]} and {r[1]}")
            return (op, "bool", [l, r])
        if l[1] != "int" or r[1] != "int":
            self.fail(f"{op} of {l[1]} and {r[1]}")
        return (op, "bool" if op in ("<", "<=", ">", ">=") else "int", [l, r])

    def unary(self):
        if self.peek() == "!":
            self.take()
            e = self.unary()
            if e[1] != "bool":
                self.fail("! of a non-bool")
            return ("!", "bool", [e])
        if self.peek() == "-":
            self.take()
            e = self.unary()
            if e[1] != "int":
                self.fail("- of a non-int")
            return ("neg", "int", [e])
        return self.primary()

    def primary(self):
        t = self.take()
        if t == "(":
            e = self.binary(0)
            self.take(")")
            return e
        if t.isdigit():
            return ("lit", "int", int(t))
        if t in ("is_fp8", "is_half"):
            self.take("(")
            arg = self.binary(0)
            self.take(")")
            if arg[1] != "dtype":
                self.fail(f"{t} of a {arg[1]}")
            return (t, "bool", [arg])
        if t in DTYPES:
            return ("dtype", "dtype", t)
        if t in SCALES:
            return ("scale", "scale", t)
        if t in ("true", "false"):
            return ("lit", "bool", t == "true")
        if t in self.facts:
            return ("fact", self.facts[t]["type"], t)
        self.fail(f"unknown name {t}")


def facts_of(expr):
    if expr[0] == "fact":
        return {expr[2]}
    if isinstance(expr[2], list):
        return set().union(*(facts_of(c) for c in expr[2]))
    return set()


def sat(x):
    return max(I128[0], min(I128[1], x))


def evaluate(expr, f):
    op, _, a = expr
    if op == "lit":
        return a
    if op in ("dtype", "scale"):
        return a
    if op == "fact":
        return f[a]
    if op == "!":
        return not evaluate(a[0], f)
    if op == "neg":
        return sat(-evaluate(a[0], f))
    if op == "is_fp8":
        return evaluate(a[0], f) in FP8
    if op == "is_half":
        return evaluate(a[0], f) in HALF
    x = evaluate(a[0], f)
    if op == "&&":
        return x and evaluate(a[1], f)
    if op == "||":
        return x or evaluate(a[1], f)
    y = evaluate(a[1], f)
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    if op == "+":
        return sat(x + y)
    if op == "-":
        return sat(x - y)
    if op == "*":
        return sat(x * y)
    if op == "/":
        if y == 0:
            return 0
        q = abs(x) // abs(y)  # truncating, as Rust and C++ divide
        return sat(q if (x >= 0) == (y >= 0) else -q)
    if op == "%":
        if y == 0:
            return x
        r = abs(x) % abs(y)
        return r if x >= 0 else -r
    raise AssertionError(op)


ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem"}


def emit(expr, lang, top=False):
    """Rust (lang "rs") or C++ ("cpp") text of an expression over `f`."""
    op, typ, a = expr
    if op == "lit":
        if typ == "bool":
            return "true" if a else "false"
        if lang == "rs":
            return f"{a}"
        if a >= 1 << 64:
            raise SystemExit(f"gen-rules: the literal {a} does not fit 64 bits")
        return f"Int({a}ull)" if a > (1 << 63) - 1 else f"Int({a})"
    if op == "dtype":
        return f"DType::{DTYPES[a][0 if lang == 'rs' else 1]}"
    if op == "scale":
        return f"ScaleKind::{SCALES[a]}"
    if op == "fact":
        return f"f.{a}" if lang == "rs" or typ != "int" else f"Int(f.{a})"
    if op == "!":
        return "!" + emit(a[0], lang)
    if op == "neg":
        return f"sub(0, {emit(a[0], lang, True)})" if lang == "rs" else f"sub(Int(0), {emit(a[0], lang, True)})"
    if op in ("is_fp8", "is_half"):
        return f"{emit(a[0], lang)}.{op}()" if lang == "rs" else f"{op}({emit(a[0], lang, True)})"
    if op in ARITH:
        return f"{ARITH[op]}({emit(a[0], lang, True)}, {emit(a[1], lang, True)})"
    text = f"{emit(a[0], lang)} {op} {emit(a[1], lang)}"
    return text if top else f"({text})"


# ---- tables ---------------------------------------------------------------------------------
class Table:
    def __init__(self, path):
        self.path = path
        t = tomllib.loads(path.read_text())
        self.op = t["operation"]
        self.doc = t.get("doc", "")
        # Where the generated files go (an operation's folder unless the table says), the
        # Rust error type its rules return and the C++ namespace.
        self.rust_path = t.get("rust_module", f"src/{self.op}/rules.rs")
        self.cpp_path = t.get("cpp_header", f"cpp/{self.op}/rules.hpp")
        self.rust_error = t.get("rust_error", "Error")
        self.cpp_ns = t.get("cpp_namespace", f"{self.op}_rules")
        self.facts = t["facts"]
        for name, fact in self.facts.items():
            if fact["type"] not in ("int", "bool", "dtype", "scale", "backend"):
                raise SystemExit(f"gen-rules: {path.name}: fact {name} has type {fact['type']}")
        self.examples = t.get("example", [])
        if not self.examples:
            raise SystemExit(f"gen-rules: {path.name}: no [[example]]")
        # Cases the random draws rarely reach: example 0 with these facts changed.
        self.cases = [dict(self.examples[0], **c) for c in t.get("case", [])]
        self.groups = []
        ids = set()
        for g in t["group"]:
            rules = []
            for r in g["rule"]:
                if r["id"] in ids:
                    raise SystemExit(f"gen-rules: {path.name}: rule {r['id']} twice")
                ids.add(r["id"])
                rule = dict(r)
                rule["when_e"] = Parser(r["when"], self.facts).parse("bool") if "when" in r else None
                rule["require_e"] = Parser(r["require"], self.facts).parse("bool")
                err = dict(r["error"])
                kind = err.get("kind")
                if kind not in KINDS:
                    raise SystemExit(f"gen-rules: {path.name}: rule {r['id']}: error kind {kind}")
                for field in KINDS[kind][1]:
                    if field not in err:
                        raise SystemExit(f"gen-rules: {path.name}: rule {r['id']}: {kind} needs {field}")
                for field in ("expected", "got", "side", "len", "block", "value", "q_heads", "kv_heads"):
                    if field in err:
                        err[field + "_e"] = Parser(err[field], self.facts).parse("int")
                if "scales" in err:
                    err["scales_e"] = Parser(err["scales"], self.facts).parse("scale")
                for field in ("bias", "input", "output"):
                    if field in err:
                        err[field + "_e"] = Parser(err[field], self.facts).parse("dtype")
                rule["error"] = err
                used = set()
                for e in [rule["when_e"], rule["require_e"]] + [v for key, v in err.items() if key.endswith("_e")]:
                    if e is not None:
                        used |= facts_of(e)
                if kind == "unsupported_types":
                    used |= {"backend"} | ({"a"} if "input" not in err else set()) | ({"c"} if "output" not in err else set())
                if kind in ("operand_types", "fp8_types"):
                    used |= {"a", "b", "c"}
                if kind == "not_supported":
                    used |= {"backend"}
                if kind == "zero_block":
                    used |= {"bm", "bk"}
                missing = used - set(self.facts)
                if missing:
                    raise SystemExit(f"gen-rules: {path.name}: rule {r['id']} reads {sorted(missing)}, no facts")
                rule["rust_only"] = any(self.facts[x].get("rust_only") for x in used)
                rules.append(rule)
            self.groups.append({"name": g["name"], "doc": g.get("doc", ""), "rules": rules})
        for i, example in enumerate(self.examples):
            for name in self.facts:
                if name not in example:
                    raise SystemExit(f"gen-rules: {path.name}: example {i} lacks {name}")
            if self.violation(example, rust=True) is not None:
                raise SystemExit(f"gen-rules: {path.name}: example {i} breaks {self.violation(example, rust=True)}")

    def rules(self, rust):
        return [r for g in self.groups for r in g["rules"] if rust or not r["rust_only"]]

    def violation(self, f, rust):
        for r in self.rules(rust):
            if r["when_e"] is not None and not evaluate(r["when_e"], f):
                continue
            if not evaluate(r["require_e"], f):
                return r["id"]
        return None

    def cpp_facts(self):
        return {n: x for n, x in self.facts.items() if not x.get("rust_only")}


def camel(s):
    return "".join(p.capitalize() for p in s.split("_"))


def rs_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cpp_str(s):
    # Non-ASCII as UTF-8 bytes is fine in a C++ string literal; escape quotes and backslashes.
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def wrap_doc(text, prefix, width=100):
    """`text` as comment lines starting with `prefix`, at most `width` wide."""
    lines, line = [], prefix
    for w in text.split():
        if len(line) + 1 + len(w) > width and line != prefix:
            lines.append(line)
            line = prefix
        line += " " + w
    if line != prefix:
        lines.append(line)
    return "\n".join(lines)


NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def negate(expr):
    """The expression's negation, without a double `!`."""
    op, typ, a = expr
    if op == "!":
        return a[0]
    if op in NEGATED:
        return (NEGATED[op], typ, a)
    return ("!", "bool", [expr])


HEADER = "@generated by scripts/gen-rules.py from rules/{op}.toml: edit the table, then run `python3 scripts/gen-rules.py` (CI checks this file is what the table generates)."

RS_TYPES = {"int": "i128", "bool": "bool", "dtype": "DType", "scale": "ScaleKind", "backend": "Backend"}
CPP_TYPES = {"int": "int64_t", "bool": "bool", "dtype": "DType", "scale": "ScaleKind", "backend": "Backend"}
CPP_DEFAULTS = {"int": "0", "bool": "false", "dtype": "DType::F16", "scale": "ScaleKind::None",
                "backend": "Backend::Auto"}


def rust_error(rule):
    e = rule["error"]
    kind = e["kind"]
    if kind == "shape":
        return (f"Error::ShapeMismatch {{ what: {rs_str(e['what'])}, expected: size({emit(e['expected_e'], 'rs', True)}), "
                f"got: size({emit(e['got_e'], 'rs', True)}) }}")
    if kind == "gated":
        return f"Error::Gated({rs_str(e['reason'])})"
    if kind == "invalid":
        return f"Error::InvalidArgument({rs_str(e['message'])}.into())"
    if kind == "scales_not_taken":
        return (f"Error::ScalesNotTaken {{ operand: {rs_str(e['operand'])}, kind: {emit(e['scales_e'], 'rs', True)}, "
                f"reason: {rs_str(e['reason'])} }}")
    if kind == "unsupported_types":
        i = emit(e["input_e"], "rs", True) if "input_e" in e else "f.a"
        o = emit(e["output_e"], "rs", True) if "output_e" in e else "f.c"
        return f"Error::UnsupportedTypes {{ backend: f.backend, input: {i}, output: {o} }}"
    if kind == "head_groups":
        return (f"Error::HeadGroups {{ q_heads: size({emit(e['q_heads_e'], 'rs', True)}), "
                f"kv_heads: size({emit(e['kv_heads_e'], 'rs', True)}) }}")
    if kind == "operand_types":
        bias = f"Some({emit(e['bias_e'], 'rs', True)})" if "bias_e" in e else "None"
        return f"Error::OperandTypes {{ a: f.a, b: f.b, c: f.c, bias: {bias}, reason: {rs_str(e['reason'])} }}"
    if kind == "fp8_types":
        return f"Error::Fp8Types {{ a: f.a, b: f.b, c: f.c, reason: {rs_str(e['reason'])} }}"
    if kind == "not_supported":
        return f"Error::NotSupported {{ backend: f.backend, reason: {rs_str(e['reason'])}.into() }}"
    if kind == "zero_block":
        return "BsrError::ZeroSizedBlock { bm: size(f.bm), bk: size(f.bk) }"
    if kind == "block_side":
        return f"BsrError::BlockSideOverflow {{ dim: {rs_str(e['dim'])}, side: size({emit(e['side_e'], 'rs', True)}) }}"
    if kind == "not_multiple":
        return (f"BsrError::NotBlockMultiple {{ dim: {rs_str(e['dim'])}, len: size({emit(e['len_e'], 'rs', True)}), "
                f"block: size({emit(e['block_e'], 'rs', True)}) }}")
    if kind == "index_overflow":
        return f"BsrError::IndexOverflow {{ what: {rs_str(e['what'])}, value: size({emit(e['value_e'], 'rs', True)}) as u128 }}"
    raise AssertionError(kind)


def cpp_error(rule):
    e = rule["error"]
    kind = e["kind"]
    status = "Status::" + KINDS[kind][0]
    if kind == "shape":
        return (f"make_result({status}, \"%s: %lld given, %lld expected\", {cpp_str(e['what'])}, "
                f"(long long)clamp({emit(e['got_e'], 'cpp', True)}), (long long)clamp({emit(e['expected_e'], 'cpp', True)}))")
    if kind == "gated":
        return f"make_result({status}, \"gated epilogue: %s\", {cpp_str(e['reason'])})"
    if kind == "invalid":
        return f"make_result({status}, \"invalid argument: %s\", {cpp_str(e['message'])})"
    if kind == "scales_not_taken":
        return (f"make_result({status}, \"%s: %s scales are not taken here: %s\", {cpp_str(e['operand'])}, "
                f"scale_kind_name({emit(e['scales_e'], 'cpp', True)}), {cpp_str(e['reason'])})")
    if kind == "unsupported_types":
        i = emit(e["input_e"], "cpp", True) if "input_e" in e else "f.a"
        o = emit(e["output_e"], "cpp", True) if "output_e" in e else "f.c"
        return (f"make_result({status}, \"%s backend does not take %s inputs with %s output\", backend_debug_name(f.backend), "
                f"dtype_name({i}), dtype_name({o}))")
    if kind == "head_groups":
        return (f"make_result({status}, \"K and V have %lld heads: they must divide Q's %lld heads (grouped-query "
                f"attention)\", (long long)clamp({emit(e['kv_heads_e'], 'cpp', True)}), "
                f"(long long)clamp({emit(e['q_heads_e'], 'cpp', True)}))")
    if kind == "operand_types":
        return (f"make_result({status}, \"a product of %s A, %s B and %s C: %s\", dtype_name(f.a), dtype_name(f.b), "
                f"dtype_name(f.c), {cpp_str(e['reason'])})")
    if kind == "fp8_types":
        return (f"make_result({status}, \"an FP8 product of %s A, %s B and %s C: %s\", dtype_name(f.a), "
                f"dtype_name(f.b), dtype_name(f.c), {cpp_str(e['reason'])})")
    if kind == "not_supported":
        return f"make_result({status}, \"%s\", {cpp_str(e['reason'])})"
    if kind == "zero_block":
        return (f"make_result({status}, \"block shape %lldx%lld has a zero side\", (long long)clamp(Int(f.bm)), "
                f"(long long)clamp(Int(f.bk)))")
    if kind == "block_side":
        return (f"make_result({status}, \"block side %s = %lld exceeds 2147483647, the largest block side the kernels "
                f"take (i32)\", {cpp_str(e['dim'])}, (long long)clamp({emit(e['side_e'], 'cpp', True)}))")
    if kind == "not_multiple":
        return (f"make_result({status}, \"%s = %lld is not a multiple of the block side %lld\", {cpp_str(e['dim'])}, "
                f"(long long)clamp({emit(e['len_e'], 'cpp', True)}), (long long)clamp({emit(e['block_e'], 'cpp', True)}))")
    if kind == "index_overflow":
        return (f"make_result({status}, \"%s = %lld overflows the i32 indices the kernels use\", {cpp_str(e['what'])}, "
                f"(long long)clamp({emit(e['value_e'], 'cpp', True)}))")
    raise AssertionError(kind)


def condition(rule, lang):
    broken = negate(rule["require_e"])
    if rule["when_e"] is None:
        return emit(broken, lang, True)
    return f"{emit(rule['when_e'], lang)} && {emit(broken, lang)}"


def gen_rust(t):
    out = [wrap_doc(HEADER.format(op=t.op), "//!"), "//!"]
    out.append(wrap_doc(t.doc, "//!"))
    out += [
        "",
        "#![allow(clippy::nonminimal_bool)]",
        "",
        "@HELPERS@",
        "#[allow(unused_imports)]",
        "use crate::element::DType;",
        f"use crate::error::{t.rust_error};",
        "#[allow(unused_imports)]",
        "use crate::options::Backend;",
        "#[allow(unused_imports)]",
        "use crate::scale::ScaleKind;",
        "",
        "/// What the rules read, filled by the entry from its operands.",
        "#[derive(Debug, Clone, Copy)]",
        "pub(crate) struct Facts {",
    ]
    for name, fact in t.facts.items():
        doc = fact.get("doc", name)
        out.append(wrap_doc(doc[0].upper() + doc[1:] + ".", "    ///"))
        out.append(f"    pub {name}: {RS_TYPES[fact['type']]},")
    out += ["}", "", "/// The table's rules.", "#[derive(Debug, Clone, Copy, PartialEq, Eq)]", "pub(crate) enum Rule {"]
    for r in t.rules(True):
        out.append(f"    /// `{r.get('when', 'always')}` ⇒ `{r['require']}`.")
        out.append(f"    {camel(r['id'])},")
    out += ["}", "", "impl Rule {", "    /// The rule's name in the table.", "    #[allow(dead_code)]",
            "    pub(crate) const fn name(self) -> &'static str {", "        match self {"]
    for r in t.rules(True):
        out.append(f"            Rule::{camel(r['id'])} => {rs_str(r['id'])},")
    out += ["        }", "    }", "", "    /// The error a violation of the rule is.",
            "    #[allow(unused_variables)]",
            "    pub(crate) fn error(self, f: &Facts) -> " + t.rust_error + " {", "        match self {"]
    for r in t.rules(True):
        out.append(f"            Rule::{camel(r['id'])} => {rust_error(r)},")
    out += ["        }", "    }", "}", ""]
    for g in t.groups:
        out.append(wrap_doc(g["doc"] + " The first rule broken, in the table's order.", "///"))
        out.append(f"pub(crate) fn {g['name']}(f: &Facts) -> Result<(), {t.rust_error}> {{")
        out.append(f"    {g['name']}_rule(f).map_or(Ok(()), |r| Err(r.error(f)))")
        out.append("}")
        out.append("")
        out.append(f"/// The first rule of `{g['name']}` that `f` breaks.")
        out.append(f"pub(crate) fn {g['name']}_rule(f: &Facts) -> Option<Rule> {{")
        for r in g["rules"]:
            out.append(f"    if {condition(r, 'rs')} {{")
            out.append(f"        return Some(Rule::{camel(r['id'])});")
            out.append("    }")
        out.append("    None")
        out.append("}")
        out.append("")
    out.append("/// The first rule `f` breaks, over every group in order.")
    out.append("#[allow(dead_code)]")
    out.append("pub(crate) fn first_rule(f: &Facts) -> Option<Rule> {")
    out.append("    " + f"{t.groups[0]['name']}_rule(f)" + "".join(f".or_else(|| {g['name']}_rule(f))" for g in t.groups[1:]))
    out.append("}")
    out += [
        "",
        "#[cfg(test)]",
        "mod golden {",
        "    use super::*;",
        "    use crate::check::rules::golden::{cases, Case};",
        "",
        f"    /// rules/{t.op}.golden: the table's verdict on each case, as scripts/gen-rules.py",
        "    /// evaluated it; this side must agree.",
        "    #[test]",
        "    fn the_table_decides() {",
        f"        let text = include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/rules/{t.op}.golden\"));",
        "        let mut n = 0;",
        "        for Case { rust, v, .. } in cases(text) {",
        "            let f = Facts {",
    ]
    for name, fact in t.facts.items():
        out.append(f"                {name}: v.{fact['type']}({rs_str(name)}),")
    out += [
        "            };",
        "            assert_eq!(first_rule(&f).map(Rule::name), rust.as_deref(), \"{f:?}\");",
        "            if let Some(r) = first_rule(&f) {",
        "                assert!(matches!(r.error(&f).to_string().len(), 1..), \"{f:?}\");",
        "            }",
        "            n += 1;",
        "        }",
        "        assert!(n > 100, \"{n} cases\");",
        "    }",
        "}",
    ]
    text = "\n".join(out) + "\n"
    helpers = sorted(set(re.findall(r"\b(add|sub|mul|div|rem|size)\(", text)))
    use = f"use crate::check::rules::{{{', '.join(helpers)}}};" if helpers else ""
    return text.replace("@HELPERS@", use)


def gen_cpp(t):
    facts = t.cpp_facts()
    ns = t.cpp_ns
    out = [wrap_doc(HEADER.format(op=t.op), "//"), wrap_doc(t.doc, "//"), "#pragma once", "",
           "#include \"core/rules.hpp\"", "", f"namespace sparsek::detail::{ns} {{", "",
           "using namespace ::sparsek::detail::rules;", "",
           "// What the rules read, filled by the entry from its views.", "struct Facts {"]
    for name, fact in facts.items():
        out.append(f"  {CPP_TYPES[fact['type']]} {name} = {CPP_DEFAULTS[fact['type']]};  // {fact.get('doc', name)}")
    out += ["};", "", "enum class Rule : int32_t {", "  Ok = 0,"]
    for r in t.rules(False):
        out.append(f"  {camel(r['id'])},  // {r.get('when', 'always')} => {r['require']}")
    out += ["};", "", "// The rule's name in the table (\"\" for Ok).", "inline const char* name(Rule r) {",
            "  switch (r) {", "    case Rule::Ok:", "      return \"\";"]
    for r in t.rules(False):
        out.append(f"    case Rule::{camel(r['id'])}:")
        out.append(f"      return {cpp_str(r['id']).replace('%%', '%')};")
    out += ["  }", "  return \"?\";", "}", "", "// The error a violation is (Result{} for Ok).",
            "inline Result error(Rule r, [[maybe_unused]] const Facts& f) {", "  switch (r) {", "    case Rule::Ok:",
            "      return Result{};"]
    for r in t.rules(False):
        out.append(f"    case Rule::{camel(r['id'])}:")
        out.append(f"      return {cpp_error(r)};")
    out += ["  }", "  return Result{};", "}", ""]
    for g in t.groups:
        rules = [r for r in g["rules"] if not r["rust_only"]]
        out.append(wrap_doc(g["doc"] + " The first rule broken, in the table's order.", "//"))
        out.append(f"inline Rule {g['name']}_rule([[maybe_unused]] const Facts& f) {{")
        for r in rules:
            out.append(f"  if ({condition(r, 'cpp')}) return Rule::{camel(r['id'])};")
        out.append("  return Rule::Ok;")
        out.append("}")
        out.append(f"inline Result {g['name']}(const Facts& f) {{ return error({g['name']}_rule(f), f); }}")
        out.append("")
    out.append("// The first rule `f` breaks, over every group in order.")
    out.append("inline Rule first_rule(const Facts& f) {")
    out.append("  Rule r = Rule::Ok;")
    for g in t.groups:
        out.append(f"  if (r == Rule::Ok) r = {g['name']}_rule(f);")
    out.append("  return r;")
    out.append("}")
    out.append("")
    # The golden cases' reader: fills Facts from name=value words.
    out.append("// Sets fact `name` from its golden-case text (tests/cpp/rules_golden.cpp); false if unknown.")
    out.append("inline bool set_fact(Facts& f, const char* name, const char* value) {")
    for name, fact in facts.items():
        out.append(f"  if (golden::same(name, {cpp_str(name)})) return golden::parse(value, &f.{name});")
    out.append("  return false;")
    out.append("}")
    out.append("")
    out.append("// The facts only the Rust entry has (the golden cases carry them; C++ skips them).")
    out.append("inline bool rust_only_fact([[maybe_unused]] const char* name) {")
    for name, fact in t.facts.items():
        if fact.get("rust_only"):
            out.append(f"  if (golden::same(name, {cpp_str(name)})) return true;")
    out.append("  return false;")
    out.append("}")
    out += ["", f"}}  // namespace sparsek::detail::{ns}"]
    return "\n".join(out) + "\n"


def draw_value(rng, fact, base, ints):
    typ = fact["type"]
    if typ == "bool":
        return rng.random() < 0.5
    if typ == "dtype":
        return rng.choice(list(DTYPES))
    if typ == "scale":
        return rng.choice(list(SCALES))
    if typ == "backend":
        return rng.choice([b for b, (_, cpp) in BACKENDS.items() if cpp])
    choices = [0, 1, 2, 3, base, base + 1, max(base - 1, 0), base * 2, base // 2] + ints
    return rng.choice(choices)


def golden(t, count=600):
    rng = random.Random(f"sparsek-rules-{t.op}")
    ints = sorted({v for e in t.examples for n, v in e.items() if t.facts[n]["type"] == "int"})
    seen, lines = {}, []
    names = list(t.facts)
    for f in t.cases:
        rust = t.violation(f, rust=True)
        seen[rust or "ok"] = seen.get(rust or "ok", 0) + 1
        lines.append(" ".join([f"rust={rust or 'ok'}", f"cpp={t.violation(f, rust=False) or 'ok'}"]
                              + [f"{n}={str(f[n]).lower()}" for n in names]))
    attempts = 0
    cap = max(8, count // max(1, len(t.rules(True))))
    while attempts < 50000:
        if len(lines) >= count and all(seen.get(r["id"], 0) >= 3 for r in t.rules(True)):
            break
        attempts += 1
        base = rng.choice(t.examples)
        f = dict(base)
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3])):
            n = rng.choice(names)
            f[n] = draw_value(rng, t.facts[n], base[n], ints)
        rust = t.violation(f, rust=True)
        cpp = t.violation(f, rust=False)
        key = rust or "ok"
        if seen.get(key, 0) >= cap:
            continue
        seen[key] = seen.get(key, 0) + 1
        words = [f"rust={rust or 'ok'}", f"cpp={cpp or 'ok'}"]
        words += [f"{n}={str(f[n]).lower()}" for n in names]
        lines.append(" ".join(words))
    never = [r["id"] for r in t.rules(True) if seen.get(r["id"], 0) == 0]
    if never:
        raise SystemExit(f"gen-rules: {t.path.name}: no drawn case breaks {never} first (a rule that never decides?)")
    head = [f"# @generated by scripts/gen-rules.py from rules/{t.op}.toml: the table's verdict on each",
            f"# case (rust=, cpp=: the first rule broken, or ok); {t.rust_path} and",
            "# tests/cpp/rules_golden.cpp replay them."]
    return "\n".join(head + lines) + "\n"


def rustfmt(text):
    """The Rust text as `cargo fmt` leaves it (the crate's edition)."""
    r = subprocess.run(["rustfmt", "--edition", "2021", "--emit", "stdout"], input=text, capture_output=True,
                       text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"gen-rules: rustfmt failed:\n{r.stderr}")
    return r.stdout


def outputs():
    for path in sorted(TABLES.glob("*.toml")):
        t = Table(path)
        yield ROOT / t.rust_path, rustfmt(gen_rust(t))
        yield ROOT / t.cpp_path, gen_cpp(t)
        yield ROOT / "rules" / f"{t.op}.golden", golden(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    stale = []
    for path, text in outputs():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.relative_to(ROOT))
        elif not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("gen-rules: not what rules/*.toml generate (run python3 scripts/gen-rules.py): "
              + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
