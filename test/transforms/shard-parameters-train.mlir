// A training module: @forward and @train_micro_step read the same
// parameters; the training step's forward part decides the groups, both
// functions gather by them, the per-parameter reduce-scatters of autodiff
// become one per group, and zplan-optimizer-step adds @optimizer_step.
//
// 2 ranks; nothing persistent except @s (4 elements); buckets of 256 B
// (64 f32 elements), so @w0 (32 elements) and @w1 (32) share a group and
// @w2 gets its own.
// RUN: zcc-opt %s -zplan-shard-parameters="world-size=2 persistence-threshold=4 bucket-bytes=256 alignment=16" -zplan-optimizer-step="optimizer=sgd" | FileCheck %s
// RUN: zcc-opt %s -zplan-shard-parameters="world-size=2 persistence-threshold=4 bucket-bytes=256 alignment=16" -zplan-optimizer-step -zplan-insert-gathers -zplan-verify-schedule | FileCheck %s --check-prefix=VERIFIED

// CHECK: zero.group @group0 {offsets = array<i64: 0, 32>, padded_elements = 64 : i64, params = [@w0, @w1], world_size = 2 : i64}
// CHECK: zero.group @persistent1 {offsets = array<i64: 0>, padded_elements = 8 : i64, params = [@s], persistent, world_size = 2 : i64}
// CHECK: zero.group @group2 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w2], world_size = 2 : i64}
nn.parameter @w0 : tensor<4x8xf32>
nn.parameter @w1 : tensor<8x4xf32>
nn.parameter @s : tensor<4xf32>
nn.parameter @w2 : tensor<4x8xf32>

// CHECK-LABEL: func.func @forward
// CHECK: zero.gather_start {{.*}} {group = @group0}
// CHECK: zero.gather_start {{.*}} {group = @persistent1}
// CHECK: zero.gather_start {{.*}} {group = @group2}
// CHECK-NOT: reduce_scatter
// CHECK: return
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %s0 = zero.shard @w0 : !zero.shard<tensor<4x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<4x8xf32>>
  %w0 = zero.gather_wait %t0 : tensor<4x8xf32>
  %s1 = zero.shard @w1 : !zero.shard<tensor<8x4xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<8x4xf32>>
  %w1 = zero.gather_wait %t1 : tensor<8x4xf32>
  %s2 = zero.shard @s : !zero.shard<tensor<4xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<4xf32>>
  %sc = zero.gather_wait %t2 : tensor<4xf32>
  %s3 = zero.shard @w2 : !zero.shard<tensor<4x8xf32>>
  %t3 = zero.gather_start %s3 : !zero.shard<tensor<4x8xf32>>
  %w2 = zero.gather_wait %t3 : tensor<4x8xf32>
  %a = nn.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %b = nn.matmul %a, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %c = nn.mul %b, %sc : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %d = nn.matmul %c, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %d : tensor<2x8xf32>
}

// The gradients (stand-ins computed from the forward values: what matters
// here is where each is defined) are reduced per group, in the order the
// groups' last gradients appear: @group2 first (its gradient comes first in
// the backward pass), then @persistent1, then @group0 (whose last gradient,
// of @w0, comes last). Each wait follows the next group's start; the last
// is at the end.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[L:.*]] = nn.reduce_sum
// CHECK: %[[G2:.*]] = nn.matmul {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: %[[T2:.*]] = zero.reduce_scatter_start %[[G2]] {group = @group2} : tensor<4x8xf32>
// CHECK: %[[GS:.*]] = nn.reduce_sum
// CHECK-NEXT: %[[TS:.*]] = zero.reduce_scatter_start %[[GS]] {group = @persistent1} : tensor<4xf32>
// CHECK-NEXT: %[[A2:.*]] = zero.grad_shard @w2 : !zero.shard<tensor<4x8xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T2]] accumulate(%[[A2]] : !zero.shard<tensor<4x8xf32>>)
// CHECK: %[[G1:.*]] = nn.matmul {{.*}} -> tensor<8x4xf32>
// CHECK: %[[G0:.*]] = nn.matmul {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: %[[T0:.*]] = zero.reduce_scatter_start %[[G0]], %[[G1]] {group = @group0} : tensor<4x8xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[AS:.*]] = zero.grad_shard @s
// CHECK-NEXT: zero.reduce_scatter_wait %[[TS]] accumulate(%[[AS]] : !zero.shard<tensor<4xf32>>)
// CHECK-NEXT: %[[A0:.*]] = zero.grad_shard @w0
// CHECK-NEXT: %[[A1:.*]] = zero.grad_shard @w1
// CHECK-NEXT: zero.reduce_scatter_wait %[[T0]] accumulate(%[[A0]], %[[A1]] : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<8x4xf32>>)
// CHECK-NEXT: return %[[L]]
func.func @train_micro_step(%x: tensor<2x4xf32>) -> tensor<f32> {
  %s0 = zero.shard @w0 : !zero.shard<tensor<4x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<4x8xf32>>
  %w0 = zero.gather_wait %t0 : tensor<4x8xf32>
  %s1 = zero.shard @w1 : !zero.shard<tensor<8x4xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<8x4xf32>>
  %w1 = zero.gather_wait %t1 : tensor<8x4xf32>
  %s2 = zero.shard @s : !zero.shard<tensor<4xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<4xf32>>
  %sc = zero.gather_wait %t2 : tensor<4xf32>
  %s3 = zero.shard @w2 : !zero.shard<tensor<4x8xf32>>
  %t3 = zero.gather_start %s3 : !zero.shard<tensor<4x8xf32>>
  %w2 = zero.gather_wait %t3 : tensor<4x8xf32>
  %a = nn.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %b = nn.matmul %a, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %c = nn.mul %b, %sc : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %d = nn.matmul %c, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %loss = nn.reduce_sum %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
  // Backward (shapes only).
  %ct = nn.transpose %c {perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %g2 = nn.matmul %ct, %d : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %r2 = zero.reduce_scatter_start %g2 : tensor<4x8xf32>
  %dc = nn.matmul %d, %w2 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %gsm = nn.mul %dc, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gs = nn.reduce_sum %gsm {axes = array<i64: 0>, keepdims = false} : tensor<2x4xf32> -> tensor<4xf32>
  %rs = zero.reduce_scatter_start %gs : tensor<4xf32>
  %at = nn.transpose %a {perm = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  %g1 = nn.matmul %at, %dc : (tensor<8x2xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  %r1 = zero.reduce_scatter_start %g1 : tensor<8x4xf32>
  %xt = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %g0 = nn.matmul %xt, %a : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %r0 = zero.reduce_scatter_start %g0 : tensor<4x8xf32>
  %a0 = zero.grad_shard @w0 : !zero.shard<tensor<4x8xf32>>
  %n0 = zero.reduce_scatter_wait %r0 accumulate(%a0 : !zero.shard<tensor<4x8xf32>>) : !zero.shard<tensor<4x8xf32>>
  %a1 = zero.grad_shard @w1 : !zero.shard<tensor<8x4xf32>>
  %n1 = zero.reduce_scatter_wait %r1 accumulate(%a1 : !zero.shard<tensor<8x4xf32>>) : !zero.shard<tensor<8x4xf32>>
  %as = zero.grad_shard @s : !zero.shard<tensor<4xf32>>
  %ns = zero.reduce_scatter_wait %rs accumulate(%as : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
  %a2 = zero.grad_shard @w2 : !zero.shard<tensor<4x8xf32>>
  %n2 = zero.reduce_scatter_wait %r2 accumulate(%a2 : !zero.shard<tensor<4x8xf32>>) : !zero.shard<tensor<4x8xf32>>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[H:.*]]: tensor<8xf32> {nn.name = "hyper"})
// CHECK-NEXT: zero.optimizer_update @group0, %[[H]] {optimizer = "sgd"} : tensor<8xf32>
// CHECK-NEXT: zero.optimizer_update @persistent1, %[[H]] {optimizer = "sgd"} : tensor<8xf32>
// CHECK-NEXT: zero.optimizer_update @group2, %[[H]] {optimizer = "sgd"} : tensor<8xf32>
// CHECK-NEXT: return

// After the schedule the whole module verifies (rules 7-9 hold).
// VERIFIED: func.func @optimizer_step
// VERIFIED: zero.optimizer_update @group0, %{{.*}} {optimizer = "adamw"}
