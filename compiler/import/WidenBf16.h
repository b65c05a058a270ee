//===- WidenBf16.h - a bf16 ONNX export read as float ---------------------===//
//
// Mixed precision (docs/mixed-precision.md) keeps f32 master weights. A model
// exported in bfloat16 (torch's `model.to(torch.bfloat16)` before
// torch.onnx.export) has none: `zcc --param-dtype bf16` makes them from its
// weights, exactly (every bf16 value is an f32 value). The whole model is
// rewritten to float before it is imported: every BFLOAT16 initializer,
// Constant and ConstantOfShape value widened, every BFLOAT16 graph input,
// output and value_info made FLOAT, and every Cast (CastLike: through its
// input) to BFLOAT16 made a cast to FLOAT. The plan then computes as
// zplan's mixed precision does from those masters (bf16 gathers, KV cache
// and matmul operands; f32 elsewhere), not in bf16 throughout as the
// export's graph did.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_IMPORT_WIDENBF16_H
#define ZPLAN_COMPILER_IMPORT_WIDENBF16_H

#include "onnx/onnx.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace zplan {

/// Where `model` first names bfloat16 (an initializer, a graph input or
/// output, a Cast's target, ...), in words; nullopt when nowhere.
std::optional<std::string> findBf16(const onnx::ModelProto &model);

/// Rewrites `model` to float as described above; external data of a bf16
/// initializer is read (relative to `modelDir`) and the widened values kept
/// inline. With `readWeights` false (zcc --no-weights) an external
/// initializer is only retyped: its data stays unread where it is.
llvm::Error widenBf16(onnx::ModelProto &model, llvm::StringRef modelDir,
                      bool readWeights = true);

/// `bytes` (little-endian bf16 values) widened to f32's bytes.
std::string widenBf16Bytes(llvm::StringRef bytes);

} // namespace zplan

#endif // ZPLAN_COMPILER_IMPORT_WIDENBF16_H
