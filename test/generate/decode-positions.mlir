// zplan-decode-positions on hand-written IR: every token-indexed value keeps
// one row per sequence (extent L = 4 becomes 1), position tables are
// gathered at `positions` and placed on the batch axis, causal masks are
// dropped. Extents equal to L on other axes (head_dim 4 here) stay.
// RUN: zcc-opt %s -split-input-file -zplan-decode-positions | FileCheck %s

// GPT-2-like: learned positions from a constant id table (the gather goes
// into the ids, then the embedding looks up B rows), batch and sequence
// merged for the QKV matmul, heads split and transposed, select mask.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x1xi64> {nn.name = "input_ids"}, %[[POSITIONS:.*]]: tensor<2x1xi64> {nn.name = "positions"}) -> (tensor<2x1x16xf32> {nn.name = "logits"})
// CHECK-NEXT: %[[P:.*]] = nn.reshape %[[POSITIONS]] : tensor<2x1xi64> -> tensor<2xi64>
// CHECK: %[[WTE:.*]] = zero.gather_wait %{{.*}} : tensor<16x8xf32>
// CHECK: %[[WPE:.*]] = zero.gather_wait %{{.*}} : tensor<4x8xf32>
// CHECK: %[[TOK:.*]] = nn.embedding %[[WTE]], %[[IDS]] : (tensor<16x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[PID:.*]] = nn.constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-NEXT: %[[G:.*]] = nn.gather %[[PID]], %[[P]] {axis = 1 : i64} : (tensor<1x4xi64>, tensor<2xi64>) -> tensor<1x2xi64>
// CHECK-NEXT: %[[ROWS:.*]] = nn.transpose %[[G]] {perm = array<i64: 1, 0>} : tensor<1x2xi64> -> tensor<2x1xi64>
// CHECK-NEXT: %[[POS:.*]] = nn.embedding %[[WPE]], %[[ROWS]] : (tensor<4x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[H:.*]] = nn.add %[[TOK]], %[[POS]] : (tensor<2x1x8xf32>, tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[N:.*]] = nn.layer_norm %[[H]] {axis = 2 : i64, {{.*}}} : (tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[FLAT:.*]] = nn.reshape %[[N]] : tensor<2x1x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[QKV:.*]] = nn.matmul %[[FLAT]], %{{.*}} : (tensor<2x8xf32>, tensor<8x24xf32>) -> tensor<2x24xf32>
// CHECK-NEXT: %[[QKV3:.*]] = nn.reshape %[[QKV]] : tensor<2x24xf32> -> tensor<2x1x24xf32>
// CHECK-NEXT: nn.slice %[[QKV3]] {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x1x24xf32> -> tensor<2x1x8xf32>
// CHECK: %[[Q:.*]] = nn.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
// CHECK: %[[K:.*]] = nn.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
// CHECK: %[[V:.*]] = nn.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
// CHECK-NEXT: %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] {scale = 5.000000e-01 : f32} : (tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK-NEXT: nn.transpose %[[O]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x1x4xf32> -> tensor<2x1x2x4xf32>
// CHECK: %[[LOGITS:.*]] = nn.matmul %{{.*}}, %[[WTE]] {transpose_rhs = true} : (tensor<2x1x8xf32>, tensor<16x8xf32>) -> tensor<2x1x16xf32>
// CHECK-NEXT: return %[[LOGITS]] : tensor<2x1x16xf32>
// The full-length mask and position embedding are gone.
// CHECK-NOT: tensor<1x1x4x4xi1>
// CHECK-NOT: tensor<1x4x8xf32>
nn.parameter @wte : tensor<16x8xf32>
nn.parameter @wpe : tensor<4x8xf32>
nn.parameter @wqkv : tensor<8x24xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x16xf32> {nn.name = "logits"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x8xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x8xf32>
  %s1 = zero.shard @wpe : !zero.shard<tensor<4x8xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<4x8xf32>>
  %wpe = zero.gather_wait %t1 : tensor<4x8xf32>
  %s2 = zero.shard @wqkv : !zero.shard<tensor<8x24xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<8x24xf32>>
  %wqkv = zero.gather_wait %t2 : tensor<8x24xf32>
  %tok = nn.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %pid = nn.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %pos = nn.embedding %wpe, %pid : (tensor<4x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %h = nn.add %tok, %pos : (tensor<2x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  %n = nn.layer_norm %h {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %flat = nn.reshape %n : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %qkv = nn.matmul %flat, %wqkv : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
  %qkv3 = nn.reshape %qkv : tensor<8x24xf32> -> tensor<2x4x24xf32>
  %q = nn.slice %qkv3 {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %k = nn.slice %qkv3 {starts = array<i64: 0, 0, 8>, steps = array<i64: 1, 1, 1>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %v = nn.slice %qkv3 {starts = array<i64: 0, 0, 16>, steps = array<i64: 1, 1, 1>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %q4 = nn.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = nn.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k4 = nn.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %kt = nn.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %v4 = nn.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %vt = nn.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %mask = nn.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %o = nn.attention %qt, %kt, %vt mask %mask {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 5.000000e-01 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1x1x4x4xi1>) -> tensor<2x2x4x4xf32>
  %ot = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %o3 = nn.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %r = nn.add %h, %o3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = nn.matmul %r, %wte {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %logits : tensor<2x4x16xf32>
}

// -----

// Llama-like: a rotary table [1, 1, L, 2] shared by query and key (gathered
// once), grouped-query keys repeated by reshape/expand/reshape, an additive
// causal mask expanded over the batch, and a table that differs per
// sequence [B, 1, L, 1] (picked at row b * L + positions[b]).
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x1xi64> {nn.name = "input_ids"}, %[[POSITIONS:.*]]: tensor<2x1xi64> {nn.name = "positions"}) -> (tensor<2x2x1x2xf32> {nn.name = "out"})
// CHECK-NEXT: %[[P:.*]] = nn.reshape %[[POSITIONS]] : tensor<2x1xi64> -> tensor<2xi64>
// CHECK: %[[H:.*]] = nn.embedding %{{.*}}, %[[IDS]] : (tensor<16x4xf32>, tensor<2x1xi64>) -> tensor<2x1x4xf32>
// CHECK: %[[QT:.*]] = nn.transpose %{{.*}} -> tensor<2x2x1x2xf32>
// CHECK-NEXT: %[[COS:.*]] = nn.constant dense<{{.*}}> : tensor<1x1x4x2xf32>
// CHECK-NEXT: %[[CG:.*]] = nn.gather %[[COS]], %[[P]] {axis = 2 : i64} : (tensor<1x1x4x2xf32>, tensor<2xi64>) -> tensor<1x1x2x2xf32>
// CHECK-NEXT: %[[CROWS:.*]] = nn.transpose %[[CG]] {perm = array<i64: 2, 1, 0, 3>} : tensor<1x1x2x2xf32> -> tensor<2x1x1x2xf32>
// CHECK-NEXT: %[[QC:.*]] = nn.mul %[[QT]], %[[CROWS]] : (tensor<2x2x1x2xf32>, tensor<2x1x1x2xf32>) -> tensor<2x2x1x2xf32>
// CHECK: nn.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x1x2xf32> -> tensor<2x1x1x2xf32>
// CHECK-NEXT: %[[KC:.*]] = nn.mul %{{.*}}, %[[CROWS]] : (tensor<2x1x1x2xf32>, tensor<2x1x1x2xf32>) -> tensor<2x1x1x2xf32>
// CHECK-NEXT: %[[K5:.*]] = nn.reshape %[[KC]] : tensor<2x1x1x2xf32> -> tensor<2x1x1x1x2xf32>
// CHECK-NEXT: %[[KX:.*]] = nn.expand %[[K5]] : tensor<2x1x1x1x2xf32> -> tensor<2x1x2x1x2xf32>
// CHECK-NEXT: %[[K:.*]] = nn.reshape %[[KX]] : tensor<2x1x2x1x2xf32> -> tensor<2x2x1x2xf32>
// CHECK-NEXT: %[[O:.*]] = nn.attention %[[QC]], %[[K]], %[[K]] {scale = 0.699999988 : f32} : (tensor<2x2x1x2xf32>, tensor<2x2x1x2xf32>, tensor<2x2x1x2xf32>) -> tensor<2x2x1x2xf32>
// CHECK-NEXT: %[[TABLE:.*]] = nn.constant dense<{{.*}}> : tensor<2x1x4x1xf32>
// CHECK-NEXT: %[[MOVED:.*]] = nn.transpose %[[TABLE]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x4x1xf32> -> tensor<2x4x1x1xf32>
// CHECK-NEXT: %[[FLAT:.*]] = nn.reshape %[[MOVED]] : tensor<2x4x1x1xf32> -> tensor<8x1x1xf32>
// CHECK-NEXT: %[[OFFSETS:.*]] = nn.constant dense<[0, 4]> : tensor<2xi64>
// CHECK-NEXT: %[[INDEX:.*]] = nn.add %[[P]], %[[OFFSETS]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[PICKED:.*]] = nn.gather %[[FLAT]], %[[INDEX]] {axis = 0 : i64} : (tensor<8x1x1xf32>, tensor<2xi64>) -> tensor<2x1x1xf32>
// CHECK-NEXT: %[[ROWS:.*]] = nn.reshape %[[PICKED]] : tensor<2x1x1xf32> -> tensor<2x1x1x1xf32>
// CHECK-NEXT: %[[BACK:.*]] = nn.transpose %[[ROWS]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x1x1xf32> -> tensor<2x1x1x1xf32>
// CHECK-NEXT: %[[OUT:.*]] = nn.add %[[O]], %[[BACK]] : (tensor<2x2x1x2xf32>, tensor<2x1x1x1xf32>) -> tensor<2x2x1x2xf32>
// CHECK-NEXT: return %[[OUT]]
// CHECK-NOT: tensor<1x1x4x4xf32>
nn.parameter @wte : tensor<16x4xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x2x4x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x4xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x4xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x4xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
  %q4 = nn.reshape %h : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
  %qt = nn.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
  %cos = nn.constant dense<[[[[0.0, 0.5], [1.0, 1.5], [2.0, 2.5], [3.0, 3.5]]]]> : tensor<1x1x4x2xf32>
  %qc = nn.mul %qt, %cos : (tensor<2x2x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<2x2x4x2xf32>
  %k = nn.slice %h {starts = array<i64: 0, 0, 2>, steps = array<i64: 1, 1, 1>} : tensor<2x4x4xf32> -> tensor<2x4x2xf32>
  %k4 = nn.reshape %k : tensor<2x4x2xf32> -> tensor<2x4x1x2xf32>
  %kt = nn.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x1x2xf32> -> tensor<2x1x4x2xf32>
  %kc = nn.mul %kt, %cos : (tensor<2x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<2x1x4x2xf32>
  %k5 = nn.reshape %kc : tensor<2x1x4x2xf32> -> tensor<2x1x1x4x2xf32>
  %kx = nn.expand %k5 : tensor<2x1x1x4x2xf32> -> tensor<2x1x2x4x2xf32>
  %kr = nn.reshape %kx : tensor<2x1x2x4x2xf32> -> tensor<2x2x4x2xf32>
  %mask = nn.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %maskx = nn.expand %mask : tensor<1x1x4x4xf32> -> tensor<2x1x4x4xf32>
  %o = nn.attention %qc, %kr, %kr mask %maskx {scale = 0.7 : f32} : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x2xf32>
  %table = nn.constant dense<[[[[0.0], [1.0], [2.0], [3.0]]], [[[10.0], [11.0], [12.0], [13.0]]]]> : tensor<2x1x4x1xf32>
  %out = nn.add %o, %table : (tensor<2x2x4x2xf32>, tensor<2x1x4x1xf32>) -> tensor<2x2x4x2xf32>
  return %out : tensor<2x2x4x2xf32>
}

// -----

// Batch 1: a table's rows need no move to the batch axis.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{.*}}: tensor<1x1xi64> {nn.name = "input_ids"}, %[[POSITIONS:.*]]: tensor<1x1xi64> {nn.name = "positions"})
// CHECK-NEXT: %[[P:.*]] = nn.reshape %[[POSITIONS]] : tensor<1x1xi64> -> tensor<1xi64>
// CHECK: %[[TABLE:.*]] = nn.reshape %{{.*}} : tensor<4x3xf32> -> tensor<1x4x3xf32>
// CHECK-NEXT: %[[ROWS:.*]] = nn.gather %[[TABLE]], %[[P]] {axis = 2 : i64} : (tensor<1x4x3xf32>, tensor<1xi64>) -> tensor<1x4x1xf32>
// CHECK-NEXT: nn.add %{{.*}}, %[[ROWS]] : (tensor<1x1x1xf32>, tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
nn.parameter @wte : tensor<16x1xf32>
func.func @decode(%ids: tensor<1x3xi64> {nn.name = "input_ids"}) -> (tensor<1x4x3xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x1xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x1xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x1xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x1xf32>, tensor<1x3xi64>) -> tensor<1x3x1xf32>
  %ht = nn.transpose %h {perm = array<i64: 0, 2, 1>} : tensor<1x3x1xf32> -> tensor<1x1x3xf32>
  %table = nn.constant dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]> : tensor<4x3xf32>
  %out = nn.add %ht, %table : (tensor<1x1x3xf32>, tensor<4x3xf32>) -> tensor<1x4x3xf32>
  return %out : tensor<1x4x3xf32>
}

// -----

// OPT-like: the attention is primitive after import (heads merged into the
// batch around the matmuls, the masked scores clamped with Max, queries
// scaled before); the pass forms it first (scale 1, additive mask). The
// position ids differ per sequence in form ([B, L], +2 offset), so the ids
// are picked at row b * L + positions[b].
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x1xi64> {nn.name = "input_ids"}, %[[POSITIONS:.*]]: tensor<2x1xi64> {nn.name = "positions"}) -> (tensor<2x1x4xf32> {nn.name = "out"})
// CHECK-NEXT: %[[P:.*]] = nn.reshape %[[POSITIONS]] : tensor<2x1xi64> -> tensor<2xi64>
// CHECK: %[[WPE:.*]] = zero.gather_wait %{{.*}} : tensor<6x4xf32>
// CHECK: %[[PID:.*]] = nn.constant dense<{{\[\[}}2, 3, 4, 5], [2, 3, 4, 5]]> : tensor<2x4xi64>
// CHECK: %[[FLAT:.*]] = nn.reshape %[[PID]] : tensor<2x4xi64> -> tensor<8xi64>
// CHECK-NEXT: %[[OFFSETS:.*]] = nn.constant dense<[0, 4]> : tensor<2xi64>
// CHECK-NEXT: %[[INDEX:.*]] = nn.add %[[P]], %[[OFFSETS]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[PICKED:.*]] = nn.gather %[[FLAT]], %[[INDEX]] {axis = 0 : i64} : (tensor<8xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[ROWS:.*]] = nn.reshape %[[PICKED]] : tensor<2xi64> -> tensor<2x1xi64>
// CHECK-NEXT: %[[POS:.*]] = nn.embedding %[[WPE]], %[[ROWS]] : (tensor<6x4xf32>, tensor<2x1xi64>) -> tensor<2x1x4xf32>
// CHECK-NEXT: nn.add %{{.*}}, %[[POS]] : (tensor<2x1x4xf32>, tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
// CHECK: %[[T:.*]] = nn.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x2x2xf32> -> tensor<2x2x1x2xf32>
// CHECK-NOT: nn.max
// CHECK: %[[O:.*]] = nn.attention %[[T]], %[[T]], %[[T]] {scale = 1.000000e+00 : f32} : (tensor<2x2x1x2xf32>, tensor<2x2x1x2xf32>, tensor<2x2x1x2xf32>) -> tensor<2x2x1x2xf32>
// CHECK-NOT: nn.softmax
// CHECK: return %{{.*}} : tensor<2x1x4xf32>
nn.parameter @wte : tensor<16x4xf32>
nn.parameter @wpe : tensor<6x4xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x4xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x4xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x4xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x4xf32>
  %s1 = zero.shard @wpe : !zero.shard<tensor<6x4xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<6x4xf32>>
  %wpe = zero.gather_wait %t1 : tensor<6x4xf32>
  %min = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = nn.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %pid = nn.constant dense<[[2, 3, 4, 5], [2, 3, 4, 5]]> : tensor<2x4xi64>
  %tok = nn.embedding %wte, %ids : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
  %pos = nn.embedding %wpe, %pid : (tensor<6x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
  %h = nn.add %tok, %pos : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %r = nn.reshape %h : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
  %t = nn.transpose %r {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
  %m = nn.reshape %t : tensor<2x2x4x2xf32> -> tensor<4x4x2xf32>
  %s = nn.matmul %m, %m {transpose_rhs = true} : (tensor<4x4x2xf32>, tensor<4x4x2xf32>) -> tensor<4x4x4xf32>
  %s4 = nn.reshape %s : tensor<4x4x4xf32> -> tensor<2x2x4x4xf32>
  %a = nn.add %s4, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %c = nn.max %a, %min : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %c3 = nn.reshape %c : tensor<2x2x4x4xf32> -> tensor<4x4x4xf32>
  %p = nn.softmax %c3 {axis = 2 : i64} : tensor<4x4x4xf32>
  %o = nn.matmul %p, %m : (tensor<4x4x4xf32>, tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o4 = nn.reshape %o : tensor<4x4x2xf32> -> tensor<2x2x4x2xf32>
  %ot = nn.transpose %o4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
  %out = nn.reshape %ot : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
  return %out : tensor<2x4x4xf32>
}

// -----

// A tied LM head written as Transpose(MatMul(W, Transpose(h))): the tokens
// ride in the rhs's columns, so in the product's last dimension, and come
// back to the middle through the outer transpose. Nothing contracts them.
// CHECK-LABEL: func.func @decode
// CHECK: %[[H:.*]] = nn.embedding %{{.*}} : (tensor<16x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[HT:.*]] = nn.transpose %[[H]] {perm = array<i64: 0, 2, 1>} : tensor<2x1x8xf32> -> tensor<2x8x1xf32>
// CHECK-NEXT: %[[P:.*]] = nn.matmul %{{.*}}, %[[HT]] : (tensor<16x8xf32>, tensor<2x8x1xf32>) -> tensor<2x16x1xf32>
// CHECK-NEXT: %[[L:.*]] = nn.transpose %[[P]] {perm = array<i64: 0, 2, 1>} : tensor<2x16x1xf32> -> tensor<2x1x16xf32>
// CHECK-NEXT: return %[[L]] : tensor<2x1x16xf32>
nn.parameter @wte : tensor<16x8xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x16xf32> {nn.name = "logits"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x8xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x8xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %ht = nn.transpose %h {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %p = nn.matmul %wte, %ht : (tensor<16x8xf32>, tensor<2x8x4xf32>) -> tensor<2x16x4xf32>
  %logits = nn.transpose %p {perm = array<i64: 0, 2, 1>} : tensor<2x16x4xf32> -> tensor<2x4x16xf32>
  return %logits : tensor<2x4x16xf32>
}
