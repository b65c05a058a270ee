//===- Opcodes.cpp - the table of instruction opcodes ---------------------===//
//
// The rows of Opcodes.h. A unit test (PlanLoaderTest) checks that every
// value of plan.proto's Opcode has exactly one row, named after the enum
// value, so that a new opcode cannot be added to one side only.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/Opcodes.h"

using namespace zplan::plan;

namespace {

// Each row: opcode, name, queue, kind, requiresGroup, showsGroup.
constexpr OpcodeInfo kOpcodes[] = {
    {OPCODE_NEG, "neg", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_ABS, "abs", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SQRT, "sqrt", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_RECIPROCAL, "reciprocal", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_EXP, "exp", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_LOG, "log", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_ERF, "erf", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_TANH, "tanh", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SIGMOID, "sigmoid", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_RELU, "relu", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_COS, "cos", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SIN, "sin", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SILU, "silu", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_GELU, "gelu", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_ADD, "add", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SUB, "sub", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_MUL, "mul", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_DIV, "div", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_POW, "pow", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_MAX, "max", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_MIN, "min", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_EQUAL, "equal", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_LESS, "less", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_GREATER, "greater", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_WHERE, "where", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_CAST, "cast", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_MATMUL, "matmul", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_ATTENTION, "attention", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_CACHED_ATTENTION, "cached_attention", COMPUTE, OpcodeKind::Kernel,
     false, false},
    {OPCODE_LAYER_NORM, "layer_norm", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_RMS_NORM, "rms_norm", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SOFTMAX, "softmax", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_REDUCE_MEAN, "reduce_mean", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_REDUCE_SUM, "reduce_sum", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_REDUCE_MAX, "reduce_max", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_CROSS_ENTROPY, "cross_entropy", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_CROSS_ENTROPY_GRAD, "cross_entropy_grad", COMPUTE,
     OpcodeKind::Kernel, false, false},
    {OPCODE_TOKEN_LOGPROBS, "token_logprobs", COMPUTE, OpcodeKind::Kernel,
     false, false},
    {OPCODE_TOKEN_LOGPROBS_GRAD, "token_logprobs_grad", COMPUTE,
     OpcodeKind::Kernel, false, false},
    {OPCODE_TRANSPOSE, "transpose", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_SLICE, "slice", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_CONCAT, "concat", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_GATHER, "gather", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_EMBEDDING, "embedding", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_EXPAND, "expand", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_RESHAPE, "reshape", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_CACHE_APPEND, "cache_append", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_TOKEN_ENTROPY, "token_entropy", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_EMBEDDING_GRAD, "embedding_grad", COMPUTE, OpcodeKind::Kernel,
     false, false},
    {OPCODE_GATHER_GRAD, "gather_grad", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_SLICE_GRAD, "slice_grad", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_LAYER_NORM_GRAD, "layer_norm_grad", COMPUTE, OpcodeKind::Kernel,
     false, false},
    {OPCODE_RMS_NORM_GRAD, "rms_norm_grad", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_SOFTMAX_GRAD, "softmax_grad", COMPUTE, OpcodeKind::Kernel, false,
     false},
    {OPCODE_ATTENTION_GRAD, "attention_grad", COMPUTE, OpcodeKind::Kernel,
     false, false},
    {OPCODE_GELU_GRAD, "gelu_grad", COMPUTE, OpcodeKind::Kernel, false, false},
    {OPCODE_ADAMW, "adamw", COMPUTE, OpcodeKind::Kernel, true, true},
    {OPCODE_SGD, "sgd", COMPUTE, OpcodeKind::Kernel, true, true},
    {OPCODE_ALL_GATHER, "all_gather", COMM, OpcodeKind::Collective, true, true},
    {OPCODE_REDUCE_SCATTER, "reduce_scatter", COMM, OpcodeKind::Collective,
     true, true},
    {OPCODE_ALL_REDUCE, "all_reduce", COMM, OpcodeKind::Collective, false,
     false},
    {OPCODE_RESIDENT_GATHER, "resident_gather", COMM, OpcodeKind::Collective,
     true, true},
    {OPCODE_CARRY_GATHER, "carry_gather", COMM, OpcodeKind::Collective, true,
     true},
    {OPCODE_GATHER_WAIT, "gather_wait", COMPUTE, OpcodeKind::Bookkeeping, true,
     true},
    {OPCODE_RELEASE, "release", COMPUTE, OpcodeKind::Bookkeeping, false, true},
    {OPCODE_REDUCE_SCATTER_WAIT, "reduce_scatter_wait", COMPUTE,
     OpcodeKind::Bookkeeping, true, true},
    {OPCODE_RESIDENT_RELEASE, "resident_release", COMPUTE,
     OpcodeKind::Bookkeeping, true, true},
    {OPCODE_CARRY_WAIT, "carry_wait", COMPUTE, OpcodeKind::Bookkeeping, true,
     true},
    {OPCODE_CARRY_DRAIN, "carry_drain", COMPUTE, OpcodeKind::Bookkeeping, true,
     true},
    {OPCODE_TIER_FETCH, "tier_fetch", COMM, OpcodeKind::TierCopy, true, false},
    {OPCODE_TIER_STORE, "tier_store", COMM, OpcodeKind::TierCopy, true, false},
    {OPCODE_TIER_WAIT, "tier_wait", COMPUTE, OpcodeKind::Bookkeeping, true,
     false},
    {OPCODE_ZERO, "zero", COMPUTE, OpcodeKind::Fill, true, false},
};

constexpr size_t kOpcodeCount = sizeof(kOpcodes) / sizeof(kOpcodes[0]);

/// Rows in increasing enum order, so that findOpcode may binary-search.
constexpr bool rowsSorted() {
  for (size_t i = 1; i < kOpcodeCount; ++i)
    if (kOpcodes[i - 1].opcode >= kOpcodes[i].opcode)
      return false;
  return true;
}
static_assert(rowsSorted(), "kOpcodes rows must follow the enum's order");

} // namespace

const OpcodeInfo *zplan::plan::opcodesBegin() { return kOpcodes; }
const OpcodeInfo *zplan::plan::opcodesEnd() { return kOpcodes + kOpcodeCount; }

const OpcodeInfo *zplan::plan::findOpcode(Opcode opcode) {
  size_t low = 0, high = kOpcodeCount;
  while (low < high) {
    size_t middle = (low + high) / 2;
    if (kOpcodes[middle].opcode < opcode)
      low = middle + 1;
    else
      high = middle;
  }
  return low < kOpcodeCount && kOpcodes[low].opcode == opcode ? &kOpcodes[low]
                                                              : nullptr;
}

std::optional<Opcode> zplan::plan::opcodeFromName(std::string_view name) {
  for (const OpcodeInfo &info : kOpcodes)
    if (info.name == name)
      return info.opcode;
  return std::nullopt;
}

std::string zplan::plan::opcodeName(Opcode opcode) {
  if (const OpcodeInfo *info = findOpcode(opcode))
    return std::string(info->name);
  return "opcode " + std::to_string(static_cast<int>(opcode));
}
