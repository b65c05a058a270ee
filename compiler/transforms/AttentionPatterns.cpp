//===- AttentionPatterns.cpp - form nn.attention --------------------------===//
//
// Eager attention exports as
//   s = MatMul(q, kT)          kT a Transpose of the keys (or transpose_rhs)
//   s = s / c  (or s * c)      the 1/sqrt(d) scale
//   s = s + mask               (Llama, additive)  or
//   s = Where(mask, s, fill)   (GPT-2, boolean)
//   o = MatMul(Softmax(s, -1), v)
// and becomes one nn.attention, which the runtime can fuse and autodiff
// can differentiate as a whole. Chains with anything else in between (OPT's
// Max clamp, pre-scaled queries) stay primitive in zplan-form-nn-ops.
// Generation needs every attention as one op (its keys and values go to the
// KV cache), so it also forms OPT's chain (populateClampedAttentionPatterns):
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
  return scores;
}

/// How to get the keys as [..., T, D] from the scores matmul `q @ rhs`: rhs
/// itself when the matmul transposes it, else the operand of the transpose
/// feeding it, permuted by `perm` (empty when no transpose is needed).
struct KeySource {
  Value input;
  SmallVector<int64_t> perm;
  SmallVector<int64_t> shape;
};

static std::optional<KeySource> matchKeys(nn::MatmulOp product) {
  KeySource keys;
  if (product.getTransposeRhs()) {
    keys.input = product.getRhs();
    llvm::append_range(
        keys.shape,
        llvm::cast<RankedTensorType>(keys.input.getType()).getShape());
    return keys;
  }
  auto transpose = product.getRhs().getDefiningOp<nn::TransposeOp>();
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

struct FormAttention : OpRewritePattern<nn::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MatmulOp output,
                                PatternRewriter &rewriter) const override {
    auto softmax = output.getLhs().getDefiningOp<nn::SoftmaxOp>();
    if (!softmax || output.getBias() || output.getTransposeRhs() ||
        !softmax->hasOneUse())
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
    std::optional<KeySource> keys = matchKeys(scores->product);
    if (!keys)
      return failure();

    // Shapes nn.attention requires: the same leading dimensions everywhere
    // (grouped-query keys must already be expanded).
    Value query = scores->product.getLhs(), value = output.getRhs();
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

    Value key = keys->input;
    if (!keys->perm.empty())
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

void zplan::populateAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FormAttention>(patterns.getContext());
}
