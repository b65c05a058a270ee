// zplan-decode-lockstep and the verifier's rule 18 (Passes.td;
// docs/generation.md section 8). Each rank decodes its own rows, so @decode
// runs a different number of times on each rank unless the ranks agree on
// when to stop. A @decode with a collective gets zplan.lockstep_period (the
// ranks all-reduce their running rows every K steps); one without keeps
// none (each rank stops alone). The verifier refuses a hand-written @decode
// whose collectives are not in lockstep: its collective count would depend
// on the rank's data.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/streamed.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/streamed.mlir
// RUN: zcc-opt %t/streamed.mlir -zplan-decode-lockstep=hardware=h200 | FileCheck %t/streamed.mlir --check-prefix=H200
// RUN: zcc-opt %t/resident.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/resident.mlir
// RUN: zcc-opt %t/persistent.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/persistent.mlir
// RUN: zcc-opt %t/one-rank.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/one-rank.mlir
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics -zplan-verify-schedule

//--- streamed.mlir

// A streamed group: @decode gathers it every token, so the ranks agree. On
// the CPU profile one agreement costs about as much as this tiny decode
// step, and M = 64 - 8 = 56 tokens a row at most: K = round(sqrt(2 a M / t)),
// more than one step. On h200 the same.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: attributes {zplan.lockstep_period = [[K:[1-9][0-9]*]] : i64}
// CHECK: zero.gather_start
// H200-LABEL: func.func @decode
// H200-SAME: zplan.lockstep_period = {{[1-9][0-9]*}} : i64
nn.parameter @v : tensor<4x4xf32>
zero.group @s {params = [@v], padded_elements = 16 : i64, world_size = 2 : i64}
nn.kv_cache @cache.0.key : tensor<1x1x64x4xf32>
func.func @prefill(%ids: tensor<1x8xi64>) {
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  %v = zero.gather_wait %t : tensor<4x4xf32>
  %1 = nn.matmul %x, %v : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %v : tensor<4x4xf32>
  return %1 : tensor<1x4xf32>
}

//--- resident.mlir

// Every group resident: @decode has no collective, so no rank can wait for
// another, and no period is set (a stale one is removed).
// CHECK-LABEL: func.func @decode
// CHECK-NOT: zplan.lockstep_period
// CHECK: zero.resident_read
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> attributes {zplan.lockstep_period = 3 : i64} {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %w = zero.resident_read %sw {group = @g} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}

//--- persistent.mlir

// A persistent group is whole on every rank: its gather_start moves nothing
// (the plan has no instruction for it), so it needs no agreement.
// CHECK-LABEL: func.func @decode
// CHECK-NOT: zplan.lockstep_period
// CHECK: zero.gather_start
nn.parameter @n : tensor<4xf32>
zero.group @p {params = [@n], padded_elements = 4 : i64, world_size = 2 : i64, persistent}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sn = zero.shard @n : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %sn {group = @p} : !zero.shard<tensor<4xf32>>
  %n = zero.gather_wait %t : tensor<4xf32>
  %1 = nn.mul %x, %n : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  return %1 : tensor<1x4xf32>
}

//--- one-rank.mlir

// One rank has no other to wait for: no period, and the verifier accepts
// the gather.
// CHECK-LABEL: func.func @decode
// CHECK-NOT: zplan.lockstep_period
// CHECK: zero.gather_start
nn.parameter @v : tensor<4x4xf32>
zero.group @s {params = [@v], padded_elements = 16 : i64, world_size = 1 : i64}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  %v = zero.gather_wait %t : tensor<4x4xf32>
  %1 = nn.matmul %x, %v : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %v : tensor<4x4xf32>
  return %1 : tensor<1x4xf32>
}

//--- invalid.mlir

// Rule 18: a hand-written @decode that gathers per token with no lockstep:
// a rank whose rows hit EOS first stops decoding and never enters this
// gather again, while the others wait in it.
nn.parameter @v : tensor<4x4xf32>
zero.group @s {params = [@v], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{is a collective in @decode, which each rank runs until its own rows finish: the collective count depends on the rank's data}}
  %t = zero.gather_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  %v = zero.gather_wait %t : tensor<4x4xf32>
  %1 = nn.matmul %x, %v : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %v : tensor<4x4xf32>
  return %1 : tensor<1x4xf32>
}

// -----

// Rule 18: the carry's gather is a collective too, even with nothing else
// gathered in @decode.
nn.parameter @v : tensor<4x4xf32>
zero.group @s {params = [@v], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  zero.carry_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  return %x : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  %v = zero.carry_wait %sv {group = @s} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %1 = nn.matmul %x, %v : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %v : tensor<4x4xf32>
  // expected-error @+1 {{is a collective in @decode}}
  zero.carry_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @s}
  return
}

// -----

// A period below 1 is no agreement.
nn.parameter @v : tensor<4x4xf32>
zero.group @s {params = [@v], padded_elements = 16 : i64, world_size = 2 : i64}
// expected-error @+1 {{@decode has zplan.lockstep_period = 0; a period is at least 1}}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> attributes {zplan.lockstep_period = 0 : i64} {
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  %v = zero.gather_wait %t : tensor<4x4xf32>
  %1 = nn.matmul %x, %v : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %v : tensor<4x4xf32>
  return %1 : tensor<1x4xf32>
}
