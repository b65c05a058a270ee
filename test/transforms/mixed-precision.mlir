// zplan-mixed-precision: param-dtype=bf16 marks every sharded group
// `gather_type = bf16`, makes its gathered tensors bf16 and gives each op
// that reads one an nn.cast to f32 right before it (one per reading op, two
// reads of the same op share it); a persistent group stays f32 and whole,
// and its readers read it cast to bf16 and back;
// reduce-dtype=bf16 marks every trained group `reduce_type = bf16` (frozen
// groups have no gradient). fp32/fp32 leaves the module alone; an unknown
// dtype is an error; the verifier refuses a gathered type that is not the
// group's. compute-dtype=bf16 gives every matmul that computes from a
// parameter bf16 operands and a bf16-rounded result (compute.mlir).
// RUN: split-file %s %t
// RUN: zcc-opt %t/module.mlir -zplan-mixed-precision="param-dtype=bf16" | FileCheck %t/module.mlir
// RUN: zcc-opt %t/module.mlir -zplan-mixed-precision="param-dtype=bf16 reduce-dtype=bf16" | FileCheck %t/module.mlir --check-prefix=REDUCE
// RUN: zcc-opt %t/module.mlir -zplan-mixed-precision | FileCheck %t/module.mlir --check-prefix=NONE
// RUN: not zcc-opt %t/module.mlir -zplan-mixed-precision="param-dtype=fp16" 2>&1 | FileCheck %t/module.mlir --check-prefix=UNKNOWN
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics
// RUN: zcc-opt %t/generate.mlir -zplan-mixed-precision="param-dtype=bf16" | FileCheck %t/generate.mlir
// RUN: zcc-opt %t/half.mlir -zplan-mixed-precision="param-dtype=bf16" -verify-diagnostics
// RUN: zcc-opt %t/compute.mlir -zplan-mixed-precision="param-dtype=bf16 compute-dtype=bf16" | FileCheck %t/compute.mlir
// RUN: zcc-opt %t/compute.mlir -zplan-mixed-precision="compute-dtype=bf16" | FileCheck %t/compute.mlir --check-prefix=F32GATHER
// RUN: zcc-opt %t/elementwise.mlir -zplan-mixed-precision="param-dtype=bf16 compute-dtype=bf16" | FileCheck %t/elementwise.mlir
// RUN: zcc-opt %t/loss.mlir -zplan-mixed-precision="param-dtype=bf16 compute-dtype=bf16" | FileCheck %t/loss.mlir
// RUN: zcc-opt %t/attention.mlir -zplan-mixed-precision="param-dtype=bf16 compute-dtype=bf16" | FileCheck %t/attention.mlir

//--- module.mlir
// CHECK: zero.group @group0 {gather_type = bf16,
// CHECK-NOT: reduce_type
// CHECK: zero.group @persistent1 {
// CHECK-NOT: gather_type
// CHECK: zero.group @group2 {frozen, gather_type = bf16,
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[WV:.*]]:2 = zero.gather_wait %{{.*}} : tensor<4x8xbf16>, tensor<8x4xbf16>
// CHECK: %[[S:.*]] = zero.gather_wait %{{.*}} : tensor<8xf32>
// CHECK: %[[F:.*]] = zero.gather_wait %{{.*}} : tensor<8xbf16>
// CHECK: %[[CW:.*]] = nn.cast %[[WV]]#0 : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT: %[[H:.*]] = nn.matmul %{{.*}}, %[[CW]]
// CHECK-NEXT: %[[CS:.*]] = nn.cast %[[F]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT: nn.mul %[[CS]], %[[CS]]
// CHECK-NEXT: %[[SB:.*]] = nn.cast %[[S]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK-NEXT: %[[SF:.*]] = nn.cast %[[SB]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT: nn.add %[[H]], %[[SF]]
// CHECK-NEXT: %[[CV:.*]] = nn.cast %[[WV]]#1 : tensor<8x4xbf16> -> tensor<8x4xf32>
// CHECK-NEXT: nn.matmul %{{.*}}, %[[CV]]
// CHECK-NEXT: %[[CW2:.*]] = nn.cast %[[WV]]#0 : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT: nn.matmul %{{.*}}, %[[CW2]]
// CHECK-NEXT: %[[CV2:.*]] = nn.cast %[[WV]]#1 : tensor<8x4xbf16> -> tensor<8x4xf32>
// CHECK-NEXT: nn.matmul %{{.*}}, %[[CV2]]
//
// REDUCE: zero.group @group0 {gather_type = bf16, {{.*}}reduce_type = bf16,
// REDUCE: zero.group @persistent1 {{{.*}}reduce_type = bf16,
// REDUCE: zero.group @group2 {frozen, gather_type = bf16,
// REDUCE-NOT: reduce_type
// REDUCE-LABEL: func.func @train_micro_step
//
// NONE-NOT: bf16
// NONE-NOT: nn.cast
//
// UNKNOWN: zplan-mixed-precision: unknown param-dtype 'fp16' (expected fp32 or bf16)
nn.parameter @w : tensor<4x8xf32>
nn.parameter @v : tensor<8x4xf32>
nn.parameter @s : tensor<8xf32>
nn.parameter @f {frozen = "a buffer"} : tensor<8xf32>
zero.group @group0 {offsets = array<i64: 0, 32>, padded_elements = 64 : i64, params = [@w, @v], world_size = 2 : i64}
zero.group @persistent1 {offsets = array<i64: 0>, padded_elements = 8 : i64, params = [@s], persistent, world_size = 2 : i64}
zero.group @group2 {frozen, offsets = array<i64: 0>, padded_elements = 8 : i64, params = [@f], world_size = 2 : i64}

func.func @train_micro_step(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %sv = zero.shard @v : !zero.shard<tensor<8x4xf32>>
  %t0 = zero.gather_start %sw, %sv {group = @group0} : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<8x4xf32>>
  %w, %v = zero.gather_wait %t0 : tensor<4x8xf32>, tensor<8x4xf32>
  %ss = zero.shard @s : !zero.shard<tensor<8xf32>>
  %t1 = zero.gather_start %ss {group = @persistent1} : !zero.shard<tensor<8xf32>>
  %s = zero.gather_wait %t1 : tensor<8xf32>
  %sf = zero.shard @f : !zero.shard<tensor<8xf32>>
  %t2 = zero.gather_start %sf {group = @group2} : !zero.shard<tensor<8xf32>>
  %f = zero.gather_wait %t2 : tensor<8xf32>
  %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %ff = nn.mul %f, %f : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %hs = nn.add %h, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = nn.matmul %hs, %v : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %z = nn.matmul %y, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %r = nn.matmul %z, %v : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

//--- invalid.mlir
nn.parameter @w : tensor<4x8xf32>
zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w], world_size = 2 : i64}

func.func @f() -> tensor<4x8xbf16> {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %t = zero.gather_start %s {group = @group0} : !zero.shard<tensor<4x8xf32>>
  // expected-error @+1 {{gathers tensor 0 as 'bf16', but group @group0 gathers 'f32'}}
  %w = zero.gather_wait %t : tensor<4x8xbf16>
  return %w : tensor<4x8xbf16>
}

// -----

nn.parameter @w : tensor<4x8xf32>
// expected-error @+1 {{gather_type is 'f16', expected bf16}}
zero.group @group0 {gather_type = f16, offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w], world_size = 2 : i64}

// -----

nn.parameter @w : tensor<4x8xf32>
zero.group @group0 {gather_type = bf16, offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w], world_size = 2 : i64}

func.func @f() -> tensor<4x8xf16> {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %t = zero.gather_start %s {group = @group0} : !zero.shard<tensor<4x8xf32>>
  // expected-error @+1 {{result 0 has type 'tensor<4x8xf16>', expected 'tensor<4x8xf32>' (the gathered shard)}}
  %w = zero.gather_wait %t : tensor<4x8xf16>
  return %w : tensor<4x8xf16>
}

//--- half.mlir
// expected-error @+1 {{--param-dtype/--reduce-dtype bf16 keep f32 master weights, but parameter @w is 'tensor<4x8xbf16>'; export the model in float32}}
nn.parameter @w : tensor<4x8xbf16>
zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w], world_size = 2 : i64}

//--- generate.mlir
// A KV cache is bf16: the new entries are rounded before the append, the
// cache stays bf16 through the reshape and expand to cached_attention's key
// and value, and any other reader (here the return) gets an f32 cast.
// CHECK: nn.kv_cache @k : tensor<1x1x8x4xbf16>
// CHECK: nn.kv_cache @v : tensor<1x1x8x4xbf16>
// CHECK-LABEL: func.func @decode
// CHECK: %[[NK:.*]] = nn.cast %{{.*}} : tensor<1x1x1x4xf32> -> tensor<1x1x1x4xbf16>
// CHECK-NEXT: %[[K:.*]] = nn.cache_append @k, %[[NK]], %{{.*}} : (tensor<1x1x1x4xbf16>, tensor<1x1xi64>) -> tensor<1x1x8x4xbf16>
// CHECK: %[[R:.*]] = nn.reshape %[[K]] : tensor<1x1x8x4xbf16> -> tensor<1x1x1x8x4xbf16>
// CHECK-NEXT: %[[E:.*]] = nn.expand %[[R]] : tensor<1x1x1x8x4xbf16> -> tensor<1x1x2x8x4xbf16>
// CHECK-NEXT: %[[KE:.*]] = nn.reshape %[[E]] : tensor<1x1x2x8x4xbf16> -> tensor<1x2x8x4xbf16>
// CHECK: nn.cache_append @v
// CHECK: nn.cached_attention %{{.*}}, %[[KE]], %{{.*}}, %{{.*}} {{.*}} : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x1xi64>) -> tensor<1x2x1x4xf32>
// CHECK: %[[KF:.*]] = nn.cast %[[K]] : tensor<1x1x8x4xbf16> -> tensor<1x1x8x4xf32>
// CHECK-NEXT: return %{{.*}}, %[[KF]]
nn.kv_cache @k : tensor<1x1x8x4xf32>
nn.kv_cache @v : tensor<1x1x8x4xf32>

func.func @decode(%q: tensor<1x2x1x4xf32>, %nk: tensor<1x1x1x4xf32>, %nv: tensor<1x1x1x4xf32>, %pos: tensor<1x1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x8x4xf32>) {
  %k = nn.cache_append @k, %nk, %pos : (tensor<1x1x1x4xf32>, tensor<1x1xi64>) -> tensor<1x1x8x4xf32>
  %r = nn.reshape %k : tensor<1x1x8x4xf32> -> tensor<1x1x1x8x4xf32>
  %e = nn.expand %r : tensor<1x1x1x8x4xf32> -> tensor<1x1x2x8x4xf32>
  %ke = nn.reshape %e : tensor<1x1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  %v = nn.cache_append @v, %nv, %pos : (tensor<1x1x1x4xf32>, tensor<1x1xi64>) -> tensor<1x1x8x4xf32>
  %rv = nn.reshape %v : tensor<1x1x8x4xf32> -> tensor<1x1x1x8x4xf32>
  %ev = nn.expand %rv : tensor<1x1x1x8x4xf32> -> tensor<1x1x2x8x4xf32>
  %ve = nn.reshape %ev : tensor<1x1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  %o = nn.cached_attention %q, %ke, %ve, %pos {scale = 5.000000e-01 : f32} : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x1xi64>) -> tensor<1x2x1x4xf32>
  return %o, %k : tensor<1x2x1x4xf32>, tensor<1x1x8x4xf32>
}

//--- compute.mlir
// compute-dtype=bf16: a gathered bf16 parameter is read by its matmuls
// directly (no f32 cast); a persistent one through its bf16 rounding, the
// bias too; an activation gets one bf16 copy before its first matmul,
// shared by every later matmul, also through a reshape and transpose
// re-emitted on the copy (the f32 ones go); a product of position
// arithmetic alone (%pos) stays f32. Each bf16 product returns bf16 (the
// kernel rounds its f32 sums once, after the bias): later matmuls read it
// as it is, and every other reader (here the returns) through an f32 cast
// placed right before it.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>, %[[POS:.*]]: tensor<4x4xf32>)
// CHECK: %[[W:.*]] = zero.gather_wait %{{.*}} : tensor<4x8xbf16>
// CHECK: %[[SB:.*]]:2 = zero.gather_wait %{{.*}} : tensor<8x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[ROT:.*]] = nn.matmul %[[POS]], %[[POS]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[BB:.*]] = nn.cast %[[SB]]#1 : tensor<8xf32> -> tensor<8xbf16>
// CHECK-NEXT: %[[XB:.*]] = nn.cast %[[X]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[H:.*]] = nn.matmul %[[XB]], %[[W]], %[[BB]] : (tensor<2x4xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[SR:.*]] = nn.cast %[[SB]]#0 : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[G:.*]] = nn.matmul %[[H]], %[[SR]] : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[GR:.*]] = nn.reshape %[[G]] : tensor<2x8xbf16> -> tensor<16xbf16>
// CHECK-NEXT: %[[HR:.*]] = nn.reshape %[[H]] : tensor<2x8xbf16> -> tensor<16xbf16>
// CHECK-NEXT: %[[DOT:.*]] = nn.matmul %[[GR]], %[[HR]] : (tensor<16xbf16>, tensor<16xbf16>) -> tensor<bf16>
// CHECK-NEXT: %[[HT:.*]] = nn.transpose %[[H]] {perm = array<i64: 1, 0>} : tensor<2x8xbf16> -> tensor<8x2xbf16>
// CHECK-NEXT: %[[DW:.*]] = nn.matmul %[[HT]], %[[G]] : (tensor<8x2xbf16>, tensor<2x8xbf16>) -> tensor<8x8xbf16>
// CHECK-NEXT: %[[DOTF:.*]] = nn.cast %[[DOT]] : tensor<bf16> -> tensor<f32>
// CHECK-NEXT: %[[DWF:.*]] = nn.cast %[[DW]] : tensor<8x8xbf16> -> tensor<8x8xf32>
// CHECK-NEXT: return %[[ROT]], %[[DOTF]], %[[DWF]]
//
// With f32 gathers, the parameter is rounded by a cast of its own, and so
// is the bias.
// F32GATHER: %[[W:.*]] = zero.gather_wait %{{.*}} : tensor<4x8xf32>
// F32GATHER: %[[XB:.*]] = nn.cast %{{.*}} : tensor<2x4xf32> -> tensor<2x4xbf16>
// F32GATHER-NEXT: %[[WB:.*]] = nn.cast %[[W]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// F32GATHER-NEXT: %[[BB:.*]] = nn.cast %{{.*}}#1 : tensor<8xf32> -> tensor<8xbf16>
// F32GATHER-NEXT: nn.matmul %[[XB]], %[[WB]], %[[BB]] : (tensor<2x4xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
nn.parameter @w : tensor<4x8xf32>
nn.parameter @s : tensor<8x8xf32>
nn.parameter @b : tensor<8xf32>
zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w], world_size = 2 : i64}
zero.group @persistent1 {offsets = array<i64: 0, 64>, padded_elements = 72 : i64, params = [@s, @b], persistent, world_size = 2 : i64}

func.func @train_micro_step(%x: tensor<2x4xf32>, %pos: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<f32>, tensor<8x8xf32>) {
  %sw = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %t0 = zero.gather_start %sw {group = @group0} : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %t0 : tensor<4x8xf32>
  %ss = zero.shard @s : !zero.shard<tensor<8x8xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<8xf32>>
  %t1 = zero.gather_start %ss, %sb {group = @persistent1} : !zero.shard<tensor<8x8xf32>>, !zero.shard<tensor<8xf32>>
  %s, %b = zero.gather_wait %t1 : tensor<8x8xf32>, tensor<8xf32>
  %rot = nn.matmul %pos, %pos : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %h = nn.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %g = nn.matmul %h, %s : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %gr = nn.reshape %g : tensor<2x8xf32> -> tensor<16xf32>
  %hr = nn.reshape %h : tensor<2x8xf32> -> tensor<16xf32>
  %dot = nn.matmul %gr, %hr : (tensor<16xf32>, tensor<16xf32>) -> tensor<f32>
  %ht = nn.transpose %h {perm = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  %dw = nn.matmul %ht, %g : (tensor<8x2xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  return %rot, %dot, %dw : tensor<4x4xf32>, tensor<f32>, tensor<8x8xf32>
}

//--- elementwise.mlir
// compute-dtype=bf16, the elementwise rule (autocast's "the operands'
// dtype" with type promotion): a forward op whose float operands are all
// bf16 -- the MLP's silu of the gate projection and its product with the
// up projection -- returns bf16, and the next matmul reads it as it is; a
// view of a bf16 value stays bf16; one f32 operand (the residual) makes the
// op f32, reading the bf16 one through an f32 cast; an op of the backward
// (named <node>/grad by zplan-autodiff) computes in f32, each of its bf16
// operands widened right before it.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[W:.*]]:3 = zero.gather_wait %{{.*}} : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x4xbf16>
// CHECK-NEXT: %[[XB:.*]] = nn.cast %[[X:.*]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[GATE:.*]] = nn.matmul %[[XB]], %[[W]]#0 : {{.*}} -> tensor<2x8xbf16>
// CHECK-NEXT: %[[UP:.*]] = nn.matmul %[[XB]], %[[W]]#1 : {{.*}} -> tensor<2x8xbf16>
// CHECK-NEXT: %[[ACT:.*]] = nn.silu %[[GATE]] : tensor<2x8xbf16>
// CHECK-NEXT: %[[H:.*]] = nn.mul %[[ACT]], %[[UP]] : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[Y:.*]] = nn.matmul %[[H]], %[[W]]#2 : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[YF:.*]] = nn.cast %[[Y]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: %[[RES:.*]] = nn.add %[[X]], %[[YF]] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[HT:.*]] = nn.transpose %[[H]] {{.*}} : tensor<2x8xbf16> -> tensor<8x2xbf16>
// CHECK-NEXT: %[[UF:.*]] = nn.cast %[[UP]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT: %[[HF:.*]] = nn.cast %[[H]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT: %[[DH:.*]] = nn.mul %[[HF]], %[[UF]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[HTF:.*]] = nn.cast %[[HT]] : tensor<8x2xbf16> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[RES]], %[[DH]], %[[HTF]]
nn.parameter @g : tensor<4x8xf32>
nn.parameter @u : tensor<4x8xf32>
nn.parameter @d : tensor<8x4xf32>
zero.group @group0 {offsets = array<i64: 0, 32, 64>, padded_elements = 96 : i64, params = [@g, @u, @d], world_size = 2 : i64}

func.func @train_micro_step(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>, tensor<8x2xf32>) {
  %sg = zero.shard @g : !zero.shard<tensor<4x8xf32>>
  %su = zero.shard @u : !zero.shard<tensor<4x8xf32>>
  %sd = zero.shard @d : !zero.shard<tensor<8x4xf32>>
  %t = zero.gather_start %sg, %su, %sd {group = @group0} : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<8x4xf32>>
  %g, %u, %d = zero.gather_wait %t : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x4xf32>
  %gate = nn.matmul %x, %g : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %up = nn.matmul %x, %u : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %act = nn.silu %gate : tensor<2x8xf32>
  %h = nn.mul %act, %up : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = nn.matmul %h, %d : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %res = nn.add %x, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %ht = nn.transpose %h {perm = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  %dh = nn.mul %h, %up : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("/mlp/Mul/grad")
  return %res, %dh, %ht : tensor<2x4xf32>, tensor<2x8xf32>, tensor<8x2xf32>
}

//--- loss.mlir
// compute-dtype=bf16: the loss ops read the LM head's bf16 logits as they
// are (their kernels widen them as they read; the loss and its gradient are
// f32), so no f32 copy of the logits is made; the gradient is cast to bf16
// for the backward matmul as any operand is.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[LOGITS:.*]] = nn.matmul %{{.*}}, %{{.*}} : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[LOSS:.*]] = nn.cross_entropy %[[LOGITS]], %[[T:.*]] : (tensor<2x8xbf16>, tensor<2xi64>) -> tensor<f32>
// CHECK-NEXT: %[[D:.*]] = nn.cross_entropy_grad %[[LOGITS]], %[[T]], %{{.*}} : (tensor<2x8xbf16>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
// CHECK: %[[DB:.*]] = nn.cast %[[D]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK: nn.matmul %{{.*}}, %[[DB]]
// CHECK-NOT: nn.cast %[[LOGITS]]
nn.parameter @w : tensor<4x8xf32>
zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@w], world_size = 2 : i64}

func.func @train_micro_step(%x: tensor<2x4xf32>, %t: tensor<2xi64>, %dl: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %s = zero.shard @w : !zero.shard<tensor<4x8xf32>>
  %tok = zero.gather_start %s {group = @group0} : !zero.shard<tensor<4x8xf32>>
  %w = zero.gather_wait %tok : tensor<4x8xf32>
  %logits = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %loss = nn.cross_entropy %logits, %t : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  %d = nn.cross_entropy_grad %logits, %t, %dl : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32> loc("loss/grad")
  %xt = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %dw = nn.matmul %xt, %d : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return %loss, %dw : tensor<f32>, tensor<4x8xf32>
}

//--- attention.mlir
// compute-dtype=bf16: attention and its gradient read bf16 queries, keys
// and values as they are (their kernels widen them as they read) and return
// f32; no f32 copy of q, k or v is made.
// CHECK-LABEL: func.func @train_micro_step
// CHECK: %[[Q:.*]] = nn.matmul %{{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: %[[K:.*]] = nn.matmul %{{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: %[[V:.*]] = nn.matmul %{{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] {{.*}} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = nn.attention_grad %{{.*}}, %[[Q]], %[[K]], %[[V]] {{.*}} : (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NOT: nn.cast
// CHECK: return
nn.parameter @wq : tensor<4x8xf32>
nn.parameter @wk : tensor<4x8xf32>
nn.parameter @wv : tensor<4x8xf32>
zero.group @group0 {offsets = array<i64: 0, 32, 64>, padded_elements = 96 : i64, params = [@wq, @wk, @wv], world_size = 2 : i64}

func.func @train_micro_step(%x: tensor<4x4xbf16>, %dout: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %sq = zero.shard @wq : !zero.shard<tensor<4x8xf32>>
  %sk = zero.shard @wk : !zero.shard<tensor<4x8xf32>>
  %sv = zero.shard @wv : !zero.shard<tensor<4x8xf32>>
  %t = zero.gather_start %sq, %sk, %sv {group = @group0} : !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<4x8xf32>>, !zero.shard<tensor<4x8xf32>>
  %wq, %wk, %wv = zero.gather_wait %t : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  %xf = nn.cast %x : tensor<4x4xbf16> -> tensor<4x4xf32>
  %q = nn.matmul %xf, %wq : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %k = nn.matmul %xf, %wk : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = nn.matmul %xf, %wv : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %o = nn.attention %q, %k, %v {scale = 2.500000e-01 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %dq, %dk, %dv = nn.attention_grad %dout, %q, %k, %v {scale = 2.500000e-01 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) loc("/attn/grad")
  return %o, %dq : tensor<4x8xf32>, tensor<4x8xf32>
}
