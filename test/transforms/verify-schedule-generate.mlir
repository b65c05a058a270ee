// The schedule verifier's rules for generation (Passes.td, rules 10-12): a
// resident group's copy is gathered once in @generate_begin, read (never
// gathered, never released) in @prefill and @decode, and released once in
// @generate_end. A valid module passes unchanged; each violation is named.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/valid.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/valid.mlir
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics -zplan-verify-schedule

//--- valid.mlir

// CHECK-LABEL: func.func @generate_begin
// CHECK-NEXT: zero.resident_gather {group = @g}
// CHECK-LABEL: func.func @decode
// CHECK: zero.resident_read
// CHECK: zero.gather_start %{{.*}} {group = @s}
// CHECK: zero.release
// CHECK-LABEL: func.func @generate_end
// CHECK-NEXT: zero.resident_release {group = @g}
nn.parameter @w : tensor<4x4xf32>
nn.parameter @v : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
zero.group @s {params = [@v], padded_elements = 16 : i64, world_size = 4 : i64}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %w = zero.resident_read %sw {group = @g} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %sv = zero.shard @v : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %sv {group = @s} : !zero.shard<tensor<4x4xf32>>
  %v = zero.gather_wait %t : tensor<4x4xf32>
  %1 = nn.matmul %0, %v : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %v : tensor<4x4xf32>
  return %1 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}

//--- invalid.mlir

// Rule 10: a resident group gathered outside @generate_begin.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @prefill() {
  // expected-error @+1 {{gathers resident group @g in @prefill; only @generate_begin may}}
  zero.resident_gather {group = @g}
  return
}

// -----

// Rule 10: gathered twice.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  // expected-error @+1 {{gathers resident group @g a second time}}
  zero.resident_gather {group = @g}
  return
}

// -----

// Rule 10: released in @decode, so the next token would read a released
// copy.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @decode() {
  // expected-error @+1 {{releases resident group @g in @decode; only @generate_end may (a later program would read a released copy)}}
  zero.resident_release {group = @g}
  return
}

// -----

// Rule 10: released twice.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  // expected-error @+1 {{releases resident group @g a second time}}
  zero.resident_release {group = @g}
  return
}

// -----

// Rule 10: a resident group that @generate_begin never gathers.
nn.parameter @w : tensor<4x4xf32>
// expected-error @+1 {{resident group @g is never gathered in @generate_begin}}
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  return
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}

// -----

// Rule 10: a resident group that @generate_end never releases.
nn.parameter @w : tensor<4x4xf32>
// expected-error @+1 {{resident group @g is never released in @generate_end}}
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @generate_end() {
  return
}

// -----

// Rule 11: read outside @prefill and @decode.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @generate_end() -> tensor<4x4xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{reads resident group @g in @generate_end; only @prefill and @decode may}}
  %w = zero.resident_read %sw {group = @g} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  zero.resident_release {group = @g}
  return %w : tensor<4x4xf32>
}

// -----

// Rule 11: the resident copy released inside @decode (through a view): the
// release's own verifier refuses it (it releases only gathered copies).
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %w = zero.resident_read %sw {group = @g} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %r = nn.reshape %w : tensor<4x4xf32> -> tensor<16xf32>
  %0 = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  // expected-error @+1 {{'zero.release' op operand 0 is not a gathered parameter (it must be a result of zero.gather_wait or zero.carry_wait)}}
  zero.release %r : tensor<16xf32>
  return %0 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}

// -----

// Rule 12: a resident group gathered again inside @decode.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{gathers resident group @g in @decode: its copy is gathered once in @generate_begin and read with zero.resident_read}}
  %t = zero.gather_start %sw {group = @g} : !zero.shard<tensor<4x4xf32>>
  %w = zero.gather_wait %t : tensor<4x4xf32>
  %0 = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %w : tensor<4x4xf32>
  return %0 : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}
