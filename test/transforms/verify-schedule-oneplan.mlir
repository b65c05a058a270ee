// The schedule verifier on one plan for training and generation (Passes.td,
// rules 20-22, and the rules they build on; docs/one-plan.md section 4): a
// valid train,generate module passes unchanged; each way a program boundary
// could leave a gathered copy live, a gradient accumulator half-reduced or
// touched by generation, or a layer could read a shard, is named.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/valid.mlir -zplan-decode-lockstep -zplan-verify-schedule | FileCheck %t/valid.mlir
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics -zplan-verify-schedule

//--- valid.mlir

// The training programs gather the resident group as any other; the
// generation programs read its copy; only the training step and the
// optimizer step touch gradient state.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: zero.gather_start %{{.*}} {group = @g}
// CHECK: zero.reduce_scatter_wait
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: zero.optimizer_update @g
// CHECK-LABEL: func.func @generate_begin
// CHECK-NEXT: zero.resident_gather {group = @g}
// CHECK-LABEL: func.func @decode
// CHECK: zero.resident_read
// CHECK-LABEL: func.func @generate_end
// CHECK-NEXT: zero.resident_release {group = @g}
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64, resident}
func.func @train_micro_step(%x: tensor<1x4xf32>, %dw: tensor<4x4xf32>) -> tensor<1x4xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %s {group = @g} : !zero.shard<tensor<4x4xf32>>
  %w = zero.gather_wait %t : tensor<4x4xf32>
  %y = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  zero.release %w : tensor<4x4xf32>
  %r = zero.reduce_scatter_start %dw {group = @g} : tensor<4x4xf32>
  %a = zero.grad_shard @w : !zero.shard<tensor<4x4xf32>>
  %n = zero.reduce_scatter_wait %r accumulate(%a : !zero.shard<tensor<4x4xf32>>) : !zero.shard<tensor<4x4xf32>>
  return %y : tensor<1x4xf32>
}
func.func @optimizer_step(%h: tensor<8xf32>) {
  zero.optimizer_update @g, %h {optimizer = "adamw"} : tensor<8xf32>
  return
}
func.func @generate_begin() {
  zero.resident_gather {group = @g}
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %w = zero.resident_read %s {group = @g} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %y = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @g}
  return
}

//--- invalid.mlir

// Rule 20: a gather token handed across the boundary (a collective
// started in one program, completed in another).
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
// expected-error @+1 {{@decode takes '!zero.gather_token' (argument #0): a shard or a collective would cross a program boundary}}
func.func @decode(%t: !zero.gather_token) {
  return
}

// -----

// A gathered copy returned from a program: rule 3 already names it (the
// return reads the copy after its release), before rule 20.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @train_micro_step() -> tensor<16xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %s {group = @g} : !zero.shard<tensor<4x4xf32>>
  %w = zero.gather_wait %t : tensor<4x4xf32>
  %v = nn.reshape %w : tensor<4x4xf32> -> tensor<16xf32>
  zero.release %w : tensor<4x4xf32>
  // expected-error @+1 {{reads parameter 'w' of group @g after its release}}
  return %v : tensor<16xf32>
}

// -----

// Rule 20: a shard handed across the boundary (the next program would
// gather what the previous one chose).
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
// expected-error @+1 {{@prefill takes '!zero.shard<tensor<4x4xf32>>' (argument #0): a shard or a collective would cross a program boundary}}
func.func @prefill(%s: !zero.shard<tensor<4x4xf32>>) {
  %t = zero.gather_start %s {group = @g} : !zero.shard<tensor<4x4xf32>>
  %w = zero.gather_wait %t : tensor<4x4xf32>
  zero.release %w : tensor<4x4xf32>
  return
}

// -----

// No accumulator half-reduced at a program boundary: a reduce-scatter whose
// wait would be left to the next program is refused by the op verifier (a
// start's one use is its wait, in the same function), before rule 20.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @train_micro_step(%dw: tensor<4x4xf32>) -> !zero.reduce_token {
  // expected-error @+1 {{token must be completed by a zero.reduce_scatter_wait, but its only use is 'func.return'}}
  %r = zero.reduce_scatter_start %dw {group = @g} : tensor<4x4xf32>
  return %r : !zero.reduce_token
}

// -----

// No gathered copy live at a program boundary (rule 4): the prefill of a
// train,generate module keeps a streamed group's copy past its end.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @train_micro_step(%dw: tensor<4x4xf32>) {
  %r = zero.reduce_scatter_start %dw {group = @g} : tensor<4x4xf32>
  %a = zero.grad_shard @w : !zero.shard<tensor<4x4xf32>>
  %n = zero.reduce_scatter_wait %r accumulate(%a : !zero.shard<tensor<4x4xf32>>) : !zero.shard<tensor<4x4xf32>>
  return
}
func.func @prefill(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %s {group = @g} : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{the gathered copy of group @g (parameter 'w') is never released}}
  %w = zero.gather_wait %t : tensor<4x4xf32>
  %y = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

// Rule 21: generation that reduces gradients: run inside an accumulation
// window, it would add to the accumulators the window is summing.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @decode(%dw: tensor<4x4xf32>) {
  // expected-error @+1 {{'zero.reduce_scatter_start' op touches the gradients of group @g (collective) in @decode; only @train_micro_step may: the gradient accumulators and optimizer state belong to @train_micro_step and @optimizer_step, so generation (also inside a gradient-accumulation window) and @forward leave them untouched}}
  %r = zero.reduce_scatter_start %dw {group = @g} : tensor<4x4xf32>
  %a = zero.grad_shard @w : !zero.shard<tensor<4x4xf32>>
  %n = zero.reduce_scatter_wait %r accumulate(%a : !zero.shard<tensor<4x4xf32>>) : !zero.shard<tensor<4x4xf32>>
  return
}

// -----

// Rule 21: a transition that applies the optimizer (generate_end would
// update the weights in the middle of an accumulation window).
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @generate_end(%h: tensor<8xf32>) {
  // expected-error @+1 {{'zero.optimizer_update' op touches the gradient and optimizer state of group @g in @generate_end; only @optimizer_step may}}
  zero.optimizer_update @g, %h {optimizer = "adamw"} : tensor<8xf32>
  return
}

// -----

// Rule 21: @forward reading a gradient accumulator (a partial sum).
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64}
func.func @forward() {
  // expected-error @+1 {{'zero.grad_shard' op touches the gradient accumulator of parameter 'w' in @forward; only @train_micro_step may}}
  %a = zero.grad_shard @w : !zero.shard<tensor<4x4xf32>>
  return
}

// -----

// Rule 22: a layer that bypasses the gather (hook-based ZeRO-3's empty
// weight): the shard reinterpreted as a tensor and fed to an nn op is named
// at the nn op, with the parameter.
nn.parameter @w : tensor<4x4xf32>
zero.group @g {params = [@w], padded_elements = 16 : i64, world_size = 2 : i64, resident}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %w = builtin.unrealized_conversion_cast %s : !zero.shard<tensor<4x4xf32>> to tensor<4x4xf32>
  // expected-error @+1 {{'nn.matmul' op reads parameter 'w' from its shard through 'builtin.unrealized_conversion_cast', without gathering it: it would see this rank's slice only}}
  %y = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

// The same bypass without a cast is a type error: an nn op takes tensors,
// and a shard is not one.
nn.parameter @w : tensor<4x4xf32>
func.func @train_micro_step(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  // expected-error @+1 {{'nn.matmul' op operand #1 must be statically shaped tensor}}
  %y = "nn.matmul"(%x, %s) : (tensor<1x4xf32>, !zero.shard<tensor<4x4xf32>>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}
