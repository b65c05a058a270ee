//===- ZeroOps.td - the zero dialect: sharding and collectives -*- tablegen -*-===//
//
// `zero` holds what ZeRO-3 adds to a program: parameter groups, the rank's
// shard of each parameter, split all-gathers (start/wait, as XLA splits
// all-gather-start/done), releases, gradient reduce-scatters and all-reduces.
//
// A parameter shard has type !zero.shard<tensor<...>>, which is not a tensor
// type, so no nn op accepts it. `zero.gather_wait` is the only op that turns
// shards into tensors; the schedule verifier builds on that.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_ZERO_OPS
#define ZPLAN_ZERO_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Zero_Dialect : Dialect {
  let name = "zero";
  let cppNamespace = "::zplan::zero";
  let summary = "Parameter sharding, memory and communication";
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::zplan::nn::NNDialect"];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class Zero_Type<string name, string typeMnemonic> : TypeDef<Zero_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def Zero_ShardType : Zero_Type<"Shard", "shard"> {
  let summary = "this rank's 1/N of a parameter (or gradient), not a tensor";
  let description = [{
    Carries the full logical tensor type of the parameter it is a shard of.
    Being a distinct type, it cannot flow into any nn op.

    ```mlir
    !zero.shard<tensor<256x64xf32>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$tensorType);
  let assemblyFormat = "`<` $tensorType `>`";
}

def Zero_GatherTokenType : Zero_Type<"GatherToken", "gather_token"> {
  let summary = "an all-gather in flight, started and not yet waited for";
}

def Zero_ReduceTokenType : Zero_Type<"ReduceToken", "reduce_token"> {
  let summary = "a reduce-scatter in flight, started and not yet waited for";
}

class Zero_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zero_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Parameter groups and shards
//===----------------------------------------------------------------------===//

def Zero_GroupOp : Zero_Op<"group", [Symbol, HasParent<"::mlir::ModuleOp">,
                                     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "parameters laid out in one flat, padded buffer";
  let description = [{
    The parameters are concatenated (flattened, in the listed order) into one
    buffer of `padded_elements`, a multiple of `world_size`, split into
    `world_size` equal shards. One collective moves a whole group.
    `offsets` gives each parameter's first element in the flat buffer (the
    sharding pass aligns them); without it the parameters are packed back
    to back in order.
    A `persistent` group is small enough to stay whole on every rank
    (DeepSpeed's param_persistence_threshold): gathered once when the plan
    is loaded, never released, no collective inside any program.
    A `resident` group (generation only) is gathered once in
    `@generate_begin` and kept for every token (`zero.resident_gather`).
    A `frozen` group holds frozen parameters only (`nn.parameter` with
    `frozen`): gathered and released like any other, but it has no gradient,
    no reduce-scatter and no optimizer update or state.
    Mixed precision (zplan-mixed-precision, docs/mixed-precision.md): with
    `gather_type` (bf16), the shards stay in the parameters' type (the f32
    master weights, which the optimizer updates) and every gathered copy
    holds `gather_type`: each rank rounds its shard as it gathers, and the
    gathered tensors are of that type. With `reduce_type` (bf16), gradients
    are rounded to it and summed in it, then accumulated in the shard's
    type.

    ```mlir
    zero.group @block0 {params = [@"h.0.w", @"h.0.b"], padded_elements = 4160 : i64, world_size = 4 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefArrayAttr:$params,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       I64Attr:$padded_elements,
                       I64Attr:$world_size,
                       UnitAttr:$persistent,
                       UnitAttr:$resident,
                       UnitAttr:$frozen,
                       OptionalAttr<TypeAttr>:$gather_type,
                       OptionalAttr<TypeAttr>:$reduce_type);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Each parameter's offset (in elements) in the flat buffer, from
    /// `offsets` or, without it, packed in order; needs the symbol table to
    /// size packed parameters.
    ::llvm::SmallVector<int64_t> getParameterOffsets();
    /// The element type of this group's gathered copies: `gather_type`, or
    /// else `parameterType` (its parameters' element type).
    ::mlir::Type getGatheredElementType(::mlir::Type parameterType) {
      auto type = getGatherType();
      return type ? *type : parameterType;
    }
  }];
}

def Zero_ShardOp : Zero_Op<"shard", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads this rank's shard of a parameter";
  let description = [{
    The result's tensor type is the parameter's full type.

    ```mlir
    %s = zero.shard @"transformer.wte.weight" : !zero.shard<tensor<256x64xf32>>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs Zero_ShardType:$result);
  let assemblyFormat = "$param attr-dict `:` qualified(type($result))";
}

def Zero_GradShardOp : Zero_Op<"grad_shard", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads this rank's gradient accumulator shard of a parameter";
  let description = [{
    The gradient state a training plan keeps per parameter: this rank's
    shard of the gradient summed over ranks and micro-steps so far (whole,
    for a persistent group). Only a `zero.reduce_scatter_wait` accumulates
    into it; the optimizer step reads and clears it.

    ```mlir
    %g = zero.grad_shard @"transformer.wte.weight" : !zero.shard<tensor<256x64xf32>>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs Zero_ShardType:$result);
  let assemblyFormat = "$param attr-dict `:` qualified(type($result))";
}

//===----------------------------------------------------------------------===//
// All-gather, split in start and wait
//===----------------------------------------------------------------------===//

def Zero_GatherStartOp : Zero_Op<"gather_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "starts the all-gather of shards (one collective)";
  let description = [{
    Starts one asynchronous all-gather of the given shards; with `group`, they
    must be exactly that group's parameters in its order. A prefetch is a
    start hoisted earlier than the wait. The token has exactly one
    `zero.gather_wait`.

    ```mlir
    %t = zero.gather_start %s0, %s1 {group = @block0} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
    ```
  }];
  let arguments = (ins Variadic<Zero_ShardType>:$shards,
                       OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs Zero_GatherTokenType:$token);
  let assemblyFormat = "$shards attr-dict `:` type($shards)";
  let hasVerifier = 1;
}

def Zero_GatherWaitOp : Zero_Op<"gather_wait"> {
  let summary = "waits for an all-gather: the only producer of parameter tensors";
  let description = [{
    Completes the all-gather of `token`; result i is the full tensor of the
    start's shard i, in the element type its group gathers (`gather_type`:
    a mixed-precision group gathers bf16 copies of its f32 shards). These
    copies live until `zero.release`.

    ```mlir
    %w, %b = zero.gather_wait %t : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Zero_GatherTokenType:$token);
  let results = (outs Variadic<AnyRankedTensor>:$tensors);
  let assemblyFormat = "$token attr-dict `:` type($tensors)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start this wait completes.
    GatherStartOp getStart() {
      return getToken().getDefiningOp<GatherStartOp>();
    }
  }];
}

def Zero_ReleaseOp : Zero_Op<"release"> {
  let summary = "ends the life of gathered parameter copies";
  let description = [{
    Every operand must come from a `zero.gather_wait`; after the release no
    op may read it, and its memory may be reused.

    ```mlir
    zero.release %w, %b : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$tensors);
  let assemblyFormat = "$tensors attr-dict `:` type($tensors)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Residency across the programs of generation
//===----------------------------------------------------------------------===//

def Zero_ResidentGatherOp : Zero_Op<"resident_gather", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "gathers a resident group once, for every token of a generation";
  let description = [{
    In `@generate_begin`: all-gathers the group's shards into its resident
    copy, which outlives the program (it is not an SSA value: the programs of
    a generation are separate functions) and is read by `zero.resident_read`
    in `@prefill` and `@decode` until `zero.resident_release` in
    `@generate_end`. Blocking: the copy is complete when the program ends.

    ```mlir
    zero.resident_gather {group = @group3}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$group);
  let assemblyFormat = "attr-dict";
}

def Zero_ResidentReadOp : Zero_Op<"resident_read", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the parameters of a resident group's gathered copy";
  let description = [{
    Like a `zero.gather_start` / `zero.gather_wait` pair whose collective
    already ran in `@generate_begin`: the operands are exactly the group's
    shards in its order, result i is the full tensor of shard i, and no
    communication happens. The copy belongs to the generation, not to the
    program: a `zero.release` of it is an error.

    ```mlir
    %w, %b = zero.resident_read %s0, %s1 {group = @group3} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>> -> tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Zero_ShardType>:$shards,
                       FlatSymbolRefAttr:$group);
  let results = (outs Variadic<AnyRankedTensor>:$tensors);
  let assemblyFormat =
      "$shards attr-dict `:` type($shards) `->` type($tensors)";
  let hasVerifier = 1;
}

def Zero_ResidentReleaseOp : Zero_Op<"resident_release", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "ends the life of a resident group's gathered copy";
  let description = [{
    In `@generate_end`: after it no program may read the copy (`--check`
    poisons it), and its memory is free until the next `@generate_begin`.

    ```mlir
    zero.resident_release {group = @group3}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$group);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Cross-step prefetch: a gather started in one program, waited in the next
//===----------------------------------------------------------------------===//

def Zero_CarryStartOp : Zero_Op<"carry_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "starts gathering a streamed group for the next @decode";
  let description = [{
    In `@prefill` and `@decode` of a generation module (docs/generation.md
    section 6): starts one asynchronous all-gather of the group's shards
    (exactly its parameters, in its order) into the group's carried copy,
    which outlives the program. The collective runs while this program's
    remaining ops compute (the program ends when it is done: the runtime
    keeps no collective in flight between programs); the next `@decode`
    takes the copy over with `zero.carry_wait`, or `@generate_end` drops it
    with `zero.carry_drain`. The carried copy sits at the same arena offset in
    every program, so no program in between may use those bytes.

    ```mlir
    zero.carry_start %s0, %s1 {group = @group0} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
    ```
  }];
  let arguments = (ins Variadic<Zero_ShardType>:$shards,
                       FlatSymbolRefAttr:$group);
  let assemblyFormat = "$shards attr-dict `:` type($shards)";
  let hasVerifier = 1;
}

def Zero_CarryWaitOp : Zero_Op<"carry_wait", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "completes the gather the previous program carried over";
  let description = [{
    In `@decode`: waits for the all-gather that the `zero.carry_start` of
    the previous program (`@prefill` or `@decode`) started for this group.
    Like a `zero.gather_wait`: result i is the full tensor of shard i, and
    the copies live until a `zero.release`.

    ```mlir
    %w, %b = zero.carry_wait %s0, %s1 {group = @group0} : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>> -> tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Zero_ShardType>:$shards,
                       FlatSymbolRefAttr:$group);
  let results = (outs Variadic<AnyRankedTensor>:$tensors);
  let assemblyFormat =
      "$shards attr-dict `:` type($shards) `->` type($tensors)";
  let hasVerifier = 1;
}

def Zero_CarryDrainOp : Zero_Op<"carry_drain", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "waits for and discards the last carried gather";
  let description = [{
    In `@generate_end`: the last `@prefill` or `@decode` of a generation
    started a gather for a `@decode` that will not run; this waits for it
    (no collective may stay in flight past the generation) and frees its
    bytes.

    ```mlir
    zero.carry_drain {group = @group0}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$group);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Gradient collectives
//===----------------------------------------------------------------------===//

def Zero_ReduceScatterStartOp : Zero_Op<"reduce_scatter_start"> {
  let summary = "starts summing full gradients across ranks into shards";
  let description = [{
    One asynchronous reduce-scatter of the given full-size gradients.
    Autodiff emits one per parameter, right after its gradient is final;
    zplan-shard-parameters merges them per group (as it merges gathers):
    then `group` names the group and the gradients are its parameters' in
    its order; a persistent group's gradients are all-reduced instead
    (every rank keeps the whole group).

    ```mlir
    %t = zero.reduce_scatter_start %gw, %gb : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$gradients,
                       OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs Zero_ReduceTokenType:$token);
  let assemblyFormat = "$gradients attr-dict `:` type($gradients)";
  let hasVerifier = 1;
}

def Zero_ReduceScatterWaitOp : Zero_Op<"reduce_scatter_wait"> {
  let summary = "waits for a reduce-scatter, accumulating into gradient shards";
  let description = [{
    Result i is this rank's shard of the summed gradient i of the start, plus
    `accumulators[i]` when accumulators are given (gradient accumulation over
    micro-steps keeps shards, never full gradients).

    ```mlir
    %g0, %g1 = zero.reduce_scatter_wait %t accumulate(%a0, %a1 : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>) : !zero.shard<tensor<64x64xf32>>, !zero.shard<tensor<64xf32>>
    ```
  }];
  let arguments = (ins Zero_ReduceTokenType:$token,
                       Variadic<Zero_ShardType>:$accumulators);
  let results = (outs Variadic<Zero_ShardType>:$shards);
  let assemblyFormat = [{
    $token (`accumulate` `(` $accumulators^ `:` type($accumulators) `)`)?
    attr-dict `:` type($shards)
  }];
  let hasVerifier = 1;
}

def Zero_AllReduceOp : Zero_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "sums a tensor over all ranks (for replicated parameters)";
  let description = [{
    Used for the gradients of small parameters kept replicated on every rank.

    ```mlir
    %g = zero.all_reduce %grad : tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Zero_OptimizerUpdateOp : Zero_Op<"optimizer_update", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "updates one group's shard from its gradient shard";
  let description = [{
    The optimizer step of one group, on this rank's shard only (the whole
    group when it is persistent): reads the group's gradient accumulator,
    updates the parameters and the optimizer's state shards in place, and
    clears the accumulator. `hyper` holds the run-time scalars (lr, betas,
    eps, weight decay, gradient scale, bias corrections; see
    runtime/plan/plan.proto, OPCODE_ADAMW). Nothing here is ever gathered:
    an optimizer step touches shards only.

    ```mlir
    zero.optimizer_update @group0, %hyper {optimizer = "adamw"} : tensor<8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$group, RankedTensorOf<[F32]>:$hyper,
                       StrAttr:$optimizer);
  let assemblyFormat = "$group `,` $hyper attr-dict `:` type($hyper)";
  let hasVerifier = 1;
}

#endif // ZPLAN_ZERO_OPS
