//===- CachedAttention.cpp - the zplan-cached-attention pass -------------===//
//
// Rewires the attentions of a generation module (@prefill, @decode) to a
// static KV cache (docs/generation.md section 3). A plain export's keys [B,
// Hkv, S, D] are appended to @cache.N.key at the tokens' positions, and the
// repeat that expands them for grouped-query attention is rebuilt at the
// cache's length:
//
//   %k = nn.transpose %x ... -> tensor<2x4x8x16xf32>
//   %o = nn.attention %q, %k, %v mask %causal {...}
// becomes
//   nn.kv_cache @cache.0.key : tensor<2x4x64x16xf32>
//   %kc = nn.cache_append @cache.0.key, %k, %positions : ... ->
//   tensor<2x4x64x16xf32> %o = nn.cached_attention %q, %kc, %vc, %positions
//   {...}
//
// A cache export's `present = concat(past, new)` is the append itself. The
// pass also gives @prefill its last-position select (before the LM head,
// when the logits are one, so that the head runs on B rows, not B * P) and
// @decode its [B, V] logits, so that both functions have the bindings of
// docs/generation.md section 1. Tests: test/generate/cached-attention.mlir,
// test/generate/*.test.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/PatternMatching.h"
#include "compiler/transforms/Programs.h"
#include "dialects/ShapeFormatting.h"
#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#include <map>
#include <set>

#define DEBUG_TYPE "zplan-cached-attention"

namespace zplan {
#define GEN_PASS_DEF_CACHEDATTENTION
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

constexpr llvm::StringLiteral kNameAttr = "nn.name";
constexpr llvm::StringLiteral kPastPrefix = "past_key_values.";

//===----------------------------------------------------------------------===//
// Naming things in errors
//===----------------------------------------------------------------------===//

/// The ONNX node name in `loc`, looking inside fused locations (folding and
/// pattern rewrites fuse the locations of the ops they merge).
std::optional<StringRef> findNodeName(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().strref();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::optional<StringRef> name = findNodeName(inner))
        return name;
  return std::nullopt;
}

/// "nn.attention (ONNX node '/h.0/attn/MatMul_1')", or the op name alone.
std::string describe(Operation *op) {
  std::string text = op->getName().getStringRef().str();
  if (std::optional<StringRef> name = findNodeName(op->getLoc()))
    text += " (ONNX node '" + name->str() + "')";
  return text;
}

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

//===----------------------------------------------------------------------===//
// Function signature helpers
//===----------------------------------------------------------------------===//

StringRef argumentName(func::FuncOp func, unsigned index) {
  if (auto name = func.getArgAttrOfType<StringAttr>(index, kNameAttr))
    return name.getValue();
  return "";
}

std::optional<unsigned> findArgument(func::FuncOp func, StringRef name) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (argumentName(func, i) == name)
      return i;
  return std::nullopt;
}

std::optional<unsigned> findResult(func::FuncOp func, StringRef name) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto attr = func.getResultAttrOfType<StringAttr>(i, kNameAttr))
      if (attr.getValue() == name)
        return i;
  return std::nullopt;
}

/// Appends an input named `name` of `type`.
Value appendArgument(func::FuncOp func, StringRef name, Type type) {
  unsigned index = func.getNumArguments();
  Builder builder(func.getContext());
  func.insertArgument(index, type,
                      builder.getDictionaryAttr(builder.getNamedAttr(
                          kNameAttr, builder.getStringAttr(name))),
                      func.getLoc());
  return func.getArgument(index);
}

/// Erases the ops of `func` whose results nobody uses and that have no
/// effects, last first so that whole dead chains go.
void eraseDeadOps(func::FuncOp func) {
  for (Block &block : func.getBody())
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&op))
        op.erase();
}

/// A function imported from an export with past_key_values.* inputs.
bool isCacheExport(func::FuncOp func) {
  return llvm::any_of(llvm::seq<unsigned>(0, func.getNumArguments()),
                      [&](unsigned i) {
                        return argumentName(func, i).starts_with(kPastPrefix);
                      });
}

/// `past_key_values.N.key` -> ("N", "key"); nullopt for any other name.
std::optional<std::pair<StringRef, StringRef>> parsePastName(StringRef name) {
  if (!name.consume_front(kPastPrefix))
    return std::nullopt;
  auto [layer, kind] = name.split('.');
  unsigned number;
  if (layer.empty() || layer.getAsInteger(10, number) ||
      (kind != "key" && kind != "value"))
    return std::nullopt;
  return std::make_pair(layer, kind);
}

//===----------------------------------------------------------------------===//
// Following the token axis through a reshape / expand chain
//===----------------------------------------------------------------------===//

/// The keys (or values) of one plain attention as the cache stores them:
/// `source` [B, Hkv, S, D], and the nn.reshape / nn.expand ops (the
/// grouped-query repeat) that turn it into the attention's operand, each
/// with the axis that carries the tokens in its result.
struct CacheSource {
  Value source;
  SmallVector<Operation *> chain;
  SmallVector<int64_t> tokenAxes;
};

int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

/// The result axes that can carry input axis `axis` through `op` (a reshape
/// keeps it where the elements before it and its extent are unchanged; an
/// expand aligns shapes on the right and must not broadcast it).
SmallVector<int64_t> mapTokenAxis(Operation *op, int64_t axis) {
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<int64_t> axes;
  if (isa<nn::ExpandOp>(op)) {
    int64_t mapped = axis + int64_t(out.size()) - int64_t(in.size());
    if (mapped >= 0 && out[mapped] == in[axis])
      axes.push_back(mapped);
    return axes;
  }
  int64_t before = product(in.take_front(axis));
  for (int64_t j = 0, e = out.size(); j < e; ++j)
    if (out[j] == in[axis] && product(out.take_front(j)) == before)
      axes.push_back(j);
  return axes;
}

/// Traces `operand` of `attention` back to the [B, Hkv, S, D] value the cache
/// stores; `tokens` is S. Several axes may be of extent S (or 1): the chain
/// is accepted when some assignment of the token axis leads to the
/// operand's axis 2.
FailureOr<CacheSource> traceCacheSource(Operation *attention, Value operand,
                                        StringRef role, int64_t batch,
                                        int64_t tokens) {
  SmallVector<Operation *> backwards;
  Value deepest;
  size_t deepestDepth = 0;
  Value value = operand;
  for (size_t depth = 0;; ++depth) {
    ArrayRef<int64_t> shape = shapeOf(value);
    if (shape.size() == 4 && shape[0] == batch && shape[2] == tokens) {
      deepest = value;
      deepestDepth = depth;
    }
    Operation *def = value.getDefiningOp();
    if (!def || !isa<nn::ReshapeOp, nn::ExpandOp>(def))
      break;
    backwards.push_back(def);
    value = def->getOperand(0);
  }
  if (!deepest) {
    attention->emitError() << describe(attention) << ": its " << role << " "
                           << formatShapeAsList(shapeOf(operand))
                           << " do not come from a [batch " << batch
                           << ", heads, tokens " << tokens
                           << ", head_dim] tensor through reshapes and "
                              "expands; cannot append them to a KV cache";
    return failure();
  }
  CacheSource result;
  result.source = deepest;
  result.chain.assign(backwards.begin(), backwards.begin() + deepestDepth);
  std::reverse(result.chain.begin(), result.chain.end());

  // Forward: the axes that can carry the tokens after each op.
  SmallVector<std::set<int64_t>> reachable{{2}};
  for (Operation *op : result.chain) {
    std::set<int64_t> next;
    for (int64_t axis : reachable.back())
      for (int64_t mapped : mapTokenAxis(op, axis))
        next.insert(mapped);
    reachable.push_back(std::move(next));
  }
  if (!reachable.back().count(2)) {
    attention->emitError() << describe(attention)
                           << ": cannot follow the token axis of its " << role
                           << " from " << formatShapeAsList(shapeOf(deepest))
                           << " to " << formatShapeAsList(shapeOf(operand))
                           << " through their reshapes and expands";
    return failure();
  }
  // Backward: one consistent choice, ending at the operand's axis 2.
  result.tokenAxes.assign(result.chain.size(), 2);
  int64_t wanted = 2;
  for (size_t k = result.chain.size(); k-- > 0;) {
    result.tokenAxes[k] = wanted;
    for (int64_t axis : reachable[k])
      if (llvm::is_contained(mapTokenAxis(result.chain[k], axis), wanted)) {
        wanted = axis;
        break;
      }
  }
  return result;
}

/// Rebuilds `chain` on `cache` (the source with its token axis at the cache
/// length), each result's token axis at `length` too.
Value rebuildChain(OpBuilder &builder, const CacheSource &source, Value cache,
                   int64_t length) {
  Value value = cache;
  for (auto [op, axis] : llvm::zip(source.chain, source.tokenAxes)) {
    auto oldType = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> shape(oldType.getShape());
    shape[axis] = length;
    auto type = RankedTensorType::get(shape, oldType.getElementType());
    if (isa<nn::ExpandOp>(op))
      value = builder.create<nn::ExpandOp>(op->getLoc(), type, value);
    else
      value = builder.create<nn::ReshapeOp>(op->getLoc(), type, value);
  }
  return value;
}

//===----------------------------------------------------------------------===//
// The causal mask of a plain export
//===----------------------------------------------------------------------===//

/// Checks that `mask` (a constant, maybe expanded), applied by `user` to
/// scores of `queries` x `keys` as a boolean select (`select`) or added,
/// lets query i see exactly keys 0..i: the only mask the positional mask of
/// nn.cached_attention replaces.
LogicalResult checkCausalMask(Operation *user, Value mask, bool select,
                              int64_t queries, int64_t keys) {
  Value root = mask;
  while (auto expand = root.getDefiningOp<nn::ExpandOp>())
    root = expand.getInput();
  auto constant = root.getDefiningOp<nn::ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                        : DenseElementsAttr();
  if (!dense) {
    user->emitError() << describe(user)
                      << ": its mask is computed at run time; a plain "
                         "export's attention mask must be the causal "
                         "constant (use an export with past_key_values.* "
                         "inputs for run-time masks)";
    return failure();
  }
  ArrayRef<int64_t> shape = dense.getType().getShape();
  int64_t rank = shape.size();
  if (rank < 2 || (shape[rank - 2] != 1 && shape[rank - 2] != queries) ||
      (shape[rank - 1] != 1 && shape[rank - 1] != keys)) {
    user->emitError() << describe(user) << ": its mask "
                      << formatShapeAsList(shape)
                      << " is not a [..., queries, keys] mask";
    return failure();
  }
  bool isBool = dense.getElementType().isInteger(1);
  if (select != isBool ||
      (!isBool && !isa<FloatType>(dense.getElementType()))) {
    user->emitError() << describe(user) << ": a mask of "
                      << dense.getElementType() << " used as "
                      << (select ? "a select" : "an additive") << " mask";
    return failure();
  }
  SmallVector<bool> bools;
  SmallVector<double> numbers;
  if (isBool)
    llvm::append_range(bools, dense.getValues<bool>());
  else
    for (const APFloat &value : dense.getValues<APFloat>())
      numbers.push_back(value.convertToDouble());
  int64_t rows = shape[rank - 2], columns = shape[rank - 1];
  int64_t matrices = product(shape.drop_back(2));
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < queries; ++i)
      for (int64_t j = 0; j < keys; ++j) {
        int64_t index = dense.isSplat()
                            ? 0
                            : (m * rows + (rows == 1 ? 0 : i)) * columns +
                                  (columns == 1 ? 0 : j);
        bool visible = j <= i;
        bool causal = isBool    ? bools[index] == visible
                      : visible ? numbers[index] == 0
                                : numbers[index] <= -1e4;
        if (!causal) {
          user->emitError()
              << describe(user) << ": its mask is not causal (query " << i
              << ", key " << j << " is " << (visible ? "hidden" : "visible")
              << "); zcc --mode generate replaces only the causal mask of a "
                 "plain export by the cache's positional mask";
          return failure();
        }
      }
  return success();
}

LogicalResult checkCausalMask(nn::AttentionOp attention) {
  if (!attention.getMask())
    return success();
  return checkCausalMask(attention, attention.getMask(),
                         attention.getMaskKind() == "select",
                         shapeOf(attention.getQuery()).drop_back().back(),
                         shapeOf(attention.getKey()).drop_back().back());
}

//===----------------------------------------------------------------------===//
// Attentions the import pipeline left primitive
//===----------------------------------------------------------------------===//

/// The [B, H, N, D] tensor a rank-3 [B*H, N, D] operand was reshaped from, or
/// the operand itself when it is rank 4.
Value headsOf(Value value) {
  if (shapeOf(value).size() == 4)
    return value;
  if (auto reshape = value.getDefiningOp<nn::ReshapeOp>())
    if (shapeOf(reshape.getInput()).size() == 4 &&
        shapeOf(reshape.getInput())[0] * shapeOf(reshape.getInput())[1] ==
            shapeOf(value)[0])
      return reshape.getInput();
  return Value();
}

/// Forms nn.attention (without a mask) from `softmax(scores) @ v` chains
/// that zplan-form-nn-ops leaves primitive because of what sits between the
/// product and the softmax: OPT's clamp (max with a constant) and [B*H, S,
/// T] batched products, GPT-2's select mask followed by an additive one.
/// Every mask met on the way is dropped: a cache export's are computed from
/// attention_mask, which the positions replace; a plain export's must be
/// the causal constant (checked here).
LogicalResult formPrimitiveAttentions(func::FuncOp func, bool plain) {
  SmallVector<nn::SoftmaxOp> softmaxes(func.getOps<nn::SoftmaxOp>());
  for (nn::SoftmaxOp softmax : softmaxes) {
    ArrayRef<int64_t> scoresShape = shapeOf(softmax.getResult());
    int64_t rank = scoresShape.size();
    if (int64_t(softmax.getAxis()) != rank - 1 || !softmax->hasOneUse())
      continue;
    auto output = llvm::dyn_cast<nn::MatmulOp>(*softmax->getUsers().begin());
    if (!output || output.getLhs() != softmax.getResult() || output.getBias() ||
        output.getTransposeRhs())
      continue;
    int64_t queries = scoresShape[rank - 2], keys = scoresShape[rank - 1];

    // Peel the masks, the clamp and the scale off the scores.
    Value scores = softmax.getInput();
    double scale = 1.0;
    nn::MatmulOp scoresProduct;
    SmallVector<std::pair<Value, bool>> masks; // (mask, is a select)
    for (int steps = 0; steps < 16 && !scoresProduct; ++steps) {
      Operation *def = scores.getDefiningOp();
      if (!def)
        break;
      if (auto matmul = llvm::dyn_cast<nn::MatmulOp>(def)) {
        scoresProduct = matmul;
      } else if (auto reshape = llvm::dyn_cast<nn::ReshapeOp>(def)) {
        scores = reshape.getInput();
      } else if (auto max = llvm::dyn_cast<nn::MaxOp>(def)) {
        if (getSplatFloat(max.getRhs()))
          scores = max.getLhs();
        else if (getSplatFloat(max.getLhs()))
          scores = max.getRhs();
        else
          break;
      } else if (auto where = llvm::dyn_cast<nn::WhereOp>(def)) {
        if (!getSplatFloat(where.getOnFalse()))
          break;
        masks.push_back({where.getCondition(), true});
        scores = where.getOnTrue();
      } else if (auto add = llvm::dyn_cast<nn::AddOp>(def)) {
        // The scores side is as large as the scores; a mask broadcasts.
        bool lhsFull = product(shapeOf(add.getLhs())) == product(scoresShape);
        bool rhsFull = product(shapeOf(add.getRhs())) == product(scoresShape);
        Value next = lhsFull && !rhsFull   ? add.getLhs()
                     : rhsFull && !lhsFull ? add.getRhs()
                     : add.getLhs().getDefiningOp<nn::ConstantOp>()
                         ? add.getRhs()
                         : add.getLhs();
        masks.push_back(
            {next == add.getLhs() ? add.getRhs() : add.getLhs(), false});
        scores = next;
      } else if (auto mul = llvm::dyn_cast<nn::MulOp>(def)) {
        std::optional<double> factor = getSplatFloat(mul.getRhs());
        if (!factor)
          break;
        scale *= *factor;
        scores = mul.getLhs();
      } else if (auto div = llvm::dyn_cast<nn::DivOp>(def)) {
        std::optional<double> divisor = getSplatFloat(div.getRhs());
        if (!divisor || *divisor == 0)
          break;
        scale /= *divisor;
        scores = div.getLhs();
      } else {
        break;
      }
    }
    if (!scoresProduct || scoresProduct.getBias())
      continue;
    Value keysOperand = scoresProduct.getRhs();
    if (!scoresProduct.getTransposeRhs()) {
      auto transpose = keysOperand.getDefiningOp<nn::TransposeOp>();
      ArrayRef<int64_t> perm =
          transpose ? transpose.getPerm() : ArrayRef<int64_t>();
      int64_t r = perm.size();
      bool swapsLastTwo =
          r >= 2 && perm[r - 1] == r - 2 && perm[r - 2] == r - 1;
      for (int64_t i = 0; swapsLastTwo && i < r - 2; ++i)
        swapsLastTwo = perm[i] == i;
      if (!swapsLastTwo)
        continue;
      keysOperand = transpose.getInput();
    }
    Value query = headsOf(scoresProduct.getLhs()), key = headsOf(keysOperand),
          value = headsOf(output.getRhs());
    if (!query || !key || !value)
      continue;
    // The result as [B, H, S, Dv]: the matmul itself, or its reshape.
    Operation *result = output;
    if (shapeOf(output.getResult()).size() != 4) {
      if (!output->hasOneUse())
        continue;
      result = *output->getUsers().begin();
      if (!isa<nn::ReshapeOp>(result) ||
          shapeOf(result->getResult(0)).size() != 4)
        continue;
    }
    ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key), v = shapeOf(value);
    ArrayRef<int64_t> o = shapeOf(result->getResult(0));
    if (q[0] != k[0] || q[1] != k[1] || q[3] != k[3] || v[0] != q[0] ||
        v[1] != q[1] || v[2] != k[2] || q[2] != queries || k[2] != keys ||
        o != ArrayRef<int64_t>{q[0], q[1], q[2], v[3]})
      continue;
    if (plain)
      for (auto [mask, select] : masks)
        if (failed(checkCausalMask(output, mask, select, queries, keys)))
          return failure();
    OpBuilder builder(result);
    auto attention = builder.create<nn::AttentionOp>(
        output.getLoc(), result->getResult(0).getType(), query, key, value,
        Value(), builder.getF32FloatAttr(static_cast<float>(scale)),
        builder.getStringAttr("additive"), FloatAttr());
    result->getResult(0).replaceAllUsesWith(attention.getResult());
    LLVM_DEBUG(llvm::dbgs() << "formed " << attention << "\n");
  }
  eraseDeadOps(func);
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct CachedAttentionPass
    : zplan::impl::CachedAttentionBase<CachedAttentionPass> {
  using CachedAttentionBase::CachedAttentionBase;

  void runOnOperation() override;

private:
  /// The cache symbols made so far, by name: one per layer and kind,
  /// shared by @prefill and @decode.
  std::map<std::string, nn::KvCacheOp> caches;

  FailureOr<nn::KvCacheOp> declareCache(Operation *user, StringRef name,
                                        RankedTensorType type);
  LogicalResult rewriteFunction(func::FuncOp func, bool isPrefill);
  LogicalResult rewritePlain(func::FuncOp func, Value positions, int64_t batch,
                             int64_t tokens);
  LogicalResult rewriteCacheExport(func::FuncOp func, Value positions);
  LogicalResult selectLastPosition(func::FuncOp func, int64_t batch,
                                   int64_t tokens, bool isPrefill);
};

FailureOr<nn::KvCacheOp>
CachedAttentionPass::declareCache(Operation *user, StringRef name,
                                  RankedTensorType type) {
  ModuleOp module = getOperation();
  auto found = caches.find(name.str());
  nn::KvCacheOp cache = found != caches.end()
                            ? found->second
                            : module.lookupSymbol<nn::KvCacheOp>(name);
  if (!cache) {
    if (module.lookupSymbol(name)) {
      user->emitError() << describe(user) << ": the module already has a "
                        << "symbol @" << name << " that is not a KV cache";
      return failure();
    }
    // Before the first function, in the order the layers come.
    OpBuilder builder(module.getBodyRegion());
    auto functions = module.getOps<func::FuncOp>();
    if (!functions.empty())
      builder.setInsertionPoint(*functions.begin());
    else
      builder.setInsertionPointToEnd(module.getBody());
    cache = builder.create<nn::KvCacheOp>(
        module.getLoc(), builder.getStringAttr(name), TypeAttr::get(type));
  } else if (cache.getTensorType() != type) {
    user->emitError() << describe(user) << " needs @" << name << " as " << type
                      << ", but another program made it "
                      << cache.getTensorType()
                      << " (@prefill and @decode must have the same layers)";
    return failure();
  }
  caches[name.str()] = cache;
  return cache;
}

LogicalResult CachedAttentionPass::rewritePlain(func::FuncOp func,
                                                Value positions, int64_t batch,
                                                int64_t tokens) {
  if (maxSeqLen <= 0)
    return func.emitError()
           << "zplan-cached-attention: a plain export needs the cache length "
              "(max-seq-len)";
  if (tokens > maxSeqLen)
    return func.emitError() << "@" << func.getSymName() << " has " << tokens
                            << " tokens per row, more than the cache length "
                            << int64_t(maxSeqLen);
  SmallVector<nn::AttentionOp> attentions(func.getOps<nn::AttentionOp>());
  // func.getOps walks only the top level; attentions in nested regions do
  // not occur (the importer makes straight-line functions).
  for (auto [layer, attention] : llvm::enumerate(attentions)) {
    if (failed(checkCausalMask(attention)))
      return failure();
    if (shapeOf(attention.getQuery()).size() != 4) {
      return attention.emitError()
             << describe(attention) << ": its query "
             << formatShapeAsList(shapeOf(attention.getQuery()))
             << " is not [batch, heads, tokens, head_dim]";
    }
    OpBuilder builder(attention);
    SmallVector<Value, 2> cached;
    for (auto [role, kind, operand] :
         {std::make_tuple("keys", "key", attention.getKey()),
          std::make_tuple("values", "value", attention.getValue())}) {
      FailureOr<CacheSource> source =
          traceCacheSource(attention, operand, role, batch, tokens);
      if (failed(source))
        return failure();
      auto sourceType = llvm::cast<RankedTensorType>(source->source.getType());
      SmallVector<int64_t> cacheShape(sourceType.getShape());
      cacheShape[2] = maxSeqLen;
      auto cacheType =
          RankedTensorType::get(cacheShape, sourceType.getElementType());
      std::string name =
          "cache." + std::to_string(layer) + "." + std::string(kind);
      FailureOr<nn::KvCacheOp> cache = declareCache(attention, name, cacheType);
      if (failed(cache))
        return failure();
      // The append goes where the source is final, so that the chain's
      // rebuilt ops see it; the attention comes after both.
      builder.setInsertionPoint(attention);
      Value appended = builder.create<nn::CacheAppendOp>(
          attention.getLoc(), cacheType,
          FlatSymbolRefAttr::get(cache->getSymNameAttr()), source->source,
          positions);
      cached.push_back(rebuildChain(builder, *source, appended, maxSeqLen));
    }
    auto result = builder.create<nn::CachedAttentionOp>(
        attention.getLoc(), attention.getType(), attention.getQuery(),
        cached[0], cached[1], positions, attention.getScaleAttr());
    attention.replaceAllUsesWith(result.getResult());
    attention.erase();
  }
  return success();
}

LogicalResult CachedAttentionPass::rewriteCacheExport(func::FuncOp func,
                                                      Value positions) {
  // present = concat(past, new, axis 2) -> the append of new.
  SmallVector<nn::ConcatOp> concats(func.getOps<nn::ConcatOp>());
  std::set<std::string> appended;
  for (nn::ConcatOp concat : concats) {
    if (concat.getInputs().size() != 2)
      continue;
    auto past = llvm::dyn_cast<BlockArgument>(concat.getInputs()[0]);
    if (!past || past.getOwner() != &func.getBody().front())
      continue;
    auto parsed = parsePastName(argumentName(func, past.getArgNumber()));
    if (!parsed)
      continue;
    std::string name = ("cache." + parsed->first + "." + parsed->second).str();
    auto type = llvm::cast<RankedTensorType>(concat.getType());
    if (concat.getAxis() != 2 || type.getRank() != 4) {
      return concat.emitError()
             << describe(concat) << " joins '"
             << argumentName(func, past.getArgNumber()) << "' along axis "
             << concat.getAxis() << " of " << formatShapeAsList(type.getShape())
             << "; expected [batch, heads, past + new, head_dim] along axis 2";
    }
    if (maxSeqLen > 0 && type.getDimSize(2) != maxSeqLen) {
      return concat.emitError()
             << describe(concat) << " makes " << type.getDimSize(2)
             << " cache slots, but the cache length is " << int64_t(maxSeqLen);
    }
    if (!appended.insert(name).second) {
      return concat.emitError() << describe(concat) << ": '"
                                << argumentName(func, past.getArgNumber())
                                << "' is joined with new entries twice";
    }
    FailureOr<nn::KvCacheOp> cache = declareCache(concat, name, type);
    if (failed(cache))
      return failure();
    OpBuilder builder(concat);
    Value append = builder.create<nn::CacheAppendOp>(
        concat.getLoc(), type, FlatSymbolRefAttr::get(cache->getSymNameAttr()),
        concat.getInputs()[1], positions);
    concat.replaceAllUsesWith(append);
    concat.erase();
  }

  // The attentions read the cache; the run-time mask is the positional one.
  SmallVector<nn::AttentionOp> attentions(func.getOps<nn::AttentionOp>());
  for (nn::AttentionOp attention : attentions) {
    for (auto [role, operand] :
         {std::make_pair("keys", attention.getKey()),
          std::make_pair("values", attention.getValue())}) {
      Value value = operand;
      while (
          isa_and_nonnull<nn::ReshapeOp, nn::ExpandOp>(value.getDefiningOp()))
        value = value.getDefiningOp()->getOperand(0);
      if (!value.getDefiningOp<nn::CacheAppendOp>() ||
          shapeOf(operand).size() != 4) {
        return attention.emitError()
               << describe(attention) << ": its " << role
               << " are not the concat of a past_key_values.* input with "
                  "the new ones (through reshapes and expands), so they "
                  "cannot be read from the KV cache";
      }
    }
    OpBuilder builder(attention);
    auto result = builder.create<nn::CachedAttentionOp>(
        attention.getLoc(), attention.getType(), attention.getQuery(),
        attention.getKey(), attention.getValue(), positions,
        attention.getScaleAttr());
    attention.replaceAllUsesWith(result.getResult());
    attention.erase();
  }

  // The present.* results are the cache itself now.
  auto returnOp =
      llvm::cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::BitVector presents(func.getNumResults());
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttr))
      if (name.getValue().starts_with("present."))
        presents.set(i);
  returnOp->eraseOperands(presents);
  func.eraseResults(presents);
  eraseDeadOps(func);

  // What the cache replaced must be gone: the past inputs and the mask.
  llvm::BitVector unused(func.getNumArguments());
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    StringRef name = argumentName(func, i);
    if (name != "attention_mask" && !name.starts_with(kPastPrefix))
      continue;
    Value argument = func.getArgument(i);
    if (!argument.use_empty()) {
      Operation *user = *argument.getUsers().begin();
      return user->emitError()
             << "input '" << name << "' of @" << func.getSymName()
             << " is still used by " << describe(user)
             << " after the KV cache replaced the attention masks and the "
                "past keys and values; zcc --mode generate cannot feed it";
    }
    unused.set(i);
  }
  func.eraseArguments(unused);
  return success();
}

/// The LM head that makes `logits` ([B, S, V]): an nn.matmul of the hidden
/// states [B, S, H] (or [B * S, H], its result reshaped to [B, S, V]) by a
/// 2-D weight, with at most a [V] bias, whose rows are independent, so that
/// selecting rows of its input selects the same rows of its result. Null
/// when the logits are made some other way.
static nn::MatmulOp lmHeadOf(Value logits, int64_t batch, int64_t tokens) {
  Value made = logits;
  if (auto reshape = made.getDefiningOp<nn::ReshapeOp>())
    made = reshape.getInput();
  auto head = made.getDefiningOp<nn::MatmulOp>();
  if (!head)
    return nullptr;
  auto lhs = llvm::dyn_cast<RankedTensorType>(head.getLhs().getType());
  auto rhs = llvm::dyn_cast<RankedTensorType>(head.getRhs().getType());
  if (!lhs || !rhs || rhs.getRank() != 2 || !lhs.hasStaticShape())
    return nullptr;
  bool rowsFirst = (lhs.getRank() == 3 && lhs.getDimSize(0) == batch &&
                    lhs.getDimSize(1) == tokens) ||
                   (lhs.getRank() == 2 && lhs.getDimSize(0) == batch * tokens);
  if (!rowsFirst)
    return nullptr;
  if (Value bias = head.getBias())
    if (auto type = llvm::dyn_cast<RankedTensorType>(bias.getType());
        !type || type.getRank() != 1)
      return nullptr;
  return head;
}

LogicalResult CachedAttentionPass::selectLastPosition(func::FuncOp func,
                                                      int64_t batch,
                                                      int64_t tokens,
                                                      bool isPrefill) {
  std::optional<unsigned> index = findResult(func, "logits");
  if (!index)
    return func.emitError() << "@" << func.getSymName()
                            << " has no output named 'logits'; zcc --mode "
                               "generate needs a causal LM's logits";
  auto returnOp =
      llvm::cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value logits = returnOp.getOperand(*index);
  auto type = llvm::cast<RankedTensorType>(logits.getType());
  if (type.getRank() != 3 || type.getDimSize(0) != batch ||
      type.getDimSize(1) != tokens)
    return func.emitError()
           << "@" << func.getSymName() << ": logits "
           << formatShapeAsList(type.getShape()) << " are not [batch " << batch
           << ", tokens " << tokens << ", vocab]";
  int64_t vocab = type.getDimSize(2);
  OpBuilder builder(returnOp);
  Location loc = NameLoc::get(builder.getStringAttr("logits"));
  Value selected;
  if (isPrefill) {
    // Row b's logits are at b * tokens + last_index[b] of the [B*S, V] rows.
    Value lastIndex =
        appendArgument(func, "last_index",
                       RankedTensorType::get({batch}, builder.getI64Type()));
    auto rows = builder.create<nn::ReshapeOp>(
        loc,
        RankedTensorType::get({batch * tokens, vocab}, type.getElementType()),
        logits);
    SmallVector<int64_t> starts;
    for (int64_t b = 0; b < batch; ++b)
      starts.push_back(b * tokens);
    auto indexType = RankedTensorType::get({batch}, builder.getI64Type());
    auto rowStarts = builder.create<nn::ConstantOp>(
        loc, DenseIntElementsAttr::get(indexType, starts));
    auto rowIndices =
        builder.create<nn::AddOp>(loc, indexType, lastIndex, rowStarts);
    if (nn::MatmulOp head = lmHeadOf(logits, batch, tokens)) {
      // Select the hidden states instead and run the LM head on B rows,
      // not B * P: the logits of the other positions are never read.
      auto hidden = llvm::cast<RankedTensorType>(head.getLhs().getType());
      int64_t width = hidden.getShape().back();
      Type element = hidden.getElementType();
      auto hiddenRows = builder.create<nn::ReshapeOp>(
          loc, RankedTensorType::get({batch * tokens, width}, element),
          head.getLhs());
      auto last = builder.create<nn::GatherOp>(
          loc, RankedTensorType::get({batch, width}, element), hiddenRows,
          rowIndices, builder.getI64IntegerAttr(0));
      auto lastLogits = llvm::cast<nn::MatmulOp>(builder.clone(*head));
      lastLogits->setOperand(0, last);
      lastLogits.getResult().setType(
          RankedTensorType::get({batch, vocab}, type.getElementType()));
      selected = lastLogits.getResult();
      rows->erase();
    } else {
      selected = builder.create<nn::GatherOp>(
          loc, RankedTensorType::get({batch, vocab}, type.getElementType()),
          rows, rowIndices, builder.getI64IntegerAttr(0));
    }
  } else {
    if (tokens != 1)
      return func.emitError() << "@" << func.getSymName() << " feeds " << tokens
                              << " tokens per row; decode feeds one";
    selected = builder.create<nn::ReshapeOp>(
        loc, RankedTensorType::get({batch, vocab}, type.getElementType()),
        logits);
  }
  returnOp->setOperand(*index, selected);
  SmallVector<Type> results(func.getResultTypes());
  results[*index] = selected.getType();
  func.setFunctionType(
      FunctionType::get(func.getContext(), func.getArgumentTypes(), results));
  return success();
}

LogicalResult CachedAttentionPass::rewriteFunction(func::FuncOp func,
                                                   bool isPrefill) {
  std::optional<unsigned> ids = findArgument(func, "input_ids");
  if (!ids)
    return func.emitError()
           << "@" << func.getSymName() << " has no input named 'input_ids'";
  ArrayRef<int64_t> idsShape = shapeOf(func.getArgument(*ids));
  if (idsShape.size() != 2)
    return func.emitError()
           << "@" << func.getSymName() << ": input_ids "
           << formatShapeAsList(idsShape) << " is not [batch, tokens]";
  int64_t batch = idsShape[0], tokens = idsShape[1];
  bool cacheExport = isCacheExport(func);
  auto positionsType = RankedTensorType::get(
      {batch, tokens}, IntegerType::get(&getContext(), 64));

  // The positions input of docs/generation.md section 1.
  Value positions;
  if (cacheExport) {
    std::optional<unsigned> index = findArgument(func, "position_ids");
    if (!index)
      return func.emitError()
             << "@" << func.getSymName()
             << " is a cache export (it has past_key_values.* inputs) but "
                "has no 'position_ids' input";
    func.setArgAttr(*index, kNameAttr,
                    StringAttr::get(&getContext(), "positions"));
    positions = func.getArgument(*index);
  } else if (std::optional<unsigned> index = findArgument(func, "positions")) {
    positions = func.getArgument(*index);
  } else if (isPrefill) {
    positions = appendArgument(func, "positions", positionsType);
  } else {
    return func.emitError() << "@" << func.getSymName()
                            << " has no 'positions' input: a plain export's "
                               "decode must go through "
                               "zplan-decode-positions first";
  }
  if (positions.getType() != positionsType)
    return func.emitError()
           << "@" << func.getSymName() << ": positions " << positions.getType()
           << ", expected " << positionsType;

  if (failed(cacheExport ? rewriteCacheExport(func, positions)
                         : rewritePlain(func, positions, batch, tokens)))
    return failure();
  if (failed(selectLastPosition(func, batch, tokens, isPrefill)))
    return failure();
  eraseDeadOps(func);
  return success();
}

void CachedAttentionPass::runOnOperation() {
  ModuleOp module = getOperation();
  caches.clear();
  auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
  auto prefill = module.lookupSymbol<func::FuncOp>(kPrefillName);
  if (!decode && !prefill) {
    module.emitError() << "zplan-cached-attention: the module has neither @"
                       << kPrefillName << " nor @" << kDecodeName;
    return signalPassFailure();
  }
  for (func::FuncOp func : {decode, prefill})
    if (func && failed(formPrimitiveAttentions(func, !isCacheExport(func))))
      return signalPassFailure();
  // @decode first: its attentions number the layers.
  size_t attentionsInDecode = 0;
  if (decode) {
    attentionsInDecode = llvm::range_size(decode.getOps<nn::AttentionOp>());
    if (failed(rewriteFunction(decode, /*isPrefill=*/false)))
      return signalPassFailure();
  }
  if (prefill) {
    size_t attentionsInPrefill =
        llvm::range_size(prefill.getOps<nn::AttentionOp>());
    if (decode && attentionsInPrefill != attentionsInDecode) {
      prefill.emitError() << "@" << kPrefillName << " has "
                          << attentionsInPrefill << " attentions but @"
                          << kDecodeName << " has " << attentionsInDecode
                          << "; they must be the same layers";
      return signalPassFailure();
    }
    if (failed(rewriteFunction(prefill, /*isPrefill=*/true)))
      return signalPassFailure();
  }
  for (func::FuncOp func : {decode, prefill})
    if (func && func.getOps<nn::CachedAttentionOp>().empty()) {
      func.emitError() << "@" << func.getSymName()
                       << " has no attention to read a KV cache (none "
                          "formed: zcc forms nn.attention from "
                          "MatMul/Softmax/MatMul chains)";
      return signalPassFailure();
    }
}

} // namespace
