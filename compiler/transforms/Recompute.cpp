//===- Recompute.cpp - the zplan-recompute pass ---------------------------===//
//
// Activation checkpointing per transformer block in @train_micro_step, when
// the activations the backward pass reads would make the step exceed the
// memory budget. A recomputed block keeps only its input (the checkpoint,
// which the previous block's backward or recompute reads anyway) across the
// forward/backward gap; its forward ops are cloned into the backward, each
// right before its first reader, and the backward reads the clones:
//
//   %h = nn.matmul %x, %w0     // block h.0, forward
//   %a = nn.gelu %h
//   ...loss...
//   %dh = nn.gelu_grad %da, %h // %h lived across the whole gap
// becomes
//   %h = nn.matmul %x, %w0     // dies inside the forward
//   %a = nn.gelu %h
//   ...loss...
//   %h2 = nn.matmul %x, %w0    // recomputed: %x is the checkpoint
//   %dh = nn.gelu_grad %da, %h2
//
// Test: test/transforms/recompute.mlir; end to end test/train/recompute.test.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Debug.h"

#include <optional>

#define DEBUG_TYPE "zplan-recompute"

namespace zplan {
#define GEN_PASS_DEF_RECOMPUTE
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// The forward ops of one transformer block, in program order.
struct ForwardBlock {
  std::string name;
  SmallVector<Operation *> ops;
};

} // namespace

/// The block of an ONNX node name: the path up to its first scope that is,
/// or ends in, a layer index ("/model/transformer/h.3/attn/MatMul" ->
/// "/model/transformer/h.3"; "/model/layers/3/mlp/Mul" -> "/model/layers/3";
/// "/model/decoder/layers.1/fc1/MatMul" -> "/model/decoder/layers.1").
/// The last path component is the node itself, never a scope. Empty for a
/// node outside any block (embeddings, final norm, LM head).
static StringRef blockOfNodeName(StringRef name) {
  auto isIndex = [](StringRef text) {
    return !text.empty() &&
           llvm::all_of(text, [](char c) { return llvm::isDigit(c); });
  };
  for (size_t begin = 0, slash;
       (slash = name.find('/', begin)) != StringRef::npos; begin = slash + 1) {
    StringRef scope = name.slice(begin, slash);
    if (isIndex(scope) || isIndex(scope.rsplit('.').second))
      return name.take_front(slash);
  }
  return "";
}

/// The ops the returned loss depends on: the forward pass and the loss. The
/// rest of the step is the backward pass and the reduce-scatters.
static llvm::DenseSet<Operation *> collectForwardOps(func::FuncOp func) {
  llvm::DenseSet<Operation *> forward;
  SmallVector<Value> worklist(
      func.getBody().front().getTerminator()->getOperands());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (op && forward.insert(op).second)
      llvm::append_range(worklist, op->getOperands());
  }
  return forward;
}

/// The forward's compute ops grouped by block, blocks in program order.
static std::vector<ForwardBlock>
collectBlocks(func::FuncOp func, const llvm::DenseSet<Operation *> &forward) {
  llvm::MapVector<StringRef, SmallVector<Operation *>> byName;
  for (Operation &op : func.getBody().front()) {
    if (!forward.count(&op) ||
        !llvm::isa_and_nonnull<nn::NNDialect>(op.getDialect()) ||
        llvm::isa<nn::ConstantOp>(op))
      continue;
    std::optional<StringRef> node = nn::onnxNodeName(op.getLoc());
    StringRef block = node ? blockOfNodeName(*node) : StringRef();
    if (!block.empty())
      byName[block].push_back(&op);
  }
  std::vector<ForwardBlock> blocks;
  for (auto &[name, ops] : byName)
    blocks.push_back({name.str(), std::move(ops)});
  return blocks;
}

/// The budget check of zplan-insert-gathers at its best: activations and
/// inputs as LivenessAnalysis sees them, plus each sharded group's gathered
/// copy only while an op reads it (every gap between uses released). When
/// this fits, zplan-insert-gathers finds a schedule that fits (it splits
/// gaps at the peak until it does); when it does not, no placement of
/// gathers can help and only recomputation lowers the peak.
static uint64_t bestCasePeak(func::FuncOp func) {
  LivenessAnalysis live(func);
  std::vector<GatheredCopy> copies = collectGatheredCopies(live);
  for (GatheredCopy &copy : copies)
    copy.cuts = cutsAtEveryGap(copy);
  std::vector<uint64_t> bytes = liveBytesWithCopies(live, copies);
  uint64_t peak = bytes.empty() ? 0 : *llvm::max_element(bytes);
  return live.residentBytes() + peak;
}

/// Recomputes `block` for the backward pass. False when nothing of it is
/// read by the backward (so nothing is saved across the gap).
static bool recomputeBlock(const ForwardBlock &block,
                           llvm::DenseSet<Operation *> &forward) {
  llvm::DenseSet<Operation *> inBlock(block.ops.begin(), block.ops.end());
  // Values the backward reads that only this block's forward reads besides.
  // A value a later forward op reads (the block's output) is the next
  // block's checkpoint: it stays.
  SmallVector<Value> saved;
  for (Operation *op : block.ops)
    for (Value result : op->getResults()) {
      bool readOutside = false, readByBackward = false;
      for (Operation *user : result.getUsers()) {
        if (!forward.count(user))
          readByBackward = true;
        else if (!inBlock.count(user))
          readOutside = true;
      }
      if (readByBackward && !readOutside)
        saved.push_back(result);
    }
  if (saved.empty())
    return false;

  // What the clones must compute: the saved values' ancestors in the block.
  llvm::DenseSet<Operation *> needed;
  SmallVector<Operation *> worklist;
  for (Value value : saved)
    worklist.push_back(value.getDefiningOp());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!needed.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        if (inBlock.count(producer))
          worklist.push_back(producer);
  }

  // Right before the first backward op that reads a saved value.
  Operation *insertionPoint = nullptr;
  for (Value value : saved)
    for (Operation *user : value.getUsers())
      if (!forward.count(user) &&
          (!insertionPoint || user->isBeforeInBlock(insertionPoint)))
        insertionPoint = user;

  // Under mixed precision a parameter is read through nn.casts of its
  // gathered bf16 copy (zplan-mixed-precision), one placed before each
  // reader: a clone gets its own, cloned with it, or the forward's f32
  // cast would live from the forward to the backward.
  SmallVector<Operation *> parameterCasts;
  llvm::DenseSet<Operation *> castsSeen;
  for (Operation *op : block.ops) {
    if (!needed.count(op))
      continue;
    for (Value operand : op->getOperands()) {
      SmallVector<Operation *> chain;
      Value source = operand;
      while (auto cast = source.getDefiningOp<nn::CastOp>()) {
        if (inBlock.count(cast))
          break;
        chain.push_back(cast);
        source = cast.getInput();
      }
      bool gathered = source.getDefiningOp<zero::GatherWaitOp>() ||
                      source.getDefiningOp<zero::ResidentReadOp>() ||
                      source.getDefiningOp<zero::CarryWaitOp>();
      if (chain.empty() || !gathered)
        continue;
      for (Operation *cast : llvm::reverse(chain))
        if (castsSeen.insert(cast).second)
          parameterCasts.push_back(cast);
    }
  }

  OpBuilder builder(insertionPoint);
  IRMapping mapping;
  SmallVector<Operation *> clones;
  for (Operation *cast : parameterCasts)
    clones.push_back(builder.clone(*cast, mapping));
  for (Operation *op : block.ops) {
    if (!needed.count(op))
      continue;
    Operation *clone = builder.clone(*op, mapping);
    if (std::optional<StringRef> node = nn::onnxNodeName(op->getLoc()))
      clone->setLoc(NameLoc::get(builder.getStringAttr(*node + "/recompute")));
    clones.push_back(clone);
  }
  for (Value value : saved)
    value.replaceUsesWithIf(mapping.lookup(value), [&](OpOperand &use) {
      return !forward.count(use.getOwner());
    });
  // Each clone sinks to right before its first reader, consumers first, so a
  // recomputed value is born when the backward needs it (the attention's
  // inputs not at the start of the block's backward, with the MLP's). Its
  // operands, defined before the insertion point, still dominate it.
  for (Operation *clone : llvm::reverse(clones)) {
    Operation *firstReader = nullptr;
    for (Operation *user : clone->getUsers())
      if (!firstReader || user->isBeforeInBlock(firstReader))
        firstReader = user;
    if (firstReader)
      clone->moveBefore(firstReader);
  }

  // Forward ops that only fed the backward are dead now, and so are the
  // parameter casts that only fed them.
  for (Operation *op : llvm::reverse(block.ops))
    if (op->use_empty()) {
      forward.erase(op);
      op->erase();
    }
  for (Operation *cast : llvm::reverse(parameterCasts))
    if (cast->use_empty()) {
      forward.erase(cast);
      cast->erase();
    }
  return true;
}

namespace {

struct RecomputePass : zplan::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    auto train = getOperation().lookupSymbol<func::FuncOp>(kTrainStepName);
    if (!train || memoryBudget <= 0 || !train.getBody().hasOneBlock())
      return;
    uint64_t budget = static_cast<uint64_t>(memoryBudget);
    if (bestCasePeak(train) <= budget)
      return;

    llvm::DenseSet<Operation *> forward = collectForwardOps(train);
    std::vector<ForwardBlock> blocks = collectBlocks(train, forward);
    // Earliest block first: its saved activations live longest (from its
    // forward to its backward, which runs last), so recomputing it lowers
    // the live bytes over the longest stretch of the step, including every
    // point where a later block's saved activations are live.
    SmallVector<Attribute> recomputed;
    for (const ForwardBlock &block : blocks) {
      if (!recomputeBlock(block, forward))
        continue;
      recomputed.push_back(StringAttr::get(&getContext(), block.name));
      uint64_t peak = bestCasePeak(train);
      LLVM_DEBUG(llvm::dbgs() << "recomputed " << block.name << ": peak "
                              << peak << " B, budget " << budget << " B\n");
      if (peak <= budget)
        break;
    }
    // Whatever is still over is zplan-insert-gathers' to report, naming the
    // op and its live buffers.
    if (recomputed.empty())
      return;
    Builder builder(&getContext());
    train->setAttr("zplan.blocks", builder.getI64IntegerAttr(blocks.size()));
    train->setAttr("zplan.recomputed_blocks", builder.getArrayAttr(recomputed));
  }
};

} // namespace
