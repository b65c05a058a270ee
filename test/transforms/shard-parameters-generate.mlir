// In a generation module @decode's use order decides the groups (it runs
// once per token, @prefill once), and both programs get the group gathers.
// @prefill reads b before a, @decode a before b: the group lists a first.
// RUN: zcc-opt %s -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" | FileCheck %s

// CHECK: zero.group @group0 {offsets = array<i64: 0, 16>, padded_elements = 32 : i64, params = [@a, @b], world_size = 4 : i64}{{$}}
// CHECK-NOT: zero.group
// CHECK-LABEL: func.func @prefill
// CHECK-NEXT: %[[SA:.*]] = zero.shard @a
// CHECK-NEXT: %[[SB:.*]] = zero.shard @b
// CHECK-NEXT: %[[T:.*]] = zero.gather_start %[[SA]], %[[SB]] {group = @group0}
// CHECK-NEXT: %[[W:.*]]:2 = zero.gather_wait %[[T]]
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W]]#1
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W]]#0
// CHECK-LABEL: func.func @decode
// CHECK-NEXT: %[[SA2:.*]] = zero.shard @a
// CHECK-NEXT: %[[SB2:.*]] = zero.shard @b
// CHECK-NEXT: %[[T2:.*]] = zero.gather_start %[[SA2]], %[[SB2]] {group = @group0}
// CHECK-NEXT: %[[W2:.*]]:2 = zero.gather_wait %[[T2]]
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W2]]#0
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W2]]#1
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
func.func @prefill(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x4xf32>>
  %a = zero.gather_wait %ta : tensor<4x4xf32>
  %0 = nn.matmul %x, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = nn.matmul %0, %a : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x4xf32>>
  %a = zero.gather_wait %ta : tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  return %1 : tensor<1x4xf32>
}
