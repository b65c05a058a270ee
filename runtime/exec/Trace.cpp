//===- Trace.cpp - Chrome/Perfetto traces of a run ------------------------===//

#include "runtime/exec/Trace.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

using namespace zplan;

namespace {

/// `text` as a JSON string literal.
std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
        out += escaped;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

/// Nanoseconds as the microseconds trace viewers expect, to the ns.
std::string microseconds(uint64_t nanoseconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%llu.%03llu",
                static_cast<unsigned long long>(nanoseconds / 1000),
                static_cast<unsigned long long>(nanoseconds % 1000));
  return text;
}

} // namespace

void TraceRecorder::prepareRun(size_t instructions) {
  // Doubling keeps the reservations between runs few; the cap (24 MiB of
  // events per queue) is where a long --repeat or generation starts
  // dropping instead.
  for (std::vector<Event> *events : {&compute, &comm}) {
    size_t wanted = std::min(kMaxEventsPerQueue, events->size() + instructions);
    if (wanted > events->capacity())
      events->reserve(std::min(kMaxEventsPerQueue,
                               std::max(wanted, 2 * events->capacity())));
  }
}

std::string TraceRecorder::eventsJson(const plan::Plan &plan,
                                      const plan::Program &program,
                                      int rank) const {
  std::ostringstream os;
  std::string pid = std::to_string(rank);
  os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid
     << ",\"args\":{\"name\":\"rank " << pid << "\"}},\n"
     << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << pid
     << ",\"args\":{\"sort_index\":" << pid << "}},\n"
     << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid
     << ",\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
     << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid
     << ",\"tid\":1,\"args\":{\"name\":\"comm\"}}";
  for (int tid = 0; tid < 2; ++tid)
    for (const Event &event : tid == 0 ? compute : comm) {
      const plan::Instruction &instruction =
          program.instructions(event.instruction);
      const plan::OpcodeInfo *opcode = plan::findOpcode(instruction.opcode());
      os << ",\n{\"name\":"
         << jsonString(plan::opcodeName(instruction.opcode()))
         << ",\"ph\":\"X\",\"ts\":" << microseconds(event.startNs)
         << ",\"dur\":" << microseconds(event.endNs - event.startNs)
         << ",\"pid\":" << pid << ",\"tid\":" << tid
         << ",\"args\":{\"program\":" << jsonString(program.name())
         << ",\"instruction\":" << event.instruction
         << ",\"run\":" << event.run;
      if (!instruction.location().empty())
        os << ",\"location\":" << jsonString(instruction.location());
      bool namesGroup = opcode && opcode->showsGroup;
      if (namesGroup &&
          instruction.group() < static_cast<uint32_t>(plan.groups_size()))
        os << ",\"group\":"
           << jsonString(plan.groups(instruction.group()).name());
      os << "}}";
    }
  if (droppedEvents() > 0)
    os << ",\n{\"name\":\"dropped events\",\"ph\":\"i\",\"s\":\"p\",\"ts\":0"
       << ",\"pid\":" << pid
       << ",\"tid\":0,\"args\":{\"count\":" << droppedEvents() << "}}";
  return os.str();
}
