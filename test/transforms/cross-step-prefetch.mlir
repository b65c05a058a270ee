// zplan-cross-step-prefetch (Passes.td; docs/generation.md section 6):
// @decode's first streamed gather becomes a zero.carry_wait, and @prefill
// and @decode end by starting it (zero.carry_start) for the next token,
// moved up over their last compute as zplan-prefetch moves a gather: until
// the compute below covers the collective, within the budget, never above a
// gather_start, its shards, or (in @decode) a reader of the copy it would
// overwrite. @generate_end drains the last one. jit, modules with no
// streamed group, and modules where the carry would not shorten a decode
// step are left alone.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/tail.mlir -zplan-cross-step-prefetch -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/tail.mlir
// RUN: zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="memory-budget=160000" -zplan-decode-lockstep -zplan-verify-schedule="memory-budget=160000" | FileCheck %t/tail.mlir --check-prefix=BUDGET
// RUN: zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="memory-budget=112583" | FileCheck %t/tail.mlir --check-prefix=NOFIT
// RUN: zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="policy=jit" | FileCheck %t/tail.mlir --check-prefix=JIT
// RUN: zcc-opt %t/short.mlir -zplan-cross-step-prefetch -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/short.mlir
// RUN: zcc-opt %t/hidden.mlir -zplan-cross-step-prefetch | FileCheck %t/hidden.mlir
// RUN: zcc-opt %t/resident.mlir -zplan-cross-step-prefetch | FileCheck %t/resident.mlir
// RUN: not zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="policy=eager" 2>&1 | FileCheck %t/tail.mlir --check-prefix=POLICY
// RUN: zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="hardware-profile=%t/serial.json" | FileCheck %t/tail.mlir --check-prefix=SERIAL
// RUN: not zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="hardware-profile=%t/old.json" 2>&1 | FileCheck %t/tail.mlir --check-prefix=OLDPROFILE
// RUN: not zcc-opt %t/tail.mlir -zplan-cross-step-prefetch="hardware=h200 hardware-profile=%t/serial.json" 2>&1 | FileCheck %t/tail.mlir --check-prefix=OTHERHARDWARE
// RUN: zcc-opt %t/offload.mlir -zplan-cross-step-prefetch -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/offload.mlir
// RUN: zcc-opt %t/offload.mlir -zplan-cross-step-prefetch="hardware-profile=%t/serial.json" | FileCheck %t/offload.mlir --check-prefix=SERIAL
// RUN: zcc-opt %t/one-rank.mlir -zplan-cross-step-prefetch | FileCheck %t/one-rank.mlir

//--- tail.mlir

// A calibrated profile (serial.json: the cpu profile's rates, but compute
// beside a collective pays all of its time, as bench/calibrate_cpu.cpp
// measured on a 2-core VM) turns the carry down: with it the tail's compute
// is charged the carried gather it runs beside, so a decode step is no
// shorter than with the gather at the token's start.
// SERIAL: module attributes {zplan.carry_skipped = {bytes = 45056 : i64, group = @ga, reason = "carrying it would not shorten a decode step (99.528 us with the carry, 99.528 us without): the tail hides less of its gather than the token's start does, and compute beside a collective pays 1 of its time on this hardware profile"}}
// SERIAL-NOT: zero.carry_start
// A profile without the field (written before it existed) is refused by
// name, not read as free overlap; one for other hardware is refused too.
// OLDPROFILE: error: zplan-cross-step-prefetch: hardware profile '{{.*}}old.json': field 'compute_slowdown_during_collective' is missing (every profile gives each rate, with its source)
// OTHERHARDWARE: error: zplan-cross-step-prefetch: hardware profile '{{.*}}serial.json' describes 'cpu', not the --hardware 'h200' it is to calibrate

// On the cpu profile, gathering @ga (11264 f32, 45056 B) over 4 ranks takes
// 10 us + 45056 B x 3/4 / 3 GB/s = 21.264 us; a relu of 90x125 f32 6 us, an
// add 9 us (135000 B at 15 GB/s). Up from the end: relu, relu (12 us), add
// (21 us), relu (27 us >= 21.264 us): the start stops there, above %r3.
// @decode's first streamed gather (@ga; @p is persistent) is completed by
// a carry_wait where its wait was, and released as before.
// CHECK: module attributes {zplan.carry = {bytes = 45056 : i64, group = @ga}}
// CHECK-LABEL: func.func @prefill
// CHECK: %[[SA:.*]] = zero.shard @a
// CHECK: %[[R1:.*]] = nn.relu
// CHECK-NEXT: %[[R2:.*]] = nn.relu %[[R1]]
// CHECK-NEXT: zero.carry_start %[[SA]] {group = @ga}
// CHECK-NEXT: nn.relu %[[R2]]
// CHECK-LABEL: func.func @decode
// CHECK-NEXT: %[[P:.*]] = zero.shard @p
// CHECK-NEXT: %[[PT:.*]] = zero.gather_start %[[P]] {group = @gp}
// CHECK-NEXT: zero.gather_wait %[[PT]]
// CHECK-NEXT: %[[SA:.*]] = zero.shard @a
// CHECK-NEXT: %[[A:.*]] = zero.carry_wait %[[SA]] {group = @ga} : !zero.shard<tensor<90x125xf32>> -> tensor<90x125xf32>
// CHECK-NEXT: nn.add %{{.*}}, %[[A]]
// CHECK-NEXT: zero.release %[[A]]
// CHECK-NOT: zero.gather_start %[[SA]]
// CHECK: %[[R1:.*]] = nn.relu
// CHECK-NEXT: %[[R2:.*]] = nn.relu %[[R1]]
// CHECK-NEXT: zero.carry_start %[[SA]] {group = @ga}
// CHECK-NEXT: nn.relu %[[R2]]
// CHECK-LABEL: func.func @generate_end
// CHECK-NEXT: zero.carry_drain {group = @ga}
// CHECK-NEXT: return
//
// Under 160000 B: shards 22528 B + the carried 45056 B leave 92416 B; the
// start passes the last two relus (90000 B live) but not the add (%r1, %r3
// and its result: 135000 B).
// BUDGET-LABEL: func.func @decode
// BUDGET: zero.release
// BUDGET: zero.release
// BUDGET-NEXT: nn.relu
// BUDGET-NEXT: nn.relu
// BUDGET-NEXT: nn.relu
// BUDGET-NEXT: %[[R4:.*]] = nn.add
// BUDGET-NEXT: zero.carry_start
// BUDGET-NEXT: nn.relu %[[R4]]
// BUDGET-NEXT: nn.relu
// BUDGET-NEXT: return
//
// Under 112583 B the carried copy does not fit even at the end (shards
// 22528 B + result 45000 B + 45056 B = 112584 B): nothing is carried, and
// the module says why (the report shows it).
// NOFIT: module attributes {zplan.carry_skipped = {bytes = 45056 : i64, group = @ga, reason = "its copy does not fit the memory budget at the end of prefill/decode or before its gather in decode"}}
// NOFIT-NOT: zero.carry
//
// jit (FSDP2's generate) has no cross-token prefetch.
// JIT-NOT: zplan.carry
// JIT-NOT: zero.carry
// JIT-LABEL: func.func @decode
// JIT: zero.gather_start %{{.*}} {group = @ga}
//
// POLICY: for the --policy option: Cannot find option named 'eager'
nn.parameter @a : tensor<90x125xf32>
nn.parameter @b : tensor<90x125xf32>
nn.parameter @p : tensor<4xf32>
zero.group @gp {params = [@p], padded_elements = 4 : i64, world_size = 4 : i64, persistent}
zero.group @ga {params = [@a], padded_elements = 11264 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 11264 : i64, world_size = 4 : i64}
func.func @generate_begin() {
  return
}
func.func @prefill(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
  %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
  %wa = zero.gather_wait %ta : tensor<90x125xf32>
  %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wa : tensor<90x125xf32>
  %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
  %wb = zero.gather_wait %tb : tensor<90x125xf32>
  %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wb : tensor<90x125xf32>
  %r1 = nn.relu %1 : tensor<90x125xf32>
  %r2 = nn.relu %r1 : tensor<90x125xf32>
  %r3 = nn.relu %r2 : tensor<90x125xf32>
  %r4 = nn.add %r3, %r1 : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  %r5 = nn.relu %r4 : tensor<90x125xf32>
  %r6 = nn.relu %r5 : tensor<90x125xf32>
  return %r6 : tensor<90x125xf32>
}
func.func @decode(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sp = zero.shard @p : !zero.shard<tensor<4xf32>>
  %tp = zero.gather_start %sp {group = @gp} : !zero.shard<tensor<4xf32>>
  %wp = zero.gather_wait %tp : tensor<4xf32>
  %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
  %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
  %wa = zero.gather_wait %ta : tensor<90x125xf32>
  %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wa : tensor<90x125xf32>
  %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
  %wb = zero.gather_wait %tb : tensor<90x125xf32>
  %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wb : tensor<90x125xf32>
  %r1 = nn.relu %1 : tensor<90x125xf32>
  %r2 = nn.relu %r1 : tensor<90x125xf32>
  %r3 = nn.relu %r2 : tensor<90x125xf32>
  %r4 = nn.add %r3, %r1 : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  %r5 = nn.relu %r4 : tensor<90x125xf32>
  %r6 = nn.relu %r5 : tensor<90x125xf32>
  return %r6 : tensor<90x125xf32>
}
func.func @generate_end() {
  return
}

//--- offload.mlir

// tail.mlir with its shards offloaded to the nvme tier (zcc --offload-params
// nvme: the module attributes ModulePlanSearch sets). The carry is kept (the
// emitter fetches the carried shard in the same tail, docs/offload.md); the
// replay charges each offloaded shard's fetch on the comm queue before its
// gather: a decode step gathers @ga and @gb, 2 x 11264 B at the cost
// model's nvme rate (2 GB/s), 11.264 us in all (tail.mlir's SERIAL says
// 99.528 us without offload).
// CHECK: module attributes {zplan.carry = {bytes = 45056 : i64, group = @ga}, zplan.shards_offload_tier = "nvme", zplan.shards_offloaded = -1 : i64}
// CHECK-LABEL: func.func @decode
// CHECK: zero.carry_wait
// CHECK: zero.carry_start
// SERIAL: zplan.carry_skipped = {bytes = 45056 : i64, group = @ga, reason = "carrying it would not shorten a decode step (110.792 us with the carry, 110.792 us without)
module attributes {zplan.shards_offloaded = -1 : i64, zplan.shards_offload_tier = "nvme"} {
  nn.parameter @a : tensor<90x125xf32>
  nn.parameter @b : tensor<90x125xf32>
  nn.parameter @p : tensor<4xf32>
  zero.group @gp {params = [@p], padded_elements = 4 : i64, world_size = 4 : i64, persistent}
  zero.group @ga {params = [@a], padded_elements = 11264 : i64, world_size = 4 : i64}
  zero.group @gb {params = [@b], padded_elements = 11264 : i64, world_size = 4 : i64}
  func.func @generate_begin() {
    return
  }
  func.func @prefill(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
    %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
    %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
    %wa = zero.gather_wait %ta : tensor<90x125xf32>
    %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wa : tensor<90x125xf32>
    %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
    %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
    %wb = zero.gather_wait %tb : tensor<90x125xf32>
    %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wb : tensor<90x125xf32>
    %r1 = nn.relu %1 : tensor<90x125xf32>
    %r2 = nn.relu %r1 : tensor<90x125xf32>
    %r3 = nn.relu %r2 : tensor<90x125xf32>
    %r4 = nn.add %r3, %r1 : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    %r5 = nn.relu %r4 : tensor<90x125xf32>
    %r6 = nn.relu %r5 : tensor<90x125xf32>
    return %r6 : tensor<90x125xf32>
  }
  func.func @decode(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
    %sp = zero.shard @p : !zero.shard<tensor<4xf32>>
    %tp = zero.gather_start %sp {group = @gp} : !zero.shard<tensor<4xf32>>
    %wp = zero.gather_wait %tp : tensor<4xf32>
    %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
    %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
    %wa = zero.gather_wait %ta : tensor<90x125xf32>
    %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wa : tensor<90x125xf32>
    %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
    %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
    %wb = zero.gather_wait %tb : tensor<90x125xf32>
    %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wb : tensor<90x125xf32>
    %r1 = nn.relu %1 : tensor<90x125xf32>
    %r2 = nn.relu %r1 : tensor<90x125xf32>
    %r3 = nn.relu %r2 : tensor<90x125xf32>
    %r4 = nn.add %r3, %r1 : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    %r5 = nn.relu %r4 : tensor<90x125xf32>
    %r6 = nn.relu %r5 : tensor<90x125xf32>
    return %r6 : tensor<90x125xf32>
  }
  func.func @generate_end() {
    return
  }
}

//--- one-rank.mlir

// One rank with offloaded shards: each is fetched whole into the copy its
// reader uses, and a fetch carried from one program to the next is not
// built, so nothing is carried and the module says why.
// CHECK: zplan.carry_skipped = {bytes = 45056 : i64, group = @ga, reason = "on one rank its offloaded shard is fetched whole into the copy decode reads, and a fetch carried across programs is not built"}
// CHECK-NOT: zero.carry
module attributes {zplan.shards_offloaded = -1 : i64, zplan.shards_offload_tier = "cpu"} {
  nn.parameter @a : tensor<90x125xf32>
  nn.parameter @b : tensor<90x125xf32>
  nn.parameter @p : tensor<4xf32>
  zero.group @gp {params = [@p], padded_elements = 4 : i64, world_size = 1 : i64, persistent}
  zero.group @ga {params = [@a], padded_elements = 11264 : i64, world_size = 1 : i64}
  zero.group @gb {params = [@b], padded_elements = 11264 : i64, world_size = 1 : i64}
  func.func @generate_begin() {
    return
  }
  func.func @prefill(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
    %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
    %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
    %wa = zero.gather_wait %ta : tensor<90x125xf32>
    %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wa : tensor<90x125xf32>
    %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
    %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
    %wb = zero.gather_wait %tb : tensor<90x125xf32>
    %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wb : tensor<90x125xf32>
    %r1 = nn.relu %1 : tensor<90x125xf32>
    %r2 = nn.relu %r1 : tensor<90x125xf32>
    %r3 = nn.relu %r2 : tensor<90x125xf32>
    %r4 = nn.add %r3, %r1 : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    %r5 = nn.relu %r4 : tensor<90x125xf32>
    %r6 = nn.relu %r5 : tensor<90x125xf32>
    return %r6 : tensor<90x125xf32>
  }
  func.func @decode(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
    %sp = zero.shard @p : !zero.shard<tensor<4xf32>>
    %tp = zero.gather_start %sp {group = @gp} : !zero.shard<tensor<4xf32>>
    %wp = zero.gather_wait %tp : tensor<4xf32>
    %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
    %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
    %wa = zero.gather_wait %ta : tensor<90x125xf32>
    %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wa : tensor<90x125xf32>
    %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
    %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
    %wb = zero.gather_wait %tb : tensor<90x125xf32>
    %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %wb : tensor<90x125xf32>
    %r1 = nn.relu %1 : tensor<90x125xf32>
    %r2 = nn.relu %r1 : tensor<90x125xf32>
    %r3 = nn.relu %r2 : tensor<90x125xf32>
    %r4 = nn.add %r3, %r1 : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    %r5 = nn.relu %r4 : tensor<90x125xf32>
    %r6 = nn.relu %r5 : tensor<90x125xf32>
    return %r6 : tensor<90x125xf32>
  }
  func.func @generate_end() {
    return
  }
}

//--- short.mlir

// Little compute after the last gather: the start climbs to right below
// @gb's gather_start (comm order) and no further, in @prefill. In @decode,
// where @ga is read last (a tied head), it stays below the copy's release
// although the compute after it (two relus, 12 us) does not cover the
// collective: it would overwrite the copy being read. @prefill has no
// shard of @ga: one is made at its top.
// CHECK-LABEL: func.func @prefill
// CHECK-NEXT: %[[SA:.*]] = zero.shard @a
// CHECK-NEXT: %[[SB:.*]] = zero.shard @b
// CHECK-NEXT: zero.gather_start %[[SB]] {group = @gb}
// CHECK-NEXT: zero.carry_start %[[SA]] {group = @ga}
// CHECK-NEXT: zero.gather_wait
// CHECK-LABEL: func.func @decode
// CHECK: %[[A:.*]] = zero.carry_wait
// CHECK: zero.gather_start
// CHECK: nn.add %{{.*}}, %[[A]]
// CHECK-NEXT: zero.release %[[A]]
// CHECK-NEXT: zero.carry_start
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: return
nn.parameter @a : tensor<90x125xf32>
nn.parameter @b : tensor<90x125xf32>
zero.group @ga {params = [@a], padded_elements = 11264 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 11264 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
  %wb = zero.gather_wait %tb : tensor<90x125xf32>
  %0 = nn.add %x, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wb : tensor<90x125xf32>
  return %0 : tensor<90x125xf32>
}
func.func @decode(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
  %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
  %wa = zero.gather_wait %ta : tensor<90x125xf32>
  %0 = nn.add %x, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  %sb = zero.shard @b : !zero.shard<tensor<90x125xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<90x125xf32>>
  %wb = zero.gather_wait %tb : tensor<90x125xf32>
  %1 = nn.add %0, %wb : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wb : tensor<90x125xf32>
  %2 = nn.add %1, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wa : tensor<90x125xf32>
  %3 = nn.relu %2 : tensor<90x125xf32>
  %4 = nn.relu %3 : tensor<90x125xf32>
  return %4 : tensor<90x125xf32>
}
func.func @generate_end() {
  return
}

//--- hidden.mlir

// @decode's first gather is already hidden at the token's start (six
// relus, 36 us, before its wait) and the tail has nothing to hide it
// behind: carrying it would make the step 21.264 us longer, so the module
// is left alone and says why.
// CHECK: module attributes {zplan.carry_skipped = {bytes = 45056 : i64, group = @ga, reason = "carrying it would not shorten a decode step (66.264 us with the carry, 45.000 us without): the tail hides less of its gather than the token's start does"}}
// CHECK-NOT: zero.carry
nn.parameter @a : tensor<90x125xf32>
zero.group @ga {params = [@a], padded_elements = 11264 : i64, world_size = 4 : i64}
func.func @prefill(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  return %x : tensor<90x125xf32>
}
func.func @decode(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
  %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<90x125xf32>>
  %r1 = nn.relu %x : tensor<90x125xf32>
  %r2 = nn.relu %r1 : tensor<90x125xf32>
  %r3 = nn.relu %r2 : tensor<90x125xf32>
  %r4 = nn.relu %r3 : tensor<90x125xf32>
  %r5 = nn.relu %r4 : tensor<90x125xf32>
  %r6 = nn.relu %r5 : tensor<90x125xf32>
  %wa = zero.gather_wait %ta : tensor<90x125xf32>
  %0 = nn.add %r6, %wa : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %wa : tensor<90x125xf32>
  return %0 : tensor<90x125xf32>
}
func.func @generate_end() {
  return
}

//--- resident.mlir

// Every sharded group resident: nothing is streamed, nothing carried.
// CHECK-NOT: zplan.carry
// CHECK-NOT: zero.carry
nn.parameter @a : tensor<90x125xf32>
zero.group @ga {params = [@a], padded_elements = 11264 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @ga}
  return
}
func.func @prefill(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
  %a = zero.resident_read %sa {group = @ga} : !zero.shard<tensor<90x125xf32>> -> tensor<90x125xf32>
  %0 = nn.add %x, %a : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  return %0 : tensor<90x125xf32>
}
func.func @decode(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<90x125xf32>>
  %a = zero.resident_read %sa {group = @ga} : !zero.shard<tensor<90x125xf32>> -> tensor<90x125xf32>
  %0 = nn.add %x, %a : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  return %0 : tensor<90x125xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @ga}
  return
}

//--- serial.json
{
  "name": "cpu",
  "matmul_flops_per_second": 50e9,
  "f32_matmul_flops_per_second": 50e9,
  "vector_flops_per_second": 20e9,
  "memory_bytes_per_second": 15e9,
  "collective_bytes_per_second": 3e9,
  "collective_latency_seconds": 10e-6,
  "compute_slowdown_during_collective": 1,
  "sources": {
    "matmul_flops_per_second": "test", "f32_matmul_flops_per_second": "test",
    "vector_flops_per_second": "test", "memory_bytes_per_second": "test",
    "collective_bytes_per_second": "test", "collective_latency_seconds": "test",
    "compute_slowdown_during_collective": "test: compute pays all of it"
  }
}

//--- old.json
{
  "name": "cpu",
  "matmul_flops_per_second": 50e9,
  "f32_matmul_flops_per_second": 50e9,
  "vector_flops_per_second": 20e9,
  "memory_bytes_per_second": 15e9,
  "collective_bytes_per_second": 3e9,
  "collective_latency_seconds": 10e-6,
  "sources": {
    "matmul_flops_per_second": "test", "f32_matmul_flops_per_second": "test",
    "vector_flops_per_second": "test", "memory_bytes_per_second": "test",
    "collective_bytes_per_second": "test", "collective_latency_seconds": "test"
  }
}
