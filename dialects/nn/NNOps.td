//===- NNOps.td - the nn dialect: tensor compute ops -------*- tablegen -*-===//
//
// `nn` holds the compute of a model: ops on ranked, statically shaped tensors
// with value semantics. ONNX ops land here 1:1 where that is simplest;
// canonicalisation forms the higher-level ops (layer_norm, rms_norm, gelu,
// silu, embedding, matmul with bias) that the runtime and autodiff want.
//
// Parameters are module-level `nn.parameter` symbols. No nn op can name one:
// the only way to a parameter's contents is a `zero.shard` read and a
// `zero.gather_wait`, so a compute op that "bypasses the hooks" cannot be
// written down.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_NN_OPS
#define ZPLAN_NN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::zplan::nn";
  let summary = "Tensor compute ops with static shapes";
  let description = [{
    The compute of a model after import from ONNX: value semantics, ranked
    tensors with static shapes, and module-level parameter symbols.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let hasConstantMaterializer = 1;
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, traits>;

// Shapes are static: the importer binds every dynamic dimension, and the
// verifiers compute with the extents (a `?` would read as a huge negative).
def NN_Tensor : StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>;
def NN_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def NN_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def NN_BoolTensor : StaticShapeTensorOf<[I1]>;

/// Operands broadcast (numpy rules) to the result shape. Verified in C++ by
/// zplan::nn::verifyBroadcast so every such op reports mismatches alike.
def NN_BroadcastOperands : NativeOpTrait<"BroadcastOperands"> {
  let cppNamespace = "::zplan::nn";
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def NN_ParameterOp : NN_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a trainable parameter of the model, as a module-level symbol";
  let description = [{
    Declares one parameter: its ONNX initializer name (the symbol), its full
    logical type, and where its data lives. Nothing in a function reads the
    symbol as a tensor; `zero.shard` reads the rank's shard of it.

    Data inside the model file has no `external_*` attributes; ONNX external
    data records the file (relative to the model), byte offset and length.

    `tied_copies` names the other initializers that hold this parameter's
    values (an exporter's constant folding wrote a tied LM head as a second
    initializer, often transposed): they are no parameters of their own;
    their uses read this one (through an `nn.transpose` when `transposed`),
    so its gradient sums theirs, and an export writes each copy back. Each
    entry is `{name, transposed, equal, reason}`: `equal` is false when
    `--tie` forced a tie between tensors whose values differ; `reason` says
    why they are tied, for the report.

    `untied` says what an initializer that `--untie` kept a parameter of
    its own is equal to (for the report).

    `frozen` (the reason, for the report) marks a parameter that is not
    trained: a buffer the exporter kept as an initializer, or one `--freeze`
    names. It is sharded and gathered like any other, but autodiff treats it
    as a constant: no gradient, no reduce-scatter, no optimizer state.

    ```mlir
    nn.parameter @"transformer.wte.weight" {tied_copies = [
        {equal = true, name = "onnx::MatMul_592",
         reason = "equal transposed, bit for bit", transposed = true}
      ]} : tensor<256x64xf32>
    nn.parameter @"lm_head.weight" : tensor<256x64xf32>
        {external_file = "model.onnx.data", external_offset = 0 : i64,
         external_length = 65536 : i64}
    nn.parameter @"rotary.inv_freq" {frozen = "a buffer"} : tensor<8xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<NN_Tensor>:$type,
                       OptionalAttr<StrAttr>:$external_file,
                       OptionalAttr<I64Attr>:$external_offset,
                       OptionalAttr<I64Attr>:$external_length,
                       OptionalAttr<DictArrayAttr>:$tied_copies,
                       OptionalAttr<StrAttr>:$frozen,
                       OptionalAttr<StrAttr>:$untied);
  let assemblyFormat = "$sym_name attr-dict `:` $type";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// True when the data lives in an ONNX external-data file.
    bool isExternal() { return getExternalFile().has_value(); }
    /// True when the parameter is not trained (see `frozen`).
    bool isFrozen() { return getFrozen().has_value(); }
  }];
}

def NN_ConstantOp : NN_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor known at compile time";
  let description = [{
    A small constant: a folded shape computation, a mask, a rotary table or a
    scalar. Parameters never become constants.

    ```mlir
    %eps = nn.constant dense<9.99999974E-6> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class NN_UnaryOp<string mnemonic, string what, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType], traits)> {
  let summary = "elementwise " # what;
  let description = [{
    Applies the function to every element; the result has the operand's type.

    ```mlir
    %y = nn.}] # mnemonic # [{ %x : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def NN_NegOp : NN_UnaryOp<"neg", "negation">;
def NN_AbsOp : NN_UnaryOp<"abs", "absolute value">;
def NN_SqrtOp : NN_UnaryOp<"sqrt", "square root">;
def NN_ReciprocalOp : NN_UnaryOp<"reciprocal", "reciprocal 1/x">;
def NN_ExpOp : NN_UnaryOp<"exp", "exponential">;
def NN_LogOp : NN_UnaryOp<"log", "natural logarithm">;
def NN_ErfOp : NN_UnaryOp<"erf", "error function">;
def NN_TanhOp : NN_UnaryOp<"tanh", "hyperbolic tangent">;
def NN_SigmoidOp : NN_UnaryOp<"sigmoid", "logistic sigmoid 1/(1+exp(-x))">;
def NN_ReluOp : NN_UnaryOp<"relu", "rectifier max(x, 0)">;
def NN_CosOp : NN_UnaryOp<"cos", "cosine">;
def NN_SinOp : NN_UnaryOp<"sin", "sine">;
def NN_SiluOp : NN_UnaryOp<"silu", "SiLU x * sigmoid(x) (formed from Sigmoid and Mul)">;

def NN_GeluOp : NN_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise GELU, exact (erf) or tanh-approximated";
  let description = [{
    `approximate = "none"` is x/2 (1 + erf(x/sqrt 2)); `"tanh"` is
    x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's gelu_new).
    Formed by canonicalisation from the primitive chains exporters emit.

    ```mlir
    %y = nn.gelu %x {approximate = "tanh"} : tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class NN_BinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat([Pure, SameOperandsElementType,
                                   NN_BroadcastOperands], traits)> {
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Both operands broadcast to the result shape (numpy rules); the element
    types of operands and result are equal.

    ```mlir
    %z = nn.}] # mnemonic # [{ %x, %y : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
}

def NN_AddOp : NN_BinaryOp<"add", "addition", [Commutative, SameOperandsAndResultElementType]>;
def NN_SubOp : NN_BinaryOp<"sub", "subtraction", [SameOperandsAndResultElementType]>;
def NN_MulOp : NN_BinaryOp<"mul", "multiplication", [Commutative, SameOperandsAndResultElementType]>;
def NN_DivOp : NN_BinaryOp<"div", "division (integers truncate toward zero)", [SameOperandsAndResultElementType]>;
def NN_PowOp : NN_BinaryOp<"pow", "power", [SameOperandsAndResultElementType]>;
def NN_MaxOp : NN_BinaryOp<"max", "maximum", [Commutative, SameOperandsAndResultElementType]>;
def NN_MinOp : NN_BinaryOp<"min", "minimum", [Commutative, SameOperandsAndResultElementType]>;

class NN_CompareOp<string mnemonic, string what>
    : NN_BinaryOp<mnemonic, what # " comparison"> {
  let results = (outs NN_BoolTensor:$result);
}
def NN_EqualOp : NN_CompareOp<"equal", "equality">;
def NN_LessOp : NN_CompareOp<"less", "less-than">;
def NN_GreaterOp : NN_CompareOp<"greater", "greater-than">;

def NN_WhereOp : NN_Op<"where", [Pure, NN_BroadcastOperands]> {
  let summary = "elementwise select: condition ? on_true : on_false";
  let description = [{
    All three operands broadcast to the result shape; the two values and the
    result share one element type.

    ```mlir
    %r = nn.where %mask, %scores, %min : (tensor<1x1x16x16xi1>, tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_BoolTensor:$condition, NN_Tensor:$on_true,
                       NN_Tensor:$on_false);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:`
    `(` type($condition) `,` type($on_true) `,` type($on_false) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_CastOp : NN_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Float to integer truncates toward zero; anything to i1 is `x != 0`.

    ```mlir
    %f = nn.cast %mask : tensor<2x16xi1> -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def NN_MatmulOp : NN_Op<"matmul", [Pure]> {
  let summary = "batched matrix product with optional bias";
  let description = [{
    ONNX MatMul semantics (numpy matmul: batch dimensions broadcast, a rank-1
    operand is promoted and its unit dimension removed). `transpose_rhs`
    swaps the last two dimensions of `rhs` first, as Gemm's transB does. The
    optional `bias` broadcasts to the result and is added, so a Linear layer
    is one op.

    `lhs` and `rhs` have one element type. The result (and the bias) has it
    too, or is f32 when the operands are bf16: a bf16 product accumulated
    and returned in f32 (a tensor-core GEMM's CUBLAS_COMPUTE_32F). A bf16
    result is the f32 sums, bias included, rounded to bf16 once
    (zplan-mixed-precision's matmuls, a GEMM with a bf16 C).

    ```mlir
    %y = nn.matmul %x, %w, %b : (tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       Optional<NN_FloatTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def NN_TransposeOp : NN_Op<"transpose", [Pure, SameOperandsAndResultElementType]> {
  let summary = "permutes dimensions";
  let description = [{
    Result dimension i is operand dimension perm[i].

    ```mlir
    %t = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_ReshapeOp : NN_Op<"reshape", [Pure, SameOperandsAndResultElementType]> {
  let summary = "reinterprets the row-major data under another static shape";
  let description = [{
    Element count is preserved. ONNX Reshape, Flatten, Squeeze and Unsqueeze
    all land here once their shapes are known.

    ```mlir
    %r = nn.reshape %x : tensor<2x16x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_ExpandOp : NN_Op<"expand", [Pure, SameOperandsAndResultElementType]> {
  let summary = "broadcasts to a larger static shape";
  let description = [{
    ONNX Expand with its shape known: the operand broadcasts (numpy rules) to
    the result shape, which must be the broadcast of the two.

    ```mlir
    %e = nn.expand %kv : tensor<2x2x1x16x16xf32> -> tensor<2x2x2x16x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_SliceOp : NN_Op<"slice", [Pure, SameOperandsAndResultElementType]> {
  let summary = "strided slice with static bounds on every dimension";
  let description = [{
    One (start, step) pair per dimension, already normalised by the importer:
    start in [0, dim), step >= 1 or <= -1; the result shape gives the count.
    Result element j of dimension d is operand element start[d] + j*step[d].

    ```mlir
    %q = nn.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_ConcatOp : NN_Op<"concat", [Pure, SameOperandsAndResultElementType]> {
  let summary = "joins tensors along one dimension";
  let description = [{
    All operands agree on every dimension but `axis`; the result's `axis`
    extent is their sum.

    ```mlir
    %c = nn.concat %a, %b {axis = 3 : i64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def NN_GatherOp : NN_Op<"gather", [Pure]> {
  let summary = "selects slices along one axis by runtime indices";
  let description = [{
    ONNX Gather: result shape is data.shape[:axis] + indices.shape +
    data.shape[axis+1:]. Negative indices count from the end. A gather from a
    parameter table along axis 0 becomes `nn.embedding`.

    ```mlir
    %g = nn.gather %x, %idx {axis = 1 : i64} : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<2x2x64xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$data, NN_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_EmbeddingOp : NN_Op<"embedding", [Pure]> {
  let summary = "row lookup in an embedding table";
  let description = [{
    `result[i..., :] = table[ids[i...], :]`; ids out of range are an error at
    run time, never a read outside the table.

    ```mlir
    %h = nn.embedding %wte, %ids : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$table, NN_IndexTensor:$ids);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

class NN_ReduceOp<string mnemonic, string what>
    : NN_Op<mnemonic, [Pure, SameOperandsAndResultElementType]> {
  let summary = what # " over a set of dimensions";
  let description = [{
    Reduces `axes` (sorted, non-negative, unique); with `keepdims` they stay
    as extent 1, without it they are removed.

    ```mlir
    %m = nn.}] # mnemonic # [{ %x {axes = array<i64: 2>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}
def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean", "mean">;
def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", "sum">;
def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max", "maximum">;

def NN_SoftmaxOp : NN_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one dimension";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along `axis` (non-negative).

    ```mlir
    %p = nn.softmax %scores {axis = 3 : i64} : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_LayerNormOp : NN_Op<"layer_norm", [Pure, AttrSizedOperandSegments,
                                          AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalisation over the trailing dimensions from axis";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * weight + bias` where mean and the
    biased variance run over dimensions [axis, rank). The optional `weight`
    and `bias` have the shape of those dimensions. Formed from ONNX
    LayerNormalization (opset 17) and from the ReduceMean/Sub/Pow/Sqrt/Div
    chain older opsets export, absorbing the Mul and Add that follow.

    ```mlir
    %y = nn.layer_norm %x weight %g bias %b {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, Optional<NN_FloatTensor>:$weight,
                       Optional<NN_FloatTensor>:$bias, I64Attr:$axis,
                       F32Attr:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_RmsNormOp : NN_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * weight` over the last dimension (Llama's
    RMSNorm), formed from Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul. The
    optional `weight` has the shape of the last dimension.

    ```mlir
    %y = nn.rms_norm %x weight %g {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, Optional<NN_FloatTensor>:$weight,
                       F32Attr:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def NN_AttentionOp : NN_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention, formed from its primitive chain";
  let description = [{
    `softmax(mask(query @ key^T * scale)) @ value` over the last dimension,
    with query [..., S, D], key [..., T, D], value [..., T, Dv] (the same
    leading dimensions; grouped-query models expand keys and values
    first) and result [..., S, Dv]. The optional mask broadcasts to
    [..., S, T]: with `mask_kind = "additive"` it is added to the scores,
    with `"select"` (a boolean mask) scores where it is false become
    `masked_value`. Any of query, key and value may be bf16 (mixed
    precision's activations): read widened, the op (and nn.attention_grad)
    computing and returning f32.

    ```mlir
    %o = nn.attention %q, %k, %v mask %m {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 2.500000e-01 : f32} : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<1x1x16x16xi1>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, Optional<NN_Tensor>:$mask,
                       F32Attr:$scale,
                       DefaultValuedStrAttr<StrAttr, "additive">:$mask_kind,
                       OptionalAttr<F32Attr>:$masked_value);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Generation: the static KV cache (zcc --mode generate)
//===----------------------------------------------------------------------===//

def NN_KvCacheOp : NN_Op<"kv_cache", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a static key or value cache, as a module-level symbol";
  let description = [{
    One attention layer's keys (or values) for every sequence of the batch
    and every position up to the generation's maximum length:
    [batch, heads, max_seq_len, head_dim]. Sequence b's entry for the token
    at position p lives in slot p. The cache is state kept across the
    programs of a generation (`@prefill` fills it, every `@decode` appends
    to it); it is zero when the plan is loaded.

    ```mlir
    nn.kv_cache @cache.0.key : tensor<2x2x64x16xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<NN_FloatTensor>:$type);
  let assemblyFormat = "$sym_name attr-dict `:` $type";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def NN_CacheAppendOp : NN_Op<"cache_append", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "writes new keys or values into their slots of a KV cache";
  let description = [{
    Writes `new[b, :, s, :]` into slot `positions[b, s]` of the cache
    `cache` ([B, H, L, D]), in place, and returns the whole cache after the
    write (the runtime returns the cache's own buffer: no copy). `new` is
    [B, H, S, D] and `positions` [B, S]; every position must lie in [0, L).
    Not Pure: it writes state that outlives the program.

    ```mlir
    %k = nn.cache_append @cache.0.key, %new, %positions : (tensor<2x2x1x16xf32>, tensor<2x1xi64>) -> tensor<2x2x64x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$cache, NN_FloatTensor:$new_entries,
                       NN_IndexTensor:$positions);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `,` $new_entries `,` $positions attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_CachedAttentionOp : NN_Op<"cached_attention", [Pure]> {
  let summary = "attention of new queries over a KV cache, masked by position";
  let description = [{
    `softmax(query @ key^T * scale + mask) @ value` where key slot j is
    visible to query (b, h, s) iff `j <= positions[b, s]`: each query sees
    the cache up to its own position, so the slots past it (not yet written,
    or left by a longer earlier sequence) are never read. query is
    [B, H, S, D], key and value [B, H, L, D] (grouped-query models expand
    the cache first), positions [B, S]; the result is [B, H, S, Dv].

    ```mlir
    %o = nn.cached_attention %q, %k, %v, %positions {scale = 2.500000e-01 : f32} : (tensor<2x4x1x16xf32>, tensor<2x4x64x16xf32>, tensor<2x4x64x16xf32>, tensor<2x1xi64>) -> tensor<2x4x1x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, NN_IndexTensor:$positions,
                       F32Attr:$scale);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss and backward ops, emitted by zplan-autodiff. Each description is the
// op's math: the CPU kernels and test/transforms/check_gradients.py's
// references implement it.
//===----------------------------------------------------------------------===//

def NN_CrossEntropyOp : NN_Op<"cross_entropy", [Pure]> {
  let summary = "mean cross-entropy of logits against integer targets";
  let description = [{
    loss = mean, over the positions whose target is not `ignore_index`, of
    `logsumexp(logits[i, :]) - logits[i, target[i]]`; 0 when no position
    counts. logits are [..., V], targets [...]; the loss is an f32 scalar.
    This op and the other loss ops (cross_entropy_grad, token_logprobs and
    its gradient, token_entropy) also read bf16 logits (mixed precision's LM
    head): widened as they are read, computed and returned in f32.

    ```mlir
    %loss = nn.cross_entropy %logits, %targets {ignore_index = -100 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs StaticShapeTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_CrossEntropyGradOp : NN_Op<"cross_entropy_grad", [Pure]> {
  let summary = "gradient of nn.cross_entropy with respect to the logits";
  let description = [{
    `dlogits[i, :] = dloss * (softmax(logits[i, :]) - onehot(target[i])) /
    count` for the counted rows, 0 for rows whose target is `ignore_index`.

    ```mlir
    %d = nn.cross_entropy_grad %logits, %targets, %dloss {ignore_index = -100 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi64>, tensor<f32>) -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                       NN_FloatTensor:$dloss,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $targets `,` $dloss attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_TokenLogprobsOp : NN_Op<"token_logprobs", [Pure]> {
  let summary = "per-position log-probability of an integer target";
  let description = [{
    `logp[i] = logits[i, target[i]] - logsumexp(logits[i, :])` (torch's
    `log_softmax(logits)` gathered at the targets), 0 where the target is
    `ignore_index`. logits are [..., V], targets and logp [...]. The RL
    objectives (zplan-autodiff's grpo and dpo losses, the @logprobs program)
    are built on it.

    ```mlir
    %logp = nn.token_logprobs %logits, %targets {ignore_index = -100 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi64>) -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_FloatTensor:$logp);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_TokenLogprobsGradOp : NN_Op<"token_logprobs_grad", [Pure]> {
  let summary = "gradient of nn.token_logprobs with respect to the logits";
  let description = [{
    `dlogits[i, :] = dlogp[i] * (onehot(target[i]) - softmax(logits[i, :]))`,
    0 for rows whose target is `ignore_index`.

    ```mlir
    %d = nn.token_logprobs_grad %logits, %targets, %dlogp {ignore_index = -100 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi64>, tensor<2x16xf32>) -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                       NN_FloatTensor:$dlogp,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $targets `,` $dlogp attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_TokenEntropyOp : NN_Op<"token_entropy", [Pure]> {
  let summary = "entropy of softmax over the last axis";
  let description = [{
    `entropy[i] = -sum_v p[i, v] log p[i, v]` with `p = softmax(logits[i,
    :])`, computed as `logsumexp(logits[i, :]) - sum_v p[i, v] logits[i, v]`.
    logits are [..., V], entropy [...]. Not differentiated: the @logprobs
    program reports it.

    ```mlir
    %h = nn.token_entropy %logits : (tensor<2x16x256xf32>) -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits);
  let results = (outs NN_FloatTensor:$entropy);
  let assemblyFormat = [{
    $logits attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_EmbeddingGradOp : NN_Op<"embedding_grad", [Pure]> {
  let summary = "gradient of nn.embedding with respect to the table";
  let description = [{
    Zeroes a [R, D] table (the result type), then scatter-adds `dy[i..., :]`
    into row `ids[i...]` (negative ids wrap as in the forward kernel).

    ```mlir
    %dw = nn.embedding_grad %dy, %ids : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, NN_IndexTensor:$ids);
  let results = (outs NN_FloatTensor:$dtable);
  let assemblyFormat = "$dy `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_GatherGradOp : NN_Op<"gather_grad", [Pure]> {
  let summary = "gradient of nn.gather with respect to the data";
  let description = [{
    Zeroes a tensor of the data's shape (the result type), then scatter-adds
    `dy` along `axis` at `indices` (negative indices wrap).

    ```mlir
    %dx = nn.gather_grad %dy, %idx {axis = 1 : i64} : (tensor<2x2x64xf32>, tensor<2xi64>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, NN_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs NN_FloatTensor:$ddata);
  let assemblyFormat = "$dy `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_SliceGradOp : NN_Op<"slice_grad", [Pure, SameOperandsAndResultElementType]> {
  let summary = "gradient of nn.slice: dy placed back, zeros elsewhere";
  let description = [{
    The result has the slice's input shape; element `starts[d] + j*steps[d]`
    of each dimension d receives `dy[..., j, ...]`, every other element is 0.
    `starts` and `steps` are those of the forward nn.slice.

    ```mlir
    %dx = nn.slice_grad %dy {starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : tensor<2x16x64xf32> -> tensor<2x16x192xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs NN_FloatTensor:$dinput);
  let assemblyFormat = "$dy attr-dict `:` type($dy) `->` type($dinput)";
  let hasVerifier = 1;
}

def NN_LayerNormGradOp : NN_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradient of nn.layer_norm";
  let description = [{
    With xhat = (x - mean) * rstd over dimensions [axis, rank):
    `dbias = sum(dy)`, `dweight = sum(dy * xhat)` (sums over the leading
    dimensions), `dinput = rstd * (g - mean(g) - xhat * mean(g * xhat))`
    where `g = dy * weight`. `weight` is required (autodiff passes ones when
    the forward had none).

    ```mlir
    %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs NN_FloatTensor:$dinput, NN_FloatTensor:$dweight,
                      NN_FloatTensor:$dbias);
  let assemblyFormat = [{
    $dy `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_RmsNormGradOp : NN_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradient of nn.rms_norm";
  let description = [{
    With rstd = 1/sqrt(mean(x^2) + epsilon) over the last dimension and
    xhat = x * rstd: `dweight = sum(dy * xhat)` over the leading dimensions,
    `dinput = rstd * (g - xhat * mean(g * xhat))` where `g = dy * weight`.
    `weight` is required (ones when the forward had none).

    ```mlir
    %dx, %dw = nn.rms_norm_grad %dy, %x, %w {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight, F32Attr:$epsilon);
  let results = (outs NN_FloatTensor:$dinput, NN_FloatTensor:$dweight);
  let assemblyFormat = [{
    $dy `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_SoftmaxGradOp : NN_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of nn.softmax from its output";
  let description = [{
    `dinput = y * (dy - sum(dy * y, axis))` where y is the softmax's output.

    ```mlir
    %dx = nn.softmax_grad %dy, %y {axis = 3 : i64} : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, NN_FloatTensor:$y, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$dinput);
  let assemblyFormat = "$dy `,` $y attr-dict `:` type($dinput)";
  let hasVerifier = 1;
}

def NN_AttentionGradOp : NN_Op<"attention_grad", [Pure]> {
  let summary = "gradient of nn.attention with respect to query, key, value";
  let description = [{
    Recomputes the probabilities P = softmax(mask(q @ k^T * scale)) as the
    forward did (the attributes are the forward op's), then
    `dvalue = P^T @ dout`, `dP = dout @ value^T`,
    `dS = P * (dP - sum(dP * P, -1))`, `dquery = dS @ key * scale`,
    `dkey = dS^T @ query * scale`. The mask gets no gradient.

    ```mlir
    %dq, %dk, %dv = nn.attention_grad %do, %q, %k, %v mask %m {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 2.500000e-01 : f32} : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<1x1x16x16xi1>) -> (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dout, NN_FloatTensor:$query,
                       NN_FloatTensor:$key, NN_FloatTensor:$value,
                       Optional<NN_Tensor>:$mask, F32Attr:$scale,
                       DefaultValuedStrAttr<StrAttr, "additive">:$mask_kind,
                       OptionalAttr<F32Attr>:$masked_value);
  let results = (outs NN_FloatTensor:$dquery, NN_FloatTensor:$dkey,
                      NN_FloatTensor:$dvalue);
  let assemblyFormat = [{
    $dout `,` $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_GeluGradOp : NN_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of nn.gelu from its input";
  let description = [{
    `dinput = dy * gelu'(x)` with x the gelu's input: for `"none"`,
    `Phi(x) + x * phi(x)`; for `"tanh"`, with u = sqrt(2/pi) (x + 0.044715
    x^3), `0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 *
    0.044715 x^2)`.

    ```mlir
    %dx = nn.gelu_grad %dy, %x {approximate = "tanh"} : tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$dy, NN_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs NN_FloatTensor:$dinput);
  let assemblyFormat = "$dy `,` $input attr-dict `:` type($dinput)";
  let hasVerifier = 1;
}

#endif // ZPLAN_NN_OPS
