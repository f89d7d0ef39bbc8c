#pragma once
// cuDNN's convolution as one more gpukern algorithm ("cudnn" in the conv1d and conv2d tables),
// ATen's native depthwise kernel as another ("aten_depthwise", conv2d), and the first-call race
// that runs them where they are faster than gpukern's own choice.
//
// Why: a drop-in must never be slower than what it replaces, and on some dense layers (ResNet-50's
// NCHW 3x3 and strided 1x1 layers, where the CUTLASS kernels and their layout conversions trail
// cuDNN's kernels by 5-30%) and some depthwise shapes (channels_last fp32 with few channels) every
// kernel here trails cuDNN. A static rule per shape class would miss the shapes nobody measured;
// so, like cudnn.benchmark and the cuBLASLt tuning of conv/igemm/blas.h, the first call of a
// problem outside a CUDA-graph capture times gpukern's choice against cuDNN on the call's own
// operands and remembers the faster, per problem.
//
// The race: 3 interleaved rounds; in each, per side, a spin kernel (so that the host queues the
// launches ahead of the GPU and the events time the kernels, not the host's calls), one warm-up
// call, then 8 calls, each after an L2 flush (a 96 MB read) and between its own two events; then
// again a spin and a warm-up call, and 8 calls back to back between one pair of events, with the
// operands left in the L2. A side's score is its best flushed time per call plus its best warm
// time per call: in a model a layer's input was just written by the layer before (often still in
// the L2) while its weights come from memory, between the two regimes; timing only one of them
// handed layers to the side that loses in the other (flushed only: MobileNetV3's channels_last
// 14x14 layers went to cuDNN, which the warm graph replays of the census time 19% slower). Calls of
// 0.5 ms and more are timed one at a time, and from 2 ms in one round, so that a race costs a few
// calls' time. Each side is the whole call: gpukern's algorithm with its epilogue, or cuDNN's
// convolution plus gpukern's elementwise pass for the bias and the fused epilogue
// (conv/epilogue.h); and, for the blocks torch can hand to cuDNN whole (2-D, bias and ReLU, with
// or without a residual: ResNet's conv-BN-ReLU once BN is folded), cuDNN's fused call as a third
// side (cudnn_fused_run): cuDNN fuses these inside its convolution on channels_last (0-5% over its
// plain convolution on ResNet-50's blocks) but runs some NCHW 1x1 blocks 2-5x slower than its
// plain convolution, so it races rather than replaces; and, for depthwise problems with an NCHW
// output, ATen's native depthwise kernel (what F.conv2d itself runs for the depthwise layers it
// does not give cuDNN: bf16 NCHW ones among others), whose speed on small planes with wide
// filters neither gpukern's kernels nor cuDNN match (a 31x31 filter over 14x14 bf16 planes: 29 us
// in torch, 100-220 us in gpukern's kernels and cuDNN). gpukern keeps a problem only when its
// score is below 97% of the fastest library side's: a near tie goes to the library, which is what
// torch runs, so that noise in the race cannot make a call slower than torch's. (Replaying the race
// verdicts of ResNet-50, MobileNetV3, ConvNeXt-T, Conformer and wav2vec2 against their census
// timed without the race: with ties going to gpukern 2 of 322 layers fell below 0.85x torch and 9
// below 0.95x; with ties going to cuDNN none and 4, at the same geomean.) Every timed call writes
// the output, which the call's own run then overwrites.
//
// Not raced (gpukern's choice runs): an algorithm forced by name; torch's deterministic mode
// (torch.use_deterministic_algorithms), so that the kernel and its rounding do not depend on a
// timing; GPUKERN_CONV_RACE=0 in the environment (read once); torch.backends.cudnn.enabled False;
// a problem cuDNN cannot take (cudnn_conv_can_run). A call during a capture uses a verdict found
// before and otherwise gpukern's choice, and leaves the race to a later call.
//
// Host cost of a raced call: the problem's key, one hash-map lookup under a mutex. The verdicts
// are process-wide (at most kMaxVerdicts, then the map starts over), keyed by every size and
// stride, the dtype, bias, activation and residual, the operands' 16-byte alignment, the device
// and torch's cuDNN flags (allow_tf32, benchmark).
// GPUKERN_CONV_RACE_LOG=1 prints each race's two times and verdict to stderr.
// CUDA builds only; the caller holds the device guard.
#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <optional>

#include "conv/problem.h"

namespace gpukern {

// Whether cuDNN can run p: torch built with cuDNN and torch.backends.cudnn.enabled, p.dtype set
// (a float dtype), every stride >= 0, symmetric padding that gives p's output size, every operand
// under 2^31 elements (cuDNN's 32-bit indexing; torch splits such calls, gpukern's kernels take
// them), and the residual not the output itself.
bool cudnn_conv_can_run(const ConvProblem& p);

// y = conv(x, w) (no bias, no epilogue: the caller adds them) by at::cudnn_convolution_out on the
// current stream with torch's flags (cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32). A
// 1-D problem runs as H = 1. search: cuDNN's algorithm search (torch's cudnn.benchmark mode, one
// search per shape, remembered by torch) whatever cudnn.benchmark says: the race and the calls
// it hands to cuDNN use it, so that cuDNN races, and then runs, with its fastest algorithm (its
// heuristic's first choice ran up to 15% slower than that on ResNet-50's NCHW 3x3 layers); a
// forced "cudnn" follows cudnn.benchmark, as F.conv does.
void cudnn_conv_run(const ConvProblem& p, bool search);

// Whether calls may be raced now: GPUKERN_CONV_RACE is not "0" and torch's deterministic mode is
// off.
bool conv_race_enabled();

// Whether this thread is timing gpukern's side of a race. Caches that a call during a CUDA-graph
// capture cannot use (the converted NCHW filters of conv/igemm/nhwc.cpp) are not used then
// either, so that gpukern's time is what a call replayed from a graph costs: eager calls reuse the
// converted filter, a graph replays the conversion (up to 9 us on ResNet-50's 512 -> 512 3x3
// filter in fp32), and a verdict from eager timing alone kept layers on gpukern that graph
// replays ran 18% slower than cuDNN.
bool conv_race_timing_ours();

// Which side runs a raced problem: gpukern's algorithm; cuDNN's convolution and gpukern's
// elementwise pass for the bias and the epilogue; cuDNN's fused call (cudnn_fused_run); or ATen's
// native depthwise kernel and gpukern's elementwise pass (aten_depthwise_run).
// kCudnn: cuDNN's convolution with its algorithm search (benchmark mode); kCudnnHeuristic: the
// same call by cuDNN's heuristic choice, as torch runs it with cudnn.benchmark off (a separate
// side: on 4-us depthwise layers a searched call once ran 5.9 us where torch's took 3.6).
// kCudnnNhwc: cuDNN's channels_last convolution on NHWC copies of an NCHW problem's input and
// filter, the result copied back (cudnn_nhwc_run).
enum class ConvVendor : int {
  kGpukern = 0,
  kCudnn = 1,
  kCudnnFused = 2,
  kAtenDepthwise = 3,
  kCudnnHeuristic = 4,
  kCudnnNhwc = 5
};

// Whether ATen's native depthwise kernel (at::_conv_depthwise2d, the kernel F.conv2d runs for
// depthwise layers where it does not pick cuDNN: bf16 and fp16 NCHW among others) can run p: a
// 2-D depthwise problem (groups == C, O a multiple of C), a float dtype, an NCHW-contiguous output
// (the kernel writes that layout only), strides >= 0, symmetric padding, every operand under 2^31
// elements, and the residual not the output itself.
bool aten_depthwise_can_run(const ConvProblem& p);

// y = conv(x, w) (no bias: the caller adds it with the epilogue) by at::_conv_depthwise2d_out on
// the current stream.
void aten_depthwise_run(const ConvProblem& p);

// Whether cuDNN's channels_last kernels can run p through NHWC copies (cudnn_nhwc_run):
// cudnn_conv_can_run, a 2-D problem that is not depthwise (c_per_group > 1) whose input is not
// channels_last (its channel stride is not 1: an NCHW tensor or a view of one).
bool cudnn_nhwc_can_run(const ConvProblem& p);

// y = conv(x, w) through channels_last, for the NCHW problems where cuDNN's NCHW kernels trail
// its NHWC ones (ResNet-50's 3x3 and 1x1 layers over 7x7 to 28x28 planes: 1.6-2.3x slower on an
// H100, benchmarks/results/h100_layers_s22d.md; cuDNN's own NCHW path converts the layout too,
// then runs other kernels): the input converted to a packed NHWC copy (conv/layout.h to_nhwc), the
// filter to an OHWI one (the igemm path's per-weight cache, conv/igemm/nhwc.h, in CUTLASS builds:
// reused by eager calls, converted again in a capture and while the race times this side), cuDNN's
// convolution with its algorithm search into an NHWC buffer, then one tiled copy into p.y
// (nhwc_copy_to). With a bias and ReLU and no residual, cuDNN's fused call (conv + bias + ReLU)
// runs in place of the plain one and the function returns true: the epilogue is done; else it
// returns false and the caller adds the bias and the epilogue with its elementwise pass, on p.y.
bool cudnn_nhwc_run(const ConvProblem& p);

// Whether p has a side to race against gpukern's algorithm (cuDNN or ATen's depthwise kernel).
bool conv_race_has_side(const ConvProblem& p);

// Whether cuDNN's fused call can run p: cudnn_conv_can_run, a 2-D problem with a bias and the
// ReLU epilogue (with or without a residual), the one fused epilogue torch exposes from cuDNN.
bool cudnn_fused_can_run(const ConvProblem& p);

// y = relu(conv(x, w) + bias [+ residual]) in one cuDNN call (at::cudnn_convolution_relu, or
// at::cudnn_convolution_add_relu with the residual), on the current stream, with torch's flags.
// torch exposes these only as functions that allocate their output, so the result is a new
// [N, O, OH, OW] tensor in cuDNN's suggested memory format, not written to p.y: the race runs this
// side only where that tensor's strides are p.y's, and the op returns it in place of its own
// output.
at::Tensor cudnn_fused_run(const ConvProblem& p);

// The remembered verdict for p (nullopt: not raced yet).
std::optional<ConvVendor> conv_race_verdict(const ConvProblem& p);

// The verdict the algorithm query (torch_ops.algorithm) reports, which sees neither the bias nor
// the fused epilogue: p's own, else that of p with a contiguous bias (nullopt: neither raced yet).
std::optional<ConvVendor> conv_race_verdict_query(const ConvProblem& p);

// Races ours() against every side that can run p (each one whole call on `stream`, above):
// theirs(kCudnn) and, unless torch's cudnn.benchmark is on, theirs(kCudnnHeuristic) where
// cudnn_conv_can_run(p), cudnn_fused_run(p) where cudnn_fused_can_run(p), theirs(kCudnnNhwc)
// where cudnn_nhwc_can_run(p), theirs(kAtenDepthwise) where aten_depthwise_can_run(p); remembers
// and returns the verdict. The kCudnnNhwc side is timed as gpukern's is (conv_race_timing_ours:
// the filter converted on every call, as a graph replay does) and, not being what torch runs,
// wins over the other library sides only by the race's margin, as gpukern's side does.
// GPUKERN_CONV_RACE_SIDE=<side> (tests and benchmarks; read once): the verdict is that side
// (gpukern, cudnn, cudnn_fused, aten_depthwise, cudnn_heuristic, cudnn_nhwc) wherever it ran in
// the race, whatever the times.
// nullopt, nothing remembered, when `stream` is capturing. A c10::Error from a side (the library
// refusing the problem) rules that side out; no device memory for the race's L2-flush buffer is
// a verdict for ours.
std::optional<ConvVendor> conv_race(const ConvProblem& p, const std::function<void()>& ours,
                                    const std::function<void(ConvVendor)>& theirs,
                                    cudaStream_t stream);

// One call with the race (the dispatch of conv1d and conv2d): run(kGpukern) runs gpukern's
// algorithm, run(kCudnn) cuDNN with its search, run(kCudnnHeuristic) cuDNN by its heuristic
// choice, run(kCudnnNhwc) cuDNN through channels_last copies, run(kAtenDepthwise) ATen's
// depthwise kernel (the last four with gpukern's elementwise pass for bias and epilogue where
// they do not apply it). Unless `raceable`, gpukern's
// algorithm runs; else the remembered verdict decides, or a race on this call when there is none
// (conv_race). Returns the result when it is a tensor of its own (cuDNN's fused call), else an
// undefined tensor (the result is in p.y).
template <typename Run>
at::Tensor conv_run_raced(const ConvProblem& p, bool raceable, cudaStream_t stream, Run&& run) {
  ConvVendor v = ConvVendor::kGpukern;
  if (raceable) {
    std::optional<ConvVendor> verdict = conv_race_verdict(p);
    if (!verdict) {
      verdict = conv_race(p, [&] { run(ConvVendor::kGpukern); },
                          [&](ConvVendor side) { run(side); }, stream);
    }
    v = verdict.value_or(ConvVendor::kGpukern);
  }
  if (v == ConvVendor::kCudnnFused) return cudnn_fused_run(p);
  run(v);
  return at::Tensor();
}

}  // namespace gpukern
