// The residency ops of generation (GEN: zcc --mode generate): a resident
// group is gathered once in @generate_begin, read without communication in
// @prefill / @decode, and released in @generate_end. Round trip, then every
// error path of their verifiers.
// RUN: zcc-opt %s --split-input-file | FileCheck %s
// RUN: zcc-opt %s --split-input-file --mlir-print-op-generic | zcc-opt --split-input-file | FileCheck %s

nn.parameter @w : tensor<64x64xf32>
nn.parameter @b : tensor<64xf32>
// CHECK: zero.group @g {padded_elements = 4160 : i64, params = [@w, @b], resident, world_size = 4 : i64}
zero.group @g {params = [@w, @b], padded_elements = 4160 : i64, world_size = 4 : i64, resident}

// CHECK-LABEL: func.func @generate_begin
// CHECK: zero.resident_gather {group = @g}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}

// CHECK-LABEL: func.func @decode
// CHECK: %[[W:.*]]:2 = zero.resident_read %{{.*}}, %{{.*}} {group = @g} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>> -> tensor<64x64xf32>, tensor<64xf32>
func.func @decode() -> tensor<64xf32> {
  %s0 = zero.shard @w : !zero.shard<tensor<64x64xf32>>
  %s1 = zero.shard @b : !zero.shard<tensor<64xf32>>
  %w, %bias = zero.resident_read %s0, %s1 {group = @g} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>> -> tensor<64x64xf32>, tensor<64xf32>
  return %bias : tensor<64xf32>
}

// CHECK-LABEL: func.func @generate_end
// CHECK: zero.resident_release {group = @g}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}
