//===- WeightsWriter.cpp - the weights file beside a plan -----------------===//

#include "compiler/plan/WeightsWriter.h"

#include "compiler/import/OnnxImporter.h"
#include "onnx/onnx.pb.h"
#include "runtime/plan/PlanLoader.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace zplan;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error zplan::writeWeights(const plan::Plan &plan,
                                llvm::StringRef modelPath,
                                llvm::StringRef outputPath) {
  onnx::ModelProto model;
  if (llvm::Error error = readOnnxModel(modelPath, model))
    return error;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers[tensor.name()] = &tensor;
  std::string modelDir = llvm::sys::path::parent_path(modelPath).str();

  int fd = -1;
  if (std::error_code code = llvm::sys::fs::openFileForWrite(outputPath, fd))
    return makeError("cannot write '" + outputPath + "': " + code.message());
  uint64_t total = plan.persistent_weights_offset() +
                   plan::persistentWeightsBytes(plan);
  // Sized first, then filled at each group's offsets (pwrite), so that no
  // more than one group is ever in memory.
  if (std::error_code error = llvm::sys::fs::resize_file(fd, total)) {
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    return makeError("cannot size '" + outputPath + "': " + error.message());
  }
  llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);

  for (const plan::Group &group : plan.groups()) {
    uint64_t elementSize = plan::dataTypeSize(group.dtype());
    std::vector<char> flat(group.padded_elements() * elementSize, 0);
    for (uint32_t index : group.parameters()) {
      const plan::Parameter &parameter = plan.parameters(index);
      const onnx::TensorProto *tensor = initializers.lookup(parameter.name());
      if (!tensor)
        return makeError("parameter '" + parameter.name() +
                         "' is not an initializer of '" + modelPath + "'");
      std::string bytes;
      if (llvm::Error error =
              readInitializerBytes(*tensor, modelDir, bytes))
        return error;
      if (bytes.size() != parameter.num_elements() * elementSize)
        return makeError("parameter '" + parameter.name() + "' has " +
                         llvm::Twine(bytes.size()) + " bytes of data, expected " +
                         llvm::Twine(parameter.num_elements() * elementSize));
      std::copy(bytes.begin(), bytes.end(),
                flat.begin() + parameter.offset_elements() * elementSize);
    }
    if (group.persistent()) {
      out.pwrite(flat.data(), flat.size(),
                 plan.persistent_weights_offset() + group.weights_offset());
      continue;
    }
    uint64_t shard = flat.size() / plan.world_size();
    for (uint32_t rank = 0; rank < plan.world_size(); ++rank)
      out.pwrite(flat.data() + rank * shard, shard,
                 rank * plan.weights_bytes_per_rank() + group.weights_offset());
  }
  out.close();
  if (out.has_error())
    return makeError("writing '" + outputPath + "' failed: " +
                     out.error().message());
  return llvm::Error::success();
}
