// zplan-autodiff rules of the fused ops: layer_norm, rms_norm, softmax and
// attention each map to their one backward op (dialects/nn/NNOps.td); a
// norm without a weight passes a ones constant.
// RUN: zcc-opt %s -split-input-file -zplan-autodiff="loss=output:out" | FileCheck %s

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[G:.*]] = zero.gather_wait %{{.*}} : tensor<4xf32>
// CHECK: %[[W:.*]] = zero.gather_wait %{{.*}} : tensor<2x3x4xf32>
// CHECK: %[[N:.*]] = nn.layer_norm %[[W]] {axis = 1
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[DN:[^,]*]], %[[DG:[^,]*]], %[[DB:[^ ]*]] = nn.layer_norm_grad %[[DY]], %[[N]], %[[G]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: zero.reduce_scatter_start %[[DG]] : tensor<4xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<4xf32>
// Without weight and bias: a ones weight of the normalised [3, 4] shape.
// CHECK-NEXT: %[[ONES:.*]] = nn.constant dense<1.000000e+00> : tensor<3x4xf32>
// CHECK-NEXT: %[[DW:[^,]*]], %{{.*}}, %{{.*}} = nn.layer_norm_grad %[[DN]], %[[W]], %[[ONES]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<2x3x4xf32>
// layer_norm with weight and bias; layer_norm without either (ones weight).
nn.parameter @g : tensor<4xf32>
nn.parameter @b : tensor<4xf32>
nn.parameter @w : tensor<2x3x4xf32>
func.func @forward(%x: tensor<1xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sg = zero.shard @g : !zero.shard<tensor<4xf32>>
  %tg = zero.gather_start %sg : !zero.shard<tensor<4xf32>>
  %g = zero.gather_wait %tg : tensor<4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<4xf32>>
  %b = zero.gather_wait %tb : tensor<4xf32>
  %sw = zero.shard @w : !zero.shard<tensor<2x3x4xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<2x3x4xf32>>
  %w = zero.gather_wait %tw : tensor<2x3x4xf32>
  %n = nn.layer_norm %w {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = nn.layer_norm %n weight %g bias %b {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %s = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[G:.*]] = zero.gather_wait %{{.*}} : tensor<4xf32>
// CHECK: %[[W:.*]] = zero.gather_wait %{{.*}} : tensor<3x4xf32>
// CHECK: %[[N:.*]] = nn.rms_norm %[[W]]
// CHECK: %[[R:.*]] = nn.rms_norm %[[N]] weight %[[G]]
// CHECK: %[[P:.*]] = nn.softmax %[[R]]
// CHECK: %[[DQ:.*]] = nn.add
// softmax_grad reads the softmax's output.
// CHECK-NEXT: %[[DR:.*]] = nn.softmax_grad %[[DQ]], %[[P]] {axis = 1 : i64} : tensor<3x4xf32>
// CHECK-NEXT: %[[DN:[^,]*]], %[[DG:[^ ]*]] = nn.rms_norm_grad %[[DR]], %[[N]], %[[G]] {epsilon = 9.99999997E-7 : f32} : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<4xf32>)
// CHECK-NEXT: zero.reduce_scatter_start %[[DG]] : tensor<4xf32>
// CHECK-NEXT: %[[ONES:.*]] = nn.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %[[DW:[^,]*]], %{{.*}} = nn.rms_norm_grad %[[DN]], %[[W]], %[[ONES]]
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<3x4xf32>
// rms_norm with and without weight, then softmax.
nn.parameter @g : tensor<4xf32>
nn.parameter @w : tensor<3x4xf32>
func.func @forward(%x: tensor<1xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sg = zero.shard @g : !zero.shard<tensor<4xf32>>
  %tg = zero.gather_start %sg : !zero.shard<tensor<4xf32>>
  %g = zero.gather_wait %tg : tensor<4xf32>
  %sw = zero.shard @w : !zero.shard<tensor<3x4xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<3x4xf32>>
  %w = zero.gather_wait %tw : tensor<3x4xf32>
  %n = nn.rms_norm %w {epsilon = 1.0e-6 : f32} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %r = nn.rms_norm %n weight %g {epsilon = 1.0e-6 : f32} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %p = nn.softmax %r {axis = 1 : i64} : tensor<3x4xf32>
  %q = nn.mul %p, %p : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = nn.reduce_sum %q {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[K:.*]]: tensor<2x6x8xf32>
// CHECK: %[[Q:.*]] = zero.gather_wait %{{.*}} : tensor<2x4x8xf32>
// CHECK: %[[V:.*]] = zero.gather_wait %{{.*}} : tensor<2x6x8xf32>
// CHECK: %[[M:.*]] = nn.constant dense<true> : tensor<4x6xi1>
// CHECK: %[[DO:.*]] = nn.expand %{{.*}} -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[DQ:[^,]*]], %{{[^,]*}}, %[[DV:[^ ]*]] = nn.attention_grad %[[DO]], %[[Q]], %[[K]], %[[V]] mask %[[M]] {mask_kind = "select", masked_value = -1.000000e+09 : f32, scale = 0.353553385 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<4x6xi1>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// CHECK-NEXT: zero.reduce_scatter_start %[[DQ]] : tensor<2x4x8xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DV]] : tensor<2x6x8xf32>
// attention with a boolean mask: the fused backward op with the forward's
// attributes; the mask (a constant) gets nothing. Only query and value
// depend on parameters, so the key's cotangent is not used.
nn.parameter @q : tensor<2x4x8xf32>
nn.parameter @v : tensor<2x6x8xf32>
func.func @forward(%k: tensor<2x6x8xf32> {nn.name = "k"}) -> (tensor<f32> {nn.name = "out"}) {
  %sq = zero.shard @q : !zero.shard<tensor<2x4x8xf32>>
  %tq = zero.gather_start %sq : !zero.shard<tensor<2x4x8xf32>>
  %q = zero.gather_wait %tq : tensor<2x4x8xf32>
  %sv = zero.shard @v : !zero.shard<tensor<2x6x8xf32>>
  %tv = zero.gather_start %sv : !zero.shard<tensor<2x6x8xf32>>
  %v = zero.gather_wait %tv : tensor<2x6x8xf32>
  %m = nn.constant dense<true> : tensor<4x6xi1>
  %o = nn.attention %q, %k, %v mask %m {mask_kind = "select", masked_value = -1.0e+9 : f32, scale = 0.353553385 : f32} : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<4x6xi1>) -> tensor<2x4x8xf32>
  %s = nn.reduce_sum %o {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}
