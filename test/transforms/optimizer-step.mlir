// zplan-optimizer-step adds @optimizer_step to a training module: one
// zero.optimizer_update per group, persistent ones included, frozen ones
// (frozen parameters: no gradient, no state) never, in the order
// the groups are declared, each reading the run-time scalars `hyper` and
// naming the optimizer. A module without @train_micro_step is left alone;
// an unknown optimizer, a second @optimizer_step and a module with no group
// to update are errors.
// RUN: split-file %s %t
// RUN: zcc-opt %t/train.mlir -zplan-optimizer-step | FileCheck %t/train.mlir
// RUN: zcc-opt %t/train.mlir -zplan-optimizer-step="optimizer=sgd" | FileCheck %t/train.mlir --check-prefix=SGD
// RUN: zcc-opt %t/forward.mlir -zplan-optimizer-step | FileCheck %t/forward.mlir
// RUN: not zcc-opt %t/train.mlir -zplan-optimizer-step="optimizer=lion" 2>&1 | FileCheck %t/train.mlir --check-prefix=UNKNOWN
// RUN: zcc-opt %t/invalid.mlir -split-input-file -zplan-optimizer-step -verify-diagnostics

//--- train.mlir
// The new program follows @train_micro_step, which stays as it was.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[H:.*]]: tensor<8xf32> {nn.name = "hyper"})
// CHECK-NEXT: zero.optimizer_update @group0, %[[H]] {optimizer = "adamw"} : tensor<8xf32>
// CHECK-NEXT: zero.optimizer_update @persistent1, %[[H]] {optimizer = "adamw"} : tensor<8xf32>
// CHECK-NEXT: zero.optimizer_update @group2, %[[H]] {optimizer = "adamw"} : tensor<8xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @forward
//
// SGD-LABEL: func.func @optimizer_step
// SGD-COUNT-3: {optimizer = "sgd"}
// SGD-NOT: adamw
//
// UNKNOWN: zplan-optimizer-step: unknown optimizer 'lion' (expected adamw or sgd)
nn.parameter @w0 : tensor<4x8xf32>
nn.parameter @s : tensor<4xf32>
nn.parameter @w2 : tensor<4x8xf32>
zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w0], world_size = 2 : i64}
zero.group @persistent1 {offsets = array<i64: 0>, padded_elements = 8 : i64, params = [@s], persistent, world_size = 2 : i64}
zero.group @group2 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w2], world_size = 2 : i64}
nn.parameter @buffer {frozen = "a buffer"} : tensor<4xf32>
zero.group @group3 {frozen, offsets = array<i64: 0>, padded_elements = 4 : i64, params = [@buffer], world_size = 2 : i64}

func.func @train_micro_step(%x: tensor<2x4xf32>) -> tensor<f32> {
  %loss = nn.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

//--- forward.mlir
// CHECK-LABEL: func.func @forward
// CHECK-NOT: @optimizer_step
// CHECK-NOT: zero.optimizer_update
nn.parameter @w0 : tensor<4x8xf32>
zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w0], world_size = 2 : i64}

func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

//--- invalid.mlir
// expected-error @+1 {{zplan-optimizer-step: the module already has @optimizer_step}}
module {
  nn.parameter @w0 : tensor<4x8xf32>
  zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w0], world_size = 2 : i64}
  func.func @train_micro_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %loss = nn.constant dense<0.0> : tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @optimizer_step(%h: tensor<8xf32>) {
    return
  }
}

// -----

// Before zplan-shard-parameters: nothing to update.
module {
  nn.parameter @w0 : tensor<4x8xf32>
  // expected-error @+1 {{zplan-optimizer-step: no zero.group to update (run zplan-shard-parameters first)}}
  func.func @train_micro_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %loss = nn.constant dense<0.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}
