//===- PlanEmitter.cpp - scheduled IR -> plan -----------------------------===//

#include "compiler/plan/PlanEmitter.h"

#include "compiler/Errors.h"
#include "compiler/analysis/Liveness.h"
#include "compiler/analysis/Lockstep.h"
#include "compiler/analysis/OffloadSelection.h"
#include "compiler/transforms/Programs.h"
#include "compiler/transforms/ScheduleDiagnostics.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/ProgramContracts.h"
#include "runtime/support/ElementType.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace zplan;

namespace {

/// The plan's number for an MLIR element type: the element-type table's row
/// of the type's MLIR spelling ("f32", "ui8", "i1"); unspecified for a type
/// the table lacks.
plan::DataType dataTypeOf(Type type) {
  std::string spelling;
  llvm::raw_string_ostream os(spelling);
  type.print(os);
  std::optional<ElementType> element = elementTypeFromName(os.str());
  return element ? static_cast<plan::DataType>(elementTypeInfo(*element).plan)
                 : plan::DATA_TYPE_UNSPECIFIED;
}

static_assert(zero::kHyperParameterCount == plan::HyperParameter_ARRAYSIZE,
              "zero.optimizer_update's hyper operand holds the plan's "
              "HyperParameter slots");

/// What the program function `function` is (Programs.h names them).
plan::ProgramKind programKindOf(llvm::StringRef function) {
  return llvm::StringSwitch<plan::ProgramKind>(function)
      .Case(kForwardName, plan::PROGRAM_KIND_INFER)
      .Case(kTrainStepName, plan::PROGRAM_KIND_TRAIN_MICRO_STEP)
      .Case(kOptimizerStepName, plan::PROGRAM_KIND_OPTIMIZER_STEP)
      .Case(kGenerateBeginName, plan::PROGRAM_KIND_GENERATE_BEGIN)
      .Case(kPrefillName, plan::PROGRAM_KIND_PREFILL)
      .Case(kDecodeName, plan::PROGRAM_KIND_DECODE)
      .Case(kGenerateEndName, plan::PROGRAM_KIND_GENERATE_END)
      .Case(kLogprobsName, plan::PROGRAM_KIND_LOGPROBS)
      .Default(plan::PROGRAM_KIND_UNSPECIFIED);
}

/// What a binding of a `kind` program carries, from the nn.name the pass
/// that made the argument or result gave it: the import keeps the ONNX
/// graph's names (input_ids, labels, logits), zplan-autodiff names the loss,
/// zplan-optimizer-step the hyper-parameters, the generation front end the
/// positions and last index. An infer program's own inputs are the model's,
/// bound by name; its logits, when it has them, tell the vocabulary.
plan::BindingRole bindingRoleOf(plan::ProgramKind kind, llvm::StringRef name,
                                bool input, RankedTensorType type) {
  if (kind == plan::PROGRAM_KIND_INFER)
    return !input && name == "logits" &&
                   llvm::isa<FloatType>(type.getElementType()) &&
                   type.getRank() > 0
               ? plan::BINDING_ROLE_LOGITS
               : plan::BINDING_ROLE_DATA;
  return llvm::StringSwitch<plan::BindingRole>(name)
      .Case("input_ids", plan::BINDING_ROLE_INPUT_IDS)
      .Case("labels", plan::BINDING_ROLE_LABELS)
      .Case("positions", plan::BINDING_ROLE_POSITIONS)
      .Case("last_index", plan::BINDING_ROLE_LAST_INDEX)
      .Case("logits", plan::BINDING_ROLE_LOGITS)
      .Case("loss", plan::BINDING_ROLE_LOSS)
      .Case("hyper", plan::BINDING_ROLE_HYPER_PARAMETERS)
      .Case("completion_mask", plan::BINDING_ROLE_COMPLETION_MASK)
      .Case("advantages", plan::BINDING_ROLE_ADVANTAGES)
      .Case("old_logprobs", plan::BINDING_ROLE_OLD_LOGPROBS)
      .Case("ref_logprobs", plan::BINDING_ROLE_REF_LOGPROBS)
      .Case("logprobs", plan::BINDING_ROLE_LOGPROBS)
      .Case("entropy", plan::BINDING_ROLE_ENTROPY)
      .Default(plan::BINDING_ROLE_DATA);
}

uint64_t elementBytes(Type type) {
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

/// The little-endian bytes of a constant, one byte per i1.
std::string constantBytes(DenseElementsAttr value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  Type element = type.getElementType();
  uint64_t size = elementBytes(element);
  std::string bytes;
  bytes.reserve(type.getNumElements() * size);
  if (llvm::isa<FloatType>(element)) {
    for (APFloat number : value.getValues<APFloat>()) {
      uint64_t bits = number.bitcastToAPInt().getZExtValue();
      bytes.append(reinterpret_cast<const char *>(&bits), size);
    }
  } else {
    for (APInt number : value.getValues<APInt>()) {
      uint64_t bits = number.getZExtValue();
      bytes.append(reinterpret_cast<const char *>(&bits), size);
    }
  }
  return bytes;
}

/// A buffer's name: the ONNX node that computes it, else the op name.
std::string valueName(Operation *op) {
  if (auto name = llvm::dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return op->getName().getStringRef().str();
}

class Emitter {
public:
  Emitter(ModuleOp module, const EmitOptions &options, const CostModel &cost)
      : module(module), options(options), cost(cost) {}

  llvm::Expected<EmittedPlan> run();

private:
  void declareGroups();
  /// On one rank a group's shard is the whole group, read in place: no
  /// collective, no copy, no arena bytes. Not when the group gathers in
  /// another type than its shard's (mixed precision): its copy is rounded
  /// to bf16 by a one-rank gather, as on N ranks. Nor when the shard is
  /// offloaded: it is fetched (fetchesShardWhole).
  bool readsShardInPlace(uint32_t group) const {
    return shardIsWholeGroup(group) && !shardOffloaded(group);
  }
  /// One rank, and the group gathers in its shard's type: the shard is the
  /// gathered copy, bit for bit.
  bool shardIsWholeGroup(uint32_t group) const {
    const plan::Group &entry = result.plan.groups(group);
    return result.plan.world_size() == 1 &&
           (entry.gather_dtype() == plan::DATA_TYPE_UNSPECIFIED ||
            entry.gather_dtype() == entry.dtype());
  }
  /// Offload (docs/offload.md): whether `group`'s shard lives outside the
  /// device (--offload-params); then every gather of it reads a staging
  /// copy that a tier_fetch fills first.
  bool shardOffloaded(uint32_t group) const {
    auto found = shardBuffer.find(group);
    return found != shardBuffer.end() &&
           result.plan.buffers(found->second - 1).tier() !=
               plan::Buffer::DEVICE;
  }
  /// On one rank an offloaded shard that gathers in its own type is the
  /// whole group: the tier_fetch fills the gathered copy itself, and its
  /// tier_wait stands for the gather_wait.
  bool fetchesShardWhole(uint32_t group) const {
    return shardIsWholeGroup(group) && shardOffloaded(group);
  }
  uint32_t addBuffer(plan::Buffer::Kind kind, llvm::StringRef name,
                     RankedTensorType type);
  /// An ARENA buffer of `tiered`'s shape, type and bytes, named
  /// "<its name> staged".
  uint32_t addStaging(uint32_t tiered);
  uint32_t addView(uint32_t base, uint64_t byteOffset, llvm::StringRef name,
                   RankedTensorType type);
  plan::Buffer &buffer(uint32_t id) {
    return *result.plan.mutable_buffers(id - 1);
  }
  uint32_t baseOf(uint32_t id) {
    while (buffer(id).view_of() != 0)
      id = buffer(id).view_of();
    return id;
  }
  plan::Instruction &addInstruction(plan::Opcode opcode, Operation *source,
                                    double seconds);
  plan::Instruction &addGroupGather(plan::Opcode opcode, Operation *op,
                                    FlatSymbolRefAttr group, uint32_t copy,
                                    uint32_t source);
  /// The buffer a gather of `group` reads: its shard, or, when the shard is
  /// offloaded, a staging copy that a tier_fetch emitted now fills (noted
  /// in `fetch`, whose tier_wait the caller places after the gather's
  /// wait).
  struct ShardFetch {
    uint32_t instruction = 0; // the tier_fetch
    uint32_t staging = 0;     // the buffer it fills
  };
  uint32_t shardSource(uint32_t group, std::optional<ShardFetch> &fetch);
  void addAttributes(plan::Instruction &instruction, Operation *op);
  void declareState(llvm::StringRef optimizer);
  void noteParameterRules();
  void declareGeneration();
  llvm::Error emitResidentGather(zero::ResidentGatherOp gather);
  llvm::Error emitResidentRead(zero::ResidentReadOp read);
  llvm::Error emitResidentRelease(zero::ResidentReleaseOp release);
  llvm::Error emitCarryStart(zero::CarryStartOp start);
  llvm::Error emitCarryWait(zero::CarryWaitOp wait);
  llvm::Error emitCarryDrain(zero::CarryDrainOp drain);
  llvm::Error addParameterViews(Operation *op, uint32_t base, ValueRange shards,
                                ValueRange tensors);
  llvm::Error emitCacheAppend(nn::CacheAppendOp append);
  llvm::Error emitOps(func::FuncOp func);
  llvm::Error emitReduceScatter(zero::ReduceScatterStartOp start);
  llvm::Error emitReduceScatterWait(zero::ReduceScatterWaitOp wait);
  llvm::Error emitOptimizerUpdate(zero::OptimizerUpdateOp update);
  /// Offload (docs/offload.md): what `group`'s update reads outside the
  /// device (its shard, its moments), whether anything; the tier_fetch of
  /// each into a staging buffer (once per group); the tier_waits of the
  /// stores issued one update before.
  SmallVector<uint32_t, 3> tieredUpdateOperands(uint32_t group);
  bool stateOffloaded(uint32_t group);
  /// Offload: whether `group`'s update runs on the host, as ZeRO-Offload
  /// runs it (docs/offload.md): its moments live in host memory, and its
  /// shard too (read in place) or on the device (through a master copy in
  /// host memory); or its moments live in the nvme tier (staged through
  /// host memory, as ZeRO-Infinity does) and its shard in host memory. The
  /// accumulated gradient and the hyper-parameters travel by tier_store.
  bool stepsOnHost(uint32_t group);
  /// Whether a host-side update reads `group`'s moments from the nvme tier.
  bool momentsInNvme(uint32_t group);
  llvm::Error emitHostUpdate(zero::OptimizerUpdateOp update, uint32_t group,
                             plan::Opcode opcode, uint64_t bytes);
  void storeGradient(uint32_t group);
  void fetchHostMoments(uint32_t group);
  void fetchState(uint32_t group);
  void waitForDeferredCopies();
  uint32_t addTierCopy(plan::Opcode opcode, uint32_t group, uint32_t tiered,
                       uint32_t staging, int64_t after);
  void addTierWait(uint32_t copy, uint32_t staging);
  llvm::Error planMemory();
  llvm::Error carriedCopyRequests(std::vector<BufferRequest> &requests);

  ModuleOp module;
  const EmitOptions &options;
  const CostModel &cost;
  EmittedPlan result;
  plan::Program *program = nullptr;

  /// The groups whose shards and moments the plan offloads
  /// (OffloadSelection.h), into options.parameterTier and optimizerTier.
  OffloadSelection offloaded;
  llvm::StringMap<uint32_t> groupIndex;
  llvm::StringMap<uint32_t> parameterIndex;
  llvm::DenseMap<uint32_t, uint32_t> shardBuffer;      // group -> SHARD
  llvm::DenseMap<uint32_t, uint32_t> persistentBuffer; // group -> PERSISTENT
  llvm::DenseMap<uint32_t, uint32_t> residentBuffer;   // group -> RESIDENT
  llvm::MapVector<uint32_t, uint32_t> carryBuffer;     // group -> CARRY
  /// Groups whose carried copy a carry_wait of the program being emitted
  /// handed over and no release has ended yet.
  llvm::DenseSet<uint32_t> carryHeld;
  /// The program's carried gather of an offloaded shard: its staging
  /// copy's fetch, waited for as the program's last instruction.
  std::optional<ShardFetch> carryFetch;
  llvm::StringMap<uint32_t> cacheBuffer; // nn.kv_cache symbol -> CACHE
  llvm::DenseMap<Value, uint32_t> valueBuffer;
  llvm::DenseMap<Value, uint32_t> tokenCopy; // gather token -> copy
  llvm::DenseMap<Value, uint32_t>
      tokenInstruction; // gather token -> all_gather
  /// gather token -> the tier_fetch of the offloaded shard it gathers.
  llvm::DenseMap<Value, ShardFetch> tokenFetch;
  // Training state per group (STATE buffers): the gradient accumulator and
  // the optimizer's moments (adamw: m, v; sgd: the momentum buffer).
  llvm::DenseMap<uint32_t, uint32_t> gradientBuffer;
  llvm::DenseMap<uint32_t, SmallVector<uint32_t, 2>> optimizerBuffers;
  /// Offload: the groups of @optimizer_step's updates in order (the next
  /// one's moments are fetched while this one's update runs), how many
  /// were emitted, each fetched group's staging buffers and tier_fetches,
  /// and the copies whose tier_wait is deferred past the next update (copy
  /// index, device-side buffer), so that the copy overlaps it: a staged
  /// update's tier_stores, a master copy's tier_fetch back to the device.
  SmallVector<uint32_t> updateGroups;
  size_t updatesEmitted = 0;
  struct StagedState {
    SmallVector<uint32_t, 3> buffers;
    SmallVector<uint32_t, 3> fetches;
  };
  llvm::DenseMap<uint32_t, StagedState> stagedState;
  SmallVector<std::pair<uint32_t, uint32_t>> deferredCopies;
  /// The host-side step: the HOST_STAGING buffers its gradients' copies
  /// take in turn (of the largest such shard) and the hyper-parameters'
  /// copy; in the program being emitted, whether the hyper-parameters were
  /// stored, how many gradients were, and each group's store not yet waited
  /// for (group -> store index, the copy's view of its slot).
  SmallVector<uint32_t, 2> hostGradientSlots;
  llvm::DenseMap<uint32_t, uint32_t> hostMaster; // group -> its master copy
  int64_t largestHostGradient = 0;
  uint32_t hostHyper = 0;
  bool hyperStored = false;
  size_t gradientsStored = 0;
  llvm::DenseMap<uint32_t, std::pair<uint32_t, uint32_t>> gradientStores;
  /// The host-side step over moments in the nvme tier: three HOST_STAGING
  /// slots, each room for one group's moments (of the largest such
  /// shard), taken in turn: a group's moments are fetched one update ahead
  /// and stored back after it, that store waited for after the next
  /// update, so three groups' copies can be in flight. In the program
  /// being emitted: how many were taken, and each fetched group's views of
  /// its slot and their tier_fetches.
  SmallVector<uint32_t, 3> hostMomentSlots;
  int64_t largestNvmeMoments = 0;
  size_t momentSlotsTaken = 0;
  llvm::DenseMap<uint32_t, StagedState> hostMoments;
  llvm::DenseMap<Value, uint32_t> reduceStaging;     // reduce token -> staging
  llvm::DenseMap<Value, uint32_t> reduceInstruction; // reduce token -> index
  int64_t lastCompute = -1;
  /// The program being emitted, its per-instruction times.
  EmittedProgram *current = nullptr;
};

void Emitter::declareGroups() {
  plan::Plan &out = result.plan;
  uint64_t rankOffset = 0, persistentOffset = 0;
  for (auto group : module.getOps<zero::GroupOp>()) {
    uint32_t index = out.groups_size();
    groupIndex[group.getSymName()] = index;
    plan::Group *entry = out.add_groups();
    entry->set_name(group.getSymName().str());
    entry->set_padded_elements(group.getPaddedElements());
    entry->set_persistent(group.getPersistent());
    entry->set_frozen(group.getFrozen());
    SmallVector<int64_t> offsets = group.getParameterOffsets();
    Type element;
    for (auto [name, offset] : llvm::zip_equal(group.getParams(), offsets)) {
      auto symbol = llvm::cast<FlatSymbolRefAttr>(name);
      auto param =
          SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(group, symbol);
      RankedTensorType type = param.getTensorType();
      element = type.getElementType();
      parameterIndex[symbol.getValue()] = out.parameters_size();
      entry->add_parameters(out.parameters_size());
      plan::Parameter *parameter = out.add_parameters();
      parameter->set_name(symbol.getValue().str());
      for (int64_t dim : type.getShape())
        parameter->add_shape(dim);
      parameter->set_dtype(dataTypeOf(type.getElementType()));
      parameter->set_group(index);
      parameter->set_offset_elements(offset);
      parameter->set_num_elements(type.getNumElements());
      if (std::optional<ArrayAttr> copies = param.getTiedCopies())
        for (Attribute copy : *copies) {
          auto fields = llvm::cast<DictionaryAttr>(copy);
          plan::TiedCopy *tied = parameter->add_tied_copies();
          tied->set_name(fields.getAs<StringAttr>("name").str());
          tied->set_transposed(fields.getAs<BoolAttr>("transposed").getValue());
        }
    }
    entry->set_dtype(dataTypeOf(element));
    // Mixed precision (zplan-mixed-precision): the shard stays `element`
    // (the f32 master); what is gathered and reduced may be bf16.
    if (std::optional<Type> gather = group.getGatherType())
      entry->set_gather_dtype(dataTypeOf(*gather));
    if (std::optional<Type> reduce = group.getReduceType())
      entry->set_reduce_dtype(dataTypeOf(*reduce));
    uint64_t full = group.getPaddedElements() * elementBytes(element);
    // zplan-shard-parameters bounds every group far below 2^63 elements.
    auto flat = RankedTensorType::get(
        {static_cast<int64_t>(group.getPaddedElements())}, element);
    if (group.getPersistent()) {
      entry->set_weights_offset(persistentOffset);
      persistentOffset += full;
      persistentBuffer[index] =
          addBuffer(plan::Buffer::PERSISTENT,
                    group.getSymName().str() + " (whole)", flat);
      buffer(persistentBuffer[index]).set_group(index);
      result.residentBytes += full;
    } else {
      uint64_t shard = full / group.getWorldSize();
      entry->set_weights_offset(rankOffset);
      rankOffset += shard;
      auto shardType = RankedTensorType::get(
          {static_cast<int64_t>(group.getPaddedElements() /
                                group.getWorldSize())},
          element);
      shardBuffer[index] =
          addBuffer(plan::Buffer::SHARD, group.getSymName().str() + " (shard)",
                    shardType);
      buffer(shardBuffer[index]).set_group(index);
      plan::Buffer::Tier tier = offloaded.shards.contains(group.getSymName())
                                    ? options.parameterTier
                                    : plan::Buffer::DEVICE;
      buffer(shardBuffer[index]).set_tier(tier);
      (tier == plan::Buffer::DEVICE ? result.residentBytes
                                    : result.offloadedShardBytes) += shard;
    }
  }
  out.set_weights_bytes_per_rank(rankOffset);
  out.set_persistent_weights_offset(rankOffset * out.world_size());
}

/// What the parameter rules decided (ParameterRules.h), as the nn.parameter
/// attributes say it, for the report.
void Emitter::noteParameterRules() {
  for (auto param : module.getOps<nn::ParameterOp>()) {
    std::string name = "'" + param.getSymName().str() + "'";
    if (std::optional<ArrayAttr> copies = param.getTiedCopies())
      for (Attribute copy : *copies) {
        auto fields = llvm::cast<DictionaryAttr>(copy);
        bool transposed = fields.getAs<BoolAttr>("transposed").getValue();
        result.tiedCopies.push_back(
            "'" + fields.getAs<StringAttr>("name").str() + "' is " + name +
            (transposed ? " transposed" : "") + " (" +
            fields.getAs<StringAttr>("reason").str() +
            "): one parameter, its gradient the sum of both uses");
      }
    if (std::optional<StringRef> untied = param.getUntied())
      result.untied.push_back(name + " " + untied->str());
    if (std::optional<StringRef> frozen = param.getFrozen())
      result.frozen.push_back(name + ": " + frozen->str());
  }
}

/// A training plan keeps, per group and per rank, a gradient accumulator and
/// the optimizer's state, each the size of the rank's shard (of the whole
/// group when it is persistent): ZeRO's partitioned gradients and optimizer
/// state. They live outside the arena, zero at load, across programs.
void Emitter::declareState(llvm::StringRef optimizer) {
  SmallVector<llvm::StringRef, 2> moments;
  if (optimizer == "adamw")
    moments = {"adam m", "adam v"};
  else
    moments = {"momentum"};
  uint32_t nvmeHostGroups = 0;
  for (auto [index, group] : llvm::enumerate(result.plan.groups())) {
    // A frozen group is never reduced into nor updated.
    if (group.frozen())
      continue;
    const plan::Buffer &resident =
        buffer(group.persistent() ? persistentBuffer.lookup(index)
                                  : shardBuffer.lookup(index));
    auto type = RankedTensorType::get({resident.shape(0)},
                                      Float32Type::get(module.getContext()));
    auto declare = [&](llvm::StringRef role, plan::Buffer::Tier tier) {
      uint32_t id = addBuffer(plan::Buffer::STATE,
                              group.name() + " (" + role.str() + ")", type);
      buffer(id).set_group(index);
      buffer(id).set_tier(tier);
      (tier == plan::Buffer::DEVICE ? result.residentBytes
                                    : result.offloadedMomentBytes) +=
          buffer(id).bytes();
      return id;
    };
    // The gradient accumulator stays on the device: every micro-step's
    // reduce-scatter adds into it. The moments are read only by the update
    // (--offload-optimizer moves them).
    gradientBuffer[index] = declare("grad", plan::Buffer::DEVICE);
    plan::Buffer::Tier tier = offloaded.moments.contains(group.name())
                                  ? options.optimizerTier
                                  : plan::Buffer::DEVICE;
    for (llvm::StringRef role : moments)
      optimizerBuffers[index].push_back(declare(role, tier));
    if (stepsOnHost(index)) {
      ++result.hostStepGroups;
      largestHostGradient =
          std::max<int64_t>(largestHostGradient, resident.shape(0));
      if (momentsInNvme(index)) {
        ++nvmeHostGroups;
        largestNvmeMoments =
            std::max<int64_t>(largestNvmeMoments, resident.shape(0));
      }
      // Parameters on the device: the update writes a master copy in host
      // memory (ZeRO-Offload's fp32 master), fetched back after it.
      if (!shardOffloaded(index)) {
        uint32_t master =
            addBuffer(plan::Buffer::STATE, group.name() + " (master)", type);
        buffer(master).set_group(index);
        buffer(master).set_tier(plan::Buffer::HOST);
        buffer(master).set_mirrors(resident.id());
        result.hostMasterBytes += buffer(master).bytes();
        hostMaster[index] = master;
      }
    }
  }
  if (!result.hostStepGroups)
    return;
  // The host-side step reads a host copy of each group's accumulated
  // gradient, in one of two buffers of the largest such shard, taken in
  // turn: a group's copy lives from its store to its update, and the next
  // group's store (one update ahead) fills the other buffer meanwhile.
  Type f32 = Float32Type::get(module.getContext());
  auto hostStaging = [&](const std::string &name, int64_t elements) {
    uint32_t id = addBuffer(plan::Buffer::HOST_STAGING, name,
                            RankedTensorType::get({elements}, f32));
    buffer(id).set_tier(plan::Buffer::HOST);
    result.hostStagingBytes += buffer(id).bytes();
    return id;
  };
  for (uint32_t slot = 0; slot < std::min<uint32_t>(2, result.hostStepGroups);
       ++slot)
    hostGradientSlots.push_back(hostStaging(
        "gradients (host) " + std::to_string(slot), largestHostGradient));
  hostHyper =
      hostStaging("hyper-parameters (host)", zero::kHyperParameterCount);
  // Moments staged from nvme: three slots (fetchHostMoments).
  for (uint32_t slot = 0; slot < std::min<uint32_t>(3, nvmeHostGroups);
       ++slot) {
    hostMomentSlots.push_back(
        hostStaging("moments (host) " + std::to_string(slot),
                    static_cast<int64_t>(moments.size()) * largestNvmeMoments));
    result.hostStagedMomentBytes += buffer(hostMomentSlots.back()).bytes();
  }
}

/// The flat type of a group's gathered copy: all its padded elements, of
/// the type it gathers (its parameters' element type, a group holds one,
/// or its bf16 gather_type).
RankedTensorType wholeGroupType(zero::GroupOp group) {
  auto first = SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(
      group, llvm::cast<FlatSymbolRefAttr>(group.getParams()[0]));
  return RankedTensorType::get(
      {static_cast<int64_t>(group.getPaddedElements())},
      group.getGatheredElementType(first.getTensorType().getElementType()));
}

/// A generation module's state outside the arena: one CACHE buffer per
/// nn.kv_cache (zero at load, every rank's own: the ranks run the same
/// prompts), and one RESIDENT buffer per resident group, the whole group,
/// which resident_gather fills in generate_begin. On one rank a resident
/// group is read in place from its shard (the whole group), and a
/// persistent group is whole already: neither needs a copy.
void Emitter::declareGeneration() {
  for (auto cache : module.getOps<nn::KvCacheOp>()) {
    uint32_t id = addBuffer(plan::Buffer::CACHE, cache.getSymName(),
                            cache.getTensorType());
    cacheBuffer[cache.getSymName()] = id;
    result.kvCacheBytes += buffer(id).bytes();
  }
  for (auto group : module.getOps<zero::GroupOp>()) {
    if (!group.getResident() || group.getPersistent() ||
        readsShardInPlace(groupIndex.lookup(group.getSymName())))
      continue;
    uint32_t index = groupIndex.lookup(group.getSymName());
    uint32_t id = addBuffer(plan::Buffer::RESIDENT,
                            group.getSymName().str() + " (resident)",
                            wholeGroupType(group));
    buffer(id).set_group(index);
    residentBuffer[index] = id;
    result.residentCopyBytes += buffer(id).bytes();
  }
  result.residentBytes += result.kvCacheBytes + result.residentCopyBytes;

  // Cross-step prefetch (docs/generation.md section 6): one CARRY buffer per
  // carried group, pinned at the bottom of the arena, in group order, at
  // the same offset in every program, so that what prefill or decode
  // gathers into it is where the next decode reads it. On one rank nothing
  // is gathered: the carried parameters are read from the shard.
  llvm::DenseSet<StringRef> carried;
  module.walk([&](Operation *op) {
    if (auto start = llvm::dyn_cast<zero::CarryStartOp>(op))
      carried.insert(start.getGroup());
    else if (auto wait = llvm::dyn_cast<zero::CarryWaitOp>(op))
      carried.insert(wait.getGroup());
    else if (auto drain = llvm::dyn_cast<zero::CarryDrainOp>(op))
      carried.insert(drain.getGroup());
  });
  uint64_t carryOffset = 0;
  for (auto group : module.getOps<zero::GroupOp>()) {
    if (!carried.contains(group.getSymName()) || group.getPersistent() ||
        readsShardInPlace(groupIndex.lookup(group.getSymName())))
      continue;
    uint32_t index = groupIndex.lookup(group.getSymName());
    uint32_t id =
        addBuffer(plan::Buffer::CARRY, group.getSymName().str() + " (carried)",
                  wholeGroupType(group));
    buffer(id).set_group(index);
    buffer(id).set_offset(carryOffset);
    carryOffset += (buffer(id).bytes() + kArenaAlignment - 1) /
                   kArenaAlignment * kArenaAlignment;
    carryBuffer[index] = id;
  }
}

uint32_t Emitter::addBuffer(plan::Buffer::Kind kind, llvm::StringRef name,
                            RankedTensorType type) {
  plan::Buffer *entry = result.plan.add_buffers();
  entry->set_id(result.plan.buffers_size());
  entry->set_name(name.str());
  entry->set_kind(kind);
  for (int64_t dim : type.getShape())
    entry->add_shape(dim);
  entry->set_dtype(dataTypeOf(type.getElementType()));
  entry->set_bytes(tensorBytes(type));
  return entry->id();
}

uint32_t Emitter::addStaging(uint32_t tiered) {
  plan::Buffer copy = buffer(tiered);
  plan::Buffer *entry = result.plan.add_buffers();
  entry->set_id(result.plan.buffers_size());
  entry->set_name(copy.name() + " staged");
  entry->set_kind(plan::Buffer::ARENA);
  *entry->mutable_shape() = copy.shape();
  entry->set_dtype(copy.dtype());
  entry->set_bytes(copy.bytes());
  return entry->id();
}

uint32_t Emitter::addView(uint32_t base, uint64_t byteOffset,
                          llvm::StringRef name, RankedTensorType type) {
  uint32_t root = baseOf(base);
  uint64_t offset = byteOffset + buffer(base).view_offset();
  uint32_t id = addBuffer(buffer(root).kind(), name, type);
  buffer(id).set_view_of(root);
  buffer(id).set_view_offset(offset);
  buffer(id).set_group(buffer(root).group());
  return id;
}

/// Appends an instruction of `opcode`, on the queue the opcode table names.
plan::Instruction &Emitter::addInstruction(plan::Opcode opcode,
                                           Operation *source, double seconds) {
  plan::Queue queue = plan::findOpcode(opcode)->queue;
  plan::Instruction *instruction = program->add_instructions();
  instruction->set_index(program->instructions_size() - 1);
  instruction->set_queue(queue);
  instruction->set_opcode(opcode);
  if (source)
    if (auto name = llvm::dyn_cast<NameLoc>(source->getLoc()))
      instruction->set_location(name.getName().str());
  current->seconds.push_back(seconds);
  if (queue == plan::COMPUTE)
    lastCompute = instruction->index();
  return *instruction;
}

/// A COMM gather of `group`'s SHARD into `copy` (all_gather,
/// resident_gather, carry_gather) for `op`. It waits for the compute
/// instruction before it, so the collective is issued where the schedule
/// placed it and never writes arena bytes an earlier instruction still
/// uses.
plan::Instruction &Emitter::addGroupGather(plan::Opcode opcode, Operation *op,
                                           FlatSymbolRefAttr group,
                                           uint32_t copy, uint32_t source) {
  uint32_t index = groupIndex.lookup(group.getValue());
  auto groupOp = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(op, group);
  int64_t before = lastCompute;
  plan::Instruction &instruction = addInstruction(
      opcode, nullptr,
      cost.allGatherSeconds(groupBytes(groupOp), result.plan.world_size()));
  instruction.set_location("@" + result.plan.groups(index).name());
  instruction.add_operands(source);
  instruction.add_results(copy);
  instruction.set_group(index);
  if (before >= 0)
    instruction.add_wait_for(before);
  return instruction;
}

uint32_t Emitter::shardSource(uint32_t group,
                              std::optional<ShardFetch> &fetch) {
  uint32_t shard = shardBuffer.lookup(group);
  if (!shardOffloaded(group))
    return shard;
  uint32_t staging = addStaging(shard);
  fetch = ShardFetch{
      addTierCopy(plan::OPCODE_TIER_FETCH, group, shard, staging, lastCompute),
      staging};
  return staging;
}

void Emitter::addAttributes(plan::Instruction &instruction, Operation *op) {
  for (NamedAttribute named : op->getAttrs()) {
    plan::Attribute *attribute = instruction.add_attributes();
    attribute->set_name(named.getName().str());
    Attribute value = named.getValue();
    if (auto boolean = llvm::dyn_cast<BoolAttr>(value))
      attribute->add_ints(boolean.getValue());
    else if (auto integer = llvm::dyn_cast<IntegerAttr>(value))
      attribute->add_ints(integer.getInt());
    else if (auto number = llvm::dyn_cast<FloatAttr>(value))
      attribute->add_floats(number.getValueAsDouble());
    else if (auto array = llvm::dyn_cast<DenseI64ArrayAttr>(value))
      for (int64_t element : array.asArrayRef())
        attribute->add_ints(element);
    else if (auto array = llvm::dyn_cast<DenseI32ArrayAttr>(value))
      // operandSegmentSizes: which optional operands are present.
      for (int32_t element : array.asArrayRef())
        attribute->add_ints(element);
    else if (auto text = llvm::dyn_cast<StringAttr>(value))
      attribute->set_text(text.str());
  }
}

llvm::Error Emitter::emitOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (BlockArgument argument : body.getArguments()) {
    auto name =
        func.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "nn.name");
    std::string text = name ? name.str() : "input";
    uint32_t id = addBuffer(plan::Buffer::ARENA, text,
                            llvm::cast<RankedTensorType>(argument.getType()));
    valueBuffer[argument] = id;
    plan::Binding *binding = program->add_inputs();
    binding->set_name(text);
    binding->set_buffer(id);
    binding->set_role(
        bindingRoleOf(program->kind(), text, /*input=*/true,
                      llvm::cast<RankedTensorType>(argument.getType())));
  }

  for (Operation &op : body) {
    if (auto constant = llvm::dyn_cast<nn::ConstantOp>(op)) {
      auto value = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!value)
        return makeError("constant at " + describeOp(&op) +
                         " is not a dense tensor");
      uint32_t id = addBuffer(plan::Buffer::CONSTANT, valueName(&op),
                              llvm::cast<RankedTensorType>(constant.getType()));
      buffer(id).set_constant(result.plan.constants_size());
      result.plan.add_constants()->set_data(constantBytes(value));
      valueBuffer[constant.getResult()] = id;
      continue;
    }
    if (llvm::isa<zero::ShardOp, zero::GradShardOp>(op))
      continue;
    if (auto start = llvm::dyn_cast<zero::ReduceScatterStartOp>(op)) {
      if (llvm::Error error = emitReduceScatter(start))
        return error;
      continue;
    }
    if (auto wait = llvm::dyn_cast<zero::ReduceScatterWaitOp>(op)) {
      if (llvm::Error error = emitReduceScatterWait(wait))
        return error;
      continue;
    }
    if (auto update = llvm::dyn_cast<zero::OptimizerUpdateOp>(op)) {
      if (llvm::Error error = emitOptimizerUpdate(update))
        return error;
      continue;
    }
    if (auto gather = llvm::dyn_cast<zero::ResidentGatherOp>(op)) {
      if (llvm::Error error = emitResidentGather(gather))
        return error;
      continue;
    }
    if (auto read = llvm::dyn_cast<zero::ResidentReadOp>(op)) {
      if (llvm::Error error = emitResidentRead(read))
        return error;
      continue;
    }
    if (auto release = llvm::dyn_cast<zero::ResidentReleaseOp>(op)) {
      if (llvm::Error error = emitResidentRelease(release))
        return error;
      continue;
    }
    if (auto start = llvm::dyn_cast<zero::CarryStartOp>(op)) {
      if (llvm::Error error = emitCarryStart(start))
        return error;
      continue;
    }
    if (auto wait = llvm::dyn_cast<zero::CarryWaitOp>(op)) {
      if (llvm::Error error = emitCarryWait(wait))
        return error;
      continue;
    }
    if (auto drain = llvm::dyn_cast<zero::CarryDrainOp>(op)) {
      if (llvm::Error error = emitCarryDrain(drain))
        return error;
      continue;
    }
    if (auto append = llvm::dyn_cast<nn::CacheAppendOp>(op)) {
      if (llvm::Error error = emitCacheAppend(append))
        return error;
      continue;
    }
    if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op)) {
      uint32_t group = groupIndex.lookup(start.getGroupAttr().getValue());
      if (result.plan.groups(group).persistent())
        continue; // Gathered once at load.
      // On one rank the shard is the whole group: its tensors are read in
      // place, with no collective, no copy and no arena bytes (unless it
      // gathers bf16: readsShardInPlace).
      if (readsShardInPlace(group)) {
        tokenCopy[start.getToken()] = shardBuffer.lookup(group);
        continue;
      }
      const plan::Group &entry = result.plan.groups(group);
      auto groupOp = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
          start, start.getGroupAttr());
      bool whole = fetchesShardWhole(group);
      uint32_t copy =
          addBuffer(plan::Buffer::ARENA,
                    entry.name() + (whole ? " (fetched)" : " (gathered)"),
                    wholeGroupType(groupOp));
      buffer(copy).set_group(group);
      tokenCopy[start.getToken()] = copy;
      if (whole) {
        // One rank, offloaded: the shard is the group; fetch it into the
        // copy, and its tier_wait stands for the gather_wait.
        tokenFetch[start.getToken()] = {
            addTierCopy(plan::OPCODE_TIER_FETCH, group,
                        shardBuffer.lookup(group), copy, lastCompute),
            copy};
        continue;
      }
      std::optional<ShardFetch> fetch;
      uint32_t source = shardSource(group, fetch);
      plan::Instruction &gather = addGroupGather(
          plan::OPCODE_ALL_GATHER, start, start.getGroupAttr(), copy, source);
      tokenInstruction[start.getToken()] = gather.index();
      if (fetch)
        tokenFetch[start.getToken()] = *fetch;
      continue;
    }
    if (auto wait = llvm::dyn_cast<zero::GatherWaitOp>(op)) {
      zero::GatherStartOp start = wait.getStart();
      uint32_t group = groupIndex.lookup(start.getGroupAttr().getValue());
      bool persistent = result.plan.groups(group).persistent();
      bool inPlace = persistent || readsShardInPlace(group);
      uint32_t base = persistent ? persistentBuffer.lookup(group)
                                 : tokenCopy.lookup(wait.getToken());
      if (fetchesShardWhole(group)) {
        ShardFetch fetch = tokenFetch.lookup(wait.getToken());
        addTierWait(fetch.instruction, fetch.staging);
      } else if (!inPlace) {
        plan::Instruction &instruction =
            addInstruction(plan::OPCODE_GATHER_WAIT, nullptr, 0);
        instruction.set_location("@" + result.plan.groups(group).name());
        instruction.add_operands(base);
        instruction.set_group(group);
        instruction.add_wait_for(tokenInstruction.lookup(wait.getToken()));
        // The staging copy of an offloaded shard lives until its gather is
        // done.
        if (auto fetch = tokenFetch.find(wait.getToken());
            fetch != tokenFetch.end())
          addTierWait(fetch->second.instruction, fetch->second.staging);
      }
      if (llvm::Error error = addParameterViews(wait, base, start.getShards(),
                                                wait.getTensors()))
        return error;
      continue;
    }
    if (auto release = llvm::dyn_cast<zero::ReleaseOp>(op)) {
      uint32_t copy = baseOf(valueBuffer.lookup(release.getTensors()[0]));
      plan::Buffer::Kind kind = buffer(copy).kind();
      if (kind != plan::Buffer::ARENA && kind != plan::Buffer::CARRY)
        continue; // Read in place (one rank): nothing to release.
      if (kind == plan::Buffer::CARRY)
        carryHeld.erase(buffer(copy).group());
      plan::Instruction &instruction =
          addInstruction(plan::OPCODE_RELEASE, nullptr, 0);
      instruction.add_operands(copy);
      instruction.set_group(buffer(copy).group());
      instruction.set_location("@" +
                               result.plan.groups(buffer(copy).group()).name());
      continue;
    }
    if (auto reshape = llvm::dyn_cast<nn::ReshapeOp>(op)) {
      valueBuffer[reshape.getResult()] =
          addView(valueBuffer.lookup(reshape.getInput()), 0, valueName(&op),
                  llvm::cast<RankedTensorType>(reshape.getType()));
      continue;
    }
    if (auto returnOp = llvm::dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(index, "nn.name");
        plan::Binding *binding = program->add_outputs();
        binding->set_name(name ? name.str() : "output" + std::to_string(index));
        binding->set_buffer(valueBuffer.lookup(value));
        binding->set_role(
            bindingRoleOf(program->kind(), binding->name(), /*input=*/false,
                          llvm::cast<RankedTensorType>(value.getType())));
      }
      continue;
    }
    if (!op.getDialect() || !llvm::isa<nn::NNDialect>(op.getDialect()))
      return makeError("cannot emit " + describeOp(&op) +
                       ": only nn and zero ops run in a plan");
    // Only listed opcodes reach a plan: an nn op the runtime has no opcode
    // for is refused here, naming it, rather than by zrun on N ranks.
    std::optional<plan::Opcode> opcode =
        plan::opcodeFromName(op.getName().stripDialect());
    if (!opcode || plan::findOpcode(*opcode)->kind != plan::OpcodeKind::Kernel)
      return makeError("cannot emit " + describeOp(&op) + ": '" +
                       op.getName().getStringRef() +
                       "' has no opcode in the plan format "
                       "(runtime/plan/Opcodes.h)");
    plan::Instruction &instruction =
        addInstruction(*opcode, &op, cost.computeSeconds(&op));
    for (Value operand : op.getOperands())
      instruction.add_operands(valueBuffer.lookup(operand));
    for (Value value : op.getResults()) {
      uint32_t id = addBuffer(plan::Buffer::ARENA, valueName(&op),
                              llvm::cast<RankedTensorType>(value.getType()));
      valueBuffer[value] = id;
      instruction.add_results(id);
    }
    addAttributes(instruction, &op);
  }
  return llvm::Error::success();
}

/// COMM `reduce_scatter` (`all_reduce` for a persistent group): packs the
/// group's gradients into a staging copy of the whole group (zero between
/// and after the parameters), sums it over the ranks and adds this rank's
/// part into the group's gradient accumulator. Operands: the gradients in
/// group order; results: the staging buffer (the whole group, then room for
/// one shard to receive into), the accumulator. It waits for the compute
/// instruction before it, which completes the last gradient.
llvm::Error Emitter::emitReduceScatter(zero::ReduceScatterStartOp start) {
  if (!start.getGroupAttr())
    return makeError("cannot emit " + describeOp(start) +
                     ": its gradients are in no group");
  uint32_t group = groupIndex.lookup(start.getGroupAttr().getValue());
  const plan::Group &entry = result.plan.groups(group);
  if (!gradientBuffer.count(group))
    return makeError("cannot emit " + describeOp(start) +
                     ": the module has no gradient state (no @" +
                     kTrainStepName + ")");
  uint64_t padded = entry.padded_elements();
  uint64_t staged =
      entry.persistent() ? padded : padded + padded / result.plan.world_size();
  auto element = llvm::cast<RankedTensorType>(start.getGradients()[0].getType())
                     .getElementType();
  uint32_t staging =
      addBuffer(plan::Buffer::ARENA, entry.name() + " (gradients)",
                RankedTensorType::get({static_cast<int64_t>(staged)}, element));
  buffer(staging).set_group(group);
  auto groupOp = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
      start, start.getGroupAttr());
  int64_t before = lastCompute;
  plan::Instruction &instruction = addInstruction(
      entry.persistent() ? plan::OPCODE_ALL_REDUCE
                         : plan::OPCODE_REDUCE_SCATTER,
      nullptr,
      entry.persistent() ? cost.allReduceSeconds(reducedGroupBytes(groupOp),
                                                 result.plan.world_size())
                         : cost.reduceScatterSeconds(reducedGroupBytes(groupOp),
                                                     result.plan.world_size()));
  instruction.set_location("@" + entry.name());
  for (Value gradient : start.getGradients())
    instruction.add_operands(valueBuffer.lookup(gradient));
  instruction.add_results(staging);
  instruction.add_results(gradientBuffer.lookup(group));
  instruction.set_group(group);
  if (before >= 0)
    instruction.add_wait_for(before);
  reduceStaging[start.getToken()] = staging;
  reduceInstruction[start.getToken()] = instruction.index();
  return llvm::Error::success();
}

/// COMPUTE `reduce_scatter_wait`: nothing runs after it until the
/// reduce-scatter is done, so it also ends the life of the gradients and of
/// the staging copy (its operands), whose memory the arena may then reuse.
llvm::Error Emitter::emitReduceScatterWait(zero::ReduceScatterWaitOp wait) {
  auto start = wait.getToken().getDefiningOp<zero::ReduceScatterStartOp>();
  if (!start || !reduceInstruction.count(wait.getToken()))
    return makeError("cannot emit " + describeOp(wait) +
                     ": its reduce-scatter was not emitted before it");
  uint32_t group = groupIndex.lookup(start.getGroupAttr().getValue());
  plan::Instruction &instruction =
      addInstruction(plan::OPCODE_REDUCE_SCATTER_WAIT, nullptr, 0);
  instruction.set_location("@" + result.plan.groups(group).name());
  for (Value gradient : start.getGradients())
    instruction.add_operands(valueBuffer.lookup(gradient));
  instruction.add_operands(reduceStaging.lookup(wait.getToken()));
  instruction.set_group(group);
  instruction.add_wait_for(reduceInstruction.lookup(wait.getToken()));
  return llvm::Error::success();
}

/// COMPUTE `adamw` / `sgd` on one group's resident buffer (its shard, or
/// the whole persistent group), its gradient accumulator and its optimizer
/// state, with the run-time scalars `hyper`; all updated in place.
llvm::Error Emitter::emitOptimizerUpdate(zero::OptimizerUpdateOp update) {
  uint32_t group = groupIndex.lookup(update.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  if (!gradientBuffer.count(group))
    return makeError("cannot emit " + describeOp(update) +
                     ": the module has no gradient state");
  std::optional<plan::Opcode> opcode =
      plan::opcodeFromName(update.getOptimizer());
  if (!opcode)
    return makeError("cannot emit " + describeOp(update) +
                     ": no opcode for optimizer '" + update.getOptimizer() +
                     "'");
  auto groupOp = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
      update, update.getGroupAttr());
  uint64_t bytes = groupBytes(groupOp);
  if (!entry.persistent())
    bytes /= result.plan.world_size();
  bool offloaded = stateOffloaded(group);
  // The update's state operands: the shard (the whole group when it is
  // persistent), the gradient accumulator, the moments.
  SmallVector<uint32_t, 4> operands{entry.persistent()
                                        ? persistentBuffer.lookup(group)
                                        : shardBuffer.lookup(group),
                                    gradientBuffer.lookup(group)};
  llvm::append_range(operands, optimizerBuffers.lookup(group));
  SmallVector<uint32_t, 3> tiered = tieredUpdateOperands(group);
  ++updatesEmitted;
  if (stepsOnHost(group))
    return emitHostUpdate(update, group, *opcode, bytes);
  if (offloaded) {
    // This group's moments (fetched one update ahead, unless it is the
    // first), then the next group's, so that its copy overlaps this update.
    fetchState(group);
    if (updatesEmitted < updateGroups.size() &&
        stateOffloaded(updateGroups[updatesEmitted]) &&
        !stepsOnHost(updateGroups[updatesEmitted]))
      fetchState(updateGroups[updatesEmitted]);
    StagedState staged = stagedState.lookup(group);
    for (auto [staging, fetch] :
         llvm::zip_equal(staged.buffers, staged.fetches))
      addTierWait(fetch, staging);
    // The update reads and writes the staged copies.
    for (uint32_t &id : operands)
      if (const auto *found = llvm::find(tiered, id); found != tiered.end())
        id = staged.buffers[found - tiered.begin()];
  }
  plan::Instruction &instruction =
      addInstruction(*opcode, update, cost.optimizerSeconds(bytes));
  uint32_t updateIndex = instruction.index();
  for (uint32_t id : operands)
    instruction.add_operands(id);
  instruction.add_operands(valueBuffer.lookup(update.getHyper()));
  instruction.set_group(group);
  if (!offloaded)
    return llvm::Error::success();
  // The updated shard and moments go back to their tier; the previous
  // update's stores are waited for now, so that each store overlaps the
  // update after it.
  SmallVector<std::pair<uint32_t, uint32_t>> stores;
  for (auto [staging, home] :
       llvm::zip_equal(stagedState.lookup(group).buffers, tiered))
    stores.emplace_back(
        addTierCopy(plan::OPCODE_TIER_STORE, group, home, staging, updateIndex),
        staging);
  waitForDeferredCopies();
  deferredCopies = std::move(stores);
  stagedState.erase(group);
  return llvm::Error::success();
}

/// The host-side optimizer step of one group (docs/offload.md), as
/// ZeRO-Offload runs it: COMM `tier_store` of the hyper-parameters (once
/// per program) and of the gradient accumulator (this group's, unless the
/// update before issued it, then the next group's, so that it overlaps
/// this update) into host memory; COMPUTE `tier_wait` for this group's;
/// `zero` of the accumulator, which the next micro-steps add into; then
/// the update on the host (Instruction.on_host) over the shard or its
/// master copy, the gradient's host copy, the moments and the
/// hyper-parameters' host copy, all in host memory. A shard in host memory
/// stays there (the next gather fetches it); a master copy goes back to
/// the parameters on the device by COMM `tier_fetch`.
llvm::Error Emitter::emitHostUpdate(zero::OptimizerUpdateOp update,
                                    uint32_t group, plan::Opcode opcode,
                                    uint64_t bytes) {
  uint32_t hyper = valueBuffer.lookup(update.getHyper());
  if (!hyperStored) {
    uint32_t store = addTierCopy(plan::OPCODE_TIER_STORE, group, hostHyper,
                                 hyper, lastCompute);
    addTierWait(store, hyper);
    hyperStored = true;
  }
  bool nextOnHost = updatesEmitted < updateGroups.size() &&
                    stepsOnHost(updateGroups[updatesEmitted]);
  storeGradient(group);
  if (nextOnHost)
    storeGradient(updateGroups[updatesEmitted]);
  // Moments in the nvme tier: this group's (fetched one update ahead,
  // unless it is the first) and the next group's into host memory.
  fetchHostMoments(group);
  if (nextOnHost)
    fetchHostMoments(updateGroups[updatesEmitted]);
  uint32_t accumulator = gradientBuffer.lookup(group);
  auto [store, hostCopy] = gradientStores.lookup(group);
  addTierWait(store, accumulator);
  gradientStores.erase(group);
  const plan::Buffer &accumulated = buffer(accumulator);
  plan::Instruction &zero = addInstruction(
      plan::OPCODE_ZERO, nullptr, cost.zeroSeconds(accumulated.bytes()));
  zero.set_location("@" + result.plan.groups(group).name());
  zero.add_results(accumulator);
  zero.set_group(group);
  StagedState staged = hostMoments.lookup(group);
  for (auto [view, fetch] : llvm::zip_equal(staged.buffers, staged.fetches))
    addTierWait(fetch, view);
  // The cost model charges the update at the device's memory bandwidth;
  // on a GPU the host's is lower (an estimate that ranks choices).
  uint32_t master = hostMaster.lookup(group);
  plan::Instruction &instruction =
      addInstruction(opcode, update, cost.optimizerSeconds(bytes));
  uint32_t updateIndex = instruction.index();
  instruction.add_operands(master ? master : shardBuffer.lookup(group));
  instruction.add_operands(hostCopy);
  SmallVector<uint32_t, 2> moments = optimizerBuffers.lookup(group);
  for (uint32_t id : staged.buffers.empty()
                         ? llvm::ArrayRef<uint32_t>(moments)
                         : llvm::ArrayRef<uint32_t>(staged.buffers))
    instruction.add_operands(id);
  instruction.add_operands(hostHyper);
  instruction.set_group(group);
  instruction.set_on_host(true);
  // What goes back, waited for after the next update (or at the
  // program's end), so that the copies overlap it: the moments to the
  // nvme tier, the updated master to the parameters on the device.
  SmallVector<std::pair<uint32_t, uint32_t>> copies;
  if (!staged.buffers.empty())
    for (auto [view, home] : llvm::zip_equal(staged.buffers, moments))
      copies.emplace_back(
          addTierCopy(plan::OPCODE_TIER_STORE, group, home, view, updateIndex),
          view);
  hostMoments.erase(group);
  if (master) {
    uint32_t parameters = buffer(master).mirrors();
    copies.emplace_back(addTierCopy(plan::OPCODE_TIER_FETCH, group, master,
                                    parameters, updateIndex),
                        parameters);
  }
  if (copies.empty())
    return llvm::Error::success();
  waitForDeferredCopies();
  deferredCopies = std::move(copies);
  return llvm::Error::success();
}

/// COMM `tier_fetch` of `group`'s moments from the nvme tier into views of
/// the next host moment slot, once per program (nothing when they live in
/// host memory). Each waits for the compute instruction before it: the
/// tier_wait of the stores of the group that held the slot last.
void Emitter::fetchHostMoments(uint32_t group) {
  if (!momentsInNvme(group) || hostMoments.count(group))
    return;
  uint32_t slot = hostMomentSlots[momentSlotsTaken++ % hostMomentSlots.size()];
  StagedState staged;
  int64_t before = lastCompute;
  uint64_t offset = 0;
  for (uint32_t moment : optimizerBuffers.lookup(group)) {
    const plan::Buffer &home = buffer(moment);
    uint32_t view =
        addView(slot, offset, home.name() + " (host)",
                RankedTensorType::get({home.shape(0)},
                                      Float32Type::get(module.getContext())));
    offset += static_cast<uint64_t>(largestNvmeMoments) * sizeof(float);
    staged.buffers.push_back(view);
    staged.fetches.push_back(
        addTierCopy(plan::OPCODE_TIER_FETCH, group, moment, view, before));
  }
  hostMoments[group] = std::move(staged);
}

/// COMM `tier_store` of `group`'s gradient accumulator into its host copy
/// (a view of the next gradient slot), once per program. The store waits
/// for the compute instruction before it, the update of the group whose
/// copy that slot held last.
void Emitter::storeGradient(uint32_t group) {
  if (gradientStores.count(group))
    return;
  uint32_t accumulator = gradientBuffer.lookup(group);
  uint32_t slot =
      hostGradientSlots[gradientsStored++ % hostGradientSlots.size()];
  uint32_t hostCopy =
      addView(slot, 0, result.plan.groups(group).name() + " (grad, host)",
              RankedTensorType::get({buffer(accumulator).shape(0)},
                                    Float32Type::get(module.getContext())));
  gradientStores[group] = {addTierCopy(plan::OPCODE_TIER_STORE, group, hostCopy,
                                       accumulator, lastCompute),
                           hostCopy};
}

/// The moments in host memory, with the parameters in host memory too or
/// on the device (then updated through a host master copy); or the moments
/// in the nvme tier, staged through host memory, with the parameters in
/// host memory. Not with the parameters on the device and the moments in
/// nvme: the host step would need a master copy of the parameters in host
/// memory, which the step staged through the arena does not (on CPU ranks,
/// where host and device memory are one, it would undo what nvme saves).
/// Not a shard in the nvme tier, which the host would have to stage too
/// (not built: that step stays on the device).
bool Emitter::stepsOnHost(uint32_t group) {
  bool shardInHost =
      shardOffloaded(group) &&
      buffer(shardBuffer.lookup(group)).tier() == plan::Buffer::HOST;
  if (!options.hostOptimizerStep || (shardOffloaded(group) && !shardInHost))
    return false;
  auto moments = optimizerBuffers.find(group);
  if (moments == optimizerBuffers.end())
    return false;
  auto allIn = [&](plan::Buffer::Tier tier) {
    return llvm::all_of(moments->second,
                        [&](uint32_t id) { return buffer(id).tier() == tier; });
  };
  return allIn(plan::Buffer::HOST) ||
         (shardInHost && allIn(plan::Buffer::NVME));
}

bool Emitter::momentsInNvme(uint32_t group) {
  auto moments = optimizerBuffers.find(group);
  return moments != optimizerBuffers.end() && !moments->second.empty() &&
         buffer(moments->second.front()).tier() == plan::Buffer::NVME;
}

/// What `group`'s update reads outside the device: its shard
/// (--offload-params) and its moments (--offload-optimizer), in that order.
SmallVector<uint32_t, 3> Emitter::tieredUpdateOperands(uint32_t group) {
  SmallVector<uint32_t, 3> tiered;
  if (shardOffloaded(group))
    tiered.push_back(shardBuffer.lookup(group));
  for (uint32_t id : optimizerBuffers.lookup(group))
    if (buffer(id).tier() != plan::Buffer::DEVICE)
      tiered.push_back(id);
  return tiered;
}

bool Emitter::stateOffloaded(uint32_t group) {
  return !tieredUpdateOperands(group).empty();
}

/// COMM `tier_fetch` of each of `group`'s offloaded update operands (its
/// shard, its moments) into a staging buffer of the arena, once per group. Like
/// a gather, it waits for the compute instruction before it, so it never writes
/// arena bytes an earlier instruction still uses.
void Emitter::fetchState(uint32_t group) {
  if (stagedState.count(group))
    return;
  StagedState staged;
  int64_t before = lastCompute;
  for (uint32_t tiered : tieredUpdateOperands(group)) {
    uint32_t staging = addStaging(tiered);
    staged.buffers.push_back(staging);
    staged.fetches.push_back(
        addTierCopy(plan::OPCODE_TIER_FETCH, group, tiered, staging, before));
  }
  stagedState[group] = std::move(staged);
}

/// COMM `tier_fetch` (tiered -> staging) or `tier_store` (staging ->
/// tiered) of one of `group`'s buffers, waiting for instruction `after`
/// (none when negative); counted in the bytes one step copies. Returns its
/// index.
uint32_t Emitter::addTierCopy(plan::Opcode opcode, uint32_t group,
                              uint32_t tiered, uint32_t staging,
                              int64_t after) {
  bool fetch = opcode == plan::OPCODE_TIER_FETCH;
  uint64_t bytes = buffer(tiered).bytes();
  plan::Instruction &copy = addInstruction(
      opcode, nullptr,
      cost.tierCopySeconds(bytes, buffer(tiered).tier() == plan::Buffer::NVME));
  copy.set_location("@" + result.plan.groups(group).name());
  copy.add_operands(fetch ? tiered : staging);
  copy.add_results(fetch ? staging : tiered);
  copy.set_group(group);
  if (after >= 0)
    copy.add_wait_for(after);
  current->tierCopyBytes += bytes;
  return copy.index();
}

/// COMPUTE `tier_wait` for each deferred copy: its device-side buffer
/// stays in the copy's hands until then (a store reads it, a master's
/// fetch writes it).
void Emitter::waitForDeferredCopies() {
  for (auto [copy, staging] : deferredCopies)
    addTierWait(copy, staging);
  deferredCopies.clear();
}

/// COMPUTE `tier_wait` for the tier copy at index `copy`, whose staging
/// buffer is `staging`; at the copy's location and group.
void Emitter::addTierWait(uint32_t copy, uint32_t staging) {
  const plan::Instruction &waited =
      program->instructions(static_cast<int>(copy));
  std::string location = waited.location();
  uint32_t group = waited.group();
  plan::Instruction &wait = addInstruction(plan::OPCODE_TIER_WAIT, nullptr, 0);
  wait.set_location(location);
  wait.add_operands(staging);
  wait.set_group(group);
  wait.add_wait_for(copy);
}

/// COMM `resident_gather` of a resident group into its RESIDENT copy, then
/// COMPUTE `gather_wait` for it, so that generate_begin ends with the copy
/// complete. Nothing on one rank (the shard is the whole group).
llvm::Error Emitter::emitResidentGather(zero::ResidentGatherOp gather) {
  uint32_t group = groupIndex.lookup(gather.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  if (entry.persistent() || readsShardInPlace(group))
    return llvm::Error::success();
  uint32_t copy = residentBuffer.lookup(group);
  if (!copy)
    return makeError("cannot emit " + describeOp(gather) + ": group @" +
                     entry.name() + " is not resident");
  std::optional<ShardFetch> fetch;
  uint32_t source = shardSource(group, fetch);
  uint32_t gatherIndex = addGroupGather(plan::OPCODE_RESIDENT_GATHER, gather,
                                        gather.getGroupAttr(), copy, source)
                             .index();
  plan::Instruction &wait =
      addInstruction(plan::OPCODE_GATHER_WAIT, nullptr, 0);
  wait.set_location("@" + entry.name());
  wait.add_operands(copy);
  wait.set_group(group);
  wait.add_wait_for(gatherIndex);
  if (fetch)
    addTierWait(fetch->instruction, fetch->staging);
  return llvm::Error::success();
}

/// The parameters of a resident group: views of its RESIDENT copy (of the
/// shard on one rank, of the whole group when it is persistent), as a
/// gather_wait's are views of the gathered copy. No instruction.
llvm::Error Emitter::emitResidentRead(zero::ResidentReadOp read) {
  uint32_t group = groupIndex.lookup(read.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  uint32_t base = entry.persistent()         ? persistentBuffer.lookup(group)
                  : readsShardInPlace(group) ? shardBuffer.lookup(group)
                                             : residentBuffer.lookup(group);
  if (!base)
    return makeError("cannot emit " + describeOp(read) + ": group @" +
                     entry.name() + " is not resident");
  return addParameterViews(read, base, read.getShards(), read.getTensors());
}

/// Tensor i of `op` is parameter i's view of `base`, the whole group
/// (a gathered, resident or carried copy, or the shard on one rank), at the
/// parameter's offset in its group.
llvm::Error Emitter::addParameterViews(Operation *op, uint32_t base,
                                       ValueRange shards, ValueRange tensors) {
  for (auto [shard, tensor] : llvm::zip_equal(shards, tensors)) {
    auto param = shard.getDefiningOp<zero::ShardOp>();
    if (!param)
      return makeError("cannot emit " + describeOp(op) +
                       ": an operand is not a zero.shard");
    const plan::Parameter &parameter =
        result.plan.parameters(parameterIndex.lookup(param.getParam()));
    auto type = llvm::cast<RankedTensorType>(tensor.getType());
    valueBuffer[tensor] = addView(
        base, parameter.offset_elements() * elementBytes(type.getElementType()),
        parameter.name(), type);
  }
  return llvm::Error::success();
}

/// COMM `carry_gather` of a carried group's shard into its CARRY copy, for
/// the next decode. Like an all_gather it waits for the compute instruction
/// before it, so it never writes bytes a compute instruction still uses.
/// Nothing on one rank (the next decode reads the shard); with an
/// offloaded shard zplan-cross-step-prefetch carries nothing there.
llvm::Error Emitter::emitCarryStart(zero::CarryStartOp start) {
  uint32_t group = groupIndex.lookup(start.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  if (entry.persistent() || readsShardInPlace(group))
    return llvm::Error::success();
  if (fetchesShardWhole(group))
    return makeError(
        "cannot emit " + describeOp(start) +
        ": on one rank the offloaded shard of @" + entry.name() +
        " is fetched whole, and a fetch carried across programs is not built");
  // The copy's two lives in one decode (the one carry_wait handed over,
  // the one carry_gather fills) share its pinned bytes: they must not meet.
  if (carryHeld.contains(group))
    return makeError("cannot emit " + describeOp(start) +
                     ": the carried copy of @" + entry.name() +
                     " that this program's carry_wait handed over is not "
                     "released before it");
  // An offloaded shard: the carried gather reads a staging copy fetched
  // just before it, on the comm queue. Nothing in the program waits for
  // the carried gather (the run's end does: the comm queue drains), so the
  // staging copy's tier_wait is the program's last instruction, and no
  // buffer after it can take its bytes while the collective reads them.
  std::optional<ShardFetch> fetch;
  uint32_t source = shardSource(group, fetch);
  addGroupGather(plan::OPCODE_CARRY_GATHER, start, start.getGroupAttr(),
                 carryBuffer.lookup(group), source);
  if (fetch)
    carryFetch = fetch;
  return llvm::Error::success();
}

/// COMPUTE `carry_wait` (result: the CARRY copy the previous program
/// filled); the group's parameters are views of the copy, released by an
/// ordinary `release`. On one rank: no instruction, views of the shard.
llvm::Error Emitter::emitCarryWait(zero::CarryWaitOp wait) {
  uint32_t group = groupIndex.lookup(wait.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  if (entry.persistent())
    return addParameterViews(wait, persistentBuffer.lookup(group),
                             wait.getShards(), wait.getTensors());
  if (readsShardInPlace(group))
    return addParameterViews(wait, shardBuffer.lookup(group), wait.getShards(),
                             wait.getTensors());
  uint32_t copy = carryBuffer.lookup(group);
  plan::Instruction &instruction =
      addInstruction(plan::OPCODE_CARRY_WAIT, nullptr, 0);
  instruction.set_location("@" + entry.name());
  instruction.add_results(copy);
  instruction.set_group(group);
  carryHeld.insert(group);
  return addParameterViews(wait, copy, wait.getShards(), wait.getTensors());
}

/// COMPUTE `carry_drain` (generate_end): the last carried copy, which no
/// decode reads, is dropped. Nothing on one rank.
llvm::Error Emitter::emitCarryDrain(zero::CarryDrainOp drain) {
  uint32_t group = groupIndex.lookup(drain.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  if (entry.persistent() || readsShardInPlace(group))
    return llvm::Error::success();
  plan::Instruction &instruction =
      addInstruction(plan::OPCODE_CARRY_DRAIN, nullptr, 0);
  instruction.set_location("@" + entry.name());
  instruction.add_operands(carryBuffer.lookup(group));
  instruction.set_group(group);
  return llvm::Error::success();
}

/// COMPUTE `resident_release` of a resident group's copy (generate_end).
llvm::Error Emitter::emitResidentRelease(zero::ResidentReleaseOp release) {
  uint32_t group = groupIndex.lookup(release.getGroup());
  const plan::Group &entry = result.plan.groups(group);
  if (entry.persistent() || readsShardInPlace(group))
    return llvm::Error::success();
  uint32_t copy = residentBuffer.lookup(group);
  if (!copy)
    return makeError("cannot emit " + describeOp(release) + ": group @" +
                     entry.name() + " is not resident");
  plan::Instruction &instruction =
      addInstruction(plan::OPCODE_RESIDENT_RELEASE, nullptr, 0);
  instruction.set_location("@" + entry.name());
  instruction.add_operands(copy);
  instruction.set_group(group);
  return llvm::Error::success();
}

/// COMPUTE `cache_append` whose result is the CACHE buffer itself: the
/// append writes in place, and every later reader of the result reads the
/// cache (no copy, no arena bytes).
llvm::Error Emitter::emitCacheAppend(nn::CacheAppendOp append) {
  uint32_t cache = cacheBuffer.lookup(append.getCache());
  if (!cache)
    return makeError("cannot emit " + describeOp(append) + ": @" +
                     append.getCache() + " is not an nn.kv_cache");
  auto type = llvm::cast<RankedTensorType>(append.getType());
  if (!llvm::equal(buffer(cache).shape(), type.getShape()))
    return makeError("cannot emit " + describeOp(append) +
                     ": its result type differs from the cache @" +
                     append.getCache());
  plan::Instruction &instruction = addInstruction(
      plan::OPCODE_CACHE_APPEND, append, cost.computeSeconds(append));
  instruction.add_operands(cache);
  instruction.add_operands(valueBuffer.lookup(append.getNewEntries()));
  instruction.add_operands(valueBuffer.lookup(append.getPositions()));
  instruction.add_results(cache);
  valueBuffer[append.getResult()] = cache;
  return llvm::Error::success();
}

/// Live ranges over instruction indices, for every ARENA buffer that owns
/// storage; views extend the buffer they view.
llvm::Error Emitter::planMemory() {
  plan::Plan &out = result.plan;
  int64_t count = program->instructions_size();
  int64_t last = std::max<int64_t>(count - 1, 0);
  std::vector<int64_t> first(out.buffers_size() + 1, -1),
      lastUse(out.buffers_size() + 1, -1);
  auto touch = [&](uint32_t id, int64_t index) {
    uint32_t root = baseOf(id);
    if (first[root] < 0 || index < first[root])
      first[root] = index;
    lastUse[root] = std::max(lastUse[root], index);
  };
  for (const plan::Binding &input : program->inputs())
    touch(input.buffer(), 0);
  for (const plan::Instruction &instruction : program->instructions()) {
    for (uint32_t id : instruction.operands())
      touch(id, instruction.index());
    for (uint32_t id : instruction.results())
      touch(id, instruction.index());
  }
  for (const plan::Binding &output : program->outputs())
    touch(output.buffer(), last);

  std::vector<BufferRequest> requests;
  for (const plan::Buffer &entry : out.buffers())
    if (entry.kind() == plan::Buffer::ARENA && entry.view_of() == 0 &&
        first[entry.id()] >= 0)
      requests.push_back(
          {entry.id(), entry.bytes(), first[entry.id()], lastUse[entry.id()]});
  if (llvm::Error error = carriedCopyRequests(requests))
    return error;
  if (std::optional<size_t> overflow = findArenaOverflow(requests))
    return makeError("the arena overflows at buffer '" +
                     buffer(requests[*overflow].id).name() + "' (" +
                     llvm::Twine(requests[*overflow].bytes) +
                     " B): the buffers of the program add up to more than "
                     "2^62 B");
  current->arena = planArena(requests);
  for (auto [request, offset] :
       llvm::zip_equal(requests, current->arena.offsets))
    buffer(request.id).set_offset(offset);
  for (plan::Buffer &entry : *out.mutable_buffers())
    if (entry.view_of() != 0 &&
        (buffer(entry.view_of()).kind() == plan::Buffer::ARENA ||
         buffer(entry.view_of()).kind() == plan::Buffer::CARRY))
      entry.set_offset(buffer(entry.view_of()).offset() + entry.view_offset());
  // Programs run one at a time and share the arena: it is as large as the
  // largest of them.
  out.set_arena_bytes(std::max(out.arena_bytes(), current->arena.arenaBytes));
  program->set_peak_arena_bytes(current->arena.arenaBytes);

  return llvm::Error::success();
}

/// The pinned requests of the program's carried copies (CARRY buffers),
/// whose bytes hold data across the program's boundaries: from its
/// carry_gather to the end (the next program reads it), and from the start
/// (the previous program filled it) to the last instruction before the
/// carry_gather that touches it (decode's carry_wait and the release of the
/// views, generate_end's carry_drain). A program that holds the copy from
/// its start asks for two requests of one buffer.
llvm::Error Emitter::carriedCopyRequests(std::vector<BufferRequest> &requests) {
  int64_t last = std::max<int64_t>(program->instructions_size() - 1, 0);
  for (auto [group, copy] : carryBuffer) {
    int64_t gatherAt = -1, heldUntil = -1;
    for (const plan::Instruction &instruction : program->instructions()) {
      if (instruction.opcode() == plan::OPCODE_CARRY_GATHER &&
          baseOf(instruction.results(0)) == copy) {
        gatherAt = instruction.index();
        continue;
      }
      for (const auto *ids : {&instruction.operands(), &instruction.results()})
        for (uint32_t id : *ids)
          if (baseOf(id) == copy)
            heldUntil = std::max<int64_t>(heldUntil, instruction.index());
    }
    for (const plan::Binding &output : program->outputs())
      if (baseOf(output.buffer()) == copy)
        heldUntil = last;
    if (gatherAt >= 0 && heldUntil >= gatherAt)
      return makeError("cannot emit program '" + program->name() +
                       "': its carry_gather of @" +
                       result.plan.groups(group).name() + " (instruction #" +
                       llvm::Twine(gatherAt) +
                       ") overwrites the carried copy that instruction #" +
                       llvm::Twine(heldUntil) + " still uses");
    uint64_t bytes = buffer(copy).bytes(), offset = buffer(copy).offset();
    if (heldUntil >= 0)
      requests.push_back({copy, bytes, 0, heldUntil, offset});
    if (gatherAt >= 0)
      requests.push_back({copy, bytes, gatherAt, last, offset});
  }
  return llvm::Error::success();
}

llvm::Expected<EmittedPlan> Emitter::run() {
  bool generation = module.lookupSymbol<func::FuncOp>(kDecodeName) != nullptr;
  if (!module.lookupSymbol<func::FuncOp>(kForwardName) && !generation)
    return makeError("the module has no @forward (or @" + kDecodeName +
                     ") function to emit");
  plan::Plan &out = result.plan;
  out.set_version(plan::kPlanVersion);
  out.set_world_size(worldSizeOf(module));
  out.set_hardware(options.hardware);
  out.set_model(options.modelName);
  out.set_weights_file(options.weightsFile);
  out.set_memory_budget(options.memoryBudget);
  out.set_offload_dir(options.offloadDir);
  if (const TrainDefaults &defaults = options.trainDefaults; defaults.any()) {
    plan::TrainDefaults &to = *out.mutable_train_defaults();
    if (defaults.gradAccum)
      to.set_grad_accum(*defaults.gradAccum);
    if (defaults.clipGradNorm)
      to.set_clip_grad_norm(*defaults.clipGradNorm);
    if (defaults.lr)
      to.set_lr(*defaults.lr);
    if (defaults.beta1)
      to.set_beta1(*defaults.beta1);
    if (defaults.beta2)
      to.set_beta2(*defaults.beta2);
    if (defaults.eps)
      to.set_eps(*defaults.eps);
    if (defaults.weightDecay)
      to.set_weight_decay(*defaults.weightDecay);
  }
  offloaded = selectOffloaded(module, SymbolTable(module));
  declareGroups();
  noteParameterRules();
  declareGeneration();
  if (auto step = module.lookupSymbol<func::FuncOp>(kOptimizerStepName)) {
    llvm::StringRef optimizer = "adamw";
    for (auto update : step.getOps<zero::OptimizerUpdateOp>())
      optimizer = update.getOptimizer();
    declareState(optimizer);
  } else if (module.lookupSymbol<func::FuncOp>(kTrainStepName)) {
    return makeError("the module has @" + kTrainStepName + " but no @" +
                     kOptimizerStepName + " (run zplan-optimizer-step)");
  }
  // The programs in a fixed order; the training step, when there is one
  // (also in a train,generate plan), is the one the search and the dumps
  // measure, and in a generation plan the decode step (run once per token).
  bool training = module.lookupSymbol<func::FuncOp>(kTrainStepName) != nullptr;
  for (llvm::StringRef name :
       {kForwardName, kLogprobsName, kTrainStepName, kOptimizerStepName,
        kGenerateBeginName, kPrefillName, kDecodeName, kGenerateEndName}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    if (name == kDecodeName && !training)
      result.primary = result.programs.size();
    if (name == kTrainStepName) {
      result.primary = result.programs.size();
      if (auto blocks = func->getAttrOfType<IntegerAttr>("zplan.blocks"))
        result.blocks = blocks.getInt();
      if (auto names =
              func->getAttrOfType<ArrayAttr>("zplan.recomputed_blocks"))
        for (auto name : names.getAsValueRange<StringAttr>())
          result.recomputedBlocks.push_back(name.str());
    }
    result.programs.emplace_back();
    current = &result.programs.back();
    program = out.add_programs();
    program->set_name(programNameOf(name).str());
    program->set_kind(programKindOf(name));
    if (name == kTrainStepName && func->hasAttr(kTokenSumLossAttr))
      program->set_loss_normalization(plan::LOSS_NORMALIZATION_TOKEN_SUM);
    if (name == kDecodeName)
      program->set_lockstep_period(
          static_cast<uint32_t>(lockstepPeriodOf(func)));
    lastCompute = -1;
    carryHeld.clear();
    if (name == kOptimizerStepName) {
      updateGroups.clear();
      updatesEmitted = 0;
      hyperStored = false;
      gradientsStored = 0;
      gradientStores.clear();
      momentSlotsTaken = 0;
      hostMoments.clear();
      for (auto update : func.getOps<zero::OptimizerUpdateOp>())
        updateGroups.push_back(groupIndex.lookup(update.getGroup()));
    }
    if (llvm::Error error = emitOps(func))
      return std::move(error);
    waitForDeferredCopies();
    if (carryFetch)
      addTierWait(carryFetch->instruction, carryFetch->staging);
    carryFetch.reset();
    if (llvm::Error error = planMemory())
      return std::move(error);
  }
  result.arena = result.programs[result.primary].arena;
  result.arena.arenaBytes = out.arena_bytes();
  result.seconds = result.programs[result.primary].seconds;
  result.cost.emplace(cost);
  // zrun finds programs and bindings by kind and role: a plan that breaks
  // their contract (a generation model whose prefill takes an input the
  // session cannot feed) is refused here, naming it, not on N ranks.
  if (Status status = plan::checkProgramContracts(out); !status.ok())
    return makeError("the plan cannot run: " + status.message());
  // The plan is complete: zrun refuses a constant that fails its checksum.
  plan::stampConstantChecksums(out);
  return std::move(result);
}

} // namespace

llvm::Expected<EmittedPlan> zplan::emitPlan(ModuleOp module,
                                            const EmitOptions &options,
                                            const CostModel &cost) {
  Emitter emitter(module, options, cost);
  return emitter.run();
}
