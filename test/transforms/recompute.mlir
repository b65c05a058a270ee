// A two-block training step (blocks /model/h.0 and /model/h.1: x + gelu(x @ w)
// each, loss = sum). The backward reads h0 (block 0's pre-activation) long
// after block 0's forward. Without recomputation the best-case peak is 1284 B
// (activations, each weight while read, and each gradient with its
// reduce-scatter's staging copy until the reduce_scatter_wait; no groups, so
// nothing resident).
// Without a budget, or with one that already fits, nothing changes.
// RUN: zcc-opt %s -split-input-file -zplan-recompute -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=NONE
// RUN: zcc-opt %s -split-input-file -zplan-recompute="memory-budget=1284" -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=NONE
// At 1156 B block 0 (the earliest) is recomputed right before its backward,
// from its checkpoint %x, and that alone fits; block 1 stays saved.
// RUN: zcc-opt %s -split-input-file -zplan-recompute="memory-budget=1156" -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s
// At 1155 B both blocks are recomputed.
// RUN: zcc-opt %s -split-input-file -zplan-recompute="memory-budget=1155" | FileCheck %s --check-prefix=BOTH
// In the schedule pipeline (2 ranks, one group per weight: 256 B of shards
// and 768 B of AdamW state, a gradient shard and two moments per group, are
// resident), 2436 B fits as it is and 2308 B needs block 0 recomputed; the
// scheduled result verifies under that budget, the clone reading a gather of
// @w0.
// RUN: zcc-opt %s -split-input-file -zplan-shard-parameters="world-size=2 persistence-threshold=0 alignment=16 bucket-bytes=256" -zplan-optimizer-step -zplan-recompute="memory-budget=2436" | FileCheck %s --check-prefix=NONE
// RUN: zcc-opt %s -split-input-file -zplan-shard-parameters="world-size=2 persistence-threshold=0 alignment=16 bucket-bytes=256" -zplan-optimizer-step -zplan-recompute="memory-budget=2308" -zplan-insert-gathers="memory-budget=2308" -zplan-verify-schedule="memory-budget=2308" -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=VERIFIED

// NONE-NOT: zplan.recomputed_blocks
// NONE-NOT: /recompute")
// NONE-NOT: zplan.recomputed_blocks

// BOTH: zplan.blocks = 2 : i64, zplan.recomputed_blocks = ["/model/h.0", "/model/h.1"]

// VERIFIED-LABEL: func.func @train_micro_step
// VERIFIED-SAME: zplan.recomputed_blocks = ["/model/h.0"]
// VERIFIED: loc("/model/h.1/Add/grad")
// VERIFIED-NEXT: zero.gather_start %{{.*}} {group = @group0}
// VERIFIED-NEXT: %[[G:.*]] = zero.gather_wait
// VERIFIED-NEXT: nn.matmul %arg0, %[[G]] {{.*}} loc("/model/h.0/fc/MatMul/recompute")
// VERIFIED-NEXT: zero.release %[[G]]

nn.parameter @w0 : tensor<8x8xf32>
nn.parameter @w1 : tensor<8x8xf32>

// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: attributes {zplan.blocks = 2 : i64, zplan.recomputed_blocks = ["/model/h.0"]}
// CHECK: %[[W0:.*]] = zero.gather_wait
// CHECK: %[[W1:.*]] = zero.gather_wait
// CHECK: %[[H0:.*]] = nn.matmul %[[X:.*]], %[[W0]]
// CHECK: %[[A0:.*]] = nn.gelu %[[H0]]
// CHECK: %[[X1:.*]] = nn.add %[[X]], %[[A0]]
// CHECK: %[[H1:.*]] = nn.matmul %[[X1]], %[[W1]]
// CHECK: nn.gelu_grad %{{.*}}, %[[H1]]
// CHECK-NOT: /model/h.1/{{.*}}/recompute
// CHECK: %[[H0R:.*]] = nn.matmul %[[X]], %[[W0]] : {{.*}} loc("/model/h.0/fc/MatMul/recompute")
// CHECK-NEXT: nn.gelu_grad %{{.*}}, %[[H0R]]
// CHECK: return
func.func @train_micro_step(%x: tensor<4x8xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "loss"}) {
  %s0 = zero.shard @w0 : !zero.shard<tensor<8x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<8x8xf32>>
  %w0 = zero.gather_wait %t0 : tensor<8x8xf32>
  %s1 = zero.shard @w1 : !zero.shard<tensor<8x8xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<8x8xf32>>
  %w1 = zero.gather_wait %t1 : tensor<8x8xf32>
  %h0 = nn.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/h.0/fc/MatMul")
  %a0 = nn.gelu %h0 : tensor<4x8xf32> loc("/model/h.0/act/Gelu")
  %x1 = nn.add %x, %a0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/model/h.0/Add")
  %h1 = nn.matmul %x1, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/h.1/fc/MatMul")
  %a1 = nn.gelu %h1 : tensor<4x8xf32> loc("/model/h.1/act/Gelu")
  %x2 = nn.add %x1, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/model/h.1/Add")
  %loss = nn.reduce_sum %x2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32> loc("/loss/ReduceSum")
  // Backward.
  %dx2 = nn.constant dense<1.0> : tensor<4x8xf32> loc("loss/grad")
  %dh1 = nn.gelu_grad %dx2, %h1 : tensor<4x8xf32> loc("/model/h.1/act/Gelu/grad")
  %x1t = nn.transpose %x1 {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32> loc("/model/h.1/fc/MatMul/grad")
  %dw1 = nn.matmul %x1t, %dh1 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("/model/h.1/fc/MatMul/grad")
  %r1 = zero.reduce_scatter_start %dw1 : tensor<8x8xf32>
  %dx1a = nn.matmul %dh1, %w1 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/h.1/fc/MatMul/grad")
  %dx1 = nn.add %dx2, %dx1a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/model/h.1/Add/grad")
  %dh0 = nn.gelu_grad %dx1, %h0 : tensor<4x8xf32> loc("/model/h.0/act/Gelu/grad")
  %xt = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32> loc("/model/h.0/fc/MatMul/grad")
  %dw0 = nn.matmul %xt, %dh0 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("/model/h.0/fc/MatMul/grad")
  %r0 = zero.reduce_scatter_start %dw0 : tensor<8x8xf32>
  %g1 = zero.grad_shard @w1 : !zero.shard<tensor<8x8xf32>>
  %n1 = zero.reduce_scatter_wait %r1 accumulate(%g1 : !zero.shard<tensor<8x8xf32>>) : !zero.shard<tensor<8x8xf32>>
  %g0 = zero.grad_shard @w0 : !zero.shard<tensor<8x8xf32>>
  %n0 = zero.reduce_scatter_wait %r0 accumulate(%g0 : !zero.shard<tensor<8x8xf32>>) : !zero.shard<tensor<8x8xf32>>
  return %loss : tensor<f32>
}

// -----

// Block names of the "/model/layers/0/..." form; each recomputed value is
// born right before its first reader: %h2's clone before the first
// gelu_grad, %h1's only after the backward op in between (not both at the
// start of the block's backward).
// RUN: zcc-opt %s -split-input-file -zplan-recompute="memory-budget=700" -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=SINK

nn.parameter @w : tensor<8x8xf32>

// SINK: {{^}}// {{-----}}
// SINK: func.func @train_micro_step
// SINK-SAME: zplan.blocks = 1 : i64, zplan.recomputed_blocks = ["/model/layers/0"]
// SINK: loc("/loss/ReduceSum")
// SINK-NEXT: nn.constant
// SINK-NEXT: %[[H2:.*]] = nn.matmul {{.*}} loc("/model/layers/0/b/MatMul/recompute")
// SINK-NEXT: %[[G2:.*]] = nn.gelu_grad %{{.*}}, %[[H2]]
// SINK-NEXT: nn.matmul %[[G2]], {{.*}} loc("/model/layers/0/b/MatMul/grad")
// SINK-NEXT: %[[H1:.*]] = nn.matmul {{.*}} loc("/model/layers/0/a/MatMul/recompute")
// SINK-NEXT: nn.gelu_grad %{{.*}}, %[[H1]]
func.func @train_micro_step(%x: tensor<4x8xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "loss"}) {
  %s = zero.shard @w : !zero.shard<tensor<8x8xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<8x8xf32>>
  %w = zero.gather_wait %t : tensor<8x8xf32>
  %h1 = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/layers/0/a/MatMul")
  %p = nn.gelu %h1 : tensor<4x8xf32> loc("/model/layers/0/a/Gelu")
  %h2 = nn.matmul %x, %w {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/layers/0/b/MatMul")
  %q = nn.gelu %h2 : tensor<4x8xf32> loc("/model/layers/0/b/Gelu")
  %y = nn.add %p, %q : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/model/layers/0/Add")
  %loss = nn.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32> loc("/loss/ReduceSum")
  %dy = nn.constant dense<1.0> : tensor<4x8xf32> loc("loss/grad")
  %g2 = nn.gelu_grad %dy, %h2 : tensor<4x8xf32> loc("/model/layers/0/b/Gelu/grad")
  %dx2 = nn.matmul %g2, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/layers/0/b/MatMul/grad")
  %g1 = nn.gelu_grad %dy, %h1 : tensor<4x8xf32> loc("/model/layers/0/a/Gelu/grad")
  %dx1 = nn.matmul %g1, %w {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/model/layers/0/a/MatMul/grad")
  %dx = nn.add %dx1, %dx2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/model/layers/0/Add/grad")
  %xt = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32> loc("/model/layers/0/a/MatMul/grad")
  %dw = nn.matmul %xt, %g1 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("/model/layers/0/a/MatMul/grad")
  %r = zero.reduce_scatter_start %dw : tensor<8x8xf32>
  %acc = zero.grad_shard @w : !zero.shard<tensor<8x8xf32>>
  %new = zero.reduce_scatter_wait %r accumulate(%acc : !zero.shard<tensor<8x8xf32>>) : !zero.shard<tensor<8x8xf32>>
  return %loss : tensor<f32>
}
