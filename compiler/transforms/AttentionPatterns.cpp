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
// Max clamp, pre-scaled queries) stay primitive. Tests:
// test/transforms/form-nn-ops.mlir.
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
    if (softmax.getAxis() != scoresType.getRank() - 1)
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

} // namespace

void zplan::populateAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FormAttention>(patterns.getContext());
}
