// Every refusal of zplan-cached-attention names the op (its ONNX node) and
// why: a plain mask that is not causal or not a constant, keys that are not
// [B, H, S, D] through reshapes, a plain @decode without positions, an
// attention_mask still used, programs with different layers.
// RUN: not zcc-opt %s -split-input-file -zplan-cached-attention=max-seq-len=8 2>&1 | FileCheck %s

// CHECK: error: {{(loc.*: )?}}nn.attention (ONNX node '/h.0/attn/MatMul_1'): its mask is not causal (query 0, key 1 is visible)
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %q: tensor<1x1x2x4xf32>) -> (tensor<1x2x4xf32> {nn.name = "logits"}) {
  %mask = nn.constant dense<true> : tensor<1x1x2x2xi1>
  %o = nn.attention %q, %q, %q mask %mask {mask_kind = "select", masked_value = -1.0e+9 : f32, scale = 0.5 : f32} : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x2xi1>) -> tensor<1x1x2x4xf32> loc("/h.0/attn/MatMul_1")
  %logits = nn.reshape %o : tensor<1x1x2x4xf32> -> tensor<1x2x4xf32>
  return %logits : tensor<1x2x4xf32>
}

// -----

// An additive mask: 0 where visible, at most -1e4 elsewhere.
// CHECK: error: {{(loc.*: )?}}nn.attention: its mask is not causal (query 0, key 1 is visible)
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %q: tensor<1x1x2x4xf32>) -> (tensor<1x2x4xf32> {nn.name = "logits"}) {
  %mask = nn.constant dense<[[0.0, -1.0], [0.0, 0.0]]> : tensor<2x2xf32>
  %o = nn.attention %q, %q, %q mask %mask {scale = 0.5 : f32} : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<2x2xf32>) -> tensor<1x1x2x4xf32>
  %logits = nn.reshape %o : tensor<1x1x2x4xf32> -> tensor<1x2x4xf32>
  return %logits : tensor<1x2x4xf32>
}

// -----

// CHECK: error: {{(loc.*: )?}}nn.attention: its mask is computed at run time; a plain export's attention mask must be the causal constant
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %q: tensor<1x1x2x4xf32>, %mask: tensor<2x2xf32>) -> (tensor<1x2x4xf32> {nn.name = "logits"}) {
  %o = nn.attention %q, %q, %q mask %mask {scale = 0.5 : f32} : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<2x2xf32>) -> tensor<1x1x2x4xf32>
  %logits = nn.reshape %o : tensor<1x1x2x4xf32> -> tensor<1x2x4xf32>
  return %logits : tensor<1x2x4xf32>
}

// -----

// Keys of 3 positions for 2 query tokens are not this step's keys.
// CHECK: error: {{(loc.*: )?}}nn.attention: its keys [1, 1, 3, 4] do not come from a [batch 1, heads, tokens 2, head_dim] tensor through reshapes and expands
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %q: tensor<1x1x2x4xf32>, %k: tensor<1x1x3x4xf32>) -> (tensor<1x2x4xf32> {nn.name = "logits"}) {
  %o = nn.attention %q, %k, %k {scale = 0.5 : f32} : (tensor<1x1x2x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x2x4xf32>
  %logits = nn.reshape %o : tensor<1x1x2x4xf32> -> tensor<1x2x4xf32>
  return %logits : tensor<1x2x4xf32>
}

// -----

// CHECK: error: {{(loc.*: )?}}@decode has no 'positions' input: a plain export's decode must go through zplan-decode-positions first
func.func @decode(%ids: tensor<1x1xi64> {nn.name = "input_ids"}, %q: tensor<1x1x1x4xf32>) -> (tensor<1x1x4xf32> {nn.name = "logits"}) {
  %o = nn.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xf32>
  %logits = nn.reshape %o : tensor<1x1x1x4xf32> -> tensor<1x1x4xf32>
  return %logits : tensor<1x1x4xf32>
}

// -----

// CHECK: error: {{(loc.*: )?}}@prefill has 0 attentions but @decode has 1; they must be the same layers
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %l: tensor<1x2x4xf32>) -> (tensor<1x2x4xf32> {nn.name = "logits"}) {
  return %l : tensor<1x2x4xf32>
}
func.func @decode(%ids: tensor<1x1xi64> {nn.name = "input_ids"}, %q: tensor<1x1x1x4xf32>, %pos: tensor<1x1xi64> {nn.name = "positions"}) -> (tensor<1x1x4xf32> {nn.name = "logits"}) {
  %o = nn.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xf32>
  %logits = nn.reshape %o : tensor<1x1x1x4xf32> -> tensor<1x1x4xf32>
  return %logits : tensor<1x1x4xf32>
}

// -----

// A cache export whose attention_mask also feeds something else than the
// attention (here the logits) cannot drop it.
// CHECK: error: {{(loc.*: )?}}input 'attention_mask' of @decode is still used by nn.cast (ONNX node 'Cast_7') after the KV cache replaced the attention masks
func.func @decode(%ids: tensor<1x1xi64> {nn.name = "input_ids"}, %mask: tensor<1x8xi64> {nn.name = "attention_mask"}, %pos: tensor<1x1xi64> {nn.name = "position_ids"}, %pk: tensor<1x1x7x4xf32> {nn.name = "past_key_values.0.key"}, %q: tensor<1x1x1x4xf32>, %k: tensor<1x1x1x4xf32>) -> (tensor<1x1x4xf32> {nn.name = "logits"}) {
  %kc = nn.concat %pk, %k {axis = 2 : i64} : (tensor<1x1x7x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x1x8x4xf32>
  %o = nn.attention %q, %kc, %kc {scale = 0.5 : f32} : (tensor<1x1x1x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<1x1x1x4xf32>
  %f = nn.cast %mask : tensor<1x8xi64> -> tensor<1x8xf32> loc("Cast_7")
  %fs = nn.slice %f {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<1x8xf32> -> tensor<1x4xf32>
  %fr = nn.reshape %fs : tensor<1x4xf32> -> tensor<1x1x4xf32>
  %r = nn.reshape %o : tensor<1x1x1x4xf32> -> tensor<1x1x4xf32>
  %logits = nn.add %r, %fr : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  return %logits : tensor<1x1x4xf32>
}

// -----

// The cache length of a cache export is past + new; max-seq-len must agree.
// CHECK: error: {{(loc.*: )?}}nn.concat makes 4 cache slots, but the cache length is 8
func.func @decode(%ids: tensor<1x1xi64> {nn.name = "input_ids"}, %pos: tensor<1x1xi64> {nn.name = "position_ids"}, %pk: tensor<1x1x3x4xf32> {nn.name = "past_key_values.0.key"}, %q: tensor<1x1x1x4xf32>, %k: tensor<1x1x1x4xf32>) -> (tensor<1x1x4xf32> {nn.name = "logits"}) {
  %kc = nn.concat %pk, %k {axis = 2 : i64} : (tensor<1x1x3x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x1x4x4xf32>
  %o = nn.attention %q, %kc, %kc {scale = 0.5 : f32} : (tensor<1x1x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x1x4xf32>
  %r = nn.reshape %o : tensor<1x1x1x4xf32> -> tensor<1x1x4xf32>
  return %r : tensor<1x1x4xf32>
}

// -----

// A primitive chain's mask is checked like a formed attention's: this one
// hides key 0 from query 1.
// CHECK: error: {{(loc.*: )?}}nn.matmul (ONNX node 'bmm_1'): its mask is not causal (query 1, key 0 is hidden)
func.func @prefill(%ids: tensor<1x2xi64> {nn.name = "input_ids"}, %q: tensor<1x2x2x4xf32>) -> (tensor<1x2x8xf32> {nn.name = "logits"}) {
  %mask = nn.constant dense<[[[[0.0, -3.40282347E+38], [-3.40282347E+38, 0.0]]]]> : tensor<1x1x2x2xf32>
  %q3 = nn.reshape %q : tensor<1x2x2x4xf32> -> tensor<2x2x4xf32>
  %s3 = nn.matmul %q3, %q3 {transpose_rhs = true} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x2xf32>
  %s4 = nn.reshape %s3 : tensor<2x2x2xf32> -> tensor<1x2x2x2xf32>
  %m = nn.add %s4, %mask : (tensor<1x2x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32>
  %c3 = nn.reshape %m : tensor<1x2x2x2xf32> -> tensor<2x2x2xf32>
  %p = nn.softmax %c3 {axis = 2 : i64} : tensor<2x2x2xf32>
  %o3 = nn.matmul %p, %q3 : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32> loc("bmm_1")
  %o = nn.reshape %o3 : tensor<2x2x4xf32> -> tensor<1x2x2x4xf32>
  %logits = nn.reshape %o : tensor<1x2x2x4xf32> -> tensor<1x2x8xf32>
  return %logits : tensor<1x2x8xf32>
}
