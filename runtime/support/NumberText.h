//===- NumberText.h - a double as the shortest decimal that reads back ----===//
//
// "0.9", not "0.90000000000000002": for values a person reads and a parser
// reads back exactly, such as the training settings zcc --ds-config notes
// and the zrun train flags a plan's defaults become.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_NUMBERTEXT_H
#define ZPLAN_RUNTIME_SUPPORT_NUMBERTEXT_H

#include <cstdio>
#include <cstdlib>
#include <string>

namespace zplan {

/// The shortest %g text (1 to 17 significant digits) that strtod reads back
/// as `value` exactly.
inline std::string shortestDecimal(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_NUMBERTEXT_H
