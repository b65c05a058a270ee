//===- NNDialect.cpp - nn dialect registration ----------------------------===//
//
// Registers the nn ops and lets folding materialise constants as nn.constant.
//
//===----------------------------------------------------------------------===//

#include "dialects/nn/NNDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace zplan::nn;

#include "dialects/nn/NNDialect.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/nn/NNOps.cpp.inc"
      >();
}

std::optional<StringRef> zplan::nn::onnxNodeName(Location loc) {
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = llvm::dyn_cast<NameLoc>(inner))
        return name.getName().strref();
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().strref();
  return std::nullopt;
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}
