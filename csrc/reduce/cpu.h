#pragma once
// The CPU kernels of the reductions (reduce/cpu.cpp), called by the host entry (reduce/ops.cpp)
// after its checks and dtype rules.
#include <ATen/ATen.h>

#include "reduce/problem.h"

namespace gpukern {

// Reduces x (its layout L, R > 0, n_out > 0) into the allocated out: integer and bool inputs
// (sum only) accumulate in int64 and out is int64; float inputs accumulate in cpu_acc_t and out
// has x's dtype, or float32 for a float16/bfloat16 sum widened by dtype=.
void reduce_cpu(const ReduceLayout& L, ReduceKind kind, const at::Tensor& x,
                const at::Tensor& out);

}  // namespace gpukern
