//===- LinearPatterns.cpp - form embedding and matmul with bias -----------===//
//
// A Gather along axis 0 of a rank-2 float table is an embedding lookup (the
// runtime checks ids, autodiff scatters rows). A Transpose swapping the last
// two dimensions of a MatMul's right operand becomes the matmul's
// transpose_rhs, so Linear weights are read in place. MatMul followed by Add of
// a vector the size of the last dimension is a Linear layer: one op, so the
// runtime adds the bias in the GEMM epilogue. Tests:
// test/transforms/form-nn-ops.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/PatternMatching.h"

using namespace mlir;
using namespace zplan;

namespace {

struct FormEmbedding : OpRewritePattern<nn::GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::GatherOp gather,
                                PatternRewriter &rewriter) const override {
    auto table = llvm::cast<RankedTensorType>(gather.getData().getType());
    if (gather.getAxis() != 0 || table.getRank() != 2 ||
        !llvm::isa<FloatType>(table.getElementType()))
      return failure();
    rewriter.replaceOpWithNewOp<nn::EmbeddingOp>(
        gather, gather.getType(), gather.getData(), gather.getIndices());
    return success();
  }
};

/// matmul(a, transpose(b)) with the last two dimensions swapped reads b
/// transposed in the GEMM itself (Linear weights are stored [out, in]).
struct FoldTransposeIntoMatmul : OpRewritePattern<nn::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    auto transpose = matmul.getRhs().getDefiningOp<nn::TransposeOp>();
    if (!transpose || matmul.getTransposeRhs())
      return failure();
    ArrayRef<int64_t> perm = transpose.getPerm();
    int64_t rank = perm.size();
    if (rank < 2 || perm[rank - 1] != rank - 2 || perm[rank - 2] != rank - 1)
      return failure();
    for (int64_t d = 0; d < rank - 2; ++d)
      if (perm[d] != d)
        return failure();
    rewriter.modifyOpInPlace(matmul, [&] {
      matmul.getRhsMutable().assign(transpose.getInput());
      matmul.setTransposeRhs(true);
    });
    return success();
  }
};

struct FoldBiasIntoMatmul : OpRewritePattern<nn::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::AddOp add,
                                PatternRewriter &rewriter) const override {
    nn::MatmulOp matmul;
    Value bias;
    auto isBiasless = [&](Value v) {
      matmul = v.getDefiningOp<nn::MatmulOp>();
      return matmul && v.hasOneUse() && !matmul.getBias();
    };
    if (!matchEitherOrder(add, isBiasless,
                          [&](Value v) { return (bias = v), true; }))
      return failure();
    auto result = llvm::cast<RankedTensorType>(matmul.getType());
    auto biasType = llvm::cast<RankedTensorType>(bias.getType());
    if (result.getRank() == 0 || biasType.getRank() != 1 ||
        biasType.getDimSize(0) != result.getShape().back() ||
        add.getType() != result)
      return failure();
    rewriter.modifyOpInPlace(matmul,
                             [&] { matmul.getBiasMutable().assign(bias); });
    if (Operation *def = bias.getDefiningOp();
        def && def->getBlock() == matmul->getBlock() &&
        matmul->isBeforeInBlock(def))
      rewriter.moveOpAfter(matmul, def);
    rewriter.replaceOp(add, matmul.getResult());
    return success();
  }
};

} // namespace

void zplan::populateLinearPatterns(RewritePatternSet &patterns) {
  patterns.add<FormEmbedding, FoldTransposeIntoMatmul, FoldBiasIntoMatmul>(
      patterns.getContext());
}
