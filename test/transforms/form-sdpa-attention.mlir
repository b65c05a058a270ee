// torch's export of scaled_dot_product_attention (the dynamo exporter and
// optimum) becomes nn.attention: the scale split as sqrt(c) over q and kT,
// kT made by Reshape(Transpose(Reshape(k))) (grouped-query keys regrouped
// on the way), and the probabilities guarded by Where(IsNaN(p), 0, p), the
// IsNaN imported as Where(p == p, false, true). GPT-2's eager attention in
// transformers 4.5x masks twice (a select, then an additive padding mask)
// and becomes one select mask.
// RUN: zcc-opt %s -split-input-file -zplan-form-nn-ops | FileCheck %s
// RUN: zcc-opt %s -split-input-file -zplan-form-nn-ops=drop-nan-guards | FileCheck %s --check-prefix=DROP

// A constant causal mask in which every row sees a key: the guard changes
// nothing, so it goes. GQA: keys [2, 2(kv), 2(group), 4, 8] come back as
// [2, 4, 8, 4]; the attention reads them reshaped to [2, 4, 4, 8]. The
// scale is 0.5 * 0.5.
// CHECK-LABEL: func.func @sdpa_gqa
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x4x8xf32>, %[[K:.*]]: tensor<2x2x2x4x8xf32>, %[[V:.*]]: tensor<2x4x4x8xf32>)
// CHECK-DAG: %[[M:.*]] = nn.constant {{.*}} : tensor<1x1x4x4xf32>
// CHECK-DAG: %[[KR:.*]] = nn.reshape %[[K]] : tensor<2x2x2x4x8xf32> -> tensor<2x4x4x8xf32>
// CHECK: %[[O:.*]] = nn.attention %[[Q]], %[[KR]], %[[V]] mask %[[M]] {scale = 2.500000e-01 : f32}
// CHECK-NEXT: return %[[O]]
// CHECK-NOT: nn.equal
func.func @sdpa_gqa(%q: tensor<2x4x4x8xf32>, %k: tensor<2x2x2x4x8xf32>, %v: tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32> {
  %half = nn.constant dense<0.5> : tensor<f32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %false = nn.constant dense<false> : tensor<i1>
  %true = nn.constant dense<true> : tensor<i1>
  %mask = nn.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %k3 = nn.reshape %k : tensor<2x2x2x4x8xf32> -> tensor<8x4x8xf32>
  %kt3 = nn.transpose %k3 {perm = array<i64: 0, 2, 1>} : tensor<8x4x8xf32> -> tensor<8x8x4xf32>
  %kt = nn.reshape %kt3 : tensor<8x8x4xf32> -> tensor<2x4x8x4xf32>
  %qs = nn.mul %q, %half : (tensor<2x4x4x8xf32>, tensor<f32>) -> tensor<2x4x4x8xf32>
  %ks = nn.mul %kt, %half : (tensor<2x4x8x4xf32>, tensor<f32>) -> tensor<2x4x8x4xf32>
  %s = nn.matmul %qs, %ks : (tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x4x4xf32>
  %sm = nn.add %s, %mask : (tensor<2x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = nn.softmax %sm {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %eq = nn.equal %p, %p : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xi1>
  %nan = nn.where %eq, %false, %true : (tensor<2x4x4x4xi1>, tensor<i1>, tensor<i1>) -> tensor<2x4x4x4xi1>
  %g = nn.where %nan, %zero, %p : (tensor<2x4x4x4xi1>, tensor<f32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %o = nn.matmul %g, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  return %o : tensor<2x4x4x8xf32>
}

// -----

// A run-time mask may hide a whole row (a padded query), where the guard
// gives zeros and nn.attention NaN: the chain stays primitive, unless the
// KV cache will replace the mask (drop-nan-guards, generation).
// CHECK-LABEL: func.func @sdpa_runtime_mask
// CHECK-NOT: nn.attention
// CHECK: nn.equal
// DROP-LABEL: func.func @sdpa_runtime_mask
// DROP: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 2.500000e-01 : f32}
// DROP-NOT: nn.equal
func.func @sdpa_runtime_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %mask: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %half = nn.constant dense<0.5> : tensor<f32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %false = nn.constant dense<false> : tensor<i1>
  %true = nn.constant dense<true> : tensor<i1>
  %k3 = nn.reshape %k : tensor<1x2x4x8xf32> -> tensor<2x4x8xf32>
  %kt3 = nn.transpose %k3 {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %kt = nn.reshape %kt3 : tensor<2x8x4xf32> -> tensor<1x2x8x4xf32>
  %qs = nn.mul %q, %half : (tensor<1x2x4x8xf32>, tensor<f32>) -> tensor<1x2x4x8xf32>
  %ks = nn.mul %kt, %half : (tensor<1x2x8x4xf32>, tensor<f32>) -> tensor<1x2x8x4xf32>
  %s = nn.matmul %qs, %ks : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %sm = nn.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = nn.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %eq = nn.equal %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %nan = nn.where %eq, %false, %true : (tensor<1x2x4x4xi1>, tensor<i1>, tensor<i1>) -> tensor<1x2x4x4xi1>
  %g = nn.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = nn.matmul %g, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A constant mask that hides a whole row: the guard matters, nothing forms.
// CHECK-LABEL: func.func @sdpa_hidden_row
// CHECK-NOT: nn.attention
func.func @sdpa_hidden_row(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %zero = nn.constant dense<0.0> : tensor<f32>
  %false = nn.constant dense<false> : tensor<i1>
  %true = nn.constant dense<true> : tensor<i1>
  %mask = nn.constant dense<[[[[0xFF800000, 0xFF800000], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x1x2x8xf32> -> tensor<1x1x8x2xf32>
  %s = nn.matmul %q, %kt : (tensor<1x1x2x8xf32>, tensor<1x1x8x2xf32>) -> tensor<1x1x2x2xf32>
  %sm = nn.add %s, %mask : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %p = nn.softmax %sm {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %eq = nn.equal %p, %p : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xi1>
  %nan = nn.where %eq, %false, %true : (tensor<1x1x2x2xi1>, tensor<i1>, tensor<i1>) -> tensor<1x1x2x2xi1>
  %g = nn.where %nan, %zero, %p : (tensor<1x1x2x2xi1>, tensor<f32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %o = nn.matmul %g, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// GPT-2 (transformers 4.5x): Where(causal, s / 4, min) + padding, padding
// 0 or min. One select mask: causal and padding == 0 (here padding hides
// key 0 of batch row 1 from queries 1 and up).
// CHECK-LABEL: func.func @gpt2_two_masks
// CHECK: %[[M:.*]] = nn.constant dense<{{\[\[\[\[}}true, false, false], [true, true, false], [true, true, true]]], {{\[\[\[}}true, false, false], [false, true, false], [false, true, true]]]]> : tensor<2x1x3x3xi1>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 2.500000e-01 : f32}
func.func @gpt2_two_masks(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x3x8xf32>, %v: tensor<2x1x3x8xf32>) -> tensor<2x1x3x8xf32> {
  %four = nn.constant dense<4.0> : tensor<f32>
  %min = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %causal = nn.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %padding = nn.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38], [-3.40282347E+38, 0.0, -3.40282347E+38], [-3.40282347E+38, 0.0, 0.0]]]]> : tensor<2x1x3x3xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x1x3x8xf32> -> tensor<2x1x8x3xf32>
  %s = nn.matmul %q, %kt : (tensor<2x1x3x8xf32>, tensor<2x1x8x3xf32>) -> tensor<2x1x3x3xf32>
  %sd = nn.div %s, %four : (tensor<2x1x3x3xf32>, tensor<f32>) -> tensor<2x1x3x3xf32>
  %w = nn.where %causal, %sd, %min : (tensor<1x1x3x3xi1>, tensor<2x1x3x3xf32>, tensor<f32>) -> tensor<2x1x3x3xf32>
  %a = nn.add %w, %padding : (tensor<2x1x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x1x3x3xf32>
  %p = nn.softmax %a {axis = 3 : i64} : tensor<2x1x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x1x3x3xf32>, tensor<2x1x3x8xf32>) -> tensor<2x1x3x8xf32>
  return %o : tensor<2x1x3x8xf32>
}
