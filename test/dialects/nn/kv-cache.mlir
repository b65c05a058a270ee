// The KV cache ops of generation: a module-level cache, the in-place append
// of new keys at their positions, and attention masked by position. Round
// trip, then every error path of their verifiers.
// RUN: zcc-opt %s --split-input-file | FileCheck %s
// RUN: zcc-opt %s --split-input-file --mlir-print-op-generic | zcc-opt --split-input-file | FileCheck %s

// CHECK: nn.kv_cache @cache.0.key : tensor<2x2x64x16xf32>
nn.kv_cache @cache.0.key : tensor<2x2x64x16xf32>
// CHECK-LABEL: func.func @decode
// CHECK: %[[K:.*]] = nn.cache_append @cache.0.key, %{{.*}}, %{{.*}} : (tensor<2x2x1x16xf32>, tensor<2x1xi64>) -> tensor<2x2x64x16xf32>
// CHECK: nn.cached_attention %{{.*}}, %[[K]], %[[K]], %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<2x2x1x16xf32>, tensor<2x2x64x16xf32>, tensor<2x2x64x16xf32>, tensor<2x1xi64>) -> tensor<2x2x1x16xf32>
func.func @decode(%q: tensor<2x2x1x16xf32>, %new: tensor<2x2x1x16xf32>, %pos: tensor<2x1xi64>) -> tensor<2x2x1x16xf32> {
  %k = nn.cache_append @cache.0.key, %new, %pos : (tensor<2x2x1x16xf32>, tensor<2x1xi64>) -> tensor<2x2x64x16xf32>
  %o = nn.cached_attention %q, %k, %k, %pos {scale = 0.25 : f32} : (tensor<2x2x1x16xf32>, tensor<2x2x64x16xf32>, tensor<2x2x64x16xf32>, tensor<2x1xi64>) -> tensor<2x2x1x16xf32>
  return %o : tensor<2x2x1x16xf32>
}
