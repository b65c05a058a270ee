//===- PromptFiles.h - the prompts of a generation, read from .npy files --===//
//
// `zrun generate` and `zrun train --generate-every` read the same files:
// --prompt (int64 or int32 [B, Pmax]) and --prompt-lengths (int64 or int32
// [B]). This reads them, with --max-new-tokens, --eos and the sampling flags,
// into the request a session generates from (runtime/session/Session.h),
// and keeps this rank's rows: the files hold the global batch, N * B rows,
// and rank r generates rows [r * B, (r + 1) * B) (docs/generation.md
// section 8). Whether the rows fit the plan is
// Session::checkGenerateRequest's business.
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

/// Keeps rank `rank`'s rows of the global batch in `request` (and their
/// lengths), with firstRow set: `shape.batch` rows per rank. Fails naming
/// the file when it does not hold `ranks` * shape.batch rows (and lengths),
/// or naming the row of a prompt that does not fit `shape`; the same
/// failure on every rank.
Status keepRankRows(session::GenerateRequest &request,
                    const generate::GenerationShape &shape, uint64_t rank,
                    uint64_t ranks);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_PROMPTFILES_H
