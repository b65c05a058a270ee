// zplan-autodiff rules of the unary elementwise ops: for each, the
// cotangent of a parameter w through y = f(w) and a sum (loss =
// output:out). dy is the sum's cotangent, ones expanded to w's shape.
// RUN: zcc-opt %s -split-input-file -zplan-autodiff="loss=output:out" | FileCheck %s

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.neg
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = -w: dw = -dy.
// CHECK-NEXT: %[[DW:.*]] = nn.neg %[[DY]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.neg %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.sqrt
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = sqrt(w): dw = dy * 0.5 / y.
// CHECK-NEXT: %[[HALF:.*]] = nn.constant dense<5.000000e-01>
// CHECK-NEXT: %[[H:.*]] = nn.mul %[[DY]], %[[HALF]]
// CHECK-NEXT: %[[DW:.*]] = nn.div %[[H]], %[[Y]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.sqrt %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.exp
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = exp(w): dw = dy * y.
// CHECK-NEXT: %[[DW:.*]] = nn.mul %[[DY]], %[[Y]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.exp %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.log
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = log(w): dw = dy / w.
// CHECK-NEXT: %[[DW:.*]] = nn.div %[[DY]], %[[W]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.log %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.tanh
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = tanh(w): dw = dy * (1 - y^2).
// CHECK-DAG: %[[Y2:.*]] = nn.mul %[[Y]], %[[Y]]
// CHECK: %[[D:.*]] = nn.sub %[[ONE]], %[[Y2]]
// CHECK-NEXT: %[[DW:.*]] = nn.mul %[[DY]], %[[D]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.tanh %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.sigmoid
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = sigmoid(w): dw = dy * y * (1 - y).
// CHECK-DAG: %[[D:.*]] = nn.sub %[[ONE]], %[[Y]]
// CHECK-DAG: %[[DYY:.*]] = nn.mul %[[DY]], %[[Y]]
// CHECK: %[[DW:.*]] = nn.mul %[[DYY]], %[[D]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.sigmoid %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.relu
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = relu(w): dw = dy where w > 0, else 0.
// CHECK-DAG: %[[ZERO:.*]] = nn.constant dense<0.000000e+00>
// CHECK-DAG: %[[POS:.*]] = nn.greater %[[W]], %[[ZERO]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
// CHECK: %[[DW:.*]] = nn.where %[[POS]], %[[DY]], %[[ZERO]] : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.relu %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.silu
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = w s(w): dw = dy * s * (1 + w (1 - s)).
// CHECK-DAG: %[[S:.*]] = nn.sigmoid %[[W]]
// CHECK-DAG: %[[OMS:.*]] = nn.sub %[[ONE]], %[[S]]
// CHECK-DAG: %[[WOMS:.*]] = nn.mul %[[W]], %[[OMS]]
// CHECK-DAG: %[[F:.*]] = nn.add %[[ONE]], %[[WOMS]]
// CHECK-DAG: %[[DYS:.*]] = nn.mul %[[DY]], %[[S]]
// CHECK: %[[DW:.*]] = nn.mul %[[DYS]], %[[F]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.silu %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.gelu
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// gelu: the fused backward op, from the gelu's input (approximate "none",
// the default, is not printed).
// CHECK-NEXT: %[[DW:.*]] = nn.gelu_grad %[[DY]], %[[W]] : tensor<4xf32>
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.gelu %w {approximate = "none"} : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.erf
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = erf(w): dw = dy * exp(-w^2) * 2/sqrt(pi).
// CHECK-DAG: %[[W2:.*]] = nn.mul %[[W]], %[[W]]
// CHECK-DAG: %[[NW2:.*]] = nn.neg %[[W2]]
// CHECK-DAG: %[[G:.*]] = nn.exp %[[NW2]]
// CHECK-DAG: %[[C:.*]] = nn.constant dense<1.12837923> : tensor<f32>
// CHECK-DAG: %[[DYG:.*]] = nn.mul %[[DY]], %[[G]]
// CHECK: %[[DW:.*]] = nn.mul %[[DYG]], %[[C]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.erf %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.reciprocal
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = 1/w: dw = -dy * y^2.
// CHECK-NEXT: %[[Y2:.*]] = nn.mul %[[Y]], %[[Y]]
// CHECK-NEXT: %[[P:.*]] = nn.mul %[[DY]], %[[Y2]]
// CHECK-NEXT: %[[DW:.*]] = nn.neg %[[P]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.reciprocal %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]] = zero.gather_wait
// CHECK: %[[Y:.*]] = nn.abs
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = nn.expand %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// y = |w|: dw = dy * ([w > 0] - [w < 0]).
// CHECK-DAG: %[[GT:.*]] = nn.greater %[[W]]
// CHECK-DAG: %[[LT:.*]] = nn.less %[[W]]
// CHECK-DAG: %[[GTF:.*]] = nn.cast %[[GT]] : tensor<4xi1> -> tensor<4xf32>
// CHECK-DAG: %[[LTF:.*]] = nn.cast %[[LT]] : tensor<4xi1> -> tensor<4xf32>
// CHECK-DAG: %[[SIGN:.*]] = nn.sub %[[GTF]], %[[LTF]]
// CHECK: %[[DW:.*]] = nn.mul %[[DY]], %[[SIGN]]
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter_start %[[DW]] : tensor<4xf32>
// CHECK-NEXT: %[[ACC:.*]] = zero.grad_shard @w : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<4xf32>>) : !zero.shard<tensor<4xf32>>
// CHECK-NEXT: return %{{.*}} : tensor<f32>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.abs %w : tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}
