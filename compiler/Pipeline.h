//===- Pipeline.h - the pass pipelines zcc runs ---------------------------===//
//
// zcc's stages as pass pipelines, also registered by name so zcc-opt can run
// exactly what zcc runs (`zcc-opt --zplan-import-pipeline`).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PIPELINE_H
#define ZPLAN_COMPILER_PIPELINE_H

#include "mlir/Pass/PassManager.h"

namespace zplan {

/// After import: form the high-level nn ops, fold, and remove duplicates.
void buildImportPipeline(mlir::OpPassManager &pm);

/// Registers the pipelines above by name.
void registerPipelines();

} // namespace zplan

#endif // ZPLAN_COMPILER_PIPELINE_H
