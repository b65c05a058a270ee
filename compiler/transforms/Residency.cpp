//===- Residency.cpp - the zplan-residency pass ---------------------------===//
//
// Generation runs @decode once per token, so a group gathered per token
// moves its bytes every token, while a group kept gathered across tokens
// (resident) costs its whole size in memory for the whole generation. This
// pass makes that choice per group under the memory budget (Passes.td has
// the rules) and rewrites the module accordingly:
//
//   zero.group @group0 {...}          zero.group @group0 {..., resident}
//   func @decode:                     func @generate_begin:
//     %t = zero.gather_start %s..       zero.resident_gather {group = @group0}
//     %w = zero.gather_wait %t        func @decode:
//                                       %w = zero.resident_read %s.. {group =
//                                       @group0}
//                                     func @generate_end:
//                                       zero.resident_release {group = @group0}
//
// Tests: test/transforms/residency.mlir, residency-jit-bound.test.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#include <limits>

#define DEBUG_TYPE "zplan-residency"

namespace zplan {
#define GEN_PASS_DEF_RESIDENCY
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// One group a generation program gathers, with what residency would buy.
struct Candidate {
  zero::GroupOp group;
  uint64_t bytes = 0;
  /// Gather time saved per decoded token if resident: one all-gather per
  /// gather of the group in @decode.
  double secondsPerToken = 0;
  /// First use in @decode (ties keep program order).
  int64_t firstUse = 0;
};

/// The working set of `func` with the groups in `resident` kept gathered
/// (their copies are outside the arena) and the others streamed:
/// activations and inputs as LivenessAnalysis sees them, plus each streamed
/// copy over each of its segments. `likeHooks`: the segments hooks (policy
/// jit) make, each run of its reads that no other group's read interrupts;
/// otherwise the best case, each copy only while an op reads it.
static uint64_t
streamedWorkingSet(func::FuncOp func,
                   const llvm::SmallPtrSetImpl<Operation *> &resident,
                   bool likeHooks) {
  LivenessAnalysis live(func);
  std::vector<GatheredCopy> copies = collectGatheredCopies(live);
  for (size_t index = 0; index < copies.size(); ++index) {
    GatheredCopy &copy = copies[index];
    copy.cuts = likeHooks ? cutsLikeHooks(copies, index) : cutsAtEveryGap(copy);
    if (copy.group && resident.contains(copy.group))
      copy.resident = true;
  }
  std::vector<uint64_t> bytes = liveBytesWithCopies(live, copies);
  return bytes.empty() ? 0 : *llvm::max_element(bytes);
}

/// The function `name` of `module`, created empty (`() -> ()`) at the end
/// of the module when absent.
static func::FuncOp getOrCreateProgram(ModuleOp module, StringRef name) {
  if (auto func = module.lookupSymbol<func::FuncOp>(name))
    return func;
  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToEnd(module.getBody());
  auto func = builder.create<func::FuncOp>(module.getLoc(), name,
                                           builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(func.addEntryBlock());
  builder.create<func::ReturnOp>(module.getLoc());
  return func;
}

struct ResidencyPass : zplan::impl::ResidencyBase<ResidencyPass> {
  using ResidencyBase::ResidencyBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    if (!decode)
      return; // Not a generation module.
    llvm::Expected<HardwareProfile> profile =
        loadHardwareProfile(hardware, hardwareProfile);
    if (!profile) {
      module.emitError() << "zplan-residency: "
                         << llvm::toString(profile.takeError());
      return signalPassFailure();
    }
    CostModel cost(*profile);
    auto prefill = module.lookupSymbol<func::FuncOp>(kPrefillName);
    SmallVector<func::FuncOp, 2> programs;
    if (prefill)
      programs.push_back(prefill);
    programs.push_back(decode);

    std::vector<Candidate> candidates = collectCandidates(programs, cost);
    llvm::SmallPtrSet<Operation *, 16> chosen;
    uint64_t fixedBytes = LivenessAnalysis(decode).residentBytes();
    uint64_t sharedArena = otherProgramsWorkingSet(module);
    uint64_t workingSet = choose(programs, candidates, sharedArena, chosen);
    uint64_t residentBytes = 0, streamedBytes = 0;
    int64_t residentCount = 0;
    for (const Candidate &candidate : candidates) {
      bool isResident = chosen.contains(candidate.group);
      (isResident ? residentBytes : streamedBytes) += candidate.bytes;
      residentCount += isResident;
    }
    recordDecision(module, candidates.size(), residentCount, residentBytes,
                   streamedBytes, fixedBytes, workingSet, sharedArena);
    rewrite(module, programs, candidates, chosen);
  }

  /// Step 1: every non-persistent group the programs gather, with the time
  /// it costs per token when streamed.
  static std::vector<Candidate>
  collectCandidates(ArrayRef<func::FuncOp> programs, const CostModel &cost) {
    llvm::MapVector<Operation *, Candidate> byGroup;
    for (func::FuncOp func : programs) {
      bool isDecode = func.getSymName() == kDecodeName;
      int64_t index = 0;
      for (Operation &op : func.getBody().front()) {
        ++index;
        auto start = llvm::dyn_cast<zero::GatherStartOp>(op);
        if (!start || !start.getGroupAttr())
          continue;
        auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
            start, start.getGroupAttr());
        if (!group || group.getPersistent())
          continue;
        auto [entry, inserted] = byGroup.try_emplace(group);
        Candidate &candidate = entry->second;
        if (inserted) {
          candidate.group = group;
          candidate.bytes = groupBytes(group);
          candidate.firstUse = std::numeric_limits<int64_t>::max();
        }
        if (isDecode) {
          candidate.secondsPerToken +=
              cost.allGatherSeconds(candidate.bytes, group.getWorldSize());
          candidate.firstUse = std::min(candidate.firstUse, index);
        }
      }
    }
    std::vector<Candidate> candidates;
    for (auto &entry : byGroup)
      candidates.push_back(entry.second);
    return candidates;
  }

  /// The best-case working set of the module's other programs (@forward,
  /// @train_micro_step, @optimizer_step in a `--mode train,generate`
  /// module; 0 in a generation module). They share the one arena with
  /// @prefill/@decode, which is allocated once at the largest program's
  /// peak, so during generation a rank holds the resident copies beside
  /// that peak, not just beside @decode's. They gather every group like
  /// any other (no resident copy exists outside the generation window), so
  /// the resident choice does not change their working set.
  static uint64_t otherProgramsWorkingSet(ModuleOp module) {
    llvm::SmallPtrSet<Operation *, 1> none;
    uint64_t most = 0;
    for (StringRef name :
         {kForwardName, kLogprobsName, kTrainStepName, kOptimizerStepName})
      if (auto func = module.lookupSymbol<func::FuncOp>(name))
        most = std::max(most, streamedWorkingSet(func, none, false));
    return most;
  }

  /// Steps 2-3. Returns the working set the choice leaves (the larger of
  /// the programs' working sets). `sharedArena`: the other programs'
  /// working set, which the arena holds during generation whatever is
  /// chosen.
  uint64_t choose(ArrayRef<func::FuncOp> programs,
                  ArrayRef<Candidate> candidates, uint64_t sharedArena,
                  llvm::SmallPtrSetImpl<Operation *> &chosen) {
    // @decode's streamed copies are charged as jit holds them. A choice that
    // fits only the best case would leave zplan-insert-gathers splitting a
    // streamed group where jit does not, re-gathering it every token: more
    // bytes per token than the resident copies save (the tiny Llama at 500
    // KiB: 424.75 KiB against jit's 417.25 KiB). When jit's segments fit,
    // zplan-insert-gathers fits with cuts jit makes too, so no group is
    // gathered per token more often than under jit. @prefill runs once per
    // generation: there the best case stands, and a split costs one gather
    // per generation, not per token.
    auto workingSet = [&]() {
      uint64_t most = 0;
      for (func::FuncOp func : programs)
        most = std::max(
            most,
            streamedWorkingSet(func, chosen, func.getSymName() == kDecodeName));
      return most;
    };
    if (policy == SchedulePolicy::Jit)
      return workingSet();
    if (memoryBudget <= 0) {
      for (const Candidate &candidate : candidates)
        chosen.insert(candidate.group);
      return workingSet();
    }
    uint64_t budget = static_cast<uint64_t>(memoryBudget);
    // Shards, persistent groups and the KV cache: paid whatever is chosen.
    uint64_t fixed = LivenessAnalysis(programs.back()).residentBytes();
    std::vector<const Candidate *> order;
    for (const Candidate &candidate : candidates)
      order.push_back(&candidate);
    // Time saved per token per byte, best first; then @decode's order.
    llvm::stable_sort(order, [](const Candidate *a, const Candidate *b) {
      double left = a->secondsPerToken * static_cast<double>(b->bytes);
      double right = b->secondsPerToken * static_cast<double>(a->bytes);
      if (left != right)
        return left > right;
      return a->firstUse < b->firstUse;
    });
    uint64_t residentBytes = 0;
    for (const Candidate *candidate : order) {
      chosen.insert(candidate->group);
      uint64_t total = fixed + residentBytes + candidate->bytes +
                       std::max(workingSet(), sharedArena);
      if (total <= budget) {
        residentBytes += candidate->bytes;
        LLVM_DEBUG(llvm::dbgs()
                   << "resident @" << candidate->group.getSymName() << " ("
                   << candidate->bytes << " B, total " << total << " B)\n");
        continue;
      }
      chosen.erase(candidate->group);
      LLVM_DEBUG(llvm::dbgs() << "streamed @" << candidate->group.getSymName()
                              << " (would need " << total << " B)\n");
    }
    return workingSet();
  }

  /// Step 5.
  void recordDecision(ModuleOp module, int64_t groups, int64_t residentGroups,
                      uint64_t residentBytes, uint64_t streamedBytes,
                      uint64_t fixedBytes, uint64_t workingSet,
                      uint64_t sharedArena) {
    Builder builder(&getContext());
    auto i64 = [&](uint64_t value) {
      return builder.getI64IntegerAttr(static_cast<int64_t>(value));
    };
    uint64_t cacheBytes = 0;
    for (auto cache : module.getOps<nn::KvCacheOp>())
      cacheBytes += tensorBytes(cache.getTensorType());
    SmallVector<NamedAttribute> fields{
        builder.getNamedAttr("policy", builder.getStringAttr(spell(policy))),
        builder.getNamedAttr("memory_budget", i64(memoryBudget)),
        builder.getNamedAttr("groups", i64(groups)),
        builder.getNamedAttr("resident_groups", i64(residentGroups)),
        builder.getNamedAttr("resident_bytes", i64(residentBytes)),
        builder.getNamedAttr("streamed_bytes", i64(streamedBytes)),
        builder.getNamedAttr("kv_cache_bytes", i64(cacheBytes)),
        // Shards, persistent groups and the KV cache.
        builder.getNamedAttr("fixed_bytes", i64(fixedBytes)),
        builder.getNamedAttr("working_set_bytes", i64(workingSet)),
    };
    // `--mode train,generate`: the other programs' working set, which the
    // same arena holds.
    if (sharedArena > 0)
      fields.push_back(
          builder.getNamedAttr("shared_arena_bytes", i64(sharedArena)));
    module->setAttr("zplan.residency", builder.getDictionaryAttr(fields));
  }

  /// Step 4.
  void rewrite(ModuleOp module, ArrayRef<func::FuncOp> programs,
               ArrayRef<Candidate> candidates,
               const llvm::SmallPtrSetImpl<Operation *> &chosen) {
    OpBuilder builder(&getContext());
    func::FuncOp begin = getOrCreateProgram(module, kGenerateBeginName);
    func::FuncOp end = getOrCreateProgram(module, kGenerateEndName);
    for (const Candidate &candidate : candidates) {
      if (!chosen.contains(candidate.group))
        continue;
      zero::GroupOp group = candidate.group;
      group.setResidentAttr(builder.getUnitAttr());
      auto name = FlatSymbolRefAttr::get(group.getSymNameAttr());
      builder.setInsertionPoint(begin.getBody().front().getTerminator());
      builder.create<zero::ResidentGatherOp>(group.getLoc(), name);
      builder.setInsertionPoint(end.getBody().front().getTerminator());
      builder.create<zero::ResidentReleaseOp>(group.getLoc(), name);
    }
    for (func::FuncOp func : programs) {
      SmallVector<zero::GatherWaitOp> waits(func.getOps<zero::GatherWaitOp>());
      for (zero::GatherWaitOp wait : waits) {
        zero::GatherStartOp start = wait.getStart();
        auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
            start, start.getGroupAttr());
        if (!group || !chosen.contains(group))
          continue;
        builder.setInsertionPoint(start);
        auto read = builder.create<zero::ResidentReadOp>(
            wait.getLoc(), wait.getResultTypes(), start.getShards(),
            start.getGroupAttr());
        wait.replaceAllUsesWith(read.getResults());
        wait->erase();
        if (start->use_empty())
          start->erase();
      }
    }
  }
};

} // namespace
