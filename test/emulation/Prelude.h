//===- Prelude.h - CUDA device code as plain C++ (SIMT emulation) ---------===//
//
// Force-included (-include) before every runtime/cuda source the emulation
// test compiles with g++: the CUDA headers give the types (cudaStream_t,
// dim3, cublasHandle_t...), and macros below turn the device-side language
// into calls of the emulator (Runtime.cpp):
//  - every CUDA thread of a block is a fiber (its own stack, switched with
//    _setjmp/_longjmp on one OS thread); the blocks of a grid run one after
//    another, each block's threads interleaved only at __syncthreads and
//    warp shuffles, in an order shuffled at every such point (a kernel
//    that is right only in one order -- a missing barrier -- differs from
//    the CPU), and a barrier that not every thread reaches is a deadlock
//    the emulator reports (a kernel bug on hardware too);
//  - static __shared__ variables are function statics (one block at a time
//    runs, so one copy is the block's), dynamic `extern __shared__` arrays
//    (rewritten by transform.py) one buffer of the launch's size; both are
//    filled with 0xff bytes (NaN, -1) at each block's start, as shared
//    memory starts undefined on a device (EmulatedBackend.cpp poisons the
//    workspace before each kernel likewise);
//  - atomics are plain read-modify-writes (fibers never preempt);
//  - cudaMemsetAsync/cudaMemcpyAsync act at once on host memory, which
//    stands for device memory; cuBLAS GEMMs are a reference loop with
//    cuBLAS's argument checks and semantics (column-major, op(A), leading
//    dimensions, strides, host alpha/beta, beta == 0 never reads C).
// Launches check CUDA's limits (<= 1024 threads per block, gridDim.y/z <=
// 65535, dynamic shared memory above 48 KiB only after
// cudaFuncSetAttribute) and fail as cudaGetLastError would.
//
// After helper B's private emulator (/work/wt/B_emu: one std::thread per
// CUDA thread), generalized to 3-D launches, every intrinsic the kernels
// use, and fibers for speed.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_EMULATION_PRELUDE_H
#define ZPLAN_TEST_EMULATION_PRELUDE_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace emu {

struct Dim {
  unsigned x = 1, y = 1, z = 1;
};
inline Dim toDim(dim3 d) { return {d.x, d.y, d.z}; }
template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
Dim toDim(I n) {
  return {static_cast<unsigned>(n), 1, 1};
}

// The running fiber's coordinates (set by the scheduler at each switch).
extern Dim threadIndex, blockIndex, blockDimension, gridDimension;

/// Runs `body(context)` for every thread of a grid; returns the launch's
/// cudaError_t (invalid configuration) without running anything on error.
cudaError_t runGrid(Dim grid, Dim block, size_t dynamicBytes,
                    void (*body)(void *), void *context);
void recordLaunchError(cudaError_t error);
/// Notes that the launch at `site` ("File.cu:line kernel", transform.py)
/// ran; written at exit to $ZPLAN_EMULATION_LAUNCHES (launch_coverage.py).
void recordLaunchSite(const char *site);
cudaError_t takeLastError();
void *dynamicSharedBuffer();
/// Fills a static __shared__ variable with 0xff bytes once per block.
void poisonShared(void *variable, size_t bytes);

/// __syncthreads: waits until every live thread of the block is here.
void syncThreads();
/// A warp-wide exchange: publishes `bits` for this lane, waits for the
/// warp, returns lane `source`'s bits (this lane's when `source` is out of
/// the warp), then waits again so the slots can be reused.
uint64_t warpExchange(uint64_t bits, int source);
/// This thread's lane and the number of threads in its warp.
int laneId();

template <typename T> T *dynamicShared() {
  return static_cast<T *>(dynamicSharedBuffer());
}

template <typename G, typename B, typename F, typename... A>
void launch(const char *site, G grid, B block, size_t shared, cudaStream_t,
            F kernel, A... args) {
  recordLaunchSite(site);
  struct Context {
    F &kernel;
    std::tuple<A...> &args;
  };
  std::tuple<A...> stored(args...);
  Context context{kernel, stored};
  recordLaunchError(runGrid(
      toDim(grid), toDim(block), shared,
      [](void *raw) {
        auto &c = *static_cast<Context *>(raw);
        std::apply(c.kernel, c.args); // by-value kernel parameters copy
      },
      &context));
}

template <typename T> T shuffleTo(T value, int source) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a wide type");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warpExchange(bits, source);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
template <typename T> T shflSync(T v, int lane, int width = 32) {
  return shuffleTo(v, (laneId() & ~(width - 1)) + (lane & (width - 1)));
}
template <typename T> T shflXorSync(T v, int mask, int width = 32) {
  int lane = laneId();
  int source = lane ^ mask;
  return shuffleTo(v, (source & ~(width - 1)) == (lane & ~(width - 1)) ? source
                                                                       : lane);
}
template <typename T> T shflDownSync(T v, unsigned delta, int width = 32) {
  int lane = laneId(), source = lane + static_cast<int>(delta);
  return shuffleTo(v, (source & ~(width - 1)) == (lane & ~(width - 1)) ? source
                                                                       : lane);
}
template <typename T> T shflUpSync(T v, unsigned delta, int width = 32) {
  int lane = laneId(), source = lane - static_cast<int>(delta);
  return shuffleTo(v, source >= (lane & ~(width - 1)) ? source : lane);
}

// Atomics: fibers switch only at barriers, so a plain update is atomic.
template <typename T> T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}
template <typename T> T atomicSub(T *address, T value) {
  T old = *address;
  *address = old - value;
  return old;
}
template <typename T> T atomicMax(T *address, T value) {
  T old = *address;
  *address = std::max(old, value);
  return old;
}
template <typename T> T atomicMin(T *address, T value) {
  T old = *address;
  *address = std::min(old, value);
  return old;
}
template <typename T> T atomicExch(T *address, T value) {
  T old = *address;
  *address = value;
  return old;
}
template <typename T> T atomicCAS(T *address, T compare, T value) {
  T old = *address;
  if (old == compare)
    *address = value;
  return old;
}

template <typename To, typename From> To bitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

cudaError_t memsetAsync(void *target, int value, size_t bytes, cudaStream_t);
cudaError_t memcpyAsync(void *target, const void *source, size_t bytes,
                        cudaMemcpyKind, cudaStream_t);
/// cudaFuncSetAttribute(kernel, attribute, value), with `arguments` its
/// three arguments' source text (the kernel's names it).
cudaError_t setAttribute(const char *arguments, cudaFuncAttribute attribute,
                         int value);
template <typename F>
cudaError_t funcSetAttribute(const char *arguments, F, cudaFuncAttribute a,
                             int value) {
  return setAttribute(arguments, a, value);
}
const char *errorString(cudaError_t error);
const char *cublasStatusString(cublasStatus_t status);

cublasStatus_t gemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m,
    int n, int k, const void *alpha, const void *A, cudaDataType_t Atype,
    int lda, long long strideA, const void *B, cudaDataType_t Btype, int ldb,
    long long strideB, const void *beta, void *C, cudaDataType_t Ctype, int ldc,
    long long strideC, int batchCount, cublasComputeType_t compute,
    cublasGemmAlgo_t);
cublasStatus_t gemmEx(cublasHandle_t, cublasOperation_t transa,
                      cublasOperation_t transb, int m, int n, int k,
                      const void *alpha, const void *A, cudaDataType_t Atype,
                      int lda, const void *B, cudaDataType_t Btype, int ldb,
                      const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                      cublasComputeType_t compute, cublasGemmAlgo_t);

} // namespace emu

// Device-side intrinsics.
using emu::atomicAdd;
using emu::atomicCAS;
using emu::atomicExch;
using emu::atomicMax;
using emu::atomicMin;
using emu::atomicSub;
template <typename T> T __ldg(const T *p) { return *p; }
inline float __int_as_float(int v) { return emu::bitCast<float>(v); }
inline int __float_as_int(float v) { return emu::bitCast<int>(v); }
inline float __uint_as_float(unsigned v) { return emu::bitCast<float>(v); }
inline unsigned __float_as_uint(float v) { return emu::bitCast<unsigned>(v); }
inline double __longlong_as_double(long long v) {
  return emu::bitCast<double>(v);
}
inline long long __double_as_longlong(double v) {
  return emu::bitCast<long long>(v);
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __forceinline__
#define __forceinline__ inline
#undef __shared__
#define __shared__ static
#undef __constant__
#define __constant__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __restrict__
#define __restrict__
#define threadIdx emu::threadIndex
#define blockIdx emu::blockIndex
#define blockDim emu::blockDimension
#define gridDim emu::gridDimension
#define __syncthreads() emu::syncThreads()
#define __syncwarp(...) ((void)0)
#define __shfl_sync(mask, ...) emu::shflSync(__VA_ARGS__)
#define __shfl_xor_sync(mask, ...) emu::shflXorSync(__VA_ARGS__)
#define __shfl_down_sync(mask, ...) emu::shflDownSync(__VA_ARGS__)
#define __shfl_up_sync(mask, ...) emu::shflUpSync(__VA_ARGS__)

// Runtime and cuBLAS calls the kernels' host code makes.
#define cudaMemsetAsync emu::memsetAsync
#define cudaMemcpyAsync emu::memcpyAsync
#define cudaGetLastError() emu::takeLastError()
#define cudaFuncSetAttribute(...)                                              \
  emu::funcSetAttribute(#__VA_ARGS__, __VA_ARGS__)
#define cudaGetErrorString emu::errorString
#define cublasGetStatusString emu::cublasStatusString
#define cublasGemmEx emu::gemmEx
#define cublasGemmStridedBatchedEx emu::gemmStridedBatchedEx

#endif // ZPLAN_TEST_EMULATION_PRELUDE_H
