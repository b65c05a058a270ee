//===- VerifyProgramBoundaries.cpp - rules 20-22 of zplan-verify-schedule -===//
//
// Why these three are enough for train -> generate -> train (and generation
// inside an accumulation window) to leave nothing stale:
//   - rule 20: no shard or collective token is among a program's arguments
//     or results, so every collective it starts completes in it (the op
//     verifiers give each start exactly one wait) and every gathered copy
//     dies in it (rule 4 releases it there, rule 3 refuses a read after, a
//     return included); the copies that do outlive a program are the
//     persistent groups, the resident set and the carried gather, whose
//     life rules 10-12 and the carry rules bound by @generate_begin and
//     @generate_end (a program may return a view of one: the runtime reads
//     outputs before the next program runs);
//   - rule 21: gradient accumulators and optimizer state are touched by the
//     training step and the optimizer step only: no generation program, no
//     transition and no @forward can change or half-reduce them;
//   - rule 22: an nn op reads a parameter only through a gather, even when
//     a shard is reinterpreted as a tensor on the way (the failure that
//     hook-based ZeRO-3 shows as an empty weight; the nn ops' types already
//     refuse a shard operand itself).
// Tests: test/transforms/verify-schedule-oneplan.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/VerifyProgramBoundaries.h"

#include "compiler/transforms/Programs.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>
#include <string>

using namespace mlir;
using namespace zplan;

/// A shard or a collective's token: values that mean something only inside
/// the program that made them.
static bool isZeroValueType(Type type) {
  return llvm::isa<zero::ShardType, zero::GatherTokenType,
                   zero::ReduceTokenType>(type);
}

/// Rule 20 for one program's arguments and results.
static LogicalResult verifyBoundary(func::FuncOp func) {
  for (BlockArgument argument : func.getArguments())
    if (isZeroValueType(argument.getType()))
      return func.emitError()
             << "@" << func.getSymName() << " takes " << argument.getType()
             << " (argument #" << argument.getArgNumber()
             << "): a shard or a collective would cross a program boundary; "
                "a program's arguments are plan inputs (tensors)";
  auto returnOp =
      llvm::dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (!returnOp)
    return success();
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    if (isZeroValueType(operand.getType()))
      return returnOp.emitError()
             << "@" << func.getSymName() << " returns " << operand.getType()
             << " (result #" << index
             << "): a shard or a collective would cross a program boundary; "
                "a program's results are plan outputs (tensors)";
  }
  return success();
}

/// What gradient state `op` touches ("group @g0", "parameter 'w'"), or
/// nothing when it touches none. `onlyIn` receives the one program allowed
/// to.
static std::optional<std::string> gradientState(Operation *op,
                                                llvm::StringRef &onlyIn) {
  onlyIn = kTrainStepName;
  if (auto read = llvm::dyn_cast<zero::GradShardOp>(op))
    return "the gradient accumulator of parameter '" + read.getParam().str() +
           "'";
  if (auto start = llvm::dyn_cast<zero::ReduceScatterStartOp>(op))
    return start.getGroupAttr()
               ? "the gradients of group @" +
                     start.getGroupAttr().getValue().str() + " (collective)"
               : std::string("gradients (collective)");
  if (llvm::isa<zero::ReduceScatterWaitOp>(op))
    return std::string("gradient accumulators (reduce-scatter wait)");
  if (llvm::isa<zero::AllReduceOp>(op))
    return std::string("replicated gradients (all-reduce)");
  if (auto update = llvm::dyn_cast<zero::OptimizerUpdateOp>(op)) {
    onlyIn = kOptimizerStepName;
    return "the gradient and optimizer state of group @" +
           update.getGroup().str();
  }
  return std::nullopt;
}

/// Rule 21 for one program.
static LogicalResult verifyGradientState(func::FuncOp func) {
  WalkResult walk = func.walk([&](Operation *op) {
    llvm::StringRef onlyIn;
    std::optional<std::string> state = gradientState(op, onlyIn);
    if (!state || func.getSymName() == onlyIn)
      return WalkResult::advance();
    op->emitOpError() << "touches " << *state << " in @" << func.getSymName()
                      << "; only @" << onlyIn
                      << " may: the gradient accumulators and optimizer "
                         "state belong to @"
                      << kTrainStepName << " and @" << kOptimizerStepName
                      << ", so generation (also inside a gradient-"
                         "accumulation window) and @"
                      << kForwardName << " leave them untouched";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

/// The parameter shard `value` is derived from without passing a gather
/// (through any op outside the nn dialect: a cast, a view), and the first
/// such op; nullptr when there is none.
static zero::ShardOp shardBehind(Value value, Operation *&through) {
  SmallVector<std::pair<Value, Operation *>> worklist{{value, nullptr}};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!worklist.empty()) {
    auto [current, via] = worklist.pop_back_val();
    Operation *op = current.getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (auto shard = llvm::dyn_cast<zero::ShardOp>(op)) {
      through = via ? via : op;
      return shard;
    }
    // A gather turns a shard into the whole parameter; an nn op's operands
    // are checked where it is met.
    if (llvm::isa<zero::GatherWaitOp, zero::ResidentReadOp, zero::CarryWaitOp>(
            op) ||
        llvm::isa_and_nonnull<nn::NNDialect>(op->getDialect()))
      continue;
    for (Value operand : op->getOperands())
      worklist.push_back({operand, via ? via : op});
  }
  return nullptr;
}

/// Rule 22 for one program.
static LogicalResult verifyProgramReads(func::FuncOp func) {
  WalkResult walk = func.walk([&](Operation *op) {
    if (!llvm::isa_and_nonnull<nn::NNDialect>(op->getDialect()))
      return WalkResult::advance();
    for (Value operand : op->getOperands()) {
      Operation *through = nullptr;
      zero::ShardOp shard = shardBehind(operand, through);
      if (!shard)
        continue;
      op->emitOpError() << "reads parameter '" << shard.getParam()
                        << "' from its shard through '" << through->getName()
                        << "', without gathering it: it would see this "
                           "rank's slice only; an nn op reads a parameter "
                           "from zero.gather_wait, zero.resident_read or "
                           "zero.carry_wait";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Runs `verify` on every program; a function that is not one block is
/// left to rule 6.
static LogicalResult
verifyEachProgram(ModuleOp module,
                  llvm::function_ref<LogicalResult(func::FuncOp)> verify) {
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && func.getBody().hasOneBlock() &&
        failed(verify(func)))
      return failure();
  return success();
}

LogicalResult zplan::verifyProgramBoundaries(ModuleOp module) {
  return verifyEachProgram(module, [](func::FuncOp func) {
    return success(succeeded(verifyBoundary(func)) &&
                   succeeded(verifyGradientState(func)));
  });
}

LogicalResult zplan::verifyGatheredReads(ModuleOp module) {
  return verifyEachProgram(module, verifyProgramReads);
}
