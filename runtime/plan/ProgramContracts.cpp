//===- ProgramContracts.cpp - what each kind of program binds -------------===//
//
// The table of ProgramContracts.h as data (kContracts), and the checks that
// hold a plan to it: first each program alone (its kind, the roles of its
// bindings, their types and shapes), then what programs must agree on
// (generation's B, V and cache, training's gradient reductions).
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/ProgramContracts.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/support/ShapeText.h"

#include <algorithm>
#include <array>
#include <vector>

using namespace zplan;
using namespace zplan::plan;

namespace {

/// A role a program's inputs (or outputs) may have; data may occur any
/// number of times, every other role at most once.
struct RoleRule {
  BindingRole role;
  bool required;
};

struct KindContract {
  ProgramKind kind;
  const char *name;
  std::vector<RoleRule> inputs;
  std::vector<RoleRule> outputs;
};

const std::vector<KindContract> &contracts() {
  static const std::vector<KindContract> table = {
      {PROGRAM_KIND_INFER,
       "infer",
       {{BINDING_ROLE_DATA, false}},
       {{BINDING_ROLE_DATA, false}, {BINDING_ROLE_LOGITS, false}}},
      {PROGRAM_KIND_TRAIN_MICRO_STEP,
       "train_micro_step",
       {{BINDING_ROLE_INPUT_IDS, false},
        {BINDING_ROLE_LABELS, false},
        {BINDING_ROLE_COMPLETION_MASK, false},
        {BINDING_ROLE_ADVANTAGES, false},
        {BINDING_ROLE_OLD_LOGPROBS, false},
        {BINDING_ROLE_REF_LOGPROBS, false},
        {BINDING_ROLE_DATA, false}},
       {{BINDING_ROLE_LOSS, true}}},
      {PROGRAM_KIND_OPTIMIZER_STEP,
       "optimizer_step",
       {{BINDING_ROLE_HYPER_PARAMETERS, true}},
       {}},
      {PROGRAM_KIND_GENERATE_BEGIN, "generate_begin", {}, {}},
      {PROGRAM_KIND_PREFILL,
       "prefill",
       {{BINDING_ROLE_INPUT_IDS, true},
        {BINDING_ROLE_POSITIONS, true},
        {BINDING_ROLE_LAST_INDEX, true}},
       {{BINDING_ROLE_LOGITS, true}}},
      {PROGRAM_KIND_DECODE,
       "decode",
       {{BINDING_ROLE_INPUT_IDS, true}, {BINDING_ROLE_POSITIONS, true}},
       {{BINDING_ROLE_LOGITS, true}}},
      {PROGRAM_KIND_GENERATE_END, "generate_end", {}, {}},
      {PROGRAM_KIND_LOGPROBS,
       "logprobs",
       {{BINDING_ROLE_INPUT_IDS, true}, {BINDING_ROLE_DATA, false}},
       {{BINDING_ROLE_LOGPROBS, true}, {BINDING_ROLE_ENTROPY, false}}},
  };
  return table;
}

const KindContract *contractOf(ProgramKind kind) {
  for (const KindContract &contract : contracts())
    if (contract.kind == kind)
      return &contract;
  return nullptr;
}

std::string describeProgram(const Program &program) {
  return "program " + inQuotes(program.name());
}

/// "'a', 'b'" or "none": the roles a side of `contract` allows.
std::string roleList(const std::vector<RoleRule> &rules) {
  std::string text;
  for (const RoleRule &rule : rules)
    text += (text.empty() ? "" : ", ") + bindingRoleName(rule.role);
  return text.empty() ? "none" : text;
}

bool isFloat(DataType type) {
  return type == F32 || type == F16 || type == BF16 || type == F64;
}

/// Checks one program against its kind's contract, and remembers the
/// bindings of each role for the checks across bindings.
class ProgramChecker {
public:
  ProgramChecker(const Plan &plan, const Program &program,
                 const KindContract &contract)
      : plan(plan), program(program), contract(contract) {}

  Status check() {
    ZR_RETURN_IF_ERROR(checkSide(program.inputs(), contract.inputs, "input"));
    ZR_RETURN_IF_ERROR(
        checkSide(program.outputs(), contract.outputs, "output"));
    for (const Binding &binding : program.inputs())
      if (bufferOf(plan, binding.buffer()).kind() != Buffer::ARENA)
        return failure(describeProgram(program), "'s input ",
                       inQuotes(binding.name()), " is bound to ",
                       describeBuffer(binding),
                       ", which is not an arena buffer zrun can fill");
    return checkShapes();
  }

private:
  Status checkSide(const google::protobuf::RepeatedPtrField<Binding> &bindings,
                   const std::vector<RoleRule> &rules, const char *side) {
    for (int i = 0; i < bindings.size(); ++i) {
      const Binding &binding = bindings[i];
      auto rule =
          std::find_if(rules.begin(), rules.end(), [&](const RoleRule &rule) {
            return rule.role == binding.role();
          });
      if (rule == rules.end())
        return failure(describeProgram(program), "'s ", side, " ",
                       inQuotes(binding.name()), " has role ",
                       bindingRoleName(binding.role()), "; a ", contract.name,
                       " program's ", side, "s have roles ", roleList(rules));
      if (binding.role() == BINDING_ROLE_DATA)
        continue;
      for (int j = 0; j < i; ++j)
        if (bindings[j].role() == binding.role())
          return failure(describeProgram(program), " has two ",
                         bindingRoleName(binding.role()), " ", side, "s, ",
                         inQuotes(bindings[j].name()), " and ",
                         inQuotes(binding.name()));
    }
    for (const RoleRule &rule : rules)
      if (rule.required && !findBinding(bindings, rule.role))
        return failure(describeProgram(program), " has no ",
                       bindingRoleName(rule.role), " ", side);
    return Status::success();
  }

  /// The RL bindings (docs/rl.md): f32 of input_ids' shape, advantages
  /// [B] or [B, T]; a program with any of them has input_ids, and a token-
  /// sum loss has a completion mask to count.
  Status checkPerTokenBindings(const Binding *ids,
                               const std::vector<int64_t> &idsShape) const {
    for (const auto *side : {&program.inputs(), &program.outputs()})
      for (const Binding &binding : *side) {
        BindingRole role = binding.role();
        if (role != BINDING_ROLE_COMPLETION_MASK &&
            role != BINDING_ROLE_ADVANTAGES &&
            role != BINDING_ROLE_OLD_LOGPROBS &&
            role != BINDING_ROLE_REF_LOGPROBS &&
            role != BINDING_ROLE_LOGPROBS && role != BINDING_ROLE_ENTROPY)
          continue;
        if (!ids)
          return failure(describeProgram(program), " has ",
                         bindingRoleName(role), " ", inQuotes(binding.name()),
                         " but no input_ids");
        if (role == BINDING_ROLE_ADVANTAGES &&
            shapeOf(bufferOf(plan, binding.buffer())).size() == 1)
          ZR_RETURN_IF_ERROR(expect(binding, F32, {idsShape.at(0)}));
        else
          ZR_RETURN_IF_ERROR(expect(binding, F32, idsShape));
      }
    if (program.loss_normalization() == LOSS_NORMALIZATION_TOKEN_SUM &&
        !findBinding(program.inputs(), BINDING_ROLE_COMPLETION_MASK))
      return failure(describeProgram(program),
                     "'s loss is a sum over completion tokens, but it has no "
                     "completion_mask input to count them");
    if (program.loss_normalization() != LOSS_NORMALIZATION_MEAN &&
        contract.kind != PROGRAM_KIND_TRAIN_MICRO_STEP)
      return failure(describeProgram(program),
                     " has a loss normalization; only train_micro_step has");
    return Status::success();
  }

  std::string describeBuffer(const Binding &binding) const {
    const Buffer &buffer = bufferOf(plan, binding.buffer());
    return "buffer " + std::to_string(buffer.id()) + " " +
           inQuotes(buffer.name());
  }

  /// Fails unless the buffer of `binding` (role `role`) is of `type` and has
  /// `expected`'s shape (-1: any extent).
  Status expect(const Binding &binding, DataType type,
                const std::vector<int64_t> &expected) const {
    const Buffer &buffer = bufferOf(plan, binding.buffer());
    bool fits = buffer.dtype() == type &&
                buffer.shape_size() == static_cast<int>(expected.size());
    std::vector<int64_t> shown = expected;
    for (size_t d = 0; d < expected.size(); ++d) {
      if (!fits)
        break;
      if (expected[d] < 0)
        shown[d] = buffer.shape(static_cast<int>(d));
      fits = shown[d] == buffer.shape(static_cast<int>(d));
    }
    if (fits)
      return Status::success();
    std::string want;
    for (size_t d = 0; d < expected.size(); ++d)
      want += (d ? ", " : "") + (expected[d] < 0 ? std::string("any")
                                                 : std::to_string(expected[d]));
    return failure(describeProgram(program), "'s ",
                   bindingRoleName(binding.role()), " binding ",
                   inQuotes(binding.name()), " is ", shapeText(buffer.shape()),
                   " ", typeName(buffer.dtype()), "; a ", contract.name,
                   " program's ", bindingRoleName(binding.role()), " is [",
                   want, "] ", typeName(type));
  }

  Status checkShapes() {
    const Binding *ids = findBinding(program.inputs(), BINDING_ROLE_INPUT_IDS);
    bool decode = contract.kind == PROGRAM_KIND_DECODE;
    if (ids)
      ZR_RETURN_IF_ERROR(expect(*ids, I64, {-1, decode ? 1 : -1}));
    std::vector<int64_t> idsShape =
        ids ? shapeOf(bufferOf(plan, ids->buffer())) : std::vector<int64_t>();
    if (const Binding *labels =
            findBinding(program.inputs(), BINDING_ROLE_LABELS)) {
      if (!ids)
        return failure(describeProgram(program), " takes labels ",
                       inQuotes(labels->name()), " but no input_ids");
      ZR_RETURN_IF_ERROR(expect(*labels, I64, idsShape));
    }
    if (const Binding *positions =
            findBinding(program.inputs(), BINDING_ROLE_POSITIONS))
      ZR_RETURN_IF_ERROR(expect(*positions, I64, idsShape));
    ZR_RETURN_IF_ERROR(checkPerTokenBindings(ids, idsShape));
    if (const Binding *last =
            findBinding(program.inputs(), BINDING_ROLE_LAST_INDEX))
      ZR_RETURN_IF_ERROR(expect(*last, I64, {idsShape.at(0)}));
    if (const Binding *loss = findBinding(program.outputs(), BINDING_ROLE_LOSS))
      if (const Buffer &buffer = bufferOf(plan, loss->buffer());
          buffer.dtype() != F32 || elementCount(buffer) != 1)
        return failure(describeProgram(program), "'s loss ",
                       inQuotes(loss->name()), " is ",
                       shapeText(buffer.shape()), " ", typeName(buffer.dtype()),
                       ", not one float32 value");
    if (const Binding *hyper =
            findBinding(program.inputs(), BINDING_ROLE_HYPER_PARAMETERS))
      ZR_RETURN_IF_ERROR(expect(*hyper, F32, {HyperParameter_ARRAYSIZE}));
    if (const Binding *logits =
            findBinding(program.outputs(), BINDING_ROLE_LOGITS)) {
      if (contract.kind != PROGRAM_KIND_INFER)
        return expect(*logits, F32, {idsShape.at(0), -1});
      // A model's own logits: any float type, [..., V].
      const Buffer &buffer = bufferOf(plan, logits->buffer());
      if (!isFloat(buffer.dtype()) || buffer.shape_size() == 0)
        return failure(describeProgram(program), "'s logits ",
                       inQuotes(logits->name()), " are ",
                       shapeText(buffer.shape()), " ", typeName(buffer.dtype()),
                       ", not floating-point values over a vocabulary");
    }
    return Status::success();
  }

  const Plan &plan;
  const Program &program;
  const KindContract &contract;
};

/// B and V of a generation program's logits, P of its input_ids.
struct GenerationExtents {
  int64_t batch, tokens, vocabulary;
};

GenerationExtents extentsOf(const Plan &plan, const Program &program) {
  const Buffer &ids = bufferOf(
      plan, findBinding(program.inputs(), BINDING_ROLE_INPUT_IDS)->buffer());
  const Buffer &logits = bufferOf(
      plan, findBinding(program.outputs(), BINDING_ROLE_LOGITS)->buffer());
  return {ids.shape(0), ids.shape(1), logits.shape(1)};
}

/// Only decode has a lockstep period, and a decode with a collective has
/// one: each rank decodes its own rows, so without an agreement a rank whose
/// rows finished would leave the others waiting in decode's collective
/// (docs/generation.md section 8).
Status checkLockstep(const Plan &plan, const Program &decode) {
  for (const Program &program : plan.programs())
    if (&program != &decode && program.lockstep_period() != 0)
      return failure(describeProgram(program), " has lockstep period ",
                     program.lockstep_period(),
                     "; only the decode program has one");
  if (decode.lockstep_period() != 0)
    return Status::success();
  for (int index = 0; index < decode.instructions_size(); ++index) {
    const Instruction &instruction = decode.instructions(index);
    const OpcodeInfo *info = findOpcode(instruction.opcode());
    if (info && info->kind == OpcodeKind::Collective)
      return failure(describeProgram(decode), " instruction ", index, " (",
                     info->name,
                     ") is a collective, but the ranks do not agree on when "
                     "decoding ends (lockstep period 0): a rank whose rows "
                     "finished would leave the others waiting in it");
  }
  return Status::success();
}

/// The four generation programs come together, agree on B and V, and have
/// KV caches [B, H, L, D] of one L that holds more than a prompt.
Status checkGeneration(const Plan &plan) {
  std::array<ProgramKind, 4> kinds = {PROGRAM_KIND_GENERATE_BEGIN,
                                      PROGRAM_KIND_PREFILL, PROGRAM_KIND_DECODE,
                                      PROGRAM_KIND_GENERATE_END};
  const Program *present = nullptr;
  for (ProgramKind kind : kinds)
    if (const Program *program = findProgram(plan, kind))
      present = program;
  if (!present)
    return Status::success();
  for (ProgramKind kind : kinds)
    if (!findProgram(plan, kind))
      return failure("the plan has program ", inQuotes(present->name()),
                     " but no ", programKindName(kind),
                     " program; generation needs all four");
  const Program &prefill = *findProgram(plan, PROGRAM_KIND_PREFILL);
  const Program &decode = *findProgram(plan, PROGRAM_KIND_DECODE);
  GenerationExtents first = extentsOf(plan, prefill);
  GenerationExtents next = extentsOf(plan, decode);
  if (next.batch != first.batch || next.vocabulary != first.vocabulary)
    return failure("program ", inQuotes(decode.name()), " decodes ", next.batch,
                   " rows over ", next.vocabulary, " logits, program ",
                   inQuotes(prefill.name()), " fills ", first.batch,
                   " rows over ", first.vocabulary);

  int64_t slots = 0;
  for (const Buffer &buffer : plan.buffers()) {
    if (buffer.kind() != Buffer::CACHE || buffer.view_of() != 0)
      continue;
    if (buffer.shape_size() != 4 || buffer.shape(0) != first.batch ||
        (slots && buffer.shape(2) != slots))
      return failure("KV cache buffer ", buffer.id(), " ",
                     inQuotes(buffer.name()), " is ", shapeText(buffer.shape()),
                     "; generation needs [", first.batch, ", heads, ",
                     slots ? std::to_string(slots) : "slots", ", head size]");
    slots = buffer.shape(2);
  }
  if (slots == 0)
    return failure("the plan has no KV cache buffer; compile the model with "
                   "zcc --mode generate");
  if (slots <= first.tokens)
    return failure("the plan's KV cache has ", slots,
                   " slots, no more than its prompt length ", first.tokens);
  return checkLockstep(plan, decode);
}

/// A micro-step reduces every group's gradients into its accumulator,
/// except a frozen group's, which has none.
Status checkTraining(const Plan &plan) {
  const Program *step = findProgram(plan, PROGRAM_KIND_TRAIN_MICRO_STEP);
  if (!step)
    return Status::success();
  std::vector<bool> reduced(plan.groups_size(), false);
  for (const Instruction &instruction : step->instructions())
    if (instruction.opcode() == OPCODE_REDUCE_SCATTER ||
        instruction.opcode() == OPCODE_ALL_REDUCE)
      reduced[instruction.group()] = true;
  for (int group = 0; group < plan.groups_size(); ++group)
    if (!reduced[group] && !plan.groups(group).frozen())
      return failure("program ", inQuotes(step->name()),
                     " never reduces the gradients of group @",
                     plan.groups(group).name());
  return Status::success();
}

} // namespace

std::string zplan::plan::programKindName(ProgramKind kind) {
  if (const KindContract *contract = contractOf(kind))
    return contract->name;
  return "kind " + std::to_string(static_cast<int>(kind));
}

std::string zplan::plan::bindingRoleName(BindingRole role) {
  switch (role) {
  case BINDING_ROLE_DATA:
    return "data";
  case BINDING_ROLE_INPUT_IDS:
    return "input_ids";
  case BINDING_ROLE_LABELS:
    return "labels";
  case BINDING_ROLE_POSITIONS:
    return "positions";
  case BINDING_ROLE_LAST_INDEX:
    return "last_index";
  case BINDING_ROLE_LOGITS:
    return "logits";
  case BINDING_ROLE_LOSS:
    return "loss";
  case BINDING_ROLE_HYPER_PARAMETERS:
    return "hyper_parameters";
  case BINDING_ROLE_COMPLETION_MASK:
    return "completion_mask";
  case BINDING_ROLE_ADVANTAGES:
    return "advantages";
  case BINDING_ROLE_OLD_LOGPROBS:
    return "old_logprobs";
  case BINDING_ROLE_REF_LOGPROBS:
    return "ref_logprobs";
  case BINDING_ROLE_LOGPROBS:
    return "logprobs";
  case BINDING_ROLE_ENTROPY:
    return "entropy";
  default:
    return "role " + std::to_string(static_cast<int>(role));
  }
}

Status zplan::plan::checkProgramContracts(const Plan &plan) {
  for (int index = 0; index < plan.programs_size(); ++index) {
    const Program &program = plan.programs(index);
    const KindContract *contract = contractOf(program.kind());
    if (!contract)
      return failure(describeProgram(program), " is of ",
                     program.kind() == PROGRAM_KIND_UNSPECIFIED
                         ? std::string("no kind")
                         : programKindName(program.kind()) +
                               ", which this zrun does not know",
                     "; recompile the model with the matching zcc");
    for (int other = 0; other < index; ++other)
      if (plan.programs(other).kind() == program.kind())
        return failure("programs ", inQuotes(plan.programs(other).name()),
                       " and ", inQuotes(program.name()), " are both ",
                       contract->name, " programs");
    ZR_RETURN_IF_ERROR(ProgramChecker(plan, program, *contract).check());
  }
  ZR_RETURN_IF_ERROR(checkGeneration(plan));
  return checkTraining(plan);
}
