//===- ZeroOps.cpp - zero op verifiers ------------------------------------===//
//
// The local half of the safety argument: each op checks its own operands
// (a wait completes a start of the right kind, its results are the tensors of
// the shards that were started, a release frees only gathered copies, a
// group's layout holds its parameters). The whole-program rules (no use after
// release, every copy released) belong to the schedule verifier pass.
//
//===----------------------------------------------------------------------===//

#include "dialects/zero/ZeroDialect.h"

#include "dialects/Diagnostics.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::zero;

/// Looks up the nn.parameter a symbol reference names, reporting on `op` when
/// there is none.
static FailureOr<nn::ParameterOp> lookupParameter(Operation *op,
                                                  SymbolTableCollection &table,
                                                  FlatSymbolRefAttr name) {
  auto param = table.lookupNearestSymbolFrom<nn::ParameterOp>(op, name);
  if (!param)
    return op->emitOpError()
           << "names " << name << ", which is not an nn.parameter";
  return param;
}

/// A token must be completed by exactly one wait: a second wait would gather
/// twice, a missing one would leave a collective dangling on every rank. Its
/// one use must be that wait: a wait only accepts a token its start defines,
/// so a token passed anywhere else (returned, a block argument) can never be
/// completed.
template <typename WaitOp>
static LogicalResult verifySingleWait(Operation *start, Value token) {
  if (!token.hasOneUse())
    return start->emitOpError()
           << "token must have exactly one wait, found "
           << std::distance(token.use_begin(), token.use_end()) << " uses";
  Operation *user = *token.user_begin();
  if (!llvm::isa<WaitOp>(user))
    return start->emitOpError()
           << "token must be completed by a " << WaitOp::getOperationName()
           << ", but its only use is '" << user->getName() << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// Groups and shards
//===----------------------------------------------------------------------===//

LogicalResult GroupOp::verify() {
  if (getParams().empty())
    return emitOpError("must hold at least one parameter");
  // A parameter listed twice would occupy two slots of the flat buffer.
  llvm::SmallDenseSet<Attribute> seen;
  for (Attribute name : getParams())
    if (!seen.insert(name).second)
      return emitOpError() << "lists parameter " << name << " twice";
  // The generated getters of I64Attr return uint64_t; compare signed values.
  int64_t worldSize = getWorldSizeAttr().getInt();
  int64_t paddedElements = getPaddedElementsAttr().getInt();
  if (worldSize < 1)
    return emitOpError() << "world_size is " << worldSize << ", expected >= 1";
  if (paddedElements % worldSize != 0)
    return emitOpError() << "padded_elements " << paddedElements
                         << " is not a multiple of world_size " << worldSize;
  // Mixed precision converts f32 to bf16 and nothing else (the parameters'
  // type is checked with the symbol table).
  for (auto [name, type] : {std::pair{"gather_type", getGatherType()},
                            std::pair{"reduce_type", getReduceType()}})
    if (type && !type->isBF16())
      return emitOpError() << name << " is " << *type << ", expected bf16";
  if (getGatherType() && getPersistent())
    return emitOpError("is persistent (whole on every rank, never gathered): "
                       "it has no gather_type");
  return success();
}

SmallVector<int64_t> GroupOp::getParameterOffsets() {
  if (auto offsets = getOffsets())
    return SmallVector<int64_t>(offsets->begin(), offsets->end());
  SmallVector<int64_t> offsets;
  int64_t next = 0;
  for (Attribute name : getParams()) {
    offsets.push_back(next);
    if (auto param = SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(
            *this, llvm::cast<FlatSymbolRefAttr>(name)))
      next += param.getTensorType().getNumElements();
  }
  return offsets;
}

LogicalResult GroupOp::verifySymbolUses(SymbolTableCollection &table) {
  int64_t total = 0;
  std::optional<ArrayRef<int64_t>> offsets = getOffsets();
  if (offsets && offsets->size() != getParams().size())
    return emitOpError() << "has " << offsets->size() << " offsets for "
                         << getParams().size() << " parameters";
  for (auto [index, name] : llvm::enumerate(getParams())) {
    FailureOr<nn::ParameterOp> param =
        lookupParameter(*this, table, llvm::cast<FlatSymbolRefAttr>(name));
    if (failed(param))
      return failure();
    if ((getGatherType() || getReduceType()) &&
        !param->getTensorType().getElementType().isF32())
      return emitOpError() << "converts to bf16, but " << name << " is "
                           << param->getTensorType()
                           << "; mixed precision needs f32 parameters";
    // One group is updated (or not) as a whole.
    if (param->isFrozen() != getFrozen())
      return emitOpError() << (getFrozen() ? "is frozen, but "
                                           : "is not "
                                             "frozen, but ")
                           << name << (param->isFrozen() ? " is" : " is not")
                           << " frozen";
    int64_t elements = param->getTensorType().getNumElements();
    if (offsets) {
      // Parameters in order, none overlapping the previous one.
      if ((*offsets)[index] < total)
        return emitOpError() << "offset " << (*offsets)[index] << " of " << name
                             << " overlaps the parameter before it "
                             << "(which ends at " << total << ")";
      total = (*offsets)[index];
    }
    total += elements;
  }
  int64_t paddedElements = getPaddedElementsAttr().getInt();
  if (paddedElements < total)
    return emitOpError() << "padded_elements " << paddedElements
                         << " is smaller than the " << total
                         << " elements of its parameters";
  return success();
}

/// A shard (of a parameter or of its gradient) has the parameter's type.
static LogicalResult verifyShardOfParameter(Operation *op,
                                            SymbolTableCollection &table,
                                            FlatSymbolRefAttr name,
                                            ShardType result) {
  FailureOr<nn::ParameterOp> param = lookupParameter(op, table, name);
  if (failed(param))
    return failure();
  RankedTensorType expected = param->getTensorType();
  if (result.getTensorType() != expected)
    return op->emitOpError()
           << "result is a shard of " << result.getTensorType() << ", but "
           << name << " is " << expected;
  return success();
}

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyShardOfParameter(*this, table, getParamAttr(),
                                getResult().getType());
}

LogicalResult GradShardOp::verifySymbolUses(SymbolTableCollection &table) {
  if (failed(verifyShardOfParameter(*this, table, getParamAttr(),
                                    getResult().getType())))
    return failure();
  if (table.lookupNearestSymbolFrom<nn::ParameterOp>(*this, getParamAttr())
          .isFrozen())
    return emitOpError() << getParamAttr() << " is frozen: it has no gradient";
  return success();
}

//===----------------------------------------------------------------------===//
// All-gather
//===----------------------------------------------------------------------===//

/// Whether `tensor` can be the gathered copy of `shard`: the shard's tensor
/// type, or (a mixed-precision group) the same shape in bf16 of an f32
/// shard. Which of the two the group gathers is checked with the group
/// (verifyGatheredTypes).
static bool isGatheredTypeOf(Type tensor, ShardType shard) {
  RankedTensorType full = shard.getTensorType();
  if (tensor == full)
    return true;
  auto ranked = llvm::dyn_cast<RankedTensorType>(tensor);
  return ranked && full.getElementType().isF32() &&
         ranked.getElementType().isBF16() &&
         ranked.getShape() == full.getShape();
}

/// The tensors gathered from `shards` of `group` have the element type the
/// group gathers (GroupOp::getGatheredElementType).
static LogicalResult verifyGatheredTypes(Operation *op, GroupOp group,
                                         ValueRange shards,
                                         ValueRange tensors) {
  for (auto [index, shard, tensor] : llvm::enumerate(shards, tensors)) {
    Type parameter =
        llvm::cast<ShardType>(shard.getType()).getTensorType().getElementType();
    Type expected = group.getGatheredElementType(parameter);
    Type actual =
        llvm::cast<RankedTensorType>(tensor.getType()).getElementType();
    if (actual != expected)
      return op->emitOpError() << "gathers tensor " << index << " as " << actual
                               << ", but group @" << group.getSymName()
                               << " gathers " << expected;
  }
  return success();
}

/// The shards an op moves as one group (`verb` says how: "gathers",
/// "reads") are exactly the group's parameters, in its order.
static LogicalResult verifyShardsOfGroup(Operation *op, StringRef verb,
                                         ValueRange shards, GroupOp group) {
  auto name = FlatSymbolRefAttr::get(group.getSymNameAttr());
  ArrayAttr params = group.getParams();
  if (params.size() != shards.size())
    return op->emitOpError()
           << verb << " " << shards.size() << " shards, but group " << name
           << " has " << params.size() << " parameters";
  for (auto [index, shard, param] :
       llvm::enumerate(shards, params.getValue())) {
    auto read = shard.getDefiningOp<ShardOp>();
    if (read && read.getParamAttr() != param)
      return op->emitOpError()
             << "shard " << index << " reads " << read.getParamAttr()
             << ", but group " << name << " expects " << param;
  }
  return success();
}

LogicalResult GatherStartOp::verify() {
  if (getShards().empty())
    return emitOpError("must gather at least one shard");
  return verifySingleWait<GatherWaitOp>(*this, getToken());
}

LogicalResult GatherStartOp::verifySymbolUses(SymbolTableCollection &table) {
  if (!getGroupAttr())
    return success();
  auto group = table.lookupNearestSymbolFrom<GroupOp>(*this, getGroupAttr());
  if (!group)
    return emitOpError() << "group " << getGroupAttr()
                         << " is not a zero.group";
  if (failed(verifyShardsOfGroup(*this, "gathers", getShards(), group)))
    return failure();
  for (Operation *user : getToken().getUsers())
    if (auto wait = llvm::dyn_cast<GatherWaitOp>(user))
      if (failed(
              verifyGatheredTypes(wait, group, getShards(), wait.getTensors())))
        return failure();
  return success();
}

LogicalResult GatherWaitOp::verify() {
  GatherStartOp start = getStart();
  if (!start)
    return emitOpError("token must come from a zero.gather_start");
  if (start.getShards().size() != getTensors().size())
    return emitOpError() << "has " << getTensors().size()
                         << " results, but its start gathers "
                         << start.getShards().size() << " shards";
  for (auto [index, shard, tensor] :
       llvm::enumerate(start.getShards(), getTensors())) {
    auto type = llvm::cast<ShardType>(shard.getType());
    if (!isGatheredTypeOf(tensor.getType(), type))
      return emitOpError() << "result " << index << " has type "
                           << tensor.getType() << ", expected "
                           << type.getTensorType() << " (the gathered shard)";
  }
  return success();
}

LogicalResult ReleaseOp::verify() {
  // An empty release has no custom form (it would print as `zero.release :`).
  if (getTensors().empty())
    return emitOpError("must release at least one tensor");
  for (auto [index, tensor] : llvm::enumerate(getTensors()))
    if (!tensor.getDefiningOp<GatherWaitOp>() &&
        !tensor.getDefiningOp<CarryWaitOp>())
      return emitOpError() << "operand " << index
                           << " is not a gathered parameter (it must be a "
                              "result of zero.gather_wait or "
                              "zero.carry_wait)";
  return success();
}

//===----------------------------------------------------------------------===//
// Residency
//===----------------------------------------------------------------------===//

/// The group a residency or carry op names: it must exist, and be marked
/// `resident` exactly when `resident` is true. A non-resident group's copy
/// is not kept across programs (the resident ops); a resident group is never
/// gathered per token, so there is nothing to carry (the carry ops).
static LogicalResult verifyGroupResidency(Operation *op,
                                          SymbolTableCollection &table,
                                          FlatSymbolRefAttr name, bool resident,
                                          GroupOp *found = nullptr) {
  auto group = table.lookupNearestSymbolFrom<GroupOp>(op, name);
  if (!group)
    return op->emitOpError() << "group " << name << " is not a zero.group";
  if (resident && !group.getResident())
    return op->emitOpError() << "group " << name << " is not resident";
  if (!resident && group.getResident())
    return op->emitOpError() << "group " << name
                             << " is resident: it is never gathered per token";
  if (found)
    *found = group;
  return success();
}

static LogicalResult verifyResidentGroup(Operation *op,
                                         SymbolTableCollection &table,
                                         FlatSymbolRefAttr name,
                                         GroupOp *found = nullptr) {
  return verifyGroupResidency(op, table, name, /*resident=*/true, found);
}

LogicalResult ResidentGatherOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyResidentGroup(*this, table, getGroupAttr());
}

LogicalResult
ResidentReleaseOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyResidentGroup(*this, table, getGroupAttr());
}

/// An op that turns shards into their parameters without a token
/// (resident_read, carry_wait; `verb` says how: "read", "complete") has one
/// result per shard, of the parameter's full type.
static LogicalResult verifyTensorsOfShards(Operation *op, StringRef verb,
                                           ValueRange shards,
                                           ValueRange tensors) {
  if (shards.empty())
    return op->emitOpError() << "must " << verb << " at least one shard";
  if (shards.size() != tensors.size())
    return op->emitOpError() << "has " << tensors.size() << " results for "
                             << shards.size() << " shards";
  for (auto [index, shard, tensor] : llvm::enumerate(shards, tensors)) {
    auto type = llvm::cast<ShardType>(shard.getType());
    if (!isGatheredTypeOf(tensor.getType(), type))
      return op->emitOpError()
             << "result " << index << " has type " << tensor.getType()
             << ", expected " << type.getTensorType()
             << " (the parameter of shard " << index << ")";
  }
  return success();
}

LogicalResult ResidentReadOp::verify() {
  return verifyTensorsOfShards(*this, "read", getShards(), getTensors());
}

LogicalResult ResidentReadOp::verifySymbolUses(SymbolTableCollection &table) {
  GroupOp group;
  if (failed(verifyResidentGroup(*this, table, getGroupAttr(), &group)) ||
      failed(verifyShardsOfGroup(*this, "reads", getShards(), group)))
    return failure();
  return verifyGatheredTypes(*this, group, getShards(), getTensors());
}

//===----------------------------------------------------------------------===//
// Cross-step prefetch
//===----------------------------------------------------------------------===//

static LogicalResult verifyCarriedGroup(Operation *op,
                                        SymbolTableCollection &table,
                                        FlatSymbolRefAttr name,
                                        GroupOp *found = nullptr) {
  return verifyGroupResidency(op, table, name, /*resident=*/false, found);
}

LogicalResult CarryStartOp::verify() {
  if (getShards().empty())
    return emitOpError("must gather at least one shard");
  return success();
}

LogicalResult CarryStartOp::verifySymbolUses(SymbolTableCollection &table) {
  GroupOp group;
  if (failed(verifyCarriedGroup(*this, table, getGroupAttr(), &group)))
    return failure();
  return verifyShardsOfGroup(*this, "gathers", getShards(), group);
}

LogicalResult CarryWaitOp::verify() {
  return verifyTensorsOfShards(*this, "complete", getShards(), getTensors());
}

LogicalResult CarryWaitOp::verifySymbolUses(SymbolTableCollection &table) {
  GroupOp group;
  if (failed(verifyCarriedGroup(*this, table, getGroupAttr(), &group)) ||
      failed(verifyShardsOfGroup(*this, "completes", getShards(), group)))
    return failure();
  return verifyGatheredTypes(*this, group, getShards(), getTensors());
}

LogicalResult CarryDrainOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCarriedGroup(*this, table, getGroupAttr());
}

//===----------------------------------------------------------------------===//
// Reduce-scatter
//===----------------------------------------------------------------------===//

LogicalResult ReduceScatterStartOp::verify() {
  if (getGradients().empty())
    return emitOpError("must reduce at least one gradient");
  return verifySingleWait<ReduceScatterWaitOp>(*this, getToken());
}

LogicalResult ReduceScatterWaitOp::verify() {
  auto start = getToken().getDefiningOp<ReduceScatterStartOp>();
  if (!start)
    return emitOpError("token must come from a zero.reduce_scatter_start");
  if (start.getGradients().size() != getShards().size())
    return emitOpError() << "has " << getShards().size()
                         << " results, but its start reduces "
                         << start.getGradients().size() << " gradients";
  if (!getAccumulators().empty() &&
      getAccumulators().size() != getShards().size())
    return emitOpError() << "has " << getAccumulators().size()
                         << " accumulators, expected none or "
                         << getShards().size();
  for (auto [index, gradient, shard] :
       llvm::enumerate(start.getGradients(), getShards())) {
    auto expected = ShardType::get(
        getContext(), llvm::cast<RankedTensorType>(gradient.getType()));
    if (shard.getType() != expected)
      return emitOpError() << "result " << index << " has type "
                           << shard.getType() << ", expected " << expected;
    if (!getAccumulators().empty() &&
        getAccumulators()[index].getType() != expected)
      return emitOpError() << "accumulator " << index << " has type "
                           << getAccumulators()[index].getType()
                           << ", expected " << expected;
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/zero/ZeroOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

LogicalResult OptimizerUpdateOp::verify() {
  if (getOptimizer() != "adamw" && getOptimizer() != "sgd")
    return emitOpError() << "unknown optimizer '" << getOptimizer()
                         << "' (expected adamw or sgd)";
  auto type = llvm::cast<RankedTensorType>(getHyper().getType());
  if (type.getRank() != 1 || type.getDimSize(0) != kHyperParameterCount)
    return emitOpError() << "hyper must be tensor<" << kHyperParameterCount
                         << "xf32>, got " << type;
  return success();
}

LogicalResult
OptimizerUpdateOp::verifySymbolUses(SymbolTableCollection &table) {
  auto group = table.lookupNearestSymbolFrom<GroupOp>(*this, getGroupAttr());
  if (!group)
    return emitOpError() << "group " << getGroupAttr()
                         << " is not a zero.group";
  if (group.getFrozen())
    return emitOpError() << "group " << getGroupAttr()
                         << " is frozen: it is never updated";
  return success();
}
