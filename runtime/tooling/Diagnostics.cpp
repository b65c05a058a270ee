//===- Diagnostics.cpp - zrun's one error line
//-----------------------------===//

#include "runtime/tooling/Diagnostics.h"

#include <cerrno>
#include <unistd.h>

void zplan::tooling::printError(const std::string &message) {
  std::string line = "zrun: error: " + message + "\n";
  const char *cursor = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t written = ::write(STDERR_FILENO, cursor, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return;
    cursor += written;
    left -= static_cast<size_t>(written);
  }
}
