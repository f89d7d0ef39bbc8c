#pragma once
// Algorithm forcing and naming, shared by every op family.
//
// Each family picks its CUDA algorithm from the shape alone (the dispatch file of each family). Tests
// and benchmarks can force one by name, per family, through the op gpukern::_set_algorithm
// (torch_ops.force_algorithm in Python): the family's choice function then returns the forced
// algorithm if it can run the shape, and raises "gpukern::<op>: forced algorithm '<name>' ..."
// otherwise. "" restores the automatic choice. The setting is process-wide (tests and benchmarks
// run one op at a time); reads take a mutex, which costs nanoseconds per call.
//
// The query ops gpukern::_algorithm_<family> return, for arguments shaped like a real call
// (meta tensors work), the name of the CUDA algorithm the family would run: the pure function of
// the shape that the launcher uses, so `python -m torch_ops.info` reports what a call will do.
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpukern {

// The forced algorithm name of a family ("conv1d", "conv2d", "mv", "reduce"), "" when automatic.
std::string forced_algorithm(const char* family);

// Raises "gpukern::<family>: forced algorithm '<name>' is not one of: a, b, c" unless name is in
// names; returns its index.
int algorithm_index(const char* family, const std::string& name,
                    const std::vector<std::string>& names);

// Raises "gpukern::<family>: forced algorithm '<algo>' cannot run this shape (<shape>)".
[[noreturn]] void raise_forced_cannot_run(const char* family, const std::string& algo,
                                          const std::string& shape);

// The op gpukern::_set_algorithm(str family, str name): "" restores the automatic choice.
void set_forced_algorithm(const std::string& family, const std::string& name);

// The op gpukern::_forced_algorithm(str family) -> str.
std::string get_forced_algorithm(const std::string& family);

// One family's algorithm table: its enum <-> name mapping and the choice with forcing, so every
// family (conv, mv, reduce) names, forces and queries its algorithms the same way.
//   static const AlgorithmTable<Algo> kTable("conv2d", {{Algo::kA, "a"}, {Algo::kB, "b"}});
//   Plan plan = kTable.choose<Plan>(plan_for, choose_auto, describe);
// Algo must be an enum whose values are 0..n-1 in the order of the entries.
template <typename Algo>
class AlgorithmTable {
 public:
  struct Entry {
    Algo algo;
    const char* name;
  };

  AlgorithmTable(const char* family, std::initializer_list<Entry> entries) : family_(family) {
    for (const Entry& e : entries) names_.emplace_back(e.name);
  }

  const char* family() const { return family_; }
  const std::string& name(Algo a) const { return names_[static_cast<size_t>(a)]; }
  const std::vector<std::string>& names() const { return names_; }

  // The algorithm forced for this family (set_forced_algorithm), nullopt when automatic; raises
  // "gpukern::<family>: forced algorithm 'x' is not one of: ..." for an unknown name.
  std::optional<Algo> forced() const {
    const std::string f = forced_algorithm(family_);
    if (f.empty()) return std::nullopt;
    return static_cast<Algo>(algorithm_index(family_, f, names_));
  }

  // The choice: automatic() -> Plan when nothing is forced; else the forced algorithm's plan,
  // made by plan_for(algo, plan) -> bool, which says whether it can run the shape. A forced
  // algorithm that cannot raises "forced algorithm 'x' cannot run this shape (<describe()>)"
  // instead of falling back.
  template <typename Plan, typename PlanFor, typename Auto, typename Describe>
  Plan choose(PlanFor&& plan_for, Auto&& automatic, Describe&& describe) const {
    const std::optional<Algo> f = forced();
    if (!f) return automatic();
    Plan plan{};
    if (!plan_for(*f, plan)) raise_cannot_run(name(*f), describe());
    return plan;
  }

 private:
  void raise_cannot_run(const std::string& algo, const std::string& shape) const {
    raise_forced_cannot_run(family_, algo, shape);
  }

  const char* family_;
  std::vector<std::string> names_;
};

}  // namespace gpukern
