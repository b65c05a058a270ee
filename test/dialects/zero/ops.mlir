// Every zero op and type prints in a form that parses back to the same IR:
// the custom form is printed, re-parsed and printed again, and the generic
// form is parsed back into the custom one. Types keep their `!zero.` prefix
// wherever they are printed.
// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

// CHECK: nn.parameter @h.0.w : tensor<64x64xf32>
nn.parameter @"h.0.w" : tensor<64x64xf32>
// CHECK: nn.parameter @h.0.b : tensor<64xf32>
nn.parameter @"h.0.b" : tensor<64xf32>
// CHECK: nn.parameter @ln.g : tensor<64xbf16>
nn.parameter @"ln.g" : tensor<64xbf16>

// 4160 = 64*64 + 64 elements, already a multiple of the world size.
// CHECK: zero.group @block0 {padded_elements = 4160 : i64, params = [@h.0.w, @h.0.b], world_size = 4 : i64}
zero.group @block0 {params = [@"h.0.w", @"h.0.b"], padded_elements = 4160 : i64, world_size = 4 : i64}
// Padding: 64 elements on 3 ranks take 66.
// CHECK: zero.group @ln {padded_elements = 66 : i64, params = [@ln.g], world_size = 3 : i64}{{$}}
zero.group @ln {params = [@"ln.g"], padded_elements = 66 : i64, world_size = 3 : i64}
// A persistent group stays whole on every rank; the flag is a unit attribute.
// CHECK: zero.group @persistent {padded_elements = 64 : i64, params = [@h.0.b], persistent, world_size = 1 : i64}
zero.group @persistent {params = [@"h.0.b"], padded_elements = 64 : i64, world_size = 1 : i64, persistent}

// CHECK-LABEL: func.func @types
// CHECK-SAME: (%{{.*}}: !zero.shard<tensor<2x3xbf16>>, %{{.*}}: !zero.gather_token, %{{.*}}: !zero.reduce_token)
// CHECK-SAME: -> (!zero.gather_token, !zero.reduce_token, !zero.shard<tensor<2x3xbf16>>)
func.func @types(%s: !zero.shard<tensor<2x3xbf16>>, %g: !zero.gather_token,
                 %r: !zero.reduce_token)
    -> (!zero.gather_token, !zero.reduce_token, !zero.shard<tensor<2x3xbf16>>) {
  return %g, %r, %s : !zero.gather_token, !zero.reduce_token, !zero.shard<tensor<2x3xbf16>>
}

// CHECK-LABEL: func.func @gather_group
func.func @gather_group() {
  // CHECK: %[[SW:.*]] = zero.shard @h.0.w : !zero.shard<tensor<64x64xf32>>
  %sw = zero.shard @"h.0.w" : !zero.shard<tensor<64x64xf32>>
  // CHECK: %[[SB:.*]] = zero.shard @h.0.b : !zero.shard<tensor<64xf32>>
  %sb = zero.shard @"h.0.b" : !zero.shard<tensor<64xf32>>
  // CHECK: %[[T:.*]] = zero.gather_start %[[SW]], %[[SB]] {group = @block0} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  %t = zero.gather_start %sw, %sb {group = @block0} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  // CHECK: %[[WB:.*]]:2 = zero.gather_wait %[[T]] : tensor<64x64xf32>, tensor<64xf32>
  %w, %b = zero.gather_wait %t : tensor<64x64xf32>, tensor<64xf32>
  // CHECK: zero.release %[[WB]]#0, %[[WB]]#1 : tensor<64x64xf32>, tensor<64xf32>
  zero.release %w, %b : tensor<64x64xf32>, tensor<64xf32>
  return
}

// Without a group: a prefetch hoisted above other work, and a release of
// only part of what was gathered.
// CHECK-LABEL: func.func @gather_without_group
// CHECK-SAME: (%[[X:.*]]: tensor<2x64xbf16>)
func.func @gather_without_group(%x: tensor<2x64xbf16>) -> tensor<2x64xbf16> {
  // CHECK: %[[SG:.*]] = zero.shard @ln.g : !zero.shard<tensor<64xbf16>>
  %sg = zero.shard @"ln.g" : !zero.shard<tensor<64xbf16>>
  // CHECK: %[[SB:.*]] = zero.shard @h.0.b : !zero.shard<tensor<64xf32>>
  %sb = zero.shard @"h.0.b" : !zero.shard<tensor<64xf32>>
  // CHECK: %[[T:.*]] = zero.gather_start %[[SG]], %[[SB]] : !zero.shard<tensor<64xbf16>>, !zero.shard<tensor<64xf32>>{{$}}
  %t = zero.gather_start %sg, %sb : !zero.shard<tensor<64xbf16>>, !zero.shard<tensor<64xf32>>
  // CHECK: %[[R:.*]] = nn.relu %[[X]] : tensor<2x64xbf16>
  %r = nn.relu %x : tensor<2x64xbf16>
  // CHECK: %[[GB:.*]]:2 = zero.gather_wait %[[T]] : tensor<64xbf16>, tensor<64xf32>
  %g, %b = zero.gather_wait %t : tensor<64xbf16>, tensor<64xf32>
  // CHECK: %[[Y:.*]] = nn.mul %[[R]], %[[GB]]#0 : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
  %y = nn.mul %r, %g : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
  // CHECK: zero.release %[[GB]]#1 : tensor<64xf32>
  zero.release %b : tensor<64xf32>
  // CHECK: zero.release %[[GB]]#0 : tensor<64xbf16>
  zero.release %g : tensor<64xbf16>
  // CHECK: return %[[Y]]
  return %y : tensor<2x64xbf16>
}

// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME: (%[[GW:.*]]: tensor<64x64xf32>, %[[GB:.*]]: tensor<64xf32>)
func.func @reduce_scatter(%gw: tensor<64x64xf32>, %gb: tensor<64xf32>)
    -> (!zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>) {
  // CHECK: %[[T:.*]] = zero.reduce_scatter_start %[[GW]], %[[GB]] : tensor<64x64xf32>, tensor<64xf32>
  %t = zero.reduce_scatter_start %gw, %gb : tensor<64x64xf32>, tensor<64xf32>
  // CHECK: %[[S:.*]]:2 = zero.reduce_scatter_wait %[[T]] : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  %s0, %s1 = zero.reduce_scatter_wait %t : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  // CHECK: return %[[S]]#0, %[[S]]#1
  return %s0, %s1 : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
}

// Gradient accumulation over micro-steps keeps shards, never full gradients.
// CHECK-LABEL: func.func @reduce_scatter_accumulate
// CHECK-SAME: (%[[GW:.*]]: tensor<64x64xf32>, %[[GB:.*]]: tensor<64xf32>, %[[AW:.*]]: !zero.shard<tensor<64x64xf32>>, %[[AB:.*]]: !zero.shard<tensor<64xf32>>)
func.func @reduce_scatter_accumulate(%gw: tensor<64x64xf32>, %gb: tensor<64xf32>,
                                     %aw: !zero.shard<tensor<64x64xf32>>,
                                     %ab: !zero.shard<tensor<64xf32>>)
    -> (!zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>) {
  // CHECK: %[[T:.*]] = zero.reduce_scatter_start %[[GW]], %[[GB]] : tensor<64x64xf32>, tensor<64xf32>
  %t = zero.reduce_scatter_start %gw, %gb : tensor<64x64xf32>, tensor<64xf32>
  // CHECK: %[[S:.*]]:2 = zero.reduce_scatter_wait %[[T]] accumulate(%[[AW]], %[[AB]] : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>) : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  %s0, %s1 = zero.reduce_scatter_wait %t accumulate(%aw, %ab : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>) : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
  // CHECK: return %[[S]]#0, %[[S]]#1
  return %s0, %s1 : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
}

// The per-parameter form autodiff emits: one gradient, accumulated into
// the parameter's gradient shard.
// CHECK-LABEL: func.func @reduce_scatter_per_parameter
// CHECK-SAME: (%[[GW:.*]]: tensor<64x64xf32>)
func.func @reduce_scatter_per_parameter(%gw: tensor<64x64xf32>) -> !zero.shard<tensor<64x64xf32>> {
  // CHECK: %[[T:.*]] = zero.reduce_scatter_start %[[GW]] : tensor<64x64xf32>
  %t = zero.reduce_scatter_start %gw : tensor<64x64xf32>
  // CHECK: %[[ACC:.*]] = zero.grad_shard @h.0.w : !zero.shard<tensor<64x64xf32>>
  %acc = zero.grad_shard @"h.0.w" : !zero.shard<tensor<64x64xf32>>
  // CHECK: %[[NEW:.*]] = zero.reduce_scatter_wait %[[T]] accumulate(%[[ACC]] : !zero.shard<tensor<64x64xf32>>) : !zero.shard<tensor<64x64xf32>>
  %new = zero.reduce_scatter_wait %t accumulate(%acc : !zero.shard<tensor<64x64xf32>>) : !zero.shard<tensor<64x64xf32>>
  // CHECK: return %[[NEW]]
  return %new : !zero.shard<tensor<64x64xf32>>
}

// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%[[G:.*]]: tensor<64xf32>)
func.func @all_reduce(%grad: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: %[[R:.*]] = zero.all_reduce %[[G]] : tensor<64xf32>
  %r = zero.all_reduce %grad : tensor<64xf32>
  // CHECK: return %[[R]]
  return %r : tensor<64xf32>
}
