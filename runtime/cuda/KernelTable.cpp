//===- KernelTable.cpp - compute opcodes to CUDA entry points -------------===//
//
// The CUDA twin of runtime/cpu/Kernels.cpp's table, and the shared host
// pieces of every entry point (launch and library error checks, grid
// sizes, the texts of device-reported errors). A CUDA build must have an
// entry for every opcode the CPU backend has: test/unit/CudaCoverageTest.cpp
// says which are missing, on any machine.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaKernels.h"

#include "runtime/plan/Opcodes.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

using namespace zplan;
using namespace zplan::cuda;

namespace {

/// Opcodes of compute ops are below this (plan.proto numbers them so).
constexpr size_t kKernelTableSize = 100;

const std::array<KernelFunction, kKernelTableSize> &kernelTable() {
  static const std::array<KernelFunction, kKernelTableSize> table = [] {
    const std::vector<std::pair<plan::Opcode, KernelFunction>> kernels = {
        // Elementwise.cu
        // ELEMENTWISE-BEGIN
        {plan::OPCODE_NEG, runNeg},
        {plan::OPCODE_ABS, runAbs},
        {plan::OPCODE_SQRT, runSqrt},
        {plan::OPCODE_RECIPROCAL, runReciprocal},
        {plan::OPCODE_EXP, runExp},
        {plan::OPCODE_LOG, runLog},
        {plan::OPCODE_ERF, runErf},
        {plan::OPCODE_TANH, runTanh},
        {plan::OPCODE_SIGMOID, runSigmoid},
        {plan::OPCODE_RELU, runRelu},
        {plan::OPCODE_COS, runCos},
        {plan::OPCODE_SIN, runSin},
        {plan::OPCODE_SILU, runSilu},
        {plan::OPCODE_GELU, runGelu},
        {plan::OPCODE_ADD, runAdd},
        {plan::OPCODE_SUB, runSub},
        {plan::OPCODE_MUL, runMul},
        {plan::OPCODE_DIV, runDiv},
        {plan::OPCODE_POW, runPow},
        {plan::OPCODE_MAX, runMax},
        {plan::OPCODE_MIN, runMin},
        {plan::OPCODE_EQUAL, runEqual},
        {plan::OPCODE_LESS, runLess},
        {plan::OPCODE_GREATER, runGreater},
        {plan::OPCODE_WHERE, runWhere},
        {plan::OPCODE_CAST, runCast},
        // ELEMENTWISE-END
        // Matmul.cpp, Attention.cu, AttentionGrad.cu, KvCache.cu
        // ATTENTION-BEGIN
        {plan::OPCODE_MATMUL, runMatmul},
        {plan::OPCODE_ATTENTION, runAttention},
        {plan::OPCODE_ATTENTION_GRAD, runAttentionGrad},
        {plan::OPCODE_CACHE_APPEND, runCacheAppend},
        {plan::OPCODE_CACHED_ATTENTION, runCachedAttention},
        // ATTENTION-END
        // Normalization.cu, NormalizationGrad.cu, Loss.cu, Optimizers.cu,
        // ActivationGrad.cu
        // NORMALIZATION-BEGIN
        {plan::OPCODE_LAYER_NORM, runLayerNorm},
        {plan::OPCODE_RMS_NORM, runRmsNorm},
        {plan::OPCODE_SOFTMAX, runSoftmax},
        {plan::OPCODE_LAYER_NORM_GRAD, runLayerNormGrad},
        {plan::OPCODE_RMS_NORM_GRAD, runRmsNormGrad},
        {plan::OPCODE_SOFTMAX_GRAD, runSoftmaxGrad},
        {plan::OPCODE_CROSS_ENTROPY, runCrossEntropy},
        {plan::OPCODE_CROSS_ENTROPY_GRAD, runCrossEntropyGrad},
        {plan::OPCODE_GELU_GRAD, runGeluGrad},
        {plan::OPCODE_ADAMW, runAdamW},
        {plan::OPCODE_SGD, runSgd},
        // NORMALIZATION-END
        // Reductions.cu, DataMovement.cu, ScatterGrad.cu
        // MOVEMENT-BEGIN
        {plan::OPCODE_REDUCE_MEAN, runReduceMean},
        {plan::OPCODE_REDUCE_SUM, runReduceSum},
        {plan::OPCODE_REDUCE_MAX, runReduceMax},
        {plan::OPCODE_TRANSPOSE, runTranspose},
        {plan::OPCODE_SLICE, runSlice},
        {plan::OPCODE_CONCAT, runConcat},
        {plan::OPCODE_GATHER, runGather},
        {plan::OPCODE_EMBEDDING, runEmbedding},
        {plan::OPCODE_EXPAND, runExpand},
        {plan::OPCODE_RESHAPE, runReshape},
        {plan::OPCODE_EMBEDDING_GRAD, runEmbeddingGrad},
        {plan::OPCODE_GATHER_GRAD, runGatherGrad},
        {plan::OPCODE_SLICE_GRAD, runSliceGrad},
        // MOVEMENT-END
    };
    std::array<KernelFunction, kKernelTableSize> byOpcode{};
    for (const auto &[opcode, function] : kernels)
      if (static_cast<size_t>(opcode) < kKernelTableSize)
        byOpcode[opcode] = function;
    return byOpcode;
  }();
  return table;
}

} // namespace

KernelFunction zplan::cuda::findKernel(plan::Opcode opcode) {
  auto index = static_cast<size_t>(opcode);
  return index < kKernelTableSize ? kernelTable()[index] : nullptr;
}

const char *zplan::cuda::kernelErrorText(KernelError error) {
  switch (error) {
  case KernelError::None:
    return "no error";
  case KernelError::IndexOutOfRange:
    return "an index is outside the table it selects from";
  case KernelError::LabelOutOfRange:
    return "a label is outside [0, classes) and is not ignore_index";
  case KernelError::PositionOutOfRange:
    return "a cache position is outside [0, max_seq_len)";
  case KernelError::HyperParameterOutOfRange:
    return "hyper bias corrections [6] and [7] must be in (0, 1] "
           "(1 - beta^t, t >= 1)";
  case KernelError::DivisionByZero:
    return "integer division by zero";
  }
  return "an unknown device-side error";
}

Status zplan::cuda::launched(const KernelCall &call) {
  return checkCuda(call, cudaGetLastError(), "kernel launch");
}

Status zplan::cuda::checkCuda(const KernelCall &call, cudaError_t status,
                              const char *what) {
  if (status == cudaSuccess)
    return Status::success();
  return call.error(std::string(what) + " failed: " +
                    cudaGetErrorString(status));
}

Status zplan::cuda::checkCublas(const KernelCall &call, cublasStatus_t status,
                                const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  return call.error(std::string(what) + " failed: " +
                    cublasGetStatusString(status));
}

unsigned zplan::cuda::gridFor(int64_t count, unsigned threads,
                              const DeviceContext &device) {
  int64_t needed = (count + threads - 1) / threads;
  // A few waves of full occupancy; a grid-stride loop covers the rest.
  int64_t cap = std::max(1, device.properties.multiProcessorCount) * 32;
  return static_cast<unsigned>(std::clamp<int64_t>(needed, 1, cap));
}
