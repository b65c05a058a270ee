// zplan-decode-positions names the ONNX node of the op it cannot follow (the
// op's NameLoc, as the importer sets it), and fails.
// RUN: not zcc-opt %s -zplan-decode-positions 2>&1 | FileCheck %s

// CHECK: error: {{.*}}zplan-decode-positions: cannot follow the token axis through nn.reduce_mean 'ReduceMean_7': it reduces over the token axis
nn.parameter @wte : tensor<16x2xf32>
func.func @decode(%ids: tensor<2x3xi64> {nn.name = "input_ids"}) -> (tensor<2x2xf32> {nn.name = "out"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x2xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x2xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x2xf32>
  %h = nn.embedding %wte, %ids : (tensor<16x2xf32>, tensor<2x3xi64>) -> tensor<2x3x2xf32>
  %m = nn.reduce_mean %h {axes = array<i64: 1>, keepdims = false} : tensor<2x3x2xf32> -> tensor<2x2xf32> loc("ReduceMean_7")
  return %m : tensor<2x2xf32>
}
