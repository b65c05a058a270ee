// The loss zplan-autodiff appends (compiler/autodiff/Loss.cpp) and what the
// reduce-scatters look like: causal-lm shifts the labels (input_ids, the
// model's own `labels` input, or an extra `labels` input), output:NAME
// takes a one-element float output; a tied weight gets one reduce-scatter of
// its summed gradient; a parameter that does not reach the loss reduces
// zeros.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/causal.mlir -zplan-autodiff | FileCheck %t/causal.mlir
// RUN: zcc-opt %t/causal.mlir -zplan-autodiff="loss=causal-lm" | FileCheck %t/causal.mlir
// RUN: zcc-opt %t/labels.mlir -zplan-autodiff="labels-input=true" | FileCheck %t/labels.mlir --check-prefix=EXTRA
// RUN: zcc-opt %t/labels.mlir -zplan-autodiff | FileCheck %t/labels.mlir --check-prefix=FROM-IDS
// RUN: zcc-opt %t/own-labels.mlir -zplan-autodiff="labels-input=true" | FileCheck %t/own-labels.mlir
// RUN: zcc-opt %t/output.mlir -zplan-autodiff="loss=output:total" | FileCheck %t/output.mlir
// RUN: zcc-opt %t/integer-parameter.mlir -zplan-autodiff="loss=output:out" | FileCheck %t/integer-parameter.mlir
// RUN: zcc-opt %t/locations.mlir -zplan-autodiff="loss=output:out" -mlir-print-debuginfo | FileCheck %t/locations.mlir

//--- causal.mlir

// The forward stays; train_micro_step takes input_ids and returns the loss.
// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}, tensor<5xf32> {nn.name = "other"})
// CHECK: nn.exp
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<f32> {nn.name = "loss"})
// CHECK: %[[WTE:.*]] = zero.gather_wait %{{.*}} : tensor<8x3xf32>
// CHECK: %[[H:.*]] = nn.embedding %[[WTE]], %[[IDS]]
// CHECK-NEXT: %[[LOGITS:.*]] = nn.matmul %[[H]], %[[WTE]] {transpose_rhs = true}
// targets = concat(input_ids[:, 1:], full([2, 1], -100)).
// CHECK-NEXT: %[[IGNORED:.*]] = nn.constant dense<-100> : tensor<2x1xi64>
// CHECK-NEXT: %[[SHIFTED:.*]] = nn.slice %[[IDS]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x4xi64> -> tensor<2x3xi64>
// CHECK-NEXT: %[[TARGETS:.*]] = nn.concat %[[SHIFTED]], %[[IGNORED]] {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[LOSS:.*]] = nn.cross_entropy %[[LOGITS]], %[[TARGETS]] : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> tensor<f32>
// The seed, 1.0, and the loss's gradient.
// CHECK-NEXT: %[[SEED:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DLOGITS:.*]] = nn.cross_entropy_grad %[[LOGITS]], %[[TARGETS]], %[[SEED]]
// CHECK-NEXT: %[[DH:.*]] = nn.matmul %[[DLOGITS]], %[[WTE]] :
// CHECK: %[[DHEAD:.*]] = nn.matmul %{{.*}}, %{{.*}} : (tensor<8x8xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT: %[[DEMB:.*]] = nn.embedding_grad %[[DH]], %[[IDS]]
// CHECK-NEXT: %[[DWTE:.*]] = nn.add %[[DHEAD]], %[[DEMB]]
// CHECK-NEXT: %[[TWTE:.*]] = zero.reduce_scatter_start %[[DWTE]] : tensor<8x3xf32>
// @unused only feeds the other output, which the training step drops.
// CHECK-NEXT: %[[ZEROS:.*]] = nn.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK-NEXT: %[[TUNUSED:.*]] = zero.reduce_scatter_start %[[ZEROS]] : tensor<5xf32>
// CHECK-NEXT: %[[AWTE:.*]] = zero.grad_shard @wte : !zero.shard<tensor<8x3xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[TWTE]] accumulate(%[[AWTE]] : !zero.shard<tensor<8x3xf32>>) : !zero.shard<tensor<8x3xf32>>
// CHECK-NEXT: %[[AUNUSED:.*]] = zero.grad_shard @unused : !zero.shard<tensor<5xf32>>
// CHECK-NEXT: zero.reduce_scatter_wait %[[TUNUSED]] accumulate(%[[AUNUSED]] : !zero.shard<tensor<5xf32>>) : !zero.shard<tensor<5xf32>>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// CHECK-NOT: zero.reduce_scatter_start
nn.parameter @wte : tensor<8x3xf32>
nn.parameter @unused : tensor<5xf32>
func.func @forward(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}, tensor<5xf32> {nn.name = "other"}) {
  %s = zero.shard @wte : !zero.shard<tensor<8x3xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<8x3xf32>>
  %wte = zero.gather_wait %t : tensor<8x3xf32>
  %su = zero.shard @unused : !zero.shard<tensor<5xf32>>
  %tu = zero.gather_start %su : !zero.shard<tensor<5xf32>>
  %u = zero.gather_wait %tu : tensor<5xf32>
  %h = nn.embedding %wte, %ids : (tensor<8x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  %logits = nn.matmul %h, %wte {transpose_rhs = true} : (tensor<2x4x3xf32>, tensor<8x3xf32>) -> tensor<2x4x8xf32>
  %other = nn.exp %u : tensor<5xf32>
  return %logits, %other : tensor<2x4x8xf32>, tensor<5xf32>
}

//--- labels.mlir

// With labels-input, an extra input `labels`, i64 [batch, sequence] as
// Hugging Face's (input_ids are i32 here), is appended and shifted; without
// it, input_ids are the labels. The only output is the logits whatever its
// name.
// EXTRA-LABEL: func.func @train_micro_step
// EXTRA-SAME: (%{{.*}}: tensor<2x4xi32> {nn.name = "input_ids"}, %{{.*}}: tensor<2x4x3xf32> {nn.name = "x"}, %[[LABELS:.*]]: tensor<2x4xi64> {nn.name = "labels"}) -> (tensor<f32> {nn.name = "loss"})
// EXTRA: %[[IGNORED:.*]] = nn.constant dense<-100> : tensor<2x1xi64>
// EXTRA-NEXT: %[[SHIFTED:.*]] = nn.slice %[[LABELS]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x4xi64> -> tensor<2x3xi64>
// EXTRA-NEXT: nn.concat %[[SHIFTED]], %[[IGNORED]]
// EXTRA-NEXT: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> tensor<f32>
// FROM-IDS-LABEL: func.func @train_micro_step
// FROM-IDS-SAME: (%[[TOKENS:.*]]: tensor<2x4xi32> {nn.name = "input_ids"}, %{{.*}}: tensor<2x4x3xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "loss"})
// FROM-IDS: %[[IGNORED:.*]] = nn.constant dense<-100> : tensor<2x1xi32>
// FROM-IDS-NEXT: %[[SHIFTED:.*]] = nn.slice %[[TOKENS]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x4xi32> -> tensor<2x3xi32>
// FROM-IDS-NEXT: nn.concat %[[SHIFTED]], %[[IGNORED]]
// FROM-IDS-NEXT: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
nn.parameter @w : tensor<3x8xf32>
func.func @forward(%ids: tensor<2x4xi32> {nn.name = "input_ids"}, %x: tensor<2x4x3xf32> {nn.name = "x"}) -> (tensor<2x4x8xf32> {nn.name = "scores"}) {
  %s = zero.shard @w : !zero.shard<tensor<3x8xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<3x8xf32>>
  %w = zero.gather_wait %t : tensor<3x8xf32>
  %logits = nn.matmul %x, %w : (tensor<2x4x3xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return %logits : tensor<2x4x8xf32>
}

//--- own-labels.mlir

// A model with its own `labels` input: it is used, and no input is added.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: (%{{.*}}: tensor<2x4xi64> {nn.name = "input_ids"}, %[[LABELS:.*]]: tensor<2x4xi64> {nn.name = "labels"}, %{{.*}}: tensor<2x4x3xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "loss"})
// CHECK: nn.slice %[[LABELS]] {starts = array<i64: 0, 1>
nn.parameter @w : tensor<3x8xf32>
func.func @forward(%ids: tensor<2x4xi64> {nn.name = "input_ids"}, %labels: tensor<2x4xi64> {nn.name = "labels"}, %x: tensor<2x4x3xf32> {nn.name = "x"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}) {
  %s = zero.shard @w : !zero.shard<tensor<3x8xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<3x8xf32>>
  %w = zero.gather_wait %t : tensor<3x8xf32>
  %logits = nn.matmul %x, %w : (tensor<2x4x3xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return %logits : tensor<2x4x8xf32>
}

//--- output.mlir

// output:total: the forward's [1, 1] output, reshaped to a scalar; its
// seed flows back through the reshape.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-SAME: -> (tensor<f32> {nn.name = "loss"})
// CHECK: %[[TOTAL:.*]] = nn.reduce_sum %{{.*}} {axes = array<i64: 0, 1>, keepdims = true} : tensor<3x8xf32> -> tensor<1x1xf32>
// CHECK-NEXT: %[[LOSS:.*]] = nn.reshape %[[TOTAL]] : tensor<1x1xf32> -> tensor<f32>
// CHECK-NEXT: %[[SEED:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DTOTAL:.*]] = nn.reshape %[[SEED]] : tensor<f32> -> tensor<1x1xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.expand %[[DTOTAL]] : tensor<1x1xf32> -> tensor<3x8xf32>
// CHECK-NEXT: zero.reduce_scatter_start %[[DW]] : tensor<3x8xf32>
// CHECK: return %[[LOSS]] : tensor<f32>
nn.parameter @w : tensor<3x8xf32>
func.func @forward(%x: tensor<2x3xf32> {nn.name = "x"}) -> (tensor<2x3xf32> {nn.name = "first"}, tensor<1x1xf32> {nn.name = "total"}) {
  %s = zero.shard @w : !zero.shard<tensor<3x8xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<3x8xf32>>
  %w = zero.gather_wait %t : tensor<3x8xf32>
  %total = nn.reduce_sum %w {axes = array<i64: 0, 1>, keepdims = true} : tensor<3x8xf32> -> tensor<1x1xf32>
  return %x, %total : tensor<2x3xf32>, tensor<1x1xf32>
}

//--- locations.mlir

// Every backward op is named after the ONNX node it differentiates; the
// reduce-scatters after their parameter, the loss ops "loss".
// CHECK-LABEL: func.func @train_micro_step
// CHECK: nn.constant dense<1.000000e+00> : tensor<f32> loc(#[[SEED:.*]])
// CHECK: nn.expand {{.*}} loc(#[[SUM_GRAD:.*]])
// CHECK: nn.gelu_grad {{.*}} loc(#[[GELU_GRAD:.*]])
// CHECK: zero.reduce_scatter_start {{.*}} loc(#[[W_GRAD:.*]])
// CHECK: zero.grad_shard @w {{.*}} loc(#[[W_GRAD]])
// CHECK: zero.reduce_scatter_wait {{.*}} loc(#[[W_GRAD]])
// CHECK-DAG: #[[SEED]] = loc("loss/grad")
// CHECK-DAG: #[[SUM_GRAD]] = loc("/h.0/Sum/grad")
// CHECK-DAG: #[[GELU_GRAD]] = loc("/h.0/mlp/act/Gelu/grad")
// CHECK-DAG: #[[W_GRAD]] = loc("w/grad")
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.gelu %w {approximate = "tanh"} : tensor<4xf32> loc("/h.0/mlp/act/Gelu")
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32> loc("/h.0/Sum")
  return %r : tensor<f32>
}

//--- integer-parameter.mlir

// A boolean parameter (a mask buffer) gets no gradient and no
// reduce-scatter; the float one does.
// CHECK-LABEL: func.func @train_micro_step
// CHECK-NOT: zero.grad_shard @mask
// CHECK: zero.grad_shard @w
// CHECK-NOT: zero.grad_shard @mask
// CHECK: return
nn.parameter @mask : tensor<4xi1>
nn.parameter @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {nn.name = "x"}) -> (tensor<f32> {nn.name = "out"}) {
  %sm = zero.shard @mask : !zero.shard<tensor<4xi1>>
  %tm = zero.gather_start %sm : !zero.shard<tensor<4xi1>>
  %m = zero.gather_wait %tm : tensor<4xi1>
  %s = zero.shard @w : !zero.shard<tensor<4xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<4xf32>>
  %w = zero.gather_wait %t : tensor<4xf32>
  %y = nn.where %m, %w, %x : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r : tensor<f32>
}
