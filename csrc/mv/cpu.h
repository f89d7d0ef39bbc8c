#pragma once
// The CPU kernel of mv (mv/cpu.cpp), called by the host entry (mv/ops.cpp) after its checks.
#include <ATen/ATen.h>

namespace gpukern {

// out = A @ x for float32/float64/float16/bfloat16 (accumulated in cpu_acc_t); out is the
// allocated [M] output, M > 0 and N > 0.
void mv_cpu(const at::Tensor& A, const at::Tensor& x, const at::Tensor& out);

}  // namespace gpukern
