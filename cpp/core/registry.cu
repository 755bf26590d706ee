// The registry's state shared by every operation (the rule and the templates: core/registry.hpp,
// core/select.hpp): SPARSEK_VARIANT, the registered row names, the backends' names.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/select.hpp"

namespace sparsek::detail {
namespace {

// The registered operations' row names, newest first. A function-local static: registrations
// run at static initialisation, in no order across translation units, and may come before
// anything else of this file is initialised.
std::atomic<const RowNames*>& registered() {
  static std::atomic<const RowNames*> head{nullptr};
  return head;
}

}  // namespace

const char* forced_variant() {
  static const char* const name = [] {
    const char* v = std::getenv("SPARSEK_VARIANT");
    return v == nullptr ? "" : v;
  }();
  return name;
}

bool register_row_names(RowNames* entry) {
  std::atomic<const RowNames*>& head = registered();
  const RowNames* next = head.load(std::memory_order_relaxed);
  do {
    entry->next = next;
  } while (!head.compare_exchange_weak(next, entry, std::memory_order_release, std::memory_order_relaxed));
  return true;
}

bool names_registered_row(const char* name) {
  for (const RowNames* r = registered().load(std::memory_order_acquire); r != nullptr; r = r->next)
    if (r->names(name)) return true;
  return false;
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::Decode:
      return "decode";
    case Backend::Hopper:
      return "hopper";
    case Backend::Wmma:
      return "wmma";
    default:
      return nullptr;
  }
}

}  // namespace sparsek::detail
