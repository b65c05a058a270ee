//===- MergePrograms.cpp - one module from two imports of one model -------===//
//
// Everything is checked before anything moves, so a refused merge leaves
// both modules as they were. A parameter is compared by its whole attribute
// dictionary (type and external-data file, offset, length): two imports of
// one model file that agree on these read the same initializer bytes, which
// is what makes one set of shards serve every program.
//
//===----------------------------------------------------------------------===//

#include "compiler/generate/MergePrograms.h"

#include "compiler/Errors.h"
#include "dialects/nn/NNDialect.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace zplan;

/// The first parameter `module` declares that `other` does not.
static nn::ParameterOp firstMissing(ModuleOp module, ModuleOp other) {
  for (auto parameter : module.getOps<nn::ParameterOp>())
    if (!other.lookupSymbol<nn::ParameterOp>(parameter.getSymName()))
      return parameter;
  return nullptr;
}

llvm::Error zplan::mergePrograms(ModuleOp into, llvm::StringRef intoName,
                                 ModuleOp from, llvm::StringRef fromName) {
  for (auto [module, other, name, otherName] :
       {std::make_tuple(into, from, intoName, fromName),
        std::make_tuple(from, into, fromName, intoName)})
    if (nn::ParameterOp missing = firstMissing(module, other))
      return makeError("parameter '" + missing.getSymName() +
                       "' is declared by the " + name +
                       " import but not by "
                       "the " +
                       otherName + " import");
  for (Operation &op : *from.getBody()) {
    if (auto parameter = llvm::dyn_cast<nn::ParameterOp>(op)) {
      auto existing =
          into.lookupSymbol<nn::ParameterOp>(parameter.getSymName());
      if (existing->getAttrDictionary() != parameter->getAttrDictionary()) {
        std::string theirs, ours;
        llvm::raw_string_ostream(ours) << existing->getAttrDictionary();
        llvm::raw_string_ostream(theirs) << parameter->getAttrDictionary();
        return makeError("parameter '" + parameter.getSymName() +
                         "' differs between the " + intoName + " and " +
                         fromName + " imports: " + ours + " vs " + theirs);
      }
      continue;
    }
    if (auto symbol = llvm::dyn_cast<SymbolOpInterface>(op))
      if (into.lookupSymbol(symbol.getName()))
        return makeError("symbol '" + symbol.getName() +
                         "' is declared by both the " + intoName + " and " +
                         fromName + " imports");
  }
  for (Operation &op : llvm::make_early_inc_range(*from.getBody()))
    if (!llvm::isa<nn::ParameterOp>(op))
      op.moveBefore(into.getBody(), into.getBody()->end());
  return llvm::Error::success();
}
