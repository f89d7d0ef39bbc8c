#pragma once
// The CPU kernel of the convolution ops (conv/cpu.cpp), for 1-D and 2-D problems alike.
#include <c10/core/ScalarType.h>

#include "conv/problem.h"

namespace gpukern {

// Runs the problem over CPU data of dtype st (float32, float64, float16, bfloat16): float32
// accumulation, float64 for float64 (cpu_acc_t). `op` names the op in the dtype error.
void conv_cpu_run(const ConvProblem& p, c10::ScalarType st, const char* op);

}  // namespace gpukern
