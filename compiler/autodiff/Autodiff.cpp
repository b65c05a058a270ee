//===- Autodiff.cpp - the zplan-autodiff pass -----------------------------===//
//
// Reverse-mode automatic differentiation of @forward into
// @train_micro_step (see Passes.td for the steps and before/after IR; the
// loss is built in Loss.cpp, the per-op rules live in the *Rules.cpp files
// behind GradientRegistry). Tests: test/transforms/autodiff-*.mlir,
// autodiff-models.test (the fixtures) and autodiff-numeric.test (every
// gradient against finite differences).
//
// The backward ops are appended after the loss in reverse program order, so
// every cotangent is complete before it is read (all uses of a value come
// after its definition, hence are differentiated before it). A parameter's
// gradient is final once every backward-relevant use of every gathered
// copy of it has been processed; its reduce-scatter starts right there, so
// the collective overlaps the rest of the backward pass.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"
#include "compiler/autodiff/Loss.h"
#include "compiler/transforms/Passes.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zplan-autodiff"

namespace zplan {
#define GEN_PASS_DEF_AUTODIFF
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

namespace {

bool isFloatTensor(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type && llvm::isa<FloatType>(type.getElementType());
}

/// One parameter's gradient as it is being accumulated.
struct ParameterGradient {
  /// Its gathered copies in the function (one per gather_wait result).
  SmallVector<Value> copies;
  /// Uses of the copies by backward-relevant ops not yet differentiated.
  int64_t pendingUses = 0;
  /// The token of its reduce-scatter, once started.
  Value token;
};

class Differentiator {
public:
  Differentiator(func::FuncOp train) : train(train), builder(train) {}

  /// Appends loss, backward ops, reduce-scatters and the new return.
  LogicalResult run(const LossOptions &options);

private:
  LogicalResult collectParameters();
  void markActive();
  void markNeeded(Value loss);
  LogicalResult differentiate(Operation *op);
  void accumulate(Value value, Value gradient, Location loc);
  void startReduceScatter(FlatSymbolRefAttr param);

  func::FuncOp train;
  OpBuilder builder;
  GradientRegistry registry;
  /// Float values that depend on a parameter.
  llvm::DenseSet<Value> active;
  /// Active values the loss depends on: the ones that get a cotangent.
  llvm::DenseSet<Value> needed;
  /// Cotangents so far.
  llvm::DenseMap<Value, Value> gradients;
  /// Parameters in order of first gather.
  llvm::MapVector<Attribute, ParameterGradient> parameters;
  /// Gathered copy -> the parameter it is a copy of.
  llvm::DenseMap<Value, FlatSymbolRefAttr> parameterOf;
  /// Reduce-scatters in the order they were started.
  SmallVector<FlatSymbolRefAttr> started;
};

} // namespace

LogicalResult Differentiator::collectParameters() {
  WalkResult result = train.walk([&](zero::GatherWaitOp wait) {
    zero::GatherStartOp start = wait.getStart();
    for (auto [shard, copy] : llvm::zip(start.getShards(), wait.getTensors())) {
      auto read = shard.getDefiningOp<zero::ShardOp>();
      if (!read) {
        wait.emitError("zplan-autodiff: a gathered tensor does not come from "
                       "a zero.shard read of a parameter");
        return WalkResult::interrupt();
      }
      // An integer or boolean parameter (a mask buffer stored as an
      // initializer) is not trained, nor is a frozen one (a buffer, or
      // --freeze): no gradient, no reduce-scatter. For autodiff its gathered
      // copy is a constant.
      FlatSymbolRefAttr param = read.getParamAttr();
      auto declared =
          SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(read, param);
      if (!isFloatTensor(copy) || (declared && declared.isFrozen()))
        continue;
      parameters[param].copies.push_back(copy);
      parameterOf[copy] = param;
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

void Differentiator::markActive() {
  for (Operation &op : train.front()) {
    // A gathered copy is active when it is a trained parameter's (frozen
    // parameters are constants).
    if (llvm::isa<zero::GatherWaitOp>(op)) {
      for (Value result : op.getResults())
        if (parameterOf.count(result))
          active.insert(result);
      continue;
    }
    // A stop-gradient op's result is a constant, whatever it reads.
    if (op.hasAttr(kStopGradientAttr))
      continue;
    bool anyActiveOperand = llvm::any_of(
        op.getOperands(), [&](Value operand) { return active.count(operand); });
    if (!anyActiveOperand)
      continue;
    for (Value result : op.getResults())
      if (isFloatTensor(result))
        active.insert(result);
  }
}

void Differentiator::markNeeded(Value loss) {
  if (!active.count(loss))
    return;
  needed.insert(loss);
  for (Operation &op : llvm::reverse(train.front())) {
    if (llvm::none_of(op.getResults(),
                      [&](Value result) { return needed.count(result); }))
      continue;
    for (OpOperand &operand : op.getOpOperands()) {
      if (!active.count(operand.get()))
        continue;
      needed.insert(operand.get());
      auto param = parameterOf.find(operand.get());
      if (param != parameterOf.end())
        ++parameters[param->second].pendingUses;
    }
  }
}

void Differentiator::accumulate(Value value, Value gradient, Location loc) {
  Value &slot = gradients[value];
  if (!slot) {
    slot = gradient;
    return;
  }
  // d(loss)/d(value) sums over the uses of value.
  slot = builder.create<nn::AddOp>(loc, value.getType(), slot, gradient);
}

void Differentiator::startReduceScatter(FlatSymbolRefAttr param) {
  ParameterGradient &entry = parameters[param];
  Location loc =
      NameLoc::get(builder.getStringAttr(param.getValue() + "/grad"));
  Value sum;
  for (Value copy : entry.copies) {
    Value gradient = gradients.lookup(copy);
    if (!gradient)
      continue;
    sum = sum ? builder.create<nn::AddOp>(loc, copy.getType(), sum, gradient)
                    .getResult()
              : gradient;
  }
  if (!sum) {
    // Uniform for every parameter: one that does not reach the loss reduces
    // zeros (its accumulator stays as it was).
    auto type = llvm::cast<RankedTensorType>(entry.copies.front().getType());
    GradientBuilder zeros(builder, loc, [](Value) { return false; });
    sum = zeros.constant(type, 0.0);
  }
  entry.token = builder.create<zero::ReduceScatterStartOp>(loc, sum);
  started.push_back(param);
  LLVM_DEBUG(llvm::dbgs() << "zplan-autodiff: reduce-scatter " << started.size()
                          << " starts for " << param << "\n");
}

LogicalResult Differentiator::differentiate(Operation *op) {
  const GradientRule *rule = registry.lookup(op->getName().getStringRef());
  if (!rule)
    return op->emitError() << "no gradient rule for '" << op->getName()
                           << "' at node '" << nodeName(op) << "'";
  SmallVector<Value> resultGradients;
  for (Value result : op->getResults())
    resultGradients.push_back(gradients.lookup(result));
  SmallVector<Value> operandGradients(op->getNumOperands());
  Location loc = gradientLocation(op);
  GradientBuilder gradientBuilder(
      builder, loc, [&](Value value) { return needed.count(value) > 0; });
  if (failed((*rule)(gradientBuilder, op, resultGradients, operandGradients)))
    return failure();
  for (auto [operand, gradient] :
       llvm::zip(op->getOperands(), operandGradients)) {
    if (!gradient || !needed.count(operand))
      continue;
    if (gradient.getType() != operand.getType())
      return op->emitError()
             << "zplan-autodiff: the gradient rule of '" << op->getName()
             << "' at node '" << nodeName(op) << "' made a cotangent of type "
             << gradient.getType() << " for an operand of type "
             << operand.getType();
    accumulate(operand, gradient, loc);
  }
  // A copy's uses are done: once all of a parameter's are, its gradient is
  // final.
  for (Value operand : op->getOperands()) {
    auto param = parameterOf.find(operand);
    if (param == parameterOf.end() || !needed.count(operand))
      continue;
    if (--parameters[param->second].pendingUses == 0)
      startReduceScatter(param->second);
  }
  return success();
}

LogicalResult Differentiator::run(const LossOptions &options) {
  Block &body = train.front();
  auto forwardReturn = llvm::cast<func::ReturnOp>(body.getTerminator());
  builder.setInsertionPoint(forwardReturn);
  FailureOr<Value> loss =
      buildLoss(builder, train, forwardReturn.getOperands(), options);
  if (failed(loss))
    return failure();
  if (failed(collectParameters()))
    return failure();

  // The forward ops and the loss, before the backward ops are appended.
  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  markActive();
  markNeeded(*loss);

  if (needed.count(*loss)) {
    GradientBuilder seed(builder,
                         NameLoc::get(builder.getStringAttr("loss/grad")),
                         [](Value) { return false; });
    gradients[*loss] =
        seed.constant(llvm::cast<RankedTensorType>(loss->getType()), 1.0);
  }
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (llvm::isa<zero::GatherWaitOp>(op) ||
        llvm::none_of(op->getResults(),
                      [&](Value result) { return needed.count(result); }))
      continue;
    if (failed(differentiate(op)))
      return failure();
  }
  for (auto &[param, entry] : parameters)
    if (!entry.token)
      startReduceScatter(llvm::cast<FlatSymbolRefAttr>(param));

  // Every gradient lands in its accumulator before the step ends.
  for (FlatSymbolRefAttr param : started) {
    ParameterGradient &entry = parameters[param];
    Location loc =
        NameLoc::get(builder.getStringAttr(param.getValue() + "/grad"));
    auto shardType = zero::ShardType::get(
        builder.getContext(),
        llvm::cast<RankedTensorType>(entry.copies.front().getType()));
    Value accumulator =
        builder.create<zero::GradShardOp>(loc, shardType, param);
    builder.create<zero::ReduceScatterWaitOp>(
        loc, TypeRange{shardType}, entry.token, ValueRange{accumulator});
  }

  builder.create<func::ReturnOp>(forwardReturn.getLoc(), *loss);
  forwardReturn.erase();
  train.setType(
      builder.getFunctionType(body.getArgumentTypes(), {loss->getType()}));
  DictionaryAttr lossName = builder.getDictionaryAttr(
      builder.getNamedAttr("nn.name", builder.getStringAttr("loss")));
  train.setAllResultAttrs(ArrayRef<DictionaryAttr>{lossName});

  // The forward's other outputs are not needed for training.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  // Rules are local: the weight gradients of q, k and v projections each
  // flatten and transpose the same activation, and every rule makes its
  // own scalar constants. One CSE keeps one of each.
  IRRewriter rewriter(train.getContext());
  DominanceInfo dominance(train);
  eliminateCommonSubExpressions(rewriter, dominance, train);
  return success();
}

namespace {

struct AutodiffPass : zplan::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("zplan-autodiff: the module has no @forward function");
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_micro_step")) {
      module.emitError(
          "zplan-autodiff: the module already has a @train_micro_step");
      return signalPassFailure();
    }
    if (!forward.getBody().hasOneBlock()) {
      forward.emitError("zplan-autodiff: @forward must be one block");
      return signalPassFailure();
    }
    auto train = llvm::cast<func::FuncOp>(forward->clone());
    train.setSymName("train_micro_step");
    module.getBody()->getOperations().insertAfter(forward->getIterator(),
                                                  train);
    LossOptions options;
    options.loss = loss;
    options.labelsInput = labelsInput;
    options.lossType = lossType;
    if (beta >= 0)
      options.beta = beta;
    options.epsilon = epsilon;
    if (epsilonHigh >= 0)
      options.epsilonHigh = epsilonHigh;
    options.oldLogprobs = oldLogprobs;
    options.perTokenAdvantages = perTokenAdvantages;
    options.biasCorrectionKl = biasCorrectionKl;
    if (failed(Differentiator(train).run(options)))
      return signalPassFailure();
  }
};

} // namespace
