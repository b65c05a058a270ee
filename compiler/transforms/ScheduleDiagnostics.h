//===- ScheduleDiagnostics.h - how schedule errors name things ------------===//
//
// The schedule passes report on values and memory in one voice: a value is
// named by its ONNX node (the op's NameLoc) or parameter, and a budget
// failure lists the op, every live buffer and the bytes over, largest first.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_SCHEDULEDIAGNOSTICS_H
#define ZPLAN_COMPILER_TRANSFORMS_SCHEDULEDIAGNOSTICS_H

#include "dialects/zero/ZeroDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/STLExtras.h"

#include <string>
#include <utility>

namespace zplan {

/// The ONNX node name an op was imported from, or its op name.
inline std::string describeOp(mlir::Operation *op) {
  if (auto name = llvm::dyn_cast<mlir::NameLoc>(op->getLoc()))
    return op->getName().getStringRef().str() + " '" + name.getName().str() +
           "'";
  return op->getName().getStringRef().str();
}

/// A value as a person finds it in the model: the parameter it gathers, the
/// graph input it is, or the node that computes it.
inline std::string describeValue(mlir::Value value) {
  if (auto argument = llvm::dyn_cast<mlir::BlockArgument>(value)) {
    auto func =
        llvm::dyn_cast<mlir::func::FuncOp>(argument.getOwner()->getParentOp());
    if (func)
      if (auto name = func.getArgAttrOfType<mlir::StringAttr>(
              argument.getArgNumber(), "nn.name"))
        return "input '" + name.str() + "'";
    return "input #" + std::to_string(argument.getArgNumber());
  }
  mlir::Operation *op = value.getDefiningOp();
  if (auto wait = llvm::dyn_cast<zero::GatherWaitOp>(op)) {
    unsigned index = llvm::cast<mlir::OpResult>(value).getResultNumber();
    if (auto start = wait.getStart())
      if (auto shard = start.getShards()[index].getDefiningOp<zero::ShardOp>())
        return "parameter '" + shard.getParam().str() + "'";
  }
  if (auto wait = llvm::dyn_cast<zero::CarryWaitOp>(op)) {
    unsigned index = llvm::cast<mlir::OpResult>(value).getResultNumber();
    if (auto shard = wait.getShards()[index].getDefiningOp<zero::ShardOp>())
      return "parameter '" + shard.getParam().str() + "'";
  }
  return describeOp(op);
}

inline std::string formatBytes(uint64_t bytes) {
  return std::to_string(bytes) + " B";
}

/// Reports that live memory at op `index` exceeds `budget`.
/// `context` says under which schedule, e.g. "even with gathers just in
/// time".
inline mlir::LogicalResult
emitOverBudget(mlir::Operation *op, int64_t index, uint64_t budget,
               uint64_t resident, uint64_t transient,
               llvm::SmallVector<std::pair<std::string, uint64_t>> buffers,
               llvm::StringRef context) {
  // Stable: equal sizes keep program order, so the message is reproducible.
  llvm::stable_sort(buffers, [](const auto &a, const auto &b) {
    return a.second > b.second;
  });
  mlir::InFlightDiagnostic diag = op->emitError();
  diag << "does not fit the memory budget of " << formatBytes(budget)
       << " per rank, " << context << ": at op #" << index << " ("
       << describeOp(op) << ") shards and persistent groups hold "
       << formatBytes(resident) << " and live buffers "
       << formatBytes(transient) << ", "
       << formatBytes(resident + transient - budget) << " over; live buffers:";
  for (auto &[name, bytes] : buffers)
    diag << " " << name << " (" << formatBytes(bytes) << ");";
  return diag;
}

} // namespace zplan

#endif // ZPLAN_COMPILER_TRANSFORMS_SCHEDULEDIAGNOSTICS_H
