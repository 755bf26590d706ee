// The generated rule headers (cpp/<op>/rules.hpp, from rules/<op>.toml by scripts/gen-rules.py)
// against the table's own verdicts (rules/<op>.golden, which the generator evaluated): every
// case's first broken rule must be the one the table names for the C++ side, and every broken
// rule must give a failed Result with a message. The Rust side replays the same files (its
// generated modules' unit tests), so both entries decide each case as the table does.
//
//   sparsek_test_rules_golden [rules dir]   (default: SPARSEK_RULES_DIR, the source tree's rules/)
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "attention/gating_rules.hpp"
#include "attention/rules.hpp"
#include "core/bsr_rules.hpp"
#include "sddmm/rules.hpp"
#include "spmm/rules.hpp"

#ifndef SPARSEK_RULES_DIR
#define SPARSEK_RULES_DIR "rules"
#endif

namespace {

// Replays rules/<op>.golden against one generated namespace; returns the failures.
template <class Facts, class Rule>
int replay(const std::string& dir, const char* op, bool (*set_fact)(Facts&, const char*, const char*),
           bool (*rust_only)(const char*), Rule (*first_rule)(const Facts&), const char* (*name)(Rule),
           sparsek::Result (*error)(Rule, const Facts&), int* cases) {
  const std::string path = dir + "/" + op + ".golden";
  std::ifstream in(path);
  if (!in) {
    std::printf("FAIL %s: cannot read %s\n", op, path.c_str());
    return 1;
  }
  int failed = 0, n = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Facts f;
    std::string want;
    std::istringstream words(line);
    std::string w;
    bool ok = true;
    while (words >> w) {
      const size_t eq = w.find('=');
      if (eq == std::string::npos) {
        ok = false;
        break;
      }
      const std::string key = w.substr(0, eq), value = w.substr(eq + 1);
      if (key == "rust") continue;
      if (key == "cpp") {
        want = value == "ok" ? "" : value;
        continue;
      }
      if (rust_only(key.c_str())) continue;
      if (!set_fact(f, key.c_str(), value.c_str())) ok = false;
    }
    ++n;
    if (!ok) {
      std::printf("FAIL %s: unreadable case: %s\n", op, line.c_str());
      ++failed;
      continue;
    }
    const Rule r = first_rule(f);
    if (want != name(r)) {
      std::printf("FAIL %s: the table says %s, C++ says %s: %s\n", op, want.empty() ? "ok" : want.c_str(),
                  r == Rule::Ok ? "ok" : name(r), line.c_str());
      ++failed;
      continue;
    }
    const sparsek::Result e = error(r, f);
    if ((r == Rule::Ok) != e.ok() || (r != Rule::Ok && std::strlen(e.message) == 0)) {
      std::printf("FAIL %s: rule %s gives status %d with message \"%s\"\n", op, name(r), int(e.status), e.message);
      ++failed;
    }
  }
  *cases += n;
  if (n < 100) {
    std::printf("FAIL %s: only %d cases in %s\n", op, n, path.c_str());
    ++failed;
  }
  if (failed == 0) std::printf("PASS %s: %d golden cases decided as the table decides\n", op, n);
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : SPARSEK_RULES_DIR;
  namespace d = sparsek::detail;
  int failed = 0, cases = 0;
  failed += replay<d::spmm_rules::Facts, d::spmm_rules::Rule>(dir, "spmm", d::spmm_rules::set_fact,
                                                              d::spmm_rules::rust_only_fact, d::spmm_rules::first_rule,
                                                              d::spmm_rules::name, d::spmm_rules::error, &cases);
  failed += replay<d::bsr_rules::Facts, d::bsr_rules::Rule>(dir, "bsr", d::bsr_rules::set_fact,
                                                            d::bsr_rules::rust_only_fact, d::bsr_rules::first_rule,
                                                            d::bsr_rules::name, d::bsr_rules::error, &cases);
  failed += replay<d::sddmm_rules::Facts, d::sddmm_rules::Rule>(
      dir, "sddmm", d::sddmm_rules::set_fact, d::sddmm_rules::rust_only_fact, d::sddmm_rules::first_rule,
      d::sddmm_rules::name, d::sddmm_rules::error, &cases);
  failed += replay<d::attention_rules::Facts, d::attention_rules::Rule>(
      dir, "attention", d::attention_rules::set_fact, d::attention_rules::rust_only_fact,
      d::attention_rules::first_rule, d::attention_rules::name, d::attention_rules::error, &cases);
  failed += replay<d::gating_rules::Facts, d::gating_rules::Rule>(
      dir, "gating", d::gating_rules::set_fact, d::gating_rules::rust_only_fact, d::gating_rules::first_rule,
      d::gating_rules::name, d::gating_rules::error, &cases);
  std::printf("%d cases, %d failed\n", cases, failed);
  return failed == 0 ? 0 : 1;
}
