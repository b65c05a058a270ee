//===- MixedPrecision.cpp - the zplan-mixed-precision pass ----------------===//
//
// bf16 gathers over f32 master shards, and bf16 gradient reductions (see
// Passes.td and docs/mixed-precision.md). The pass only marks groups and
// retypes the gathered tensors; the conversions themselves are the
// runtime's (the gather rounds each shard, the reduction rounds each
// gradient), and the f32 compute reads `nn.cast`s placed at each reader.
// Tests: test/transforms/mixed-precision.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zplan {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// `loc` under a name that says what the pass made there: the ONNX node's
/// name (the first NameLoc, as zplan-recompute finds a node's block by it)
/// with `/what` appended, so that a cast is named, and recomputed, with the
/// layer it belongs to ("/model/layers.0/mlp/up_proj/MatMul/bf16 result").
Location madeHere(Location loc, StringRef what) {
  std::optional<StringRef> node = nn::onnxNodeName(loc);
  std::string text = node ? (*node + "/" + what).str() : what.str();
  return NameLoc::get(StringAttr::get(loc.getContext(), text), loc);
}

struct MixedPrecisionPass
    : zplan::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool gatherBf16, reduceBf16, computeBf16;
    if (failed(parseDtype(module, "param-dtype", paramDtype, gatherBf16)) ||
        failed(parseDtype(module, "reduce-dtype", reduceDtype, reduceBf16)) ||
        failed(parseDtype(module, "compute-dtype", computeDtype, computeBf16)))
      return signalPassFailure();
    if (!gatherBf16 && !reduceBf16 && !computeBf16)
      return;
    // The master is f32: a model exported in bf16 or f16 has no f32 values
    // to keep (export it in float32; the gathers make the bf16 copies).
    for (auto param : module.getOps<nn::ParameterOp>())
      if (!param.getTensorType().getElementType().isF32()) {
        param.emitError() << "--param-dtype/--reduce-dtype bf16 keep f32 "
                             "master weights, but parameter @"
                          << param.getSymName() << " is "
                          << param.getTensorType()
                          << "; export the model in float32";
        return signalPassFailure();
      }
    Type bf16 = BFloat16Type::get(module.getContext());
    for (auto group : module.getOps<zero::GroupOp>()) {
      if (gatherBf16 && !group.getPersistent())
        group.setGatherType(bf16);
      if (reduceBf16 && !group.getFrozen())
        group.setReduceType(bf16);
    }
    if (gatherBf16 && failed(gatherInBf16(module)))
      return signalPassFailure();
    if (computeBf16)
      multiplyInBf16(module);
  }

  /// param-dtype=bf16: gathered copies in bf16, read through f32 casts; the
  /// KV caches in bf16.
  static LogicalResult gatherInBf16(ModuleOp module) {
    SmallVector<zero::GatherWaitOp> waits;
    module.walk([&](zero::GatherWaitOp wait) { waits.push_back(wait); });
    for (zero::GatherWaitOp wait : waits) {
      auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
          wait.getStart(), wait.getStart().getGroupAttr());
      if (!group) {
        wait.emitError() << "zplan-mixed-precision: a gather of no group "
                            "(run zplan-shard-parameters first)";
        return failure();
      }
      // Every group is marked above but a persistent one, which is read
      // rounded at each reader instead.
      castAtReaders(wait, /*gathersBf16=*/group.getGatherType().has_value());
    }
    storeKvCachesInBf16(module);
    return success();
  }

  /// compute-dtype=bf16: every f32 nn.matmul that computes from a parameter
  /// reads bf16 operands (see Passes.td). Which matmuls: those with an
  /// operand that depends on a gathered parameter -- everything downstream
  /// of a zero.gather_wait, which is every layer's activation and every
  /// gradient, but not position arithmetic (rotary tables) computed from
  /// the inputs alone.
  static void multiplyInBf16(ModuleOp module) {
    module.walk([](func::FuncOp func) {
      llvm::DenseSet<Value> fromParameters;
      SmallVector<nn::MatmulOp> matmuls;
      func.walk([&](Operation *op) {
        bool derived = llvm::isa<zero::GatherWaitOp>(op) ||
                       llvm::any_of(op->getOperands(), [&](Value operand) {
                         return fromParameters.contains(operand);
                       });
        if (!derived)
          return;
        fromParameters.insert(op->result_begin(), op->result_end());
        if (auto matmul = llvm::dyn_cast<nn::MatmulOp>(op))
          if (getElementTypeOrSelf(matmul.getType()).isF32())
            matmuls.push_back(matmul);
      });
      // The bf16 copy of each f32 value, made before its first matmul
      // (walk order is program order: it dominates the later ones).
      llvm::DenseMap<Value, Value> copies;
      for (nn::MatmulOp matmul : matmuls) {
        for (OpOperand *operand :
             {&matmul.getLhsMutable(), &matmul.getRhsMutable()})
          operand->set(bf16Operand(operand->get(), matmul, copies));
      }
      // The f32 views the bf16 ones replaced, now unread: erased last
      // first, so that a chain of them empties from its end in one pass.
      SmallVector<Operation *> views;
      for (auto [value, copy] : copies)
        if (Operation *def = value.getDefiningOp();
            def && llvm::isa<nn::ReshapeOp, nn::TransposeOp>(def))
          views.push_back(def);
      llvm::sort(views, [](Operation *a, Operation *b) {
        return b->isBeforeInBlock(a);
      });
      for (Operation *view : views)
        if (view->use_empty())
          view->erase();
      for (nn::MatmulOp matmul : matmuls)
        storeResultInBf16(matmul, copies);
      computeElementwiseInBf16(func);
    });
  }

  /// Autocast runs an elementwise op in its operands' dtype, with type
  /// promotion: so a forward elementwise op or view whose float operands
  /// are all bf16 (a matmul's result, or such an op's) returns bf16,
  /// computed in f32 and rounded once (ops::InBf16), and one f32 operand
  /// makes it f32. An MLP's activation and its gate product are therefore
  /// stored in bf16, as torch stores them. The backward's ops (named
  /// `<node>/grad` by zplan-autodiff) keep computing in f32: the gradients
  /// between two matmuls stay f32, where torch's would be bf16.
  static void computeElementwiseInBf16(func::FuncOp func) {
    SmallVector<Operation *> candidates;
    func.walk([&](Operation *op) {
      if (isBf16Capable(op) && !isGradient(op))
        candidates.push_back(op);
    });
    // Program order: an op's operands are decided before it is.
    for (Operation *op : candidates) {
      auto result = op->getResult(0);
      if (getElementTypeOrSelf(result.getType()).isBF16())
        continue; // made bf16 already (a view re-emitted for a matmul)
      bool floats = false, allBf16 = true;
      for (Value operand : op->getOperands()) {
        if (!llvm::isa<FloatType>(getElementTypeOrSelf(operand.getType())))
          continue; // where's condition
        floats = true;
        allBf16 = allBf16 && bf16Source(operand);
      }
      if (!floats || !allBf16)
        continue;
      for (OpOperand &operand : op->getOpOperands()) {
        Value value = operand.get();
        Value source = bf16Source(value);
        if (!source || source == value)
          continue;
        operand.set(source);
        if (value.use_empty())
          value.getDefiningOp()->erase();
      }
      storeInBf16(result, op->getLoc());
    }
  }

  /// Whether `use` reads a bf16 value as it is, widening it in the kernel
  /// (exactly, as an f32 cast would), so that no f32 copy of it is made:
  /// the logits of the loss ops, which compute and return f32 (autocast's
  /// fp32 list), the query, key and value of attention and its gradient,
  /// which compute in f32, and the bf16 KV cache's keys and values.
  static bool readsBf16(OpOperand &use) {
    unsigned index = use.getOperandNumber();
    Operation *reader = use.getOwner();
    if (llvm::isa<nn::CrossEntropyOp, nn::CrossEntropyGradOp,
                  nn::TokenLogprobsOp, nn::TokenLogprobsGradOp,
                  nn::TokenEntropyOp>(reader))
      return index == 0;
    if (llvm::isa<nn::AttentionOp>(reader))
      return index < 3;
    if (llvm::isa<nn::AttentionGradOp>(reader))
      return index >= 1 && index <= 3;
    if (llvm::isa<nn::CachedAttentionOp>(reader))
      return index == 1 || index == 2;
    return false;
  }

  /// The ops autocast runs in their operands' dtype that zplan computes in
  /// bf16: the float elementwise ops and the views.
  static bool isBf16Capable(Operation *op) {
    return llvm::isa<nn::NegOp, nn::AbsOp, nn::SqrtOp, nn::ReciprocalOp,
                     nn::ExpOp, nn::LogOp, nn::ErfOp, nn::TanhOp, nn::SigmoidOp,
                     nn::ReluOp, nn::CosOp, nn::SinOp, nn::SiluOp, nn::GeluOp,
                     nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp,
                     nn::MaxOp, nn::MinOp, nn::WhereOp, nn::ReshapeOp,
                     nn::TransposeOp, nn::ExpandOp, nn::SliceOp, nn::ConcatOp>(
        op);
  }

  /// Whether zplan-autodiff made `op` for the backward (gradientLocation).
  static bool isGradient(Operation *op) {
    std::optional<StringRef> name = nn::onnxNodeName(op->getLoc());
    return name && name->ends_with("/grad");
  }

  /// The bf16 value `value` holds: itself if bf16, the input of an f32
  /// cast of a bf16 value (an "f32 read"), else null.
  static Value bf16Source(Value value) {
    if (getElementTypeOrSelf(value.getType()).isBF16())
      return value;
    if (auto cast = value.getDefiningOp<nn::CastOp>())
      if (getElementTypeOrSelf(cast.getInput().getType()).isBF16())
        return cast.getInput();
    return nullptr;
  }

  /// A matmul of bf16 operands returns its f32 sums rounded to bf16, as
  /// cuBLAS's bf16 GEMM and torch's autocast do: the result (and its bias,
  /// a bf16-valued parameter whose bf16 copy it reads) becomes bf16, and the
  /// kernel rounds once, after the bias. The bf16 operand copies later
  /// matmuls made of the result go (the result is that copy), and every
  /// other reader gets an f32 cast placed right before it, so that the f32
  /// copy lives for one op. The activations a backward keeps (the
  /// projections' outputs) and the gradients between matmuls are therefore
  /// stored in bf16.
  static void storeResultInBf16(nn::MatmulOp matmul,
                                llvm::DenseMap<Value, Value> &copies) {
    if (Value bias = matmul.getBias())
      matmul.getBiasMutable().assign(bf16Operand(bias, matmul, copies));
    storeInBf16(matmul.getResult(), matmul.getLoc());
  }

  /// Makes the f32 `result` bf16: a reader that casts it to bf16, or whose
  /// kernel reads bf16 (readsBf16), reads it as it is, every other reader
  /// through an f32 cast placed right before it (one per reader), so that
  /// an f32 copy lives for one op.
  static void storeInBf16(Value result, Location loc) {
    auto type = llvm::cast<RankedTensorType>(result.getType());
    Type bf16 = BFloat16Type::get(type.getContext());
    result.setType(type.clone(bf16));
    OpBuilder builder(type.getContext());
    llvm::DenseMap<Operation *, Value> widened;
    for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
      Operation *reader = use.getOwner();
      if (auto cast = llvm::dyn_cast<nn::CastOp>(reader);
          cast && getElementTypeOrSelf(cast.getType()).isBF16()) {
        cast.getResult().replaceAllUsesWith(result);
        cast->erase();
        continue;
      }
      if (readsBf16(use))
        continue;
      Value &f32 = widened[reader];
      if (!f32) {
        builder.setInsertionPoint(reader);
        f32 =
            builder.create<nn::CastOp>(madeHere(loc, "f32 read"), type, result);
      }
      use.set(f32);
    }
  }

  /// The bf16 value `matmul` reads in place of the f32 `value`:
  ///  - an `nn.cast` of a bf16 value (a parameter read, castAtReaders): that
  ///    bf16 value itself, the cast erased once unread;
  ///  - a reshape or transpose: the same op re-emitted before `matmul` on
  ///    its input's bf16 value, so that every matmul reading a value through
  ///    such views shares one bf16 copy of it;
  ///  - anything else: one nn.cast to bf16, shared through `copies`.
  static Value bf16Operand(Value value, nn::MatmulOp matmul,
                           llvm::DenseMap<Value, Value> &copies) {
    if (Value source = bf16Source(value)) {
      if (source != value && value.hasOneUse()) {
        Operation *cast = value.getDefiningOp();
        cast->dropAllUses(), cast->erase();
      }
      return source;
    }
    auto type = llvm::cast<RankedTensorType>(value.getType());
    Type bf16 = BFloat16Type::get(type.getContext());
    Operation *def = value.getDefiningOp();
    if (Value copy = copies.lookup(value))
      return copy;
    OpBuilder builder(matmul);
    Value copy;
    if (def && llvm::isa<nn::ReshapeOp, nn::TransposeOp>(def)) {
      Value input = bf16Operand(def->getOperand(0), matmul, copies);
      Operation *view = builder.clone(*def);
      view->setOperand(0, input);
      view->getResult(0).setType(type.clone(bf16));
      copy = view->getResult(0);
    } else {
      copy = builder.create<nn::CastOp>(
          madeHere(value.getLoc(), "bf16 operand"), type.clone(bf16), value);
    }
    copies[value] = copy;
    return copy;
  }

  /// Generation: every nn.kv_cache holds bf16. Each cache_append rounds its
  /// new entries to bf16 (a cast before it: what the cache stores is what
  /// every later token reads), and the cache it returns stays bf16 through
  /// the reshapes and expands that feed nn.cached_attention's key and value
  /// (a grouped-query model's head expansion), which read bf16 directly;
  /// any other reader gets an f32 cast.
  static void storeKvCachesInBf16(ModuleOp module) {
    for (auto cache : module.getOps<nn::KvCacheOp>())
      cache.setTypeAttr(TypeAttr::get(
          cache.getTensorType().clone(BFloat16Type::get(module.getContext()))));
    SmallVector<nn::CacheAppendOp> appends;
    module.walk([&](nn::CacheAppendOp append) { appends.push_back(append); });
    for (nn::CacheAppendOp append : appends) {
      OpBuilder builder(append);
      auto entries =
          llvm::cast<RankedTensorType>(append.getNewEntries().getType());
      Type bf16 = BFloat16Type::get(module.getContext());
      Value rounded = builder.create<nn::CastOp>(
          append.getLoc(), entries.clone(bf16), append.getNewEntries());
      append.getNewEntriesMutable().set(rounded);
      SmallVector<Value> worklist{append.getResult()};
      while (!worklist.empty()) {
        Value value = worklist.pop_back_val();
        auto f32 = llvm::cast<RankedTensorType>(value.getType());
        value.setType(f32.clone(bf16));
        for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
          Operation *reader = use.getOwner();
          if (llvm::isa<nn::ReshapeOp, nn::ExpandOp>(reader)) {
            worklist.push_back(reader->getResult(0));
            continue;
          }
          if (readsBf16(use))
            continue; // cached_attention's key or value
          OpBuilder before(reader);
          use.set(before.create<nn::CastOp>(reader->getLoc(), f32, value));
        }
      }
    }
  }

  static LogicalResult parseDtype(ModuleOp module, StringRef option,
                                  StringRef value, bool &bf16) {
    bf16 = value == "bf16";
    if (bf16 || value == "fp32")
      return success();
    return module.emitError() << "zplan-mixed-precision: unknown " << option
                              << " '" << value << "' (expected fp32 or bf16)";
  }

  /// Gives each op that reads a result of `wait` an f32 cast of its bf16
  /// value, right before that op. `gathersBf16`: the results become bf16
  /// (a gathered group: the gather rounds); else (a persistent group, whole
  /// f32 on every rank) the reader's cast rounds f32 -> bf16 -> f32, so that
  /// every parameter is computed from its bf16 value.
  static void castAtReaders(zero::GatherWaitOp wait, bool gathersBf16) {
    for (auto [shard, tensor] :
         llvm::zip_equal(wait.getStart().getShards(), wait.getTensors())) {
      // Named for the parameter (dumps, `zrun inspect`, kernel errors),
      // inside the reader's location.
      std::string name = "parameter";
      if (auto read = shard.getDefiningOp<zero::ShardOp>())
        name = read.getParam().str();
      auto f32 = llvm::cast<RankedTensorType>(tensor.getType());
      auto bf16 = f32.clone(BFloat16Type::get(f32.getContext()));
      if (gathersBf16)
        tensor.setType(bf16);
      // One cast per reading op, however many of its operands read it.
      llvm::SmallDenseMap<Operation *, Value> casts;
      for (OpOperand &use : llvm::make_early_inc_range(tensor.getUses())) {
        Operation *reader = use.getOwner();
        if (llvm::isa<zero::ReleaseOp>(reader))
          continue; // Releases the bf16 copy itself.
        Value &cast = casts[reader];
        if (!cast) {
          OpBuilder builder(reader);
          Value rounded = tensor;
          if (!gathersBf16)
            rounded = builder.create<nn::CastOp>(
                NameLoc::get(builder.getStringAttr(name + " (bf16)"),
                             reader->getLoc()),
                bf16, tensor);
          cast = builder.create<nn::CastOp>(
              NameLoc::get(builder.getStringAttr(name + " (f32)"),
                           reader->getLoc()),
              f32, rounded);
        }
        use.set(cast);
      }
    }
  }
};

} // namespace
