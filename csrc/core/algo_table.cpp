// The process-wide table of forced algorithms (see algo.h).
#include "core/algo_table.h"

#include <map>
#include <mutex>

#include "core/checks.h"

namespace gpukern {
namespace {

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, std::string>& table() {
  static std::map<std::string, std::string> t;
  return t;
}

const char* const kFamilies[] = {"conv1d", "conv2d", "mv", "reduce"};

}  // namespace

std::string forced_algorithm(const char* family) {
  std::lock_guard<std::mutex> lock(table_mutex());
  const auto it = table().find(family);
  return it == table().end() ? std::string() : it->second;
}

int algorithm_index(const char* family, const std::string& name,
                    const std::vector<std::string>& names) {
  std::string all;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
    if (i) all += ", ";
    all += names[i];
  }
  GK_CHECK(false, family, "forced algorithm '", name, "' is not one of: ", all);
  return -1;
}

void raise_forced_cannot_run(const char* family, const std::string& algo,
                             const std::string& shape) {
  C10_THROW_ERROR(Error, detail::check_msg("gpukern::", family, ": forced algorithm '", algo,
                                            "' cannot run this shape (", shape, ")"));
}

void set_forced_algorithm(const std::string& family, const std::string& name) {
  bool known = false;
  for (const char* f : kFamilies) known = known || family == f;
  GK_CHECK(known, "_set_algorithm", "unknown op family '", family,
           "'; expected conv1d, conv2d, mv or reduce");
  std::lock_guard<std::mutex> lock(table_mutex());
  if (name.empty()) {
    table().erase(family);
  } else {
    table()[family] = name;
  }
}

std::string get_forced_algorithm(const std::string& family) {
  return forced_algorithm(family.c_str());
}

}  // namespace gpukern
