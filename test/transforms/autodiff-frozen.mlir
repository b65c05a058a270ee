// zplan-autodiff with a frozen parameter (nn.parameter `frozen`: a buffer,
// or zcc --freeze): its gathered copy is a constant. No gradient of its
// own, no reduce-scatter, no grad_shard; the gradient still flows through
// it to what it multiplies (dh = dy f^T), and the trained @w gets its
// gradient as before.
// RUN: zcc-opt %s -zplan-autodiff="loss=output:out" | FileCheck %s

// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>
// CHECK: %[[W:.*]] = zero.gather_wait %{{.*}} : tensor<4x4xf32>
// CHECK: %[[F:.*]] = zero.gather_wait %{{.*}} : tensor<4x3xf32>
// CHECK: %[[H:.*]] = nn.matmul %[[X]], %[[W]]
// The backward: dh = dy f^T reads the frozen copy; nothing computes df.
// CHECK: nn.matmul %{{.*}}, %[[F]] {transpose_rhs = true} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
// CHECK-NOT: tensor<4x3xf32>
// CHECK: zero.reduce_scatter_start %{{.*}} : tensor<4x4xf32>
// CHECK-NOT: zero.reduce_scatter_start
// CHECK: zero.grad_shard @w
// CHECK-NOT: zero.grad_shard
// CHECK: return
nn.parameter @w : tensor<4x4xf32>
nn.parameter @f {frozen = "a buffer"} : tensor<4x3xf32>
func.func @forward(%x: tensor<2x4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<4x4xf32>>
  %w = zero.gather_wait %tw : tensor<4x4xf32>
  %sf = zero.shard @f : !zero.shard<tensor<4x3xf32>>
  %tf = zero.gather_start %sf : !zero.shard<tensor<4x3xf32>>
  %f = zero.gather_wait %tf : tensor<4x3xf32>
  %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y = nn.matmul %h, %f : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}
