//===- PromptFiles.h - the prompts of a generation, read from .npy files --===//
//
// `zrun generate` and `zrun train --generate-every` read the same files:
// --prompt (int64 or int32 [B, Pmax]) and --prompt-lengths (int64 or int32
// [B]). This reads them, with --max-new-tokens, --eos and the sampling flags,
// into the request a session generates from (runtime/session/Session.h);
// whether they fit the plan is Session::checkGenerateRequest's business.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_PROMPTFILES_H
#define ZPLAN_RUNTIME_TOOLING_PROMPTFILES_H

#include "runtime/generate/GenerateOptions.h"
#include "runtime/session/Session.h"
#include "runtime/support/Status.h"

namespace zplan::tooling {

/// Reads `options`' prompt file (and lengths file) into `request`; fails
/// naming the file on a missing or malformed one, or one without a token.
Status readGenerateRequest(const generate::GenerateOptions &options,
                           session::GenerateRequest &request);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_PROMPTFILES_H
