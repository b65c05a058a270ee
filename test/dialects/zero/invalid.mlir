// Every error path of the zero verifiers (dialects/zero/ZeroOps.cpp): group
// layouts, shard reads, the start/wait pairing of both collectives, and
// releases.
// RUN: zcc-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// zero.group
//===----------------------------------------------------------------------===//

nn.parameter @w : tensor<64x64xf32>
// expected-error @+1 {{'zero.group' op must hold at least one parameter}}
zero.group @g {params = [], padded_elements = 0 : i64, world_size = 4 : i64}

// -----

nn.parameter @w : tensor<64xf32>
// expected-error @+1 {{'zero.group' op lists parameter @w twice}}
zero.group @g {params = [@w, @w], padded_elements = 128 : i64, world_size = 4 : i64}

// -----

nn.parameter @w : tensor<64xf32>
// expected-error @+1 {{'zero.group' op world_size is 0, expected >= 1}}
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 0 : i64}

// -----

nn.parameter @w : tensor<64xf32>
// expected-error @+1 {{'zero.group' op world_size is -4, expected >= 1}}
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = -4 : i64}

// -----

nn.parameter @w : tensor<64xf32>
// expected-error @+1 {{'zero.group' op padded_elements 65 is not a multiple of world_size 4}}
zero.group @g {params = [@w], padded_elements = 65 : i64, world_size = 4 : i64}

// -----

// A padding that leaves too few elements for the parameters.
nn.parameter @w : tensor<64x64xf32>
nn.parameter @b : tensor<64xf32>
// expected-error @+1 {{'zero.group' op padded_elements 4096 is smaller than the 4160 elements of its parameters}}
zero.group @g {params = [@w, @b], padded_elements = 4096 : i64, world_size = 4 : i64}

// -----

nn.parameter @w : tensor<64xf32>
// expected-error @+1 {{'zero.group' op padded_elements -64 is smaller than the 64 elements of its parameters}}
zero.group @g {params = [@w], padded_elements = -64 : i64, world_size = 4 : i64}

// -----

nn.parameter @w : tensor<64xf32>
// expected-error @+1 {{'zero.group' op names @missing, which is not an nn.parameter}}
zero.group @g {params = [@w, @missing], padded_elements = 128 : i64, world_size = 4 : i64}

// -----

// A symbol of another kind is no parameter either.
nn.parameter @w : tensor<64xf32>
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 4 : i64}
// expected-error @+1 {{'zero.group' op names @g, which is not an nn.parameter}}
zero.group @h {params = [@g], padded_elements = 64 : i64, world_size = 4 : i64}

// -----

nn.parameter @w : tensor<64xf32>
func.func @group_in_function() {
  // expected-error @+1 {{'zero.group' op expects parent op 'builtin.module'}}
  zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 4 : i64}
  return
}

//===----------------------------------------------------------------------===//
// zero.shard
//===----------------------------------------------------------------------===//

// -----

func.func @shard_of_unknown_symbol() {
  // expected-error @+1 {{'zero.shard' op names @missing, which is not an nn.parameter}}
  %s = zero.shard @missing : !zero.shard<tensor<64xf32>>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @shard_of_group() {
  // expected-error @+1 {{'zero.shard' op names @g, which is not an nn.parameter}}
  %s = zero.shard @g : !zero.shard<tensor<64xf32>>
  return
}

// -----

nn.parameter @w : tensor<64x64xf32>
func.func @shard_wrong_shape() {
  // expected-error @+1 {{'zero.shard' op result is a shard of 'tensor<4096xf32>', but @w is 'tensor<64x64xf32>'}}
  %s = zero.shard @w : !zero.shard<tensor<4096xf32>>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @shard_wrong_element() {
  // expected-error @+1 {{'zero.shard' op result is a shard of 'tensor<64xf16>', but @w is 'tensor<64xf32>'}}
  %s = zero.shard @w : !zero.shard<tensor<64xf16>>
  return
}

// -----

func.func @grad_shard_missing() {
  // expected-error @+1 {{'zero.grad_shard' op names @missing, which is not an nn.parameter}}
  %s = zero.grad_shard @missing : !zero.shard<tensor<64xf32>>
  return
}

// -----

nn.parameter @w : tensor<64x64xf32>
func.func @grad_shard_wrong_shape() {
  // expected-error @+1 {{'zero.grad_shard' op result is a shard of 'tensor<4096xf32>', but @w is 'tensor<64x64xf32>'}}
  %s = zero.grad_shard @w : !zero.shard<tensor<4096xf32>>
  return
}

// -----

// A frozen parameter has no gradient.
nn.parameter @w {frozen = "a buffer"} : tensor<64xf32>
func.func @grad_shard_frozen() {
  // expected-error @+1 {{'zero.grad_shard' op @w is frozen: it has no gradient}}
  %s = zero.grad_shard @w : !zero.shard<tensor<64xf32>>
  return
}

// -----

// A group is frozen, or not, as a whole.
nn.parameter @w {frozen = "a buffer"} : tensor<64xf32>
nn.parameter @v : tensor<64xf32>
// expected-error @+1 {{'zero.group' op is frozen, but @v is not frozen}}
zero.group @g {frozen, params = [@w, @v], padded_elements = 128 : i64, world_size = 1 : i64}

// -----

nn.parameter @w {frozen = "--freeze 'w'"} : tensor<64xf32>
// expected-error @+1 {{'zero.group' op is not frozen, but @w is frozen}}
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 1 : i64}

// -----

nn.parameter @w {frozen = "a buffer"} : tensor<64xf32>
zero.group @g {frozen, params = [@w], padded_elements = 64 : i64, world_size = 1 : i64}
func.func @optimizer_step(%hyper: tensor<8xf32>) {
  // expected-error @+1 {{'zero.optimizer_update' op group @g is frozen: it is never updated}}
  zero.optimizer_update @g, %hyper {optimizer = "sgd"} : tensor<8xf32>
  return
}

//===----------------------------------------------------------------------===//
// zero.gather_start and zero.gather_wait
//===----------------------------------------------------------------------===//

// -----

func.func @gather_nothing() {
  // expected-error @+1 {{'zero.gather_start' op must gather at least one shard}}
  %t = "zero.gather_start"() : () -> !zero.gather_token
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @gather_never_waited() {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op token must have exactly one wait, found 0 uses}}
  %t = zero.gather_start %s : !zero.shard<tensor<64xf32>>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @gather_waited_twice() {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op token must have exactly one wait, found 2 uses}}
  %t = zero.gather_start %s : !zero.shard<tensor<64xf32>>
  %a = zero.gather_wait %t : tensor<64xf32>
  %b = zero.gather_wait %t : tensor<64xf32>
  return
}

// -----

// A returned token can never be waited for: a wait takes only the token of
// a start it can see.
nn.parameter @w : tensor<64xf32>
func.func @gather_token_escapes() -> !zero.gather_token {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op token must be completed by a zero.gather_wait, but its only use is 'func.return'}}
  %t = zero.gather_start %s : !zero.shard<tensor<64xf32>>
  return %t : !zero.gather_token
}

// -----

func.func @wait_on_argument(%t: !zero.gather_token) {
  // expected-error @+1 {{'zero.gather_wait' op token must come from a zero.gather_start}}
  %w = zero.gather_wait %t : tensor<64xf32>
  return
}

// -----

nn.parameter @w : tensor<64x64xf32>
nn.parameter @b : tensor<64xf32>
func.func @wait_result_count() {
  %sw = zero.shard @w : !zero.shard<tensor<64x64xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<64xf32>>
  %t = zero.gather_start %sw, %sb : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_wait' op has 1 results, but its start gathers 2 shards}}
  %w = zero.gather_wait %t : tensor<64x64xf32>
  return
}

// -----

nn.parameter @w : tensor<64x64xf32>
nn.parameter @b : tensor<64xf32>
func.func @wait_results_swapped() {
  %sw = zero.shard @w : !zero.shard<tensor<64x64xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<64xf32>>
  %t = zero.gather_start %sw, %sb : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_wait' op result 0 has type 'tensor<64xf32>', expected 'tensor<64x64xf32>' (the gathered shard)}}
  %b, %w = zero.gather_wait %t : tensor<64xf32>, tensor<64x64xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @wait_result_element() {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_wait' op result 0 has type 'tensor<64xf16>', expected 'tensor<64xf32>' (the gathered shard)}}
  %w = zero.gather_wait %t : tensor<64xf16>
  return
}

// -----

nn.parameter @w : tensor<64x64xf32>
nn.parameter @b : tensor<64xf32>
zero.group @block0 {params = [@w, @b], padded_elements = 4160 : i64, world_size = 4 : i64}
func.func @gather_part_of_group() {
  %sw = zero.shard @w : !zero.shard<tensor<64x64xf32>>
  // expected-error @+1 {{'zero.gather_start' op gathers 1 shards, but group @block0 has 2 parameters}}
  %t = zero.gather_start %sw {group = @block0} : !zero.shard<tensor<64x64xf32>>
  %w = zero.gather_wait %t : tensor<64x64xf32>
  return
}

// -----

nn.parameter @w : tensor<64x64xf32>
nn.parameter @b : tensor<64xf32>
zero.group @block0 {params = [@w, @b], padded_elements = 4160 : i64, world_size = 4 : i64}
func.func @gather_group_out_of_order() {
  %sw = zero.shard @w : !zero.shard<tensor<64x64xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op shard 0 reads @b, but group @block0 expects @w}}
  %t = zero.gather_start %sb, %sw {group = @block0} : !zero.shard<tensor<64xf32>>, !zero.shard<tensor<64x64xf32>>
  %b, %w = zero.gather_wait %t : tensor<64xf32>, tensor<64x64xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
nn.parameter @v : tensor<64xf32>
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @gather_shard_of_other_parameter() {
  %sv = zero.shard @v : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op shard 0 reads @v, but group @g expects @w}}
  %t = zero.gather_start %sv {group = @g} : !zero.shard<tensor<64xf32>>
  %v = zero.gather_wait %t : tensor<64xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @gather_group_is_parameter() {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op group @w is not a zero.group}}
  %t = zero.gather_start %s {group = @w} : !zero.shard<tensor<64xf32>>
  %w = zero.gather_wait %t : tensor<64xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @gather_unknown_group() {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.gather_start' op group @missing is not a zero.group}}
  %t = zero.gather_start %s {group = @missing} : !zero.shard<tensor<64xf32>>
  %w = zero.gather_wait %t : tensor<64xf32>
  return
}

//===----------------------------------------------------------------------===//
// zero.release
//===----------------------------------------------------------------------===//

// -----

func.func @release_argument(%x: tensor<64xf32>) {
  // expected-error @+1 {{'zero.release' op operand 0 is not a gathered parameter (it must be a result of zero.gather_wait or zero.carry_wait)}}
  zero.release %x : tensor<64xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
func.func @release_computed(%x: tensor<64xf32>) {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<64xf32>>
  %w = zero.gather_wait %t : tensor<64xf32>
  %y = nn.add %w, %x : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  // expected-error @+1 {{'zero.release' op operand 1 is not a gathered parameter (it must be a result of zero.gather_wait or zero.carry_wait)}}
  zero.release %w, %y : tensor<64xf32>, tensor<64xf32>
  return
}

// -----

func.func @release_nothing() {
  // expected-error @+1 {{'zero.release' op must release at least one tensor}}
  "zero.release"() : () -> ()
  return
}

// -----

func.func @release_shard(%s: !zero.shard<tensor<64xf32>>) {
  // expected-error @+1 {{'zero.release' op operand #0 must be variadic of ranked tensor of any type values, but got '!zero.shard<tensor<64xf32>>'}}
  "zero.release"(%s) : (!zero.shard<tensor<64xf32>>) -> ()
  return
}

//===----------------------------------------------------------------------===//
// zero.reduce_scatter_start and zero.reduce_scatter_wait
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_nothing() {
  // expected-error @+1 {{'zero.reduce_scatter_start' op must reduce at least one gradient}}
  %t = "zero.reduce_scatter_start"() : () -> !zero.reduce_token
  return
}

// -----

func.func @reduce_never_waited(%g: tensor<64xf32>) {
  // expected-error @+1 {{'zero.reduce_scatter_start' op token must have exactly one wait, found 0 uses}}
  %t = zero.reduce_scatter_start %g : tensor<64xf32>
  return
}

// -----

func.func @reduce_waited_twice(%g: tensor<64xf32>) {
  // expected-error @+1 {{'zero.reduce_scatter_start' op token must have exactly one wait, found 2 uses}}
  %t = zero.reduce_scatter_start %g : tensor<64xf32>
  %a = zero.reduce_scatter_wait %t : !zero.shard<tensor<64xf32>>
  %b = zero.reduce_scatter_wait %t : !zero.shard<tensor<64xf32>>
  return
}

// -----

func.func @reduce_token_escapes(%g: tensor<64xf32>) -> !zero.reduce_token {
  // expected-error @+1 {{'zero.reduce_scatter_start' op token must be completed by a zero.reduce_scatter_wait, but its only use is 'func.return'}}
  %t = zero.reduce_scatter_start %g : tensor<64xf32>
  return %t : !zero.reduce_token
}

// -----

func.func @reduce_wait_on_argument(%t: !zero.reduce_token) {
  // expected-error @+1 {{'zero.reduce_scatter_wait' op token must come from a zero.reduce_scatter_start}}
  %s = zero.reduce_scatter_wait %t : !zero.shard<tensor<64xf32>>
  return
}

// -----

func.func @reduce_wait_result_count(%gw: tensor<64x64xf32>, %gb: tensor<64xf32>) {
  %t = zero.reduce_scatter_start %gw, %gb : tensor<64x64xf32>, tensor<64xf32>
  // expected-error @+1 {{'zero.reduce_scatter_wait' op has 1 results, but its start reduces 2 gradients}}
  %s = zero.reduce_scatter_wait %t : !zero.shard<tensor<64x64xf32>>
  return
}

// -----

func.func @reduce_wait_result_type(%g: tensor<64xf32>) {
  %t = zero.reduce_scatter_start %g : tensor<64xf32>
  // expected-error @+1 {{'zero.reduce_scatter_wait' op result 0 has type '!zero.shard<tensor<64xf16>>', expected '!zero.shard<tensor<64xf32>>'}}
  %s = zero.reduce_scatter_wait %t : !zero.shard<tensor<64xf16>>
  return
}

// -----

func.func @reduce_wait_accumulator_count(%gw: tensor<64x64xf32>, %gb: tensor<64xf32>,
                                         %ab: !zero.shard<tensor<64xf32>>) {
  %t = zero.reduce_scatter_start %gw, %gb : tensor<64x64xf32>, tensor<64xf32>
  // expected-error @+1 {{'zero.reduce_scatter_wait' op has 1 accumulators, expected none or 2}}
  %sw, %sb = zero.reduce_scatter_wait %t accumulate(%ab : !zero.shard<tensor<64xf32>>) : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  return
}

// -----

func.func @reduce_wait_accumulator_type(%gw: tensor<64x64xf32>, %gb: tensor<64xf32>,
                                        %aw: !zero.shard<tensor<64x64xf32>>,
                                        %ab: !zero.shard<tensor<64xbf16>>) {
  %t = zero.reduce_scatter_start %gw, %gb : tensor<64x64xf32>, tensor<64xf32>
  // expected-error @+1 {{'zero.reduce_scatter_wait' op accumulator 1 has type '!zero.shard<tensor<64xbf16>>', expected '!zero.shard<tensor<64xf32>>'}}
  %sw, %sb = zero.reduce_scatter_wait %t accumulate(%aw, %ab : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xbf16>>) : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  return
}

//===----------------------------------------------------------------------===//
// zero.all_reduce
//===----------------------------------------------------------------------===//

// -----

func.func @all_reduce_changes_type(%g: tensor<64xf32>) {
  // expected-error @+1 {{'zero.all_reduce' op requires the same type for all operands and results}}
  %r = "zero.all_reduce"(%g) : (tensor<64xf32>) -> tensor<32xf32>
  return
}

//===----------------------------------------------------------------------===//
// Residency (generation)
//===----------------------------------------------------------------------===//

// -----

nn.parameter @w : tensor<64xf32>
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @generate_begin() {
  // expected-error @+1 {{'zero.resident_gather' op group @g is not resident}}
  zero.resident_gather {group = @g}
  return
}

// -----

func.func @generate_end() {
  // expected-error @+1 {{'zero.resident_release' op group @nowhere is not a zero.group}}
  zero.resident_release {group = @nowhere}
  return
}

// -----

nn.parameter @w : tensor<64xf32>
nn.parameter @b : tensor<64xf32>
zero.group @g {params = [@w, @b], padded_elements = 128 : i64, world_size = 4 : i64, resident}
func.func @decode() {
  %s0 = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.resident_read' op reads 1 shards, but group @g has 2 parameters}}
  %w = zero.resident_read %s0 {group = @g} : !zero.shard<tensor<64xf32>> -> tensor<64xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
nn.parameter @b : tensor<64xf32>
zero.group @g {params = [@w, @b], padded_elements = 128 : i64, world_size = 4 : i64, resident}
func.func @decode() {
  %s0 = zero.shard @b : !zero.shard<tensor<64xf32>>
  %s1 = zero.shard @w : !zero.shard<tensor<64xf32>>
  // expected-error @+1 {{'zero.resident_read' op shard 0 reads @b, but group @g expects @w}}
  %w, %b = zero.resident_read %s0, %s1 {group = @g} : !zero.shard<tensor<64xf32>>, !zero.shard<tensor<64xf32>> -> tensor<64xf32>, tensor<64xf32>
  return
}

// -----

func.func @decode(%s: !zero.shard<tensor<64xf32>>) {
  // expected-error @+1 {{'zero.resident_read' op result 0 has type 'tensor<32xf32>', expected 'tensor<64xf32>' (the parameter of shard 0)}}
  %w = zero.resident_read %s {group = @g} : !zero.shard<tensor<64xf32>> -> tensor<32xf32>
  return
}

// -----

nn.parameter @w : tensor<64xf32>
zero.group @g {params = [@w], padded_elements = 64 : i64, world_size = 4 : i64, resident}
func.func @decode() {
  %s = zero.shard @w : !zero.shard<tensor<64xf32>>
  %w = zero.resident_read %s {group = @g} : !zero.shard<tensor<64xf32>> -> tensor<64xf32>
  // expected-error @+1 {{'zero.release' op operand 0 is not a gathered parameter (it must be a result of zero.gather_wait or zero.carry_wait)}}
  zero.release %w : tensor<64xf32>
  return
}
