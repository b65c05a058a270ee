//===- Options.h - what zcc is asked to do --------------------------------===//
//
// CompileOptions is everything zcc's flags say, and the one input of
// compileModel() (Driver.h). The values zcc parses itself (byte sizes,
// --mode, --input-shape) and the checks of values and combinations made
// before any work live here, so that a bad flag never leaves a half-done run
// behind and each check is unit-tested (test/unit/DriverTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_OPTIONS_H
#define ZPLAN_COMPILER_OPTIONS_H

#include "compiler/ScheduleChoices.h"
#include "compiler/import/OnnxImporter.h"
#include "compiler/plan/TrainDefaults.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace zplan {

/// One --dump kind (docs/design.md, section 5) and the file it is written
/// to in --dump-dir.
struct DumpKind {
  llvm::StringLiteral name;
  llvm::StringLiteral fileName;
};

/// The dumps, in the order they are written.
inline constexpr DumpKind kDumpKinds[] = {{"ir", "ir.mlir"},
                                          {"schedule", "schedule.txt"},
                                          {"memory", "memory.txt"},
                                          {"report", "report.txt"}};

/// --mode: what the plan runs. The combined modes put the programs of both
/// in one plan over one set of shards (docs/one-plan.md).
/// Logprobs: a frozen model (no gradient or optimizer state) with the
/// infer and logprobs programs, e.g. RL's reference model (docs/rl.md).
enum class CompileMode {
  Infer,
  Train,
  Generate,
  TrainGenerate,
  TrainInfer,
  Logprobs
};

/// One --mode value: its spelling and what the help text says of it.
struct CompileModeSpelling {
  CompileMode mode;
  llvm::StringLiteral name;
  llvm::StringLiteral description;
};

/// Every CompileMode with its spelling ("train,generate" for a combined
/// one), the one table zcc's option uses.
llvm::ArrayRef<CompileModeSpelling> getCompileModeSpellings();

/// The spelling of `mode` ("infer", ..., "train,generate").
llvm::StringRef spell(CompileMode mode);

/// Parses --mode: one mode, or a comma-separated combination (train with
/// generate or infer, in either order); an unknown, repeated or unsupported
/// combination is an error naming it.
llvm::Expected<CompileMode> parseCompileMode(llvm::StringRef text);

/// Whether the plan holds the training programs (train_micro_step,
/// optimizer_step).
bool trains(CompileMode mode);

/// Whether the plan holds the generation programs (generate_begin, prefill,
/// decode, generate_end).
bool generates(CompileMode mode);

/// Whether `loss` (--loss) is an RL objective (grpo, dpo), whose plans
/// also hold the logprobs program.
bool isRlLoss(llvm::StringRef loss);

/// The largest --world-size. The largest jobs run ~10^5 ranks; 2^20 leaves
/// room for them while every group, padded to N x the 128-byte alignment,
/// stays far from 64-bit byte counts (the plan stores N as uint32).
inline constexpr int64_t kMaxWorldSize = int64_t(1) << 20;

struct CompileOptions {
  std::string modelPath;
  /// The plan to write (-o); empty for none.
  std::string outputPath;
  int64_t worldSize = 1;
  CompileMode mode = CompileMode::Infer;
  /// The profile the cost model and the plan are tuned for.
  Hardware hardware = Hardware::Cpu;
  /// --hardware-profile: a calibrated profile's JSON file whose numbers
  /// replace `hardware`'s embedded ones (bench/calibrate_cpu.cpp writes
  /// one); empty for the embedded profile.
  std::string hardwareProfile;
  /// Bytes per rank; nullopt for no limit.
  std::optional<uint64_t> memoryBudget;
  ImportOptions import;
  std::set<std::string> dumps;
  /// Where dumps go as files; empty to print them on stdout.
  std::string dumpDir;
  /// The scheduler's or hook-based ZeRO-3 (the baseline); the report always
  /// shows both.
  SchedulePolicy policy = SchedulePolicy::Default;
  int64_t bucketBytes = 32 << 20;
  int64_t persistenceThreshold = 100000;
  /// Mixed precision (docs/mixed-precision.md; FSDP2's names): the type
  /// parameters are gathered and computed from, and the type gradients are
  /// reduced in: "fp32" or "bf16". The shards, optimizer state and
  /// checkpoints stay fp32.
  std::string paramDtype = "fp32";
  std::string reduceDtype = "fp32";
  /// The type matmuls read their operands in (accumulating in f32): "fp32"
  /// or "bf16"; zcc's default is the param dtype, as FSDP2's bf16
  /// parameters are multiplied in bf16.
  std::string computeDtype = "fp32";
  int64_t maxInFlight = 2;
  int64_t maxInFlightBytes = 0;
  /// Generation: may the default policy carry decode's first streamed
  /// gather over from the previous token (docs/generation.md section 6)?
  /// --cross-step-prefetch=false turns it off, to measure what it gains.
  bool crossStepPrefetch = true;
  /// --mode train (alone or combined): what is minimised ("causal-lm", or
  /// "output:NAME" for a model that outputs its own scalar loss) and by what
  /// ("adamw", "sgd").
  std::string loss = "causal-lm";
  std::string optimizer = "adamw";
  /// --offload-optimizer (docs/offload.md; DeepSpeed's offload_optimizer):
  /// where the optimizer's moments live, "none" (the device), "cpu" (host
  /// memory) or "nvme" (a file per rank under `offloadDir`), streamed
  /// through the arena for each group's update.
  std::string offloadOptimizer = "none";
  /// --offload-params (DeepSpeed's offload_param): where the parameter
  /// shards live, "none", "cpu" or "nvme"; each is copied into the arena
  /// before the collective or update that reads it.
  std::string offloadParams = "none";
  /// --offload auto (OffloadChoice.h): offload only as much as
  /// --memory-budget requires, moments first; "none" leaves it to the two
  /// options above.
  std::string offload = "none";
  /// How many groups --offload-optimizer and --offload-params move, the
  /// largest first (compiler/analysis/OffloadSelection.h): every group
  /// (kEveryGroup), unless --offload auto chose fewer.
  static constexpr int64_t kEveryGroup = -1;
  int64_t offloadedMomentGroups = kEveryGroup;
  int64_t offloadedShardGroups = kEveryGroup;
  /// The NVME tier's directory, for either option (and --offload auto).
  std::string offloadDir;
  /// --host-optimizer-step: whether a group whose moments live in host
  /// memory is updated on the host (ZeRO-Offload's split; a shard on the
  /// device through a host master copy) or staged through the device.
  bool hostOptimizerStep = true;
  /// --loss grpo / dpo: TRL's options (docs/rl.md). --loss-type (grpo:
  /// grpo | dapo), --beta (unset: TRL's default), --epsilon,
  /// --epsilon-high (unset: --epsilon), --old-logprobs.
  std::string lossType = "dapo";
  std::optional<double> beta;
  double epsilon = 0.2;
  std::optional<double> epsilonHigh;
  bool oldLogprobs = false;
  /// --use-bias-correction-kl (TRL's name; default on).
  bool biasCorrectionKl = true;
  /// --mode generate (alone or with train): B sequences, prompts of at most P
  /// tokens (default L / 2), at most L tokens in all; unset when the flag is
  /// not given.
  std::optional<int64_t> batch;
  std::optional<int64_t> promptLength;
  std::optional<int64_t> maxSeqLength;
  /// zrun train's defaults from --ds-config, carried by the plan.
  TrainDefaults trainDefaults;
};

/// Parses a byte size: a non-negative number with an optional unit, B, KiB,
/// MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g.
/// "16GiB", "512MiB", "1.5GiB", "4096".
llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text);

/// Binds every --input-shape NAME=DIMS into `options`; the same NAME given
/// twice is an error that names it.
llvm::Error parseInputShapes(llvm::ArrayRef<std::string> texts,
                             ImportOptions &options);

/// Binds the parameter flags into `options.parameters` (ParameterRules.h):
///   --tie COPY=PARAM   COPY is no parameter of its own: every use reads
///                      PARAM (transposed when COPY's 2-D shape is PARAM's
///                      reversed), whose gradient sums them; `zrun export`
///                      writes the trained PARAM into both. Forces a tie the
///                      rule would not make (values that differ are
///                      reported); shapes must match directly or transposed.
///   --untie NAME       keeps NAME a parameter of its own although it equals
///                      another bit for bit (the automatic tie rule).
///   --freeze GLOB      the parameters matching GLOB (a tied pair: either
///                      name) are not trained: sharded and gathered as
///                      usual, but no gradient, reduce-scatter, optimizer
///                      update or state (a frozen layer, a reference model).
///   --train GLOB       trains the matching ones although the buffer rule
///                      would freeze them; a name both match is an error.
/// Each flag repeats. A malformed --tie or one COPY given twice is an error;
/// the names are checked against the model when it is imported.
llvm::Error parseParameterFlags(llvm::ArrayRef<std::string> ties,
                                llvm::ArrayRef<std::string> unties,
                                llvm::ArrayRef<std::string> freeze,
                                llvm::ArrayRef<std::string> train,
                                ImportOptions &options);

/// Checks option values and combinations before any work (world size,
/// mode, dump kinds, limits, the generation shapes).
llvm::Error validateOptions(const CompileOptions &options);

} // namespace zplan

#endif // ZPLAN_COMPILER_OPTIONS_H
