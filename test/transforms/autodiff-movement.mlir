// zplan-autodiff rules of the data-movement ops (reshape, transpose,
// expand, slice, concat, gather, embedding), the reductions and cast.
// RUN: zcc-opt %s -split-input-file -zplan-autodiff="loss=output:out" | FileCheck %s

// The cotangent of the [3, 8] view is summed over the batch dimension the
// mul broadcast it in, reshaped back to [3, 4, 2] and transposed by the
// inverse permutation; expand's cotangent is summed over the expanded
// dimensions.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[R:.*]] = nn.reshape %{{.*}} : tensor<3x4x2xf32> -> tensor<3x8xf32>
// CHECK: %[[X8:.*]] = nn.expand %{{.*}} : tensor<3x1xf32> -> tensor<2x3x8xf32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1x1x1xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[DRB:.*]] = nn.mul %[[DY]], %[[X8]]
// CHECK-NEXT: %[[DR:.*]] = nn.reduce_sum %[[DRB]] {axes = array<i64: 0>, keepdims = false} : tensor<2x3x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[DX8:.*]] = nn.mul %[[DY]], %[[R]]
// CHECK-NEXT: %[[DE3:.*]] = nn.reduce_sum %[[DX8]] {axes = array<i64: 0, 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[DE:.*]] = nn.reshape %[[DE3]] : tensor<1x3x1xf32> -> tensor<3x1xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DE]] : tensor<3x1xf32>
// CHECK-NEXT: %[[DT:.*]] = nn.reshape %[[DR]] : tensor<3x8xf32> -> tensor<3x4x2xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.transpose %[[DT]] {perm = array<i64: 2, 0, 1>} : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<2x3x4xf32>
// reshape, transpose (perm [1, 2, 0], inverse [2, 0, 1]), expand.
nn.parameter @w : tensor<2x3x4xf32>
nn.parameter @e : tensor<3x1xf32>
func.func @forward(%x: tensor<1xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sw = zero.shard @w : !zero.shard<tensor<2x3x4xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<2x3x4xf32>>
  %w = zero.gather_wait %tw : tensor<2x3x4xf32>
  %se = zero.shard @e : !zero.shard<tensor<3x1xf32>>
  %te = zero.gather_start %se : !zero.shard<tensor<3x1xf32>>
  %e = zero.gather_wait %te : tensor<3x1xf32>
  %t = nn.transpose %w {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %r = nn.reshape %t : tensor<3x4x2xf32> -> tensor<3x8xf32>
  %x8 = nn.expand %e : tensor<3x1xf32> -> tensor<2x3x8xf32>
  %y = nn.mul %r, %x8 : (tensor<3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %s = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// concat: each parameter operand gets the slice of dy it filled (the two
// uses of @v summed; the constant gets nothing); slice: nn.slice_grad with
// the forward's starts and steps.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[DCAT:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<4x5xf32>
// CHECK: %[[DSL:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x2xf32>
// CHECK-NEXT: %[[D0:.*]] = nn.slice %[[DCAT]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<4x5xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[D2:.*]] = nn.slice %[[DCAT]] {starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : tensor<4x5xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[DV:.*]] = nn.add %[[D0]], %[[D2]]
// CHECK-NEXT: zero.reduce_scatter_start %[[DV]] : tensor<4x2xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.slice_grad %[[DSL]] {starts = array<i64: 1, 0>, steps = array<i64: 2, 3>} : tensor<2x2xf32> -> tensor<4x6xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<4x6xf32>
// slice (strided) and concat.
nn.parameter @w : tensor<4x6xf32>
nn.parameter @v : tensor<4x2xf32>
func.func @forward(%x: tensor<1xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sw = zero.shard @w : !zero.shard<tensor<4x6xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<4x6xf32>>
  %w = zero.gather_wait %tw : tensor<4x6xf32>
  %sv = zero.shard @v : !zero.shard<tensor<4x2xf32>>
  %tv = zero.gather_start %sv : !zero.shard<tensor<4x2xf32>>
  %v = zero.gather_wait %tv : tensor<4x2xf32>
  %c = nn.constant dense<1.0> : tensor<4x1xf32>
  %sl = nn.slice %w {starts = array<i64: 1, 0>, steps = array<i64: 2, 3>} : tensor<4x6xf32> -> tensor<2x2xf32>
  %cat = nn.concat %v, %c, %v {axis = 1 : i64} : (tensor<4x2xf32>, tensor<4x1xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  %a = nn.reduce_sum %sl {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x2xf32> -> tensor<f32>
  %b = nn.reduce_sum %cat {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x5xf32> -> tensor<f32>
  %s = nn.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x3xi64> {nn.name = "input_ids"}, %[[IDX:.*]]: tensor<2xi32> {nn.name = "idx"})
// CHECK: %[[DH:.*]] = nn.expand %{{.*}} : tensor<1x1x1xf32> -> tensor<2x3x4xf32>
// CHECK: %[[DG:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<3x2xf32>
// CHECK-NEXT: %[[DT:.*]] = nn.embedding_grad %[[DH]], %[[IDS]] : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DT]] : tensor<10x4xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.gather_grad %[[DG]], %[[IDX]] {axis = 1 : i64} : (tensor<3x2xf32>, tensor<2xi32>) -> tensor<3x5xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<3x5xf32>
// gather along axis 1 and embedding: scatter-adds; the indices get nothing.
nn.parameter @w : tensor<3x5xf32>
nn.parameter @table : tensor<10x4xf32>
func.func @forward(%ids: tensor<2x3xi64> {nn.name = "input_ids"}, %idx: tensor<2xi32> {nn.name = "idx"}) -> (tensor<f32> {nn.name = "out"}) {
  %sw = zero.shard @w : !zero.shard<tensor<3x5xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<3x5xf32>>
  %w = zero.gather_wait %tw : tensor<3x5xf32>
  %st = zero.shard @table : !zero.shard<tensor<10x4xf32>>
  %tt = zero.gather_start %st : !zero.shard<tensor<10x4xf32>>
  %t = zero.gather_wait %tt : tensor<10x4xf32>
  %g = nn.gather %w, %idx {axis = 1 : i64} : (tensor<3x5xf32>, tensor<2xi32>) -> tensor<3x2xf32>
  %h = nn.embedding %t, %ids : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %a = nn.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x2xf32> -> tensor<f32>
  %b = nn.reduce_sum %h {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  %s = nn.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// reduce_max: dy at the maxima, shared among ties: dy * [w == max] /
// count; reduce_mean: dy / 4 expanded; cast: cast back, through f16.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait %{{.*}} : tensor<2x4xf32>
// CHECK: %[[MAX:.*]] = nn.reduce_max %[[W]]
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[DYK:.*]] = nn.reshape %[[DY]] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %[[MAXK:.*]] = nn.reshape %[[MAX]] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %[[EQ:.*]] = nn.equal %[[W]], %[[MAXK]] : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xi1>
// CHECK-NEXT: %[[EQF:.*]] = nn.cast %[[EQ]] : tensor<2x4xi1> -> tensor<2x4xf32>
// CHECK-NEXT: %[[TIES:.*]] = nn.reduce_sum %[[EQF]] {axes = array<i64: 1>, keepdims = true}
// CHECK-NEXT: %[[SHARE:.*]] = nn.div %[[DYK]], %[[TIES]]
// CHECK-NEXT: %[[DMAX:.*]] = nn.mul %[[EQF]], %[[SHARE]] : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// The mean's rule reshapes dy the same way: CSE keeps one reshape.
// CHECK-NEXT: %[[Q:.*]] = nn.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: %[[DMK:.*]] = nn.mul %[[DYK]], %[[Q]]
// CHECK-NEXT: %[[DM:.*]] = nn.expand %[[DMK]] : tensor<2x1xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[DH:.*]] = nn.cast %[[DM]] : tensor<2x4xf32> -> tensor<2x4xf16>
// CHECK-NEXT: %[[DCAST:.*]] = nn.cast %[[DH]] : tensor<2x4xf16> -> tensor<2x4xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.add %[[DMAX]], %[[DCAST]]
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<2x4xf32>
// reduce_mean and reduce_max (keepdims false), cast f32 -> f16 -> f32.
nn.parameter @w : tensor<2x4xf32>
func.func @forward(%x: tensor<1xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sw = zero.shard @w : !zero.shard<tensor<2x4xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<2x4xf32>>
  %w = zero.gather_wait %tw : tensor<2x4xf32>
  %h = nn.cast %w : tensor<2x4xf32> -> tensor<2x4xf16>
  %f = nn.cast %h : tensor<2x4xf16> -> tensor<2x4xf32>
  %m = nn.reduce_mean %f {axes = array<i64: 1>, keepdims = false} : tensor<2x4xf32> -> tensor<2xf32>
  %x1 = nn.reduce_max %w {axes = array<i64: 1>, keepdims = false} : tensor<2x4xf32> -> tensor<2xf32>
  %y = nn.add %m, %x1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}
