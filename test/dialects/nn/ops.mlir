// Every nn op prints in a form that parses back to the same op: the custom
// form is printed, re-parsed and printed again, and the generic form is
// parsed back into the custom one.
// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

// Dots are allowed in a bare symbol name; other ONNX punctuation is quoted.
// CHECK: nn.parameter @transformer.wte.weight : tensor<256x64xf32>{{$}}
nn.parameter @"transformer.wte.weight" : tensor<256x64xf32>
// CHECK: nn.parameter @"onnx::MatMul_123" : tensor<64x64xf16>{{$}}
nn.parameter @"onnx::MatMul_123" : tensor<64x64xf16>
// CHECK: nn.parameter @lm_head.weight {external_file = "model.onnx.data", external_length = 65536 : i64, external_offset = 0 : i64} : tensor<256x64xf32>
nn.parameter @"lm_head.weight" {external_file = "model.onnx.data", external_offset = 0 : i64, external_length = 65536 : i64} : tensor<256x64xf32>
// CHECK: nn.parameter @mask : tensor<16x16xi1>{{$}}
nn.parameter @mask : tensor<16x16xi1>
// A tied weight with its copies, a frozen buffer, an untied initializer.
// CHECK: nn.parameter @wte {tied_copies = [{equal = true, name = "onnx::MatMul_592", reason = "equal transposed, bit for bit", transposed = true}]} : tensor<256x64xf32>{{$}}
nn.parameter @wte {tied_copies = [{name = "onnx::MatMul_592", transposed = true, equal = true, reason = "equal transposed, bit for bit"}]} : tensor<256x64xf32>
// CHECK: nn.parameter @inv_freq {frozen = "a buffer"} : tensor<8xf32>{{$}}
nn.parameter @inv_freq {frozen = "a buffer"} : tensor<8xf32>
// CHECK: nn.parameter @head {untied = "equals 'wte'"} : tensor<256x64xf32>{{$}}
nn.parameter @head {untied = "equals 'wte'"} : tensor<256x64xf32>

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<f32>, tensor<2xi64>, tensor<2x2xf32>) {
  // CHECK: %[[EPS:.*]] = nn.constant dense<9.99999974E-6> : tensor<f32>
  %eps = nn.constant dense<9.99999974E-6> : tensor<f32>
  // CHECK: %[[SHAPE:.*]] = nn.constant dense<[2, 16]> : tensor<2xi64>
  %shape = nn.constant dense<[2, 16]> : tensor<2xi64>
  // CHECK: %[[TABLE:.*]] = nn.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  %table = nn.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  // CHECK: return %[[EPS]], %[[SHAPE]], %[[TABLE]]
  return %eps, %shape, %table : tensor<f32>, tensor<2xi64>, tensor<2x2xf32>
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[I:.*]]: tensor<4xi32>)
func.func @unary(%x: tensor<2x16x64xf32>, %i: tensor<4xi32>) {
  // CHECK: %[[NEG:.*]] = nn.neg %[[X]] : tensor<2x16x64xf32>
  %neg = nn.neg %x : tensor<2x16x64xf32>
  // CHECK: nn.neg %[[I]] : tensor<4xi32>
  %ineg = nn.neg %i : tensor<4xi32>
  // CHECK: %[[ABS:.*]] = nn.abs %[[NEG]] : tensor<2x16x64xf32>
  %abs = nn.abs %neg : tensor<2x16x64xf32>
  // CHECK: %[[SQRT:.*]] = nn.sqrt %[[ABS]] : tensor<2x16x64xf32>
  %sqrt = nn.sqrt %abs : tensor<2x16x64xf32>
  // CHECK: %[[RECIP:.*]] = nn.reciprocal %[[SQRT]] : tensor<2x16x64xf32>
  %recip = nn.reciprocal %sqrt : tensor<2x16x64xf32>
  // CHECK: %[[EXP:.*]] = nn.exp %[[RECIP]] : tensor<2x16x64xf32>
  %exp = nn.exp %recip : tensor<2x16x64xf32>
  // CHECK: %[[LOG:.*]] = nn.log %[[EXP]] : tensor<2x16x64xf32>
  %log = nn.log %exp : tensor<2x16x64xf32>
  // CHECK: %[[ERF:.*]] = nn.erf %[[LOG]] : tensor<2x16x64xf32>
  %erf = nn.erf %log : tensor<2x16x64xf32>
  // CHECK: %[[TANH:.*]] = nn.tanh %[[ERF]] : tensor<2x16x64xf32>
  %tanh = nn.tanh %erf : tensor<2x16x64xf32>
  // CHECK: %[[SIGMOID:.*]] = nn.sigmoid %[[TANH]] : tensor<2x16x64xf32>
  %sigmoid = nn.sigmoid %tanh : tensor<2x16x64xf32>
  // CHECK: %[[RELU:.*]] = nn.relu %[[SIGMOID]] : tensor<2x16x64xf32>
  %relu = nn.relu %sigmoid : tensor<2x16x64xf32>
  // CHECK: %[[COS:.*]] = nn.cos %[[RELU]] : tensor<2x16x64xf32>
  %cos = nn.cos %relu : tensor<2x16x64xf32>
  // CHECK: %[[SIN:.*]] = nn.sin %[[COS]] : tensor<2x16x64xf32>
  %sin = nn.sin %cos : tensor<2x16x64xf32>
  // CHECK: nn.silu %[[SIN]] : tensor<2x16x64xf32>
  %silu = nn.silu %sin : tensor<2x16x64xf32>
  return
}

// The default `approximate = "none"` is not printed.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x256xf32>)
func.func @gelu(%x: tensor<2x16x256xf32>) {
  // CHECK: nn.gelu %[[X]] : tensor<2x16x256xf32>
  %exact = nn.gelu %x : tensor<2x16x256xf32>
  // CHECK: nn.gelu %[[X]] : tensor<2x16x256xf32>
  %none = nn.gelu %x {approximate = "none"} : tensor<2x16x256xf32>
  // CHECK: nn.gelu %[[X]] {approximate = "tanh"} : tensor<2x16x256xf32>
  %tanh = nn.gelu %x {approximate = "tanh"} : tensor<2x16x256xf32>
  return
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[Y:.*]]: tensor<64xf32>, %[[S:.*]]: tensor<f32>, %[[I:.*]]: tensor<2x1xi64>, %[[J:.*]]: tensor<3xi64>)
func.func @binary(%x: tensor<2x16x64xf32>, %y: tensor<64xf32>, %s: tensor<f32>,
                  %i: tensor<2x1xi64>, %j: tensor<3xi64>) {
  // CHECK: nn.add %[[X]], %[[Y]] : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %add = nn.add %x, %y : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: nn.sub %[[Y]], %[[X]] : (tensor<64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %sub = nn.sub %y, %x : (tensor<64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK: nn.mul %[[X]], %[[S]] : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %mul = nn.mul %x, %s : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  // CHECK: nn.div %[[I]], %[[J]] : (tensor<2x1xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %div = nn.div %i, %j : (tensor<2x1xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  // CHECK: nn.pow %[[X]], %[[S]] : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %pow = nn.pow %x, %s : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  // CHECK: nn.max %[[S]], %[[S]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %max = nn.max %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: nn.min %[[X]], %[[X]] : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %min = nn.min %x, %x : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// CHECK-LABEL: func.func @compare_and_select
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16x16xf32>, %[[S:.*]]: tensor<f32>, %[[I:.*]]: tensor<16x1xi64>, %[[J:.*]]: tensor<16xi64>)
func.func @compare_and_select(%x: tensor<2x4x16x16xf32>, %s: tensor<f32>,
                              %i: tensor<16x1xi64>, %j: tensor<16xi64>) {
  // CHECK: %[[EQ:.*]] = nn.equal %[[I]], %[[J]] : (tensor<16x1xi64>, tensor<16xi64>) -> tensor<16x16xi1>
  %eq = nn.equal %i, %j : (tensor<16x1xi64>, tensor<16xi64>) -> tensor<16x16xi1>
  // CHECK: nn.less %[[J]], %[[I]] : (tensor<16xi64>, tensor<16x1xi64>) -> tensor<16x16xi1>
  %lt = nn.less %j, %i : (tensor<16xi64>, tensor<16x1xi64>) -> tensor<16x16xi1>
  // CHECK: nn.greater %[[X]], %[[S]] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xi1>
  %gt = nn.greater %x, %s : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xi1>
  // CHECK: nn.where %[[EQ]], %[[X]], %[[S]] : (tensor<16x16xi1>, tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %r = nn.where %eq, %x, %s : (tensor<16x16xi1>, tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  return
}

// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[M:.*]]: tensor<2x16xi1>)
func.func @cast(%mask: tensor<2x16xi1>) {
  // CHECK: %[[F:.*]] = nn.cast %[[M]] : tensor<2x16xi1> -> tensor<2x16xf32>
  %f = nn.cast %mask : tensor<2x16xi1> -> tensor<2x16xf32>
  // CHECK: nn.cast %[[F]] : tensor<2x16xf32> -> tensor<2x16xi64>
  %i = nn.cast %f : tensor<2x16xf32> -> tensor<2x16xi64>
  return
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

// bf16 operands: the product accumulates in f32 and the result (and bias)
// may be f32, or bf16 itself.
// CHECK-LABEL: func.func @matmul_bf16
func.func @matmul_bf16(%x: tensor<2x16x64xbf16>, %w: tensor<256x64xbf16>,
                       %b: tensor<256xf32>) {
  // CHECK: nn.matmul %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>, tensor<256xf32>) -> tensor<2x16x256xf32>
  %y = nn.matmul %x, %w, %b {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>, tensor<256xf32>) -> tensor<2x16x256xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>) -> tensor<2x16x256xbf16>
  %z = nn.matmul %x, %w {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>) -> tensor<2x16x256xbf16>
  return
}

// The default `transpose_rhs = false` is not printed.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[W:.*]]: tensor<64x256xf32>, %[[B:.*]]: tensor<256xf32>, %[[WT:.*]]: tensor<256x64xf32>, %[[V:.*]]: tensor<64xf32>)
func.func @matmul(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>,
                  %b: tensor<256xf32>, %wt: tensor<256x64xf32>,
                  %v: tensor<64xf32>) {
  // CHECK: nn.matmul %[[X]], %[[W]] : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %y = nn.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  // CHECK: nn.matmul %[[X]], %[[W]], %[[B]] : (tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  %yb = nn.matmul %x, %w, %b : (tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  // CHECK: nn.matmul %[[X]], %[[WT]], %[[B]] {transpose_rhs = true} : (tensor<2x16x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  %yt = nn.matmul %x, %wt, %b {transpose_rhs = true} : (tensor<2x16x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  // CHECK: nn.matmul %[[X]], %[[W]] : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %yf = nn.matmul %x, %w {transpose_rhs = false} : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  // Rank-1 operands: the promoted unit dimension is dropped again.
  // CHECK: nn.matmul %[[X]], %[[V]] : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16xf32>
  %xv = nn.matmul %x, %v : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16xf32>
  // CHECK: nn.matmul %[[V]], %[[W]] : (tensor<64xf32>, tensor<64x256xf32>) -> tensor<256xf32>
  %vw = nn.matmul %v, %w : (tensor<64xf32>, tensor<64x256xf32>) -> tensor<256xf32>
  // CHECK: nn.matmul %[[V]], %[[V]] : (tensor<64xf32>, tensor<64xf32>) -> tensor<f32>
  %dot = nn.matmul %v, %v : (tensor<64xf32>, tensor<64xf32>) -> tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x4x16xf32>, %[[KV:.*]]: tensor<2x2x1x16x16xf32>, %[[QKV:.*]]: tensor<2x16x192xf32>)
func.func @data_movement(%x: tensor<2x16x4x16xf32>, %kv: tensor<2x2x1x16x16xf32>,
                         %qkv: tensor<2x16x192xf32>) {
  // CHECK: nn.transpose %[[X]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  %t = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  // CHECK: nn.reshape %[[X]] : tensor<2x16x4x16xf32> -> tensor<32x64xf32>
  %r = nn.reshape %x : tensor<2x16x4x16xf32> -> tensor<32x64xf32>
  // CHECK: nn.expand %[[KV]] : tensor<2x2x1x16x16xf32> -> tensor<2x2x2x16x16xf32>
  %e = nn.expand %kv : tensor<2x2x1x16x16xf32> -> tensor<2x2x2x16x16xf32>
  // CHECK: %[[Q:.*]] = nn.slice %[[QKV]] {starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  %q = nn.slice %qkv {starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  // A negative step reads backwards from the start.
  // CHECK: %[[REV:.*]] = nn.slice %[[QKV]] {starts = array<i64: 1, 15, 191>, steps = array<i64: -1, -2, -3>} : tensor<2x16x192xf32> -> tensor<2x8x64xf32>
  %rev = nn.slice %qkv {starts = array<i64: 1, 15, 191>, steps = array<i64: -1, -2, -3>} : tensor<2x16x192xf32> -> tensor<2x8x64xf32>
  // CHECK: nn.concat %[[Q]], %[[REV]] {axis = 1 : i64} : (tensor<2x16x64xf32>, tensor<2x8x64xf32>) -> tensor<2x24x64xf32>
  %c = nn.concat %q, %rev {axis = 1 : i64} : (tensor<2x16x64xf32>, tensor<2x8x64xf32>) -> tensor<2x24x64xf32>
  // CHECK: nn.concat %[[Q]] {axis = 0 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %c1 = nn.concat %q {axis = 0 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// CHECK-LABEL: func.func @gather_and_embedding
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[IDX:.*]]: tensor<2xi64>, %[[WTE:.*]]: tensor<256x64xf32>, %[[IDS:.*]]: tensor<2x16xi32>)
func.func @gather_and_embedding(%x: tensor<2x16x64xf32>, %idx: tensor<2xi64>,
                                %wte: tensor<256x64xf32>, %ids: tensor<2x16xi32>) {
  // CHECK: nn.gather %[[X]], %[[IDX]] {axis = 1 : i64} : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<2x2x64xf32>
  %g = nn.gather %x, %idx {axis = 1 : i64} : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<2x2x64xf32>
  // CHECK: nn.gather %[[WTE]], %[[IDS]] {axis = 0 : i64} : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  %g0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  // CHECK: nn.embedding %[[WTE]], %[[IDS]] : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  %h = nn.embedding %wte, %ids : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  return
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[I:.*]]: tensor<4x8xi64>)
func.func @reductions(%x: tensor<2x16x64xf32>, %i: tensor<4x8xi64>) {
  // CHECK: nn.reduce_mean %[[X]] {axes = array<i64: 2>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  %mean = nn.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  // CHECK: nn.reduce_sum %[[X]] {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x16x64xf32> -> tensor<16xf32>
  %sum = nn.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x16x64xf32> -> tensor<16xf32>
  // CHECK: nn.reduce_max %[[I]] {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xi64> -> tensor<i64>
  %max = nn.reduce_max %i {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xi64> -> tensor<i64>
  return
}

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16x16xf32>)
func.func @softmax(%scores: tensor<2x4x16x16xf32>) {
  // CHECK: nn.softmax %[[X]] {axis = 3 : i64} : tensor<2x4x16x16xf32>
  %p = nn.softmax %scores {axis = 3 : i64} : tensor<2x4x16x16xf32>
  return
}

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[G2:.*]]: tensor<16x64xf32>)
func.func @layer_norm(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>,
                      %b: tensor<64xf32>, %g2: tensor<16x64xf32>) {
  // CHECK: nn.layer_norm %[[X]] weight %[[G]] bias %[[B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %wb = nn.layer_norm %x weight %g bias %b {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: nn.layer_norm %[[X]] weight %[[G]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %w = nn.layer_norm %x weight %g {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // The bias alone is told from the weight alone by its keyword.
  // CHECK: nn.layer_norm %[[X]] bias %[[B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %bo = nn.layer_norm %x bias %b {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: nn.layer_norm %[[X]] {axis = 0 : i64, epsilon = 5.000000e-01 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %none = nn.layer_norm %x {axis = 0 : i64, epsilon = 0.5 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK: nn.layer_norm %[[X]] weight %[[G2]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  %two = nn.layer_norm %x weight %g2 {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[G:.*]]: tensor<64xf32>)
func.func @rms_norm(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // CHECK: nn.rms_norm %[[X]] weight %[[G]] {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %w = nn.rms_norm %x weight %g {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: nn.rms_norm %[[X]] {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %n = nn.rms_norm %x {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// The default `mask_kind = "additive"` is not printed.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[K:.*]]: tensor<2x4x32x8xf32>, %[[V:.*]]: tensor<2x4x32x16xf32>, %[[SEL:.*]]: tensor<1x1x16x32xi1>, %[[ADD:.*]]: tensor<2x1x16x32xf32>)
func.func @attention(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>,
                     %v: tensor<2x4x32x16xf32>, %sel: tensor<1x1x16x32xi1>,
                     %add: tensor<2x1x16x32xf32>) {
  // CHECK: nn.attention %[[Q]], %[[K]], %[[V]] mask %[[SEL]] {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>, tensor<1x1x16x32xi1>) -> tensor<2x4x16x16xf32>
  %s = nn.attention %q, %k, %v mask %sel {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>, tensor<1x1x16x32xi1>) -> tensor<2x4x16x16xf32>
  // CHECK: nn.attention %[[Q]], %[[K]], %[[V]] mask %[[ADD]] {scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>, tensor<2x1x16x32xf32>) -> tensor<2x4x16x16xf32>
  %a = nn.attention %q, %k, %v mask %add {mask_kind = "additive", scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>, tensor<2x1x16x32xf32>) -> tensor<2x4x16x16xf32>
  // CHECK: nn.attention %[[Q]], %[[K]], %[[V]] {scale = 1.000000e+00 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x16x16xf32>
  %n = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x16x16xf32>
  return
}

// No leading dimensions: a single head of [S, D].
// CHECK-LABEL: func.func @attention_one_head
// CHECK-SAME: (%[[Q:.*]]: tensor<16x8xf16>, %[[M:.*]]: tensor<16xf16>)
func.func @attention_one_head(%q: tensor<16x8xf16>, %m: tensor<16xf16>) {
  // CHECK: nn.attention %[[Q]], %[[Q]], %[[Q]] mask %[[M]] {scale = 5.000000e-01 : f32} : (tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<16x8xf16>
  %o = nn.attention %q, %q, %q mask %m {scale = 0.5 : f32} : (tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<16x8xf16>
  return
}

//===----------------------------------------------------------------------===//
// Loss and backward ops (their math: dialects/nn/NNOps.td)
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @loss_and_backward
func.func @loss_and_backward(%logits: tensor<2x8x16xf32>, %targets: tensor<2x8xi64>,
                             %ids32: tensor<2x8xi32>, %dloss: tensor<f32>,
                             %x: tensor<2x8x64xf32>, %w: tensor<64xf32>,
                             %q: tensor<2x4x8x16xf32>, %kv: tensor<2x4x6x16xf32>,
                             %m: tensor<1x1x8x6xi1>, %idx: tensor<8xi64>) {
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  %l = nn.cross_entropy %logits, %targets {ignore_index = -100 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  %l0 = nn.cross_entropy %logits, %ids32 {ignore_index = 0 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  // CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
  %dl = nn.cross_entropy_grad %logits, %targets, %dloss : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
  // CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
  %de = nn.embedding_grad %x, %targets : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
  // CHECK: nn.gather_grad %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x8x64xf32>, tensor<8xi64>) -> tensor<2x5x64xf32>
  %dg = nn.gather_grad %x, %idx {axis = 1 : i64} : (tensor<2x8x64xf32>, tensor<8xi64>) -> tensor<2x5x64xf32>
  // CHECK: nn.slice_grad %{{.*}} {starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  %ds = nn.slice_grad %x {starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  // CHECK: nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %dx, %dw, %db = nn.layer_norm_grad %x, %x, %w {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
  // CHECK: nn.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  %rx, %rw = nn.rms_norm_grad %x, %x, %w {epsilon = 9.99999997E-7 : f32} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  // CHECK: nn.softmax_grad %{{.*}}, %{{.*}} {axis = 2 : i64} : tensor<2x8x64xf32>
  %sx = nn.softmax_grad %x, %x {axis = 2 : i64} : tensor<2x8x64xf32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<1x1x8x6xi1>) -> (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>)
  %dq, %dk, %dv = nn.attention_grad %q, %q, %kv, %kv mask %m {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<1x1x8x6xi1>) -> (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>)
  // CHECK: nn.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<2x8x64xf32>
  %gx = nn.gelu_grad %x, %x {approximate = "tanh"} : tensor<2x8x64xf32>
  return
}
