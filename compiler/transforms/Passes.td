//===- Passes.td - zplan compiler passes -----------------*- tablegen -*-===//
//
// Every pass of zcc is declared here; zcc-opt exposes each by its flag.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_PASSES
#define ZPLAN_COMPILER_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FormNNOps : Pass<"zplan-form-nn-ops", "::mlir::func::FuncOp"> {
  let summary = "Forms the high-level nn ops from the primitive chains "
                "exporters emit";
  let description = [{
    ONNX exporters decompose normalisations and activations into primitive
    ops. The runtime and autodiff want them whole: one fused kernel, one
    known derivative. This pass recognises the chains and replaces them;
    anything not recognised stays primitive and still runs.

    1. layer_norm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`,
       then the `* weight` and `+ bias` that follow (opset < 17 exports).
    2. rms_norm: `x * 1/sqrt(mean(x^2) + eps)` (or `x / sqrt(...)`), then
       the `* weight` (Llama).
    3. gelu: the erf form `x * 0.5 * (1 + erf(x / sqrt(2)))` and the tanh
       form `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.
    4. silu: `x * sigmoid(x)`.
    5. embedding: `gather` along axis 0 of a rank-2 float table.
    6. matmul with transpose_rhs: `matmul(a, transpose(b))` swapping b's
       last two dimensions.
    7. matmul with bias: `matmul(a, b) + c` with c of the last dimension.
    8. attention: `softmax(mask(q @ kT * scale)) @ v`, with an additive or
       a boolean (Where) mask.

    Before:
    ```mlir
    %e = nn.erf %d : tensor<2x16x256xf32>    // %d = x / 1.41421354
    %a = nn.add %e, %one ...
    %m = nn.mul %x, %a ...
    %y = nn.mul %m, %half ...
    ```
    After:
    ```mlir
    %y = nn.gelu %x {approximate = "none"} : tensor<2x16x256xf32>
    ```
    Tests: test/transforms/form-nn-ops.mlir.
  }];
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

#endif // ZPLAN_COMPILER_TRANSFORMS_PASSES
