//===- DecodePositions.cpp - the zplan-decode-positions pass -------------===//
//
// Turns @decode, a plain causal LM imported at the generation's full length
// L, into one token per sequence at run-time positions ("gather pushdown";
// see Passes.td for before/after IR). A token-axis analysis runs forward
// from input_ids [B, L] (token axis 1, batch axis 0) in program order: every
// value derived from the tokens records which dimension carries the token
// index (possibly merged with others by a reshape: extent outer * L * inner)
// and which carries the batch; its type is rewritten in place with that
// extent divided by L. A value not derived from the tokens that meets a
// token axis of extent L in a broadcasting op is a position table (GPT-2's
// position embedding, Llama's rotary cos/sin): it is replaced by its rows at
// `positions`, one per sequence, placed on the batch axis. The causal mask
// of every attention is checked and dropped: with one query per sequence
// the keys it may see come from the cache (zplan-cached-attention). An op
// through which the token axis cannot be proven row-wise is an error naming
// it. OPT's attention, primitive after import, is formed first
// (populateClampedAttentionPatterns). Tests: test/generate/
// decode-positions.mlir (hand-written IR), decode-positions-invalid.mlir and
// decode-positions-node.mlir (diagnostics), decode-positions-models.test
// (the fixtures' structure) and decode-positions-numeric.test (the
// fixtures' logits through an emulated KV cache, check_decode.py).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "compiler/transforms/ScheduleDiagnostics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"

#include <map>
#include <tuple>

#define DEBUG_TYPE "zplan-decode-positions"

namespace zplan {
#define GEN_PASS_DEF_DECODEPOSITIONS
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// Where an index of extent E (the token's L or the batch's B) sits in a
/// tensor: dimension `dim` has extent outer * E * inner, and the index steps
/// by `inner` in it (inner = 1, outer = 1 when it has a dimension of its
/// own). `dim` < 0: the tensor has no such axis (or it was lost).
struct AxisRef {
  int64_t dim = -1;
  int64_t inner = 1;

  bool valid() const { return dim >= 0; }
  bool operator==(const AxisRef &other) const {
    return dim == other.dim && inner == other.inner;
  }
  bool operator!=(const AxisRef &other) const { return !(*this == other); }
  /// The same axis after `by` dimensions were prepended (numpy broadcast).
  AxisRef shifted(int64_t by) const {
    return valid() ? AxisRef{dim + by, inner} : AxisRef{};
  }
};

/// What the analysis knows of a value derived from the tokens.
struct RowLayout {
  AxisRef token;
  AxisRef batch;
  /// The value's type at full length L, before this pass shrank it.
  RankedTensorType original;
};

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

int64_t rankOf(Value value) { return shapeOf(value).size(); }

int64_t product(ArrayRef<int64_t> extents) {
  int64_t result = 1;
  for (int64_t extent : extents)
    result *= extent;
  return result;
}

/// The axis `axis` (of extent `extent`) of a row-major tensor of shape
/// `input` after a reshape to `output`: the output dimension whose flat
/// range holds the axis's whole stride range, or an invalid ref when the
/// reshape splits the axis over several dimensions.
AxisRef axisThroughReshape(AxisRef axis, int64_t extent,
                           ArrayRef<int64_t> input, ArrayRef<int64_t> output) {
  if (!axis.valid())
    return {};
  int64_t stride = axis.inner * product(input.drop_front(axis.dim + 1));
  int64_t span = stride * extent;
  for (int64_t d = 0, rank = output.size(); d < rank; ++d) {
    int64_t inner = product(output.drop_front(d + 1));
    int64_t outer = inner * output[d];
    if (stride % inner == 0 && outer % span == 0)
      return AxisRef{d, stride / inner};
  }
  return {};
}

/// Erases the nn ops nothing reads (full-length tables and masks, chains an
/// attention replaced). zero ops stay: a gather's start and wait are the
/// scheduler's to pair.
void eraseDeadNNOps(Block &body) {
  Dialect *nnDialect =
      body.getParentOp()->getContext()->getLoadedDialect<nn::NNDialect>();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (op.getDialect() == nnDialect && isOpTriviallyDead(&op))
      op.erase();
}

/// Rewrites one function; see the file comment.
class TokenAxisRewriter {
public:
  explicit TokenAxisRewriter(func::FuncOp func)
      : func(func), builder(func.getContext()) {}

  LogicalResult run();

private:
  LogicalResult rewrite(Operation *op);
  LogicalResult rewriteBroadcasting(Operation *op, unsigned firstOperand,
                                    unsigned numOperands);
  LogicalResult rewriteReshape(nn::ReshapeOp op);
  LogicalResult rewriteTranspose(nn::TransposeOp op);
  LogicalResult rewriteSlice(nn::SliceOp op);
  LogicalResult rewriteConcat(nn::ConcatOp op);
  LogicalResult rewriteReduce(Operation *op, ArrayRef<int64_t> axes,
                              bool keepdims);
  LogicalResult rewriteMatmul(nn::MatmulOp op);
  LogicalResult rewriteGather(nn::GatherOp op);
  LogicalResult rewriteAttention(nn::AttentionOp op);
  LogicalResult checkCausalMask(nn::AttentionOp op);

  /// `table` (not derived from the tokens), an operand of `consumer` that
  /// broadcasts to rank `rank` where the token axis is `token`: itself when
  /// it is constant along that axis, else its rows at `positions`, one per
  /// sequence on the batch axis (nullptr after an error).
  Value positionRows(Operation *consumer, Value table, int64_t rank,
                     AxisRef token, AxisRef batch);
  /// The rows of `table` (right-aligned to rank `rank`, extent L on
  /// token.dim) at `positions`: extent 1 on the token axis, B on the batch.
  Value gatherRows(Operation *consumer, Value table, int64_t rank,
                   AxisRef token, AxisRef batch);

  /// Records `value` as derived from the tokens and shrinks its type.
  void setLayout(Value value, AxisRef token, AxisRef batch);
  const RowLayout *layoutOf(Value value) const {
    auto found = layouts.find(value);
    return found == layouts.end() ? nullptr : &found->second;
  }
  InFlightDiagnostic cannotFollow(Operation *op, const Twine &why) {
    return op->emitError() << "zplan-decode-positions: cannot follow the "
                              "token axis through "
                           << describeOp(op) << ": " << why;
  }
  Value create1D(ArrayRef<int64_t> values, Location loc);

  func::FuncOp func;
  OpBuilder builder;
  int64_t batchSize = 0;
  int64_t maxLength = 0;
  /// positions [B, 1] reshaped to [B]: the gather indices of every table.
  Value positionsFlat;
  DenseMap<Value, RowLayout> layouts;
  /// Tables already gathered, by (table, rank, token dim, batch dim): one
  /// gather serves every layer that reads the same rotary table.
  std::map<std::tuple<void *, int64_t, int64_t, int64_t>, Value> gathered;
  /// Masks already found causal at maxLength.
  llvm::DenseSet<Attribute> causalMasks;
};

void TokenAxisRewriter::setLayout(Value value, AxisRef token, AxisRef batch) {
  auto original = llvm::cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(original.getShape());
  shape[token.dim] /= maxLength;
  value.setType(RankedTensorType::get(shape, original.getElementType()));
  layouts[value] = RowLayout{token, batch, original};
}

Value TokenAxisRewriter::create1D(ArrayRef<int64_t> values, Location loc) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    builder.getI64Type());
  return builder.create<nn::ConstantOp>(loc,
                                        DenseElementsAttr::get(type, values));
}

LogicalResult TokenAxisRewriter::run() {
  Block &body = func.getBody().front();
  BlockArgument ids;
  for (BlockArgument argument : body.getArguments()) {
    auto name =
        func.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "nn.name");
    if (name && name.getValue() == "input_ids") {
      ids = argument;
      continue;
    }
    return func.emitError()
           << "zplan-decode-positions: @" << func.getName() << " has "
           << describeValue(argument)
           << " besides input_ids: a plain causal LM export takes input_ids "
              "only (an export with past_key_values needs no position "
              "pushdown)";
  }
  if (!ids)
    return func.emitError() << "zplan-decode-positions: @" << func.getName()
                            << " has no input 'input_ids'";
  ArrayRef<int64_t> idsShape = shapeOf(ids);
  if (idsShape.size() != 2 || idsShape[1] < 2)
    return func.emitError()
           << "zplan-decode-positions: input 'input_ids' must be [batch, "
              "max_seq_len] with max_seq_len >= 2, not "
           << ids.getType();
  batchSize = idsShape[0];
  maxLength = idsShape[1];

  Location loc = func.getLoc();
  auto positionsType =
      RankedTensorType::get({batchSize, 1}, builder.getI64Type());
  unsigned positionsIndex = func.getNumArguments();
  func.insertArgument(positionsIndex, positionsType,
                      builder.getDictionaryAttr(builder.getNamedAttr(
                          "nn.name", builder.getStringAttr("positions"))),
                      loc);
  builder.setInsertionPointToStart(&body);
  positionsFlat = builder.create<nn::ReshapeOp>(
      loc, RankedTensorType::get({batchSize}, builder.getI64Type()),
      func.getArgument(positionsIndex));

  setLayout(ids, AxisRef{1, 1}, AxisRef{0, 1});

  SmallVector<Operation *> original;
  for (Operation &op : body)
    if (&op != positionsFlat.getDefiningOp())
      original.push_back(&op);
  for (Operation *op : original)
    if (failed(rewrite(op)))
      return failure();

  // Position tables and masks at full length are dead now.
  eraseDeadNNOps(body);

  func.setFunctionType(builder.getFunctionType(
      body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));
  return success();
}

LogicalResult TokenAxisRewriter::rewrite(Operation *op) {
  if (llvm::none_of(op->getOperands(),
                    [&](Value operand) { return layoutOf(operand); }))
    return success();
  if (llvm::isa<func::ReturnOp>(op))
    return success();

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<nn::ReshapeOp>(
          [&](auto reshape) { return rewriteReshape(reshape); })
      .Case<nn::TransposeOp>(
          [&](auto transpose) { return rewriteTranspose(transpose); })
      .Case<nn::SliceOp>([&](auto slice) { return rewriteSlice(slice); })
      .Case<nn::ConcatOp>([&](auto concat) { return rewriteConcat(concat); })
      .Case<nn::ReduceMeanOp, nn::ReduceSumOp, nn::ReduceMaxOp>(
          [&](auto reduce) {
            return rewriteReduce(reduce, reduce.getAxes(),
                                 reduce.getKeepdims());
          })
      .Case<nn::MatmulOp>([&](auto matmul) { return rewriteMatmul(matmul); })
      .Case<nn::GatherOp>([&](auto gather) { return rewriteGather(gather); })
      .Case<nn::AttentionOp>(
          [&](auto attention) { return rewriteAttention(attention); })
      .Case<nn::ExpandOp>([&](nn::ExpandOp expand) -> LogicalResult {
        const RowLayout *in = layoutOf(expand.getInput());
        int64_t added = rankOf(expand.getResult()) - in->original.getRank();
        setLayout(expand.getResult(), in->token.shifted(added),
                  in->batch.shifted(added));
        return success();
      })
      .Case<nn::EmbeddingOp>([&](nn::EmbeddingOp embedding) -> LogicalResult {
        const RowLayout *ids = layoutOf(embedding.getIds());
        if (!ids || layoutOf(embedding.getTable()))
          return cannotFollow(op, "its table depends on input_ids");
        setLayout(embedding.getResult(), ids->token, ids->batch);
        return success();
      })
      .Case<nn::SoftmaxOp>([&](nn::SoftmaxOp softmax) -> LogicalResult {
        const RowLayout *in = layoutOf(softmax.getInput());
        if (static_cast<int64_t>(softmax.getAxis()) == in->token.dim)
          return cannotFollow(op, "it normalises along the token axis");
        setLayout(softmax.getResult(), in->token, in->batch);
        return success();
      })
      .Case<nn::LayerNormOp>([&](nn::LayerNormOp norm) -> LogicalResult {
        const RowLayout *in = layoutOf(norm.getInput());
        if (!in || (norm.getWeight() && layoutOf(norm.getWeight())) ||
            (norm.getBias() && layoutOf(norm.getBias())))
          return cannotFollow(op, "its weight or bias depends on input_ids");
        if (in->token.dim >= static_cast<int64_t>(norm.getAxis()))
          return cannotFollow(op, "it normalises over the token axis");
        setLayout(norm.getResult(), in->token, in->batch);
        return success();
      })
      .Case<nn::RmsNormOp>([&](nn::RmsNormOp norm) -> LogicalResult {
        const RowLayout *in = layoutOf(norm.getInput());
        if (!in || (norm.getWeight() && layoutOf(norm.getWeight())))
          return cannotFollow(op, "its weight depends on input_ids");
        if (in->token.dim == in->original.getRank() - 1)
          return cannotFollow(op, "it normalises over the token axis");
        setLayout(norm.getResult(), in->token, in->batch);
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (other->hasTrait<nn::BroadcastOperands>())
          return rewriteBroadcasting(other, 0, other->getNumOperands());
        // Elementwise unary ops and casts keep the shape.
        bool elementwise =
            other->getDialect() ==
                builder.getContext()->getLoadedDialect<nn::NNDialect>() &&
            other->getNumOperands() == 1 && other->getNumResults() == 1 &&
            (other->hasTrait<OpTrait::SameOperandsAndResultType>() ||
             other->hasTrait<OpTrait::SameOperandsAndResultShape>());
        if (elementwise) {
          const RowLayout *in = layoutOf(other->getOperand(0));
          setLayout(other->getResult(0), in->token, in->batch);
          return success();
        }
        return cannotFollow(other, "no row-wise rule for this op");
      });
}

LogicalResult TokenAxisRewriter::rewriteBroadcasting(Operation *op,
                                                     unsigned firstOperand,
                                                     unsigned numOperands) {
  Value result = op->getResult(0);
  int64_t rank = rankOf(result);
  AxisRef token, batch;
  for (unsigned i = firstOperand; i < firstOperand + numOperands; ++i) {
    const RowLayout *in = layoutOf(op->getOperand(i));
    if (!in)
      continue;
    int64_t added = rank - in->original.getRank();
    AxisRef operandToken = in->token.shifted(added);
    if (token.valid() && operandToken != token)
      return cannotFollow(op, "its operands carry the token axis in "
                              "different dimensions");
    token = operandToken;
    if (!batch.valid())
      batch = in->batch.shifted(added);
  }
  for (unsigned i = firstOperand; i < firstOperand + numOperands; ++i) {
    Value operand = op->getOperand(i);
    if (layoutOf(operand))
      continue;
    Value rows = positionRows(op, operand, rank, token, batch);
    if (!rows)
      return failure();
    op->setOperand(i, rows);
  }
  setLayout(result, token, batch);
  return success();
}

Value TokenAxisRewriter::positionRows(Operation *consumer, Value table,
                                      int64_t rank, AxisRef token,
                                      AxisRef batch) {
  ArrayRef<int64_t> shape = shapeOf(table);
  int64_t axis = token.dim - (rank - static_cast<int64_t>(shape.size()));
  if (axis < 0 || shape[axis] == 1)
    return table;
  if (token.inner != 1 || shape[axis] != maxLength) {
    cannotFollow(consumer, "the operand " + describeValue(table) +
                               " meets the token axis with extent " +
                               Twine(shape[axis]) + " (not 1 or " +
                               Twine(maxLength) + ")");
    return nullptr;
  }
  auto key = std::make_tuple(table.getAsOpaquePointer(), rank, token.dim,
                             batch.valid() ? batch.dim : -1);
  auto found = gathered.find(key);
  if (found != gathered.end())
    return found->second;

  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(consumer);
  Value rows;
  // A table of embeddings at constant position ids (GPT-2's and OPT's
  // learned positions): look up the ids' rows instead of the whole table.
  auto embedding = table.getDefiningOp<nn::EmbeddingOp>();
  if (embedding && !layoutOf(embedding.getIds()) && token.dim < rank - 1 &&
      batch.dim < rank - 1) {
    Value ids =
        gatherRows(consumer, embedding.getIds(), rank - 1, token, batch);
    if (!ids)
      return nullptr;
    SmallVector<int64_t> rowShape(shapeOf(ids));
    rowShape.push_back(shapeOf(embedding.getTable()).back());
    rows = builder.create<nn::EmbeddingOp>(
        consumer->getLoc(),
        RankedTensorType::get(rowShape, getElementTypeOrSelf(table)),
        embedding.getTable(), ids);
  } else {
    rows = gatherRows(consumer, table, rank, token, batch);
    if (!rows)
      return nullptr;
  }
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": rows of " << describeValue(table)
                          << " for " << describeOp(consumer) << "\n");
  gathered[key] = rows;
  return rows;
}

Value TokenAxisRewriter::gatherRows(Operation *consumer, Value table,
                                    int64_t rank, AxisRef token,
                                    AxisRef batch) {
  Location loc = consumer->getLoc();
  Type elementType = getElementTypeOrSelf(table);
  auto typeOf = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, elementType);
  };
  auto transpose = [&](Value value, ArrayRef<int64_t> perm) -> Value {
    if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      return value;
    SmallVector<int64_t> shape;
    for (int64_t axis : perm)
      shape.push_back(shapeOf(value)[axis]);
    return builder.create<nn::TransposeOp>(loc, typeOf(shape), value,
                                           builder.getDenseI64ArrayAttr(perm));
  };

  // Right-align the table to the consumer's rank.
  SmallVector<int64_t> shape(rank - rankOf(table), 1);
  llvm::append_range(shape, shapeOf(table));
  Value value = table;
  if (static_cast<int64_t>(shape.size()) != rankOf(table))
    value = builder.create<nn::ReshapeOp>(loc, typeOf(shape), table);

  int64_t tokenDim = token.dim;
  SmallVector<int64_t> gatheredShape(shape);
  gatheredShape[tokenDim] = batchSize;
  if (batchSize == 1)
    return builder.create<nn::GatherOp>(loc, typeOf(gatheredShape), value,
                                        positionsFlat,
                                        builder.getI64IntegerAttr(tokenDim));
  if (!batch.valid() || batch.inner != 1 || batch.dim == tokenDim) {
    cannotFollow(consumer, "the batch axis is lost where the position table " +
                               describeValue(table) + " meets the tokens");
    return nullptr;
  }
  int64_t batchDim = batch.dim;
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[tokenDim], swap[batchDim]);
  if (shape[batchDim] == 1) {
    // The same table for every sequence: row b of the gather (on the token
    // axis) moves to the batch axis.
    Value rows = builder.create<nn::GatherOp>(
        loc, typeOf(gatheredShape), value, positionsFlat,
        builder.getI64IntegerAttr(tokenDim));
    return transpose(rows, swap);
  }
  if (shape[batchDim] != batchSize) {
    cannotFollow(consumer, "the position table " + describeValue(table) +
                               " has extent " + Twine(shape[batchDim]) +
                               " on the batch axis");
    return nullptr;
  }
  // One table per sequence: flatten (batch, token) and take row
  // b * L + positions[b].
  SmallVector<int64_t> perm{batchDim, tokenDim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != batchDim && d != tokenDim)
      perm.push_back(d);
  Value moved = transpose(value, perm);
  SmallVector<int64_t> flatShape{batchSize * maxLength};
  llvm::append_range(flatShape, shapeOf(moved).drop_front(2));
  Value flat = builder.create<nn::ReshapeOp>(loc, typeOf(flatShape), moved);
  SmallVector<int64_t> offsets;
  for (int64_t b = 0; b < batchSize; ++b)
    offsets.push_back(b * maxLength);
  Value indices = builder.create<nn::AddOp>(
      loc, positionsFlat.getType(), positionsFlat, create1D(offsets, loc));
  SmallVector<int64_t> pickedShape(flatShape);
  pickedShape[0] = batchSize;
  Value picked = builder.create<nn::GatherOp>(
      loc, typeOf(pickedShape), flat, indices, builder.getI64IntegerAttr(0));
  SmallVector<int64_t> rowShape{batchSize, 1};
  llvm::append_range(rowShape, ArrayRef<int64_t>(pickedShape).drop_front());
  Value rows = builder.create<nn::ReshapeOp>(loc, typeOf(rowShape), picked);
  SmallVector<int64_t> inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    inverse[perm[d]] = d;
  return transpose(rows, inverse);
}

LogicalResult TokenAxisRewriter::rewriteReshape(nn::ReshapeOp op) {
  const RowLayout *in = layoutOf(op.getInput());
  ArrayRef<int64_t> from = in->original.getShape();
  ArrayRef<int64_t> to = shapeOf(op.getResult());
  AxisRef token = axisThroughReshape(in->token, maxLength, from, to);
  if (!token.valid())
    return cannotFollow(op, "the reshape splits the token axis");
  setLayout(op.getResult(), token,
            axisThroughReshape(in->batch, batchSize, from, to));
  return success();
}

LogicalResult TokenAxisRewriter::rewriteTranspose(nn::TransposeOp op) {
  const RowLayout *in = layoutOf(op.getInput());
  ArrayRef<int64_t> perm = op.getPerm();
  auto moved = [&](AxisRef axis) -> AxisRef {
    if (!axis.valid())
      return {};
    auto *at = llvm::find(perm, axis.dim);
    return AxisRef{at - perm.begin(), axis.inner};
  };
  setLayout(op.getResult(), moved(in->token), moved(in->batch));
  return success();
}

LogicalResult TokenAxisRewriter::rewriteSlice(nn::SliceOp op) {
  const RowLayout *in = layoutOf(op.getInput());
  int64_t dim = in->token.dim;
  if (op.getStarts()[dim] != 0 || op.getSteps()[dim] != 1 ||
      shapeOf(op.getResult())[dim] != in->original.getDimSize(dim))
    return cannotFollow(op, "it slices the token axis");
  AxisRef batch = in->batch;
  if (batch.valid() &&
      shapeOf(op.getResult())[batch.dim] != in->original.getDimSize(batch.dim))
    batch = {};
  setLayout(op.getResult(), in->token, batch);
  return success();
}

LogicalResult TokenAxisRewriter::rewriteConcat(nn::ConcatOp op) {
  const RowLayout *first = nullptr;
  for (Value input : op.getInputs())
    if ((first = layoutOf(input)))
      break;
  if (static_cast<int64_t>(op.getAxis()) == first->token.dim)
    return cannotFollow(op, "it concatenates along the token axis");
  return rewriteBroadcasting(op, 0, op->getNumOperands());
}

LogicalResult TokenAxisRewriter::rewriteReduce(Operation *op,
                                               ArrayRef<int64_t> axes,
                                               bool keepdims) {
  const RowLayout *in = layoutOf(op->getOperand(0));
  auto kept = [&](AxisRef axis) -> AxisRef {
    if (!axis.valid() || llvm::is_contained(axes, axis.dim))
      return {};
    if (keepdims)
      return axis;
    int64_t before = llvm::count_if(
        axes, [&](int64_t reduced) { return reduced < axis.dim; });
    return AxisRef{axis.dim - before, axis.inner};
  };
  AxisRef token = kept(in->token);
  if (!token.valid())
    return cannotFollow(op, "it reduces over the token axis");
  setLayout(op->getResult(0), token, kept(in->batch));
  return success();
}

LogicalResult TokenAxisRewriter::rewriteMatmul(nn::MatmulOp op) {
  int64_t rank = rankOf(op.getResult());
  AxisRef token, batch;
  for (Value operand : {op.getLhs(), op.getRhs()}) {
    const RowLayout *in = layoutOf(operand);
    if (!in)
      continue;
    int64_t operandRank = in->original.getRank();
    bool isRhs = operand == op.getRhs();
    // [..., M, K] x [..., K, N] (rhs [..., N, K] with transpose_rhs): only
    // K is contracted. The token may ride in any other dimension: a batch
    // one, the lhs's rows or the rhs's columns. A tied LM head written as
    // Transpose(MatMul(W, Transpose(h))) puts the tokens in the rhs's
    // columns, and so in the product's last dimension.
    int64_t contracted =
        !isRhs || op.getTransposeRhs() ? operandRank - 1 : operandRank - 2;
    int64_t columns = op.getTransposeRhs() ? operandRank - 2 : operandRank - 1;
    if (operandRank < 2 || in->token.dim == contracted)
      return cannotFollow(op, "it contracts over the token axis");
    if (in->batch.dim == contracted)
      return cannotFollow(op, "it contracts over the batch axis");
    // Where a dimension of this operand lands in the product.
    auto inResult = [&](AxisRef axis) -> AxisRef {
      if (isRhs && axis.dim == columns)
        return AxisRef{rank - 1, axis.inner};
      return axis.shifted(rank - operandRank);
    };
    AxisRef operandToken = inResult(in->token);
    if (token.valid() && operandToken != token)
      return cannotFollow(op, "its operands carry the token axis in "
                              "different dimensions");
    token = operandToken;
    if (!batch.valid())
      batch = inResult(in->batch);
  }
  // An operand without tokens must not vary along a batch dimension that
  // carries them.
  for (Value operand : {op.getLhs(), op.getRhs()}) {
    if (layoutOf(operand))
      continue;
    int64_t axis = token.dim - (rank - rankOf(operand));
    if (token.dim < rank - 2 && axis >= 0 && axis < rankOf(operand) - 2 &&
        shapeOf(operand)[axis] != 1)
      return cannotFollow(op, "the operand " + describeValue(operand) +
                                  " varies along the token axis");
  }
  if (Value bias = op.getBias()) {
    if (layoutOf(bias))
      return cannotFollow(op, "its bias depends on input_ids");
    Value rows = positionRows(op, bias, rank, token, batch);
    if (!rows)
      return failure();
    op.getBiasMutable().assign(rows);
  }
  setLayout(op.getResult(), token, batch);
  return success();
}

LogicalResult TokenAxisRewriter::rewriteGather(nn::GatherOp op) {
  const RowLayout *data = layoutOf(op.getData());
  const RowLayout *indices = layoutOf(op.getIndices());
  int64_t axis = op.getAxis();
  if (data && indices)
    return cannotFollow(op, "both data and indices depend on input_ids");
  if (indices) {
    setLayout(op.getResult(), indices->token.shifted(axis),
              indices->batch.shifted(axis));
    return success();
  }
  if (data->token.dim == axis)
    return cannotFollow(op, "it gathers along the token axis");
  int64_t indexRank = rankOf(op.getIndices());
  auto moved = [&](AxisRef at) -> AxisRef {
    if (!at.valid() || at.dim == axis)
      return {};
    return at.dim < axis ? at : at.shifted(indexRank - 1);
  };
  setLayout(op.getResult(), moved(data->token), moved(data->batch));
  return success();
}

LogicalResult TokenAxisRewriter::rewriteAttention(nn::AttentionOp op) {
  int64_t rank = rankOf(op.getQuery());
  const RowLayout *query = layoutOf(op.getQuery());
  for (Value operand : {op.getQuery(), op.getKey(), op.getValue()}) {
    const RowLayout *in = layoutOf(operand);
    if (!in)
      return cannotFollow(op, "its " +
                                  Twine(operand == op.getQuery() ? "query"
                                        : operand == op.getKey() ? "key"
                                                                 : "value") +
                                  " does not depend on input_ids");
    if (in->token != AxisRef{rank - 2, 1} ||
        in->original.getDimSize(rank - 2) != maxLength)
      return cannotFollow(op, "query, key and value must carry the tokens in "
                              "their sequence dimension");
  }
  if (failed(checkCausalMask(op)))
    return failure();
  op.getMaskMutable().clear();
  // The default kind, printed as nothing.
  op.setMaskKind("additive");
  op.removeMaskedValueAttr();
  setLayout(op.getResult(), query->token, query->batch);
  return success();
}

LogicalResult TokenAxisRewriter::checkCausalMask(nn::AttentionOp op) {
  Value mask = op.getMask();
  if (!mask)
    return op->emitError()
           << "zplan-decode-positions: " << describeOp(op)
           << " has no mask: only a causal attention can be decoded one "
              "token at a time";
  if (layoutOf(mask))
    return op->emitError()
           << "zplan-decode-positions: the mask of " << describeOp(op)
           << " depends on input_ids: only the causal mask can be dropped";
  // A causal mask broadcast over the batch is the same constant.
  while (auto expand = mask.getDefiningOp<nn::ExpandOp>())
    mask = expand.getInput();
  DenseElementsAttr values;
  if (!matchPattern(mask, m_Constant(&values)))
    return op->emitError() << "zplan-decode-positions: the mask of "
                           << describeOp(op)
                           << " is not a compile-time constant";
  // Every layer reads the same mask (one uniqued attribute): check it once.
  // (An 80-layer graph at 2048 tokens has 80 x 4M entries to read.)
  if (causalMasks.contains(values))
    return success();
  ArrayRef<int64_t> shape = values.getType().getShape();
  int64_t length = maxLength;
  if (shape.size() < 2 || shape.back() != length ||
      shape[shape.size() - 2] != length)
    return op->emitError() << "zplan-decode-positions: the mask of "
                           << describeOp(op) << " has shape "
                           << values.getType() << ", not [..., " << length
                           << ", " << length << "]";
  bool select = values.getElementType().isInteger(1);
  int64_t index = 0;
  // `wellFormed`: the entry is a mask value at all (additive: 0 or <= -1e4).
  auto check = [&](bool visible, bool wellFormed) -> LogicalResult {
    int64_t row = (index / length) % length, column = index % length;
    ++index;
    if (wellFormed && visible == (column <= row))
      return success();
    return op->emitError()
           << "zplan-decode-positions: the mask of " << describeOp(op)
           << " is not causal: at query " << row << ", key " << column << " it "
           << (visible ? "shows" : "hides")
           << " the key (a causal mask shows key j to query i iff j <= i; "
              "an additive one adds 0 there and <= -1e4 elsewhere)";
  };
  if (select) {
    for (bool visible : values.getValues<bool>())
      if (failed(check(visible, true)))
        return failure();
    causalMasks.insert(values);
    return success();
  }
  if (!llvm::isa<FloatType>(values.getElementType()))
    return op->emitError() << "zplan-decode-positions: the mask of "
                           << describeOp(op) << " has element type "
                           << values.getElementType();
  auto checkAdded = [&](double added) {
    bool visible = added == 0.0;
    // Neither 0 nor a large negative number: a bias, not a mask.
    return check(visible, visible || added <= -1e4);
  };
  // f32 masks read as floats directly; other widths through APFloat.
  if (values.getElementType().isF32()) {
    for (float added : values.getValues<float>())
      if (failed(checkAdded(added)))
        return failure();
  } else {
    for (APFloat number : values.getValues<APFloat>())
      if (failed(checkAdded(number.convertToDouble())))
        return failure();
  }
  causalMasks.insert(values);
  return success();
}

struct DecodePositionsPass
    : zplan::impl::DecodePositionsBase<DecodePositionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    if (!decode) {
      module.emitError("zplan-decode-positions: the module has no @decode "
                       "function");
      return signalPassFailure();
    }
    // OPT's attention is primitive after import; form it, so that every
    // attention is one op whose mask can be checked and dropped.
    RewritePatternSet patterns(&getContext());
    populateClampedAttentionPatterns(patterns);
    SmallVector<Operation *> matmuls;
    decode.walk([&](nn::MatmulOp matmul) { matmuls.push_back(matmul); });
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::ExistingOps;
    (void)applyOpPatternsAndFold(matmuls, std::move(patterns), config);
    eraseDeadNNOps(decode.getBody().front());

    if (failed(TokenAxisRewriter(decode).run()))
      signalPassFailure();
  }
};

} // namespace
