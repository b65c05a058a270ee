// In a train,generate module (docs/one-plan.md section 2) @train_micro_step's
// use order decides the one grouping, also for the generation programs that
// follow it: the training step reads b before a, @decode a before b, and the
// group lists b first; @decode gathers that group.
// RUN: zcc-opt %s -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" | FileCheck %s

// CHECK: zero.group @group0 {offsets = array<i64: 0, 16>, padded_elements = 32 : i64, params = [@b, @a], world_size = 4 : i64}{{$}}
// CHECK-NOT: zero.group
// CHECK-LABEL: func.func @train_micro_step
// CHECK: zero.gather_start %{{.*}}, %{{.*}} {group = @group0}
// CHECK-LABEL: func.func @decode
// CHECK-NEXT: %[[SB:.*]] = zero.shard @b
// CHECK-NEXT: %[[SA:.*]] = zero.shard @a
// CHECK-NEXT: %[[T:.*]] = zero.gather_start %[[SB]], %[[SA]] {group = @group0}
// CHECK-NEXT: %[[W:.*]]:2 = zero.gather_wait %[[T]]
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W]]#1
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W]]#0
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
func.func @train_micro_step(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
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
