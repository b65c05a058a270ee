//===- LineKernels.cuh - one team of threads per row, for row-wise ops ----===//
//
// The norms, softmax and cross entropy (Normalization.cu,
// NormalizationGrad.cu, Loss.cu) each reduce along lines of a tensor: a
// row of `length` elements, `inner` apart (1 for a last-axis row). Who
// reduces a line depends on its shape:
//   - a Block per line for long contiguous rows: every thread strides over
//     the row (coalesced) and blockSum/blockMax combine the threads;
//   - a Warp per line for contiguous rows up to kWarpLineLength elements: a
//     block per row would leave most of its threads idle; warp shuffles
//     reduce without shared memory or __syncthreads;
//   - a Thread per line when the lines are strided (inner > 1): neighbouring
//     threads take neighbouring lines, so each step of the line loop reads
//     consecutive addresses.
// A kernel is written once against LineTeam<kTeam> and instantiated for
// the three; chooseLineLaunch() picks the team and the grid,
// launchLines() instantiates the kernel for it, and issueOnLines() adds the
// element-type dispatch an entry point needs around both. Every team loops over
// its lines grid-stride, so any grid covers any number of lines, and a team's
// threads enter and leave the loop together (the reductions need them all).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_LINEKERNELS_CUH
#define ZPLAN_RUNTIME_CUDA_LINEKERNELS_CUH

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/ops/NormalizationOps.h"

#include <algorithm>
#include <type_traits>

namespace zplan::cuda {

enum class Team { Thread, Warp, Block };

/// Contiguous lines up to this long go to a warp each.
constexpr int64_t kWarpLineLength = 1024;

template <Team kTeam> struct LineTeam {
  /// This thread's position in its team, and the team's size: the thread
  /// takes elements lane(), lane() + size(), ... of its line.
  __device__ static int lane() {
    if constexpr (kTeam == Team::Block)
      return threadIdx.x;
    else if constexpr (kTeam == Team::Warp)
      return threadIdx.x % 32;
    else
      return 0;
  }
  __device__ static int size() {
    if constexpr (kTeam == Team::Block)
      return blockDim.x;
    else if constexpr (kTeam == Team::Warp)
      return 32;
    else
      return 1;
  }
  /// The team's first line and the step to its next one.
  __device__ static int64_t firstLine() {
    if constexpr (kTeam == Team::Block)
      return blockIdx.x;
    else if constexpr (kTeam == Team::Warp)
      return blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
    else
      return blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  }
  __device__ static int64_t lineStride() {
    if constexpr (kTeam == Team::Block)
      return gridDim.x;
    else if constexpr (kTeam == Team::Warp)
      return int64_t(gridDim.x) * (blockDim.x / 32);
    else
      return int64_t(gridDim.x) * blockDim.x;
  }
  /// The sum (maximum) over the team, returned to all of its threads;
  /// `scratch` is 32 elements of shared memory (used by Block only).
  template <typename T> __device__ static T sum(T value, T *scratch) {
    if constexpr (kTeam == Team::Block)
      return blockSum(value, scratch);
    else if constexpr (kTeam == Team::Warp)
      return warpSum(value);
    else
      return value;
  }
  template <typename T> __device__ static T max(T value, T *scratch) {
    if constexpr (kTeam == Team::Block)
      return blockMax(value, scratch);
    else if constexpr (kTeam == Team::Warp)
      return warpMax(value);
    else
      return value;
  }
};

/// The lines of a tensor seen as [outer, length, inner] (SoftmaxLines):
/// line `line` starts at element first(line), its element j is j * inner
/// further.
struct LineShape {
  int64_t lines = 0, length = 0, inner = 1;

  __device__ int64_t first(int64_t line) const {
    return inner == 1 ? line * length
                      : (line / inner) * length * inner + line % inner;
  }
};

/// The team and grid a line kernel runs with.
struct LineLaunch {
  Team team = Team::Block;
  unsigned blocks = 1, threads = 256;
};

inline LineLaunch chooseLineLaunch(const LineShape &shape,
                                   const DeviceContext &device) {
  LineLaunch launch;
  if (shape.inner > 1) {
    launch.team = Team::Thread;
    launch.blocks = gridFor(shape.lines, launch.threads, device);
  } else if (shape.length <= kWarpLineLength) {
    launch.team = Team::Warp;
    launch.blocks = gridFor(shape.lines * 32, launch.threads, device);
  } else {
    // About 8 elements a thread, within [128, 1024] threads and a whole
    // number of warps (the block reductions need it).
    int64_t threads = (shape.length / 8 + 31) / 32 * 32;
    launch.threads =
        static_cast<unsigned>(std::clamp<int64_t>(threads, 128, 1024));
    launch.blocks = static_cast<unsigned>(std::min<int64_t>(
        shape.lines, std::max(1, device.properties.multiProcessorCount) * 32));
  }
  return launch;
}

/// Calls launch(std::integral_constant<Team, T>{}) for the launch's team:
/// the caller's generic lambda issues its kernel<..., T> there.
template <typename Launch>
void launchLines(const LineLaunch &launch, Launch &&issue) {
  switch (launch.team) {
  case Team::Thread:
    issue(std::integral_constant<Team, Team::Thread>{});
    break;
  case Team::Warp:
    issue(std::integral_constant<Team, Team::Warp>{});
    break;
  case Team::Block:
    issue(std::integral_constant<Team, Team::Block>{});
    break;
  }
}

/// What most row-wise entry points do after their checks: for the float
/// type `type` (of the tensor called `what`), unless there is no element,
/// pick the launch for `shape` and call issue(TypeTag<T>{}, team, launch)
/// to launch kernel<team, T> with it.
template <typename Issue>
Status issueOnLines(const KernelCall &call, const char *what, ElementType type,
                    const LineShape &shape, Issue &&issue) {
  return ops::dispatchFloatType(call.host, what, type, [&](auto tag) {
    if (shape.lines == 0 || shape.length == 0)
      return Status::success();
    LineLaunch launch = chooseLineLaunch(shape, call.device);
    launchLines(launch, [&](auto team) { issue(tag, team, launch); });
    return launched(call);
  });
}

/// The lines a softmax (and softmax_grad) runs along.
inline LineShape softmaxLineShape(const ops::SoftmaxLines &lines) {
  return {lines.outer * lines.inner, lines.length, lines.inner};
}

/// exp in the element's own type (expf for float), as the CPU's std::exp
/// on T.
__device__ inline float typedExp(float x) { return expf(x); }
__device__ inline double typedExp(double x) { return exp(x); }

/// The maximum of a line in its own type, NaN-unaware as the CPU's
/// std::max loop (a NaN never replaces the running maximum; -inf for an
/// empty line). `line` is a pointer, or any view whose [] reads a T (the
/// loss kernels' widened bf16 logits).
template <Team kTeam, typename T, typename Line>
__device__ T lineMaximum(Line line, int64_t length, int64_t inner, T *scratch) {
  using Lines = LineTeam<kTeam>;
  T maximum = T(-INFINITY);
  for (int64_t j = Lines::lane(); j < length; j += Lines::size()) {
    T value = line[j * inner];
    maximum = value > maximum ? value : maximum;
  }
  return Lines::max(maximum, scratch);
}

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_LINEKERNELS_CUH
