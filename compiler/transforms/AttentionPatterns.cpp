//===- AttentionPatterns.cpp - form nn.attention --------------------------===//
//
// Eager attention exports as
//   s = MatMul(q, kT)          kT a Transpose of the keys (or transpose_rhs)
//   s = s / c  (or s * c)      the 1/sqrt(d) scale
//   s = s + mask               (Llama, additive)  or
//   s = Where(mask, s, fill)   (GPT-2, boolean)
//   o = MatMul(Softmax(s, -1), v)
// and becomes one nn.attention, which the runtime can fuse and autodiff
// can differentiate as a whole. torch's export of scaled_dot_product_attention
// (its dynamo exporter, and optimum's default) differs in three ways, all
// matched: the scale is split as sqrt(c) on q and on kT; kT is
// Reshape(Transpose(Reshape(k))) with the heads merged around the
// transpose; and the probabilities go through Where(IsNaN(p), 0, p), which
// turns a row with no visible key into zeros where nn.attention (like
// onnxruntime's softmax) gives NaN. That guard is dropped only when the mask
// is a constant in which every row sees a key, so the two agree. Chains with
// anything else in between (OPT's Max clamp, pre-scaled queries) stay primitive
// in zplan-form-nn-ops. Generation needs every attention as one op (its keys
// and values go to the KV cache), so it also forms OPT's chain
// (populateClampedAttentionPatterns):
//   s = MatMul(Reshape(q), Reshape(k), transpose_rhs)   heads merged in batch
//   s = Max(Reshape(s) + mask, -FLT_MAX)
//   o = MatMul(Reshape(Softmax(Reshape(s), -1)), Reshape(v))
// Tests: test/transforms/form-nn-ops.mlir,
// test/generate/decode-positions.mlir (the OPT-like case).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/PatternMatching.h"

using namespace mlir;
using namespace zplan;

namespace {

/// The scores before the mask: `q @ kT`, optionally scaled by a constant
/// (`/ c` or `* c`).
struct Scores {
  nn::MatmulOp product;
  double scale = 1.0;
  /// The product's operands with any scale factor peeled off.
  Value query;
  Value keys;
};

static std::optional<Scores> matchScores(Value value, Type fullType) {
  Scores scores;
  if (auto div = value.getDefiningOp<nn::DivOp>()) {
    std::optional<double> divisor = getSplatFloat(div.getRhs());
    if (!divisor || *divisor == 0)
      return std::nullopt;
    scores.scale = 1.0 / *divisor;
    value = div.getLhs();
  } else if (auto mul = value.getDefiningOp<nn::MulOp>()) {
    std::optional<double> factor = getSplatFloat(mul.getRhs());
    if (!factor)
      return std::nullopt;
    scores.scale = *factor;
    value = mul.getLhs();
  }
  scores.product = value.getDefiningOp<nn::MatmulOp>();
  if (!scores.product || scores.product.getBias() ||
      scores.product.getType() != fullType)
    return std::nullopt;
  // sqrt(c) on q and on kT (torch's SDPA export).
  for (Value operand : {scores.product.getLhs(), scores.product.getRhs()})
    if (auto mul = operand.getDefiningOp<nn::MulOp>())
      if (std::optional<double> factor = getSplatFloat(mul.getRhs()))
        if (mul->hasOneUse() && mul.getType() == mul.getLhs().getType()) {
          scores.scale *= *factor;
          (operand == scores.product.getLhs() ? scores.query : scores.keys) =
              mul.getLhs();
        }
  if (!scores.query)
    scores.query = scores.product.getLhs();
  if (!scores.keys)
    scores.keys = scores.product.getRhs();
  return scores;
}

/// How to get the keys as [..., T, D] from the scores matmul `q @ rhs`: rhs
/// itself when the matmul transposes it, else the operand of the transpose
/// feeding it, permuted by `perm` (empty when no transpose is needed).
struct KeySource {
  Value input;
  SmallVector<int64_t> perm;
  SmallVector<int64_t> shape;
  /// `input` has `shape`'s elements in order, its leading dimensions
  /// grouped otherwise: a reshape, not a transpose, makes the keys.
  bool reshape = false;
};

/// k when `value` = Reshape(Transpose(Reshape(k))) is k with its last two
/// dimensions swapped: the inner reshape merges k's leading dimensions, the
/// transpose swaps the last two, the outer reshape splits the leading ones
/// back (torch's SDPA export transposes the keys so).
static Value unmergedTranspose(Value value) {
  auto outer = value.getDefiningOp<nn::ReshapeOp>();
  if (!outer)
    return {};
  auto transpose = outer.getInput().getDefiningOp<nn::TransposeOp>();
  if (!transpose)
    return {};
  auto inner = transpose.getInput().getDefiningOp<nn::ReshapeOp>();
  if (!inner)
    return {};
  ArrayRef<int64_t> perm = transpose.getPerm();
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 1] != rank - 2 || perm[rank - 2] != rank - 1 ||
      !llvm::equal(perm.drop_back(2), llvm::seq<int64_t>(0, rank - 2)))
    return {};
  Value key = inner.getInput();
  ArrayRef<int64_t> keyShape =
      llvm::cast<RankedTensorType>(key.getType()).getShape();
  ArrayRef<int64_t> merged = inner.getType().getShape();
  ArrayRef<int64_t> result = outer.getType().getShape();
  // The leading dimensions may be regrouped (grouped-query keys expanded as
  // [B, Hkv, G, T, D] come back as [B, H, D, T]); the caller reshapes.
  if (keyShape.size() < 2 || result.size() < 2 ||
      merged.take_back(2) != keyShape.take_back(2) ||
      result[result.size() - 1] != keyShape[keyShape.size() - 2] ||
      result[result.size() - 2] != keyShape[keyShape.size() - 1])
    return {};
  return key;
}

static std::optional<KeySource> matchKeys(nn::MatmulOp product, Value rhs) {
  KeySource keys;
  if (product.getTransposeRhs()) {
    keys.input = rhs;
    llvm::append_range(
        keys.shape,
        llvm::cast<RankedTensorType>(keys.input.getType()).getShape());
    return keys;
  }
  if (Value key = unmergedTranspose(rhs)) {
    keys.input = key;
    ArrayRef<int64_t> swapped =
        llvm::cast<RankedTensorType>(rhs.getType()).getShape();
    llvm::append_range(keys.shape, swapped.drop_back(2));
    keys.shape.push_back(swapped.back());
    keys.shape.push_back(swapped[swapped.size() - 2]);
    keys.reshape = llvm::cast<RankedTensorType>(key.getType()).getShape() !=
                   ArrayRef<int64_t>(keys.shape);
    return keys;
  }
  auto transpose = rhs.getDefiningOp<nn::TransposeOp>();
  if (!transpose || transpose.getPerm().size() < 2)
    return std::nullopt;
  keys.input = transpose.getInput();
  keys.perm.assign(transpose.getPerm().begin(), transpose.getPerm().end());
  int64_t rank = keys.perm.size();
  std::swap(keys.perm[rank - 1], keys.perm[rank - 2]);
  auto inputShape =
      llvm::cast<RankedTensorType>(keys.input.getType()).getShape();
  for (int64_t axis : keys.perm)
    keys.shape.push_back(inputShape[axis]);
  if (llvm::equal(keys.perm, llvm::seq<int64_t>(0, rank)))
    keys.perm.clear();
  return keys;
}

/// p when `value` is Where(IsNaN(p), 0, p), IsNaN imported as
/// Where(p == p, false, true).
static Value matchNaNGuard(Value value) {
  auto guard = value.getDefiningOp<nn::WhereOp>();
  if (!guard || !isSplatNear(guard.getOnTrue(), 0.0, 0.0))
    return {};
  Value probabilities = guard.getOnFalse();
  auto isNaN = guard.getCondition().getDefiningOp<nn::WhereOp>();
  if (!isNaN || guard.getType() != probabilities.getType())
    return {};
  auto boolSplat = [](Value v) -> std::optional<bool> {
    auto constant = v.getDefiningOp<nn::ConstantOp>();
    auto dense = constant
                     ? llvm::dyn_cast<DenseIntElementsAttr>(constant.getValue())
                     : DenseIntElementsAttr();
    if (!dense || !dense.isSplat() || !dense.getElementType().isInteger(1))
      return std::nullopt;
    return dense.getSplatValue<bool>();
  };
  auto equal = isNaN.getCondition().getDefiningOp<nn::EqualOp>();
  if (!equal || equal.getLhs() != probabilities ||
      equal.getRhs() != probabilities ||
      boolSplat(isNaN.getOnTrue()) != std::optional<bool>(false) ||
      boolSplat(isNaN.getOnFalse()) != std::optional<bool>(true))
    return {};
  return probabilities;
}

/// True when `mask` is a constant in which every row (every index but the
/// last, the keys) shows at least one key: true for a select mask, above
/// -inf for an additive one. Then no row's softmax is NaN.
static bool everyRowSeesAKey(DenseElementsAttr values, StringRef maskKind) {
  auto type = llvm::cast<RankedTensorType>(values.getType());
  if (type.getRank() == 0)
    return false;
  int64_t keys = type.getShape().back();
  if (keys == 0)
    return false;
  std::vector<bool> visible;
  if (maskKind == "select") {
    auto dense = llvm::dyn_cast<DenseIntElementsAttr>(values);
    if (!dense)
      return false;
    for (bool shown : dense.getValues<bool>())
      visible.push_back(shown);
  } else {
    auto dense = llvm::dyn_cast<DenseFPElementsAttr>(values);
    if (!dense)
      return false;
    for (const APFloat &added : dense.getValues<APFloat>())
      visible.push_back(!(added.isInfinity() && added.isNegative()));
  }
  for (size_t row = 0; row < visible.size(); row += keys)
    if (std::none_of(visible.begin() + row, visible.begin() + row + keys,
                     [](bool shown) { return shown; }))
      return false;
  return true;
}

static bool everyRowSeesAKey(Value mask, StringRef maskKind) {
  auto constant = mask.getDefiningOp<nn::ConstantOp>();
  auto values = constant
                    ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                    : DenseElementsAttr();
  return values && everyRowSeesAKey(values, maskKind);
}

/// GPT-2's eager attention in transformers 4.5x masks twice, both times with
/// a constant when the export has no attention_mask input:
///   Where(causal, s, min) + padding      padding 0 or min per element.
/// Where padding is min, the sum is s + min or 2 min, which a softmax that
/// sees any key turns into a zero probability, as if the key were masked.
/// So the two are one select mask, causal && padding == 0, with `min` as
/// the masked value. Returns that mask's values, or null when `add` is not
/// this shape or the padding holds any other value (a bias).
static DenseElementsAttr combineMasks(nn::AddOp add) {
  auto where = add.getLhs().getDefiningOp<nn::WhereOp>();
  Value padding = add.getRhs();
  if (!where) {
    where = add.getRhs().getDefiningOp<nn::WhereOp>();
    padding = add.getLhs();
  }
  if (!where)
    return {};
  std::optional<double> fill = getSplatFloat(where.getOnFalse());
  auto causalConstant = where.getCondition().getDefiningOp<nn::ConstantOp>();
  auto paddingConstant = padding.getDefiningOp<nn::ConstantOp>();
  if (!fill || *fill > -1e30 || !causalConstant || !paddingConstant)
    return {};
  auto causal = llvm::dyn_cast<DenseIntElementsAttr>(causalConstant.getValue());
  auto pad = llvm::dyn_cast<DenseFPElementsAttr>(paddingConstant.getValue());
  if (!causal || !pad)
    return {};
  ArrayRef<int64_t> causalShape = causal.getType().getShape();
  ArrayRef<int64_t> padShape = pad.getType().getShape();
  // The scores' shape: both masks broadcast to it, aligned at the right.
  ArrayRef<int64_t> shape =
      llvm::cast<RankedTensorType>(add.getType()).getShape();
  int64_t rank = shape.size();
  if (int64_t(causalShape.size()) > rank || int64_t(padShape.size()) > rank)
    return {};
  SmallVector<bool> causalBits(causal.getValues<bool>());
  SmallVector<double> padValues;
  for (const APFloat &value : pad.getValues<APFloat>()) {
    double v = value.convertToDouble();
    if (v != 0 && v > -1e30)
      return {};
    padValues.push_back(v);
  }
  // Offset of the scores' element `index` in a mask of `maskShape`.
  auto offsetIn = [&](ArrayRef<int64_t> maskShape, ArrayRef<int64_t> index) {
    int64_t offset = 0, skip = rank - maskShape.size();
    for (int64_t d = skip; d < rank; ++d)
      offset = offset * maskShape[d - skip] +
               (maskShape[d - skip] == 1 ? 0 : index[d]);
    return offset;
  };
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  if (count > (int64_t(1) << 24))
    return {};
  SmallVector<bool> combined(count);
  SmallVector<int64_t> index(rank, 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    bool causalBit = causal.isSplat()
                         ? causalBits[0]
                         : causalBits[offsetIn(causalShape, index)];
    double padValue =
        pad.isSplat() ? padValues[0] : padValues[offsetIn(padShape, index)];
    combined[flat] = causalBit && padValue == 0;
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == shape[d]; --d)
      index[d] = 0;
  }
  auto type =
      RankedTensorType::get(shape, IntegerType::get(add.getContext(), 1));
  auto mask = DenseElementsAttr::get(type, ArrayRef<bool>(combined));
  // A row the padding hides whole would be uniform (s + min) in one and
  // uniform (min) in the other only up to rounding: keep to rows that see.
  if (!everyRowSeesAKey(mask, "select"))
    return {};
  return mask;
}

struct FormAttention : OpRewritePattern<nn::MatmulOp> {
  FormAttention(MLIRContext *context, bool dropNanGuards)
      : OpRewritePattern(context), dropNanGuards(dropNanGuards) {}
  bool dropNanGuards;

  LogicalResult matchAndRewrite(nn::MatmulOp output,
                                PatternRewriter &rewriter) const override {
    Value probabilities = output.getLhs();
    bool nanGuard = false;
    if (Value guarded = matchNaNGuard(probabilities)) {
      probabilities = guarded;
      nanGuard = true;
    }
    auto softmax = probabilities.getDefiningOp<nn::SoftmaxOp>();
    // The guard reads the probabilities twice more (x == x, and the select).
    if (!softmax || output.getBias() || output.getTransposeRhs() ||
        (!nanGuard && !softmax->hasOneUse()))
      return failure();
    auto scoresType = llvm::cast<RankedTensorType>(softmax.getType());
    if (static_cast<int64_t>(softmax.getAxis()) != scoresType.getRank() - 1)
      return failure();

    // Peel the mask off the softmax input, then the scale.
    Value masked = softmax.getInput();
    Value mask;
    StringRef maskKind = "additive";
    std::optional<double> maskedValue;
    std::optional<Scores> scores;
    DenseElementsAttr combinedMask;
    if (auto add = masked.getDefiningOp<nn::AddOp>())
      if ((combinedMask = combineMasks(add)))
        masked = add.getLhs().getDefiningOp<nn::WhereOp>() ? add.getLhs()
                                                           : add.getRhs();
    if (auto where = masked.getDefiningOp<nn::WhereOp>()) {
      maskedValue = getSplatFloat(where.getOnFalse());
      scores = matchScores(where.getOnTrue(), scoresType);
      mask = where.getCondition();
      maskKind = "select";
      if (!maskedValue)
        return failure();
    } else if (auto add = masked.getDefiningOp<nn::AddOp>()) {
      if ((scores = matchScores(add.getLhs(), scoresType)))
        mask = add.getRhs();
      else if ((scores = matchScores(add.getRhs(), scoresType)))
        mask = add.getLhs();
    } else {
      scores = matchScores(masked, scoresType);
    }
    if (!scores)
      return failure();
    if (nanGuard && mask && !dropNanGuards && !everyRowSeesAKey(mask, maskKind))
      return failure();
    std::optional<KeySource> keys = matchKeys(scores->product, scores->keys);
    if (!keys)
      return failure();

    // Shapes nn.attention requires: the same leading dimensions everywhere
    // (grouped-query keys must already be expanded).
    Value query = scores->query, value = output.getRhs();
    ArrayRef<int64_t> queryShape =
        llvm::cast<RankedTensorType>(query.getType()).getShape();
    ArrayRef<int64_t> valueShape =
        llvm::cast<RankedTensorType>(value.getType()).getShape();
    size_t rank = queryShape.size();
    if (rank < 2 || keys->shape.size() != rank || valueShape.size() != rank ||
        ArrayRef<int64_t>(keys->shape).drop_back(2) !=
            queryShape.drop_back(2) ||
        valueShape.drop_back(2) != queryShape.drop_back(2) ||
        keys->shape.back() != queryShape.back() ||
        keys->shape[rank - 2] != valueShape[rank - 2])
      return failure();

    if (combinedMask)
      mask = rewriter.create<nn::ConstantOp>(softmax.getLoc(), combinedMask);
    Value key = keys->input;
    if (keys->reshape)
      key = rewriter.create<nn::ReshapeOp>(
          scores->product.getLoc(),
          RankedTensorType::get(keys->shape, scoresType.getElementType()), key);
    else if (!keys->perm.empty())
      key = rewriter.create<nn::TransposeOp>(
          scores->product.getLoc(),
          RankedTensorType::get(keys->shape, scoresType.getElementType()), key,
          rewriter.getDenseI64ArrayAttr(keys->perm));
    rewriter.replaceOpWithNewOp<nn::AttentionOp>(
        output, output.getType(), query, key, value, mask,
        rewriter.getF32FloatAttr(static_cast<float>(scores->scale)),
        rewriter.getStringAttr(maskKind),
        maskedValue ? rewriter.getF32FloatAttr(static_cast<float>(*maskedValue))
                    : FloatAttr());
    return success();
  }
};

/// The [heads..., S, D] value a reshape merged the leading dimensions of:
/// `value` = Reshape(source) with the same last two dimensions and
/// `leading` as source's leading dimensions.
static Value unmergeHeads(Value value, ArrayRef<int64_t> leading) {
  auto reshape = value.getDefiningOp<nn::ReshapeOp>();
  if (!reshape)
    return {};
  Value source = reshape.getInput();
  ArrayRef<int64_t> from =
      llvm::cast<RankedTensorType>(source.getType()).getShape();
  ArrayRef<int64_t> to =
      llvm::cast<RankedTensorType>(value.getType()).getShape();
  if (from.size() < 2 || to.size() < 2 ||
      from.take_back(2) != to.take_back(2) || from.drop_back(2) != leading)
    return {};
  return source;
}

/// OPT's eager attention (see the file comment): heads merged into one batch
/// dimension around the two matmuls, queries scaled before, the masked
/// scores clamped at the lowest float (which changes nothing a softmax over
/// a causal row can see).
struct FormClampedAttention : OpRewritePattern<nn::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MatmulOp output,
                                PatternRewriter &rewriter) const override {
    if (output.getBias() || output.getTransposeRhs())
      return failure();
    auto softmax = output.getLhs().getDefiningOp<nn::SoftmaxOp>();
    if (!softmax || !softmax->hasOneUse() ||
        static_cast<int64_t>(softmax.getAxis()) !=
            softmax.getType().getRank() - 1)
      return failure();
    auto unmerged = softmax.getInput().getDefiningOp<nn::ReshapeOp>();
    if (!unmerged)
      return failure();
    auto clamp = unmerged.getInput().getDefiningOp<nn::MaxOp>();
    if (!clamp)
      return failure();
    nn::AddOp masked;
    if (!matchEitherOrder(
            clamp,
            [&](Value v) { return (masked = v.getDefiningOp<nn::AddOp>()); },
            [&](Value v) {
              std::optional<double> low = getSplatFloat(v);
              return low && *low <= -1e30;
            }))
      return failure();
    auto scoresType = llvm::cast<RankedTensorType>(clamp.getType());
    ArrayRef<int64_t> scoresShape = scoresType.getShape();
    if (scoresShape.size() < 3)
      return failure();
    ArrayRef<int64_t> leading = scoresShape.drop_back(2);
    nn::MatmulOp product;
    Value mask;
    if (!matchEitherOrder(
            masked,
            [&](Value v) {
              auto reshape = v.getDefiningOp<nn::ReshapeOp>();
              return reshape &&
                     (product =
                          reshape.getInput().getDefiningOp<nn::MatmulOp>()) &&
                     reshape.getType() == scoresType;
            },
            [&](Value v) {
              mask = v;
              return true;
            }))
      return failure();
    if (!product.getTransposeRhs() || product.getBias() ||
        product.getType() != unmerged.getType())
      return failure();
    Value query = unmergeHeads(product.getLhs(), leading);
    Value key = unmergeHeads(product.getRhs(), leading);
    Value value = unmergeHeads(output.getRhs(), leading);
    if (!query || !key || !value || masked.getType() != scoresType)
      return failure();
    ArrayRef<int64_t> keyShape =
        llvm::cast<RankedTensorType>(key.getType()).getShape();
    ArrayRef<int64_t> valueShape =
        llvm::cast<RankedTensorType>(value.getType()).getShape();
    if (keyShape[keyShape.size() - 2] != valueShape[valueShape.size() - 2])
      return failure();

    SmallVector<int64_t> resultShape(leading);
    resultShape.push_back(scoresShape[scoresShape.size() - 2]);
    resultShape.push_back(valueShape.back());
    auto attention = rewriter.create<nn::AttentionOp>(
        output.getLoc(),
        RankedTensorType::get(resultShape, output.getType().getElementType()),
        query, key, value, mask, rewriter.getF32FloatAttr(1.0f),
        rewriter.getStringAttr("additive"), FloatAttr());
    rewriter.replaceOpWithNewOp<nn::ReshapeOp>(output, output.getType(),
                                               attention);
    return success();
  }
};

} // namespace

void zplan::populateClampedAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FormClampedAttention>(patterns.getContext());
}

void zplan::populateAttentionPatterns(RewritePatternSet &patterns,
                                      bool dropNanGuards) {
  patterns.add<FormAttention>(patterns.getContext(), dropNanGuards);
}
