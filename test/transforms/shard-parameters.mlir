// Parameter groups: first-use order, buckets, persistence, far-apart (tied)
// parameters, element types, alignment and padding.
//
// Options for every case: 4 ranks; parameters of at most 16 elements stay
// whole; buckets of 512 B (128 f32 elements); 16 B alignment (4 f32 or 8 f16
// elements), so a group pads to a multiple of 4 x 4 = 16 f32 elements
// (4 x 8 = 32 f16 elements).
// RUN: split-file %s %t
// RUN: zcc-opt %t/groups.mlir -split-input-file -zplan-shard-parameters="world-size=4 persistence-threshold=16 bucket-bytes=512 alignment=16" | FileCheck %t/groups.mlir
// RUN: zcc-opt %t/invalid.mlir -split-input-file -verify-diagnostics -zplan-shard-parameters="world-size=4 persistence-threshold=16 bucket-bytes=512 alignment=16"

//--- groups.mlir

// Declared (and gathered by the import) as b, a, c; first used as a, c, b:
// the group lists them in first-use order. 32 + 64 + 32 elements = 512 B,
// exactly one bucket; every offset is already aligned, 128 needs no padding.
// The three per-parameter gathers become one start and one wait, after the
// constant, and every read is redirected to the group's wait.
// CHECK: zero.group @group0 {offsets = array<i64: 0, 32, 96>, padded_elements = 128 : i64, params = [@a, @c, @b], world_size = 4 : i64}{{$}}
// CHECK-NOT: zero.group
// CHECK-LABEL: func.func @first_use_order
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[K:.*]] = nn.constant
// CHECK-NEXT: %[[SA:.*]] = zero.shard @a : !zero.shard<tensor<4x8xf32>>
// CHECK-NEXT: %[[SC:.*]] = zero.shard @c : !zero.shard<tensor<8x8xf32>>
// CHECK-NEXT: %[[SB:.*]] = zero.shard @b : !zero.shard<tensor<8x4xf32>>
// CHECK-NEXT: %[[T:.*]] = zero.gather_start %[[SA]], %[[SC]], %[[SB]] {group = @group0}
// CHECK-NEXT: %[[W:.*]]:3 = zero.gather_wait %[[T]] : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[Y0:.*]] = nn.matmul %[[X]], %[[W]]#0
// CHECK-NEXT: %[[Y1:.*]] = nn.matmul %[[Y0]], %[[W]]#1
// CHECK-NEXT: %[[Y2:.*]] = nn.matmul %[[Y1]], %[[W]]#2
// CHECK-NEXT: %[[Y3:.*]] = nn.add %[[Y2]], %[[K]]
// CHECK-NEXT: return %[[Y3]]
nn.parameter @b : tensor<8x4xf32>
nn.parameter @a : tensor<4x8xf32>
nn.parameter @c : tensor<8x8xf32>
func.func @first_use_order(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %k = nn.constant dense<1.0> : tensor<f32>
  %sb = zero.shard @b : !zero.shard<tensor<8x4xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<8x4xf32>>
  %b = zero.gather_wait %tb : tensor<8x4xf32>
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %sc = zero.shard @c : !zero.shard<tensor<8x8xf32>>
  %tc = zero.gather_start %sc : !zero.shard<tensor<8x8xf32>>
  %c = zero.gather_wait %tc : tensor<8x8xf32>
  %0 = nn.matmul %x, %a : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %1 = nn.matmul %0, %c : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %2 = nn.matmul %1, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %3 = nn.add %2, %k : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %3 : tensor<2x4xf32>
}

// -----

// 64 + 64 elements fill the 512 B bucket; the third parameter starts a new
// group (32 elements, padded to 32).
// CHECK: zero.group @group0 {offsets = array<i64: 0, 64>, padded_elements = 128 : i64, params = [@p1, @p2], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @group1 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@p3], world_size = 4 : i64}{{$}}
// CHECK-LABEL: func.func @bucket_split
// CHECK: %[[S1:.*]] = zero.shard @p1
// CHECK-NEXT: %[[S2:.*]] = zero.shard @p2
// CHECK-NEXT: %[[T0:.*]] = zero.gather_start %[[S1]], %[[S2]] {group = @group0}
// CHECK-NEXT: %[[W0:.*]]:2 = zero.gather_wait %[[T0]]
// CHECK-NEXT: %[[S3:.*]] = zero.shard @p3
// CHECK-NEXT: %[[T1:.*]] = zero.gather_start %[[S3]] {group = @group1}
// CHECK-NEXT: %[[W1:.*]] = zero.gather_wait %[[T1]]
// CHECK-NEXT: %[[Y0:.*]] = nn.matmul %{{.*}}, %[[W0]]#0
// CHECK-NEXT: %[[Y1:.*]] = nn.matmul %[[Y0]], %[[W0]]#1
// CHECK-NEXT: nn.matmul %[[Y1]], %[[W1]] :
nn.parameter @p1 : tensor<8x8xf32>
nn.parameter @p2 : tensor<8x8xf32>
nn.parameter @p3 : tensor<8x4xf32>
func.func @bucket_split(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %s1 = zero.shard @p1 : !zero.shard<tensor<8x8xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<8x8xf32>>
  %p1 = zero.gather_wait %t1 : tensor<8x8xf32>
  %s2 = zero.shard @p2 : !zero.shard<tensor<8x8xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<8x8xf32>>
  %p2 = zero.gather_wait %t2 : tensor<8x8xf32>
  %s3 = zero.shard @p3 : !zero.shard<tensor<8x4xf32>>
  %t3 = zero.gather_start %s3 : !zero.shard<tensor<8x4xf32>>
  %p3 = zero.gather_wait %t3 : tensor<8x4xf32>
  %0 = nn.matmul %x, %p1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %1 = nn.matmul %0, %p2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %2 = nn.matmul %1, %p3 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}

// -----

// A 1024 B parameter does not fit a 512 B bucket: it gets a group of its
// own, and the small parameter after it cannot join it either.
// CHECK: zero.group @group0 {offsets = array<i64: 0>, padded_elements = 64 : i64, params = [@small1], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @group1 {offsets = array<i64: 0>, padded_elements = 256 : i64, params = [@big], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @group2 {offsets = array<i64: 0>, padded_elements = 64 : i64, params = [@small2], world_size = 4 : i64}{{$}}
// CHECK-LABEL: func.func @bigger_than_bucket
nn.parameter @small1 : tensor<4x16xf32>
nn.parameter @big : tensor<16x16xf32>
nn.parameter @small2 : tensor<16x4xf32>
func.func @bigger_than_bucket(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s1 = zero.shard @small1 : !zero.shard<tensor<4x16xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<4x16xf32>>
  %small1 = zero.gather_wait %t1 : tensor<4x16xf32>
  %s2 = zero.shard @big : !zero.shard<tensor<16x16xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<16x16xf32>>
  %big = zero.gather_wait %t2 : tensor<16x16xf32>
  %s3 = zero.shard @small2 : !zero.shard<tensor<16x4xf32>>
  %t3 = zero.gather_start %s3 : !zero.shard<tensor<16x4xf32>>
  %small2 = zero.gather_wait %t3 : tensor<16x4xf32>
  %0 = nn.matmul %x, %small1 : (tensor<2x4xf32>, tensor<4x16xf32>) -> tensor<2x16xf32>
  %1 = nn.matmul %0, %big : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
  %2 = nn.matmul %1, %small2 : (tensor<2x16xf32>, tensor<16x4xf32>) -> tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}

// -----

// At most 16 elements stays whole: @h (16) and @s (1) share a persistent
// group (offsets 0 and 16, padded to 32); @k (17) is sharded and joins @w's
// group although persistent parameters are first used in between: offset
// 64, 81 elements padded to 96.
// CHECK: zero.group @group0 {offsets = array<i64: 0, 64>, padded_elements = 96 : i64, params = [@w, @k], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @persistent1 {offsets = array<i64: 0, 16>, padded_elements = 32 : i64, params = [@h, @s], persistent, world_size = 4 : i64}{{$}}
// CHECK-LABEL: func.func @persistent
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>, %[[Y:.*]]: tensor<2x17xf32>)
// CHECK-DAG: %[[SW:.*]] = zero.shard @w :
// CHECK-DAG: %[[SK:.*]] = zero.shard @k :
// CHECK-DAG: %[[SH:.*]] = zero.shard @h :
// CHECK-DAG: %[[SS:.*]] = zero.shard @s :
// CHECK-DAG: %[[T0:.*]] = zero.gather_start %[[SW]], %[[SK]] {group = @group0}
// CHECK-DAG: %[[W0:.*]]:2 = zero.gather_wait %[[T0]] : tensor<4x16xf32>, tensor<17xf32>
// CHECK-DAG: %[[T1:.*]] = zero.gather_start %[[SH]], %[[SS]] {group = @persistent1}
// CHECK-DAG: %[[W1:.*]]:2 = zero.gather_wait %[[T1]] : tensor<16xf32>, tensor<1xf32>
// CHECK: %[[A0:.*]] = nn.matmul %[[X]], %[[W0]]#0
// CHECK-NEXT: %[[A1:.*]] = nn.add %[[A0]], %[[W1]]#0
// CHECK-NEXT: %[[A2:.*]] = nn.add %[[Y]], %[[W0]]#1
// CHECK-NEXT: %[[A3:.*]] = nn.add %[[A1]], %[[W1]]#1
// CHECK-NEXT: return %[[A3]], %[[A2]]
nn.parameter @w : tensor<4x16xf32>
nn.parameter @h : tensor<16xf32>
nn.parameter @k : tensor<17xf32>
nn.parameter @s : tensor<1xf32>
func.func @persistent(%x: tensor<2x4xf32>, %y: tensor<2x17xf32>) -> (tensor<2x16xf32>, tensor<2x17xf32>) {
  %sw = zero.shard @w : !zero.shard<tensor<4x16xf32>>
  %tw = zero.gather_start %sw : !zero.shard<tensor<4x16xf32>>
  %w = zero.gather_wait %tw : tensor<4x16xf32>
  %sh = zero.shard @h : !zero.shard<tensor<16xf32>>
  %th = zero.gather_start %sh : !zero.shard<tensor<16xf32>>
  %h = zero.gather_wait %th : tensor<16xf32>
  %sk = zero.shard @k : !zero.shard<tensor<17xf32>>
  %tk = zero.gather_start %sk : !zero.shard<tensor<17xf32>>
  %k = zero.gather_wait %tk : tensor<17xf32>
  %ss = zero.shard @s : !zero.shard<tensor<1xf32>>
  %ts = zero.gather_start %ss : !zero.shard<tensor<1xf32>>
  %s = zero.gather_wait %ts : tensor<1xf32>
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x16xf32>) -> tensor<2x16xf32>
  %1 = nn.add %0, %h : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %2 = nn.add %y, %k : (tensor<2x17xf32>, tensor<17xf32>) -> tensor<2x17xf32>
  %3 = nn.add %1, %s : (tensor<2x16xf32>, tensor<1xf32>) -> tensor<2x16xf32>
  return %3, %2 : tensor<2x16xf32>, tensor<2x17xf32>
}

// -----

// A tied weight: @e is read at op 10 and op 15 of a 17-op program (9 import
// gathers, 7 nn ops, the return), 5 ops apart, more than 17 / 4 = 4: it gets
// a group of its own, and @a and @b, the first-use neighbours around it, still
// share one.
// CHECK: zero.group @group0 {offsets = array<i64: 0, 32>, padded_elements = 64 : i64, params = [@a, @b], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @group1 {offsets = array<i64: 0>, padded_elements = 64 : i64, params = [@e], world_size = 4 : i64}{{$}}
// CHECK-LABEL: func.func @tied_far_apart
// CHECK-DAG: %[[T0:.*]] = zero.gather_start %{{.*}}, %{{.*}} {group = @group0}
// CHECK-DAG: %[[W0:.*]]:2 = zero.gather_wait %[[T0]]
// CHECK-DAG: %[[T1:.*]] = zero.gather_start %{{.*}} {group = @group1}
// CHECK-DAG: %[[W1:.*]] = zero.gather_wait %[[T1]]
// CHECK: %[[Y0:.*]] = nn.matmul %{{.*}}, %[[W0]]#0
// CHECK-NEXT: %[[Y1:.*]] = nn.matmul %[[Y0]], %[[W1]] :
// CHECK-NEXT: nn.matmul %[[Y1]], %[[W0]]#1
// CHECK: nn.matmul %{{.*}}, %[[W1]] {transpose_rhs = true}
nn.parameter @a : tensor<4x8xf32>
nn.parameter @e : tensor<8x8xf32>
nn.parameter @b : tensor<8x4xf32>
func.func @tied_far_apart(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>) {
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %se = zero.shard @e : !zero.shard<tensor<8x8xf32>>
  %te = zero.gather_start %se : !zero.shard<tensor<8x8xf32>>
  %e = zero.gather_wait %te : tensor<8x8xf32>
  %sb = zero.shard @b : !zero.shard<tensor<8x4xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<8x4xf32>>
  %b = zero.gather_wait %tb : tensor<8x4xf32>
  %0 = nn.matmul %x, %a : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %1 = nn.matmul %0, %e : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %2 = nn.matmul %1, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %3 = nn.relu %1 : tensor<2x8xf32>
  %4 = nn.relu %3 : tensor<2x8xf32>
  %5 = nn.relu %4 : tensor<2x8xf32>
  %6 = nn.matmul %5, %e {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %2, %6 : tensor<2x4xf32>, tensor<2x8xf32>
}

// -----

// One relu fewer: the reads of @e are 4 ops apart in a 16-op program, not
// more than a quarter, so @e is grouped like any other parameter.
// CHECK: zero.group @group0 {offsets = array<i64: 0, 32, 96>, padded_elements = 128 : i64, params = [@a, @e, @b], world_size = 4 : i64}{{$}}
// CHECK-NOT: zero.group
// CHECK-LABEL: func.func @tied_near
nn.parameter @a : tensor<4x8xf32>
nn.parameter @e : tensor<8x8xf32>
nn.parameter @b : tensor<8x4xf32>
func.func @tied_near(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>) {
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %se = zero.shard @e : !zero.shard<tensor<8x8xf32>>
  %te = zero.gather_start %se : !zero.shard<tensor<8x8xf32>>
  %e = zero.gather_wait %te : tensor<8x8xf32>
  %sb = zero.shard @b : !zero.shard<tensor<8x4xf32>>
  %tb = zero.gather_start %sb : !zero.shard<tensor<8x4xf32>>
  %b = zero.gather_wait %tb : tensor<8x4xf32>
  %0 = nn.matmul %x, %a : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %1 = nn.matmul %0, %e : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %2 = nn.matmul %1, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %3 = nn.relu %1 : tensor<2x8xf32>
  %4 = nn.relu %3 : tensor<2x8xf32>
  %6 = nn.matmul %4, %e {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %2, %6 : tensor<2x4xf32>, tensor<2x8xf32>
}

// -----

// One element type per group: f32, f16, f32 in first-use order make three
// groups although all would fit one bucket. f16 offsets align to 8 elements
// (@h2 at 40, not 36) and the group pads to a multiple of 32 elements.
// CHECK: zero.group @group0 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@a], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @group1 {offsets = array<i64: 0, 40>, padded_elements = 64 : i64, params = [@h1, @h2], world_size = 4 : i64}{{$}}
// CHECK-NEXT: zero.group @group2 {offsets = array<i64: 0>, padded_elements = 32 : i64, params = [@c], world_size = 4 : i64}{{$}}
// CHECK-LABEL: func.func @element_types
nn.parameter @a : tensor<4x8xf32>
nn.parameter @h1 : tensor<36xf16>
nn.parameter @h2 : tensor<20xf16>
nn.parameter @c : tensor<8x4xf32>
func.func @element_types(%x: tensor<2x4xf32>, %y: tensor<2x36xf16>, %z: tensor<2x20xf16>) -> (tensor<2x4xf32>, tensor<2x36xf16>, tensor<2x20xf16>) {
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %sh1 = zero.shard @h1 : !zero.shard<tensor<36xf16>>
  %th1 = zero.gather_start %sh1 : !zero.shard<tensor<36xf16>>
  %h1 = zero.gather_wait %th1 : tensor<36xf16>
  %sh2 = zero.shard @h2 : !zero.shard<tensor<20xf16>>
  %th2 = zero.gather_start %sh2 : !zero.shard<tensor<20xf16>>
  %h2 = zero.gather_wait %th2 : tensor<20xf16>
  %sc = zero.shard @c : !zero.shard<tensor<8x4xf32>>
  %tc = zero.gather_start %sc : !zero.shard<tensor<8x4xf32>>
  %c = zero.gather_wait %tc : tensor<8x4xf32>
  %0 = nn.matmul %x, %a : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %1 = nn.add %y, %h1 : (tensor<2x36xf16>, tensor<36xf16>) -> tensor<2x36xf16>
  %2 = nn.add %z, %h2 : (tensor<2x20xf16>, tensor<20xf16>) -> tensor<2x20xf16>
  %3 = nn.matmul %0, %c : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %3, %1, %2 : tensor<2x4xf32>, tensor<2x36xf16>, tensor<2x20xf16>
}

// -----

// Padding: 21, 23 and 17 elements. Each parameter starts at a multiple of 4
// elements (0, 24, 48; packed they would sit at 0, 21, 44), the group ends
// at 65 and pads to 80, the next multiple of 4 ranks x 4 elements; packed
// and unaligned it would be 64.
// CHECK: zero.group @group0 {offsets = array<i64: 0, 24, 48>, padded_elements = 80 : i64, params = [@p, @q, @r], world_size = 4 : i64}{{$}}
// CHECK-LABEL: func.func @padding
nn.parameter @p : tensor<3x7xf32>
nn.parameter @q : tensor<23xf32>
nn.parameter @r : tensor<17xf32>
func.func @padding(%x: tensor<2x3x7xf32>, %y: tensor<2x23xf32>, %z: tensor<2x17xf32>) -> (tensor<2x3x7xf32>, tensor<2x23xf32>, tensor<2x17xf32>) {
  %sp = zero.shard @p : !zero.shard<tensor<3x7xf32>>
  %tp = zero.gather_start %sp : !zero.shard<tensor<3x7xf32>>
  %p = zero.gather_wait %tp : tensor<3x7xf32>
  %sq = zero.shard @q : !zero.shard<tensor<23xf32>>
  %tq = zero.gather_start %sq : !zero.shard<tensor<23xf32>>
  %q = zero.gather_wait %tq : tensor<23xf32>
  %sr = zero.shard @r : !zero.shard<tensor<17xf32>>
  %tr = zero.gather_start %sr : !zero.shard<tensor<17xf32>>
  %r = zero.gather_wait %tr : tensor<17xf32>
  %0 = nn.add %x, %p : (tensor<2x3x7xf32>, tensor<3x7xf32>) -> tensor<2x3x7xf32>
  %1 = nn.add %y, %q : (tensor<2x23xf32>, tensor<23xf32>) -> tensor<2x23xf32>
  %2 = nn.add %z, %r : (tensor<2x17xf32>, tensor<17xf32>) -> tensor<2x17xf32>
  return %0, %1, %2 : tensor<2x3x7xf32>, tensor<2x23xf32>, tensor<2x17xf32>
}

//--- invalid.mlir

nn.parameter @a : tensor<4x8xf32>
// expected-error @+1 {{zplan-shard-parameters: the module is already sharded (it declares zero.group @g)}}
zero.group @g {params = [@a], padded_elements = 32 : i64, world_size = 4 : i64}
func.func @already_sharded(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa {group = @g} : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %0 = nn.matmul %x, %a : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Groups are module-level: two functions gathering the same parameter would
// each make a @group0 holding it. (@prefill and @decode are a generation
// module: @decode decides, see shard-parameters-generate.mlir.)
nn.parameter @a : tensor<4x8xf32>
func.func @encode(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %0 = nn.matmul %x, %a : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
// expected-error @+1 {{parameters are gathered in more than one function (@encode and @score) and none is @train_micro_step or @decode to decide the groups}}
func.func @score(%x: tensor<1x4xf32>) -> tensor<1x8xf32> {
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa : !zero.shard<tensor<4x8xf32>>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %0 = nn.matmul %x, %a : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}
