// The schedule verifier's rules for cross-step prefetch (Passes.td, rules
// 13-17; docs/generation.md section 6): @prefill and @decode each end by
// starting one carried gather of one group, the next @decode completes it
// (before anything gathers that group, and before its own carry starts,
// which must be the last collective of the program), @generate_end drains
// the last. A valid module passes unchanged; each violation is named. The
// budget rule counts the carried copies: under 111 B, the one @prefill
// starts (64 B, live from its carry_start to the end) is one too many.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/valid.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/valid.mlir
// RUN: zcc-opt %t/valid.mlir -zplan-decode-lockstep -zplan-verify-schedule="memory-budget=128" | FileCheck %t/valid.mlir
// RUN: not zcc-opt %t/valid.mlir -zplan-decode-lockstep -zplan-verify-schedule="memory-budget=111" 2>&1 | FileCheck %t/valid.mlir --check-prefix=BUDGET
// RUN: not zcc-opt %t/early.mlir -zplan-decode-lockstep -zplan-verify-schedule="memory-budget=200" 2>&1 | FileCheck %t/early.mlir
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics -zplan-verify-schedule

//--- valid.mlir

// CHECK-LABEL: func.func @prefill
// CHECK: zero.carry_start
// CHECK-LABEL: func.func @decode
// CHECK: zero.carry_wait
// CHECK: zero.carry_start
// CHECK-LABEL: func.func @generate_end
// CHECK-NEXT: zero.carry_drain {group = @ga}
// BUDGET: does not fit the memory budget of 111 B per rank, in the schedule as placed: at op #2 (zero.carry_start) shards and persistent groups hold 32 B and live buffers 80 B, 1 B over; live buffers: carried group @ga (64 B); nn.relu (16 B);
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

//--- early.mlir

// The copy a carry_wait hands over is in the arena from @decode's first op
// (the previous program's collective wrote it), not from the carry_wait:
// at the relu, before it, shards 32 B + %x, %r, the copy and %q 208 B =
// 240 B (counted from the carry_wait on, the relu would see 176 B).
// CHECK: error: does not fit the memory budget of 200 B per rank, in the schedule as placed: at op #1 (nn.relu) shards and persistent groups hold 32 B and live buffers 208 B, 40 B over; live buffers: input #0 (64 B); nn.relu (64 B); gathered group @ga (64 B); input #1 (16 B);
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%q: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %q : tensor<1x4xf32>
}
func.func @decode(%x: tensor<4x4xf32>, %q: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %r = nn.relu %x : tensor<4x4xf32>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %m = nn.matmul %q, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %m : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

//--- invalid.mlir

// Rule 13: a carry started in @generate_begin, which no @decode follows.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @generate_begin() {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{starts a carried gather of group @ga in @generate_begin; only @prefill and @decode may (a @decode must follow)}}
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return
}

// -----

// Rule 13: a carried gather completed in @prefill.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{completes a carried gather of group @ga in @prefill; only @decode may}}
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

// Rule 13: drained in @decode: the next @decode would find no carried gather.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  // expected-error @+1 {{drains the carried gather of group @ga in @decode; only @generate_end may}}
  zero.carry_drain {group = @ga}
  return %1 : tensor<1x4xf32>
}

// -----

// Rule 14: @prefill starts no carry: the first @decode would wait for nothing.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
// expected-error @+1 {{@prefill must hold exactly one zero.carry_start of carried group @ga (it holds 0): the first @decode completes it}}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = nn.relu %x : tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 14: @decode starts two carries.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
// expected-error @+1 {{@decode must hold exactly one zero.carry_start of carried group @ga (it holds 2)}}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 14: @generate_end does not drain the last carried gather.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
// expected-error @+1 {{@generate_end must hold exactly one zero.carry_drain of carried group @ga (it holds 0): the last program's carried gather must end with the generation}}
func.func @generate_end() {
  return
}

// -----

// Rule 14: two carried groups.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  // expected-error @+1 {{carries group @gb but the module carries group @ga (one carried group per generation)}}
  zero.carry_drain {group = @gb}
  return
}

// -----

// Rule 15: @decode gathers the carried group again before completing the carry.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{gathers carried group @ga before its zero.carry_wait in @decode: the carried copy is the token's first}}
  %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  %a2 = zero.gather_wait %ta : tensor<4x4xf32>
  zero.release %a2 : tensor<4x4xf32>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 16: a gather started after the carry: the carried gather must end the comm queue.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{starts a collective after the carried gather of group @ga: the carried gather must be the last on the comm queue of @decode}}
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 17: the next carry starts while this token still holds its copy.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  // expected-error @+1 {{starts the next carried gather of group @ga while parameter 'a' of group @ga is still read (by zero.release): it would overwrite the copy}}
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  zero.release %a : tensor<4x4xf32>
  return %0 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 17: the next carry starts before this token's carry_wait.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{starts the next carried gather of group @ga before this token's zero.carry_wait}}
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %a : tensor<4x4xf32>
  return %0 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 4: the carried copy is never released.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{the gathered copy of group @ga (parameter 'a') is never released}}
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}

// -----

// Rule 3: the carried copy read after its release.
nn.parameter @a : tensor<4x4xf32>
nn.parameter @b : tensor<4x4xf32>
zero.group @ga {params = [@a], padded_elements = 16 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %0 = nn.relu %x : tensor<1x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %0 : tensor<1x4xf32>
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x4xf32>>
  %a = zero.carry_wait %sa {group = @ga} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  zero.release %a : tensor<4x4xf32>
  // expected-error @+1 {{reads parameter 'a' of group @ga after its release}}
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %sb = zero.shard @b : !zero.shard<tensor<4x4xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x4xf32>>
  %b = zero.gather_wait %tb : tensor<4x4xf32>
  %1 = nn.matmul %0, %b : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %b : tensor<4x4xf32>
  zero.carry_start %sa {group = @ga} : !zero.shard<tensor<4x4xf32>>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.carry_drain {group = @ga}
  return
}
