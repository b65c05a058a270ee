//===- Liveness.cpp - program-order liveness of a scheduled function ------===//

#include "compiler/analysis/Liveness.h"

#include "compiler/analysis/OffloadSelection.h"

#include "compiler/transforms/Programs.h"

#include "dialects/nn/NNDialect.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace zplan;

uint64_t zplan::tensorBytes(Type type) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  return static_cast<uint64_t>(tensor.getNumElements()) *
         ((tensor.getElementTypeBitWidth() + 7) / 8);
}

/// Element size of a group's shard (`gathered` false) or of its gathered
/// copy (true: its gather_type under mixed precision): all its parameters
/// share one element type (the sharding pass guarantees it), so the first
/// one tells.
static uint64_t groupElementBytes(zero::GroupOp group,
                                  const SymbolTable &symbols, bool gathered) {
  auto first = llvm::cast<FlatSymbolRefAttr>(group.getParams()[0]);
  Type type = symbols.lookup<nn::ParameterOp>(first.getAttr())
                  .getTensorType()
                  .getElementType();
  if (gathered)
    type = group.getGatheredElementType(type);
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

/// Bytes of a group's gathered copy (its padded elements).
static uint64_t bytesOfGroup(zero::GroupOp group, const SymbolTable &symbols) {
  return static_cast<uint64_t>(group.getPaddedElements()) *
         groupElementBytes(group, symbols, /*gathered=*/true);
}

uint64_t zplan::groupBytes(zero::GroupOp group) {
  return bytesOfGroup(group, SymbolTable(group->getParentOfType<ModuleOp>()));
}

uint64_t zplan::groupBytes(zero::GroupOp group, const SymbolTable &symbols) {
  return bytesOfGroup(group, symbols);
}

uint64_t zplan::reducedGroupBytes(zero::GroupOp group) {
  uint64_t elementBytes =
      group.getReduceType()
          ? (group.getReduceType()->getIntOrFloatBitWidth() + 7) / 8
          : groupElementBytes(group,
                              SymbolTable(group->getParentOfType<ModuleOp>()),
                              /*gathered=*/false);
  return static_cast<uint64_t>(group.getPaddedElements()) * elementBytes;
}

Value zplan::viewSource(Value value) {
  while (auto reshape = value.getDefiningOp<nn::ReshapeOp>())
    value = reshape.getInput();
  return value;
}

SmallVector<Operation *> zplan::collectUsesThroughViews(Value value) {
  SmallVector<Operation *> uses;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    for (Operation *user : current.getUsers()) {
      uses.push_back(user);
      if (auto reshape = llvm::dyn_cast<nn::ReshapeOp>(user))
        worklist.push_back(reshape.getResult());
    }
  }
  return uses;
}

LivenessAnalysis::LivenessAnalysis(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (Operation &op : body) {
    opIndex[&op] = opsInOrder.size();
    opsInOrder.push_back(&op);
  }
  int64_t last = static_cast<int64_t>(opsInOrder.size()) - 1;
  auto lastUse = [&](Value value, int64_t from) {
    int64_t end = from;
    for (Operation *user : collectUsesThroughViews(value))
      end = std::max(end, opIndex.lookup(user));
    return end;
  };

  for (BlockArgument argument : body.getArguments())
    allBuffers.push_back({BufferKind::Input, argument,
                          tensorBytes(argument.getType()), 0,
                          lastUse(argument, 0), nullptr, nullptr});

  auto module = func->getParentOfType<ModuleOp>();
  // One hash table for every lookup below: the module has a symbol per
  // parameter and group, and passes rebuild this analysis as they change
  // the schedule.
  SymbolTable symbols(module);
  // Each gradient a reduce-scatter reads: the index of its wait.
  llvm::DenseMap<Value, int64_t> gradientEnds;
  for (Operation *op : opsInOrder) {
    int64_t index = opIndex.lookup(op);
    if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op)) {
      zero::GroupOp group;
      if (auto name = start.getGroupAttr())
        group = symbols.lookup<zero::GroupOp>(name.getAttr());
      if (group && group.getPersistent())
        continue;
      uint64_t bytes = 0;
      if (group) {
        bytes = bytesOfGroup(group, symbols);
      } else {
        for (Value shard : start.getShards())
          bytes += tensorBytes(
              llvm::cast<zero::ShardType>(shard.getType()).getTensorType());
      }
      // The copy lives until its release, or, before releases are placed,
      // until the last read of any of its tensors.
      int64_t end = index;
      for (Operation *user : start.getToken().getUsers()) {
        auto wait = llvm::cast<zero::GatherWaitOp>(user);
        end = std::max(end, opIndex.lookup(wait));
        for (Value tensor : wait.getTensors())
          end = std::max(end, lastUse(tensor, index));
      }
      int64_t waitIndex = index;
      for (Operation *user : start.getToken().getUsers())
        waitIndex = opIndex.lookup(user);
      allBuffers.push_back({BufferKind::Gathered, start.getToken(), bytes,
                            index, end, start, group, op, waitIndex});
      continue;
    }
    // A reduce-scatter packs its gradients into a staging copy of the whole
    // group (plus one shard to receive into; an all-reduce for a persistent
    // group needs no room), which the plan's arena holds until the
    // reduce_scatter_wait, together with the gradients themselves
    // (PlanEmitter's emitReduceScatter/emitReduceScatterWait).
    if (auto start = llvm::dyn_cast<zero::ReduceScatterStartOp>(op)) {
      int64_t end = index;
      for (Operation *user : start.getToken().getUsers())
        end = std::max(end, opIndex.lookup(user));
      uint64_t bytes = 0;
      zero::GroupOp group;
      if (auto name = start.getGroupAttr())
        group = symbols.lookup<zero::GroupOp>(name.getAttr());
      if (group && !start.getGradients().empty()) {
        auto element =
            llvm::cast<RankedTensorType>(start.getGradients()[0].getType())
                .getElementType();
        uint64_t padded = static_cast<uint64_t>(group.getPaddedElements());
        if (!group.getPersistent())
          padded += padded / static_cast<uint64_t>(group.getWorldSize());
        bytes = padded * (element.getIntOrFloatBitWidth() / 8);
      } else {
        for (Value gradient : start.getGradients())
          bytes += tensorBytes(gradient.getType());
      }
      allBuffers.push_back({BufferKind::Activation, start.getToken(), bytes,
                            index, end, nullptr, nullptr});
      for (Value gradient : start.getGradients())
        gradientEnds[viewSource(gradient)] = end;
      continue;
    }
    // Cross-step prefetch: the carried copy the previous program gathered
    // is in the arena from this program's first op; the one this program
    // starts stays until its end.
    if (auto wait = llvm::dyn_cast<zero::CarryWaitOp>(op)) {
      auto group = symbols.lookup<zero::GroupOp>(wait.getGroup());
      int64_t end = index;
      for (Value tensor : wait.getTensors())
        end = std::max(end, lastUse(tensor, index));
      allBuffers.push_back(
          {BufferKind::Gathered,
           wait.getTensors().empty() ? Value() : wait.getTensors()[0],
           group ? bytesOfGroup(group, symbols) : 0, 0, end, nullptr, group});
      continue;
    }
    if (auto start = llvm::dyn_cast<zero::CarryStartOp>(op)) {
      auto group = symbols.lookup<zero::GroupOp>(start.getGroup());
      allBuffers.push_back({BufferKind::Carried, Value(),
                            group ? bytesOfGroup(group, symbols) : 0, index,
                            last, nullptr, group, op, last});
      continue;
    }
    // nn.cache_append returns the KV cache itself (written in place): the
    // cache is per-rank state outside the arena, counted below.
    if (op->getDialect() && llvm::isa<nn::NNDialect>(op->getDialect()) &&
        !llvm::isa<nn::ConstantOp, nn::ReshapeOp, nn::CacheAppendOp>(op)) {
      for (Value result : op->getResults())
        allBuffers.push_back({BufferKind::Activation, result,
                              tensorBytes(result.getType()), index,
                              lastUse(result, index), nullptr, nullptr});
    }
  }
  for (Buffer &buffer : allBuffers)
    if (auto end = gradientEnds.find(buffer.value); end != gradientEnds.end())
      buffer.end = std::max(buffer.end, end->second);
  // Function results are read after the last op.
  for (Buffer &buffer : allBuffers)
    for (Operation *user : buffer.value ? collectUsesThroughViews(buffer.value)
                                        : SmallVector<Operation *>())
      if (llvm::isa<func::ReturnOp>(user))
        buffer.end = last;

  // Offload (docs/offload.md): what lives outside the device is not
  // counted; --memory-budget counts device bytes.
  OffloadSelection offloaded = selectOffloaded(module, symbols);
  for (auto group : module.getOps<zero::GroupOp>()) {
    uint64_t stored = static_cast<uint64_t>(group.getPaddedElements()) *
                      groupElementBytes(group, symbols, /*gathered=*/false);
    if (group.getPersistent())
      resident += stored;
    else if (!offloaded.shards.contains(group.getSymName()))
      resident += stored / group.getWorldSize();
    // A resident group's gathered copy lives for the whole generation,
    // beside its shard.
    if (group.getResident() && !group.getPersistent())
      resident += bytesOfGroup(group, symbols);
  }
  // A generation module's KV cache: kept across its programs.
  for (auto cache : module.getOps<nn::KvCacheOp>())
    resident += tensorBytes(cache.getTensorType());
  // A training module's state (the plan's STATE buffers): per group, the
  // f32 gradient accumulator and the optimizer's moments (AdamW two, SGD
  // one), each the size of the rank's shard, or of the whole group when it
  // is persistent.
  if (auto step = module.lookupSymbol<func::FuncOp>(kOptimizerStepName))
    for (auto update : step.getOps<zero::OptimizerUpdateOp>()) {
      auto group = symbols.lookup<zero::GroupOp>(update.getGroup());
      if (!group)
        continue;
      uint64_t elements = static_cast<uint64_t>(group.getPaddedElements());
      if (!group.getPersistent())
        elements /= static_cast<uint64_t>(group.getWorldSize());
      // The gradient accumulator stays on the device.
      uint64_t copies = offloaded.moments.contains(group.getSymName()) ? 1
                        : update.getOptimizer() == "adamw"             ? 3
                                                                       : 2;
      resident += elements * sizeof(float) * copies;
    }
}

std::vector<uint64_t> LivenessAnalysis::liveBytes() const {
  std::vector<uint64_t> live(opsInOrder.size() + 1, 0);
  // Difference array: +bytes at start, -bytes after end.
  for (const Buffer &buffer : allBuffers) {
    live[buffer.start] += buffer.bytes;
    live[buffer.end + 1] -= buffer.bytes;
  }
  for (size_t i = 1; i < live.size(); ++i)
    live[i] += live[i - 1];
  live.pop_back();
  return live;
}

std::pair<int64_t, uint64_t> LivenessAnalysis::peak() const {
  std::vector<uint64_t> live = liveBytes();
  int64_t index = 0;
  for (size_t i = 1; i < live.size(); ++i)
    if (live[i] > live[index])
      index = i;
  return {index, live.empty() ? 0 : live[index]};
}

SmallVector<const LivenessAnalysis::Buffer *>
LivenessAnalysis::liveAt(int64_t index) const {
  SmallVector<const Buffer *> live;
  for (const Buffer &buffer : allBuffers)
    if (buffer.start <= index && index <= buffer.end)
      live.push_back(&buffer);
  return live;
}

//===----------------------------------------------------------------------===//
// Gathered copies and their segments
//===----------------------------------------------------------------------===//

int64_t GatheredCopy::segmentLast(size_t k) const {
  int64_t last = 0;
  for (size_t read = cuts[k]; read < cuts[k + 1]; ++read)
    last = std::max(last, reads[read].last);
  return last;
}

/// The reads of `tensors`, sorted, overlapping ones merged.
static std::vector<CopyRead> collectReads(const LivenessAnalysis &live,
                                          ValueRange tensors) {
  std::vector<CopyRead> reads;
  for (Value tensor : tensors)
    for (OpOperand &operand : tensor.getUses()) {
      Operation *user = operand.getOwner();
      int64_t first = live.indexOf(user), last = first;
      // A reshape of a weight and the readers of the view stay together.
      if (auto reshape = llvm::dyn_cast<nn::ReshapeOp>(user))
        for (Operation *reader : collectUsesThroughViews(reshape.getResult()))
          last = std::max(last, live.indexOf(reader));
      reads.push_back({first, last, {&operand}});
    }
  llvm::sort(reads, [](const CopyRead &a, const CopyRead &b) {
    return a.first < b.first;
  });
  std::vector<CopyRead> merged;
  for (CopyRead &read : reads) {
    if (!merged.empty() && read.first <= merged.back().last) {
      merged.back().last = std::max(merged.back().last, read.last);
      llvm::append_range(merged.back().operands, read.operands);
    } else {
      merged.push_back(std::move(read));
    }
  }
  return merged;
}

std::vector<GatheredCopy>
zplan::collectGatheredCopies(const LivenessAnalysis &live) {
  std::vector<GatheredCopy> copies;
  if (live.ops().empty())
    return copies;
  auto module = live.ops().front()->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  auto lookupGroup = [&](FlatSymbolRefAttr name) {
    return name ? symbols.lookup<zero::GroupOp>(name.getAttr())
                : zero::GroupOp();
  };
  for (Operation *op : live.ops()) {
    GatheredCopy copy;
    ValueRange tensors;
    if (auto wait = llvm::dyn_cast<zero::GatherWaitOp>(op)) {
      zero::GatherStartOp start = wait.getStart();
      copy.group = lookupGroup(start.getGroupAttr());
      if (copy.group && copy.group.getPersistent())
        continue;
      if (copy.group) {
        copy.bytes = bytesOfGroup(copy.group, symbols);
      } else {
        for (Value tensor : wait.getTensors())
          copy.bytes += tensorBytes(tensor.getType());
      }
      tensors = wait.getTensors();
    } else if (auto read = llvm::dyn_cast<zero::ResidentReadOp>(op)) {
      copy.group = lookupGroup(read.getGroupAttr());
      copy.bytes = copy.group ? bytesOfGroup(copy.group, symbols) : 0;
      copy.resident = true;
      tensors = read.getResults();
    } else {
      continue;
    }
    copy.source = op;
    copy.reads = collectReads(live, tensors);
    if (copy.reads.empty())
      continue;
    copy.cuts = {0, copy.reads.size()};
    copies.push_back(std::move(copy));
  }
  return copies;
}

std::vector<size_t> zplan::cutsAtEveryGap(const GatheredCopy &copy) {
  std::vector<size_t> cuts;
  for (size_t read = 0; read <= copy.reads.size(); ++read)
    cuts.push_back(read);
  return cuts;
}

std::vector<size_t> zplan::cutsLikeHooks(ArrayRef<GatheredCopy> copies,
                                         size_t index) {
  const GatheredCopy &mine = copies[index];
  std::vector<size_t> cuts{0};
  for (size_t read = 1; read < mine.reads.size(); ++read) {
    int64_t gapStart = mine.reads[read - 1].last;
    int64_t gapEnd = mine.reads[read].first;
    bool otherInBetween = llvm::any_of(copies, [&](const GatheredCopy &other) {
      return &other != &mine && other.group &&
             llvm::any_of(other.reads, [&](const CopyRead &otherRead) {
               return otherRead.first > gapStart && otherRead.first < gapEnd;
             });
    });
    if (otherInBetween)
      cuts.push_back(read);
  }
  cuts.push_back(mine.reads.size());
  return cuts;
}

std::vector<uint64_t>
zplan::liveBytesWithCopies(const LivenessAnalysis &live,
                           ArrayRef<GatheredCopy> copies) {
  // Difference array: +bytes where a buffer starts, -bytes after its end.
  std::vector<uint64_t> bytes(live.ops().size() + 1, 0);
  auto add = [&](int64_t first, int64_t last, uint64_t size) {
    bytes[first] += size;
    bytes[last + 1] -= size;
  };
  for (const LivenessAnalysis::Buffer &buffer : live.buffers())
    if (buffer.kind != LivenessAnalysis::BufferKind::Gathered)
      add(buffer.start, buffer.end, buffer.bytes);
  // The copy exists from its start, placed right before the segment's first
  // read, to its release, right after the last. Counting it from the first
  // read is exact: what is live at the inserted start and wait (buffers
  // crossing into the first read, other copies not yet released) is a subset
  // of what is live at the first read, and likewise at the release. Counting
  // it from the op before would charge it where an activation dies, and
  // refuse (or split for) schedules that fit.
  for (const GatheredCopy &copy : copies)
    if (!copy.resident)
      for (size_t k = 0; k < copy.numSegments(); ++k)
        add(copy.segmentFirst(k), copy.segmentLast(k), copy.bytes);
  for (size_t i = 1; i < bytes.size(); ++i)
    bytes[i] += bytes[i - 1];
  bytes.pop_back();
  return bytes;
}
