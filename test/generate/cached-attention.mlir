// zplan-cached-attention on small hand-written modules: a plain export's
// @prefill (grouped-query keys, a causal select mask) and @decode (one
// position, no mask) share the cache symbols; a cache export's concat with
// its past input becomes the append; the bindings of docs/generation.md section 1.
// RUN: zcc-opt %s -split-input-file -zplan-cached-attention=max-seq-len=8 | FileCheck %s

// The plain export, B = 2, P = 4, L = 8, 2 query heads over 1 key head.
// CHECK-DAG: nn.kv_cache @cache.0.key : tensor<2x1x8x4xf32>
// CHECK-DAG: nn.kv_cache @cache.0.value : tensor<2x1x8x4xf32>
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<2x4xi64> {nn.name = "input_ids"}
// CHECK-SAME: %[[HEAD:[^:]*]]: tensor<6x8xf32>
// CHECK-SAME: %[[POS:[^:]*]]: tensor<2x4xi64> {nn.name = "positions"}
// CHECK-SAME: %[[LAST:[^:]*]]: tensor<2xi64> {nn.name = "last_index"}
// CHECK-SAME: -> (tensor<2x6xf32> {nn.name = "logits"})
// The keys are appended where they are [B, Hkv, S, D]; the repeat runs on
// the whole cache.
// CHECK: %[[KC:.*]] = nn.cache_append @cache.0.key, %[[K:.*]], %[[POS]] : (tensor<2x1x4x4xf32>, tensor<2x4xi64>) -> tensor<2x1x8x4xf32>
// CHECK: %[[K5:.*]] = nn.reshape %[[KC]] : tensor<2x1x8x4xf32> -> tensor<2x1x1x8x4xf32>
// CHECK: %[[KE:.*]] = nn.expand %[[K5]] : tensor<2x1x1x8x4xf32> -> tensor<2x1x2x8x4xf32>
// CHECK: %[[KR:.*]] = nn.reshape %[[KE]] : tensor<2x1x2x8x4xf32> -> tensor<2x2x8x4xf32>
// CHECK: %[[VC:.*]] = nn.cache_append @cache.0.value, %{{.*}}, %[[POS]] : (tensor<2x1x4x4xf32>, tensor<2x4xi64>) -> tensor<2x1x8x4xf32>
// CHECK: %[[VR:.*]] = nn.reshape %{{.*}} : tensor<2x1x2x8x4xf32> -> tensor<2x2x8x4xf32>
// CHECK: %[[O:.*]] = nn.cached_attention %{{.*}}, %[[KR]], %[[VR]], %[[POS]] {scale = 5.000000e-01 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x4xi64>) -> tensor<2x2x4x4xf32>
// CHECK-NOT: nn.attention
// Row b's last position is row b * 4 + last_index[b] of the [8, H] rows;
// the LM head runs on those 2 rows only, not on all 8 positions.
// CHECK: %[[STARTS:.*]] = nn.constant dense<[0, 4]> : tensor<2xi64>
// CHECK: %[[INDEX:.*]] = nn.add %[[LAST]], %[[STARTS]]
// CHECK: %[[ROWS:.*]] = nn.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[HIDDEN:.*]] = nn.gather %[[ROWS]], %[[INDEX]] {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK: %[[SELECTED:.*]] = nn.matmul %[[HIDDEN]], %[[HEAD]] {transpose_rhs = true} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
// CHECK-NOT: nn.matmul
// CHECK: return %[[SELECTED]]
func.func @prefill(%ids: tensor<2x4xi64> {nn.name = "input_ids"}, %q: tensor<2x2x4x4xf32>, %k: tensor<2x1x4x4xf32>, %v: tensor<2x1x4x4xf32>, %head: tensor<6x8xf32>) -> (tensor<2x4x6xf32> {nn.name = "logits"}) {
  %k5 = nn.reshape %k : tensor<2x1x4x4xf32> -> tensor<2x1x1x4x4xf32>
  %ke = nn.expand %k5 : tensor<2x1x1x4x4xf32> -> tensor<2x1x2x4x4xf32>
  %kr = nn.reshape %ke : tensor<2x1x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %v5 = nn.reshape %v : tensor<2x1x4x4xf32> -> tensor<2x1x1x4x4xf32>
  %ve = nn.expand %v5 : tensor<2x1x1x4x4xf32> -> tensor<2x1x2x4x4xf32>
  %vr = nn.reshape %ve : tensor<2x1x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %mask = nn.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %o = nn.attention %q, %kr, %vr mask %mask {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 0.5 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1x1x4x4xi1>) -> tensor<2x2x4x4xf32>
  %t = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %hidden = nn.reshape %t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %logits = nn.matmul %hidden, %head {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  return %logits : tensor<2x4x6xf32>
}

// @decode after zplan-decode-positions: one position per row, no mask; the
// same layer's cache symbols, and [B, V] logits.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: %[[POS:[^:]*]]: tensor<2x1xi64> {nn.name = "positions"}
// CHECK-SAME: -> (tensor<2x8xf32> {nn.name = "logits"})
// CHECK: %[[KC:.*]] = nn.cache_append @cache.0.key, %{{.*}}, %[[POS]] : (tensor<2x1x1x4xf32>, tensor<2x1xi64>) -> tensor<2x1x8x4xf32>
// CHECK: nn.expand %{{.*}} : tensor<2x1x1x8x4xf32> -> tensor<2x1x2x8x4xf32>
// CHECK: nn.cache_append @cache.0.value
// CHECK: nn.cached_attention %{{.*}}, %{{.*}}, %{{.*}}, %[[POS]] {scale = 5.000000e-01 : f32} : (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x1xi64>) -> tensor<2x2x1x4xf32>
// CHECK: %[[LOGITS:.*]] = nn.reshape %{{.*}} : tensor<2x1x8xf32> -> tensor<2x8xf32>
// CHECK: return %[[LOGITS]]
func.func @decode(%ids: tensor<2x1xi64> {nn.name = "input_ids"}, %q: tensor<2x2x1x4xf32>, %k: tensor<2x1x1x4xf32>, %v: tensor<2x1x1x4xf32>, %pos: tensor<2x1xi64> {nn.name = "positions"}) -> (tensor<2x1x8xf32> {nn.name = "logits"}) {
  %k5 = nn.reshape %k : tensor<2x1x1x4xf32> -> tensor<2x1x1x1x4xf32>
  %ke = nn.expand %k5 : tensor<2x1x1x1x4xf32> -> tensor<2x1x2x1x4xf32>
  %kr = nn.reshape %ke : tensor<2x1x2x1x4xf32> -> tensor<2x2x1x4xf32>
  %v5 = nn.reshape %v : tensor<2x1x1x4xf32> -> tensor<2x1x1x1x4xf32>
  %ve = nn.expand %v5 : tensor<2x1x1x1x4xf32> -> tensor<2x1x2x1x4xf32>
  %vr = nn.reshape %ve : tensor<2x1x2x1x4xf32> -> tensor<2x2x1x4xf32>
  %o = nn.attention %q, %kr, %vr {scale = 0.5 : f32} : (tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x1x4xf32>
  %t = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x1x4xf32> -> tensor<2x1x2x4xf32>
  %logits = nn.reshape %t : tensor<2x1x2x4xf32> -> tensor<2x1x8xf32>
  return %logits : tensor<2x1x8xf32>
}

// -----

// A cache export's @decode (past 7 + 1 new = L = 8): the concat with the
// past input is the append; present.*, past_key_values.* and
// attention_mask go; position_ids is the positions input; an additive
// run-time mask is dropped.
// CHECK: nn.kv_cache @cache.0.key : tensor<2x2x8x4xf32>
// CHECK: nn.kv_cache @cache.0.value : tensor<2x2x8x4xf32>
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{[^:]*}}: tensor<2x1xi64> {nn.name = "input_ids"}, %[[POS:[^:]*]]: tensor<2x1xi64> {nn.name = "positions"}, %[[Q:[^:]*]]: tensor<2x2x1x4xf32>, %[[K:[^:]*]]: tensor<2x2x1x4xf32>, %[[V:[^:]*]]: tensor<2x2x1x4xf32>)
// CHECK-SAME: -> (tensor<2x8xf32> {nn.name = "logits"})
// CHECK: %[[KC:.*]] = nn.cache_append @cache.0.key, %[[K]], %[[POS]] : (tensor<2x2x1x4xf32>, tensor<2x1xi64>) -> tensor<2x2x8x4xf32>
// CHECK: %[[VC:.*]] = nn.cache_append @cache.0.value, %[[V]], %[[POS]]
// CHECK: nn.cached_attention %[[Q]], %[[KC]], %[[VC]], %[[POS]] {scale = 5.000000e-01 : f32}
// CHECK-NOT: nn.cast
// CHECK: return
func.func @decode(%ids: tensor<2x1xi64> {nn.name = "input_ids"}, %mask: tensor<2x8xi64> {nn.name = "attention_mask"}, %pos: tensor<2x1xi64> {nn.name = "position_ids"}, %pk: tensor<2x2x7x4xf32> {nn.name = "past_key_values.0.key"}, %pv: tensor<2x2x7x4xf32> {nn.name = "past_key_values.0.value"}, %q: tensor<2x2x1x4xf32>, %k: tensor<2x2x1x4xf32>, %v: tensor<2x2x1x4xf32>) -> (tensor<2x1x8xf32> {nn.name = "logits"}, tensor<2x2x8x4xf32> {nn.name = "present.0.key"}, tensor<2x2x8x4xf32> {nn.name = "present.0.value"}) {
  %kc = nn.concat %pk, %k {axis = 2 : i64} : (tensor<2x2x7x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x8x4xf32>
  %vc = nn.concat %pv, %v {axis = 2 : i64} : (tensor<2x2x7x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x8x4xf32>
  %f = nn.cast %mask : tensor<2x8xi64> -> tensor<2x8xf32>
  %m = nn.reshape %f : tensor<2x8xf32> -> tensor<2x1x1x8xf32>
  %o = nn.attention %q, %kc, %vc mask %m {scale = 0.5 : f32} : (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x1x1x8xf32>) -> tensor<2x2x1x4xf32>
  %t = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x1x4xf32> -> tensor<2x1x2x4xf32>
  %logits = nn.reshape %t : tensor<2x1x2x4xf32> -> tensor<2x1x8xf32>
  return %logits, %kc, %vc : tensor<2x1x8xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>
}

// -----

// A chain zplan-form-nn-ops leaves primitive (OPT: heads merged into the
// batch of the products, pre-scaled queries, the additive causal mask, a
// clamp at the lowest float) is formed and rewired like any attention.
// CHECK: nn.kv_cache @cache.0.key : tensor<1x2x8x4xf32>
// CHECK-LABEL: func.func @prefill
// CHECK: %[[K:.*]] = nn.cache_append @cache.0.key, %{{.*}}, %[[POS:[^ ]*]] : (tensor<1x2x2x4xf32>, tensor<1x2xi64>) -> tensor<1x2x8x4xf32>
// CHECK: %[[V:.*]] = nn.cache_append @cache.0.value
// CHECK: %[[O:.*]] = nn.cached_attention %{{.*}}, %[[K]], %[[V]], %[[POS]] {scale = 1.000000e+00 : f32} : (tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x2x4xf32>
// CHECK-NOT: nn.softmax
// CHECK-NOT: nn.max
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %q: tensor<1x2x2x4xf32>, %k: tensor<1x2x2x4xf32>, %v: tensor<1x2x2x4xf32>) -> (tensor<1x2x8xf32> {nn.name = "logits"}) {
  %mask = nn.constant dense<[[[[0.0, -3.40282347E+38], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  %lowest = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %q3 = nn.reshape %q : tensor<1x2x2x4xf32> -> tensor<2x2x4xf32>
  %k3 = nn.reshape %k : tensor<1x2x2x4xf32> -> tensor<2x2x4xf32>
  %v3 = nn.reshape %v : tensor<1x2x2x4xf32> -> tensor<2x2x4xf32>
  %s3 = nn.matmul %q3, %k3 {transpose_rhs = true} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x2xf32>
  %s4 = nn.reshape %s3 : tensor<2x2x2xf32> -> tensor<1x2x2x2xf32>
  %m = nn.add %s4, %mask : (tensor<1x2x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32>
  %c = nn.max %m, %lowest : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %c3 = nn.reshape %c : tensor<1x2x2x2xf32> -> tensor<2x2x2xf32>
  %p = nn.softmax %c3 {axis = 2 : i64} : tensor<2x2x2xf32>
  %o3 = nn.matmul %p, %v3 : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o = nn.reshape %o3 : tensor<2x2x4xf32> -> tensor<1x2x2x4xf32>
  %t = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x2x4xf32> -> tensor<1x2x2x4xf32>
  %logits = nn.reshape %t : tensor<1x2x2x4xf32> -> tensor<1x2x8xf32>
  return %logits : tensor<1x2x8xf32>
}
