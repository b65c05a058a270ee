//===- Agreement.cpp - the ranks agree on who failed ----------------------===//

#include "runtime/comm/Agreement.h"

#include <vector>

using namespace zplan;

Status comm::shareFailures(Communicator &communicator, bool failed,
                           Failures &failures) {
  int size = communicator.size();
  // One flag per rank, summed: small enough for f32, which every
  // communicator reduces.
  std::vector<float> failedRanks(size, 0.0f);
  failedRanks[communicator.rank()] = failed ? 1.0f : 0.0f;
  {
    CollectiveContext named(communicator,
                            "the ranks' agreement on whether a step or call "
                            "succeeded (a rank that left the call, or made "
                            "another, never arrives)");
    ZR_RETURN_IF_ERROR(communicator.allReduce(failedRanks.data(), size));
  }
  failures = Failures();
  for (int rank = 0; rank < size; ++rank)
    if (failedRanks[rank] != 0.0f) {
      ++failures.count;
      if (failures.first < 0)
        failures.first = rank;
    }
  return Status::success();
}

Status zplan::comm::agreeOnStatus(const Status &local,
                                  Communicator &communicator) {
  Failures failures;
  ZR_RETURN_IF_ERROR(shareFailures(communicator, !local.ok(), failures));
  if (failures.count == 0)
    return Status::success();
  int first = failures.first;
  std::vector<std::string> messages;
  ZR_RETURN_IF_ERROR(communicator.gatherText(local.message(), messages));
  std::string message;
  if (communicator.rank() == 0)
    message = failures.count == communicator.size()
                  ? messages[first]
                  : "rank " + std::to_string(first) + ": " + messages[first];
  ZR_RETURN_IF_ERROR(broadcastText(communicator, message, 0));
  return Status::error(message);
}

Status zplan::comm::broadcastText(Communicator &communicator, std::string &text,
                                  int root) {
  uint64_t length = text.size();
  ZR_RETURN_IF_ERROR(communicator.broadcast(&length, sizeof(length), root));
  text.resize(length);
  if (length > 0)
    ZR_RETURN_IF_ERROR(communicator.broadcast(text.data(), length, root));
  return Status::success();
}
