//===- GenerateCommand.h - zrun PLAN generate -----------------------------===//
//
// The command of a plan compiled with `zcc --mode generate` (docs/generation.md
// section 5). Its programs (docs/generation.md section 1): `generate_begin`
// (gathers the resident groups), `prefill` (inputs input_ids and positions [B,
// P], last_index [B]; output logits [B, V]), `decode` (input_ids and positions
// [B, 1]; output logits [B, V]) and `generate_end` (releases the resident
// groups). The KV cache lives in the plan's CACHE buffers [B, Hkv, L, D], kept
// across the programs.
//
// `generate` reads the prompts (and their lengths) and has the rank's
// session (runtime/session/Session.h) run generate_begin, prefill, then
// decode per token until every row has finished (EOS or --max-new-tokens),
// then generate_end; picks each token with the sampler
// (runtime/generate/Sampler.h: greedy by default), on every rank, and takes
// rank 0's choice, broadcast, so that the ranks can never feed different
// tokens. Rank 0 prints progress to stderr and a summary to stdout (time
// to first token, decode tokens/s, bytes gathered per decode step as
// planned and, with --stats, as counted, resident and KV cache bytes), and
// writes --output (int64 [B, M]) and --logits-output (f32 [M, B, V]) and
// the trace, all or none, as `run` writes its files.
//
// Failures before the first program are agreed among the ranks (one line,
// exit 1); a failure during the programs prints one line and aborts every
// rank, as in `run` and `train`.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_GENERATECOMMAND_H
#define ZPLAN_RUNTIME_TOOLING_GENERATECOMMAND_H

#include "runtime/comm/Communicator.h"
#include "runtime/tooling/Arguments.h"

namespace zplan::tooling {

/// `zrun PLAN generate` on this rank; returns the exit status.
int generateTokens(const Arguments &arguments,
                   comm::Communicator &communicator);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_GENERATECOMMAND_H
