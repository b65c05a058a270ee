//===- NNOps.cpp - nn op verifiers and folders ----------------------------===//
//
// Verifiers check what the type system cannot: that shapes agree with the
// op's semantics. Each message names the operand and prints the shapes found
// and expected (through dialects/Diagnostics.h), so that a mistake in the
// importer or in a pass points at its cause.
//
//===----------------------------------------------------------------------===//

#include "dialects/nn/NNDialect.h"

#include "dialects/Diagnostics.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::nn;

static ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

FailureOr<SmallVector<int64_t>>
zplan::nn::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    result[i] = da == 1 ? db : da;
  }
  return result;
}

LogicalResult zplan::nn::verifyBroadcast(Operation *op) {
  SmallVector<int64_t> expected;
  for (Value operand : op->getOperands()) {
    FailureOr<SmallVector<int64_t>> joined =
        nn::broadcastShapes(expected, shapeOf(operand));
    if (failed(joined))
      return op->emitOpError()
             << "operand shapes do not broadcast: " << formatShape(expected)
             << " and " << formatShape(shapeOf(operand));
    expected = *joined;
  }
  ArrayRef<int64_t> result = shapeOf(op->getResult(0));
  if (result != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(op, "result", result, expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  bool hasFile = getExternalFile().has_value();
  bool hasOffset = getExternalOffset().has_value();
  bool hasLength = getExternalLength().has_value();
  if (hasFile != hasOffset || hasFile != hasLength)
    return emitOpError("external_file, external_offset and external_length "
                       "must be given together");
  if (hasLength) {
    // The generated getters of I64Attr return uint64_t; read the signed value
    // from the attribute so that a negative offset is seen as one.
    int64_t length = getExternalLengthAttr().getInt();
    int64_t offset = getExternalOffsetAttr().getInt();
    RankedTensorType type = getTensorType();
    int64_t bytes =
        type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
    if (length != bytes)
      return emitOpError() << "external_length is " << length
                           << " bytes, expected " << bytes << " for " << type;
    if (offset < 0)
      return emitOpError() << "external_offset " << offset << " is negative";
  }
  // Each tied copy: a name other than the parameter's, once; `transposed`
  // only for a 2-D parameter (the copy is its transpose).
  if (std::optional<ArrayAttr> copies = getTiedCopies()) {
    llvm::SmallDenseSet<StringRef> names;
    for (Attribute entry : *copies) {
      auto copy = llvm::cast<DictionaryAttr>(entry);
      auto name = copy.getAs<StringAttr>("name");
      auto transposed = copy.getAs<BoolAttr>("transposed");
      auto equal = copy.getAs<BoolAttr>("equal");
      auto reason = copy.getAs<StringAttr>("reason");
      if (!name || !transposed || !equal || !reason || copy.size() != 4)
        return emitOpError() << "tied copy " << copy
                             << " must be {name, transposed, equal, reason}";
      if (name.getValue().empty() || name.getValue() == getSymName() ||
          !names.insert(name.getValue()).second)
        return emitOpError() << "tied copy '" << name.getValue()
                             << "' is empty, the parameter itself or listed "
                                "twice";
      if (transposed.getValue() && getTensorType().getRank() != 2)
        return emitOpError() << "tied copy '" << name.getValue()
                             << "' is transposed, but the parameter has rank "
                             << getTensorType().getRank();
    }
  }
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate is \"" << getApproximate()
                         << "\", expected \"none\" or \"tanh\"";
  return success();
}

LogicalResult WhereOp::verify() {
  if (getElementTypeOrSelf(getOnTrue()) != getElementTypeOrSelf(getOnFalse()) ||
      getElementTypeOrSelf(getOnTrue()) != getElementTypeOrSelf(getResult()))
    return emitOpError("on_true, on_false and result must share one element "
                       "type");
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  Type operandType = getElementTypeOrSelf(getLhs().getType());
  Type resultType = getElementTypeOrSelf(getResult().getType());
  if (getElementTypeOrSelf(getRhs().getType()) != operandType)
    return emitOpError() << "lhs and rhs element types differ: " << operandType
                         << " and " << getElementTypeOrSelf(getRhs().getType());
  if (resultType != operandType &&
      !(operandType.isBF16() && resultType.isF32()))
    return emitOpError() << "result element type " << resultType
                         << " is neither the operands' " << operandType
                         << " nor f32 over bf16 operands";
  if (getBias() && getElementTypeOrSelf(getBias().getType()) != resultType)
    return emitOpError() << "bias element type "
                         << getElementTypeOrSelf(getBias().getType())
                         << " differs from the result's " << resultType;
  SmallVector<int64_t> lhs(shapeOf(getLhs()));
  SmallVector<int64_t> rhs(shapeOf(getRhs()));
  if (lhs.empty() || rhs.empty())
    return emitOpError("operands must have rank >= 1");
  if (getTransposeRhs()) {
    if (rhs.size() < 2)
      return emitOpError("transpose_rhs needs rhs of rank >= 2");
    std::swap(rhs[rhs.size() - 1], rhs[rhs.size() - 2]);
  }
  // numpy matmul: rank-1 operands are promoted, and the unit dimension
  // dropped from the result again.
  bool lhsVector = lhs.size() == 1, rhsVector = rhs.size() == 1;
  if (lhsVector)
    lhs.insert(lhs.begin(), 1);
  if (rhsVector)
    rhs.push_back(1);
  int64_t k = lhs.back(), kr = rhs[rhs.size() - 2];
  if (k != kr)
    return emitOpError() << "contraction dimensions differ: lhs "
                         << formatShape(shapeOf(getLhs())) << " has " << k
                         << ", rhs " << formatShape(shapeOf(getRhs()))
                         << " has " << kr;
  FailureOr<SmallVector<int64_t>> batch = nn::broadcastShapes(
      ArrayRef<int64_t>(lhs).drop_back(2), ArrayRef<int64_t>(rhs).drop_back(2));
  if (failed(batch))
    return emitOpError() << "batch dimensions do not broadcast: "
                         << formatShape(shapeOf(getLhs())) << " and "
                         << formatShape(shapeOf(getRhs()));
  SmallVector<int64_t> expected = *batch;
  if (!lhsVector)
    expected.push_back(lhs[lhs.size() - 2]);
  if (!rhsVector)
    expected.push_back(rhs.back());
  if (getBias()) {
    FailureOr<SmallVector<int64_t>> withBias =
        nn::broadcastShapes(expected, shapeOf(getBias()));
    if (failed(withBias) || *withBias != expected)
      return emitOpError() << "bias of shape "
                           << formatShape(shapeOf(getBias()))
                           << " does not broadcast to the product shape "
                           << formatShape(expected);
  }
  if (shapeOf(getResult()) != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()), expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> perm = getPerm();
  if (perm.size() != input.size())
    return emitOpError() << "perm has " << perm.size()
                         << " entries, expected the input rank "
                         << input.size();
  SmallVector<bool> seen(input.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= static_cast<int64_t>(input.size()))
      return emitAxisOutOfRange(*this, "perm entry", axis, input.size());
    if (seen[axis])
      return emitOpError() << "perm repeats dimension " << axis;
    seen[axis] = true;
    expected.push_back(input[axis]);
  }
  if (shapeOf(getResult()) != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()), expected);
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (input.getNumElements() != result.getNumElements())
    return emitOpError() << "cannot reshape " << formatShape(input.getShape())
                         << " (" << input.getNumElements() << " elements) into "
                         << formatShape(result.getShape()) << " ("
                         << result.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  // A reshape of a reshape reads the original data.
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto constant =
          llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return constant.reshape(llvm::cast<ShapedType>(getResult().getType()));
  return {};
}

LogicalResult ExpandOp::verify() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> result = shapeOf(getResult());
  FailureOr<SmallVector<int64_t>> joined = nn::broadcastShapes(input, result);
  if (failed(joined) || ArrayRef<int64_t>(*joined) != result)
    return emitOpError() << "cannot expand " << formatShape(input) << " to "
                         << formatShape(result);
  return success();
}

/// The bounds of a strided slice of `input` that has the shape `sliced`
/// (nn.slice reads it; nn.slice_grad places its gradient there). The
/// messages call the two `slicedName` and `inputName`.
static LogicalResult verifySliceBounds(Operation *op, ArrayRef<int64_t> input,
                                       ArrayRef<int64_t> sliced,
                                       ArrayRef<int64_t> starts,
                                       ArrayRef<int64_t> steps,
                                       StringRef slicedName,
                                       StringRef inputName, StringRef verb) {
  if (starts.size() != input.size() || steps.size() != input.size())
    return op->emitOpError()
           << "starts and steps need one entry per dimension (" << input.size()
           << "), got " << starts.size() << " and " << steps.size();
  if (sliced.size() != input.size())
    return op->emitOpError()
           << slicedName << " rank " << sliced.size() << " differs from "
           << inputName << " rank " << input.size();
  for (size_t d = 0; d < input.size(); ++d) {
    int64_t start = starts[d], step = steps[d], count = sliced[d];
    if (step == 0)
      return op->emitOpError() << "step of dimension " << d << " is 0";
    if (count == 0)
      continue;
    int64_t last = start + (count - 1) * step;
    if (start < 0 || start >= input[d] || last < 0 || last >= input[d])
      return op->emitOpError()
             << "dimension " << d << " " << verb << " [" << start << ", "
             << last << "] with step " << step << ", outside the " << inputName
             << " extent " << input[d];
  }
  return success();
}

LogicalResult SliceOp::verify() {
  return verifySliceBounds(*this, shapeOf(getInput()), shapeOf(getResult()),
                           getStarts(), getSteps(), "result", "input", "reads");
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  ArrayRef<int64_t> first = shapeOf(getInputs().front());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(first.size()))
    return emitAxisOutOfRange(*this, "axis", axis, first.size());
  SmallVector<int64_t> expected(first);
  expected[axis] = 0;
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    SmallVector<int64_t> shape(shapeOf(input));
    if (shape.size() != first.size())
      return emitOpError() << "input " << index << " has rank " << shape.size()
                           << ", expected " << first.size();
    expected[axis] += shape[axis];
    shape[axis] = first[axis];
    if (ArrayRef<int64_t>(shape) != first)
      return emitOpError() << "input " << index << " of shape "
                           << formatShape(shapeOf(input))
                           << " differs from input 0 of shape "
                           << formatShape(first) << " outside axis " << axis;
  }
  if (shapeOf(getResult()) != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()), expected);
  return success();
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> data = shapeOf(getData());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return emitAxisOutOfRange(*this, "axis", axis, data.size());
  SmallVector<int64_t> expected(data.begin(), data.begin() + axis);
  llvm::append_range(expected, shapeOf(getIndices()));
  expected.append(data.begin() + axis + 1, data.end());
  if (getElementTypeOrSelf(getData()) != getElementTypeOrSelf(getResult()))
    return emitOpError("result element type differs from data");
  if (shapeOf(getResult()) != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()), expected);
  return success();
}

LogicalResult EmbeddingOp::verify() {
  ArrayRef<int64_t> table = shapeOf(getTable());
  if (table.size() != 2)
    return emitOpError() << "table has shape " << formatShape(table)
                         << ", expected rank 2 (rows x width)";
  SmallVector<int64_t> expected(shapeOf(getIds()));
  expected.push_back(table[1]);
  if (getElementTypeOrSelf(getTable()) != getElementTypeOrSelf(getResult()))
    return emitOpError("result element type differs from table");
  if (shapeOf(getResult()) != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()), expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// Shared by the reduce ops: axes sorted, unique, in range; result shape.
static LogicalResult verifyReduction(Operation *op, Value input, Value result,
                                     ArrayRef<int64_t> axes, bool keepdims) {
  ArrayRef<int64_t> shape = shapeOf(input);
  SmallVector<int64_t> expected;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(shape.size()))
      return emitAxisOutOfRange(op, "axis", axes[i], shape.size());
    if (i > 0 && axes[i] <= axes[i - 1])
      return op->emitOpError("axes must be sorted and unique");
  }
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (!llvm::is_contained(axes, d))
      expected.push_back(shape[d]);
    else if (keepdims)
      expected.push_back(1);
  }
  if (shapeOf(result) != ArrayRef<int64_t>(expected))
    return emitShapeMismatch(op, "result", shapeOf(result), expected);
  return success();
}

LogicalResult ReduceMeanOp::verify() {
  return verifyReduction(*this, getInput(), getResult(), getAxes(),
                         getKeepdims());
}
LogicalResult ReduceSumOp::verify() {
  return verifyReduction(*this, getInput(), getResult(), getAxes(),
                         getKeepdims());
}
LogicalResult ReduceMaxOp::verify() {
  return verifyReduction(*this, getInput(), getResult(), getAxes(),
                         getKeepdims());
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = shapeOf(getInput()).size();
  int64_t axis = getAxis(); // signed: the getter returns uint64_t
  if (axis < 0 || axis >= rank)
    return emitAxisOutOfRange(*this, "axis", axis, rank);
  return success();
}

/// Normalisation weights must have the shape of the normalised dimensions
/// and the input's element type (the kernels read them as the input's type).
static LogicalResult
verifyNormParams(Operation *op, Value input, Value result, int64_t axis,
                 ArrayRef<std::pair<StringRef, Value>> params) {
  ArrayRef<int64_t> shape = shapeOf(input);
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return emitAxisOutOfRange(op, "axis", axis, shape.size());
  ArrayRef<int64_t> normalized = shape.drop_front(axis);
  Type elementType = getElementTypeOrSelf(input);
  for (auto [name, value] : params) {
    if (!value)
      continue;
    if (shapeOf(value) != normalized)
      return emitShapeMismatch(op, name, shapeOf(value), normalized);
    if (getElementTypeOrSelf(value) != elementType)
      return op->emitOpError()
             << name << " has element type " << getElementTypeOrSelf(value)
             << ", expected " << elementType << " (the input's)";
  }
  if (shapeOf(result) != shape)
    return emitShapeMismatch(op, "result", shapeOf(result), shape);
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNormParams(*this, getInput(), getResult(), getAxis(),
                          {{"weight", getWeight()}, {"bias", getBias()}});
}

LogicalResult RmsNormOp::verify() {
  int64_t rank = shapeOf(getInput()).size();
  if (rank == 0)
    return emitOpError("input must have rank >= 1");
  return verifyNormParams(*this, getInput(), getResult(), rank - 1,
                          {{"weight", getWeight()}});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The element type nn.attention and nn.attention_grad compute in: that
/// of their query, key and value, f32 where those are bf16 (mixed
/// precision's activations, widened as the kernels read them).
static Type attentionComputeType(Value query, Value key, Value value) {
  for (Value operand : {query, key, value})
    if (!getElementTypeOrSelf(operand).isBF16())
      return getElementTypeOrSelf(operand);
  return Float32Type::get(query.getContext());
}

/// Checks query/key/value/mask and the mask attributes as nn.attention
/// defines them (shared with nn.attention_grad); returns the output shape
/// [..., S, Dv].
static FailureOr<SmallVector<int64_t>>
verifyAttentionOperands(Operation *op, Value queryValue, Value keyValue,
                        Value valueValue, Value mask, StringRef maskKind,
                        std::optional<APFloat> maskedValue) {
  ArrayRef<int64_t> query = shapeOf(queryValue), key = shapeOf(keyValue),
                    value = shapeOf(valueValue);
  if (query.size() < 2)
    return op->emitOpError() << "query has shape " << formatShape(query)
                             << ", expected rank >= 2 ([..., S, D])";
  // Each of query, key and value has the type the op computes in, or is
  // bf16 (read widened).
  Type elementType = attentionComputeType(queryValue, keyValue, valueValue);
  std::pair<StringRef, Value> inputs[] = {
      {"query", queryValue}, {"key", keyValue}, {"value", valueValue}};
  for (auto [name, input] : inputs)
    if (getElementTypeOrSelf(input) != elementType &&
        !getElementTypeOrSelf(input).isBF16())
      return op->emitOpError()
             << name << " has element type " << getElementTypeOrSelf(input)
             << ", expected " << elementType << " (or bf16)";
  if (maskKind != "additive" && maskKind != "select")
    return op->emitOpError() << "mask_kind is \"" << maskKind
                             << "\", expected \"additive\" or \"select\"";
  // T is read from the key whatever its rank, so that a key of the wrong
  // rank is reported against the shape it should have had.
  SmallVector<int64_t> expectedKey(query.drop_back(2));
  int64_t keyLength = key.size() >= 2 ? key[key.size() - 2] : 0;
  expectedKey.append({keyLength, query.back()});
  if (key != ArrayRef<int64_t>(expectedKey))
    return emitShapeMismatch(op, "key", key, expectedKey);
  SmallVector<int64_t> expectedValue(query.drop_back(2));
  expectedValue.append({keyLength, value.empty() ? 0 : value.back()});
  if (value != ArrayRef<int64_t>(expectedValue))
    return emitShapeMismatch(op, "value", value, expectedValue);
  SmallVector<int64_t> scores(query.drop_back(1));
  scores.push_back(keyLength);
  if (mask) {
    FailureOr<SmallVector<int64_t>> joined =
        nn::broadcastShapes(scores, shapeOf(mask));
    if (failed(joined) ||
        ArrayRef<int64_t>(*joined) != ArrayRef<int64_t>(scores))
      return op->emitOpError()
             << "mask of shape " << formatShape(shapeOf(mask))
             << " does not broadcast to the scores " << formatShape(scores);
    bool boolean = getElementTypeOrSelf(mask).isInteger(1);
    if (maskKind == "select" && (!boolean || !maskedValue))
      return op->emitOpError("a \"select\" mask must be i1 and come with "
                             "masked_value");
    if (maskKind == "additive" && getElementTypeOrSelf(mask) != elementType)
      return op->emitOpError("an \"additive\" mask must have the query's "
                             "element type");
  } else if (maskKind == "select") {
    return op->emitOpError("mask_kind \"select\" needs a mask");
  }
  // Only a select mask reads masked_value; anywhere else it would be dropped
  // without a word.
  if (maskedValue && (!mask || maskKind != "select"))
    return op->emitOpError("masked_value is only used with a \"select\" mask");
  SmallVector<int64_t> expected(query.drop_back(1));
  expected.push_back(value.back());
  return expected;
}

LogicalResult AttentionOp::verify() {
  Type computed = attentionComputeType(getQuery(), getKey(), getValue());
  if (getElementTypeOrSelf(getResult()) != computed)
    return emitOpError() << "result has element type "
                         << getElementTypeOrSelf(getResult()) << ", expected "
                         << computed << " (the type it computes in)";
  FailureOr<SmallVector<int64_t>> expected =
      verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                              getMask(), getMaskKind(), getMaskedValue());
  if (failed(expected))
    return failure();
  if (shapeOf(getResult()) != ArrayRef<int64_t>(*expected))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()), *expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Generation: the KV cache
//===----------------------------------------------------------------------===//

LogicalResult KvCacheOp::verify() {
  if (getTensorType().getRank() != 4)
    return emitOpError() << "cache must be [batch, heads, max_seq_len, "
                            "head_dim], got "
                         << getTensorType();
  return success();
}

LogicalResult CacheAppendOp::verify() {
  ArrayRef<int64_t> entries = shapeOf(getNewEntries());
  ArrayRef<int64_t> cache = shapeOf(getResult());
  ArrayRef<int64_t> positions = shapeOf(getPositions());
  if (entries.size() != 4 || cache.size() != 4)
    return emitOpError("new entries and result must be [B, H, S, D] and "
                       "[B, H, L, D]");
  SmallVector<int64_t> expectedPositions{entries[0], entries[2]};
  if (positions != ArrayRef<int64_t>(expectedPositions))
    return emitShapeMismatch(*this, "positions", positions, expectedPositions);
  SmallVector<int64_t> expectedCache{entries[0], entries[1], cache[2],
                                     entries[3]};
  if (cache != ArrayRef<int64_t>(expectedCache) || cache[2] < entries[2])
    return emitShapeMismatch(*this, "result", cache, expectedCache);
  if (getElementTypeOrSelf(getResult()) !=
      getElementTypeOrSelf(getNewEntries()))
    return emitOpError("result and new entries must have one element type");
  return success();
}

LogicalResult CacheAppendOp::verifySymbolUses(SymbolTableCollection &table) {
  auto cache = table.lookupNearestSymbolFrom<KvCacheOp>(*this, getCacheAttr());
  if (!cache)
    return emitOpError() << getCacheAttr() << " is not an nn.kv_cache";
  if (cache.getTensorType() != getResult().getType())
    return emitOpError() << "result has type " << getResult().getType()
                         << ", but " << getCacheAttr() << " is "
                         << cache.getTensorType();
  return success();
}

LogicalResult CachedAttentionOp::verify() {
  ArrayRef<int64_t> query = shapeOf(getQuery());
  ArrayRef<int64_t> key = shapeOf(getKey());
  ArrayRef<int64_t> value = shapeOf(getValue());
  if (query.size() != 4 || key.size() != 4 || value.size() != 4)
    return emitOpError("query, key and value must have rank 4 "
                       "([B, H, S, D], [B, H, L, D], [B, H, L, Dv])");
  SmallVector<int64_t> expectedKey{query[0], query[1], key[2], query[3]};
  if (key != ArrayRef<int64_t>(expectedKey))
    return emitShapeMismatch(*this, "key", key, expectedKey);
  SmallVector<int64_t> expectedValue{query[0], query[1], key[2], value[3]};
  if (value != ArrayRef<int64_t>(expectedValue))
    return emitShapeMismatch(*this, "value", value, expectedValue);
  SmallVector<int64_t> expectedPositions{query[0], query[2]};
  if (shapeOf(getPositions()) != ArrayRef<int64_t>(expectedPositions))
    return emitShapeMismatch(*this, "positions", shapeOf(getPositions()),
                             expectedPositions);
  SmallVector<int64_t> expectedResult{query[0], query[1], query[2], value[3]};
  if (shapeOf(getResult()) != ArrayRef<int64_t>(expectedResult))
    return emitShapeMismatch(*this, "result", shapeOf(getResult()),
                             expectedResult);
  return success();
}

//===----------------------------------------------------------------------===//
// Loss and backward ops
//===----------------------------------------------------------------------===//

/// Requires `value` to have exactly `expected` shape and `elementType`,
/// naming it `what` otherwise.
static LogicalResult verifyTensor(Operation *op, StringRef what, Value value,
                                  ArrayRef<int64_t> expected,
                                  Type elementType) {
  if (shapeOf(value) != expected)
    return emitShapeMismatch(op, what, shapeOf(value), expected);
  if (getElementTypeOrSelf(value) != elementType)
    return op->emitOpError()
           << what << " has element type " << getElementTypeOrSelf(value)
           << ", expected " << elementType;
  return success();
}

/// The element type the loss ops compute in and return for `logits`: bf16
/// logits (mixed precision's LM head) are read widened and computed in f32
/// (the runtime's ops::lossComputeType).
static Type lossComputeType(Value logits) {
  Type element = getElementTypeOrSelf(logits);
  return element.isBF16() ? Float32Type::get(element.getContext()) : element;
}

/// logits [..., V] and targets [...]: the shared part of cross_entropy and
/// its gradient.
static LogicalResult verifyLogitsAndTargets(Operation *op, Value logits,
                                            Value targets) {
  ArrayRef<int64_t> shape = shapeOf(logits);
  if (shape.empty())
    return op->emitOpError("logits must have rank >= 1 ([..., V])");
  if (shapeOf(targets) != shape.drop_back())
    return emitShapeMismatch(op, "targets", shapeOf(targets),
                             shape.drop_back());
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())))
    return failure();
  if (!shapeOf(getLoss()).empty())
    return emitShapeMismatch(*this, "loss", shapeOf(getLoss()), {});
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())))
    return failure();
  if (!shapeOf(getDloss()).empty())
    return emitShapeMismatch(*this, "dloss", shapeOf(getDloss()), {});
  auto logits = llvm::cast<RankedTensorType>(getLogits().getType());
  return verifyTensor(*this, "dlogits", getDlogits(), logits.getShape(),
                      lossComputeType(getLogits()));
}

LogicalResult TokenLogprobsOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())))
    return failure();
  auto logits = llvm::cast<RankedTensorType>(getLogits().getType());
  return verifyTensor(*this, "logp", getLogp(), logits.getShape().drop_back(),
                      lossComputeType(getLogits()));
}

LogicalResult TokenLogprobsGradOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())))
    return failure();
  auto logits = llvm::cast<RankedTensorType>(getLogits().getType());
  if (failed(verifyTensor(*this, "dlogp", getDlogp(),
                          logits.getShape().drop_back(),
                          lossComputeType(getLogits()))))
    return failure();
  return verifyTensor(*this, "dlogits", getDlogits(), logits.getShape(),
                      lossComputeType(getLogits()));
}

LogicalResult TokenEntropyOp::verify() {
  auto logits = llvm::cast<RankedTensorType>(getLogits().getType());
  if (logits.getRank() == 0)
    return emitOpError("logits must have rank >= 1 ([..., V])");
  return verifyTensor(*this, "entropy", getEntropy(),
                      logits.getShape().drop_back(),
                      lossComputeType(getLogits()));
}

LogicalResult EmbeddingGradOp::verify() {
  ArrayRef<int64_t> table = shapeOf(getDtable());
  if (table.size() != 2)
    return emitOpError() << "dtable has shape " << formatShape(table)
                         << ", expected rank 2 (rows x width)";
  SmallVector<int64_t> expected(shapeOf(getIds()));
  expected.push_back(table[1]);
  return verifyTensor(*this, "dy", getDy(), expected,
                      getElementTypeOrSelf(getDtable()));
}

LogicalResult GatherGradOp::verify() {
  ArrayRef<int64_t> data = shapeOf(getDdata());
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return emitAxisOutOfRange(*this, "axis", axis, data.size());
  SmallVector<int64_t> expected(data.begin(), data.begin() + axis);
  llvm::append_range(expected, shapeOf(getIndices()));
  expected.append(data.begin() + axis + 1, data.end());
  return verifyTensor(*this, "dy", getDy(), expected,
                      getElementTypeOrSelf(getDdata()));
}

LogicalResult SliceGradOp::verify() {
  // The forward slice read dinput's shape and produced dy's.
  return verifySliceBounds(*this, shapeOf(getDinput()), shapeOf(getDy()),
                           getStarts(), getSteps(), "dy", "dinput", "places");
}

/// dy, input and dinput of a normalisation gradient share one type; the
/// weight and its gradients have the shape of the normalised dimensions.
static LogicalResult
verifyNormGrad(Operation *op, Value dy, Value input, Value weight, int64_t axis,
               ArrayRef<std::pair<StringRef, Value>> weightShaped) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  if (axis < 0 || axis >= type.getRank())
    return emitAxisOutOfRange(op, "axis", axis, type.getRank());
  if (failed(
          verifyTensor(op, "dy", dy, type.getShape(), type.getElementType())) ||
      failed(verifyTensor(op, "dinput", op->getResult(0), type.getShape(),
                          type.getElementType())))
    return failure();
  ArrayRef<int64_t> normalized = type.getShape().drop_front(axis);
  if (failed(verifyTensor(op, "weight", weight, normalized,
                          type.getElementType())))
    return failure();
  for (auto [name, value] : weightShaped)
    if (failed(
            verifyTensor(op, name, value, normalized, type.getElementType())))
      return failure();
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getDy(), getInput(), getWeight(),
                        getAxisAttr().getInt(),
                        {{"dweight", getDweight()}, {"dbias", getDbias()}});
}

LogicalResult RmsNormGradOp::verify() {
  int64_t rank = shapeOf(getInput()).size();
  if (rank == 0)
    return emitOpError("input must have rank >= 1");
  return verifyNormGrad(*this, getDy(), getInput(), getWeight(), rank - 1,
                        {{"dweight", getDweight()}});
}

LogicalResult SoftmaxGradOp::verify() {
  int64_t rank = shapeOf(getY()).size();
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= rank)
    return emitAxisOutOfRange(*this, "axis", axis, rank);
  return success();
}

LogicalResult AttentionGradOp::verify() {
  FailureOr<SmallVector<int64_t>> output =
      verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                              getMask(), getMaskKind(), getMaskedValue());
  if (failed(output))
    return failure();
  Type elementType = attentionComputeType(getQuery(), getKey(), getValue());
  if (failed(verifyTensor(*this, "dout", getDout(), *output, elementType)))
    return failure();
  std::pair<StringRef, Value> gradients[] = {
      {"dquery", getDquery()}, {"dkey", getDkey()}, {"dvalue", getDvalue()}};
  Value forward[] = {getQuery(), getKey(), getValue()};
  for (auto [gradient, input] : llvm::zip(gradients, forward))
    if (failed(verifyTensor(*this, gradient.first, gradient.second,
                            shapeOf(input), elementType)))
      return failure();
  return success();
}

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate is \"" << getApproximate()
                         << "\", expected \"none\" or \"tanh\"";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.cpp.inc"
