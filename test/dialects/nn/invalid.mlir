// Every error path of the nn verifiers (dialects/nn/NNOps.cpp), and the type
// constraints that keep shards and dynamic shapes out of nn ops.
// RUN: zcc-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Broadcasting (the BroadcastOperands trait of the elementwise ops)
//===----------------------------------------------------------------------===//

func.func @add_no_broadcast(%x: tensor<2x3xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'nn.add' op operand shapes do not broadcast: 2x3 and 4}}
  %r = nn.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @mul_wrong_result(%x: tensor<2x1xf32>, %y: tensor<3xf32>) {
  // expected-error @+1 {{'nn.mul' op result has shape 2x1, expected 2x3}}
  %r = nn.mul %x, %y : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @sub_scalar_result(%x: tensor<f32>, %y: tensor<f32>) {
  // expected-error @+1 {{'nn.sub' op result has shape 1, expected scalar}}
  %r = nn.sub %x, %y : (tensor<f32>, tensor<f32>) -> tensor<1xf32>
  return
}

// -----

func.func @where_condition_no_broadcast(%c: tensor<3xi1>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.where' op operand shapes do not broadcast: 3 and 2x4}}
  %r = nn.where %c, %x, %x : (tensor<3xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @add_mixed_elements(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{'nn.add' op requires the same element type for all operands}}
  %r = nn.add %x, %y : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @div_result_element(%x: tensor<4xi64>) {
  // expected-error @+1 {{'nn.div' op requires the same element type for all operands and results}}
  %r = nn.div %x, %x : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_result_not_bool(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.less' op result #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %r = nn.less %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Type constraints: no shards, no dynamic shapes, the right element types
//===----------------------------------------------------------------------===//

// -----

nn.parameter @w : tensor<4xf32>

// A shard is not a tensor: only zero.gather_wait makes one readable. The
// custom form already refuses to parse a shard type where a tensor goes.
func.func @shard_into_add(%x: tensor<4xf32>) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  // expected-error @+1 {{custom op 'nn.add' invalid kind of type specified}}
  %r = nn.add %x, %s : (tensor<4xf32>, !zero.shard<tensor<4xf32>>) -> tensor<4xf32>
  return
}

// -----

nn.parameter @w : tensor<4x4xf32>

func.func @shard_into_matmul(%x: tensor<2x4xf32>) {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{'nn.matmul' op operand #1 must be statically shaped tensor of floating-point values, but got '!zero.shard<tensor<4x4xf32>>'}}
  %r = nn.matmul %x, %s : (tensor<2x4xf32>, !zero.shard<tensor<4x4xf32>>) -> tensor<2x4xf32>
  return
}

// -----

func.func @shard_into_relu(%s: !zero.shard<tensor<4xf32>>) {
  // expected-error @+1 {{'nn.relu' op operand #0 must be statically shaped tensor of floating-point or signless integer values, but got '!zero.shard<tensor<4xf32>>'}}
  %r = "nn.relu"(%s) : (!zero.shard<tensor<4xf32>>) -> tensor<4xf32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'nn.reshape' op operand #0 must be statically shaped tensor of floating-point or signless integer values, but got 'tensor<?x4xf32>'}}
  %r = nn.reshape %x : tensor<?x4xf32> -> tensor<8xf32>
  return
}

// -----

func.func @unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{'nn.exp' op operand #0 must be statically shaped tensor of floating-point or signless integer values, but got 'tensor<*xf32>'}}
  %r = "nn.exp"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @softmax_of_integers(%x: tensor<4xi32>) {
  // expected-error @+1 {{'nn.softmax' op operand #0 must be statically shaped tensor of floating-point values, but got 'tensor<4xi32>'}}
  %r = nn.softmax %x {axis = 0 : i64} : tensor<4xi32>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<8x4xf32>, %ids: tensor<2xf32>) {
  // expected-error @+1 {{'nn.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %r = nn.embedding %t, %ids : (tensor<8x4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @where_condition_not_bool(%c: tensor<4xi32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xi32>'}}
  %r = nn.where %c, %x, %x : (tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'nn.parameter' op external_file, external_offset and external_length must be given together}}
nn.parameter @w {external_file = "model.onnx.data", external_offset = 0 : i64} : tensor<4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op external_file, external_offset and external_length must be given together}}
nn.parameter @w {external_length = 16 : i64} : tensor<4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op external_length is 32 bytes, expected 16 for 'tensor<4xf32>'}}
nn.parameter @w {external_file = "model.onnx.data", external_offset = 0 : i64, external_length = 32 : i64} : tensor<4xf32>

// -----

// An i1 element takes a whole byte in the file.
// expected-error @+1 {{'nn.parameter' op external_length is 1 bytes, expected 8 for 'tensor<8xi1>'}}
nn.parameter @mask {external_file = "model.onnx.data", external_offset = 0 : i64, external_length = 1 : i64} : tensor<8xi1>

// -----

// expected-error @+1 {{'nn.parameter' op external_length is -16 bytes, expected 16 for 'tensor<4xf32>'}}
nn.parameter @w {external_file = "model.onnx.data", external_offset = 0 : i64, external_length = -16 : i64} : tensor<4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op external_offset -8 is negative}}
nn.parameter @w {external_file = "model.onnx.data", external_offset = -8 : i64, external_length = 16 : i64} : tensor<4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of floating-point or signless integer values}}
nn.parameter @w : tensor<?xf32>

// -----

func.func @parameter_in_function() {
  // expected-error @+1 {{'nn.parameter' op expects parent op 'builtin.module'}}
  nn.parameter @w : tensor<4xf32>
  return
}

// -----

func.func @constant_type_differs() {
  // expected-error @+1 {{'nn.constant' op failed to verify that all of {value, result} have same type}}
  %c = "nn.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// -----

func.func @gelu_unknown_approximation(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.gelu' op approximate is "fast", expected "none" or "tanh"}}
  %r = nn.gelu %x {approximate = "fast"} : tensor<4xf32>
  return
}

// -----

func.func @where_value_elements_differ(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{'nn.where' op on_true, on_false and result must share one element type}}
  %r = nn.where %c, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @where_result_element_differs(%c: tensor<4xi1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.where' op on_true, on_false and result must share one element type}}
  %r = nn.where %c, %x, %x : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @cast_changes_shape(%x: tensor<2x16xi1>) {
  // expected-error @+1 {{'nn.cast' op requires the same shape for all operands and results}}
  %r = nn.cast %x : tensor<2x16xi1> -> tensor<32xf32>
  return
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_scalar_operand(%s: tensor<f32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'nn.matmul' op operands must have rank >= 1}}
  %r = nn.matmul %s, %w : (tensor<f32>, tensor<4x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_transpose_vector(%x: tensor<2x4xf32>, %v: tensor<4xf32>) {
  // expected-error @+1 {{'nn.matmul' op transpose_rhs needs rhs of rank >= 2}}
  %r = nn.matmul %x, %v {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @matmul_contraction(%x: tensor<2x16x64xf32>, %w: tensor<32x256xf32>) {
  // expected-error @+1 {{'nn.matmul' op contraction dimensions differ: lhs 2x16x64 has 64, rhs 32x256 has 32}}
  %r = nn.matmul %x, %w : (tensor<2x16x64xf32>, tensor<32x256xf32>) -> tensor<2x16x256xf32>
  return
}

// -----

// transpose_rhs contracts over the last dimension of rhs.
func.func @matmul_transposed_contraction(%x: tensor<2x64xf32>, %w: tensor<64x256xf32>) {
  // expected-error @+1 {{'nn.matmul' op contraction dimensions differ: lhs 2x64 has 64, rhs 64x256 has 256}}
  %r = nn.matmul %x, %w {transpose_rhs = true} : (tensor<2x64xf32>, tensor<64x256xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @matmul_batch(%x: tensor<2x16x64xf32>, %w: tensor<3x64x8xf32>) {
  // expected-error @+1 {{'nn.matmul' op batch dimensions do not broadcast: 2x16x64 and 3x64x8}}
  %r = nn.matmul %x, %w : (tensor<2x16x64xf32>, tensor<3x64x8xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @matmul_bias(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'nn.matmul' op bias of shape 64 does not broadcast to the product shape 2x16x256}}
  %r = nn.matmul %x, %w, %b : (tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<64xf32>) -> tensor<2x16x256xf32>
  return
}

// -----

// A bias that would grow the product is rejected too.
func.func @matmul_bias_grows(%x: tensor<16x64xf32>, %w: tensor<64x256xf32>, %b: tensor<2x1x256xf32>) {
  // expected-error @+1 {{'nn.matmul' op bias of shape 2x1x256 does not broadcast to the product shape 16x256}}
  %r = nn.matmul %x, %w, %b : (tensor<16x64xf32>, tensor<64x256xf32>, tensor<2x1x256xf32>) -> tensor<2x16x256xf32>
  return
}

// -----

func.func @matmul_result(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>) {
  // expected-error @+1 {{'nn.matmul' op result has shape 2x16x8, expected 2x16x256}}
  %r = nn.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @matmul_bias_type(%x: tensor<2x64xbf16>, %w: tensor<64x8xbf16>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{'nn.matmul' op bias element type 'bf16' differs from the result's 'f32'}}
  %r = nn.matmul %x, %w, %b : (tensor<2x64xbf16>, tensor<64x8xbf16>, tensor<8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_vector_result(%v: tensor<64xf32>) {
  // expected-error @+1 {{'nn.matmul' op result has shape 1, expected scalar}}
  %r = nn.matmul %v, %v : (tensor<64xf32>, tensor<64xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @matmul_operand_elements(%x: tensor<2x4xf32>, %w: tensor<4x4xf16>) {
  // expected-error @+1 {{'nn.matmul' op lhs and rhs element types differ: 'f32' and 'f16'}}
  %r = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

// Only bf16 operands may widen (to f32); nothing narrows.
func.func @matmul_result_element(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'nn.matmul' op result element type 'f16' is neither the operands' 'f32' nor f32 over bf16 operands}}
  %r = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf16>
  return
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

func.func @transpose_perm_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm has 2 entries, expected the input rank 3}}
  %r = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @transpose_perm_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm entry 3 is out of range for rank 3}}
  %r = nn.transpose %x {perm = array<i64: 0, 3, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  return
}

// -----

func.func @transpose_perm_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm entry -1 is out of range for rank 2}}
  %r = nn.transpose %x {perm = array<i64: -1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_perm_repeats(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm repeats dimension 1}}
  %r = nn.transpose %x {perm = array<i64: 1, 1, 0>} : tensor<2x3x4xf32> -> tensor<3x3x2xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op result has shape 2x3x4, expected 3x2x4}}
  %r = nn.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reshape' op cannot reshape 2x16x64 (2048 elements) into 32x32 (1024 elements)}}
  %r = nn.reshape %x : tensor<2x16x64xf32> -> tensor<32x32xf32>
  return
}

// -----

func.func @reshape_element(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.reshape' op requires the same element type for all operands and results}}
  %r = nn.reshape %x : tensor<4xf32> -> tensor<2x2xi32>
  return
}

// -----

func.func @expand_incompatible(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.expand' op cannot expand 2x3 to 2x4}}
  %r = nn.expand %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

// Expand only grows: the result must be the broadcast of input and result.
func.func @expand_shrinks(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.expand' op cannot expand 2x3 to 3}}
  %r = nn.expand %x : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @slice_entry_count(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'nn.slice' op starts and steps need one entry per dimension (2), got 2 and 1}}
  %r = nn.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1>} : tensor<2x16xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_rank(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'nn.slice' op result rank 1 differs from input rank 2}}
  %r = nn.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x16xf32> -> tensor<32xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'nn.slice' op step of dimension 1 is 0}}
  %r = nn.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 0>} : tensor<2x16xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_past_end(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'nn.slice' op dimension 1 reads [8, 16] with step 2, outside the input extent 16}}
  %r = nn.slice %x {starts = array<i64: 0, 8>, steps = array<i64: 1, 2>} : tensor<2x16xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @slice_start_out_of_range(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'nn.slice' op dimension 0 reads [2, 2] with step 1, outside the input extent 2}}
  %r = nn.slice %x {starts = array<i64: 2, 0>, steps = array<i64: 1, 1>} : tensor<2x16xf32> -> tensor<1x16xf32>
  return
}

// -----

func.func @slice_before_start(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'nn.slice' op dimension 1 reads [3, -1] with step -1, outside the input extent 16}}
  %r = nn.slice %x {starts = array<i64: 0, 3>, steps = array<i64: 1, -1>} : tensor<2x16xf32> -> tensor<2x5xf32>
  return
}

// -----

// SameOperandsAndResultElementType rejects this before the op's own
// "needs at least one input" check can.
func.func @concat_nothing() {
  // expected-error @+1 {{'nn.concat' op expected 1 or more operands, but found 0}}
  %r = nn.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.concat' op axis 2 is out of range for rank 2}}
  %r = nn.concat %a, %a {axis = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x8xf32>, %b: tensor<2x8x1xf32>) {
  // expected-error @+1 {{'nn.concat' op input 1 has rank 3, expected 2}}
  %r = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x8x1xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_other_dimension(%a: tensor<2x8xf32>, %b: tensor<3x8xf32>) {
  // expected-error @+1 {{'nn.concat' op input 1 of shape 3x8 differs from input 0 of shape 2x8 outside axis 1}}
  %r = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_result(%a: tensor<2x8xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.concat' op result has shape 2x16, expected 2x12}}
  %r = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<2x16xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'nn.gather' op axis -1 is out of range for rank 2}}
  %r = nn.gather %x, %i {axis = -1 : i64} : (tensor<2x16xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_element(%x: tensor<2x16xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'nn.gather' op result element type differs from data}}
  %r = nn.gather %x, %i {axis = 1 : i64} : (tensor<2x16xf32>, tensor<3xi64>) -> tensor<2x3xf16>
  return
}

// -----

func.func @gather_result(%x: tensor<2x16x64xf32>, %i: tensor<4x3xi32>) {
  // expected-error @+1 {{'nn.gather' op result has shape 2x12x64, expected 2x4x3x64}}
  %r = nn.gather %x, %i {axis = 1 : i64} : (tensor<2x16x64xf32>, tensor<4x3xi32>) -> tensor<2x12x64xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<256xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'nn.embedding' op table has shape 256, expected rank 2 (rows x width)}}
  %r = nn.embedding %t, %ids : (tensor<256xf32>, tensor<2x16xi64>) -> tensor<2x16xf32>
  return
}

// -----

func.func @embedding_element(%t: tensor<256x64xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'nn.embedding' op result element type differs from table}}
  %r = nn.embedding %t, %ids : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf16>
  return
}

// -----

func.func @embedding_result(%t: tensor<256x64xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'nn.embedding' op result has shape 2x16x256, expected 2x16x64}}
  %r = nn.embedding %t, %ids : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x256xf32>
  return
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_mean_axis(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reduce_mean' op axis 3 is out of range for rank 3}}
  %r = nn.reduce_mean %x {axes = array<i64: 3>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16x64x1xf32>
  return
}

// -----

func.func @reduce_sum_negative_axis(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op axis -1 is out of range for rank 3}}
  %r = nn.reduce_sum %x {axes = array<i64: -1>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  return
}

// -----

func.func @reduce_max_unsorted(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reduce_max' op axes must be sorted and unique}}
  %r = nn.reduce_max %x {axes = array<i64: 2, 0>, keepdims = false} : tensor<2x16x64xf32> -> tensor<16xf32>
  return
}

// -----

func.func @reduce_sum_repeated(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op axes must be sorted and unique}}
  %r = nn.reduce_sum %x {axes = array<i64: 1, 1>, keepdims = false} : tensor<2x16x64xf32> -> tensor<2x64xf32>
  return
}

// -----

func.func @reduce_mean_keepdims_result(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reduce_mean' op result has shape 2x16, expected 2x16x1}}
  %r = nn.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16xf32>
  return
}

// -----

func.func @reduce_max_result(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.reduce_max' op result has shape 2x16x1, expected 2x16}}
  %r = nn.reduce_max %x {axes = array<i64: 2>, keepdims = false} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x4x16x16xf32>) {
  // expected-error @+1 {{'nn.softmax' op axis 4 is out of range for rank 4}}
  %r = nn.softmax %x {axis = 4 : i64} : tensor<2x4x16x16xf32>
  return
}

// -----

func.func @softmax_negative_axis(%x: tensor<2x4x16x16xf32>) {
  // expected-error @+1 {{'nn.softmax' op axis -1 is out of range for rank 4}}
  %r = nn.softmax %x {axis = -1 : i64} : tensor<2x4x16x16xf32>
  return
}

// -----

func.func @layer_norm_negative_axis(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op axis -1 is out of range for rank 3}}
  %r = nn.layer_norm %x {axis = -1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op axis 3 is out of range for rank 3}}
  %r = nn.layer_norm %x {axis = 3 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op weight has shape 16x64, expected 64}}
  %r = nn.layer_norm %x weight %g {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op bias has shape 16, expected 64}}
  %r = nn.layer_norm %x weight %g bias %b {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<16xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @layer_norm_weight_element(%x: tensor<2x16x64xf32>, %g: tensor<64xf16>) {
  // expected-error @+1 {{'nn.layer_norm' op weight has element type 'f16', expected 'f32' (the input's)}}
  %r = nn.layer_norm %x weight %g {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf16>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @layer_norm_bias_element(%x: tensor<2x16x64xf32>, %b: tensor<64xbf16>) {
  // expected-error @+1 {{'nn.layer_norm' op bias has element type 'bf16', expected 'f32' (the input's)}}
  %r = nn.layer_norm %x bias %b {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xbf16>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op failed to verify that all of {input, result} have same type}}
  %r = nn.layer_norm %x {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @rms_norm_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'nn.rms_norm' op input must have rank >= 1}}
  %r = nn.rms_norm %x {epsilon = 9.99999997E-7 : f32} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{'nn.rms_norm' op weight has shape 16x64, expected 64}}
  %r = nn.rms_norm %x weight %g {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @rms_norm_weight_element(%x: tensor<2x16x64xf16>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'nn.rms_norm' op weight has element type 'f32', expected 'f16' (the input's)}}
  %r = nn.rms_norm %x weight %g {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf16>, tensor<64xf32>) -> tensor<2x16x64xf16>
  return
}

// -----

func.func @rms_norm_result(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'nn.rms_norm' op failed to verify that all of {input, result} have same type}}
  %r = nn.rms_norm %x {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf16>
  return
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

func.func @attention_query_rank(%q: tensor<8xf32>) {
  // expected-error @+1 {{'nn.attention' op query has shape 8, expected rank >= 2 ([..., S, D])}}
  %o = nn.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @attention_key_element(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf16>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op key has element type 'f16', expected 'f32' (or bf16)}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf16>, tensor<2x32x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

// bf16 inputs (mixed precision) are read widened: the op computes in f32.
func.func @attention_bf16_result(%q: tensor<2x16x8xbf16>, %k: tensor<2x32x8xbf16>, %v: tensor<2x32x4xbf16>) {
  // expected-error @+1 {{'nn.attention' op result has element type 'bf16', expected 'f32' (the type it computes in)}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xbf16>, tensor<2x32x8xbf16>, tensor<2x32x4xbf16>) -> tensor<2x16x4xbf16>
  return
}

// -----

func.func @attention_result_element(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op result has element type 'f16', expected 'f32' (the type it computes in)}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>) -> tensor<2x16x4xf16>
  return
}

// -----

func.func @attention_mask_kind(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op mask_kind is "causal", expected "additive" or "select"}}
  %o = nn.attention %q, %k, %v {mask_kind = "causal", scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_key_width(%q: tensor<2x16x8xf32>, %k: tensor<2x32x4xf32>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op key has shape 2x32x4, expected 2x32x8}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x4xf32>, tensor<2x32x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

// Grouped-query keys must be expanded to the query's heads first.
func.func @attention_key_heads(%q: tensor<2x4x16x8xf32>, %k: tensor<2x2x32x8xf32>, %v: tensor<2x4x32x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key has shape 2x2x32x8, expected 2x4x32x8}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x16x8xf32>, tensor<2x2x32x8xf32>, tensor<2x4x32x8xf32>) -> tensor<2x4x16x8xf32>
  return
}

// -----

func.func @attention_key_rank(%q: tensor<2x4x16x8xf32>, %k: tensor<4x32x8xf32>, %v: tensor<2x4x32x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key has shape 4x32x8, expected 2x4x32x8}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x16x8xf32>, tensor<4x32x8xf32>, tensor<2x4x32x8xf32>) -> tensor<2x4x16x8xf32>
  return
}

// -----

func.func @attention_value_length(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'nn.attention' op value has shape 2x16x4, expected 2x32x4}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>, %m: tensor<16x16xf32>) {
  // expected-error @+1 {{'nn.attention' op mask of shape 16x16 does not broadcast to the scores 2x16x32}}
  %o = nn.attention %q, %k, %v mask %m {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>, tensor<16x16xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

// A mask may broadcast to the scores, never grow them.
func.func @attention_mask_grows(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>, %m: tensor<3x1x16x32xf32>) {
  // expected-error @+1 {{'nn.attention' op mask of shape 3x1x16x32 does not broadcast to the scores 2x16x32}}
  %o = nn.attention %q, %k, %v mask %m {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>, tensor<3x1x16x32xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_select_mask_not_bool(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>, %m: tensor<16x32xf32>) {
  // expected-error @+1 {{'nn.attention' op a "select" mask must be i1 and come with masked_value}}
  %o = nn.attention %q, %k, %v mask %m {mask_kind = "select", masked_value = -1.0e+4 : f32, scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>, tensor<16x32xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_select_without_value(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>, %m: tensor<16x32xi1>) {
  // expected-error @+1 {{'nn.attention' op a "select" mask must be i1 and come with masked_value}}
  %o = nn.attention %q, %k, %v mask %m {mask_kind = "select", scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>, tensor<16x32xi1>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_additive_bool_mask(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>, %m: tensor<16x32xi1>) {
  // expected-error @+1 {{'nn.attention' op an "additive" mask must have the query's element type}}
  %o = nn.attention %q, %k, %v mask %m {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>, tensor<16x32xi1>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_select_without_mask(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op mask_kind "select" needs a mask}}
  %o = nn.attention %q, %k, %v {mask_kind = "select", masked_value = -1.0e+4 : f32, scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_masked_value_unused(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>, %m: tensor<16x32xf32>) {
  // expected-error @+1 {{'nn.attention' op masked_value is only used with a "select" mask}}
  %o = nn.attention %q, %k, %v mask %m {masked_value = -1.0e+4 : f32, scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>, tensor<16x32xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_masked_value_without_mask(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op masked_value is only used with a "select" mask}}
  %o = nn.attention %q, %k, %v {masked_value = -1.0e+4 : f32, scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x16x8xf32>, %k: tensor<2x32x8xf32>, %v: tensor<2x32x4xf32>) {
  // expected-error @+1 {{'nn.attention' op result has shape 2x16x8, expected 2x16x4}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xf32>, tensor<2x32x8xf32>, tensor<2x32x4xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

nn.parameter @w : tensor<2x32x8xf32>

func.func @attention_shard_key(%q: tensor<2x16x8xf32>, %v: tensor<2x32x4xf32>) {
  %k = zero.shard @w : !zero.shard<tensor<2x32x8xf32>>
  // expected-error @+1 {{'nn.attention' op operand #1 must be statically shaped tensor of floating-point values, but got '!zero.shard<tensor<2x32x8xf32>>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x16x8xf32>, !zero.shard<tensor<2x32x8xf32>>, tensor<2x32x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Loss and backward ops
//===----------------------------------------------------------------------===//

func.func @cross_entropy_targets(%l: tensor<2x8x16xf32>, %t: tensor<2x7xi64>) {
  // expected-error @+1 {{'nn.cross_entropy' op targets has shape 2x7, expected 2x8}}
  %r = nn.cross_entropy %l, %t : (tensor<2x8x16xf32>, tensor<2x7xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_loss_rank(%l: tensor<2x16xf32>, %t: tensor<2xi64>) {
  // expected-error @+1 {{'nn.cross_entropy' op loss has shape 1, expected scalar}}
  %r = nn.cross_entropy %l, %t : (tensor<2x16xf32>, tensor<2xi64>) -> tensor<1xf32>
  return
}

// -----

func.func @cross_entropy_grad_dloss(%l: tensor<2x16xf32>, %t: tensor<2xi64>, %d: tensor<1xf32>) {
  // expected-error @+1 {{'nn.cross_entropy_grad' op dloss has shape 1, expected scalar}}
  %r = nn.cross_entropy_grad %l, %t, %d : (tensor<2x16xf32>, tensor<2xi64>, tensor<1xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @cross_entropy_grad_result(%l: tensor<2x16xf32>, %t: tensor<2xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'nn.cross_entropy_grad' op dlogits has shape 2x8, expected 2x16}}
  %r = nn.cross_entropy_grad %l, %t, %d : (tensor<2x16xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @embedding_grad_dy(%dy: tensor<2x8x32xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'nn.embedding_grad' op dy has shape 2x8x32, expected 2x8x64}}
  %r = nn.embedding_grad %dy, %ids : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
  return
}

// -----

func.func @gather_grad_axis(%dy: tensor<2x8xf32>, %i: tensor<8xi64>) {
  // expected-error @+1 {{'nn.gather_grad' op axis 2 is out of range for rank 2}}
  %r = nn.gather_grad %dy, %i {axis = 2 : i64} : (tensor<2x8xf32>, tensor<8xi64>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gather_grad_dy(%dy: tensor<2x7xf32>, %i: tensor<8xi64>) {
  // expected-error @+1 {{'nn.gather_grad' op dy has shape 2x7, expected 2x8}}
  %r = nn.gather_grad %dy, %i {axis = 1 : i64} : (tensor<2x7xf32>, tensor<8xi64>) -> tensor<2x5xf32>
  return
}

// -----

func.func @slice_grad_outside(%dy: tensor<2x64xf32>) {
  // expected-error @+1 {{'nn.slice_grad' op dimension 1 places [160, 223] with step 1, outside the dinput extent 192}}
  %r = nn.slice_grad %dy {starts = array<i64: 0, 160>, steps = array<i64: 1, 1>} : tensor<2x64xf32> -> tensor<2x192xf32>
  return
}

// -----

func.func @layer_norm_grad_weight(%dy: tensor<2x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op weight has shape 32, expected 64}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %dy, %w {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x64xf32>, tensor<2x64xf32>, tensor<32xf32>) -> (tensor<2x64xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}

// -----

func.func @layer_norm_grad_dbias(%dy: tensor<2x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op dbias has shape 2x64, expected 64}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %dy, %w {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x64xf32>, tensor<2x64xf32>, tensor<64xf32>) -> (tensor<2x64xf32>, tensor<64xf32>, tensor<2x64xf32>)
  return
}

// -----

func.func @rms_norm_grad_dy(%dy: tensor<2x32xf32>, %x: tensor<2x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op dy has shape 2x32, expected 2x64}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {epsilon = 1.0e-6 : f32} : (tensor<2x32xf32>, tensor<2x64xf32>, tensor<64xf32>) -> (tensor<2x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @softmax_grad_axis(%dy: tensor<2x64xf32>) {
  // expected-error @+1 {{'nn.softmax_grad' op axis 2 is out of range for rank 2}}
  %dx = nn.softmax_grad %dy, %dy {axis = 2 : i64} : tensor<2x64xf32>
  return
}

// -----

func.func @attention_grad_dout(%do: tensor<4x8x8xf32>, %q: tensor<4x8x16xf32>, %v: tensor<4x6x8xf32>, %k: tensor<4x6x16xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op dout has shape 4x8x8, expected 4x8x16}}
  %dq, %dk, %dv = nn.attention_grad %do, %q, %k, %k {scale = 1.0 : f32} : (tensor<4x8x8xf32>, tensor<4x8x16xf32>, tensor<4x6x16xf32>, tensor<4x6x16xf32>) -> (tensor<4x8x16xf32>, tensor<4x6x16xf32>, tensor<4x6x16xf32>)
  return
}

// -----

func.func @attention_grad_dkey(%do: tensor<4x8x16xf32>, %q: tensor<4x8x16xf32>, %k: tensor<4x6x16xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op dkey has shape 4x8x16, expected 4x6x16}}
  %dq, %dk, %dv = nn.attention_grad %do, %q, %k, %k {scale = 1.0 : f32} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x6x16xf32>, tensor<4x6x16xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x6x16xf32>)
  return
}

// -----

func.func @attention_grad_select_without_value(%do: tensor<8x16xf32>, %q: tensor<8x16xf32>, %m: tensor<8x8xi1>) {
  // expected-error @+1 {{'nn.attention_grad' op a "select" mask must be i1 and come with masked_value}}
  %dq, %dk, %dv = nn.attention_grad %do, %q, %q, %q mask %m {mask_kind = "select", scale = 1.0 : f32} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x8xi1>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
  return
}

// -----

func.func @gelu_grad_approximate(%x: tensor<8xf32>) {
  // expected-error @+1 {{'nn.gelu_grad' op approximate is "fast", expected "none" or "tanh"}}
  %dx = nn.gelu_grad %x, %x {approximate = "fast"} : tensor<8xf32>
  return
}

// -----

// expected-error @+1 {{'nn.kv_cache' op cache must be [batch, heads, max_seq_len, head_dim], got 'tensor<2x64x16xf32>'}}
nn.kv_cache @c : tensor<2x64x16xf32>

// -----

func.func @append(%new: tensor<2x2x1x16xf32>, %pos: tensor<2x1xi64>) {
  // expected-error @+1 {{'nn.cache_append' op @nowhere is not an nn.kv_cache}}
  %k = nn.cache_append @nowhere, %new, %pos : (tensor<2x2x1x16xf32>, tensor<2x1xi64>) -> tensor<2x2x64x16xf32>
  return
}

// -----

nn.kv_cache @c : tensor<2x2x32x16xf32>
func.func @append(%new: tensor<2x2x1x16xf32>, %pos: tensor<2x1xi64>) {
  // expected-error @+1 {{'nn.cache_append' op result has type 'tensor<2x2x64x16xf32>', but @c is 'tensor<2x2x32x16xf32>'}}
  %k = nn.cache_append @c, %new, %pos : (tensor<2x2x1x16xf32>, tensor<2x1xi64>) -> tensor<2x2x64x16xf32>
  return
}

// -----

func.func @append(%new: tensor<2x2x1x16xf32>, %pos: tensor<1x1xi64>) {
  // expected-error @+1 {{'nn.cache_append' op positions}}
  %k = nn.cache_append @c, %new, %pos : (tensor<2x2x1x16xf32>, tensor<1x1xi64>) -> tensor<2x2x64x16xf32>
  return
}

// -----

func.func @attend(%q: tensor<2x4x1x16xf32>, %k: tensor<2x2x64x16xf32>, %pos: tensor<2x1xi64>) {
  // expected-error @+1 {{'nn.cached_attention' op key}}
  %o = nn.cached_attention %q, %k, %k, %pos {scale = 0.25 : f32} : (tensor<2x4x1x16xf32>, tensor<2x2x64x16xf32>, tensor<2x2x64x16xf32>, tensor<2x1xi64>) -> tensor<2x4x1x16xf32>
  return
}

// -----

func.func @attend(%q: tensor<2x4x3x16xf32>, %k: tensor<2x4x64x16xf32>, %pos: tensor<2x1xi64>) {
  // expected-error @+1 {{'nn.cached_attention' op positions}}
  %o = nn.cached_attention %q, %k, %k, %pos {scale = 0.25 : f32} : (tensor<2x4x3x16xf32>, tensor<2x4x64x16xf32>, tensor<2x4x64x16xf32>, tensor<2x1xi64>) -> tensor<2x4x3x16xf32>
  return
}

// -----

// expected-error @+1 {{'nn.parameter' op tied copy {name = "w2"} must be {name, transposed, equal, reason}}}
nn.parameter @w {tied_copies = [{name = "w2"}]} : tensor<4x4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op tied copy 'w' is empty, the parameter itself or listed twice}}
nn.parameter @w {tied_copies = [{name = "w", transposed = false, equal = true, reason = ""}]} : tensor<4x4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op tied copy 'c' is empty, the parameter itself or listed twice}}
nn.parameter @w {tied_copies = [{name = "c", transposed = false, equal = true, reason = ""}, {name = "c", transposed = false, equal = true, reason = ""}]} : tensor<4x4xf32>

// -----

// expected-error @+1 {{'nn.parameter' op tied copy 'c' is transposed, but the parameter has rank 1}}
nn.parameter @w {tied_copies = [{name = "c", transposed = true, equal = true, reason = ""}]} : tensor<16xf32>
