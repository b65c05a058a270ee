//===- ZplanModule.cpp - the Python module zplan --------------------------===//
//
// zplan.Session(plan, ...) is runtime/session/Session.h on this rank, over
// numpy arrays (docs: README, "Python"). A script that imports zplan is run
// under mpirun like zrun, one process per rank, each building its own
// Session over the same plan.
//
// MPI belongs to the module: importing it initializes MPI (through the
// MpiCommunicator zrun uses), and the interpreter's exit finalizes it, after
// every Session still open has been closed (a Session's executor thread must
// end before MPI does). An exception that no one catches aborts every rank
// (MPI_Abort) once Python has printed it: the other ranks may be waiting in
// a collective for the one that stopped, as zrun aborts them on a failure
// during the steps.
//
// Every failure of the runtime raises RuntimeError with zrun's one-line
// message (the text after "zrun: error: ").
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace py = pybind11;
using namespace zplan;

namespace {

/// Raises RuntimeError with `status`'s message when it failed.
void check(const Status &status) {
  if (!status.ok())
    throw std::runtime_error(status.message());
}

/// The world communicator from import to exit.
std::unique_ptr<comm::MpiCommunicator> world;

comm::MpiCommunicator &theWorld() {
  if (!world)
    throw std::runtime_error("MPI is finalized (the interpreter is exiting)");
  return *world;
}

/// atexit: finalizes MPI.
void finalizeWorld() { world.reset(); }

/// Wraps sys.excepthook: Python prints the exception, then every rank is
/// aborted.
void abortOnUncaughtExceptions() {
  py::module_ sys = py::module_::import("sys");
  py::object previous = sys.attr("excepthook");
  sys.attr("excepthook") = py::cpp_function(
      [previous](py::object type, py::object value, py::object traceback) {
        previous(type, value, traceback);
        if (world && world->size() > 1) {
          py::module_::import("sys").attr("stderr").attr("flush")();
          world->abort(1);
        }
      });
}

} // namespace

PYBIND11_MODULE(zplan, module) {
  module.doc() = "zplan: run a zplan plan (training, generation) from Python "
                 "on the ranks mpirun launches";

  std::unique_ptr<comm::MpiCommunicator> communicator;
  if (Status status =
          comm::MpiCommunicator::create(nullptr, nullptr, communicator);
      !status.ok())
    throw std::runtime_error("cannot start MPI: " + status.message());
  world = std::move(communicator);
  py::module_::import("atexit").attr("register")(
      py::cpp_function(&finalizeWorld));
  abortOnUncaughtExceptions();

  module.def("rank", [] { return theWorld().rank(); }, "This process's rank.");
  module.def(
      "world_size", [] { return theWorld().size(); },
      "The number of ranks mpirun launched.");
}
