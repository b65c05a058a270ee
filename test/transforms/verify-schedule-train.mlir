// The training rules of zplan-verify-schedule (7-9 in Passes.td), one
// violation per case.
// RUN: zcc-opt %s -split-input-file -verify-diagnostics -zplan-verify-schedule

// Rule 7: a reduce-scatter outside any group.
nn.parameter @w : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
func.func @train_micro_step(%g: tensor<8xf32>) {
  // expected-error @+1 {{reduces gradients outside any zero.group}}
  %t = zero.reduce_scatter_start %g : tensor<8xf32>
  %a = zero.grad_shard @w : !zero.shard<tensor<8xf32>>
  %n = zero.reduce_scatter_wait %t accumulate(%a : !zero.shard<tensor<8xf32>>) : !zero.shard<tensor<8xf32>>
  return
}

// -----

// Rule 7: accumulated into another parameter's gradient shard.
nn.parameter @w : tensor<8xf32>
nn.parameter @v : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
zero.group @group1 {padded_elements = 8 : i64, params = [@v], world_size = 2 : i64}
func.func @train_micro_step(%g: tensor<8xf32>) {
  %t = zero.reduce_scatter_start %g {group = @group0} : tensor<8xf32>
  %a = zero.grad_shard @v : !zero.shard<tensor<8xf32>>
  // expected-error @+1 {{accumulates group @group0 into the gradient shard of 'v' where @w belongs}}
  %n = zero.reduce_scatter_wait %t accumulate(%a : !zero.shard<tensor<8xf32>>) : !zero.shard<tensor<8xf32>>
  return
}

// -----

// Rule 7: the reduce-scatter's result is never accumulated (no accumulators).
nn.parameter @w : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
func.func @train_micro_step(%g: tensor<8xf32>) {
  %t = zero.reduce_scatter_start %g {group = @group0} : tensor<8xf32>
  // expected-error @+1 {{must accumulate the reduce-scatter of group @group0 into the gradient shards of its parameters}}
  %n = zero.reduce_scatter_wait %t : !zero.shard<tensor<8xf32>>
  return
}

// -----

// Rule 8: a gradient shard read by anything but its wait (here gathered as
// if it were the parameter: a read of a partial sum).
nn.parameter @w : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
func.func @train_micro_step() {
  %a = zero.grad_shard @w : !zero.shard<tensor<8xf32>>
  // expected-error @+1 {{gathers the gradient shard of parameter 'w' as if it were the parameter}}
  %t = zero.gather_start %a {group = @group0} : !zero.shard<tensor<8xf32>>
  %x = zero.gather_wait %t : tensor<8xf32>
  zero.release %x : tensor<8xf32>
  return
}

// -----

// Rule 9: the optimizer step gathers a parameter.
nn.parameter @w : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
func.func @optimizer_step(%h: tensor<8xf32>) {
  zero.optimizer_update @group0, %h {optimizer = "adamw"} : tensor<8xf32>
  // expected-error @+1 {{'zero.shard' in @optimizer_step: the optimizer step may only update shards}}
  %s = zero.shard @w : !zero.shard<tensor<8xf32>>
  %t = zero.gather_start %s {group = @group0} : !zero.shard<tensor<8xf32>>
  %x = zero.gather_wait %t : tensor<8xf32>
  zero.release %x : tensor<8xf32>
  return
}

// -----

// Rule 9: a group the optimizer step never updates.
nn.parameter @w : tensor<8xf32>
nn.parameter @v : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
zero.group @group1 {padded_elements = 8 : i64, params = [@v], world_size = 2 : i64}
// expected-error @+1 {{@optimizer_step never updates group @group1}}
func.func @optimizer_step(%h: tensor<8xf32>) {
  zero.optimizer_update @group0, %h {optimizer = "adamw"} : tensor<8xf32>
  return
}

// -----

// Rule 9: a group updated twice.
nn.parameter @w : tensor<8xf32>
zero.group @group0 {padded_elements = 8 : i64, params = [@w], world_size = 2 : i64}
func.func @optimizer_step(%h: tensor<8xf32>) {
  zero.optimizer_update @group0, %h {optimizer = "adamw"} : tensor<8xf32>
  // expected-error @+1 {{updates group @group0 a second time}}
  zero.optimizer_update @group0, %h {optimizer = "sgd"} : tensor<8xf32>
  return
}
