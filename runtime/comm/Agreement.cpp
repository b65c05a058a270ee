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
  ZR_RETURN_IF_ERROR(communicator.allReduce(failedRanks.data(), size));
  failures = Failures();
  for (int rank = 0; rank < size; ++rank)
    if (failedRanks[rank] != 0.0f) {
      ++failures.count;
      if (failures.first < 0)
        failures.first = rank;
    }
  return Status::success();
}
