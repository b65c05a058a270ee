//===- ShardParameters.cpp - the zplan-shard-parameters pass --------------===//
//
// Turns the import's one-gather-per-parameter form into parameter groups
// (see Passes.td for the rules and before/after IR). Tests:
// test/transforms/shard-parameters.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/ScheduleDiagnostics.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

#include <optional>

#define DEBUG_TYPE "zplan-shard-parameters"

namespace zplan {
#define GEN_PASS_DEF_SHARDPARAMETERS
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// One parameter as the import left it: its symbol, the tensor its gather
/// produced, and where that tensor is first and last read.
struct ParameterUse {
  nn::ParameterOp param;
  Value tensor;
  int64_t firstUse;
  int64_t lastUse;
};

struct GroupPlan {
  SmallVector<ParameterUse *> members;
  bool persistent = false;
  uint64_t bytes = 0;
};

/// The most bytes one buffer, one group, or everything a function holds may
/// take: 2^60 B (1 EiB). Sizes are checked against it here, the first pass
/// of the schedule, so that every sum made later (live bytes, arena offsets,
/// weights-file offsets, each at most the total) stays far below 2^64 and
/// can never wrap into a small, plausible-looking size.
static constexpr uint64_t kMaxPlanBytes = uint64_t(1) << 60;

/// Bytes of a ranked tensor, computed without overflow; nullopt when the
/// count does not fit 64 bits or exceeds kMaxPlanBytes.
static std::optional<uint64_t> checkedTensorBytes(RankedTensorType type) {
  if (!type.hasStaticShape())
    return std::nullopt;
  Type element = type.getElementType();
  uint64_t bytes =
      element.isIntOrFloat() ? (element.getIntOrFloatBitWidth() + 7) / 8 : 8;
  for (int64_t dim : type.getShape()) {
    std::optional<uint64_t> product =
        dim < 0 ? std::nullopt
                : llvm::checkedMulUnsigned(bytes, static_cast<uint64_t>(dim));
    if (!product)
      return std::nullopt;
    bytes = *product;
  }
  if (bytes > kMaxPlanBytes)
    return std::nullopt;
  return bytes;
}

/// `value` rounded up to a multiple of `multiple`, without overflow.
static std::optional<int64_t> checkedRoundUp(int64_t value, int64_t multiple) {
  int64_t sum = 0;
  if (llvm::AddOverflow(value, multiple - 1, sum))
    return std::nullopt;
  return sum / multiple * multiple;
}

struct ShardParametersPass
    : zplan::impl::ShardParametersBase<ShardParametersPass> {
  using ShardParametersBase::ShardParametersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (worldSize < 1 || alignment < 1) {
      module.emitError() << "zplan-shard-parameters: world-size and alignment "
                            "must be >= 1";
      return signalPassFailure();
    }
    // Report on the group that is already there, so the message points at
    // something in the input rather than at the whole module.
    auto groups = module.getOps<zero::GroupOp>();
    if (!groups.empty()) {
      zero::GroupOp existing = *groups.begin();
      existing.emitError() << "zplan-shard-parameters: the module is already "
                              "sharded (it declares zero.group @"
                           << existing.getSymName() << ")";
      return signalPassFailure();
    }
    // Groups are module-level and each parameter belongs to one: grouping
    // each function by its own first-use order would put a parameter in
    // several groups and declare @group0 twice.
    SmallVector<func::FuncOp> gathering;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.getOps<zero::GatherWaitOp>().empty())
        gathering.push_back(func);
    if (gathering.size() > 1) {
      gathering[1].emitError()
          << "zplan-shard-parameters: parameters are gathered in more than "
             "one function (@"
          << gathering[0].getSymName() << " and @" << gathering[1].getSymName()
          << "); grouping across programs is not supported yet";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(checkSizes(module, func)) ||
          failed(shardFunction(module, func)))
        return signalPassFailure();
  }

  /// Refuses a parameter, value or function whose bytes exceed
  /// kMaxPlanBytes (or 64 bits), naming it, before any size is summed.
  LogicalResult checkSizes(ModuleOp module, func::FuncOp func) {
    uint64_t total = 0;
    auto tooLarge = [&](Operation *where, const Twine &what,
                        RankedTensorType type) {
      return where->emitError()
             << "zplan-shard-parameters: " << what << " (" << type
             << ") is too large: its size in bytes exceeds 2^60 B (1 EiB), "
                "the most a plan can hold";
    };
    auto add = [&](uint64_t bytes) {
      std::optional<uint64_t> sum = llvm::checkedAddUnsigned(total, bytes);
      total = sum.value_or(0);
      return sum && total <= kMaxPlanBytes;
    };
    for (auto param : module.getOps<nn::ParameterOp>()) {
      RankedTensorType type = param.getTensorType();
      std::optional<uint64_t> bytes = checkedTensorBytes(type);
      if (!bytes)
        return tooLarge(param, "parameter '" + param.getSymName() + "'", type);
      if (!add(*bytes))
        return param.emitError()
               << "zplan-shard-parameters: the model's parameters and "
                  "values exceed 2^60 B (1 EiB) in all, reached at parameter '"
               << param.getSymName() << "'";
    }
    for (BlockArgument argument : func.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(argument.getType());
      if (!type)
        continue;
      std::string what = describeValue(argument);
      std::optional<uint64_t> bytes = checkedTensorBytes(type);
      if (!bytes)
        return tooLarge(func, what, type);
      if (!add(*bytes))
        return func.emitError() << "zplan-shard-parameters: the model's "
                                   "parameters and values exceed 2^60 B "
                                   "(1 EiB) in all, reached at "
                                << what;
    }
    WalkResult walk = func.walk([&](Operation *op) {
      for (Value result : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type)
          continue;
        std::optional<uint64_t> bytes = checkedTensorBytes(type);
        if (!bytes) {
          (void)tooLarge(op, "the result of " + describeValue(result), type);
          return WalkResult::interrupt();
        }
        if (!add(*bytes)) {
          op->emitError() << "zplan-shard-parameters: the model's parameters "
                             "and values exceed 2^60 B (1 EiB) in all, "
                             "reached at the result of "
                          << describeValue(result);
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  LogicalResult shardFunction(ModuleOp module, func::FuncOp func) {
    LivenessAnalysis liveness(func);
    int64_t programLength = liveness.ops().size();

    // 1. The import's gathers, one parameter each, in first-use order.
    std::vector<ParameterUse> uses;
    SmallVector<Operation *> importGathers;
    for (auto wait : func.getOps<zero::GatherWaitOp>()) {
      zero::GatherStartOp start = wait.getStart();
      if (start.getGroupAttr())
        return wait.emitOpError("is already in a group");
      for (auto [shard, tensor] :
           llvm::zip_equal(start.getShards(), wait.getTensors())) {
        auto read = shard.getDefiningOp<zero::ShardOp>();
        if (!read)
          return wait.emitOpError("gathers a shard that is not a zero.shard");
        auto param = SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(
            read, read.getParamAttr());
        int64_t first = programLength, last = 0;
        for (Operation *user : collectUsesThroughViews(tensor)) {
          first = std::min(first, liveness.indexOf(user));
          last = std::max(last, liveness.indexOf(user));
        }
        uses.push_back({param, tensor, first, last});
        importGathers.push_back(read);
      }
      importGathers.push_back(start);
      importGathers.push_back(wait);
    }
    llvm::stable_sort(uses, [](const ParameterUse &a, const ParameterUse &b) {
      return a.firstUse < b.firstUse;
    });

    // 2-4. Form groups. Indices, not pointers: `groups` grows.
    std::vector<GroupPlan> groups;
    int64_t openSharded = -1, openPersistent = -1;
    for (ParameterUse &use : uses) {
      RankedTensorType type = use.param.getTensorType();
      uint64_t bytes = tensorBytes(type);
      bool persistent = type.getNumElements() <= persistenceThreshold;
      bool farApart =
          !persistent &&
          use.lastUse - use.firstUse > std::max<int64_t>(programLength / 4, 1);
      int64_t &open = persistent ? openPersistent : openSharded;
      bool fits = false;
      if (open >= 0 && !farApart) {
        GroupPlan &group = groups[open];
        fits = group.members.front()->param.getTensorType().getElementType() ==
                   type.getElementType() &&
               group.bytes + bytes <= static_cast<uint64_t>(bucketBytes);
      }
      if (!fits) {
        groups.emplace_back();
        groups.back().persistent = persistent;
        // A far-apart parameter's group stays closed to others, and it is
        // not one of "the others" of rule 4: the group open before it stays
        // open to the parameters after it.
        if (!farApart)
          open = static_cast<int64_t>(groups.size()) - 1;
      }
      GroupPlan &group = fits ? groups[open] : groups.back();
      group.members.push_back(&use);
      group.bytes += bytes;
    }

    // 5-6. Declare the groups and gather each at the top of the function.
    OpBuilder moduleBuilder(module.getBodyRegion());
    moduleBuilder.setInsertionPoint(func);
    OpBuilder builder(func.getBody());
    Block &body = func.getBody().front();
    builder.setInsertionPointToStart(&body);
    // Keep constants first: they are not part of any gather.
    for (Operation &op : body)
      if (llvm::isa<nn::ConstantOp>(op))
        builder.setInsertionPointAfter(&op);
      else
        break;
    for (auto [index, plan] : llvm::enumerate(groups)) {
      int64_t elementBytes = (plan.members.front()
                                  ->param.getTensorType()
                                  .getElementTypeBitWidth() +
                              7) /
                             8;
      int64_t alignElements = std::max<int64_t>(alignment / elementBytes, 1);
      // Each size below is at most the checked total (checkSizes) plus
      // padding, but the padding grows with the world size: check it too.
      int64_t offset = 0;
      SmallVector<Attribute> names;
      SmallVector<int64_t> offsets;
      size_t groupIndex = index;
      auto overflows = [&](ParameterUse *member) {
        return member->param.emitError()
               << "zplan-shard-parameters: group " << groupIndex
               << " overflows when parameter '" << member->param.getSymName()
               << "' is padded to " << worldSize << " x " << alignment
               << " B: its size in bytes exceeds 2^60 B (1 EiB)";
      };
      for (ParameterUse *member : plan.members) {
        std::optional<int64_t> aligned = checkedRoundUp(offset, alignElements);
        if (!aligned ||
            llvm::AddOverflow(*aligned,
                              member->param.getTensorType().getNumElements(),
                              offset))
          return overflows(member);
        offsets.push_back(*aligned);
        names.push_back(FlatSymbolRefAttr::get(member->param.getSymNameAttr()));
      }
      int64_t multiple = 0, padded = 0;
      std::optional<int64_t> rounded;
      if (!llvm::MulOverflow(static_cast<int64_t>(worldSize), alignElements,
                             multiple))
        rounded = checkedRoundUp(std::max<int64_t>(offset, 1), multiple);
      if (!rounded || llvm::MulOverflow(*rounded, elementBytes, padded) ||
          static_cast<uint64_t>(padded) > kMaxPlanBytes)
        return overflows(plan.members.back());
      padded = *rounded;
      std::string name =
          (plan.persistent ? "persistent" : "group") + std::to_string(index);
      auto group = moduleBuilder.create<zero::GroupOp>(
          func.getLoc(), moduleBuilder.getStringAttr(name),
          moduleBuilder.getArrayAttr(names),
          moduleBuilder.getDenseI64ArrayAttr(offsets),
          moduleBuilder.getI64IntegerAttr(padded),
          moduleBuilder.getI64IntegerAttr(worldSize),
          plan.persistent ? moduleBuilder.getUnitAttr() : UnitAttr());

      SmallVector<Value> shards;
      SmallVector<Type> tensorTypes;
      for (ParameterUse *member : plan.members) {
        RankedTensorType type = member->param.getTensorType();
        shards.push_back(builder.create<zero::ShardOp>(
            member->param.getLoc(), zero::ShardType::get(&getContext(), type),
            FlatSymbolRefAttr::get(member->param.getSymNameAttr())));
        tensorTypes.push_back(type);
      }
      auto start = builder.create<zero::GatherStartOp>(
          func.getLoc(), zero::GatherTokenType::get(&getContext()), shards,
          FlatSymbolRefAttr::get(group.getSymNameAttr()));
      auto wait =
          builder.create<zero::GatherWaitOp>(func.getLoc(), tensorTypes, start);
      for (auto [member, tensor] :
           llvm::zip_equal(plan.members, wait.getTensors()))
        member->tensor.replaceAllUsesWith(tensor);
      LLVM_DEBUG(llvm::dbgs() << "group " << name << ": " << plan.members.size()
                              << " parameters, " << padded << " elements\n");
    }
    for (Operation *op : llvm::reverse(importGathers))
      op->erase();
    return success();
  }
};

} // namespace
