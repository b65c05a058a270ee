//===- Errors.h - the error every compiler library returns ------*- C++ -*-===//
//
// zcc's errors are messages for people: they are printed, never converted
// to a std::error_code, so every library of the compiler builds them the same
// way, here.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_ERRORS_H
#define ZPLAN_COMPILER_ERRORS_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace zplan {

/// An llvm::Error holding `message`. Not llvm::createStringError(message):
/// given a lone string literal, that overload set picks its printf-style
/// form, and a '%' in the message would be read as a conversion.
inline llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace zplan

#endif // ZPLAN_COMPILER_ERRORS_H
