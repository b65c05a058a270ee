// zplan-autodiff rule of nn.matmul: y = a @ B + bias, B = b or b^T.
// da = dy B^T, dB = a^T dy, dbias = dy summed to the bias's shape; batch
// dimensions broadcast, rank-1 operands promoted.
// RUN: zcc-opt %s -split-input-file -zplan-autodiff="loss=output:out" | FileCheck %s

// dW = x^T dy as one 2-D product over all 6 rows; dbias = dy summed over
// the rows (no reshape: the reduction drops the prepended dimensions).
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[X2:.*]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[DY2:.*]] = nn.reshape %[[DY]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT: %[[XT:.*]] = nn.transpose %[[X2]] {perm = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.matmul %[[XT]], %[[DY2]] : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DY]] {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3x5xf32> -> tensor<5xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<4x5xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<5xf32>
// A Linear layer on [2, 3, 4] rows: 2-D weight and bias.
nn.parameter @w : tensor<4x5xf32>
nn.parameter @b : tensor<5xf32>
func.func @forward(%x: tensor<2x3x4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sw = zero.shard @w : !zero.shard<tensor<4x5xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<4x5xf32>>
  %w = zero.gather_wait %tw : tensor<4x5xf32>
  %sb = zero.shard @b : !zero.shard<tensor<5xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<5xf32>>
  %b = zero.gather_wait %tb : tensor<5xf32>
  %y = nn.matmul %x, %w, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x5xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// y = h w2^T: dh = dy w2, dw2 = dy^T h; h = x w1^T: dw1 = dh^T x. @w2's
// reduce-scatter starts as soon as its gradient is final, before @w1's.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>
// CHECK: %[[W2:.*]] = zero.gather_wait %{{.*}} : tensor<5x5xf32>
// CHECK: %[[H:.*]] = nn.matmul %[[X]], %{{.*}} {transpose_rhs = true}
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} -> tensor<3x5xf32>
// CHECK-NEXT: %[[DH:.*]] = nn.matmul %[[DY]], %[[W2]] : (tensor<3x5xf32>, tensor<5x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: %[[DYT:.*]] = nn.transpose %[[DY]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[DW2:.*]] = nn.matmul %[[DYT]], %[[H]] : (tensor<5x3xf32>, tensor<3x5xf32>) -> tensor<5x5xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW2]] : tensor<5x5xf32>
// CHECK-NEXT: %[[DHT:.*]] = nn.transpose %[[DH]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[DW1:.*]] = nn.matmul %[[DHT]], %[[X]] : (tensor<5x3xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW1]] : tensor<5x4xf32>
// CHECK: zero.grad_shard @w2
// CHECK: zero.grad_shard @w1
// transpose_rhs (torch's Linear weight [out, in]), and the input's
// cotangent through a second layer.
nn.parameter @w1 : tensor<5x4xf32>
nn.parameter @w2 : tensor<5x5xf32>
func.func @forward(%x: tensor<3x4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s1 = zero.shard @w1 : !zero.shard<tensor<5x4xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<5x4xf32>>
  %w1 = zero.gather_wait %t1 : tensor<5x4xf32>
  %s2 = zero.shard @w2 : !zero.shard<tensor<5x5xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<5x5xf32>>
  %w2 = zero.gather_wait %t2 : tensor<5x5xf32>
  %h = nn.matmul %x, %w1 {transpose_rhs = true} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
  %y = nn.matmul %h, %w2 {transpose_rhs = true} : (tensor<3x5xf32>, tensor<5x5xf32>) -> tensor<3x5xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x5xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// da = dy b^T summed over the batch dimension a was broadcast in (1 -> 3);
// db = a^T dy summed over the batch dimension numpy prepended to b.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[A:.*]] = zero.gather_wait %{{.*}} : tensor<2x1x3x4xf32>
// CHECK: %[[B:.*]] = zero.gather_wait %{{.*}} : tensor<3x4x6xf32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} -> tensor<2x3x3x6xf32>
// CHECK-NEXT: %[[DAB:.*]] = nn.matmul %[[DY]], %[[B]] {transpose_rhs = true} : (tensor<2x3x3x6xf32>, tensor<3x4x6xf32>) -> tensor<2x3x3x4xf32>
// CHECK-NEXT: %[[DA:.*]] = nn.reduce_sum %[[DAB]] {axes = array<i64: 1>, keepdims = true} : tensor<2x3x3x4xf32> -> tensor<2x1x3x4xf32>
// CHECK-NEXT: %[[AT:.*]] = nn.transpose %[[A]] {perm = array<i64: 0, 1, 3, 2>}
// CHECK-NEXT: %[[DBB:.*]] = nn.matmul %[[AT]], %[[DY]] : (tensor<2x1x4x3xf32>, tensor<2x3x3x6xf32>) -> tensor<2x3x4x6xf32>
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DBB]] {axes = array<i64: 0>, keepdims = false} : tensor<2x3x4x6xf32> -> tensor<3x4x6xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DA]] : tensor<2x1x3x4xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<3x4x6xf32>
// Batched product with a broadcast batch dimension: a [2, 1, 3, 4] @ b
// [3, 4, 6] -> [2, 3, 3, 6].
nn.parameter @a : tensor<2x1x3x4xf32>
nn.parameter @b : tensor<3x4x6xf32>
func.func @forward(%x: tensor<1xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x1x3x4xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x1x3x4xf32>>
  %a = zero.gather_wait %ta : tensor<2x1x3x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<3x4x6xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<3x4x6xf32>>
  %b = zero.gather_wait %tb : tensor<3x4x6xf32>
  %y = nn.matmul %a, %b : (tensor<2x1x3x4xf32>, tensor<3x4x6xf32>) -> tensor<2x3x3x6xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x3x3x6xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Rank-1 operands are promoted (and dy with them): v @ m gives dv = dy m^T,
// dm = v^T dy; m @ u gives dm = dy u^T; the two dm are summed.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[U:.*]]: tensor<5xf32>
// CHECK: %[[V:.*]] = zero.gather_wait %{{.*}} : tensor<4xf32>
// CHECK: %[[M:.*]] = zero.gather_wait %{{.*}} : tensor<4x5xf32>
// CHECK: %[[DMU:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// CHECK: %[[DVM:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<5xf32>
// CHECK-NEXT: %[[U2:.*]] = nn.reshape %[[U]] : tensor<5xf32> -> tensor<5x1xf32>
// CHECK-NEXT: %[[DMU2:.*]] = nn.reshape %[[DMU]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[DM1:.*]] = nn.matmul %[[DMU2]], %[[U2]] {transpose_rhs = true} : (tensor<4x1xf32>, tensor<5x1xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[V2:.*]] = nn.reshape %[[V]] : tensor<4xf32> -> tensor<1x4xf32>
// CHECK-NEXT: %[[DVM2:.*]] = nn.reshape %[[DVM]] : tensor<5xf32> -> tensor<1x5xf32>
// CHECK-NEXT: %[[DV2:.*]] = nn.matmul %[[DVM2]], %[[M]] {transpose_rhs = true} : (tensor<1x5xf32>, tensor<4x5xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: %[[DV:.*]] = nn.reshape %[[DV2]] : tensor<1x4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[V2T:.*]] = nn.transpose %[[V2]] {perm = array<i64: 1, 0>} : tensor<1x4xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[DM2:.*]] = nn.matmul %[[V2T]], %[[DVM2]] : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[DM:.*]] = nn.add %[[DM1]], %[[DM2]]
// CHECK-NEXT: zero.reduce_scatter_start %[[DV]] : tensor<4xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DM]] : tensor<4x5xf32>
// Rank-1 operands: vector @ matrix and matrix @ vector.
nn.parameter @v : tensor<4xf32>
nn.parameter @m : tensor<4x5xf32>
func.func @forward(%u: tensor<5xf32> {nn.name = "u"}) -> (tensor<f32> {nn.name = "out"}) {
  %sv = zero.shard @v : !zero.shard<tensor<4xf32>>
  %tv = zero.gather_start %sv : !zero.shard<tensor<4xf32>>
  %v = zero.gather_wait %tv : tensor<4xf32>
  %sm = zero.shard @m : !zero.shard<tensor<4x5xf32>>
  %tm = zero.gather_start %sm : !zero.shard<tensor<4x5xf32>>
  %m = zero.gather_wait %tm : tensor<4x5xf32>
  %vm = nn.matmul %v, %m : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  %mu = nn.matmul %m, %u : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4xf32>
  %a = nn.reduce_sum %vm {axes = array<i64: 0>, keepdims = false} : tensor<5xf32> -> tensor<f32>
  %b = nn.reduce_sum %mu {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  %r = nn.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
