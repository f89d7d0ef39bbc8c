#pragma once
// TEMPORARY bridge on the conv1d branch, deleted by the conv2d branch (which moves the 2-D kernels
// to conv/direct/ over ConvProblem): the old kernels' params type is the ConvProblem.
#include "conv/problem.h"

namespace gpukern {
using Conv2dParams = ConvProblem;
}  // namespace gpukern
