//===- TraceFile.cpp - zrun --trace: every rank's events in one file ------===//

#include "runtime/tooling/TraceFile.h"

#include <vector>

using namespace zplan;

Status zplan::tooling::stageTrace(comm::Communicator &communicator,
                                  const std::string &events,
                                  const std::string &path,
                                  StagedFiles &staged) {
  std::vector<std::string> all;
  ZR_RETURN_IF_ERROR(communicator.gatherText(events, all));
  if (communicator.rank() != 0)
    return Status::success();
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t rank = 0; rank < all.size(); ++rank)
    text += (rank ? ",\n" : "") + all[rank];
  text += "\n]}\n";
  return staged.stage(path, text, "the trace to " + inQuotes(path));
}
