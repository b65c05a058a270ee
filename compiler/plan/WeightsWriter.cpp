//===- WeightsWriter.cpp - the weights file beside a plan -----------------===//

#include "compiler/plan/WeightsWriter.h"

#include "compiler/Errors.h"
#include "compiler/import/OnnxImporter.h"
#include "compiler/import/WidenBf16.h"
#include "onnx/onnx.pb.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/support/Checksum.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace zplan;

/// Checksums the sections of the data written at `dataAt` of the file at
/// `path` (read back, mapped: no more of the model is held in memory than
/// while writing) and writes the header in front of them.
static llvm::Error writeHeader(const plan::Plan &plan, uint64_t planIdentity,
                               llvm::StringRef path, uint64_t dataAt) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return makeError("cannot read back '" + path +
                     "': " + file.getError().message());
  const char *data = (*file)->getBufferStart() + dataAt;
  plan::WeightsHeader header;
  header.planIdentity = planIdentity;
  uint64_t section = plan.weights_bytes_per_rank();
  for (uint32_t rank = 0; rank < plan.world_size(); ++rank)
    header.rankChecksums.push_back(checksum(data + rank * section, section));
  header.persistentChecksum = checksum(data + plan.persistent_weights_offset(),
                                       plan::persistentWeightsBytes(plan));
  std::string bytes = plan::encodeWeightsHeader(header);

  int fd = -1;
  if (std::error_code code = llvm::sys::fs::openFileForReadWrite(
          path, fd, llvm::sys::fs::CD_OpenExisting, llvm::sys::fs::OF_None))
    return makeError("cannot write '" + path + "': " + code.message());
  llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
  out.pwrite(bytes.data(), bytes.size(), 0);
  out.close();
  if (out.has_error())
    return makeError("writing '" + path + "' failed: " + out.error().message());
  return llvm::Error::success();
}

llvm::Error zplan::writeWeights(const plan::Plan &plan, uint64_t planIdentity,
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
  uint64_t dataAt = plan::weightsHeaderBytes(plan.world_size());
  uint64_t total = dataAt + plan.persistent_weights_offset() +
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
      if (llvm::Error error = readInitializerBytes(*tensor, modelDir, bytes))
        return error;
      // A bf16 export's weights, read as f32 masters (WidenBf16.h).
      if (tensor->data_type() == onnx::TensorProto::BFLOAT16 &&
          group.dtype() == plan::F32)
        bytes = widenBf16Bytes(bytes);
      if (bytes.size() != parameter.num_elements() * elementSize)
        return makeError("parameter '" + parameter.name() + "' has " +
                         llvm::Twine(bytes.size()) +
                         " bytes of data, expected " +
                         llvm::Twine(parameter.num_elements() * elementSize));
      std::copy(bytes.begin(), bytes.end(),
                flat.begin() + parameter.offset_elements() * elementSize);
    }
    if (group.persistent()) {
      out.pwrite(flat.data(), flat.size(),
                 dataAt + plan.persistent_weights_offset() +
                     group.weights_offset());
      continue;
    }
    uint64_t shard = flat.size() / plan.world_size();
    for (uint32_t rank = 0; rank < plan.world_size(); ++rank)
      out.pwrite(flat.data() + rank * shard, shard,
                 dataAt + rank * plan.weights_bytes_per_rank() +
                     group.weights_offset());
  }
  out.close();
  if (out.has_error())
    return makeError("writing '" + outputPath +
                     "' failed: " + out.error().message());
  return writeHeader(plan, planIdentity, outputPath, dataAt);
}
