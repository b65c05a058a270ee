// zplan-decode-positions refuses what it cannot prove row-wise, naming the
// op, the input or the mask entry (the ONNX node: decode-positions-node.mlir).
// RUN: zcc-opt %s -split-input-file -zplan-decode-positions -verify-diagnostics

// A mask that shows a later key is not causal: dropping it would change the
// model.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<1x2xi64> {nn.name = "input_ids"}) -> (tensor<1x1x2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<1x2xi64>) -> tensor<1x2x2xf32>
  %q = nn.reshape %h : tensor<1x2x2xf32> -> tensor<1x1x2x2xf32>
  %mask = nn.constant dense<true> : tensor<1x1x2x2xi1>
  // expected-error @+1 {{zplan-decode-positions: the mask of nn.attention is not causal: at query 0, key 1 it shows the key}}
  %o = nn.attention %q, %q, %q mask %mask {mask_kind = "select", masked_value = -1.0e4 : f32, scale = 1.0 : f32} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xi1>) -> tensor<1x1x2x2xf32>
  return %o : tensor<1x1x2x2xf32>
}

// -----

// An additive mask must add 0 where visible and a large negative number
// elsewhere; -1 is a bias.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<1x2xi64> {nn.name = "input_ids"}) -> (tensor<1x1x2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<1x2xi64>) -> tensor<1x2x2xf32>
  %q = nn.reshape %h : tensor<1x2x2xf32> -> tensor<1x1x2x2xf32>
  %mask = nn.constant dense<[[[[0.0, -1.0], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  // expected-error @+1 {{is not causal: at query 0, key 1 it hides the key}}
  %o = nn.attention %q, %q, %q mask %mask {scale = 1.0 : f32} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %o : tensor<1x1x2x2xf32>
}

// -----

// Without a mask every token sees the whole sequence: not a causal LM.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<1x2xi64> {nn.name = "input_ids"}) -> (tensor<1x1x2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<1x2xi64>) -> tensor<1x2x2xf32>
  %q = nn.reshape %h : tensor<1x2x2xf32> -> tensor<1x1x2x2xf32>
  // expected-error @+1 {{nn.attention has no mask: only a causal attention can be decoded one token at a time}}
  %o = nn.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %o : tensor<1x1x2x2xf32>
}

// -----

// A reduction over the tokens mixes positions.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<2x3xi64> {nn.name = "input_ids"}) -> (tensor<2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<2x3xi64>) -> tensor<2x3x2xf32>
  // expected-error @+1 {{zplan-decode-positions: cannot follow the token axis through nn.reduce_mean: it reduces over the token axis}}
  %m = nn.reduce_mean %h {axes = array<i64: 1>, keepdims = false} : tensor<2x3x2xf32> -> tensor<2x2xf32>
  return %m : tensor<2x2xf32>
}

// -----

// A reshape that splits the token axis over two dimensions.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x2x2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<2x4xi64>) -> tensor<2x4x2xf32>
  // expected-error @+1 {{cannot follow the token axis through nn.reshape: the reshape splits the token axis}}
  %r = nn.reshape %h : tensor<2x4x2xf32> -> tensor<2x2x2x2xf32>
  return %r : tensor<2x2x2x2xf32>
}

// -----

// A slice of the tokens (the last position, say) is not one row per token.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x1x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<2x4xi64>) -> tensor<2x4x2xf32>
  // expected-error @+1 {{cannot follow the token axis through nn.slice: it slices the token axis}}
  %s = nn.slice %h {starts = array<i64: 0, 3, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x4x2xf32> -> tensor<2x1x2xf32>
  return %s : tensor<2x1x2xf32>
}

// -----

// A table meeting the tokens with an extent other than 1 or L.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<8x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<2x4xi64>) -> tensor<2x4x2xf32>
  %f = nn.reshape %h : tensor<2x4x2xf32> -> tensor<8x2xf32>
  %t = nn.constant dense<1.0> : tensor<8x2xf32>
  // expected-error @+1 {{cannot follow the token axis through nn.add: the operand nn.constant meets the token axis with extent 8 (not 1 or 4)}}
  %a = nn.add %f, %t : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  return %a : tensor<8x2xf32>
}

// -----

// A plain causal LM takes input_ids only.
nn.parameter @wte : tensor<16x2xf32>
// expected-error @+1 {{zplan-decode-positions: @decode has input 'attention_mask' besides input_ids}}
func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}, %mask: tensor<2x4xi64> {nn.name = "attention_mask"}) -> (tensor<2x4xi64> {nn.name = "out"}) {
  return %ids : tensor<2x4xi64>
}

// -----

// expected-error @+1 {{zplan-decode-positions: the module has no @decode function}}
module {
  func.func @forward() {
    return
  }
}

// -----

// A product over the token axis (hᵀ h, a Gram matrix of the sequence) mixes
// tokens: it cannot be computed one token at a time.
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<1x2xi64> {nn.name = "input_ids"}) -> (tensor<1x2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<1x2xi64>) -> tensor<1x2x2xf32>
  %ht = nn.transpose %h {perm = array<i64: 0, 2, 1>} : tensor<1x2x2xf32> -> tensor<1x2x2xf32>
  // expected-error @+1 {{it contracts over the token axis}}
  %g = nn.matmul %ht, %h : (tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  return %g : tensor<1x2x2xf32>
}
