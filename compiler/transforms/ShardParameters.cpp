//===- ShardParameters.cpp - the zplan-shard-parameters pass --------------===//
//
// Turns the import's one-gather-per-parameter form into parameter groups
// (see Passes.td for the rules and before/after IR). Tests:
// test/transforms/shard-parameters*.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "compiler/transforms/ScheduleDiagnostics.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
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

/// One parameter as the import left it, in the function that decides the
/// groups: where its tensor is first and last read (in a training step, by
/// the forward part only).
struct ParameterUse {
  nn::ParameterOp param;
  int64_t firstUse;
  int64_t lastUse;
};

struct GroupPlan {
  SmallVector<nn::ParameterOp> members;
  bool persistent = false;
  /// Every member is frozen (none is: a group is updated as a whole).
  bool frozen = false;
  uint64_t bytes = 0;
  /// Declared by declareGroups(); mutable because MLIR's op handles have
  /// non-const accessors.
  mutable zero::GroupOp op;
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

/// One parameter the import gathers: the parameter, its gathered tensor,
/// and the import's ops that produce it (shard, start, wait).
struct ImportGather {
  nn::ParameterOp param;
  Value tensor;
  zero::ShardOp read;
  zero::GatherStartOp start;
  zero::GatherWaitOp wait;
};

/// The import's per-parameter gathers of `func`, in program order; fails,
/// naming the op, on a gather that is already grouped or that gathers
/// something other than a zero.shard.
static LogicalResult collectImportGathers(func::FuncOp func,
                                          std::vector<ImportGather> &out) {
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
      out.push_back({param, tensor, read, start, wait});
    }
  }
  return success();
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
    auto declared = module.getOps<zero::GroupOp>();
    if (!declared.empty()) {
      zero::GroupOp existing = *declared.begin();
      existing.emitError() << "zplan-shard-parameters: the module is already "
                              "sharded (it declares zero.group @"
                           << existing.getSymName() << ")";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(checkSizes(module, func)))
        return signalPassFailure();
    // Groups are module-level and each parameter belongs to one, so one
    // function's uses decide them for every program: the training step's
    // when there is one (its parameters are the ones whose gathers and
    // reduce-scatters matter most; in a train,generate module too, so the
    // generation programs gather the training step's groups), in a
    // generation module @decode's (it runs once per token, prefill once),
    // in a reference model (--mode logprobs) @logprobs' (its forward's
    // order is @forward's), else the one function that gathers.
    SmallVector<func::FuncOp> gathering;
    func::FuncOp primary;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.getOps<zero::GatherWaitOp>().empty())
        continue;
      gathering.push_back(func);
      if (func.getSymName() == kTrainStepName ||
          (func.getSymName() == kDecodeName &&
           !module.lookupSymbol(kTrainStepName)) ||
          (func.getSymName() == kLogprobsName &&
           !module.lookupSymbol(kTrainStepName) &&
           !module.lookupSymbol(kDecodeName)))
        primary = func;
    }
    if (!primary && gathering.size() > 1) {
      gathering[1].emitError()
          << "zplan-shard-parameters: parameters are gathered in more than "
             "one function (@"
          << gathering[0].getSymName() << " and @" << gathering[1].getSymName()
          << ") and none is @" << kTrainStepName << " or @" << kDecodeName
          << " to decide the groups";
      return signalPassFailure();
    }
    if (!primary && !gathering.empty())
      primary = gathering.front();
    if (!primary)
      return;
    std::vector<GroupPlan> groups;
    if (failed(planGroups(module, primary, gathering, groups)) ||
        failed(declareGroups(module, primary, groups)))
      return signalPassFailure();
    for (func::FuncOp func : gathering)
      if (failed(rewriteGathers(func, groups)) ||
          failed(mergeReduceScatters(func, groups)))
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

  /// The forward part of a training step ends at the op that computes the
  /// loss (its first result); uses after it are the backward pass's. For
  /// any other function every op is "forward".
  static int64_t forwardEnd(func::FuncOp func,
                            const LivenessAnalysis &liveness) {
    int64_t length = liveness.ops().size();
    if (func.getSymName() != kTrainStepName)
      return length;
    auto returnOp =
        llvm::cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (returnOp.getNumOperands() == 0)
      return length;
    Operation *loss = returnOp.getOperand(0).getDefiningOp();
    return loss ? liveness.indexOf(loss) : length;
  }

  /// Steps 1-4: the groups, from `primary`'s uses; parameters that only
  /// other functions gather follow, in module order.
  LogicalResult planGroups(ModuleOp module, func::FuncOp primary,
                           ArrayRef<func::FuncOp> gathering,
                           std::vector<GroupPlan> &groups) {
    LivenessAnalysis liveness(primary);
    int64_t programLength = liveness.ops().size();
    int64_t forwardLength = forwardEnd(primary, liveness);

    // 1. The import's gathers, one parameter each, in first-use order.
    std::vector<ImportGather> gathers;
    if (failed(collectImportGathers(primary, gathers)))
      return failure();
    std::vector<ParameterUse> uses;
    llvm::DenseSet<Operation *> seen;
    for (const ImportGather &gather : gathers) {
      if (!seen.insert(gather.param).second)
        continue;
      int64_t first = programLength, last = 0;
      for (Operation *user : collectUsesThroughViews(gather.tensor)) {
        int64_t index = liveness.indexOf(user);
        if (index > forwardLength)
          continue;
        first = std::min(first, index);
        last = std::max(last, index);
      }
      uses.push_back({gather.param, first, std::max(first, last)});
    }
    llvm::stable_sort(uses, [](const ParameterUse &a, const ParameterUse &b) {
      return a.firstUse < b.firstUse;
    });
    for (func::FuncOp func : gathering)
      for (auto read : func.getOps<zero::ShardOp>()) {
        auto param = SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(
            read, read.getParamAttr());
        if (param && seen.insert(param).second)
          uses.push_back({param, programLength, programLength});
      }

    // 2-4. Form groups. Indices, not pointers: `groups` grows. Frozen
    // parameters fill groups of their own (one open group per kind), so that
    // a group is trained, or not, as a whole.
    int64_t openGroup[2][2] = {{-1, -1}, {-1, -1}}; // [frozen][persistent]
    int64_t span = std::max<int64_t>(forwardLength, 1);
    for (ParameterUse &use : uses) {
      RankedTensorType type = use.param.getTensorType();
      uint64_t bytes = tensorBytes(type);
      bool persistent = type.getNumElements() <= persistenceThreshold;
      bool frozen = use.param.isFrozen();
      bool farApart = !persistent && use.lastUse - use.firstUse >
                                         std::max<int64_t>(span / 4, 1);
      int64_t &open = openGroup[frozen][persistent];
      bool fits = false;
      if (open >= 0 && !farApart) {
        GroupPlan &group = groups[open];
        fits = group.members.front().getTensorType().getElementType() ==
                   type.getElementType() &&
               group.bytes + bytes <= static_cast<uint64_t>(bucketBytes);
      }
      if (!fits) {
        groups.emplace_back();
        groups.back().persistent = persistent;
        groups.back().frozen = frozen;
        // A far-apart parameter's group stays closed to others, and it is
        // not one of "the others" of rule 4: the group open before it stays
        // open to the parameters after it.
        if (!farApart)
          open = static_cast<int64_t>(groups.size()) - 1;
      }
      GroupPlan &group = fits ? groups[open] : groups.back();
      group.members.push_back(use.param);
      group.bytes += bytes;
    }
    return success();
  }

  /// Step 5: lays out and declares each group, before `primary`.
  LogicalResult declareGroups(ModuleOp module, func::FuncOp primary,
                              std::vector<GroupPlan> &groups) {
    OpBuilder moduleBuilder(module.getBodyRegion());
    moduleBuilder.setInsertionPoint(*module.getOps<func::FuncOp>().begin());
    for (auto [index, plan] : llvm::enumerate(groups)) {
      int64_t elementBytes =
          (plan.members.front().getTensorType().getElementTypeBitWidth() + 7) /
          8;
      int64_t alignElements = std::max<int64_t>(alignment / elementBytes, 1);
      // Each size below is at most the checked total (checkSizes) plus
      // padding, but the padding grows with the world size: check it too.
      int64_t offset = 0;
      SmallVector<Attribute> names;
      SmallVector<int64_t> offsets;
      size_t groupIndex = index;
      auto overflows = [&](nn::ParameterOp member) {
        return member.emitError()
               << "zplan-shard-parameters: group " << groupIndex
               << " overflows when parameter '" << member.getSymName()
               << "' is padded to " << worldSize << " x " << alignment
               << " B: its size in bytes exceeds 2^60 B (1 EiB)";
      };
      for (nn::ParameterOp member : plan.members) {
        std::optional<int64_t> aligned = checkedRoundUp(offset, alignElements);
        if (!aligned ||
            llvm::AddOverflow(*aligned, member.getTensorType().getNumElements(),
                              offset))
          return overflows(member);
        offsets.push_back(*aligned);
        names.push_back(FlatSymbolRefAttr::get(member.getSymNameAttr()));
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
      plan.op = moduleBuilder.create<zero::GroupOp>(
          primary.getLoc(), moduleBuilder.getStringAttr(name),
          moduleBuilder.getArrayAttr(names),
          moduleBuilder.getDenseI64ArrayAttr(offsets),
          moduleBuilder.getI64IntegerAttr(padded),
          moduleBuilder.getI64IntegerAttr(worldSize),
          plan.persistent ? moduleBuilder.getUnitAttr() : UnitAttr(),
          /*resident=*/UnitAttr(),
          plan.frozen ? moduleBuilder.getUnitAttr() : UnitAttr(),
          // zplan-mixed-precision decides these.
          /*gather_type=*/TypeAttr(), /*reduce_type=*/TypeAttr());
      LLVM_DEBUG(llvm::dbgs() << "group " << name << ": " << plan.members.size()
                              << " parameters, " << padded << " elements\n");
    }
    return success();
  }

  /// Step 6: the per-parameter gathers of the import become one start and
  /// one wait per group that `func` reads, at the top of the function.
  LogicalResult rewriteGathers(func::FuncOp func, ArrayRef<GroupPlan> groups) {
    std::vector<ImportGather> gathers;
    if (failed(collectImportGathers(func, gathers)))
      return failure();
    llvm::DenseMap<Operation *, Value> importTensor; // parameter -> tensor
    // Erased users first: waits, then starts, then the shard reads.
    llvm::SetVector<Operation *> waits, starts, reads;
    for (ImportGather &gather : gathers) {
      Value &known = importTensor[gather.param];
      // The same parameter gathered twice: one gathered copy serves both.
      if (known)
        gather.tensor.replaceAllUsesWith(known);
      else
        known = gather.tensor;
      waits.insert(gather.wait);
      starts.insert(gather.start);
      reads.insert(gather.read);
    }

    OpBuilder builder(func.getBody());
    Block &body = func.getBody().front();
    builder.setInsertionPointToStart(&body);
    // Keep constants first: they are not part of any gather.
    for (Operation &op : body)
      if (llvm::isa<nn::ConstantOp>(op))
        builder.setInsertionPointAfter(&op);
      else
        break;
    for (const GroupPlan &plan : groups) {
      if (llvm::none_of(plan.members, [&](nn::ParameterOp member) {
            return importTensor.count(member);
          }))
        continue;
      SmallVector<Value> shards;
      SmallVector<Type> tensorTypes;
      for (nn::ParameterOp member : plan.members) {
        RankedTensorType type = member.getTensorType();
        shards.push_back(builder.create<zero::ShardOp>(
            member.getLoc(), zero::ShardType::get(&getContext(), type),
            FlatSymbolRefAttr::get(member.getSymNameAttr())));
        tensorTypes.push_back(type);
      }
      auto start = builder.create<zero::GatherStartOp>(
          func.getLoc(), zero::GatherTokenType::get(&getContext()), shards,
          FlatSymbolRefAttr::get(plan.op.getSymNameAttr()));
      auto wait =
          builder.create<zero::GatherWaitOp>(func.getLoc(), tensorTypes, start);
      for (auto [member, tensor] :
           llvm::zip_equal(plan.members, wait.getTensors()))
        if (Value old = importTensor.lookup(member))
          old.replaceAllUsesWith(tensor);
    }
    for (auto *ops : {&waits, &starts, &reads})
      for (Operation *op : *ops)
        op->erase();
    return success();
  }

  /// Step 7 (training): autodiff's one reduce-scatter per parameter becomes
  /// one per group, started right after the group's last gradient is
  /// computed (so it overlaps the rest of the backward pass) and waited for
  /// right after the next group's start (so at most two are in flight and
  /// the gradients' memory is freed early), the last at the end.
  LogicalResult mergeReduceScatters(func::FuncOp func,
                                    ArrayRef<GroupPlan> groups) {
    struct PerParameter {
      zero::ReduceScatterStartOp start;
      zero::ReduceScatterWaitOp wait;
    };
    llvm::DenseMap<Operation *, PerParameter> byParameter;
    SmallVector<Operation *> erase;
    for (auto wait : func.getOps<zero::ReduceScatterWaitOp>()) {
      auto start = wait.getToken().getDefiningOp<zero::ReduceScatterStartOp>();
      if (start.getGroupAttr())
        return wait.emitOpError("is already in a group");
      if (start.getGradients().size() != 1 ||
          wait.getAccumulators().size() != 1)
        return wait.emitOpError(
            "must reduce one parameter's gradient into its zero.grad_shard "
            "before grouping");
      auto accumulator =
          wait.getAccumulators()[0].getDefiningOp<zero::GradShardOp>();
      if (!accumulator)
        return wait.emitOpError(
            "must accumulate into a zero.grad_shard before grouping");
      auto param = SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(
          accumulator, accumulator.getParamAttr());
      if (!byParameter.try_emplace(param, PerParameter{start, wait}).second)
        return wait.emitOpError()
               << "reduces a second gradient of '" << param.getSymName() << "'";
      if (!wait.getShards()[0].use_empty())
        return wait.emitOpError(
            "result is read in the same function; gradient shards are read "
            "only by the optimizer step");
      erase.push_back(wait);
      erase.push_back(accumulator);
      erase.push_back(start);
    }
    if (byParameter.empty())
      return success();

    // The position of each op, to find each group's last gradient.
    llvm::DenseMap<Operation *, int64_t> position;
    Block &body = func.getBody().front();
    for (auto [index, op] : llvm::enumerate(body))
      position[&op] = index;
    struct Merged {
      const GroupPlan *plan;
      Operation *after; // null: at the top of the body
      int64_t at;
    };
    std::vector<Merged> merged;
    for (const GroupPlan &plan : groups) {
      size_t present = llvm::count_if(plan.members, [&](nn::ParameterOp p) {
        return byParameter.count(p);
      });
      if (present == 0)
        continue;
      if (present != plan.members.size()) {
        for (nn::ParameterOp member : plan.members)
          if (!byParameter.count(member))
            return func.emitError()
                   << "zplan-shard-parameters: parameter '"
                   << member.getSymName() << "' of group @"
                   << plan.op.getSymName() << " has no gradient in @"
                   << func.getSymName();
      }
      Merged entry{&plan, nullptr, -1};
      for (nn::ParameterOp member : plan.members) {
        Value gradient = byParameter[member].start.getGradients()[0];
        Operation *definer = gradient.getDefiningOp();
        if (definer && position[definer] > entry.at) {
          entry.after = definer;
          entry.at = position[definer];
        }
      }
      merged.push_back(entry);
    }
    llvm::stable_sort(
        merged, [](const Merged &a, const Merged &b) { return a.at < b.at; });

    OpBuilder builder(&getContext());
    auto returnOp = body.getTerminator();
    SmallVector<zero::ReduceScatterStartOp> starts;
    for (auto [index, entry] : llvm::enumerate(merged)) {
      // Groups whose last gradients come from the same op start in order.
      if (index > 0 && merged[index - 1].at == entry.at)
        builder.setInsertionPointAfter(starts.back());
      else if (entry.after)
        builder.setInsertionPointAfter(entry.after);
      else
        builder.setInsertionPointToStart(&body);
      SmallVector<Value> gradients;
      for (nn::ParameterOp member : entry.plan->members)
        gradients.push_back(byParameter[member].start.getGradients()[0]);
      starts.push_back(builder.create<zero::ReduceScatterStartOp>(
          byParameter[entry.plan->members.back()].start.getLoc(),
          zero::ReduceTokenType::get(&getContext()), gradients,
          FlatSymbolRefAttr::get(entry.plan->op.getSymNameAttr())));
    }
    for (auto [index, start] : llvm::enumerate(starts)) {
      if (index + 1 < starts.size())
        builder.setInsertionPointAfter(starts[index + 1]);
      else
        builder.setInsertionPoint(returnOp);
      const GroupPlan &plan = *merged[index].plan;
      SmallVector<Value> accumulators;
      SmallVector<Type> shardTypes;
      for (nn::ParameterOp member : plan.members) {
        auto type = zero::ShardType::get(&getContext(), member.getTensorType());
        accumulators.push_back(builder.create<zero::GradShardOp>(
            member.getLoc(), type,
            FlatSymbolRefAttr::get(member.getSymNameAttr())));
        shardTypes.push_back(type);
      }
      builder.create<zero::ReduceScatterWaitOp>(start.getLoc(), shardTypes,
                                                start, accumulators);
    }
    for (Operation *op : erase)
      op->erase();
    return success();
  }
};

} // namespace
