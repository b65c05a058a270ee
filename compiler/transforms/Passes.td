//===- Passes.td - zplan compiler passes -----------------*- tablegen -*-===//
//
// Every pass of zcc is declared here; zcc-opt exposes each by its flag.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_PASSES
#define ZPLAN_COMPILER_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

// The enumerated options of the schedule passes, declared once: the values
// are compiler/ScheduleChoices.h's enums, spelt as zcc's --policy and
// --hardware spell them.
class SchedulePolicyOption<string description>
    : Option<"policy", "policy", "::zplan::SchedulePolicy",
             /*default=*/"::zplan::SchedulePolicy::Default", description,
             [{::llvm::cl::values(
               clEnumValN(::zplan::SchedulePolicy::Default, "default",
                          "the scheduler's placement"),
               clEnumValN(::zplan::SchedulePolicy::Jit, "jit",
                          "hook-based ZeRO-3"))}]>;

class HardwareOption
    : Option<"hardware", "hardware", "::zplan::Hardware",
             /*default=*/"::zplan::Hardware::Cpu",
             "Hardware profile for the cost model",
             [{::llvm::cl::values(
               clEnumValN(::zplan::Hardware::H200, "h200", "NVIDIA H200 SXM"),
               clEnumValN(::zplan::Hardware::H100, "h100", "NVIDIA H100 SXM"),
               clEnumValN(::zplan::Hardware::A100, "a100",
                          "NVIDIA A100 SXM 80GB"),
               clEnumValN(::zplan::Hardware::Cpu, "cpu", "a CPU host"))}]>;

// A calibrated profile (bench/calibrate_cpu.cpp writes one) in place of the
// embedded one `hardware` names; zcc's --hardware-profile.
class HardwareProfileOption
    : Option<"hardwareProfile", "hardware-profile", "std::string",
             /*default=*/"", "JSON file of a calibrated hardware profile for "
             "`hardware` (its numbers replace the embedded profile's)">;

def FormNNOps : Pass<"zplan-form-nn-ops", "::mlir::func::FuncOp"> {
  let summary = "Forms the high-level nn ops from the primitive chains "
                "exporters emit";
  let description = [{
    ONNX exporters decompose normalisations and activations into primitive
    ops. The runtime and autodiff want them whole: one fused kernel, one
    known derivative. This pass recognises the chains and replaces them;
    anything not recognised stays primitive and still runs.

    1. layer_norm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`,
       then the `* weight` and `+ bias` that follow (opset < 17 exports).
    2. rms_norm: `x * 1/sqrt(mean(x^2) + eps)` (or `x / sqrt(...)`), then
       the `* weight` (Llama).
    3. gelu: the erf form `x * 0.5 * (1 + erf(x / sqrt(2)))` and the tanh
       form `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.
    4. silu: `x * sigmoid(x)`.
    5. embedding: `gather` along axis 0 of a rank-2 float table.
    6. matmul with transpose_rhs: `matmul(a, transpose(b))` swapping b's
       last two dimensions.
    7. matmul with bias: `matmul(a, b) + c` with c of the last dimension.
    8. attention: `softmax(mask(q @ kT * scale)) @ v`, with an additive or
       a boolean (Where) mask; also torch's SDPA export, whose scale is
       split over q and kT, whose kT merges the heads around a transpose,
       and whose probabilities pass `Where(IsNaN(p), 0, p)` (zero for a row
       that sees no key, where nn.attention gives NaN). That guard is
       dropped when the mask is a constant in which every row sees a key,
       or with `drop-nan-guards` (generation: the KV cache replaces every
       mask by positions, and a token always sees itself).

    Before:
    ```mlir
    %e = nn.erf %d : tensor<2x16x256xf32>    // %d = x / 1.41421354
    %a = nn.add %e, %one ...
    %m = nn.mul %x, %a ...
    %y = nn.mul %m, %half ...
    ```
    After:
    ```mlir
    %y = nn.gelu %x {approximate = "none"} : tensor<2x16x256xf32>
    ```
    Tests: test/transforms/form-nn-ops.mlir, form-sdpa-attention.mlir.
  }];
  let options = [
    Option<"dropNanGuards", "drop-nan-guards", "bool", "false",
           "Form SDPA attentions whose NaN guard covers a run-time mask "
           "(only where the KV cache replaces the masks)">,
  ];
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

//===----------------------------------------------------------------------===//
// Generation (zcc --mode generate; compiler/generate/)
//===----------------------------------------------------------------------===//

def DecodePositions : Pass<"zplan-decode-positions", "::mlir::ModuleOp"> {
  let summary = "Turns @decode, a plain causal LM imported at the full "
                "length, into one token per sequence at run-time positions";
  let description = [{
    A plain export bakes the positions 0..S-1 into constants (position ids,
    rotary tables, the causal mask). `@decode` is imported at S = L, the
    generation's maximum length, so that every position table is complete;
    this pass keeps, per sequence, the one row of every token-indexed value
    at that sequence's position ("gather pushdown"):

    1. input_ids [B, L] becomes [B, 1]; a new trailing input `positions`
       [B, 1] (i64, `nn.name = "positions"`) gives each row's position.
    2. Token-axis analysis, forward in program order: every value derived
       from input_ids records which dimension carries the token (a reshape
       may merge it with others) and which the batch; its extent L becomes
       1. Elementwise and broadcasting ops, casts, reshapes, transposes,
       expands, slices, concats, reductions, softmax and norms off the
       token axis, matmuls with the tokens in batch or row dimensions,
       embeddings and gathers are row-wise; anything else is an error
       naming the op ("cannot follow the token axis through ...").
    3. A value not derived from input_ids that meets a token axis of extent
       L in a broadcasting op is a position table: it is replaced by its
       rows at `positions` (nn.gather), moved onto the batch axis. An
       embedding of constant position ids (GPT-2, OPT) gathers the ids and
       looks up B rows instead of the whole table.
    4. Every attention's mask is checked to be causal (select: true iff
       key j <= query i; additive: 0 there and <= -1e4 elsewhere) and
       dropped. Query, key and value then hold one position; the key and
       value are the new token's, which zplan-cached-attention appends to
       the cache before the attention reads the whole cache.

    Before (B = 2, L = 4; GPT-2's learned positions):

    ```mlir
    func.func @decode(%ids: tensor<2x4xi64> {nn.name = "input_ids"}) -> ... {
      %tok = nn.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
      %pid = nn.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
      %pos = nn.embedding %wpe, %pid : (tensor<4x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
      %h = nn.add %tok, %pos : (tensor<2x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
      ...
      %o = nn.attention %q, %k, %v mask %causal {mask_kind = "select", ...} : (tensor<2x2x4x4xf32>, ..., tensor<1x1x4x4xi1>) -> tensor<2x2x4x4xf32>
    ```

    After:

    ```mlir
    func.func @decode(%ids: tensor<2x1xi64> {nn.name = "input_ids"}, %positions: tensor<2x1xi64> {nn.name = "positions"}) -> ... {
      %p = nn.reshape %positions : tensor<2x1xi64> -> tensor<2xi64>
      %tok = nn.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
      %pid = nn.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
      %g = nn.gather %pid, %p {axis = 1 : i64} : (tensor<1x4xi64>, tensor<2xi64>) -> tensor<1x2xi64>
      %rows = nn.transpose %g {perm = array<i64: 1, 0>} : tensor<1x2xi64> -> tensor<2x1xi64>
      %pos = nn.embedding %wpe, %rows : (tensor<4x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
      %h = nn.add %tok, %pos : (tensor<2x1x8xf32>, tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
      ...
      %o = nn.attention %q, %k, %v {scale = ...} : (tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x1x4xf32>
    ```

    Tests: test/generate/decode-positions.mlir,
    decode-positions-invalid.mlir and decode-positions-models.test.
  }];
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

def CachedAttention : Pass<"zplan-cached-attention", "::mlir::ModuleOp"> {
  let summary = "Rewires every attention of @prefill and @decode to a "
                "static KV cache";
  let description = [{
    Each attention's new keys and values are appended in place to a
    module-level `nn.kv_cache` at the tokens' positions, and the attention
    reads the whole cache with a positional mask (`nn.cached_attention`).
    Plain exports and exports with `past_key_values.*` inputs are both
    accepted (a function is a cache export when it has such an input).

    Before (a plain export's @prefill, S = 8 tokens, one layer):
    ```mlir
    %k = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : ... -> tensor<2x4x8x16xf32>
    %o = nn.attention %q, %k, %v mask %causal {mask_kind = "select", ...}
    ```
    After (`max-seq-len=64`):
    ```mlir
    nn.kv_cache @cache.0.key : tensor<2x4x64x16xf32>
    %kc = nn.cache_append @cache.0.key, %k, %positions : (tensor<2x4x8x16xf32>, tensor<2x8xi64>) -> tensor<2x4x64x16xf32>
    %o = nn.cached_attention %q, %kc, %vc, %positions {scale = ...}
    ```

    Steps, per function (@prefill, @decode):
    1. The `positions` input [B, S]: a cache export's `position_ids`
       renamed; a plain @decode's own (zplan-decode-positions adds it); a
       plain @prefill gets a new one.
    2. Cache export: every `nn.concat(past_key_values.N.key|value, new,
       axis 2)` becomes `nn.cache_append @cache.N.key|value, new,
       positions`; the `present.*` results, the `past_key_values.*` inputs
       and `attention_mask` (which must then be unused) are removed.
    3. Plain export: the key (value) operand of the N-th attention is
       traced back through nn.reshape / nn.expand (a grouped-query repeat)
       to its [B, Hkv, S, D] source, which is appended to @cache.N.key
       (.value); the chain is rebuilt with S replaced by the cache length.
       The mask must be the causal one (checked on the constant; @decode's
       attentions, one position each, have none).
    4. Every nn.attention becomes nn.cached_attention (scale kept, mask
       dropped: positions decide what each query sees).
    5. @prefill gets a `last_index` input [B] and returns the logits at
       each row's last prompt token ([B, V], an nn.gather of the
       [B*S, V] rows); @decode's logits [B, 1, V] become [B, V]. When the
       logits are an LM head (an nn.matmul of the hidden states [B, S, H]
       by a 2-D weight, at most a [V] bias), the gather selects the hidden
       rows [B, H] instead and the head runs on B rows, not B*S.
    Tests: test/generate/cached-attention*.mlir, test/generate/*.test.
  }];
  let options = [
    Option<"maxSeqLen", "max-seq-len", "int64_t", /*default=*/"0",
           "The KV cache length L (required for plain exports; a cache "
           "export's own length must equal it when given)">,
  ];
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def Autodiff : Pass<"zplan-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds @train_micro_step: forward, loss, reverse-mode "
                "gradients and their reduce-scatters";
  let description = [{
    Reverse-mode automatic differentiation of `@forward` ahead of time
    (compiler/autodiff/; the loss is built by Loss.cpp). The module keeps
    `@forward` and gains `@train_micro_step`, which returns the loss:

    1. Clone `@forward` into `@train_micro_step` and append the loss:
       `causal-lm` (cross-entropy of the `logits` output against the labels
       shifted by one position; labels = the `labels` input or input_ids)
       or `output:NAME` (the forward's scalar float output NAME), or an RL
       loss (RlLosses.cpp, docs/rl.md): `grpo` (TRL's clipped policy
       gradient with a KL term; inputs completion_mask, advantages, and
       old_logprobs / ref_logprobs when asked for) or `dpo` (TRL's sigmoid
       loss over chosen/rejected rows; inputs completion_mask and
       ref_logprobs). Loss type `dapo` marks the function
       `zplan.token_sum_loss`: the runtime divides by the global token
       count.
    2. Mark the active values: floats that depend on a parameter (a
       `zero.gather_wait` result). Integer and boolean values, and values
       that depend on no parameter (masks, position ids, rotary tables),
       get no gradient, nor does the result of an op marked
       `zplan.stop_gradient` (torch's .detach()).
    3. Walk the ops backwards from the loss (seed 1.0), applying each op's
       gradient rule (compiler/autodiff/*Rules.cpp) and summing the
       cotangents of values used more than once. An op on the path to the
       loss without a rule is an error naming its ONNX node.
    4. When a parameter's gradient is final (all uses done, a tied weight's
       several uses summed), start its `zero.reduce_scatter_start`; a
       parameter that does not reach the loss reduces a zero constant.
       Integer and boolean parameters (mask buffers) and frozen ones
       (`nn.parameter` with `frozen`: buffers, `zcc --freeze`) are not
       trained: their gathered copies are constants, with no gradient and
       no reduce-scatter.
    5. Before the return: per parameter, `zero.grad_shard` and a
       `zero.reduce_scatter_wait` accumulating into it.

    Before:
    ```mlir
    func.func @forward(%ids: tensor<2x8xi64> {nn.name = "input_ids"}) -> (tensor<2x8x16xf32> {nn.name = "logits"}) {
      %w = zero.gather_wait %t : tensor<16x4xf32>
      ...
    }
    ```
    After (added):
    ```mlir
    func.func @train_micro_step(%ids: tensor<2x8xi64> {nn.name = "input_ids"}) -> (tensor<f32> {nn.name = "loss"}) {
      ...forward ops...
      %loss = nn.cross_entropy %logits, %targets {ignore_index = -100 : i64} ...
      %dlogits = nn.cross_entropy_grad %logits, %targets, %one ...
      ...backward ops...
      %r = zero.reduce_scatter_start %dw : tensor<16x4xf32>
      %acc = zero.grad_shard @w : !zero.shard<tensor<16x4xf32>>
      %new = zero.reduce_scatter_wait %r accumulate(%acc : !zero.shard<tensor<16x4xf32>>) : !zero.shard<tensor<16x4xf32>>
      return %loss : tensor<f32>
    }
    ```
    Tests: test/transforms/autodiff-*.mlir, autodiff-models.test (the
    fixtures), autodiff-numeric.test (finite differences).
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"causal-lm\"",
           "causal-lm | output:NAME">,
    Option<"labelsInput", "labels-input", "bool", /*default=*/"false",
           "causal-lm: add a `labels` input (else the labels are input_ids)">,
    Option<"lossType", "loss-type", "std::string", /*default=*/"\"dapo\"",
           "grpo: TRL's loss_type, grpo | dapo">,
    Option<"beta", "beta", "double", /*default=*/"-1.0",
           "grpo: KL coefficient (default 0); dpo: temperature (default 0.1); "
           "negative: the default">,
    Option<"epsilon", "epsilon", "double", /*default=*/"0.2",
           "grpo: the ratio's lower clip is 1 - epsilon">,
    Option<"epsilonHigh", "epsilon-high", "double", /*default=*/"-1.0",
           "grpo: the ratio's upper clip is 1 + epsilon-high (negative: "
           "epsilon)">,
    Option<"oldLogprobs", "old-logprobs", "bool", /*default=*/"false",
           "grpo: take the behaviour policy's log-probs as an input">,
    Option<"perTokenAdvantages", "per-token-advantages", "bool",
           /*default=*/"false", "grpo: advantages [B, T] instead of [B]">,
    Option<"biasCorrectionKl", "bias-correction-kl", "bool",
           /*default=*/"true",
           "grpo: the KL term times the ratio (TRL's use_bias_correction_kl)">,
  ];
  let dependentDialects = ["::zplan::nn::NNDialect",
                           "::zplan::zero::ZeroDialect"];
}

def LogprobsProgram : Pass<"zplan-logprobs-program", "::mlir::ModuleOp"> {
  let summary = "Builds @logprobs: the per-token log-probs and entropies of "
                "given tokens";
  let description = [{
    Clones `@forward` into `@logprobs` and replaces its results by two f32
    [B, T] tensors aligned with `input_ids` as Hugging Face shifts labels
    (compiler/autodiff/RlLosses.cpp, docs/rl.md): `logprobs[b, t] =
    log_softmax(logits[b, t - 1])[input_ids[b, t]]` and `entropy[b, t]`, the
    entropy of that distribution, both 0 at t = 0. It has no gradient
    state: the schedule shards and gathers it like `@forward`. zcc adds it
    to plans with an RL loss and to `--mode logprobs` (a frozen reference
    model).

    Before:
    ```mlir
    func.func @forward(%ids: tensor<2x8xi64> {nn.name = "input_ids"}) -> (tensor<2x8x16xf32> {nn.name = "logits"})
    ```
    After (added):
    ```mlir
    func.func @logprobs(%ids: tensor<2x8xi64> {nn.name = "input_ids"}) -> (tensor<2x8xf32> {nn.name = "logprobs"}, tensor<2x8xf32> {nn.name = "entropy"}) {
      ...forward ops...
      %lp = nn.token_logprobs %logits, %targets {ignore_index = -100 : i64} ...
      %h = nn.token_entropy %logits ...
      ...
    }
    ```
    Tests: test/transforms/logprobs-program.mlir.
  }];
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

//===----------------------------------------------------------------------===//
// The schedule
//===----------------------------------------------------------------------===//

def ShardParameters : Pass<"zplan-shard-parameters", "::mlir::ModuleOp"> {
  let summary = "Groups parameters into flat, padded, sharded buffers";
  let description = [{
    One collective moves one group, so groups decide how many collectives a
    step makes and how much is gathered at once (FSDP's flat parameters,
    DeepSpeed's buckets).

    1. Order the parameters by first use in the function that decides the
       groups for every program: @train_micro_step when there is one (also
       in a train,generate module), else @decode, else the one function
       that gathers.
    2. A parameter with at most `persistence-threshold` elements is kept
       whole on every rank (DeepSpeed's param_persistence_threshold, and
       its default of 1e5: norms and biases, whose one-per-layer gathers
       would each cost a collective's latency for a few KiB); such
       parameters go to persistent groups, gathered once at load.
    3. A parameter used far apart (a tied embedding and LM head: first and
       last use more than a quarter of the program apart) gets a group of
       its own, so re-gathering it for a late use moves nothing else.
    4. The others fill groups in first-use order up to `bucket-bytes`, one
       element type per group. Frozen parameters (`nn.parameter` with
       `frozen`) fill `frozen` groups of their own: a group is trained, or
       not, as a whole.
    5. Each parameter starts at an offset aligned to `alignment` bytes; the
       group is padded to a multiple of world-size x alignment, so every
       shard is aligned too.
    6. The per-parameter gathers of the import become one start and one
       wait per group, still at the top of the function.

    Before:
    ```mlir
    %s0 = zero.shard @w0 : !zero.shard<tensor<64x64xf32>>
    %t0 = zero.gather_start %s0 : !zero.shard<tensor<64x64xf32>>
    %w0 = zero.gather_wait %t0 : tensor<64x64xf32>
    ...  (same for @w1)
    ```
    After:
    ```mlir
    zero.group @group0 {padded_elements = 8192 : i64, params = [@w0, @w1], world_size = 4 : i64}
    %t = zero.gather_start %s0, %s1 {group = @group0} : ...
    %w0, %w1 = zero.gather_wait %t : tensor<64x64xf32>, tensor<64x64xf32>
    ```
    Tests: test/transforms/shard-parameters.mlir, shard-parameters-train.mlir,
    shard-parameters-generate.mlir, shard-parameters-oneplan.mlir.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks sharing each group">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"32 << 20",
           "Largest group, in bytes (a bigger parameter gets its own group)">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t",
           /*default=*/"100000",
           "Parameters with at most this many elements stay whole on every rank">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"128",
           "Byte alignment of every parameter and shard">,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect"];
}

def MixedPrecision : Pass<"zplan-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Gathers parameters in bf16 over f32 master shards, "
                "multiplies in bf16, and reduces gradients in bf16";
  let description = [{
    Right after zplan-shard-parameters (docs/mixed-precision.md). The shards
    stay f32: they are the master weights the optimizer updates, the
    weights file and the checkpoints hold them, and the gradient
    accumulators and the optimizer's moments beside them are f32.

    With `param-dtype=bf16`, every sharded group gets `gather_type = bf16`:
    each rank rounds its shard to bf16 as it gathers (half the bytes moved,
    half the gathered copy), and every gathered tensor (zero.gather_wait's
    results, and zplan-residency's and zplan-cross-step-prefetch's copies
    made from them later) is bf16. Each op that reads a parameter reads an
    `nn.cast` to f32 placed right before it, so the compute is f32 on the
    bf16-rounded weights (as torch computes a bf16 parameter upcast to f32)
    and the f32 copy lives only across that op; zplan-insert-gathers then
    places the gathers around the casts, which are the copy's only readers.
    A persistent group (at most `persistence-threshold` elements per
    parameter: norms and biases) is never gathered: it stays whole and f32
    on every rank, and its readers read it rounded to bf16 and back (two
    casts), so that every parameter is computed from its bf16 value.

    With `reduce-dtype=bf16`, every trained group gets `reduce_type = bf16`:
    its gradients are rounded to bf16 and summed in bf16 (half the bytes),
    and the sum is added into the f32 accumulator.

    ```mlir
    zero.group @group0 {gather_type = bf16, padded_elements = 8192 : i64, params = [@w0, @w1], world_size = 4 : i64}
    %t = zero.gather_start %s0, %s1 {group = @group0} : ...
    %w0, %w1 = zero.gather_wait %t : tensor<64x64xbf16>, tensor<64x64xbf16>
    ...
    %c = nn.cast %w0 : tensor<64x64xbf16> -> tensor<64x64xf32>
    %y = nn.add %x, %c : ...
    ```

    With `compute-dtype=bf16` (zcc's default under `--param-dtype bf16`),
    every f32 `nn.matmul` that computes from a parameter (the Linear layers
    and the LM head, and every matmul of their gradients: all but position
    arithmetic such as rotary tables, which torch's autocast also leaves in
    f32) reads bf16 operands and accumulates in f32, as torch's autocast
    and FSDP2's bf16 parameters do: a parameter operand reads the bf16 copy
    itself (no f32 cast), and an activation or gradient operand is rounded
    by one `nn.cast` per value, placed before its first matmul. Reshapes
    and transposes between a value and a matmul are re-emitted on its bf16
    copy, so that the input a backward matmul reads (dW = x^T dy) is the
    same bf16 copy the forward read: the saved activation is stored in bf16,
    as torch saves a bf16 Linear's input. The result is bf16 too (and the
    bias is read as bf16, a bf16-valued parameter): the kernel rounds the
    f32 sums once, after the bias, as cuBLAS's bf16 GEMM and autocast return
    it. Later matmuls read it as it is, every other reader through an f32
    `nn.cast` placed right before it, so the projections' outputs a
    backward keeps, and the gradients between matmuls, are stored in bf16
    too. Every other op (norms, softmax,
    attention, element-wise ops, the loss, the optimizer) computes in f32.

    ```mlir
    %xb = nn.cast %x : tensor<2x16x64xf32> -> tensor<2x16x64xbf16>
    %y = nn.matmul %xb, %w0 {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xf32>
    ```
    With all three options f32 the module is left alone. Tests:
    test/transforms/mixed-precision.mlir.
  }];
  let options = [
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"fp32\"",
           "The type parameters are gathered and computed from: fp32 or bf16">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"fp32\"",
           "The type gradients are reduced in: fp32 or bf16">,
    Option<"computeDtype", "compute-dtype", "std::string",
           /*default=*/"\"fp32\"",
           "The type matmuls read their operands in and round their "
           "results to: fp32 or bf16 (the product accumulates in f32)">,
  ];
  let dependentDialects = ["::zplan::nn::NNDialect",
                           "::zplan::zero::ZeroDialect"];
}

def Residency : Pass<"zplan-residency", "::mlir::ModuleOp"> {
  let summary = "Decides, per parameter group of a generation module, "
                "whether it stays gathered for every token or is streamed";
  let description = [{
    In a generation module (one with `@decode`; zcc --mode generate), after
    zplan-shard-parameters. A resident group is gathered once in
    `@generate_begin`, read without communication by `@prefill` and every
    `@decode`, and released in `@generate_end`; a streamed group is
    gathered and released per token by zplan-insert-gathers and
    zplan-prefetch, like any group. Modules without `@decode` are left alone.

    1. Candidates: the non-persistent groups `@prefill` or `@decode` gather.
    2. `policy=jit` (FSDP2's generate: the whole model gathered for every
       token): none is resident. Without a memory budget: all are.
    3. Under `memory-budget`, greedily, the group that saves the most
       gather time per token (cost model of `hardware`) per byte first, a
       group is made resident while the per-rank memory still fits: shards,
       persistent groups, the KV cache (every `nn.kv_cache`), the resident
       copies, plus the larger working set of `@prefill` and `@decode`:
       activations, and each streamed group's copy; in `@decode` over each
       run of its uses that no other group's use (a resident one's
       included) interrupts, as `jit` holds it, so that zplan-insert-gathers
       fits by splitting only where `jit` splits too and no group is
       gathered per token more often than under `jit` at the same budget
       (charging a copy only while an op reads it let a resident group force
       splits that re-gathered more per token than the resident copy saved);
       in `@prefill`, which runs once, only while an op reads it. In a
       `--mode train,generate` module the arena is one allocation at the
       largest program's peak, so the working set is the larger of that
       and the best case of `@forward`, `@train_micro_step` and
       `@optimizer_step` (which gather every group, resident or not).
    4. The chosen groups get the `resident` flag; `@generate_begin` gets
       one `zero.resident_gather` and `@generate_end` one
       `zero.resident_release` per resident group (the functions are
       created empty when absent); in `@prefill` and `@decode` each resident
       group's `zero.gather_start` / `zero.gather_wait` becomes one
       `zero.resident_read` of the same shards.
    5. The module records the decision in `zplan.residency` (a dictionary:
       resident and streamed group counts and bytes, KV cache bytes, the
       budget; `shared_arena_bytes`, the other programs' working set, when
       there are any), which the report shows.

    Before:
    ```mlir
    %t = zero.gather_start %s0, %s1 {group = @group0} : ...
    %w:2 = zero.gather_wait %t : tensor<64x64xf32>, tensor<64xf32>
    ```
    After:
    ```mlir
    zero.group @group0 {..., resident, ...}
    func.func @generate_begin() { zero.resident_gather {group = @group0} ... }
    %w:2 = zero.resident_read %s0, %s1 {group = @group0} : ... -> tensor<64x64xf32>, tensor<64xf32>
    func.func @generate_end() { zero.resident_release {group = @group0} ... }
    ```
    Tests: test/transforms/residency.mlir, residency-jit-bound.test (the
    bound against jit over a sweep of budgets).
  }];
  let options = [
    SchedulePolicyOption<"default | jit (nothing resident)">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes per rank; 0 = none (every group resident)">,
    HardwareOption<>,
    HardwareProfileOption<>,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect",
                           "::mlir::func::FuncDialect"];
}

def OptimizerStep : Pass<"zplan-optimizer-step", "::mlir::ModuleOp"> {
  let summary = "Builds @optimizer_step: one update per group, on shards";
  let description = [{
    In a training module (one with @train_micro_step, after
    zplan-shard-parameters), adds the optimizer step program: it takes the
    run-time scalars as `hyper` (tensor<8xf32>: lr, beta1 or momentum,
    beta2, eps, weight decay, gradient scale, bias corrections) and updates
    every group that is not `frozen` from its gradient shard, on this
    rank's shard only (ZeRO's partitioned optimizer: the fp32 master
    weights, the gradient and the optimizer state are all sharded; a
    persistent group is updated whole, identically on every rank). A module
    without a training step is left alone.

    ```mlir
    func.func @optimizer_step(%hyper: tensor<8xf32> {nn.name = "hyper"}) {
      zero.optimizer_update @group0, %hyper {optimizer = "adamw"} : tensor<8xf32>
      return
    }
    ```
    Tests: test/transforms/optimizer-step.mlir, shard-parameters-train.mlir
    (after the sharding it follows in zcc).
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect",
                           "::mlir::func::FuncDialect"];
}

def Recompute : Pass<"zplan-recompute", "::mlir::ModuleOp"> {
  let summary = "Recomputes transformer blocks for the backward pass when "
                "their saved activations do not fit the memory budget";
  let description = [{
    Activation checkpointing per block in `@train_micro_step`. The backward
    ops read the forward's values by SSA, so every activation the backward
    needs lives from the forward to the backward. When that makes the step
    exceed the budget even with every gathered copy released between its
    uses (the best zplan-insert-gathers can do), this pass trades compute
    for memory:

    1. The forward ops are the ops the returned loss depends on; the rest
       is the backward pass.
    2. A forward compute op belongs to the block named by its ONNX node
       name up to the first scope that is, or ends in, a layer index:
       `/model/transformer/h.3/attn/MatMul` -> `/model/transformer/h.3`,
       `/model/layers.3/...`, `/model/layers/3/...`. Ops outside any such
       scope (embeddings, final norm, LM head, loss) are never recomputed.
    3. Blocks are taken earliest first (an earlier block's activations are
       saved the longest): the values of the block that the backward reads
       and no later forward op reads are cloned, with the block's ops they
       depend on, right before the first backward op that reads one of
       them, and the backward reads the clones. The block's input (the
       previous block's output, which later forward ops read) is the
       checkpoint and stays. Each clone then sinks to right before its
       first reader, so a recomputed value is born when the backward needs
       it. Forward ops that only fed the backward are erased. Parameters are read from the same `zero.gather_wait`
       tensors; zplan-insert-gathers decides later whether a group stays
       gathered across the gap or is gathered again. Under mixed precision
       (zplan-mixed-precision) a parameter is read through `nn.cast`s of
       its bf16 copy: the clones get clones of those casts, so no f32 copy
       lives across the gap.
    4. Stop as soon as the peak (LivenessAnalysis activations, resident
       shards and persistent groups, each sharded group's copy while read)
       fits `memory-budget`. Nothing happens without a budget or when it
       already fits; what still does not fit is zplan-insert-gathers' to
       report.
    5. The function records `zplan.blocks` (blocks found) and
       `zplan.recomputed_blocks` (their names), which the report shows.

    Before:
    ```mlir
    %h = nn.matmul %x, %w {...} loc("/model/h.0/fc/MatMul")
    %a = nn.gelu %h ...
    ...loss...
    %dh = nn.gelu_grad %da, %h ...
    ```
    After:
    ```mlir
    %h = nn.matmul %x, %w ...
    %a = nn.gelu %h ...
    ...loss...
    %h2 = nn.matmul %x, %w ... loc("/model/h.0/fc/MatMul/recompute")
    %dh = nn.gelu_grad %da, %h2 ...
    ```
    Tests: test/transforms/recompute.mlir, test/train/recompute.test.
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes per rank (shards, persistent groups and arena); 0 = none">,
  ];
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

def InsertGathers : Pass<"zplan-insert-gathers", "::mlir::ModuleOp"> {
  let summary = "Places each group's gather before its uses and its release "
                "after them";
  let description = [{
    Starting from every group gathered at the top of the function and never
    released, gives each group one live range per *segment* of its uses:

    1. Uses are the ops that read a group's tensors directly; an nn.reshape
       of a parameter is a view, and its readers count with it.
    2. `policy=default` keeps one segment per group (fewest collectives).
       If the memory budget is exceeded at some op, the segment holding the
       most bytes across a gap over that op is split there: released after
       the use before the gap, gathered again before the use after it
       (GPT-2's tied wte/LM head under a tight budget). A gap `jit` splits
       too (another group, resident or not, used in between) goes first:
       then a group is never gathered more often than under `jit`, and
       whenever `jit`'s segments fit, such gaps alone suffice. Repeat until
       the budget holds; if no split helps, compilation fails with the peak
       op, its live buffers and the bytes over.
    3. `policy=jit` mimics hook-based ZeRO-3: a new segment whenever another
       group is used in between.
    4. Each segment gets `zero.gather_start` + `zero.gather_wait` right
       before its first use and `zero.release` right after its last use.
       Persistent groups stay gathered at the top, never released.

    Prefetching (moving starts earlier) is zplan-prefetch's job.
    Tests: test/transforms/insert-gathers.mlir.
  }];
  let options = [
    SchedulePolicyOption<"default | jit">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes per rank (shards, persistent groups and arena); 0 = none">,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect"];
}

def Prefetch : Pass<"zplan-prefetch", "::mlir::ModuleOp"> {
  let summary = "Moves gather starts earlier so collectives overlap compute";
  let description = [{
    For each `zero.gather_start` in program order, moves it up op by op:

    1. never above another gather_start (the comm queue keeps the order the
       waits need) nor above the ops defining its shards;
    2. while at every op it passes the gathered copy still fits the memory
       budget, and the gathers in flight stay within `max-in-flight` and
       `max-in-flight-bytes`;
    3. at least to right after the previous group's wait (where hook-based
       ZeRO-3 would issue it), then only until the compute it overlaps
       (cost model of `hardware`) covers the collective's time plus that of
       the collectives queued ahead of it: holding the copy longer buys
       nothing. A group whose shard is offloaded (module attributes
       `zplan.shards_offloaded`, `zplan.shards_offload_tier`) counts the
       tier_fetch the comm queue runs before its collective too.
    With `policy=jit`, a start moves at most to the previous group's wait
    (hook-based ZeRO-3 prefetches one module ahead).

    Before:                          After:
    ```mlir
    %a = nn.matmul ...               %t = zero.gather_start %s {group = @g1}
    %t = zero.gather_start %s        %a = nn.matmul ...
    %w = zero.gather_wait %t         %w = zero.gather_wait %t
    ```
    Tests: test/transforms/prefetch.mlir.
  }];
  let options = [
    SchedulePolicyOption<"default | jit">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes per rank; 0 = none">,
    HardwareOption<>,
    HardwareProfileOption<>,
    Option<"maxInFlight", "max-in-flight", "int64_t", /*default=*/"2",
           "Most gathers started and not yet waited for at any op">,
    Option<"maxInFlightBytes", "max-in-flight-bytes", "int64_t",
           /*default=*/"0", "Most bytes being gathered at any op; 0 = none">,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect"];
}

def CrossStepPrefetch : Pass<"zplan-cross-step-prefetch", "::mlir::ModuleOp"> {
  let summary = "Starts @decode's first streamed gather in the previous "
                "program's tail";
  let description = [{
    In a generation module (one with `@decode`), after zplan-prefetch, with
    `policy=default` (`jit` is FSDP2's generate: no prefetch across tokens,
    and the module is left alone). docs/generation.md section 6.

    1. g0 is the group of @decode's first `zero.gather_start` (program
       order) whose group is neither persistent nor resident. None: nothing
       to do.
    2. Under `memory-budget`, g0's copy must fit where the carry adds it
       before any move: in @decode from op 0 to where g0's gather started,
       and at the end of @prefill and @decode. Otherwise nothing is carried.
    2b. The carry is tried on a copy of the module (steps 3-5) and kept only
       if it shortens a @decode step (replayed on the two queues as the
       `report` does, GenerationCost.h): when the tail cannot hide the
       collective and the token's start did, carrying is a loss.
       A skipped carry is recorded as `zplan.carry_skipped = {group, bytes,
       reason}`.
    3. In @decode, g0's first gather_start / gather_wait pair becomes one
       `zero.carry_wait` of the same shards where the wait was (its results
       replace the wait's; the release stays).
    4. In @prefill and @decode, a `zero.carry_start` of g0's shards (the
       function's first `zero.shard` of each parameter, or new ones at the
       top) goes right before the terminator and moves up by
       zplan-prefetch's default rules, with the end of the program as its
       wait: never above a gather_start nor its shards; the copy within the
       budget and the collectives in flight within `max-in-flight` and
       `max-in-flight-bytes` at every op it passes; only until the compute
       below it covers the collective plus the backlog ahead of it (no
       hook-distance minimum: jit has no cross-token prefetch to match).
       In @decode it never
       passes the carry_wait or a reader of its copy (the collective would
       overwrite the copy the token is reading).
    5. `@generate_end` starts with one `zero.carry_drain`.
    6. The module records `zplan.carry = {group = @g0, bytes = N}` for the
       report.

    Before (@decode):                After:
    ```mlir
    %t = zero.gather_start %s {group = @g0}
    %w = zero.gather_wait %t         %w = zero.carry_wait %s {group = @g0}
    ...                              ...
    %y = nn.matmul ...               zero.carry_start %s {group = @g0}
    return %y                        %y = nn.matmul ...
                                     return %y
    ```
    Tests: test/transforms/cross-step-prefetch.mlir.
  }];
  let options = [
    SchedulePolicyOption<"default | jit">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes per rank; 0 = none">,
    HardwareOption<>,
    HardwareProfileOption<>,
    Option<"maxInFlight", "max-in-flight", "int64_t", /*default=*/"2",
           "Most gathers started and not yet waited for at any op">,
    Option<"maxInFlightBytes", "max-in-flight-bytes", "int64_t",
           /*default=*/"0", "Most bytes being gathered at any op; 0 = none">,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect"];
}

def DecodeLockstep : Pass<"zplan-decode-lockstep", "::mlir::ModuleOp"> {
  let summary = "Decides how the ranks' decode loops stay in lockstep";
  let description = [{
    In a generation module (one with `@decode`), after the gathers are
    placed (zplan-prefetch, zplan-cross-step-prefetch). Each rank generates
    its own rows, so each would decode until its own rows finish; a
    collective in @decode would then leave a rank waiting for one that
    stopped (DeepSpeed's ZeRO-3 rollout deadlock). docs/generation.md
    section 8.

    1. One rank, or a @decode with no collective (no zero.gather_start of
       a non-persistent group, carry_start, all_reduce,
       reduce_scatter_start or resident_gather: every group is resident or
       persistent): nothing to agree on. Each rank stops when its rows
       finish; @decode gets no `zplan.lockstep_period`.
    2. Otherwise the ranks all-reduce their counts of running rows (8 B)
       after @prefill and after every K-th @decode, and decode again only
       while the sum is not 0. K trades the agreement's latency against the
       decode steps run after every row finished (at most K - 1): per token
       it costs a/K + (K - 1) t / (2 M), a the all-reduce on `hardware`, t
       one @decode replayed on the two queues (GenerationCost.h), M the
       most tokens a row can generate (L - P); K = the integer nearest to
       sqrt(2 a M / t), at least 1 and at most M.
    3. @decode records `zplan.lockstep_period = K : i64`; the plan carries
       it as the decode program's lockstep_period.

    VerifySchedule's rule 18 refuses a @decode with a collective and no
    period. Tests: test/transforms/decode-lockstep.mlir.
  }];
  let options = [
    HardwareOption<>,
    HardwareProfileOption<>,
  ];
  let dependentDialects = ["::zplan::zero::ZeroDialect"];
}

def VerifySchedule : Pass<"zplan-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "Proves the safety invariants of a scheduled program";
  let description = [{
    Checks, naming the op, group and parameter of any violation:

    1. no nn op reads a parameter except through zero.gather_wait (by the
       types: a shard is not a tensor; checked again here for any op);
    2. every gather_start is in a zero.group and its wait follows it;
    3. no op reads a gathered tensor (or a view of it) after its release;
    4. every gathered copy of a non-persistent group is released exactly
       once, as a whole group;
    5. the memory budget holds at every op (shards, persistent groups and
       live transient buffers);
    6. the collective sequence is the same on every rank: the function is
       one straight-line block with no op that could depend on the rank;
    7. every zero.reduce_scatter_start reduces exactly one group's
       gradients and is waited for, later in the same function, into that
       group's gradient shards;
    8. no op reads a gradient shard (zero.grad_shard) except the
       reduce-scatter wait that accumulates into it: a partial sum is
       never read;
    9. @optimizer_step holds only zero.optimizer_update ops, one per group
       that is not `frozen` (none for a frozen one): the optimizer reads and
       writes shards only, never a gathered parameter.
    10. generation: zero.resident_gather only in @generate_begin and
        zero.resident_release only in @generate_end, each at most once per
        group; every `resident` group is gathered and released there;
    11. zero.resident_read only in @prefill and @decode (that its tensors
        are never zero.release'd, the release's op verifier proves);
    12. no zero.gather_start of a resident group in a generation program
        (its copy is read, never gathered again inside the generation; the
        training programs of a train,generate module, which run outside it,
        gather the group as any other).
    13. cross-step prefetch (docs/generation.md section 6):
        zero.carry_start only in @prefill and @decode, zero.carry_wait only
        in @decode, zero.carry_drain only in @generate_end;
    14. when any carry op exists: all name one group, and @prefill and
        @decode each hold exactly one carry_start, @decode exactly one
        carry_wait, @generate_end exactly one carry_drain (so every
        @decode finds one carried gather and none outlives the
        generation); the carry_wait's copy obeys rules 3 and 4;
    15. in @decode no zero.gather_start of the carried group precedes the
        carry_wait (that its results are not read before it, dominance
        proves);
    16. no collective starts after a carry_start in its program: the
        carried gather is last on the comm queue;
    17. in @decode the carry_start follows the carry_wait and every reader
        of its copy, release included: the next carried gather writes the
        same bytes. (Carried copies are SSA values of @decode only, so no
        program reads a released copy across programs.)
    18. the collective sequence of a generation does not depend on when a
        rank's rows finish: @generate_begin, @prefill and @generate_end run
        once per generation, @decode as often as the rows need, which
        differs per rank; so a @decode that holds a collective must carry
        `zplan.lockstep_period` >= 1 (zplan-decode-lockstep), with which the
        ranks run it equally often (on one rank there is no other to wait).

    One plan, many programs (train,generate; docs/one-plan.md); rules 20-22
    are in VerifyProgramBoundaries.cpp:

    20. nothing of a collective crosses a program boundary: a program's
        arguments and results are never a shard or a gather or reduce
        token. With the op verifiers (a start's token has exactly one wait,
        in its function) and rules 3-4, every collective a program starts
        completes in it: no streamed gathered copy is live and no gradient
        accumulator half-reduced when a program ends (the persistent
        groups, the resident set and the carried gather outlive programs by
        design: rules 10-12, the carry rules);
    21. gradient state is touched only by @train_micro_step
        (zero.grad_shard, zero.reduce_scatter_start/wait, zero.all_reduce)
        and @optimizer_step (zero.optimizer_update): generation programs,
        the transitions and @forward never do, so generation inside a
        gradient-accumulation window leaves the accumulators untouched;
    22. no nn op reads a parameter from its shard by a path that skips the
        gather (a shard reinterpreted as a tensor, e.g. by a cast): only
        gather_wait, resident_read and carry_wait turn a shard into a
        tensor.

    Tests: test/transforms/verify-schedule.mlir,
    verify-schedule-train.mlir (rules 7-9), verify-schedule-generate.mlir,
    verify-schedule-carry.mlir, verify-schedule-oneplan.mlir.
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes per rank; 0 = none">,
  ];
}

#endif // ZPLAN_COMPILER_TRANSFORMS_PASSES
