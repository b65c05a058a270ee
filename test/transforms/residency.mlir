// zplan-residency on a hand-written generation module (as zplan-cached-
// attention leaves it: per-parameter gathers in @prefill and @decode, two
// KV caches), after zplan-shard-parameters on 4 ranks with 512 B buckets:
// @group0 [wte] 512 B, @group1 [wk] 256 B, @group2 [w1] 1024 B, @group3 [lm]
// 512 B (2304 B; shards 576 B per rank), KV caches 2 x 256 B. Fixed memory
// (shards + KV cache): 1088 B.
//
// Best-case working sets (activations + a streamed group's copy while it is
// read): prefill peaks at w1's two matmuls with everything streamed, 128 B
// attention output + 512 B hidden + 1024 B w1 + 8 B last_index = 1672 B; with
// w1 resident, at the LM head: 128 + 256 + 512 (lm) + 8 = 904 B.
// Greedy order (gather time saved per byte: latency favours small groups):
// wk, wte, lm (ties keep @decode's order), w1.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/gen.mlir -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" -zplan-residency | FileCheck %t/gen.mlir --check-prefix=ALL
// RUN: zcc-opt %t/gen.mlir -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" -zplan-residency=policy=jit | FileCheck %t/gen.mlir --check-prefix=JIT
// RUN: zcc-opt %t/gen.mlir -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" -zplan-residency=memory-budget=4039 | FileCheck %t/gen.mlir --check-prefix=TIGHT
// RUN: zcc-opt %t/gen.mlir -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" -zplan-residency=memory-budget=3100 | FileCheck %t/gen.mlir --check-prefix=ONE
// RUN: zcc-opt %t/gen.mlir -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" -zplan-residency=memory-budget=3000 | FileCheck %t/gen.mlir --check-prefix=NONE
// The whole schedule under the tight budget: the streamed group is gathered
// and released per program around its use, and the verifier (budget
// included) accepts it.
// RUN: zcc-opt %t/gen.mlir -zplan-shard-parameters="world-size=4 persistence-threshold=0 bucket-bytes=512 alignment=16" -zplan-residency=memory-budget=4039 -zplan-insert-gathers=memory-budget=4039 -zplan-prefetch=memory-budget=4039 -zplan-decode-lockstep -zplan-verify-schedule=memory-budget=4039 | FileCheck %t/gen.mlir --check-prefix=SCHED
// A module without @decode is not a generation module: left alone.
// RUN: zcc-opt %t/infer.mlir -zplan-residency | FileCheck %t/infer.mlir
// RUN: not zcc-opt %t/gen.mlir -zplan-residency=policy=eager 2>&1 | FileCheck %t/gen.mlir --check-prefix=POLICY

//--- gen.mlir

// No budget: every group resident, gathered once in @generate_begin.
// ALL: module attributes {zplan.residency = {fixed_bytes = 1088 : i64, groups = 4 : i64, kv_cache_bytes = 512 : i64, memory_budget = 0 : i64, policy = "default", resident_bytes = 2304 : i64, resident_groups = 4 : i64, streamed_bytes = 0 : i64, working_set_bytes = 648 : i64}}
// ALL-DAG: zero.group @group0 {{.*}}resident
// ALL-DAG: zero.group @group1 {{.*}}resident
// ALL-DAG: zero.group @group2 {{.*}}resident
// ALL-DAG: zero.group @group3 {{.*}}resident
// ALL-LABEL: func.func @generate_begin
// ALL-NEXT: zero.resident_gather {group = @group0}
// ALL-NEXT: zero.resident_gather {group = @group1}
// ALL-NEXT: zero.resident_gather {group = @group2}
// ALL-NEXT: zero.resident_gather {group = @group3}
// ALL-NEXT: return
// ALL-LABEL: func.func @prefill
// ALL-NOT: zero.gather_start
// ALL: %[[WTE:.*]] = zero.resident_read %{{.*}} {group = @group0} : !zero.shard<tensor<16x8xf32>> -> tensor<16x8xf32>
// ALL-NOT: zero.gather_start
// ALL: nn.embedding %[[WTE]]
// ALL-LABEL: func.func @decode
// ALL-NOT: zero.gather_start
// ALL-COUNT-4: zero.resident_read
// ALL-NOT: zero.gather_start
// ALL-LABEL: func.func @generate_end
// ALL-NEXT: zero.resident_release {group = @group0}
// ALL-NEXT: zero.resident_release {group = @group1}
// ALL-NEXT: zero.resident_release {group = @group2}
// ALL-NEXT: zero.resident_release {group = @group3}
// ALL-NEXT: return

// jit (FSDP2's generate): nothing resident, everything gathered per token.
// JIT: resident_groups = 0 : i64
// JIT-NOT: resident
// JIT-LABEL: func.func @generate_begin
// JIT-NEXT: return
// JIT-LABEL: func.func @decode
// JIT-COUNT-4: zero.gather_start
// JIT-LABEL: func.func @generate_end
// JIT-NEXT: return

// 4039 B: wk and wte fit (1088 + 768 + 1672 = 3528 B); lm does not (1088 +
// 1280 + 1672 = 4040 B), but w1 after it does, because it is w1's copy
// that makes prefill's peak: 1088 + 1792 + 904 = 3784 B. lm is streamed.
// TIGHT: resident_bytes = 1792 : i64, resident_groups = 3 : i64, streamed_bytes = 512 : i64, working_set_bytes = 904 : i64
// TIGHT: zero.group @group0 {{.*}}resident
// TIGHT: zero.group @group1 {{.*}}resident
// TIGHT: zero.group @group2 {{.*}}resident
// TIGHT: zero.group @group3 {offsets = array<i64: 0>, padded_elements = 128 : i64, params = [@lm], world_size = 4 : i64}{{$}}
// TIGHT-LABEL: func.func @generate_begin
// TIGHT-NOT: @group3
// TIGHT: return
// TIGHT-LABEL: func.func @decode
// TIGHT: zero.gather_start %{{.*}} {group = @group3}
// TIGHT-LABEL: func.func @generate_end
// TIGHT-NOT: @group3
// TIGHT: return

// 3100 B: only wk (1088 + 256 + 1672 = 3016 B).
// ONE: resident_bytes = 256 : i64, resident_groups = 1 : i64
// ONE: zero.group @group1 {{.*}}resident

// 3000 B: nothing fits beside the all-streamed working set (1088 + 1672 =
// 2760 B); every group is streamed.
// NONE: resident_bytes = 0 : i64, resident_groups = 0 : i64
// NONE-NOT: resident_gather

// SCHED-LABEL: func.func @prefill
// SCHED: %[[T:.*]] = zero.gather_start %{{.*}} {group = @group3}
// SCHED: %[[LM:.*]] = zero.gather_wait %[[T]]
// SCHED: nn.matmul %{{.*}}, %[[LM]]
// SCHED-NEXT: zero.release %[[LM]]
// SCHED-LABEL: func.func @decode
// SCHED: %[[T2:.*]] = zero.gather_start %{{.*}} {group = @group3}
// SCHED: %[[LM2:.*]] = zero.gather_wait %[[T2]]
// SCHED: nn.matmul %{{.*}}, %[[LM2]]
// SCHED-NEXT: zero.release %[[LM2]]

// POLICY: for the --policy option: Cannot find option named 'eager'

nn.parameter @wte : tensor<16x8xf32>
nn.parameter @wk : tensor<8x8xf32>
nn.parameter @w1 : tensor<8x32xf32>
nn.parameter @lm : tensor<8x16xf32>
nn.kv_cache @cache.0.key : tensor<1x1x8x8xf32>
nn.kv_cache @cache.0.value : tensor<1x1x8x8xf32>
func.func @generate_begin() {
  return
}
func.func @prefill(%ids: tensor<1x4xi64> {nn.name = "input_ids"}, %pos: tensor<1x4xi64> {nn.name = "positions"}, %last: tensor<1xi64> {nn.name = "last_index"}) -> (tensor<1x16xf32> {nn.name = "logits"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x8xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x8xf32>
  %s1 = zero.shard @wk : !zero.shard<tensor<8x8xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<8x8xf32>>
  %wk = zero.gather_wait %t1 : tensor<8x8xf32>
  %s2 = zero.shard @w1 : !zero.shard<tensor<8x32xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<8x32xf32>>
  %w1 = zero.gather_wait %t2 : tensor<8x32xf32>
  %s3 = zero.shard @lm : !zero.shard<tensor<8x16xf32>>
  %t3 = zero.gather_start %s3 : !zero.shard<tensor<8x16xf32>>
  %lm = zero.gather_wait %t3 : tensor<8x16xf32>
  %x = nn.embedding %wte, %ids : (tensor<16x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %k = nn.matmul %x, %wk : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %k4 = nn.reshape %k : tensor<1x4x8xf32> -> tensor<1x1x4x8xf32>
  %kc = nn.cache_append @cache.0.key, %k4, %pos : (tensor<1x1x4x8xf32>, tensor<1x4xi64>) -> tensor<1x1x8x8xf32>
  %vc = nn.cache_append @cache.0.value, %k4, %pos : (tensor<1x1x4x8xf32>, tensor<1x4xi64>) -> tensor<1x1x8x8xf32>
  %o = nn.cached_attention %k4, %kc, %vc, %pos {scale = 0.25 : f32} : (tensor<1x1x4x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x4xi64>) -> tensor<1x1x4x8xf32>
  %o3 = nn.reshape %o : tensor<1x1x4x8xf32> -> tensor<1x4x8xf32>
  %h = nn.matmul %o3, %w1 : (tensor<1x4x8xf32>, tensor<8x32xf32>) -> tensor<1x4x32xf32>
  %h2 = nn.matmul %h, %w1 {transpose_rhs = true} : (tensor<1x4x32xf32>, tensor<8x32xf32>) -> tensor<1x4x8xf32>
  %l = nn.matmul %h2, %lm : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %lf = nn.reshape %l : tensor<1x4x16xf32> -> tensor<4x16xf32>
  %sel = nn.gather %lf, %last {axis = 0 : i64} : (tensor<4x16xf32>, tensor<1xi64>) -> tensor<1x16xf32>
  return %sel : tensor<1x16xf32>
}
func.func @decode(%ids: tensor<1x1xi64> {nn.name = "input_ids"}, %pos: tensor<1x1xi64> {nn.name = "positions"}) -> (tensor<1x16xf32> {nn.name = "logits"}) {
  %s0 = zero.shard @wte : !zero.shard<tensor<16x8xf32>>
  %t0 = zero.gather_start %s0 : !zero.shard<tensor<16x8xf32>>
  %wte = zero.gather_wait %t0 : tensor<16x8xf32>
  %s1 = zero.shard @wk : !zero.shard<tensor<8x8xf32>>
  %t1 = zero.gather_start %s1 : !zero.shard<tensor<8x8xf32>>
  %wk = zero.gather_wait %t1 : tensor<8x8xf32>
  %s2 = zero.shard @w1 : !zero.shard<tensor<8x32xf32>>
  %t2 = zero.gather_start %s2 : !zero.shard<tensor<8x32xf32>>
  %w1 = zero.gather_wait %t2 : tensor<8x32xf32>
  %s3 = zero.shard @lm : !zero.shard<tensor<8x16xf32>>
  %t3 = zero.gather_start %s3 : !zero.shard<tensor<8x16xf32>>
  %lm = zero.gather_wait %t3 : tensor<8x16xf32>
  %x = nn.embedding %wte, %ids : (tensor<16x8xf32>, tensor<1x1xi64>) -> tensor<1x1x8xf32>
  %k = nn.matmul %x, %wk : (tensor<1x1x8xf32>, tensor<8x8xf32>) -> tensor<1x1x8xf32>
  %k4 = nn.reshape %k : tensor<1x1x8xf32> -> tensor<1x1x1x8xf32>
  %kc = nn.cache_append @cache.0.key, %k4, %pos : (tensor<1x1x1x8xf32>, tensor<1x1xi64>) -> tensor<1x1x8x8xf32>
  %vc = nn.cache_append @cache.0.value, %k4, %pos : (tensor<1x1x1x8xf32>, tensor<1x1xi64>) -> tensor<1x1x8x8xf32>
  %o = nn.cached_attention %k4, %kc, %vc, %pos {scale = 0.25 : f32} : (tensor<1x1x1x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1xi64>) -> tensor<1x1x1x8xf32>
  %o3 = nn.reshape %o : tensor<1x1x1x8xf32> -> tensor<1x1x8xf32>
  %h = nn.matmul %o3, %w1 : (tensor<1x1x8xf32>, tensor<8x32xf32>) -> tensor<1x1x32xf32>
  %h2 = nn.matmul %h, %w1 {transpose_rhs = true} : (tensor<1x1x32xf32>, tensor<8x32xf32>) -> tensor<1x1x8xf32>
  %l = nn.matmul %h2, %lm : (tensor<1x1x8xf32>, tensor<8x16xf32>) -> tensor<1x1x16xf32>
  %lf = nn.reshape %l : tensor<1x1x16xf32> -> tensor<1x16xf32>
  return %lf : tensor<1x16xf32>
}
func.func @generate_end() {
  return
}

//--- infer.mlir

// CHECK-NOT: zplan.residency
// CHECK-LABEL: func.func @forward
// CHECK: zero.gather_wait
nn.parameter @w : tensor<4x4xf32>
func.func @forward(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %s = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4x4xf32>>
  %w = zero.gather_wait %t : tensor<4x4xf32>
  %0 = nn.matmul %x, %w : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}
