#pragma once
// The CUDA side of mv, as the host entry (mv/ops.cpp) sees it: which algorithm a problem runs
// (the forced one when set, core/algo_table.h) and the run itself, one launch on the current
// stream of the input's device. Defined in mv/dispatch.cu, CUDA builds only.
#include <string>

#include "mv/problem.h"

namespace at {
class Tensor;
}

namespace gpukern {

// Name of the algorithm mv_cuda_run runs for this problem (honours a forced one; raises like the
// call).
std::string mv_cuda_algorithm(const MvProblem& p);

// out is the allocated [M] output; M > 0 and N > 0; p = make_mv_problem(self, vec).
void mv_cuda_run(const MvProblem& p, const at::Tensor& self, const at::Tensor& vec,
                 const at::Tensor& out);

}  // namespace gpukern
