#pragma once
// The CUDA side of the reductions, as the host entry (reduce/ops.cpp) sees it: which algorithm a
// layout runs (the forced one when set, core/algo_table.h) and the run itself, one launch on the
// current stream of the input's device. Defined in reduce/dispatch.cu, CUDA builds only.
#include <string>

#include "reduce/problem.h"

namespace at {
class Tensor;
}

namespace gpukern {

// x holds the (already cast) input, out the allocated output of layout.n_out elements; kind and
// out_kind as in reduce/problem.h; R > 0 and n_out > 0.
void reduce_cuda_run(const ReduceLayout& layout, ReduceKind kind, ReduceOutKind out_kind,
                     const at::Tensor& x, const at::Tensor& out);

// Name of the algorithm reduce_cuda_run runs for this layout (honours a forced one; raises like
// the call): float_acc = the kernel reads a float type (else an integer type summed in int64),
// elem_size = bytes per element read, aligned = the data starts on a 16-byte boundary,
// sum_like = a sum or a mean (not amax / amin).
std::string reduce_cuda_algorithm(const ReduceLayout& layout, bool float_acc, int elem_size,
                                  bool aligned, bool sum_like);

}  // namespace gpukern
