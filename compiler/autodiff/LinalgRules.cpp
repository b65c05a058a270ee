//===- LinalgRules.cpp - gradients of nn.matmul ---------------------------===//
//
// y = a @ B + bias with B = b or b^T (transpose_rhs), numpy matmul semantics
// (batch dimensions broadcast; a rank-1 operand is promoted to a matrix and
// its unit dimension dropped from y):
//   da = dy @ B^T        (summed over the batch dimensions a was broadcast in)
//   dB = a^T @ dy        (likewise for b), db = dB or dB^T
//   dbias = dy summed to the bias's shape.
// A 2-D weight (every Linear layer) gets its gradient from one 2-D product:
// a and dy are flattened to [rows, K] and [rows, N], so dB = a^T dy sums over
// the batch inside the GEMM instead of a batched product and a reduce.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

static int64_t product(ArrayRef<int64_t> shape) {
  int64_t result = 1;
  for (int64_t dim : shape)
    result *= dim;
  return result;
}

static LogicalResult matmulRule(GradientBuilder &b, Operation *op,
                                ArrayRef<Value> resultGradients,
                                MutableArrayRef<Value> operandGradients) {
  auto matmul = llvm::cast<nn::MatmulOp>(op);
  Value dy = resultGradients[0];
  if (!dy)
    return success();
  Value lhs = matmul.getLhs(), rhs = matmul.getRhs(), bias = matmul.getBias();
  bool transposed = matmul.getTransposeRhs();

  // Promote rank-1 operands (and dy with them) to matrices.
  bool lhsVector = shapeOf(lhs).size() == 1;
  bool rhsVector = shapeOf(rhs).size() == 1;
  Value lhs2 = lhsVector ? b.reshape(lhs, {1, shapeOf(lhs)[0]}) : lhs;
  Value rhs2 = rhsVector ? b.reshape(rhs, {shapeOf(rhs)[0], 1}) : rhs;
  SmallVector<int64_t> dyShape(shapeOf(dy));
  if (lhsVector)
    dyShape.insert(dyShape.end() - (rhsVector ? 0 : 1), 1);
  if (rhsVector)
    dyShape.push_back(1);
  Value dy2 = b.reshape(dy, dyShape);

  if (b.needsGradient(lhs)) {
    // da = dy @ B^T: B^T is b when transposed, b^T otherwise.
    Value da = b.matmul(dy2, rhs2, /*transposeRhs=*/!transposed);
    da = b.unbroadcast(da, lhs2.getType());
    operandGradients[0] = b.reshape(da, shapeOf(lhs));
  }
  if (b.needsGradient(rhs)) {
    Value db;
    ArrayRef<int64_t> lhsShape = shapeOf(lhs2);
    if (shapeOf(rhs2).size() == 2) {
      // One GEMM over all rows: a [P, K], dy [P, N].
      int64_t rows = product(lhsShape.drop_back());
      Value flatLhs = b.reshape(lhs2, {rows, lhsShape.back()});
      Value flatDy = b.reshape(dy2, {rows, dyShape.back()});
      db = transposed
               ? b.matmul(b.transposeLastTwo(flatDy), flatLhs, false)  // dy^T a
               : b.matmul(b.transposeLastTwo(flatLhs), flatDy, false); // a^T dy
    } else {
      db = transposed ? b.matmul(b.transposeLastTwo(dy2), lhs2, false)
                      : b.matmul(b.transposeLastTwo(lhs2), dy2, false);
      db = b.unbroadcast(db, rhs2.getType());
    }
    operandGradients[1] = b.reshape(db, shapeOf(rhs));
  }
  if (bias && b.needsGradient(bias))
    operandGradients[2] = b.unbroadcast(dy, bias.getType());
  return success();
}

void zplan::autodiff::registerLinalgRules(GradientRegistry &registry) {
  registry.add("nn.matmul", matmulRule);
}
