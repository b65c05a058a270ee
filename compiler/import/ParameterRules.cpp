//===- ParameterRules.cpp - which initializers train, and as what ---------===//
//
// The tie and buffer rules of ParameterRules.h, and the flags that override
// them. Everything here reads the model and never builds IR: the importer
// declares what decideParameters() decided. Tests: test/import/ties.onnxtxt,
// test/import/frozen.test, test/train/tied-split.test.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/ParameterRules.h"

#include "compiler/Errors.h"
#include "compiler/import/OnnxImporter.h"
#include "dialects/ShapeFormatting.h"
#include "onnx/onnx.pb.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/unknown_field_set.h>

#include <cerrno>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;

llvm::Error zplan::parseTie(llvm::StringRef text, ParameterOptions &options) {
  auto [copy, parameter] = text.split('=');
  if (!text.contains('=') || copy.empty() || parameter.empty())
    return makeError("malformed --tie '" + text +
                     "': expected COPY=PARAM (the initializer that is a copy, "
                     "then the one kept as the parameter)");
  if (copy == parameter)
    return makeError("--tie '" + text + "' ties '" + copy + "' to itself");
  for (const auto &[known, to] : options.ties)
    if (known == copy)
      return makeError("--tie gives '" + copy + "' twice ('" + known + "=" +
                       to + "' and '" + text + "')");
  options.ties.emplace_back(copy.str(), parameter.str());
  return llvm::Error::success();
}

namespace {

//===----------------------------------------------------------------------===//
// The exporter's markers
//===----------------------------------------------------------------------===//

/// Field numbers of ONNX IR 10's metadata_props, which the ONNX 1.12 schema
/// compiled here lacks: a parser keeps them as unknown fields.
constexpr int kValueInfoMetadataField = 4;
constexpr int kGraphMetadataField = 16;

constexpr llvm::StringLiteral kInputSpecKind =
    "pkg.torch.export.graph_signature.InputSpec.kind";
constexpr llvm::StringLiteral kFoldedFrom =
    "pkg.onnxscript.optimizer.folded_from";
constexpr llvm::StringLiteral kGraphSignature =
    "pkg.torch.export.ExportedProgram.graph_signature";

using Metadata = std::vector<std::pair<std::string, std::string>>;

/// The metadata_props of `message`: the known field where the schema has
/// one, else the unknown field `number`.
Metadata metadataOf(const google::protobuf::Message &message, int number) {
  Metadata out;
  const google::protobuf::Reflection *reflection = message.GetReflection();
  if (const google::protobuf::FieldDescriptor *field =
          message.GetDescriptor()->FindFieldByName("metadata_props")) {
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      const auto &entry = static_cast<const onnx::StringStringEntryProto &>(
          reflection->GetRepeatedMessage(message, field, i));
      out.emplace_back(entry.key(), entry.value());
    }
    return out;
  }
  const google::protobuf::UnknownFieldSet &unknown =
      reflection->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    if (field.number() != number ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(field.length_delimited()))
      out.emplace_back(entry.key(), entry.value());
  }
  return out;
}

/// The strings of a Python list literal as repr() writes it: "['a', 'b']".
std::vector<std::string> parseNameList(llvm::StringRef text) {
  std::vector<std::string> names;
  for (size_t i = 0; i < text.size(); ++i) {
    char quote = text[i];
    if (quote != '\'' && quote != '"')
      continue;
    std::string name;
    for (++i; i < text.size() && text[i] != quote; ++i) {
      if (text[i] == '\\' && i + 1 < text.size())
        ++i;
      name += text[i];
    }
    names.push_back(std::move(name));
  }
  return names;
}

/// What torch.onnx.export(dynamo=True) says of the initializers.
struct ExportMarkers {
  /// Initializer -> its InputSpec.kind ("PARAMETER", "BUFFER", ...).
  llvm::StringMap<std::string> kind;
  /// Initializer -> the values the exporter folded it from.
  llvm::StringMap<std::vector<std::string>> foldedFrom;
  /// torch target -> its kind, from the graph signature's
  /// `NAME: KIND target='TARGET'` lines.
  llvm::StringMap<std::string> signature;

  static ExportMarkers read(const onnx::ModelProto &model) {
    ExportMarkers markers;
    const onnx::GraphProto &graph = model.graph();
    for (const auto &[key, value] : metadataOf(graph, kGraphMetadataField)) {
      if (key != kGraphSignature)
        continue;
      llvm::SmallVector<llvm::StringRef> lines;
      llvm::StringRef(value).split(lines, '\n');
      for (llvm::StringRef line : lines) {
        auto [name, rest] = line.split(": ");
        auto [kind, target] = rest.split(" target=");
        if (name.empty() || target.size() < 2)
          continue;
        char quote = target.front();
        target = target.drop_front().take_until(
            [quote](char c) { return c == quote; });
        markers.signature[target] = kind.trim().str();
      }
    }
    auto readValueInfo = [&](const onnx::ValueInfoProto &info) {
      for (const auto &[key, value] :
           metadataOf(info, kValueInfoMetadataField)) {
        if (key == kInputSpecKind)
          markers.kind[info.name()] = value;
        else if (key == kFoldedFrom)
          markers.foldedFrom[info.name()] = parseNameList(value);
      }
    };
    for (const onnx::ValueInfoProto &info : graph.value_info())
      readValueInfo(info);
    for (const onnx::ValueInfoProto &info : graph.input())
      readValueInfo(info);
    return markers;
  }

  /// Whether `name` is a torch parameter by either marker.
  bool isParameter(llvm::StringRef name) const {
    auto kindIt = kind.find(name);
    if (kindIt != kind.end())
      return kindIt->second == "PARAMETER";
    auto signatureIt = signature.find(name);
    return signatureIt != signature.end() && signatureIt->second == "PARAMETER";
  }

  bool isBuffer(llvm::StringRef name) const {
    auto kindIt = kind.find(name);
    if (kindIt != kind.end())
      return kindIt->second == "BUFFER";
    auto signatureIt = signature.find(name);
    return signatureIt != signature.end() && signatureIt->second == "BUFFER";
  }

  /// Why the initializer `name` is not a parameter, or nullopt when it is
  /// one (by the markers, or for want of any).
  std::optional<std::string> bufferReason(llvm::StringRef name) const {
    auto kindIt = kind.find(name);
    if (kindIt != kind.end()) {
      if (kindIt->second == "PARAMETER")
        return std::nullopt;
      if (kindIt->second == "BUFFER")
        return std::string("a buffer (the exporter marks it BUFFER)");
      return "not a parameter (the exporter marks it " + kindIt->second + ")";
    }
    auto folded = foldedFrom.find(name);
    if (folded == foldedFrom.end())
      return std::nullopt;
    std::vector<std::string> buffers;
    for (const std::string &source : folded->second) {
      if (isParameter(source))
        return std::nullopt;
      if (isBuffer(source))
        buffers.push_back("'" + source + "'");
    }
    if (buffers.empty())
      return std::string("folded by the exporter from constants, no "
                         "parameter");
    return "folded by the exporter from the buffer" +
           std::string(buffers.size() > 1 ? "s " : " ") +
           llvm::join(buffers, ", ") + " and constants, no parameter";
  }
};

//===----------------------------------------------------------------------===//
// Reading candidates
//===----------------------------------------------------------------------===//

/// The first bytes compared: this many elements per candidate.
constexpr int kSamples = 16;

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// One candidate's data, read lazily: a few elements, or all of them.
class CandidateData {
public:
  /// `readExternal` false (zcc --no-weights): external data is not read,
  /// as if it could not be; inline data is part of the graph and is.
  CandidateData(const ParameterCandidate &candidate, llvm::StringRef modelDir,
                bool readExternal)
      : candidate(candidate), modelDir(modelDir.str()),
        elementBytes(elementTypeInfo(candidate.type).bytes),
        unreadable(!readExternal && candidate.tensor->data_location() ==
                                        onnx::TensorProto::EXTERNAL) {
    count = 1;
    for (int64_t dim : candidate.shape)
      count *= dim;
  }

  const std::vector<int64_t> &shape() const { return candidate.shape; }
  llvm::StringRef name() const { return candidate.tensor->name(); }
  int64_t elements() const { return count; }
  size_t bytesPerElement() const { return elementBytes; }

  /// A 2-D tensor whose first dimension is the larger: it is read as its
  /// transpose, so that W [R, C] and W^T [C, R] give the same samples.
  bool flipped() const {
    return candidate.shape.size() == 2 &&
           candidate.shape[0] > candidate.shape[1];
  }

  /// The dims that bucket it: its shape, a 2-D one in ascending order.
  std::vector<int64_t> bucketShape() const {
    std::vector<int64_t> dims = candidate.shape;
    if (flipped())
      std::swap(dims[0], dims[1]);
    return dims;
  }

  /// The elements at fixed coordinates of the bucket's shape (`swapped`:
  /// at the mirrored coordinates, for a square matrix's transpose), or an
  /// empty string when the data cannot be read.
  const std::string &samples(bool swapped) {
    std::string &cached = swapped ? swappedSamples : directSamples;
    if (!cached.empty() || unreadable)
      return cached;
    std::vector<int64_t> indices;
    for (int k = 0; k < kSamples; ++k) {
      if (candidate.shape.size() != 2) {
        indices.push_back(static_cast<int64_t>(mix(k) % count));
        continue;
      }
      std::vector<int64_t> dims = bucketShape();
      int64_t i = static_cast<int64_t>(mix(k) % dims[0]);
      int64_t j = static_cast<int64_t>(mix(k + kSamples) % dims[1]);
      if (swapped)
        std::swap(i, j);
      int64_t columns = candidate.shape[1];
      indices.push_back(flipped() ? j * columns + i : i * columns + j);
    }
    if (!readElements(indices, cached)) {
      unreadable = true;
      cached.clear();
    }
    return cached;
  }

  /// Every byte, or null when the data cannot be read.
  const std::string *whole() {
    if (!wholeRead && !unreadable) {
      wholeRead = true;
      if (llvm::Error error =
              readInitializerBytes(*candidate.tensor, modelDir, data)) {
        llvm::consumeError(std::move(error));
        unreadable = true;
      } else if (data.size() != static_cast<size_t>(count) * elementBytes) {
        unreadable = true;
      }
    }
    return unreadable ? nullptr : &data;
  }

  /// Drops the bytes whole() read (they are read again when asked for).
  void release() {
    if (!wholeRead || unreadable)
      return;
    wholeRead = false;
    std::string().swap(data);
  }

  /// Whether it holds at least two distinct values (bit patterns).
  bool varies() {
    // A range of a sparse external file with no data in it reads as zeros:
    // one value, known without reading (the shaped benchmark models hold
    // every weight so; reading them is most of their compile time).
    if (unreadable || isHole())
      return false;
    const std::string *bytes = whole();
    if (!bytes)
      return false;
    for (int64_t i = 1; i < count; ++i)
      if (std::memcmp(bytes->data(), bytes->data() + i * elementBytes,
                      elementBytes) != 0)
        return true;
    return false;
  }

private:
  /// The file (relative to the model) and byte offset of the tensor's
  /// external data; false when it has none or the offset is malformed.
  bool externalData(llvm::SmallString<256> &path, int64_t &offset) const {
    const onnx::TensorProto &tensor = *candidate.tensor;
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
      return false;
    std::string location;
    offset = 0;
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset" &&
               llvm::StringRef(entry.value()).getAsInteger(10, offset))
        return false;
    }
    path = modelDir;
    llvm::sys::path::append(path, location);
    return true;
  }

  /// Whether the tensor's external data is a hole of its file: no data
  /// from its offset to its end (lseek SEEK_DATA), so all zeros.
  bool isHole() const {
    llvm::SmallString<256> path;
    int64_t offset = 0;
    if (!externalData(path, offset))
      return false;
    // A regular file only: opening a FIFO would wait for a writer.
    struct stat info;
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
      return false;
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0)
      return false;
    off_t end = static_cast<off_t>(offset + count * int64_t(elementBytes));
    bool hole = false;
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
        end <= info.st_size) {
      off_t data = ::lseek(fd, static_cast<off_t>(offset), SEEK_DATA);
      hole = (data < 0 && errno == ENXIO) || (data >= end);
    }
    ::close(fd);
    return hole;
  }

  /// The elements at flat `indices`, back to back: from raw_data or the
  /// external file without reading the rest, else from the decoded whole.
  bool readElements(llvm::ArrayRef<int64_t> indices, std::string &out) {
    const onnx::TensorProto &tensor = *candidate.tensor;
    out.clear();
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      llvm::SmallString<256> path;
      int64_t offset = 0;
      if (!externalData(path, offset))
        return false;
      llvm::Expected<llvm::sys::fs::file_t> file =
          llvm::sys::fs::openNativeFileForRead(path);
      if (!file) {
        llvm::consumeError(file.takeError());
        return false;
      }
      bool ok = true;
      std::string element(elementBytes, '\0');
      for (int64_t index : indices) {
        llvm::Expected<size_t> read = llvm::sys::fs::readNativeFileSlice(
            *file, llvm::MutableArrayRef<char>(element.data(), elementBytes),
            static_cast<uint64_t>(offset + index * int64_t(elementBytes)));
        if (!read || *read != elementBytes) {
          if (!read)
            llvm::consumeError(read.takeError());
          ok = false;
          break;
        }
        out += element;
      }
      llvm::sys::fs::closeFile(*file);
      return ok;
    }
    const std::string *source = &tensor.raw_data();
    if (source->empty())
      source = whole();
    if (!source || source->size() != static_cast<size_t>(count) * elementBytes)
      return false;
    for (int64_t index : indices)
      out.append(*source, index * elementBytes, elementBytes);
    return true;
  }

  const ParameterCandidate &candidate;
  std::string modelDir;
  size_t elementBytes;
  int64_t count;
  std::string directSamples, swappedSamples, data;
  bool wholeRead = false;
  bool unreadable = false;
};

/// How many elements of `copy` differ from `parameter` (transposed: copy is
/// parameter^T); both read whole. nullopt when either cannot be read.
std::optional<int64_t> countDifferences(CandidateData &parameter,
                                        CandidateData &copy, bool transposed) {
  const std::string *a = parameter.whole();
  const std::string *b = copy.whole();
  if (!a || !b)
    return std::nullopt;
  size_t size = parameter.bytesPerElement();
  int64_t differences = 0;
  if (!transposed) {
    for (int64_t i = 0; i < parameter.elements(); ++i)
      differences +=
          std::memcmp(a->data() + i * size, b->data() + i * size, size) != 0;
    return differences;
  }
  int64_t rows = parameter.shape()[0], columns = parameter.shape()[1];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j)
      differences += std::memcmp(a->data() + (i * columns + j) * size,
                                 b->data() + (j * rows + i) * size, size) != 0;
  return differences;
}

/// Whether `copy` equals `parameter` (transposed or not), bit for bit.
bool equalBits(CandidateData &parameter, CandidateData &copy, bool transposed) {
  std::optional<int64_t> differences =
      countDifferences(parameter, copy, transposed);
  return differences && *differences == 0;
}

/// A set of equal candidates: indices with their transposition relative to
/// the first (the representative).
struct TieClass {
  std::vector<std::pair<size_t, bool>> members;
};

/// A name written by an exporter rather than by a module (TorchScript's
/// `onnx::MatMul_592`).
bool isExporterName(llvm::StringRef name) { return name.starts_with("onnx::"); }

std::string tieReason(bool transposed) {
  return transposed ? "equal transposed, bit for bit" : "equal, bit for bit";
}

} // namespace

llvm::Error
zplan::decideParameters(const onnx::ModelProto &model, llvm::StringRef modelDir,
                        llvm::ArrayRef<ParameterCandidate> candidates,
                        const ParameterOptions &options, bool readExternal,
                        std::vector<ParameterDecision> &decisions) {
  decisions.assign(candidates.size(), ParameterDecision());
  std::vector<CandidateData> data;
  data.reserve(candidates.size());
  llvm::StringMap<size_t> indexOf;
  for (auto [index, candidate] : llvm::enumerate(candidates)) {
    data.emplace_back(candidate, modelDir, readExternal);
    indexOf[candidate.tensor->name()] = index;
  }
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  // A flag's name: a candidate, or an error saying what it is instead.
  auto candidateNamed = [&](llvm::StringRef flag, llvm::StringRef value,
                            llvm::StringRef name) -> llvm::Expected<size_t> {
    auto found = indexOf.find(name);
    if (found != indexOf.end())
      return found->second;
    std::string subject = (flag + " '" + value + "'").str();
    if (value != name)
      subject += ": '" + name.str() + "'";
    if (!initializers.contains(name))
      return makeError(subject + " is not an initializer of the model");
    return makeError(subject +
                     " is not a parameter (only floating-point initializers "
                     "of more than one element are)");
  };

  ExportMarkers markers = ExportMarkers::read(model);
  std::vector<std::optional<std::string>> buffer(candidates.size());
  for (size_t index = 0; index < candidates.size(); ++index)
    buffer[index] = markers.bufferReason(data[index].name());

  // --untie and --tie: every name a candidate, no name both a forced copy
  // and another tie's parameter, none both tied and untied.
  llvm::StringSet<> untied, forcedCopies;
  for (const std::string &name : options.untie) {
    llvm::Expected<size_t> index = candidateNamed("--untie", name, name);
    if (!index)
      return index.takeError();
    untied.insert(name);
  }
  struct ForcedTie {
    size_t copy, parameter;
    bool transposed;
    std::string text;
  };
  std::vector<ForcedTie> forced;
  for (const auto &[copyName, parameterName] : options.ties) {
    std::string text = copyName + "=" + parameterName;
    llvm::Expected<size_t> copy = candidateNamed("--tie", text, copyName);
    if (!copy)
      return copy.takeError();
    llvm::Expected<size_t> parameter =
        candidateNamed("--tie", text, parameterName);
    if (!parameter)
      return parameter.takeError();
    if (untied.contains(copyName) || untied.contains(parameterName))
      return makeError("--tie '" + text + "' and --untie both name '" +
                       (untied.contains(copyName) ? copyName : parameterName) +
                       "'");
    const ParameterCandidate &a = candidates[*copy],
                             &b = candidates[*parameter];
    if (a.type != b.type)
      return makeError("--tie '" + text + "': '" + copyName + "' is " +
                       llvm::Twine(elementTypeInfo(a.type).name) + " and '" +
                       parameterName + "' is " +
                       llvm::Twine(elementTypeInfo(b.type).name) +
                       "; a copy has its parameter's element type");
    bool direct = a.shape == b.shape;
    bool reversed = a.shape.size() == 2 && b.shape.size() == 2 &&
                    a.shape[0] == b.shape[1] && a.shape[1] == b.shape[0];
    if (!direct && !reversed)
      return makeError("--tie '" + text + "': '" + copyName + "' is " +
                       formatShapeAsList(a.shape) + " and '" + parameterName +
                       "' is " + formatShapeAsList(b.shape) +
                       "; a copy has its parameter's shape or, for a 2-D "
                       "parameter, the reversed one (its transpose)");
    // A square matrix may be either: its values say which (direct unless
    // only the transpose is equal).
    bool transposed = !direct;
    if (direct && reversed)
      transposed = !equalBits(data[*parameter], data[*copy], false) &&
                   equalBits(data[*parameter], data[*copy], true);
    forced.push_back({*copy, *parameter, transposed, text});
    forcedCopies.insert(copyName);
  }
  for (const ForcedTie &tie : forced)
    for (const ForcedTie &other : forced)
      if (other.copy == tie.parameter)
        return makeError("--tie '" + tie.text + "': '" +
                         data[tie.parameter].name() +
                         "' is itself a copy (--tie '" + other.text +
                         "'); tie every copy to the parameter kept");

  // Automatic ties: buckets of one element type, bucket shape and buffer
  // status; in each, every candidate joins the first class whose
  // representative it equals. A candidate alone in its bucket is never
  // read; a constant one represents no class (it can tie to nothing), and
  // only representatives keep their bytes once read.
  std::vector<std::string> keys(candidates.size());
  std::map<std::string, int> bucketSizes;
  for (size_t index = 0; index < candidates.size(); ++index) {
    if (forcedCopies.contains(data[index].name()))
      continue;
    keys[index] = std::string(elementTypeInfo(candidates[index].type).name) +
                  " " + formatShape(data[index].bucketShape()) +
                  (buffer[index] ? " buffer" : "");
    ++bucketSizes[keys[index]];
  }
  std::map<std::string, std::vector<TieClass>> buckets;
  for (size_t index = 0; index < candidates.size(); ++index) {
    if (keys[index].empty() || bucketSizes[keys[index]] < 2)
      continue;
    std::vector<TieClass> &classes = buckets[keys[index]];
    CandidateData &mine = data[index];
    const std::string &samples = mine.samples(false);
    if (samples.empty())
      continue;
    bool joined = false;
    for (TieClass &tieClass : classes) {
      CandidateData &rep = data[tieClass.members.front().first];
      const std::string &theirs = rep.samples(false);
      bool square = rep.shape().size() == 2 && rep.shape()[0] == rep.shape()[1];
      // Non-square 2-D: read in one orientation, so the samples agree when
      // the values do and the shapes say which way.
      std::vector<bool> relations;
      if (theirs == samples)
        relations.push_back(rep.shape().size() == 2 &&
                            rep.flipped() != mine.flipped());
      if (square && theirs == mine.samples(true))
        relations.push_back(true);
      for (bool transposed : relations) {
        if (!equalBits(rep, mine, transposed))
          continue;
        tieClass.members.push_back({index, transposed});
        joined = true;
        break;
      }
      if (joined)
        break;
    }
    if (joined) {
      mine.release();
      continue;
    }
    bool uniform = true;
    for (size_t k = 1; uniform && k * mine.bytesPerElement() < samples.size();
         ++k)
      uniform = std::memcmp(samples.data(),
                            samples.data() + k * mine.bytesPerElement(),
                            mine.bytesPerElement()) == 0;
    if (uniform && !mine.varies()) {
      mine.release();
      continue;
    }
    classes.push_back({{{index, false}}});
  }

  // Per class: --untie leaves it; the parameter kept is the first member
  // with a module-style name, else the first; the others become its copies.
  for (auto &[key, classes] : buckets) {
    for (TieClass &tieClass : classes) {
      if (tieClass.members.size() < 2)
        continue;
      std::vector<std::pair<size_t, bool>> kept;
      for (const auto &member : tieClass.members)
        if (!untied.contains(data[member.first].name()))
          kept.push_back(member);
      auto canonical = llvm::find_if(kept, [&](const auto &member) {
        return !isExporterName(data[member.first].name());
      });
      if (canonical == kept.end())
        canonical = kept.begin();
      for (const auto &member : tieClass.members) {
        if (kept.empty() || member.first == canonical->first)
          continue;
        bool transposed = member.second != canonical->second;
        std::string parameterName = data[canonical->first].name().str();
        if (untied.contains(data[member.first].name())) {
          decisions[member.first].untied =
              "equals '" + parameterName + "'" +
              (transposed ? " transposed" : "") +
              ", bit for bit; kept a parameter of its own by --untie";
          continue;
        }
        decisions[member.first].copyOf = canonical->first;
        decisions[member.first].transposed = transposed;
        decisions[canonical->first].copies.push_back(
            {data[member.first].name().str(), transposed, true,
             tieReason(transposed)});
      }
      // Only --untie names left: each stands alone, said against the first.
      if (kept.empty())
        for (const auto &member : llvm::drop_begin(tieClass.members))
          decisions[member.first].untied =
              "equals '" + data[tieClass.members.front().first].name().str() +
              "'" +
              (member.second != tieClass.members.front().second ? " transposed"
                                                                : "") +
              ", bit for bit; kept a parameter of its own by --untie";
    }
  }

  // Forced ties, onto the parameter their PARAM is (a copy itself, of an
  // automatic tie, hands the forced copy on to its parameter).
  for (const ForcedTie &tie : forced) {
    size_t parameter = tie.parameter;
    bool transposed = tie.transposed;
    if (std::optional<size_t> of = decisions[parameter].copyOf) {
      transposed = transposed != decisions[parameter].transposed;
      parameter = *of;
    }
    std::optional<int64_t> differences =
        countDifferences(data[parameter], data[tie.copy], transposed);
    bool equal = differences && *differences == 0;
    std::string reason = "forced by --tie " + tie.text;
    if (parameter != tie.parameter)
      reason += " ('" + data[tie.parameter].name().str() + "' is a copy of '" +
                data[parameter].name().str() + "')";
    if (equal)
      reason += "; " + tieReason(transposed);
    else if (differences)
      reason += "; values differ in " + std::to_string(*differences) + " of " +
                std::to_string(data[parameter].elements()) + " elements" +
                (transposed ? " (compared transposed)" : "");
    else
      reason += readExternal ? "; values not compared (the data cannot be read)"
                             : "; values not compared (--no-weights)";
    decisions[tie.copy].copyOf = parameter;
    decisions[tie.copy].transposed = transposed;
    decisions[parameter].copies.push_back(
        {data[tie.copy].name().str(), transposed, equal, reason});
  }

  // Freezing, per parameter with its copies: --freeze, then --train, then
  // the buffer rule of the parameter kept.
  auto compile = [](llvm::StringRef flag, const std::vector<std::string> &texts,
                    std::vector<llvm::GlobPattern> &out) -> llvm::Error {
    for (const std::string &text : texts) {
      llvm::Expected<llvm::GlobPattern> pattern =
          llvm::GlobPattern::create(text);
      if (!pattern)
        return makeError(flag + " '" + text + "' is not a valid glob: " +
                         llvm::toString(pattern.takeError()));
      out.push_back(std::move(*pattern));
    }
    return llvm::Error::success();
  };
  std::vector<llvm::GlobPattern> freeze, train;
  if (llvm::Error error = compile("--freeze", options.freeze, freeze))
    return error;
  if (llvm::Error error = compile("--train", options.train, train))
    return error;
  std::vector<bool> freezeUsed(freeze.size()), trainUsed(train.size());
  for (size_t index = 0; index < candidates.size(); ++index) {
    if (decisions[index].copyOf)
      continue;
    std::vector<llvm::StringRef> names{data[index].name()};
    for (const TiedCopyDecision &copy : decisions[index].copies)
      names.push_back(copy.name);
    auto firstMatch = [&](std::vector<llvm::GlobPattern> &patterns,
                          std::vector<bool> &used,
                          llvm::StringRef &matched) -> std::optional<size_t> {
      std::optional<size_t> first;
      for (size_t p = 0; p < patterns.size(); ++p)
        for (llvm::StringRef name : names)
          if (patterns[p].match(name)) {
            used[p] = true;
            if (!first) {
              first = p;
              matched = name;
            }
          }
      return first;
    };
    llvm::StringRef frozenName, trainedName;
    std::optional<size_t> frozenBy = firstMatch(freeze, freezeUsed, frozenName);
    std::optional<size_t> trainedBy = firstMatch(train, trainUsed, trainedName);
    if (frozenBy && trainedBy && frozenName == trainedName)
      return makeError("'" + frozenName + "' is matched by --freeze '" +
                       options.freeze[*frozenBy] + "' and by --train '" +
                       options.train[*trainedBy] +
                       "'; a parameter is frozen or trained");
    if (frozenBy && trainedBy)
      return makeError("--freeze '" + options.freeze[*frozenBy] +
                       "' matches '" + frozenName + "' and --train '" +
                       options.train[*trainedBy] + "' matches '" + trainedName +
                       "', one tied parameter; a parameter is frozen or "
                       "trained");
    if (frozenBy)
      decisions[index].frozen = "--freeze '" + options.freeze[*frozenBy] + "'";
    else if (!trainedBy)
      decisions[index].frozen = buffer[index];
  }
  for (auto [flag, texts, used] :
       {std::make_tuple("--freeze", &options.freeze, &freezeUsed),
        std::make_tuple("--train", &options.train, &trainUsed)})
    for (size_t p = 0; p < texts->size(); ++p)
      if (!(*used)[p])
        return makeError(llvm::Twine(flag) + " '" + (*texts)[p] +
                         "' matches no parameter (a floating-point "
                         "initializer of more than one element)");
  return llvm::Error::success();
}
