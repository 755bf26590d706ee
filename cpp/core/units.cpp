// The translation units of libsparsek_kernels, for every build: build.rs, CMake and the
// scripts run this one program instead of each reading the source list themselves.
//
//   units <cpp-dir> <gen-dir> <features> [<jobs>]
//
// <features> is a comma-separated list of feature names (core/features.hpp: bf16,
// transpose, any-block, tuning, sddmm, attention, fp8; "" or "-" for none); <jobs> is how many
// nvcc the build runs at once (default 2). Prints one line per unit, "<path> <arch class>"
// (all: every architecture of the build; sm90a: Hopper only), after a first line
// "features <bits>" (the value of -DSPARSEK_FEATURES for this set):
//   - the row units, generated into <gen-dir> (a file is rewritten only when its text
//     changes, so a rebuild recompiles nothing), heaviest first so a build starts them
//     first: each family's rows (its configs.hpp table, the one list of rows) whose
//     features are all built, in two groups: the rows every build has (`base`), and the
//     rows of the build's features (named by the features those rows need, so one set of
//     rows has one name in every build). A group is cut into min(<jobs>, rows / 12) units
//     (at least one). A unit's fixed cost is large beside a row's (nvcc 13.0, one sm90 spmm
//     unit on this 2-core machine, report/NOTES.md session 18: 1 row 43 s, 10 rows 101 s:
//     headers and the templates every row shares take about 37 s, a row ~6.4 s), so a unit
//     carries at least ~12 rows (its fixed cost at most about a third of it) and a build
//     compiles as few units as its parallelism allows: on 2 cores the 86 Hopper spmm rows of
//     `full` are 4 units, and the families' smaller groups one each (session 21: with
//     rows / 4, six groups of 6-11 rows were cut in two, ~90 s of nvcc for nothing). The
//     cut depends only on the group and <jobs>, so the `base` units of any two feature sets
//     are the same files (and the same cached objects).
//   - the hand-written sources of <cpp-dir>/sources.txt whose feature is built.
// Exit status 2 with a message on bad arguments or an unreadable list.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attention/sm90/configs.hpp"
#include "core/features.hpp"
#include "sddmm/sm90/configs.hpp"
#include "sddmm/wmma/configs.hpp"
#include "spmm/decode/configs.hpp"
#include "spmm/sm90/configs.hpp"
#include "spmm/wmma/configs.hpp"

namespace {

// The fewest rows a unit is cut to (above).
constexpr size_t kMinRowsPerUnit = 12;

using namespace sparsek::detail;

// A family's row table, as the generator sees it: where its kernels are, how a row is
// instantiated, and each row's name and needed features.
struct FamilyRows {
  const char* id;        // the unit names' prefix, e.g. "spmm_sm90"
  const char* header;    // included by each unit
  const char* macro;     // MACRO("row name") instantiates one row
  const char* arch;      // all / sm90a
  uint32_t needs;        // features the whole family needs
  int rows;
  const char* (*name)(int row);
  uint32_t (*row_needs)(int row);
};

template <class V, int N>
constexpr int count(const V (&)[N]) {
  return N;
}

const FamilyRows kFamilies[] = {
    {"spmm_sm90", "spmm/sm90/kernel.hpp", "SPARSEK_SM90_INSTANTIATE", "sm90a", 0,
     count(sparsek::detail::spmm_sm90::kSm90Variants), [](int r) { return sparsek::detail::spmm_sm90::kSm90Variants[r].name; },
     [](int r) { return sparsek::detail::spmm_sm90::needs(sparsek::detail::spmm_sm90::kSm90Variants[r]); }},
    {"spmm_wmma", "spmm/wmma/kernel.cuh", "SPARSEK_WMMA_INSTANTIATE", "all", 0,
     count(spmm_wmma::kWmmaVariants), [](int r) { return spmm_wmma::kWmmaVariants[r].name; },
     [](int r) { return spmm_wmma::needs(spmm_wmma::kWmmaVariants[r]); }},
    {"spmm_decode", "spmm/decode/kernel.cuh", "SPARSEK_DECODE_INSTANTIATE", "all", 0,
     count(spmm_decode::kDecodeVariants), [](int r) { return spmm_decode::kDecodeVariants[r].name; },
     [](int r) { return spmm_decode::needs(spmm_decode::kDecodeVariants[r]); }},
    {"sddmm_sm90", "sddmm/sm90/kernel.hpp", "SPARSEK_SDDMM_SM90_INSTANTIATE", "sm90a", kFeatureSddmm,
     count(sddmm_sm90::kSddmmSm90Variants), [](int r) { return sddmm_sm90::kSddmmSm90Variants[r].name; },
     [](int r) { return sddmm_sm90::needs(sddmm_sm90::kSddmmSm90Variants[r]); }},
    {"sddmm_wmma", "sddmm/wmma/kernel.cuh", "SPARSEK_SDDMM_WMMA_INSTANTIATE", "all", kFeatureSddmm,
     count(sddmm_wmma::kSddmmWmmaVariants), [](int r) { return sddmm_wmma::kSddmmWmmaVariants[r].name; },
     [](int r) { return sddmm_wmma::needs(sddmm_wmma::kSddmmWmmaVariants[r]); }},
    {"attention_sm90", "attention/sm90/kernel.hpp", "SPARSEK_ATTENTION_SM90_INSTANTIATE", "sm90a", kFeatureAttention,
     count(attention_sm90::kAttentionSm90Variants),
     [](int r) { return attention_sm90::kAttentionSm90Variants[r].name; },
     [](int r) { return attention_sm90::needs(attention_sm90::kAttentionSm90Variants[r]); }},
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "units: %s\n", why.c_str());
  std::exit(2);
}

uint32_t parse_features(const std::string& list) {
  uint32_t bits = 0;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name.empty() || name == "-") continue;
    bool known = false;
    for (const FeatureName& f : kFeatureNames)
      if (name == f.name) bits |= f.bit, known = true;
    if (!known) fail("unknown feature `" + name + "`");
  }
  return bits;
}

// The feature whose name is `name`, or fail.
uint32_t feature_bit(const std::string& name) {
  if (name == "-") return 0;
  for (const FeatureName& f : kFeatureNames)
    if (name == f.name) return f.bit;
  fail("sources.txt: unknown feature `" + name + "`");
}

// "base" or the needed features' names joined by '_' ('-' as '_'): a unit name's middle.
std::string needs_tag(uint32_t needs) {
  std::string tag;
  for (const FeatureName& f : kFeatureNames) {
    if ((needs & f.bit) == 0) continue;
    if (!tag.empty()) tag += '_';
    for (const char* c = f.name; *c != '\0'; ++c) tag += (*c == '-' ? '_' : *c);
  }
  return tag.empty() ? "base" : tag;
}

void write_if_changed(const std::string& path, const std::string& text) {
  {
    std::ifstream old(path, std::ios::binary);
    if (old) {
      std::stringstream buf;
      buf << old.rdbuf();
      if (buf.str() == text) return;
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!(out << text)) fail("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename " + tmp + " to " + path);
}

}  // namespace

struct Unit {
  std::string path;
  const char* arch;
  size_t rows;
};

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) fail("usage: units <cpp-dir> <gen-dir> <features> [<jobs>]");
  const std::string cpp = argv[1], gen = argv[2];
  const uint32_t features = parse_features(argv[3]);
  size_t jobs = 2;
  if (argc == 5) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(argv[4], &end, 10);
    if (end == argv[4] || *end != '\0' || n == 0 || n > 4096) fail(std::string("bad <jobs> `") + argv[4] + "`");
    jobs = size_t(n);
  }
  const auto has = [&](uint32_t needs) { return (needs & ~features) == 0; };
  // First line: the bits for -DSPARSEK_FEATURES (the hand-written units select rows by it).
  std::printf("features %u\n", unsigned(features));

  // Row units.
  std::vector<Unit> units;
  for (const FamilyRows& f : kFamilies) {
    if (!has(f.needs)) continue;
    std::vector<int> base, extra;
    uint32_t extra_needs = 0;  // names the extra rows: the same rows give the same name
    for (int r = 0; r < f.rows; ++r) {
      const uint32_t n = f.row_needs(r);
      if (n == 0) {
        base.push_back(r);
      } else if (has(n)) {
        extra.push_back(r);
        extra_needs |= n;
      }
    }
    for (const bool is_base : {true, false}) {
      const std::vector<int>& rows = is_base ? base : extra;
      if (rows.empty()) continue;
      const size_t count = std::max<size_t>(1, std::min(jobs, (rows.size() + kMinRowsPerUnit - 1) / kMinRowsPerUnit));
      const std::string tag = is_base ? "base" : "with_" + needs_tag(extra_needs);
      for (size_t u = 0; u < count; ++u) {
        std::string text = "// Generated by cpp/core/units.cpp: rows of " + std::string(f.id) + " (" + tag +
                           ", unit " + std::to_string(u + 1) + " of " + std::to_string(count) +
                           "; their table: " + f.header + "'s configs.hpp).\n#include \"" + f.header + "\"\n\n";
        // Rows dealt round-robin, so the units of a group are about equally heavy.
        size_t n = 0;
        for (size_t i = u; i < rows.size(); i += count, ++n)
          text += std::string(f.macro) + "(\"" + f.name(rows[i]) + "\")\n";
        const std::string path = gen + "/" + f.id + "_" + tag + "_" + std::to_string(u + 1) + "of" +
                                 std::to_string(count) + ".cu";
        write_if_changed(path, text);
        units.push_back({path, f.arch, n});
      }
    }
  }
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.rows > b.rows; });
  for (const Unit& u : units) std::printf("%s %s\n", u.path.c_str(), u.arch);

  // Hand-written sources: "path arch-class feature" (path relative to the repository root).
  std::ifstream list(cpp + "/sources.txt");
  if (!list) fail("cannot read " + cpp + "/sources.txt");
  std::string line;
  while (std::getline(list, line)) {
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string path, arch, feature, extra;
    if (!(words >> path)) continue;
    if (!(words >> arch >> feature) || (words >> extra)) fail("sources.txt: malformed line `" + line + "`");
    if (arch != "all" && arch != "sm90a") fail("sources.txt: unknown arch class `" + arch + "`");
    if (has(feature_bit(feature))) std::printf("%s %s\n", path.c_str(), arch.c_str());
  }
  return 0;
}
