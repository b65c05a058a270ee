// zplan-autodiff rules of the binary elementwise ops with numpy
// broadcasting: each operand's cotangent is summed back to its own shape
// (reduce_sum over the dimensions broadcasting added or stretched).
// RUN: zcc-opt %s -split-input-file -zplan-autodiff="loss=output:out" | FileCheck %s

// z = a + b, b broadcast over rows: da = dz, db = dz summed over the rows.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DZ]] {axes = array<i64: 0>, keepdims = false} : tensor<2x3xf32> -> tensor<3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DZ]] : tensor<2x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<3xf32>
nn.parameter @a : tensor<2x3xf32>
nn.parameter @b : tensor<3xf32>
func.func @forward(%c: tensor<2x3xi1> {nn.name = "c"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %sb = zero.shard @b : !zero.shard<tensor<3xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<3xf32>>
  %b = zero.gather_wait %tb : tensor<3xf32>
  %z = nn.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// z = a - b, b [2, 1] stretched over columns: db = -dz summed over them,
// keeping the unit dimension.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[N:.*]] = nn.neg %[[DZ]]
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[N]] {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DZ]] : tensor<2x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<2x1xf32>
nn.parameter @a : tensor<2x3xf32>
nn.parameter @b : tensor<2x1xf32>
func.func @forward(%c: tensor<2x3xi1> {nn.name = "c"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %sb = zero.shard @b : !zero.shard<tensor<2x1xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<2x1xf32>>
  %b = zero.gather_wait %tb : tensor<2x1xf32>
  %z = nn.sub %a, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// z = a * b: da = dz * b, db = sum_rows(dz * a).
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[A:.*]] = zero.gather_wait %{{.*}} : tensor<2x3xf32>
// CHECK: %[[B:.*]] = zero.gather_wait %{{.*}} : tensor<3xf32>
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[DA:.*]] = nn.mul %[[DZ]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-DAG: %[[DZA:.*]] = nn.mul %[[DZ]], %[[A]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[DB:.*]] = nn.reduce_sum %[[DZA]] {axes = array<i64: 0>, keepdims = false}
// CHECK-NEXT: zero.reduce_scatter_start %[[DA]] : tensor<2x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<3xf32>
nn.parameter @a : tensor<2x3xf32>
nn.parameter @b : tensor<3xf32>
func.func @forward(%c: tensor<2x3xi1> {nn.name = "c"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %sb = zero.shard @b : !zero.shard<tensor<3xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<3xf32>>
  %b = zero.gather_wait %tb : tensor<3xf32>
  %z = nn.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// z = a / b: da = dz / b, db = -(dz * z) / b summed to [1, 3].
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[B:.*]] = zero.gather_wait %{{.*}} : tensor<1x3xf32>
// CHECK: %[[Z:.*]] = nn.div
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[DA:.*]] = nn.div %[[DZ]], %[[B]]
// CHECK-DAG: %[[DZZ:.*]] = nn.mul %[[DZ]], %[[Z]]
// CHECK: %[[Q:.*]] = nn.div %[[DZZ]], %[[B]]
// CHECK-NEXT: %[[N:.*]] = nn.neg %[[Q]]
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[N]] {axes = array<i64: 0>, keepdims = true} : tensor<2x3xf32> -> tensor<1x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DA]] : tensor<2x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<1x3xf32>
nn.parameter @a : tensor<2x3xf32>
nn.parameter @b : tensor<1x3xf32>
func.func @forward(%c: tensor<2x3xi1> {nn.name = "c"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %sb = zero.shard @b : !zero.shard<tensor<1x3xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<1x3xf32>>
  %b = zero.gather_wait %tb : tensor<1x3xf32>
  %z = nn.div %a, %b : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// z = max(a, b): da = dz * w with w = [a > b] + [a == b] / 2 (ties split as
// torch.maximum), db = dz * (1 - w) summed over rows.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[A:.*]] = zero.gather_wait %{{.*}} : tensor<2x3xf32>
// CHECK: %[[B:.*]] = zero.gather_wait %{{.*}} : tensor<3xf32>
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[GT:.*]] = nn.greater %[[A]], %[[B]]
// CHECK-DAG: %[[EQ:.*]] = nn.equal %[[A]], %[[B]]
// CHECK-DAG: %[[HALF:.*]] = nn.constant dense<5.000000e-01>
// CHECK-DAG: %[[EQF:.*]] = nn.cast %[[EQ]]
// CHECK-DAG: %[[TIE:.*]] = nn.mul %[[EQF]], %[[HALF]]
// CHECK-DAG: %[[GTF:.*]] = nn.cast %[[GT]]
// CHECK-DAG: %[[W:.*]] = nn.add %[[GTF]], %[[TIE]]
// CHECK: %[[DA:.*]] = nn.mul %[[DZ]], %[[W]]
// CHECK-NEXT: %[[OMW:.*]] = nn.sub %{{.*}}, %[[W]]
// CHECK-NEXT: %[[DBF:.*]] = nn.mul %[[DZ]], %[[OMW]]
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DBF]] {axes = array<i64: 0>, keepdims = false}
// CHECK-NEXT: zero.reduce_scatter_start %[[DA]] : tensor<2x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<3xf32>
nn.parameter @a : tensor<2x3xf32>
nn.parameter @b : tensor<3xf32>
func.func @forward(%c: tensor<2x3xi1> {nn.name = "c"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %sb = zero.shard @b : !zero.shard<tensor<3xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<3xf32>>
  %b = zero.gather_wait %tb : tensor<3xf32>
  %z = nn.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// z = where(c, a, b): da = where(c, dz, 0), db = where(c, 0, dz) summed over
// rows; the condition gets nothing.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[C:.*]]: tensor<2x3xi1>
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DA:.*]] = nn.where %[[C]], %[[DZ]], %[[ZERO]]
// CHECK-NEXT: %[[DBF:.*]] = nn.where %[[C]], %[[ZERO]], %[[DZ]]
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DBF]] {axes = array<i64: 0>, keepdims = false}
// CHECK-NEXT: zero.reduce_scatter_start %[[DA]] : tensor<2x3xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DB]] : tensor<3xf32>
nn.parameter @a : tensor<2x3xf32>
nn.parameter @b : tensor<3xf32>
func.func @forward(%c: tensor<2x3xi1> {nn.name = "c"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %sb = zero.shard @b : !zero.shard<tensor<3xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<3xf32>>
  %b = zero.gather_wait %tb : tensor<3xf32>
  %z = nn.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// z = a^2 + a^3 + a^e: 2 a dz (folded), 3 a^2 dz (a^2 is the forward's,
// shared by CSE), e a^(e-1) dz (the exponent e is an input, not a
// parameter: it gets no gradient, no log). The three uses of a are summed.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[E:.*]]: tensor<2x3xf32>
// CHECK: %[[A:.*]] = zero.gather_wait %{{.*}} : tensor<2x3xf32>
// CHECK: %[[TWO:.*]] = nn.constant dense<2.000000e+00>
// CHECK: %[[THREE:.*]] = nn.constant dense<3.000000e+00>
// CHECK: %[[A2:.*]] = nn.pow %[[A]], %[[TWO]]
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00>
// CHECK: %[[DZ:.*]] = nn.expand %{{.*}} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[EM1:.*]] = nn.sub %[[E]], %[[ONE]]
// CHECK-DAG: %[[AEM1:.*]] = nn.pow %[[A]], %[[EM1]]
// CHECK-DAG: %[[DZE:.*]] = nn.mul %[[DZ]], %[[E]]
// CHECK-DAG: %[[DX:.*]] = nn.mul %[[DZE]], %[[AEM1]]
// CHECK-DAG: %[[DZ3:.*]] = nn.mul %[[DZ]], %[[THREE]]
// CHECK-DAG: %[[DQ:.*]] = nn.mul %[[DZ3]], %[[A2]]
// CHECK: %[[S1:.*]] = nn.add %[[DX]], %[[DQ]]
// CHECK-NEXT: %[[A2X:.*]] = nn.mul %[[A]], %[[TWO]]
// CHECK-NEXT: %[[DP:.*]] = nn.mul %[[DZ]], %[[A2X]]
// CHECK-NEXT: %[[S2:.*]] = nn.add %[[S1]], %[[DP]]
// CHECK-NEXT: zero.reduce_scatter_start %[[S2]] : tensor<2x3xf32>
// CHECK-NOT: nn.log
nn.parameter @a : tensor<2x3xf32>
func.func @forward(%e: tensor<2x3xf32> {nn.name = "e"}) -> (tensor<f32> {nn.name = "out"}) {
  %sa = zero.shard @a : !zero.shard<tensor<2x3xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<2x3xf32>>
  %a = zero.gather_wait %ta : tensor<2x3xf32>
  %two = nn.constant dense<2.0> : tensor<f32>
  %three = nn.constant dense<3.0> : tensor<f32>
  %p = nn.pow %a, %two : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %q = nn.pow %a, %three : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %x = nn.pow %a, %e : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %pq = nn.add %p, %q : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %z = nn.add %pq, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = nn.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %r : tensor<f32>
}
