// Gather starts move up over compute until the collective is covered
// (cost model), and never above a previous start, past `max-in-flight`
// gathers in flight, or beyond the memory budget; with policy=jit, never
// above the previous wait.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/cost.mlir -split-input-file -zplan-prefetch="hardware=cpu" | FileCheck %t/cost.mlir
// RUN: zcc-opt %t/cost.mlir -split-input-file -zplan-prefetch="hardware=cpu hardware-profile=%t/half.json" | FileCheck %t/cost.mlir --check-prefix=HALF
// RUN: zcc-opt %t/cost.mlir -split-input-file -zplan-prefetch="hardware=cpu hardware-profile=%t/serial.json" | FileCheck %t/cost.mlir --check-prefix=SERIAL
// RUN: zcc-opt %t/offload.mlir -split-input-file -zplan-prefetch="hardware=cpu" | FileCheck %t/offload.mlir
// RUN: zcc-opt %t/stops.mlir -zplan-prefetch | FileCheck %t/stops.mlir --check-prefix=INFLIGHT
// RUN: zcc-opt %t/stops.mlir -zplan-prefetch="max-in-flight=3" | FileCheck %t/stops.mlir --check-prefix=START
// RUN: zcc-opt %t/stops.mlir -zplan-prefetch="policy=jit" | FileCheck %t/stops.mlir --check-prefix=JIT
// RUN: zcc-opt %t/stops.mlir -zplan-prefetch="memory-budget=767" -zplan-verify-schedule="memory-budget=767" | FileCheck %t/stops.mlir --check-prefix=BUDGET767
// RUN: zcc-opt %t/stops.mlir -zplan-prefetch="memory-budget=768" -zplan-verify-schedule="memory-budget=768" | FileCheck %t/stops.mlir --check-prefix=BUDGET768

//--- cost.mlir

// On the cpu profile, gathering @gw (11264 elements, 45056 B) over 4 ranks
// takes 10 us + 45056 B x 3/4 / 3 GB/s = 21.264 us. A relu of 90x125 f32
// moves 90000 B at 15 GB/s: 6 us (its 11250 FLOPs take 0.56 us). The matmul
// 90x125 x 125x125 does 2 x 11250 x 125 FLOPs at 50 GFLOP/s: 56.25 us.
// The start passes relu, relu (12 us, not enough) and the matmul (68.25 us),
// then stops: holding the copy over the first relu would buy nothing.
// CHECK-LABEL: func.func @covered_by_matmul
// CHECK-SAME: (%[[X:.*]]: tensor<90x125xf32>, %[[K:.*]]: tensor<125x125xf32>)
// CHECK-NEXT: %[[S:.*]] = zero.shard @w
// CHECK-NEXT: %[[R0:.*]] = nn.relu %[[X]]
// CHECK-NEXT: %[[T:.*]] = zero.gather_start %[[S]] {group = @gw}
// CHECK-NEXT: %[[M:.*]] = nn.matmul %[[R0]], %[[K]]
// CHECK-NEXT: %[[R1:.*]] = nn.relu %[[M]]
// CHECK-NEXT: %[[R2:.*]] = nn.relu %[[R1]]
// CHECK-NEXT: %[[W:.*]] = zero.gather_wait %[[T]]
// CHECK-NEXT: nn.add %[[R2]], %[[W]]
nn.parameter @w : tensor<90x125xf32>
zero.group @gw {params = [@w], padded_elements = 11264 : i64, world_size = 4 : i64}
func.func @covered_by_matmul(%x: tensor<90x125xf32>, %k: tensor<125x125xf32>) -> tensor<90x125xf32> {
  %s = zero.shard @w : !zero.shard<tensor<90x125xf32>>
  %r0 = nn.relu %x : tensor<90x125xf32>
  %m = nn.matmul %r0, %k : (tensor<90x125xf32>, tensor<125x125xf32>) -> tensor<90x125xf32>
  %r1 = nn.relu %m : tensor<90x125xf32>
  %r2 = nn.relu %r1 : tensor<90x125xf32>
  %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<90x125xf32>>
  %w = zero.gather_wait %t : tensor<90x125xf32>
  %y = nn.add %r2, %w : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %w : tensor<90x125xf32>
  return %y : tensor<90x125xf32>
}

// -----

// Six 6 us relus before the use: after three (18 us < 21.264 us) the start
// passes a fourth (24 us) and stops there, two relus short of the top.
// CHECK-LABEL: func.func @covered_by_four_relus
// CHECK-SAME: (%[[X:.*]]: tensor<90x125xf32>)
// CHECK-NEXT: %[[S:.*]] = zero.shard @w
// CHECK-NEXT: %[[R1:.*]] = nn.relu %[[X]]
// CHECK-NEXT: %[[R2:.*]] = nn.relu %[[R1]]
// CHECK-NEXT: %[[T:.*]] = zero.gather_start %[[S]] {group = @gw}
// CHECK-NEXT: %[[R3:.*]] = nn.relu %[[R2]]
// CHECK-NEXT: %[[R4:.*]] = nn.relu %[[R3]]
// CHECK-NEXT: %[[R5:.*]] = nn.relu %[[R4]]
// CHECK-NEXT: %[[R6:.*]] = nn.relu %[[R5]]
// CHECK-NEXT: %[[W:.*]] = zero.gather_wait %[[T]]
//
// Where compute beside a collective runs slower (a calibrated profile's
// compute_slowdown_during_collective s, CostModel.h), it spans the 21.264 us
// sooner: (1 - s) x 21.264 us of compute covers it. s = 0.5: 10.632 us, two
// relus (12 us). s = 1 (a 2-core CPU rank: overlap gains nothing): any
// compute, one relu; the copy is held no longer than that buys.
// HALF-LABEL: func.func @covered_by_four_relus
// HALF: nn.relu
// HALF-NEXT: nn.relu
// HALF-NEXT: nn.relu
// HALF-NEXT: nn.relu
// HALF-NEXT: zero.gather_start
// HALF-NEXT: nn.relu
// HALF-NEXT: nn.relu
// HALF-NEXT: zero.gather_wait
// SERIAL-LABEL: func.func @covered_by_four_relus
// SERIAL: nn.relu
// SERIAL-NEXT: nn.relu
// SERIAL-NEXT: nn.relu
// SERIAL-NEXT: nn.relu
// SERIAL-NEXT: nn.relu
// SERIAL-NEXT: zero.gather_start
// SERIAL-NEXT: nn.relu
// SERIAL-NEXT: zero.gather_wait
nn.parameter @w : tensor<90x125xf32>
zero.group @gw {params = [@w], padded_elements = 11264 : i64, world_size = 4 : i64}
func.func @covered_by_four_relus(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
  %s = zero.shard @w : !zero.shard<tensor<90x125xf32>>
  %r1 = nn.relu %x : tensor<90x125xf32>
  %r2 = nn.relu %r1 : tensor<90x125xf32>
  %r3 = nn.relu %r2 : tensor<90x125xf32>
  %r4 = nn.relu %r3 : tensor<90x125xf32>
  %r5 = nn.relu %r4 : tensor<90x125xf32>
  %r6 = nn.relu %r5 : tensor<90x125xf32>
  %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<90x125xf32>>
  %w = zero.gather_wait %t : tensor<90x125xf32>
  %y = nn.add %r6, %w : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
  zero.release %w : tensor<90x125xf32>
  return %y : tensor<90x125xf32>
}

//--- offload.mlir

// An offloaded shard (zcc --offload-params; the module attributes
// ModulePlanSearch sets) is fetched on the comm queue just before its
// gather, so the compute below the start must cover the fetch too. The
// gather of @gw over 4 ranks takes 21.264 us (cost.mlir); each relu 6 us.
// On the device the start passes four relus (24 us) and stops; in the nvme
// tier its 11264 B shard is fetched first, at the cost model's 2 GB/s,
// 5.632 us, and the start passes a fifth relu (30 us >= 26.896 us).
// CHECK-LABEL: func.func @on_device
// CHECK-NEXT: zero.shard @w
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: zero.gather_start
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: zero.gather_wait
// CHECK-LABEL: func.func @offloaded
// CHECK-NEXT: zero.shard @w
// CHECK-NEXT: nn.relu
// CHECK-NEXT: zero.gather_start
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: nn.relu
// CHECK-NEXT: zero.gather_wait
module {
  nn.parameter @w : tensor<90x125xf32>
  zero.group @gw {params = [@w], padded_elements = 11264 : i64, world_size = 4 : i64}
  func.func @on_device(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
    %s = zero.shard @w : !zero.shard<tensor<90x125xf32>>
    %r0 = nn.relu %x : tensor<90x125xf32>
    %r1 = nn.relu %r0 : tensor<90x125xf32>
    %r2 = nn.relu %r1 : tensor<90x125xf32>
    %r3 = nn.relu %r2 : tensor<90x125xf32>
    %r4 = nn.relu %r3 : tensor<90x125xf32>
    %r5 = nn.relu %r4 : tensor<90x125xf32>
    %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<90x125xf32>>
    %w = zero.gather_wait %t : tensor<90x125xf32>
    %y = nn.add %r5, %w : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %w : tensor<90x125xf32>
    return %y : tensor<90x125xf32>
  }
}

// -----

module attributes {zplan.shards_offloaded = -1 : i64, zplan.shards_offload_tier = "nvme"} {
  nn.parameter @w : tensor<90x125xf32>
  zero.group @gw {params = [@w], padded_elements = 11264 : i64, world_size = 4 : i64}
  func.func @offloaded(%x: tensor<90x125xf32>) -> tensor<90x125xf32> {
    %s = zero.shard @w : !zero.shard<tensor<90x125xf32>>
    %r0 = nn.relu %x : tensor<90x125xf32>
    %r1 = nn.relu %r0 : tensor<90x125xf32>
    %r2 = nn.relu %r1 : tensor<90x125xf32>
    %r3 = nn.relu %r2 : tensor<90x125xf32>
    %r4 = nn.relu %r3 : tensor<90x125xf32>
    %r5 = nn.relu %r4 : tensor<90x125xf32>
    %t = zero.gather_start %s {group = @gw} : !zero.shard<tensor<90x125xf32>>
    %w = zero.gather_wait %t : tensor<90x125xf32>
    %y = nn.add %r5, %w : (tensor<90x125xf32>, tensor<90x125xf32>) -> tensor<90x125xf32>
    zero.release %w : tensor<90x125xf32>
    return %y : tensor<90x125xf32>
  }
}

//--- stops.mlir

// @ga and @gb are already started at the top, their starts pinned by the
// shard read and by each other; @gc's start begins right before its wait.
// Compute here is tiny next to a collective's 10 us latency, so only the
// other rules stop @gc. Ops are numbered from 0 (the shard of @c):
//   #3 start A, #4 start B, #5 r1, #6 r2, #7 wait A, #8 u, #9 release A,
//   #10 r3, #11 wait B, #12 v, #13 release B, #14 r4, #15 start C.
// A start placed right before op i finds A in flight for i in 4..7 and B for
// i in 5..11.
//
// Default (max-in-flight=2): @gc passes r4 .. u, then stops below wait A,
// above which A and B are both in flight.
// INFLIGHT-LABEL: func.func @stops
// INFLIGHT: %[[TA:.*]] = zero.gather_start %{{.*}} {group = @ga}
// INFLIGHT-NEXT: %[[TB:.*]] = zero.gather_start %{{.*}} {group = @gb}
// INFLIGHT-NEXT: nn.relu
// INFLIGHT-NEXT: nn.relu
// INFLIGHT-NEXT: %[[A:.*]] = zero.gather_wait %[[TA]]
// INFLIGHT-NEXT: %[[TC:.*]] = zero.gather_start %{{.*}} {group = @gc}
// INFLIGHT-NEXT: nn.add %{{.*}}, %[[A]]
// INFLIGHT: zero.gather_wait %[[TC]]
//
// With 3 allowed, it goes on up to start B and stops there: the comm queue
// keeps the starts in wait order.
// START-LABEL: func.func @stops
// START: %[[TA:.*]] = zero.gather_start %{{.*}} {group = @ga}
// START-NEXT: %[[TB:.*]] = zero.gather_start %{{.*}} {group = @gb}
// START-NEXT: %[[TC:.*]] = zero.gather_start %{{.*}} {group = @gc}
// START-NEXT: nn.relu
// START: zero.gather_wait %[[TC]]
//
// jit: one module ahead, no further than the previous wait (B's).
// JIT-LABEL: func.func @stops
// JIT: %[[TB:.*]] = zero.gather_start %{{.*}} {group = @gb}
// JIT: %[[B:.*]] = zero.gather_wait %[[TB]]
// JIT-NEXT: %[[TC:.*]] = zero.gather_start %{{.*}} {group = @gc}
// JIT-NEXT: nn.add %{{.*}}, %[[B]]
// JIT: zero.gather_wait %[[TC]]
//
// The budget: shards 32 + 32 + 64 = 128 B; every activation 128 B, copies of
// A and B 128 B, C's 256 B. Live bytes before @gc moves (the input's peak is
// 512 B at r1, r2 and u: 640 B with the shards):
//   #14 r4 256, #13 release B 256, #12 v 384, #11 wait B 256, #10 r3 384,
//   #9 release A 384, #8 u 512.
// Placing C's copy over op i needs 128 + live(i) + 256: 640 at #14 and #13,
// 768 at #12, #11 (640), #10 and #9, 896 at #8. At 767 B it stops below v;
// at 768 B below u. The placed schedule verifies at the same budget.
// BUDGET767-LABEL: func.func @stops
// BUDGET767: %[[TB:.*]] = zero.gather_start %{{.*}} {group = @gb}
// BUDGET767: %[[B:.*]] = zero.gather_wait %[[TB]]
// BUDGET767-NEXT: nn.add %{{.*}}, %[[B]]
// BUDGET767-NEXT: %[[TC:.*]] = zero.gather_start %{{.*}} {group = @gc}
// BUDGET767-NEXT: zero.release %[[B]]
//
// BUDGET768-LABEL: func.func @stops
// BUDGET768: %[[TA:.*]] = zero.gather_start %{{.*}} {group = @ga}
// BUDGET768: %[[A:.*]] = zero.gather_wait %[[TA]]
// BUDGET768-NEXT: nn.add %{{.*}}, %[[A]]
// BUDGET768-NEXT: %[[TC:.*]] = zero.gather_start %{{.*}} {group = @gc}
// BUDGET768-NEXT: zero.release %[[A]]
nn.parameter @a : tensor<4x8xf32>
nn.parameter @b : tensor<4x8xf32>
nn.parameter @c : tensor<8x8xf32>
zero.group @ga {params = [@a], padded_elements = 32 : i64, world_size = 4 : i64}
zero.group @gb {params = [@b], padded_elements = 32 : i64, world_size = 4 : i64}
zero.group @gc {params = [@c], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @stops(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sc = zero.shard @c : !zero.shard<tensor<8x8xf32>>
  %sb = zero.shard @b : !zero.shard<tensor<4x8xf32>>
  %sa = zero.shard @a : !zero.shard<tensor<4x8xf32>>
  %ta = zero.gather_start %sa {group = @ga} : !zero.shard<tensor<4x8xf32>>
  %tb = zero.gather_start %sb {group = @gb} : !zero.shard<tensor<4x8xf32>>
  %r1 = nn.relu %x : tensor<4x8xf32>
  %r2 = nn.relu %r1 : tensor<4x8xf32>
  %a = zero.gather_wait %ta : tensor<4x8xf32>
  %u = nn.add %r2, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  zero.release %a : tensor<4x8xf32>
  %r3 = nn.relu %u : tensor<4x8xf32>
  %b = zero.gather_wait %tb : tensor<4x8xf32>
  %v = nn.add %r3, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  zero.release %b : tensor<4x8xf32>
  %r4 = nn.relu %v : tensor<4x8xf32>
  %tc = zero.gather_start %sc {group = @gc} : !zero.shard<tensor<8x8xf32>>
  %c = zero.gather_wait %tc : tensor<8x8xf32>
  %w = nn.matmul %r4, %c : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  zero.release %c : tensor<8x8xf32>
  return %w : tensor<4x8xf32>
}

//--- half.json
{
  "name": "cpu",
  "matmul_flops_per_second": 50e9,
  "f32_matmul_flops_per_second": 50e9,
  "vector_flops_per_second": 20e9,
  "memory_bytes_per_second": 15e9,
  "collective_bytes_per_second": 3e9,
  "collective_latency_seconds": 10e-6,
  "compute_slowdown_during_collective": 0.5,
  "sources": {
    "matmul_flops_per_second": "test", "f32_matmul_flops_per_second": "test",
    "vector_flops_per_second": "test", "memory_bytes_per_second": "test",
    "collective_bytes_per_second": "test", "collective_latency_seconds": "test",
    "compute_slowdown_during_collective": "test"
  }
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
    "compute_slowdown_during_collective": "test"
  }
}
