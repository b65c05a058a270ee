//===- Agreement.h - the ranks agree on who failed ------------------------===//
//
// Before a step that every rank must take together (loading, a checkpoint),
// each rank's own success or failure is shared, so that all ranks stop
// together and one message, the lowest failing rank's, is reported once.
// zrun's agree() (runtime/tooling) prints the message of the lowest failing
// rank; agreeOnStatus() hands it to every rank instead (the checkpoints of
// runtime/train, the Python module, which raises it on every rank).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_AGREEMENT_H
#define ZPLAN_RUNTIME_COMM_AGREEMENT_H

#include "runtime/comm/Communicator.h"

namespace zplan::comm {

/// Who failed, as every rank learns it.
struct Failures {
  /// How many ranks failed.
  int count = 0;
  /// The lowest failing rank; -1 when none did.
  int first = -1;
};

/// Collective: each rank passes whether it failed; every rank gets the same
/// Failures. Fails only when the all-reduce itself does.
Status shareFailures(Communicator &communicator, bool failed,
                     Failures &failures);

/// Collective: every rank passes its status; all get success, or all get
/// the same failure: the message of the lowest failing rank, prefixed with
/// "rank R: " unless every rank failed.
Status agreeOnStatus(const Status &local, Communicator &communicator);

/// Collective: rank `root`'s `text` on every rank (its length first).
Status broadcastText(Communicator &communicator, std::string &text, int root);

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_AGREEMENT_H
