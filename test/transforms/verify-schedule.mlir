// The schedule verifier accepts a correct schedule at exactly its peak and
// rejects one violation of each rule of Passes.td, naming what is wrong.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/valid.mlir -zplan-verify-schedule="memory-budget=3072" | FileCheck %t/valid.mlir
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics -zplan-verify-schedule
// RUN: zcc-opt %t/budget.mlir -verify-diagnostics -zplan-verify-schedule="memory-budget=3071"

//--- valid.mlir

// A tied weight gathered twice around a big group, a weight read through a
// view before its release, a persistent group kept from the top to the end.
// Shards and persistent groups: @ge 256 / 4 + @gm 2048 / 4 + @gp 128 whole
// = 704 B. Peak at fc1: @gm's copy 2048 + fc1 256 + embed 64 = 2368 B;
// 704 + 2368 = 3072 B, exactly the budget (budget.mlir: one byte less).
// The verifier changes nothing.
// CHECK-LABEL: func.func @valid
// CHECK: %[[TG:.*]] = zero.gather_start %{{.*}} {group = @gp}
// CHECK: %[[TE1:.*]] = zero.gather_start %{{.*}} {group = @ge}
// CHECK: %[[TM:.*]] = zero.gather_start %{{.*}}, %{{.*}} {group = @gm}
// CHECK: %[[M:.*]]:2 = zero.gather_wait %[[TM]]
// CHECK: nn.reshape %[[M]]#1
// CHECK: zero.release %[[M]]#0, %[[M]]#1
// CHECK: %[[TE2:.*]] = zero.gather_start %{{.*}} {group = @ge}
// CHECK: return
nn.parameter @e : tensor<8x8xf32>
nn.parameter @m1 : tensor<8x32xf32>
nn.parameter @m2 : tensor<256xf32>
nn.parameter @g : tensor<8xf32>
zero.group @ge {params = [@e], padded_elements = 64 : i64, world_size = 4 : i64}
zero.group @gm {params = [@m1, @m2], padded_elements = 512 : i64, world_size = 4 : i64}
zero.group @gp {params = [@g], padded_elements = 32 : i64, persistent, world_size = 4 : i64}
func.func @valid(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sg = zero.shard @g : !zero.shard<tensor<8xf32>>
  %tg = zero.gather_start %sg {group = @gp} : !zero.shard<tensor<8xf32>>
  %g = zero.gather_wait %tg : tensor<8xf32>
  %se = zero.shard @e : !zero.shard<tensor<8x8xf32>>
  %s1 = zero.shard @m1 : !zero.shard<tensor<8x32xf32>>
  %s2 = zero.shard @m2 : !zero.shard<tensor<256xf32>>
  %te = zero.gather_start %se {group = @ge} : !zero.shard<tensor<8x8xf32>>
  %e = zero.gather_wait %te : tensor<8x8xf32>
  %0 = nn.matmul %x, %e : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  zero.release %e : tensor<8x8xf32>
  %tm = zero.gather_start %s1, %s2 {group = @gm} : !zero.shard<tensor<8x32xf32>>, !zero.shard<tensor<256xf32>>
  %m1, %m2 = zero.gather_wait %tm : tensor<8x32xf32>, tensor<256xf32>
  %1 = nn.matmul %0, %m1 : (tensor<2x8xf32>, tensor<8x32xf32>) -> tensor<2x32xf32>
  %v = nn.reshape %m2 : tensor<256xf32> -> tensor<32x8xf32>
  %2 = nn.matmul %1, %v : (tensor<2x32xf32>, tensor<32x8xf32>) -> tensor<2x8xf32>
  zero.release %m1, %m2 : tensor<8x32xf32>, tensor<256xf32>
  %te2 = zero.gather_start %se {group = @ge} : !zero.shard<tensor<8x8xf32>>
  %e2 = zero.gather_wait %te2 : tensor<8x8xf32>
  %3 = nn.matmul %2, %e2 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  zero.release %e2 : tensor<8x8xf32>
  %4 = nn.add %3, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

//--- budget.mlir

// Rule 5: valid.mlir's schedule at 3071 B. The peak is first reached at fc1
// (op #12); embed is named as the importer names nodes, fc1 is not, so that
// the error lands on this file's line.
nn.parameter @e : tensor<8x8xf32>
nn.parameter @m1 : tensor<8x32xf32>
nn.parameter @m2 : tensor<256xf32>
nn.parameter @g : tensor<8xf32>
zero.group @ge {params = [@e], padded_elements = 64 : i64, world_size = 4 : i64}
zero.group @gm {params = [@m1, @m2], padded_elements = 512 : i64, world_size = 4 : i64}
zero.group @gp {params = [@g], padded_elements = 32 : i64, persistent, world_size = 4 : i64}
func.func @over_budget(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sg = zero.shard @g : !zero.shard<tensor<8xf32>>
  %tg = zero.gather_start %sg {group = @gp} : !zero.shard<tensor<8xf32>>
  %g = zero.gather_wait %tg : tensor<8xf32>
  %se = zero.shard @e : !zero.shard<tensor<8x8xf32>>
  %s1 = zero.shard @m1 : !zero.shard<tensor<8x32xf32>>
  %s2 = zero.shard @m2 : !zero.shard<tensor<256xf32>>
  %te = zero.gather_start %se {group = @ge} : !zero.shard<tensor<8x8xf32>>
  %e = zero.gather_wait %te : tensor<8x8xf32>
  %0 = nn.matmul %x, %e : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("embed")
  zero.release %e : tensor<8x8xf32>
  %tm = zero.gather_start %s1, %s2 {group = @gm} : !zero.shard<tensor<8x32xf32>>, !zero.shard<tensor<256xf32>>
  %m1, %m2 = zero.gather_wait %tm : tensor<8x32xf32>, tensor<256xf32>
  // expected-error @+1 {{does not fit the memory budget of 3071 B per rank, in the schedule as placed: at op #12 (nn.matmul) shards and persistent groups hold 704 B and live buffers 2368 B, 1 B over; live buffers: gathered group @gm (2048 B); nn.matmul (256 B); nn.matmul 'embed' (64 B);}}
  %1 = nn.matmul %0, %m1 : (tensor<2x8xf32>, tensor<8x32xf32>) -> tensor<2x32xf32>
  %v = nn.reshape %m2 : tensor<256xf32> -> tensor<32x8xf32>
  %2 = nn.matmul %1, %v : (tensor<2x32xf32>, tensor<32x8xf32>) -> tensor<2x8xf32>
  zero.release %m1, %m2 : tensor<8x32xf32>, tensor<256xf32>
  %te2 = zero.gather_start %se {group = @ge} : !zero.shard<tensor<8x8xf32>>
  %e2 = zero.gather_wait %te2 : tensor<8x8xf32>
  %3 = nn.matmul %2, %e2 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  zero.release %e2 : tensor<8x8xf32>
  %4 = nn.add %3, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

//--- invalid.mlir

// Rule 1: a shard flows somewhere other than a gather (here out of the
// program, where nothing would gather it).
nn.parameter @w : tensor<4x8xf32>
func.func @shard_escapes() -> !zero.shard<tensor<4x8xf32>> {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  // expected-error @+1 {{reads the shard of parameter 'w' without gathering it: only zero.gather_start may consume a parameter shard}}
  return %s : !zero.shard<tensor<4x8xf32>>
}

// -----

// Rule 2: a gather outside any group (the import's form).
nn.parameter @w : tensor<4x8xf32>
func.func @no_group(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  // expected-error @+1 {{gathers shards outside any zero.group (run zplan-shard-parameters first)}}
  %t = zero.gather_start %s : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %t : tensor<4x8xf32>
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  zero.release %w : tensor<4x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 3: a read after the release.
nn.parameter @w : tensor<4x8xf32>
zero.group @gw {params = [@w], padded_elements = 32 : i64, world_size = 4 : i64}
func.func @use_after_release(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %t : tensor<4x8xf32>
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  zero.release %w : tensor<4x8xf32>
  // expected-error @+1 {{reads parameter 'w' of group @gw after its release}}
  %1 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %2 = nn.add %0, %1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %2 : tensor<2x8xf32>
}

// -----

// Rule 3 through a view: the reshape is taken before the release, its
// reader comes after.
nn.parameter @w : tensor<32xf32>
zero.group @gw {params = [@w], padded_elements = 32 : i64, world_size = 4 : i64}
func.func @view_after_release(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %s = zero.shard @w : !zero.shard<tensor<32xf32>>
  %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<32xf32>>
  %w = zero.gather_wait %t : tensor<32xf32>
  %v = nn.reshape %w : tensor<32xf32> -> tensor<4x8xf32>
  zero.release %w : tensor<32xf32>
  // expected-error @+1 {{reads parameter 'w' of group @gw after its release}}
  %0 = nn.matmul %x, %v : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 4: never released.
nn.parameter @w : tensor<4x8xf32>
nn.parameter @b : tensor<8xf32>
zero.group @gw {params = [@w, @b], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @never_released(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<8xf32>>
  %t = zero.gather_start %sw, %sb {group = @gw} : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<8xf32>>
  // expected-error @+1 {{the gathered copy of group @gw (parameter 'w', ...) is never released}}
  %w, %b = zero.gather_wait %t : tensor<4x8xf32>, tensor<8xf32>
  %0 = nn.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 4: released twice.
nn.parameter @w : tensor<4x8xf32>
zero.group @gw {params = [@w], padded_elements = 32 : i64, world_size = 4 : i64}
func.func @released_twice(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %t : tensor<4x8xf32>
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  zero.release %w : tensor<4x8xf32>
  // expected-error @+1 {{releases the gathered copy of group @gw a second time}}
  zero.release %w : tensor<4x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 4: only part of the group released.
nn.parameter @w : tensor<4x8xf32>
nn.parameter @b : tensor<8xf32>
zero.group @gw {params = [@w, @b], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @partial_release(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<8xf32>>
  %t = zero.gather_start %sw, %sb {group = @gw} : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<8xf32>>
  %w, %b = zero.gather_wait %t : tensor<4x8xf32>, tensor<8xf32>
  %0 = nn.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // expected-error @+1 {{must release the whole gathered copy of group @gw (2 tensors) at once, and nothing else; it releases 1 of them and 0 other tensors}}
  zero.release %w : tensor<4x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 4: released in two halves is partial, not a second release.
nn.parameter @w : tensor<4x8xf32>
nn.parameter @b : tensor<8xf32>
zero.group @gw {params = [@w, @b], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @released_in_halves(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<8xf32>>
  %t = zero.gather_start %sw, %sb {group = @gw} : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<8xf32>>
  %w, %b = zero.gather_wait %t : tensor<4x8xf32>, tensor<8xf32>
  %0 = nn.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // expected-error @+1 {{must release the whole gathered copy of group @gw (2 tensors) at once, and nothing else; it releases 1 of them and 0 other tensors}}
  zero.release %b : tensor<8xf32>
  zero.release %w : tensor<4x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 4: one release for two groups.
nn.parameter @w : tensor<4x8xf32>
nn.parameter @v : tensor<8x8xf32>
zero.group @gw {params = [@w], padded_elements = 32 : i64, world_size = 4 : i64}
zero.group @gv {params = [@v], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @release_two_groups(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %sv = zero.shard @v : !zero.shard<tensor<8x8xf32>>
  %tw = zero.gather_start %sw {group = @gw} : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %tw : tensor<4x8xf32>
  %tv = zero.gather_start %sv {group = @gv} : !zero.shard<tensor<8x8xf32>>
  %v = zero.gather_wait %tv : tensor<8x8xf32>
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %1 = nn.matmul %0, %v : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  // expected-error @+1 {{must release the whole gathered copy of group @gw (1 tensors) at once, and nothing else; it releases 1 of them and 1 other tensors}}
  zero.release %w, %v : tensor<4x8xf32>, tensor<8x8xf32>
  return %1 : tensor<2x8xf32>
}

// -----

// Rule 4: a persistent group stays gathered.
nn.parameter @g : tensor<8xf32>
zero.group @gp {params = [@g], padded_elements = 32 : i64, persistent, world_size = 4 : i64}
func.func @persistent_released(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = zero.shard @g : !zero.shard<tensor<8xf32>>
  %t = zero.gather_start %s {group = @gp} : !zero.shard<tensor<8xf32>>
  %g = zero.gather_wait %t : tensor<8xf32>
  %0 = nn.add %x, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // expected-error @+1 {{releases persistent group @gp, which must stay gathered}}
  zero.release %g : tensor<8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Rule 6: a second block. Without cf it can only be unreachable, which is
// still more than one straight-line block.
// expected-error @+1 {{a scheduled function must be one straight-line block (the collective sequence must not depend on the rank)}}
func.func @two_blocks(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = nn.relu %x : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
^bb1:
  %1 = nn.relu %x : tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// -----

// Rule 6: an op with a region (the registered dialects offer builtin.module).
func.func @op_with_region(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = nn.relu %x : tensor<2x8xf32>
  // expected-error @+1 {{ops with regions are not allowed in a scheduled function: they could make the collective sequence depend on the rank}}
  builtin.module {
  }
  return %0 : tensor<2x8xf32>
}
