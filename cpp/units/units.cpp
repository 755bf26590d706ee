// The units generator: the translation units of libsparsek_kernels and the nvcc arguments
// of each, for every build (build.rs, CMakeLists.txt, and the scripts through
// scripts/units-tool.sh), so that no builder reads a source list or derives an nvcc flag
// itself. Built from this file and every family's cpp/<op>/<family>/rows.cpp
// (cpp/units/family_rows.hpp), which brings in the family's table: a build tool above the
// operations, so that the core includes none of them.
//
//   units units <cpp-dir> <gen-dir> <features> <archs> <lineinfo>
//   units nvcc-args <cpp-dir> <archs> <lineinfo>
//   units gencode <archs>
//
// <features> is a comma-separated list of feature names (core/features.hpp: bf16,
// transpose, any-block, tuning, sddmm, attention, fp8; "" or "-" for none); <archs> the
// build's architectures, separated by ',' or ';' (e.g. 90a,80; 90a is Hopper with wgmma);
// <lineinfo> 1 adds -lineinfo (source lines for ncu and compute-sanitizer; it costs about a
// tenth of cicc's time), 0 not.
//
// `units` prints a first line "features <bits>" (the value of -DSPARSEK_FEATURES for this
// set), then one line per unit: its path, then every nvcc argument it is compiled with, all
// separated by tabs (the builder adds its include directories, -c <path> and its output):
//   - the row units, generated into <gen-dir> (a file is rewritten only when its text
//     changes, so a rebuild recompiles nothing), heaviest first (most rows, Hopper first
//     among equals) so a build starts them first: each family's rows (its configs.hpp table, the one list of rows) whose
//     features are all built, in two groups: the rows every build has (`base`), and the
//     rows of the build's features (named by the features those rows need, so one set of
//     rows has one name in every build). A group is cut into ceil(rows / 12) units of
//     near-equal size, whatever the build's parallelism, so the units of any two builders
//     (and the `base` units of any two feature sets) are the same files and the same cached
//     objects. Memory binds the cut: cicc holds 7.1 GB for 9 Hopper spmm rows, 10.3 GB for
//     18 and 12.5 GB for 37 (nvcc 13.0, /usr/bin/time), so two 37-row units, which a
//     2-core build cut when the cut followed the cores, did not fit a 24 GiB machine. Time
//     favours large units a little: 78 s, 135 s and 200 s of nvcc for those three (a unit's
//     headers and shared templates ~20 s, a row ~6.4 s), so 12 rows costs one fixed part
//     per ~75 s of rows.
//   - the hand-written sources that each folder of <cpp-dir> lists in its sources.txt
//     (cpp/core/sources.txt, cpp/<op>/sources.txt; found, not listed, so an operation
//     touches no shared list) whose feature is built. A .cu file under a folder that its
//     list leaves out is an error.
// A unit's arguments: cpp/nvcc_flags.txt's; -lineinfo on request; -DSPARSEK_FEATURES=<bits>u
// for a hand-written unit (it selects rows by the feature set; a row unit's text names its
// rows, so one compiled row serves every build that has it); then its architectures: a
// unit of class `all` -gencode for every architecture of the build, one of class `sm90a`
// (CUTLASS SM90 code) for sm_90a alone, or, without 90a in the build, a hand-written one
// with -DSPARSEK_NO_SM90A for the first architecture (its host functions report the
// missing architecture) and no row unit at all (the family launches nothing without them).
//
// `nvcc-args` prints, one per line, the arguments of a CUDA program built beside the
// library (a test): the shared flags, -lineinfo on request, -gencode for every architecture.
// `gencode` prints, one per line, -gencode for every architecture.
//
// Exit status 2 with a message on bad arguments or an unreadable list.
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/features.hpp"
#include "units/family_rows.hpp"

namespace {

using sparsek::detail::FeatureName;
using sparsek::detail::kFeatureNames;
using sparsek::units::ArchClass;
using sparsek::units::FamilyRows;

// The most rows a unit carries (above): what one cicc holds in memory. A family may ask for
// fewer (FamilyRows::rows_per_unit).
constexpr size_t kMaxRowsPerUnit = 12;

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "units: %s\n", why.c_str());
  std::exit(2);
}

// The feature whose name is `name` (`what` names the list it came from), or fail.
uint32_t feature_bit(const std::string& name, const std::string& what) {
  for (const FeatureName& f : kFeatureNames)
    if (name == f.name) return f.bit;
  fail(what + ": unknown feature `" + name + "`");
}

uint32_t parse_features(const std::string& list) {
  uint32_t bits = 0;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ','))
    if (!name.empty() && name != "-") bits |= feature_bit(name, "<features>");
  return bits;
}

bool parse_lineinfo(const std::string& text) {
  if (text != "0" && text != "1") fail("bad <lineinfo> `" + text + "` (want 0 or 1)");
  return text == "1";
}

// The architectures of a list separated by ',' or ';' (spaces ignored), at least one.
std::vector<std::string> parse_archs(const std::string& list) {
  std::vector<std::string> archs;
  std::string arch;
  for (const char c : list + ",") {
    if (c == ',' || c == ';') {
      if (!arch.empty()) archs.push_back(arch);
      arch.clear();
    } else if (c != ' ' && c != '\t') {
      arch += c;
    }
  }
  if (archs.empty()) fail("<archs> `" + list + "` names no architecture");
  return archs;
}

std::string gencode(const std::string& arch) { return "-gencode=arch=compute_" + arch + ",code=sm_" + arch; }

// The lines of a list file without '#' comments and surrounding blanks, empty lines dropped.
std::vector<std::string> read_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    lines.push_back(line.substr(first, line.find_last_not_of(" \t\r") + 1 - first));
  }
  return lines;
}

// The arguments every unit shares: cpp/nvcc_flags.txt's, then -lineinfo on request.
std::vector<std::string> shared_flags(const std::string& cpp, bool lineinfo) {
  std::vector<std::string> flags = read_list(cpp + "/nvcc_flags.txt");
  if (lineinfo) flags.push_back("-lineinfo");
  return flags;
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

bool is_folder(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return false;
  closedir(d);
  return true;
}

// The entries of the folder `dir` (sorted by name, so every build lists the units in one
// order): its folders, or its other files.
std::vector<std::string> entries(const std::string& dir, bool folders) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) fail("cannot read the folder " + dir);
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != ".." && is_folder(dir + "/" + name) == folders) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Every CUDA source (.cu) under `dir`, at any depth.
void cuda_sources(const std::string& dir, std::vector<std::string>& out) {
  for (const std::string& name : entries(dir, false))
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".cu") == 0) out.push_back(dir + "/" + name);
  for (const std::string& name : entries(dir, true)) cuda_sources(dir + "/" + name, out);
}

// The registered families, in one order whatever the link order (by id); an id twice fails.
std::vector<FamilyRows> families() {
  std::vector<FamilyRows> all = sparsek::units::registered_families();
  std::sort(all.begin(), all.end(),
            [](const FamilyRows& a, const FamilyRows& b) { return std::string(a.id) < b.id; });
  for (size_t i = 1; i < all.size(); ++i)
    if (std::string(all[i - 1].id) == all[i].id)
      fail(std::string("two families register `") + all[i].id + "`");
  return all;
}

struct Unit {
  std::string path;
  ArchClass arch;
  bool generated;  // a row unit (else hand-written)
  size_t rows;
};

// The build's units: the row units (written into `gen`) heaviest first, then the
// hand-written ones.
std::vector<Unit> list_units(const std::string& cpp, const std::string& gen, uint32_t features, bool has_sm90a) {
  const auto has = [&](uint32_t needs) { return (needs & ~features) == 0; };
  std::vector<Unit> units;
  for (const FamilyRows& f : families()) {
    // Without sm_90a a Hopper family's rows are not built (its hand-written unit is a stub).
    if (!has(f.needs) || (f.arch == ArchClass::kSm90a && !has_sm90a)) continue;
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
      const size_t most = f.rows_per_unit > 0 ? size_t(f.rows_per_unit) : kMaxRowsPerUnit;
      const size_t count = (rows.size() + most - 1) / most;
      const std::string tag = is_base ? "base" : "with_" + needs_tag(extra_needs);
      for (size_t u = 0; u < count; ++u) {
        std::string text = "// Generated by cpp/units/units.cpp: rows of " + std::string(f.id) + " (" + tag +
                           ", unit " + std::to_string(u + 1) + " of " + std::to_string(count) +
                           "; their table: " + f.header + "'s configs.hpp).\n#include \"" + f.header + "\"\n\n";
        // Rows dealt round-robin, so the units of a group are about equally heavy.
        size_t n = 0;
        for (size_t i = u; i < rows.size(); i += count, ++n)
          text += std::string(f.macro) + "(\"" + f.name(rows[i]) + "\")\n";
        const std::string path = gen + "/" + f.id + "_" + tag + "_" + std::to_string(u + 1) + "of" +
                                 std::to_string(count) + ".cu";
        write_if_changed(path, text);
        units.push_back({path, f.arch, true, n});
      }
    }
  }
  // Heaviest first: more rows, then Hopper (CUTLASS) before the rest.
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) {
    if (a.rows != b.rows) return a.rows > b.rows;
    return a.arch == ArchClass::kSm90a && b.arch != ArchClass::kSm90a;
  });

  // Hand-written sources: "file arch-class feature" lines, the file relative to its list.
  // Every .cu file of a folder must be in its list, built or not: one left out would not
  // be compiled, and what it defines (a family, an operation's registration at static
  // initialization) would be missing without a word.
  for (const std::string& folder : entries(cpp, true)) {
    const std::string dir = cpp + "/" + folder, list = dir + "/sources.txt";
    std::vector<std::string> unlisted;
    cuda_sources(dir, unlisted);
    if (!std::ifstream(list)) {
      if (!unlisted.empty()) fail(unlisted[0] + " is listed in no sources.txt (want it in " + list + ")");
      continue;
    }
    for (const std::string& line : read_list(list)) {
      std::stringstream words(line);
      std::string file, arch, feature, extra;
      if (!(words >> file >> arch >> feature) || (words >> extra))
        fail(list + ": malformed line `" + line + "`");
      if (arch != "all" && arch != "sm90a") fail(list + ": unknown arch class `" + arch + "`");
      const std::string path = dir + "/" + file;
      if (!std::ifstream(path)) fail(list + ": no file " + path);
      unlisted.erase(std::remove(unlisted.begin(), unlisted.end(), path), unlisted.end());
      if (feature == "-" || has(feature_bit(feature, list)))
        units.push_back({path, arch == "all" ? ArchClass::kAll : ArchClass::kSm90a, false, 0});
    }
    if (!unlisted.empty()) fail(unlisted[0] + " is listed in no sources.txt (want it in " + list + ")");
  }
  return units;
}

// A unit's architectures (above).
std::vector<std::string> arch_args(ArchClass arch, const std::vector<std::string>& archs) {
  const bool has_sm90a = std::find(archs.begin(), archs.end(), "90a") != archs.end();
  if (arch == ArchClass::kSm90a) {
    if (has_sm90a) return {gencode("90a")};
    return {"-DSPARSEK_NO_SM90A", gencode(archs[0])};
  }
  std::vector<std::string> args;
  for (const std::string& a : archs) args.push_back(gencode(a));
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string mode = args.empty() ? "" : args[0];
  if (mode == "gencode" && args.size() == 2) {
    for (const std::string& a : parse_archs(args[1])) std::printf("%s\n", gencode(a).c_str());
    return 0;
  }
  if (mode == "nvcc-args" && args.size() == 4) {
    std::vector<std::string> out = shared_flags(args[1], parse_lineinfo(args[3]));
    for (const std::string& a : arch_args(ArchClass::kAll, parse_archs(args[2]))) out.push_back(a);
    for (const std::string& a : out) std::printf("%s\n", a.c_str());
    return 0;
  }
  if (mode != "units" || args.size() != 6)
    fail(
        "usage: units units <cpp-dir> <gen-dir> <features> <archs> <lineinfo>\n"
        "       units nvcc-args <cpp-dir> <archs> <lineinfo>\n"
        "       units gencode <archs>");
  const std::string cpp = args[1], gen = args[2];
  const uint32_t features = parse_features(args[3]);
  const std::vector<std::string> archs = parse_archs(args[4]);
  const std::vector<std::string> flags = shared_flags(cpp, parse_lineinfo(args[5]));
  const bool has_sm90a = std::find(archs.begin(), archs.end(), "90a") != archs.end();

  const std::vector<Unit> units = list_units(cpp, gen, features, has_sm90a);
  // First line: the bits for -DSPARSEK_FEATURES (the bridge sees the feature set too).
  std::printf("features %u\n", unsigned(features));
  for (const Unit& u : units) {
    std::string line = u.path;
    for (const std::string& a : flags) line += "\t" + a;
    if (!u.generated) line += "\t-DSPARSEK_FEATURES=" + std::to_string(features) + "u";
    for (const std::string& a : arch_args(u.arch, archs)) line += "\t" + a;
    std::printf("%s\n", line.c_str());
  }
  return 0;
}
