// What a kernel family tells the units generator (cpp/units/units.cpp): its row table, the
// header whose macro instantiates one row, and the architectures it builds for.
//
// Each family folder holds a `rows.cpp` (cpp/<op>/<family>/rows.cpp) that includes its
// configs.hpp and this header and registers one FamilyRows at static initialization. The
// builders (build.rs, CMakeLists.txt, scripts/units-tool.sh) compile the generator from
// cpp/units/*.cpp and every cpp/*/*/rows.cpp, so a family is found by its file, and adding
// one edits no shared list. The generator is an executable: every object given to the
// linker is linked, so every registration runs.
#pragma once

#include <cstdint>
#include <iterator>
#include <vector>

namespace sparsek::units {

// Which architectures a unit builds for: every one of the build, or Hopper alone (CUTLASS
// SM90 code; without sm_90a in the build its row units are not compiled at all and its
// hand-written units build with -DSPARSEK_NO_SM90A for the first architecture).
enum class ArchClass { kAll, kSm90a };

struct FamilyRows {
  const char* id;      // sparsek::detail::<id>, and the prefix of its units' names
  const char* header;  // included by each of its row units (a path under cpp/)
  const char* macro;   // MACRO("row name") instantiates one row
  ArchClass arch;
  uint32_t needs;      // the features (core/features.hpp) the whole family needs
  int rows;
  const char* (*name)(int row);
  uint32_t (*row_needs)(int row);
  // Rows per unit at most (0: the generator's default): a family of heavy rows (several
  // kernels each) cuts its groups finer, so a build's cores share them.
  int rows_per_unit = 0;
};

// Every family registered so far (one list for the whole program: an inline function's
// static is one object across translation units, and is built on first use, whatever the
// order the registrations run in).
inline std::vector<FamilyRows>& registered_families() {
  static std::vector<FamilyRows> families;
  return families;
}

struct Registration {
  explicit Registration(const FamilyRows& family) { registered_families().push_back(family); }
};

// The FamilyRows of a table whose rows have a `name` and whose namespace has `needs(row)`
// (every family's configs.hpp).
template <const auto& kTable>
FamilyRows table_rows(const char* id, const char* header, const char* macro, ArchClass arch,
                      uint32_t family_needs = 0, int rows_per_unit = 0) {
  return {id,
          header,
          macro,
          arch,
          family_needs,
          int(std::size(kTable)),
          [](int row) -> const char* { return kTable[row].name; },
          [](int row) -> uint32_t { return needs(kTable[row]); },
          rows_per_unit};
}

}  // namespace sparsek::units
