// zplan-logprobs-program (compiler/autodiff/LogprobsProgram.cpp): @forward
// stays; @logprobs returns the per-token log-probs of its own input_ids and
// the entropies, both f32 [B, T] and shifted one column right (column t is
// about token t given the ones before it; column 0 is 0). Other outputs and
// the ops only they need are dropped.
//
// RUN: zcc-opt %s -split-input-file -verify-diagnostics -zplan-logprobs-program | FileCheck %s

// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @logprobs
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4xf32> {nn.name = "logprobs"}, tensor<2x4xf32> {nn.name = "entropy"})
// CHECK: %[[LOGITS:.*]] = nn.matmul
// targets = concat(input_ids[:, 1:], -100): position t scores token t + 1.
// CHECK: %[[IGNORED:.*]] = nn.constant dense<-100> : tensor<2x1xi64>
// CHECK-NEXT: %[[SHIFTED:.*]] = nn.slice %[[IDS]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x4xi64> -> tensor<2x3xi64>
// CHECK-NEXT: %[[TARGETS:.*]] = nn.concat %[[SHIFTED]], %[[IGNORED]] {axis = 1 : i64}
// CHECK-NEXT: %[[LP:.*]] = nn.token_logprobs %[[LOGITS]], %[[TARGETS]] : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
// Moved one column right: a zero column, then columns 0..T-2.
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0.000000e+00> : tensor<2x1xf32>
// CHECK-NEXT: %[[KEPT:.*]] = nn.slice %[[LP]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x4xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[ALIGNED:.*]] = nn.concat %[[ZERO]], %[[KEPT]] {axis = 1 : i64}
// CHECK-NEXT: %[[H:.*]] = nn.token_entropy %[[LOGITS]] : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[HKEPT:.*]] = nn.slice %[[H]]
// CHECK-NEXT: %[[HALIGNED:.*]] = nn.concat %{{.*}}, %[[HKEPT]]
// CHECK-NEXT: return %[[ALIGNED]], %[[HALIGNED]]
// CHECK-NOT: nn.exp
nn.parameter @wte : tensor<8x3xf32>
nn.parameter @unused : tensor<5xf32>
func.func @forward(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}, tensor<5xf32> {nn.name = "other"}) {
  %s = zero.shard @wte : !zero.shard<tensor<8x3xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<8x3xf32>>
  %wte = zero.gather_wait %t : tensor<8x3xf32>
  %su = zero.shard @unused : !zero.shard<tensor<5xf32>>
  %tu = zero.gather_start %su : !zero.shard<tensor<5xf32>>
  %u = zero.gather_wait %tu : tensor<5xf32>
  %h = nn.embedding %wte, %ids : (tensor<8x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  %logits = nn.matmul %h, %wte {transpose_rhs = true} : (tensor<2x4x3xf32>, tensor<8x3xf32>) -> tensor<2x4x8xf32>
  %other = nn.exp %u : tensor<5xf32>
  return %logits, %other : tensor<2x4x8xf32>, tensor<5xf32>
}

// -----

// The program scores input_ids: a model without them is refused.
nn.parameter @w : tensor<4x8xf32>
// expected-error @+1 {{the log-probs program needs an integer input named 'input_ids'}}
func.func @forward(%x: tensor<2x4x4xf32> {nn.name = "x"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}) {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %t : tensor<4x8xf32>
  %logits = nn.matmul %x, %w : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return %logits : tensor<2x4x8xf32>
}
