// The RL losses zplan-autodiff appends (compiler/autodiff/RlLosses.cpp,
// docs/rl.md): their inputs, the stop-gradient ratio without old log-probs,
// the clip, the KL term, each normalization (dapo marks the step a token
// sum), and DPO's pairs. The numbers are checked against torch and TRL by
// test/rl/.
//
// RUN: split-file %s %t
// RUN: zcc-opt %t/model.mlir -zplan-autodiff="loss=grpo" | FileCheck %t/model.mlir --check-prefix=DAPO
// RUN: zcc-opt %t/model.mlir -zplan-autodiff="loss=grpo loss-type=grpo beta=0.04 epsilon=0.2 epsilon-high=0.28 old-logprobs=true" | FileCheck %t/model.mlir --check-prefix=GRPO
// RUN: zcc-opt %t/model.mlir -zplan-autodiff="loss=grpo per-token-advantages=true" | FileCheck %t/model.mlir --check-prefix=TOKEN
// RUN: zcc-opt %t/model.mlir -zplan-autodiff="loss=dpo" | FileCheck %t/model.mlir --check-prefix=DPO
// RUN: not zcc-opt %t/odd.mlir -zplan-autodiff="loss=dpo" 2>&1 | FileCheck %t/odd.mlir

//--- model.mlir

// dapo (TRL's default) without old log-probs or KL: inputs completion_mask
// and advantages [B]; the ratio divides logp by a stop-gradient copy of
// itself; the loss is the masked sum, the runtime divides it.
// DAPO-LABEL: func.func @train_micro_step
// DAPO-SAME: (%[[IDS:.*]]: tensor<2x4xi64> {nn.name = "input_ids"}, %[[MASK:.*]]: tensor<2x4xf32> {nn.name = "completion_mask"}, %[[ADV:.*]]: tensor<2xf32> {nn.name = "advantages"}) -> (tensor<f32> {nn.name = "loss"})
// DAPO-SAME: attributes {zplan.token_sum_loss}
// DAPO: nn.constant dense<[{{\[}}0.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]]> : tensor<1x4xf32>
// DAPO: %[[LP:.*]] = nn.token_logprobs
// DAPO: %[[OLD:.*]] = nn.reshape %{{.*}} {zplan.stop_gradient}
// DAPO: nn.reshape %[[ADV]] : tensor<2xf32> -> tensor<2x1xf32>
// DAPO: nn.sub %{{.*}}, %[[OLD]]
// DAPO: nn.exp
// DAPO: nn.max
// DAPO: nn.min
// DAPO: nn.neg
// DAPO: %[[LOSS:.*]] = nn.reduce_sum %{{.*}} {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
// DAPO: nn.token_logprobs_grad
// DAPO: return %[[LOSS]]

// grpo with old log-probs and a KL term: both are inputs; the per-sequence
// mean divides by max(count, 1); no token-sum mark.
// GRPO-LABEL: func.func @train_micro_step
// GRPO-SAME: %{{.*}}: tensor<2xf32> {nn.name = "advantages"}, %[[OLD:.*]]: tensor<2x4xf32> {nn.name = "old_logprobs"}, %[[REF:.*]]: tensor<2x4xf32> {nn.name = "ref_logprobs"}) -> (tensor<f32> {nn.name = "loss"}) {
// GRPO-NOT: zplan.stop_gradient
// GRPO: nn.sub %{{.*}}, %[[OLD]]
// GRPO: nn.constant dense<1.280000e+00> : tensor<f32>
// GRPO: nn.constant dense<8.000000e-01> : tensor<f32>
// GRPO: nn.sub %[[REF]], %{{.*}}
// GRPO: nn.constant dense<4.000000e-02> : tensor<f32>
// GRPO: nn.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<2x4xf32> -> tensor<2xf32>
// GRPO: nn.max %{{.*}}, %{{.*}} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
// GRPO: nn.div
// GRPO: %[[LOSS:.*]] = nn.reduce_mean %{{.*}} {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
// GRPO: return %[[LOSS]]

// TOKEN: %{{.*}}: tensor<2x4xf32> {nn.name = "advantages"}) -> (tensor<f32> {nn.name = "loss"})

// dpo: rows 0..B-1 chosen, B..2B-1 rejected; ref_logprobs per token.
// DPO-LABEL: func.func @train_micro_step
// DPO-SAME: %{{.*}}: tensor<2x4xf32> {nn.name = "completion_mask"}, %[[REF:.*]]: tensor<2x4xf32> {nn.name = "ref_logprobs"})
// DPO-DAG: nn.slice %{{.*}} {starts = array<i64: 0>, steps = array<i64: 1>} : tensor<2xf32> -> tensor<1xf32>
// DPO-DAG: nn.slice %{{.*}} {starts = array<i64: 1>, steps = array<i64: 1>} : tensor<2xf32> -> tensor<1xf32>
// DPO: nn.constant dense<1.000000e-01> : tensor<f32>
// DPO: nn.sigmoid
// DPO: nn.log
// DPO: %[[LOSS:.*]] = nn.reduce_mean
// DPO: return %[[LOSS]]
nn.parameter @wte : tensor<8x3xf32>
func.func @forward(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> (tensor<2x4x8xf32> {nn.name = "logits"}) {
  %s = zero.shard @wte : !zero.shard<tensor<8x3xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<8x3xf32>>
  %wte = zero.gather_wait %t : tensor<8x3xf32>
  %h = nn.embedding %wte, %ids : (tensor<8x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  %logits = nn.matmul %h, %wte {transpose_rhs = true} : (tensor<2x4x3xf32>, tensor<8x3xf32>) -> tensor<2x4x8xf32>
  return %logits : tensor<2x4x8xf32>
}

//--- odd.mlir

// CHECK: --loss dpo: input_ids has 3 rows; DPO takes pairs
nn.parameter @wte : tensor<8x3xf32>
func.func @forward(%ids: tensor<3x4xi64> {nn.name = "input_ids"}) -> (tensor<3x4x8xf32> {nn.name = "logits"}) {
  %s = zero.shard @wte : !zero.shard<tensor<8x3xf32>>
  %t = zero.gather_start %s : !zero.shard<tensor<8x3xf32>>
  %wte = zero.gather_wait %t : tensor<8x3xf32>
  %h = nn.embedding %wte, %ids : (tensor<8x3xf32>, tensor<3x4xi64>) -> tensor<3x4x3xf32>
  %logits = nn.matmul %h, %wte {transpose_rhs = true} : (tensor<3x4x3xf32>, tensor<8x3xf32>) -> tensor<3x4x8xf32>
  return %logits : tensor<3x4x8xf32>
}
