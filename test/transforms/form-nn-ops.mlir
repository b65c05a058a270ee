// RUN: zcc-opt %s -split-input-file -zplan-form-nn-ops | FileCheck %s

// The opset < 17 LayerNorm chain, then `* weight + bias`.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.layer_norm %[[X]] weight %[[W]] bias %[[B]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %two = nn.constant dense<2.0> : tensor<f32>
  %eps = nn.constant dense<9.99999974E-6> : tensor<f32>
  %mean = nn.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %d = nn.sub %x, %mean : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %sq = nn.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %var = nn.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %ve = nn.add %var, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = nn.sqrt %ve : tensor<2x1xf32>
  %n = nn.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %m = nn.mul %n, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = nn.add %m, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Statistics over a leading axis are not a layer norm over trailing dims.
// CHECK-LABEL: func.func @not_layer_norm_leading_axis
// CHECK-NOT: nn.layer_norm
// CHECK: nn.div
func.func @not_layer_norm_leading_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = nn.constant dense<2.0> : tensor<f32>
  %eps = nn.constant dense<1.0E-5> : tensor<f32>
  %mean = nn.reduce_mean %x {axes = array<i64: 0>, keepdims = true} : tensor<2x8xf32> -> tensor<1x8xf32>
  %d = nn.sub %x, %mean : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %sq = nn.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %var = nn.reduce_mean %sq {axes = array<i64: 0>, keepdims = true} : tensor<2x8xf32> -> tensor<1x8xf32>
  %ve = nn.add %var, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = nn.sqrt %ve : tensor<1x8xf32>
  %n = nn.div %d, %s : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// Llama's RMSNorm: weight * (x * 1/sqrt(mean(x^2) + eps)), as exported
// (Div(1, Sqrt) for rsqrt), weight on the left.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.rms_norm %[[X]] weight %[[W]] {epsilon = 9.99999997E-7 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = nn.constant dense<2.0> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %eps = nn.constant dense<9.99999997E-7> : tensor<f32>
  %sq = nn.pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %ms = nn.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %me = nn.add %ms, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %r = nn.sqrt %me : tensor<2x4x1xf32>
  %inv = nn.div %one, %r : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = nn.mul %x, %inv : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = nn.mul %w, %n : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// The x / sqrt(...) spelling, without a weight.
// CHECK-LABEL: func.func @rms_norm_div
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.rms_norm %[[X]] {epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_div(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = nn.constant dense<9.99999974E-6> : tensor<f32>
  %sq = nn.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = nn.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %me = nn.add %eps, %ms : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = nn.sqrt %me : tensor<4x1xf32>
  %y = nn.div %x, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A weight of the wrong shape stays a separate multiply.
// CHECK-LABEL: func.func @rms_norm_weight_shape
// CHECK: %[[N:.*]] = nn.rms_norm %{{.*}} {epsilon
// CHECK: nn.mul %[[N]], %{{.*}} : (tensor<4x8xf32>, tensor<4x1xf32>)
func.func @rms_norm_weight_shape(%x: tensor<4x8xf32>, %w: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %eps = nn.constant dense<9.99999974E-6> : tensor<f32>
  %sq = nn.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = nn.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %me = nn.add %eps, %ms : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = nn.sqrt %me : tensor<4x1xf32>
  %n = nn.div %x, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = nn.mul %n, %w : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Exact GELU as torch exports it: (x * (erf(x / 1.4142135) + 1)) * 0.5.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-SAME: (%[[X:.*]]: tensor<2x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %[[X]] : tensor<2x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_erf(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %sqrt2 = nn.constant dense<1.41421354> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %d = nn.div %x, %sqrt2 : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %e = nn.erf %d : tensor<2x16xf32>
  %a = nn.add %e, %one : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %m = nn.mul %x, %a : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %y = nn.mul %m, %half : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// The other association, 0.5 * x first, and x * 0.70710678 inside erf.
// CHECK-LABEL: func.func @gelu_erf_reassociated
// CHECK: nn.gelu %{{.*}} : tensor<2x16xf32>
// CHECK-NOT: nn.erf
func.func @gelu_erf_reassociated(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %rsqrt2 = nn.constant dense<0.707106769> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %hx = nn.mul %half, %x : (tensor<f32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %d = nn.mul %x, %rsqrt2 : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %e = nn.erf %d : tensor<2x16xf32>
  %a = nn.add %one, %e : (tensor<f32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %y = nn.mul %hx, %a : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// A wrong constant inside erf is not GELU.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: nn.gelu
// CHECK: nn.erf
func.func @not_gelu(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %c = nn.constant dense<1.5> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %d = nn.div %x, %c : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %e = nn.erf %d : tensor<2x16xf32>
  %a = nn.add %e, %one : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %m = nn.mul %x, %a : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %y = nn.mul %m, %half : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-SAME: (%[[X:.*]]: tensor<2x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %[[X]] {approximate = "tanh"} : tensor<2x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %half = nn.constant dense<0.5> : tensor<f32>
  %three = nn.constant dense<3.0> : tensor<f32>
  %k = nn.constant dense<4.471500e-02> : tensor<f32>
  %c = nn.constant dense<0.797884583> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %hx = nn.mul %half, %x : (tensor<f32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %cube = nn.pow %x, %three : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %kc = nn.mul %k, %cube : (tensor<f32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %s = nn.add %x, %kc : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %arg = nn.mul %c, %s : (tensor<f32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %t = nn.tanh %arg : tensor<2x16xf32>
  %a = nn.add %one, %t : (tensor<f32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %y = nn.mul %hx, %a : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<2x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.silu %[[X]] : tensor<2x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @silu(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %s = nn.sigmoid %x : tensor<2x16xf32>
  %y = nn.mul %x, %s : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// sigmoid(y) * x with y != x is not SiLU.
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: nn.silu
func.func @not_silu(%x: tensor<2x16xf32>, %y: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %s = nn.sigmoid %y : tensor<2x16xf32>
  %z = nn.mul %x, %s : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  return %z : tensor<2x16xf32>
}

// -----

// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[T:.*]]: tensor<256x64xf32>, %[[I:.*]]: tensor<2x16xi64>)
// CHECK-NEXT: nn.embedding %[[T]], %[[I]] : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
func.func @embedding(%t: tensor<256x64xf32>, %ids: tensor<2x16xi64>) -> tensor<2x16x64xf32> {
  %e = nn.gather %t, %ids {axis = 0 : i64} : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  return %e : tensor<2x16x64xf32>
}

// -----

// A gather along another axis is not a lookup.
// CHECK-LABEL: func.func @gather_axis1
// CHECK: nn.gather
// CHECK-NOT: nn.embedding
func.func @gather_axis1(%t: tensor<4x64xf32>, %ids: tensor<2xi64>) -> tensor<4x2xf32> {
  %e = nn.gather %t, %ids {axis = 1 : i64} : (tensor<4x64xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return %e : tensor<4x2xf32>
}

// -----

// Linear: matmul(x, transpose(W)) + b reads W in place and adds b in the op.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[W:.*]]: tensor<32x64xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.matmul %[[X]], %[[W]], %[[B]] {transpose_rhs = true} : (tensor<2x16x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear(%x: tensor<2x16x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %m = nn.matmul %x, %wt : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
  %y = nn.add %b, %m : (tensor<32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// A matrix-shaped addend is a residual, not a bias; a transpose that moves
// batch dimensions is not Gemm's transB.
// CHECK-LABEL: func.func @not_linear
// CHECK: nn.transpose
// CHECK: %[[M:.*]] = nn.matmul %{{.*}}, %{{.*}} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: nn.add %[[M]]
func.func @not_linear(%x: tensor<2x4x4xf32>, %w: tensor<4x2x4xf32>, %r: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %wt = nn.transpose %w {perm = array<i64: 1, 0, 2>} : tensor<4x2x4xf32> -> tensor<2x4x4xf32>
  %m = nn.matmul %x, %wt : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = nn.add %m, %r : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// GPT-2's eager attention: keys transposed straight from [B, S, H, D], a
// constant divisor, and a boolean causal mask through Where.
// CHECK-LABEL: func.func @attention_select
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[KS:.*]]: tensor<2x16x4x8xf32>, %[[V:.*]]: tensor<2x4x16x8xf32>, %[[M:.*]]: tensor<1x1x16x16xi1>)
// CHECK: %[[K:.*]] = nn.transpose %[[KS]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
// CHECK-NEXT: %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 0.353553385 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_select(%q: tensor<2x4x16x8xf32>, %ks: tensor<2x16x4x8xf32>, %v: tensor<2x4x16x8xf32>, %mask: tensor<1x1x16x16xi1>) -> tensor<2x4x16x8xf32> {
  %c = nn.constant dense<2.82842708> : tensor<f32>
  %min = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %kt = nn.transpose %ks {perm = array<i64: 0, 2, 3, 1>} : tensor<2x16x4x8xf32> -> tensor<2x4x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %d = nn.div %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %w = nn.where %mask, %d, %min : (tensor<1x1x16x16xi1>, tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %p = nn.softmax %w {axis = 3 : i64} : tensor<2x4x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}

// -----

// Llama's: keys transposed on their last two dims, an additive float mask.
// CHECK-LABEL: func.func @attention_additive
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[K:.*]]: tensor<2x4x16x8xf32>, %[[V:.*]]: tensor<2x4x16x8xf32>, %[[M:.*]]: tensor<2x1x16x16xf32>)
// CHECK-NEXT: %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {scale = 0.353553385 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_additive(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %mask: tensor<2x1x16x16xf32>) -> tensor<2x4x16x8xf32> {
  %c = nn.constant dense<2.82842708> : tensor<f32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %d = nn.div %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %a = nn.add %d, %mask : (tensor<2x4x16x16xf32>, tensor<2x1x16x16xf32>) -> tensor<2x4x16x16xf32>
  %p = nn.softmax %a {axis = 3 : i64} : tensor<2x4x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}

// -----

// OPT clamps the masked scores with Max before the softmax: not recognised,
// the chain stays primitive (and still runs).
// CHECK-LABEL: func.func @attention_clamped
// CHECK-NOT: nn.attention
// CHECK: nn.max
// CHECK: nn.softmax
func.func @attention_clamped(%q: tensor<8x16x8xf32>, %k: tensor<8x16x8xf32>, %v: tensor<8x16x8xf32>, %mask: tensor<8x16x16xf32>) -> tensor<8x16x8xf32> {
  %min = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %kt = nn.transpose %k {perm = array<i64: 0, 2, 1>} : tensor<8x16x8xf32> -> tensor<8x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<8x16x16xf32>
  %a = nn.add %s, %mask : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %c = nn.max %a, %min : (tensor<8x16x16xf32>, tensor<f32>) -> tensor<8x16x16xf32>
  %p = nn.softmax %c {axis = 2 : i64} : tensor<8x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<8x16x16xf32>, tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
  return %o : tensor<8x16x8xf32>
}

// -----

// Grouped-query keys that are not expanded do not fit nn.attention.
// CHECK-LABEL: func.func @attention_unexpanded_gqa
// CHECK-NOT: nn.attention
func.func @attention_unexpanded_gqa(%q: tensor<2x4x16x8xf32>, %k: tensor<2x1x16x8xf32>, %v: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x1x16x8xf32> -> tensor<2x1x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x16x16xf32>
  %p = nn.softmax %s {axis = 3 : i64} : tensor<2x4x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}
