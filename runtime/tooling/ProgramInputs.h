//===- ProgramInputs.h - a program's inputs from the user's .npy files ----===//
//
// `zrun run` and `zrun gradients` feed a program whatever the model takes,
// one `--input NAME=FILE.npy` per input: each file is checked against the
// buffer it fills (shape and element type, from the header, before its data
// is read), and every input must be given.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_PROGRAMINPUTS_H
#define ZPLAN_RUNTIME_TOOLING_PROGRAMINPUTS_H

#include "runtime/plan/plan.pb.h"
#include "runtime/session/Session.h"
#include "runtime/tooling/Arguments.h"
#include "runtime/tooling/Npy.h"

#include <string>
#include <vector>

namespace zplan::tooling {

/// Reads the .npy file `path` for program input `binding`, checking its
/// shape and element type against the buffer it fills.
Status readInput(const plan::Plan &plan, const plan::Binding &binding,
                 const std::string &path, npy::Array &array);

/// Fails, naming it and the program's inputs, on an `--input` that names no
/// input of `program`.
Status checkInputNames(const plan::Program &program,
                       const std::vector<FileBinding> &inputs);

/// "'a', 'b'", or "none": the names of a program's inputs or outputs.
std::string
namesOf(const google::protobuf::RepeatedPtrField<plan::Binding> &bindings);

/// Reads every input of `program` from its `--input` file, in the program's
/// order; fails on a missing one (naming its shape and type).
Status readProgramInputs(const plan::Plan &plan, const plan::Program &program,
                         const std::vector<FileBinding> &inputs,
                         std::vector<npy::Array> &arrays);

/// The arrays readProgramInputs() read, as the session's program inputs.
std::vector<session::ProgramInput>
asProgramInputs(const plan::Program &program,
                const std::vector<npy::Array> &arrays);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_PROGRAMINPUTS_H
