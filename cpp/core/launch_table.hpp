// A family's launch table: row i's launch_row<i> where the build compiled row i (the row's
// features are built, core/features.hpp), else null; the registry never launches a row that
// is not built. A family names its rows through a `Rows` type:
//   struct Rows {
//     template <int kRow> static constexpr LaunchFn launch() { return &launch_row<kRow>; }
//     template <int kRow> static constexpr uint32_t row_needs() { return needs(kTable[kRow]); }
//   };
//   constexpr auto kLaunch = launch_table<LaunchFn, Rows, kRowCount>();
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "core/features.hpp"

namespace sparsek::detail {

template <class LaunchFn, class Rows, int kRow>
constexpr LaunchFn built_row_launch() {
  if constexpr (built(Rows::template row_needs<kRow>()))
    return Rows::template launch<kRow>();
  else
    return nullptr;
}

template <class LaunchFn, class Rows, std::size_t... kRows>
constexpr std::array<LaunchFn, sizeof...(kRows)> launch_table(std::index_sequence<kRows...>) {
  return {{built_row_launch<LaunchFn, Rows, int(kRows)>()...}};
}

template <class LaunchFn, class Rows, int kCount>
constexpr std::array<LaunchFn, kCount> launch_table() {
  return launch_table<LaunchFn, Rows>(std::make_index_sequence<kCount>{});
}

}  // namespace sparsek::detail
