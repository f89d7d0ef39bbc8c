#pragma once
// Algorithm forcing and naming, shared by every op family.
//
// Each family picks its CUDA algorithm from the shape alone (choose_* in <family>_cuda.cu). Tests
// and benchmarks can force one by name, per family, through the op gpukern::_set_algorithm
// (torch_ops.force_algorithm in Python): the family's choice function then returns the forced
// algorithm if it can run the shape, and raises "gpukern::<op>: forced algorithm '<name>' ..."
// otherwise. "" restores the automatic choice. The setting is process-wide (tests and benchmarks
// run one op at a time); reads take a mutex, which costs nanoseconds per call.
//
// The query ops gpukern::_algorithm_<family> return, for arguments shaped like a real call
// (meta tensors work), the name of the CUDA algorithm the family would run: the pure function of
// the shape that the launcher uses, so `python -m torch_ops.info` reports what a call will do.
#include <string>
#include <vector>

namespace gpukern {

// The forced algorithm name of a family ("conv1d", "conv2d", "mv", "reduce"), "" when automatic.
std::string forced_algorithm(const char* family);

// Raises "gpukern::<family>: forced algorithm '<name>' is not one of: a, b, c" unless name is in
// names; returns its index.
int algorithm_index(const char* family, const std::string& name,
                    const std::vector<std::string>& names);

// The op gpukern::_set_algorithm(str family, str name): "" restores the automatic choice.
void set_forced_algorithm(const std::string& family, const std::string& name);

// The op gpukern::_forced_algorithm(str family) -> str.
std::string get_forced_algorithm(const std::string& family);

}  // namespace gpukern
