// zplan-autodiff refuses, with one error naming the cause, what it cannot
// differentiate: an op on the path to the loss without a gradient rule
// (named by its ONNX node), a loss output that does not exist or is not a
// float scalar, logits it cannot find, an unknown loss. An op without a
// rule that does not reach the loss is no error.
//
// RUN: split-file %s %t
// RUN: not zcc-opt %t/no-rule.mlir -zplan-autodiff="loss=output:out" 2>&1 | FileCheck %t/no-rule.mlir
// RUN: zcc-opt %t/no-rule-off-path.mlir -zplan-autodiff="loss=output:out" | FileCheck %t/no-rule-off-path.mlir
// RUN: not zcc-opt %t/outputs.mlir -zplan-autodiff="loss=output:missing" 2>&1 | FileCheck %t/outputs.mlir --check-prefix=MISSING
// RUN: not zcc-opt %t/outputs.mlir -zplan-autodiff="loss=output:vector" 2>&1 | FileCheck %t/outputs.mlir --check-prefix=VECTOR
// RUN: not zcc-opt %t/outputs.mlir -zplan-autodiff="loss=output:count" 2>&1 | FileCheck %t/outputs.mlir --check-prefix=INTEGER
// RUN: not zcc-opt %t/outputs.mlir -zplan-autodiff 2>&1 | FileCheck %t/outputs.mlir --check-prefix=NO-LOGITS
// RUN: not zcc-opt %t/outputs.mlir -zplan-autodiff="loss=mse" 2>&1 | FileCheck %t/outputs.mlir --check-prefix=UNKNOWN
// RUN: not zcc-opt %t/mask.mlir -zplan-autodiff="loss=output:out" 2>&1 | FileCheck %t/mask.mlir
// RUN: not zcc-opt %t/no-forward.mlir -zplan-autodiff 2>&1 | FileCheck %t/no-forward.mlir
// RUN: not zcc-opt %t/twice.mlir -zplan-autodiff -zplan-autodiff 2>&1 | FileCheck %t/twice.mlir

//--- no-rule.mlir

// CHECK: error: {{.*}}no gradient rule for 'nn.gelu_grad' at node '/h.0/mlp/Strange'
// CHECK-NOT: error
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.gelu_grad %w, %x : tensor<4xf32> loc("/h.0/mlp/Strange")
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

//--- no-rule-off-path.mlir

// The op without a rule feeds only an output the loss does not use.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-NOT: nn.gelu_grad
// CHECK: return
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}, tensor<4xf32> {nn.name = "side"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.gelu_grad %w, %x : tensor<4xf32>
  %r = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r, %y : tensor<f32>, tensor<4xf32>
}

//--- outputs.mlir

// MISSING: error: --loss output:missing: the model has no output named 'missing' (its outputs are 'vector', 'count')
// VECTOR: error: --loss output:vector: output 'vector' has type 'tensor<4xf32>', expected a float scalar (one element)
// INTEGER: error: --loss output:count: output 'count' has type 'tensor<1xi64>', expected a float scalar (one element)
// NO-LOGITS: error: --loss causal-lm needs an output named 'logits' (or a single output); the model's outputs are 'vector', 'count'
// UNKNOWN: error: unknown loss 'mse', expected 'causal-lm', 'output:NAME', 'grpo' or 'dpo'
nn.parameter @w : tensor<4xf32>
func.func @forward(%n: tensor<1xi64> {nn.name = "n"}) -> (tensor<4xf32> {nn.name = "vector"}, tensor<1xi64> {nn.name = "count"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  return %w, %n : tensor<4xf32>, tensor<1xi64>
}

//--- mask.mlir

// CHECK: error: {{.*}}no gradient rule for an attention mask that depends on a parameter at node 'attn'
nn.parameter @m : tensor<4x4xf32>
func.func @forward(%q: tensor<4x8xf32> {nn.name = "q"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @m : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4x4xf32>>
  %m = zero.gather_wait %t : tensor<4x4xf32>
  %o = nn.attention %q, %q, %q mask %m {scale = 1.0 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<4x8xf32> loc("attn")
  %r = nn.reduce_sum %o {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
  return %r : tensor<f32>
}

//--- no-forward.mlir

// CHECK: error: zplan-autodiff: the module has no @forward function
func.func @main() {
  return
}

//--- twice.mlir

// CHECK: error: zplan-autodiff: the module already has a @train_micro_step
nn.parameter @w : tensor<3x8xf32>
func.func @forward(%ids: tensor<2x4xi64> {nn.name = "input_ids"}, %x: tensor<2x4x3xf32> {nn.name = "x"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}) {
  %s = zero.shard @w : !zero.shard<tensor<3x8xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<3x8xf32>>
  %w = zero.gather_wait %t : tensor<3x8xf32>
  %logits = nn.matmul %x, %w : (tensor<2x4x3xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return %logits : tensor<2x4x8xf32>
}
