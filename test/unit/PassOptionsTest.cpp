//===- PassOptionsTest.cpp - the passes spell choices as zcc does ---------===//
//
// The schedule passes take --policy and --hardware as enum options whose
// values Passes.td lists; zcc spells them from ScheduleChoices.h's tables.
// Every spelling of the tables must name the same value in every pass that
// takes the option, both ways: an enum value set by zcc prints as its
// spelling, and the spelling given to zcc-opt parses to that value.
//
//===----------------------------------------------------------------------===//

#include "compiler/ScheduleChoices.h"
#include "compiler/transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

using namespace zplan;

namespace {

std::string textualPipeline(mlir::Pass &pass) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pass.printAsTextualPipeline(os);
  return text;
}

/// `option=value` parses on a fresh pass and prints back the same.
void expectParsesAs(std::unique_ptr<mlir::Pass> pass, const std::string &option,
                    llvm::StringRef value) {
  std::string text = option + "=" + value.str();
  std::string error;
  mlir::LogicalResult parsed =
      pass->initializeOptions(text, [&](const llvm::Twine &message) {
        error = message.str();
        return mlir::failure();
      });
  ASSERT_TRUE(mlir::succeeded(parsed)) << text << ": " << error;
  EXPECT_NE(textualPipeline(*pass).find(text), std::string::npos)
      << textualPipeline(*pass);
}

/// Makes the pass `create` makes, with the option `field` set.
template <typename Options, typename Value>
std::function<std::unique_ptr<mlir::Pass>(Value)>
withOption(std::unique_ptr<mlir::Pass> (*create)(const Options &),
           Value Options::*field) {
  return [=](Value value) {
    Options options;
    options.*field = value;
    return create(options);
  };
}

/// Each pass with a policy option.
const std::function<std::unique_ptr<mlir::Pass>(SchedulePolicy)>
    kPolicyPasses[] = {
        withOption(createResidency, &ResidencyOptions::policy),
        withOption(createInsertGathers, &InsertGathersOptions::policy),
        withOption(createPrefetch, &PrefetchOptions::policy),
        withOption(createCrossStepPrefetch, &CrossStepPrefetchOptions::policy),
};

/// Each pass with a hardware option.
const std::function<std::unique_ptr<mlir::Pass>(Hardware)> kHardwarePasses[] = {
    withOption(createResidency, &ResidencyOptions::hardware),
    withOption(createPrefetch, &PrefetchOptions::hardware),
    withOption(createCrossStepPrefetch, &CrossStepPrefetchOptions::hardware),
};

/// Every spelling of `spellings` names the same value in each pass
/// `makers` makes: the value set prints as the spelling, and the spelling
/// parsed on a pass made with another value gives that value.
template <typename Spelling, typename Value>
void expectSpelledAsZccSpellsIt(
    llvm::ArrayRef<Spelling> spellings, Value Spelling::*value,
    llvm::ArrayRef<std::function<std::unique_ptr<mlir::Pass>(Value)>> makers,
    const std::string &option) {
  ASSERT_GE(spellings.size(), 2u);
  for (auto [index, spelling] : llvm::enumerate(spellings))
    for (const auto &make : makers) {
      std::unique_ptr<mlir::Pass> pass = make(spelling.*value);
      EXPECT_NE(textualPipeline(*pass).find(option + "=" + spelling.name.str()),
                std::string::npos)
          << textualPipeline(*pass);
      const Spelling &other = spellings[(index + 1) % spellings.size()];
      expectParsesAs(make(other.*value), option, spelling.name);
    }
}

TEST(PassOptions, PolicySpelledAsZccSpellsIt) {
  expectSpelledAsZccSpellsIt(getSchedulePolicySpellings(),
                             &SchedulePolicySpelling::policy,
                             llvm::ArrayRef(kPolicyPasses), "policy");
}

TEST(PassOptions, HardwareSpelledAsZccSpellsIt) {
  expectSpelledAsZccSpellsIt(getHardwareSpellings(),
                             &HardwareSpelling::hardware,
                             llvm::ArrayRef(kHardwarePasses), "hardware");
}

TEST(PassOptions, RejectsAnUnknownSpelling) {
  for (const auto &make : kPolicyPasses) {
    std::unique_ptr<mlir::Pass> pass = make(SchedulePolicy::Default);
    EXPECT_TRUE(mlir::failed(pass->initializeOptions(
        "policy=eager", [](const llvm::Twine &) { return mlir::failure(); })));
  }
}

} // namespace
