//===- ProgramInputs.cpp - a program's inputs from the user's .npy files --===//

#include "runtime/tooling/ProgramInputs.h"

#include "runtime/plan/PlanQueries.h"
#include "runtime/support/ShapeText.h"

#include <algorithm>

using namespace zplan;
using namespace zplan::tooling;
using plan::bufferOf;
using plan::findBinding;
using plan::shapeOf;
using plan::typeName;

Status zplan::tooling::readInput(const plan::Plan &plan,
                                 const plan::Binding &binding,
                                 const std::string &path, npy::Array &array) {
  const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
  std::string expected =
      shapeText(shapeOf(buffer)) + " " + typeName(buffer.dtype());
  auto checkDeclaration = [&](const npy::Array &declared) -> Status {
    if (declared.shape != shapeOf(buffer) || declared.dtype != buffer.dtype())
      return failure("input ", inQuotes(binding.name()), " from ",
                     inQuotes(path), " is ", shapeText(declared.shape), " ",
                     typeName(declared.dtype), ", the program expects ",
                     expected);
    return Status::success();
  };
  if (Status status = npy::readNpy(path, array, checkDeclaration);
      !status.ok()) {
    if (status.message().rfind("input ", 0) == 0)
      return status;
    return failure("input ", inQuotes(binding.name()), ": ", status.message());
  }
  return Status::success();
}

/// "'a', 'b'", or "none".
std::string zplan::tooling::namesOf(
    const google::protobuf::RepeatedPtrField<plan::Binding> &bindings) {
  std::string names;
  for (const plan::Binding &binding : bindings)
    names += (names.empty() ? "" : ", ") + inQuotes(binding.name());
  return names.empty() ? std::string("none") : names;
}

Status zplan::tooling::checkInputNames(const plan::Program &program,
                                       const std::vector<FileBinding> &inputs) {
  for (const FileBinding &input : inputs)
    if (!findBinding(program.inputs(), input.name))
      return failure("--input ", inQuotes(input.name), " names no input of ",
                     "program ", inQuotes(program.name()),
                     " (its inputs: ", namesOf(program.inputs()), ")");
  return Status::success();
}

Status zplan::tooling::readProgramInputs(const plan::Plan &plan,
                                         const plan::Program &program,
                                         const std::vector<FileBinding> &inputs,
                                         std::vector<npy::Array> &arrays) {
  for (const plan::Binding &binding : program.inputs()) {
    auto given = std::find_if(
        inputs.begin(), inputs.end(),
        [&](const FileBinding &input) { return input.name == binding.name(); });
    const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
    if (given == inputs.end())
      return failure("missing --input ", binding.name(), "=FILE.npy for ",
                     "program input ", inQuotes(binding.name()), " (",
                     shapeText(shapeOf(buffer)), " ", typeName(buffer.dtype()),
                     ")");
    npy::Array array;
    ZR_RETURN_IF_ERROR(readInput(plan, binding, given->path, array));
    arrays.push_back(std::move(array));
  }
  return Status::success();
}

std::vector<session::ProgramInput>
zplan::tooling::asProgramInputs(const plan::Program &program,
                                const std::vector<npy::Array> &arrays) {
  std::vector<session::ProgramInput> inputs;
  for (int i = 0; i < program.inputs_size(); ++i)
    inputs.push_back({program.inputs(i).name(), arrays[i].data.data(),
                      arrays[i].data.size()});
  return inputs;
}
