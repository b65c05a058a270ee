//===- AttentionGrad.cu - attention_grad: dq, dk, dv ----------------------===//
//
// The CUDA twin of runtime/cpu/AttentionGrad.cpp, flash-style: with
//   P = softmax(mask(scale q k^T)),  dP = dout v^T,
//   dS = P * (dP - delta),  delta = rowsum(dP * P) = rowsum(dout * out),
// it computes dv = P^T dout, dq = scale dS k, dk = scale dS^T q, zeroing dS
// where a select mask replaced the score, without any [S, T] tensor in
// global memory:
//
//  1. the forward kernel in its statistics mode (Attention.cu) writes each
//     query row's softmax maximum, 1 / denominator, and delta = dout . out
//     into the backend's workspace (16 bytes per query row);
//  2. one kernel, instantiated per gradient, recomputes 64 x 64 tiles of P
//     from q, k and those statistics (exactly the forward's probabilities,
//     p = exp(score - max) * (1 / sum), NaN rows included), and of dP and
//     dS where it needs them, and accumulates:
//       dv and dk: one block per (entry, 64 keys, output chunk), walking
//                  the query tiles;
//       dq:        one block per (entry, 64 queries, output chunk), walking
//                  the key tiles.
//
// Every gradient element is owned by exactly one block, so there are no
// atomics on dq, dk, dv and the result is deterministic; the price is that
// the scores (and dP for dq and dk) are recomputed once per gradient. The
// only atomics are delta's, summed in double over the forward's output
// chunks (order-dependent in the last bits of a double only).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/AttentionTiles.cuh"

namespace zplan::cuda {

using namespace zplan::cuda::attention;

namespace {

/// Which gradient a launch computes.
enum class Gradient { Query, Key, Value };

/// Blocks are (entry, tile of the gradient's rows, output chunk):
/// tileBlock(). `grad` is [entries, rows, width]: dq [.., S, D], dk [.., T, D],
/// dv [.., T, Dv].
template <int COLS, Gradient GRADIENT>
__global__ __launch_bounds__(kThreads, 2) void attentionBackward(
    AttentionParams p, const float *__restrict__ dout, AttentionStats stats,
    float *__restrict__ grad, int64_t rowTiles, int64_t chunks) {
  __shared__ DotStage dot;
  __shared__ AccumulateStage<COLS> accumulate;
  constexpr bool kByQuery = GRADIENT == Gradient::Query;
  TileBlock tile = tileBlock<COLS>(p, rowTiles, chunks);
  int64_t entry = tile.entry, fixed0 = tile.row0, c0 = tile.column0;
  int64_t rows = kByQuery ? p.s : p.t;
  int64_t width = GRADIENT == Gradient::Value ? p.dv : p.d;
  TileInput q = tile.q, k = tile.k, v = tile.v;
  const float *g = dout + entry * p.s * p.dv;
  int64_t maskBase = tile.maskBase;
  int ty = tileRow(), tx = tileColumn();

  float acc[kPerThread][COLS];
  for (int i = 0; i < kPerThread; ++i)
    for (int c = 0; c < COLS; ++c)
      acc[i][c] = 0.0f;

  int64_t walked = kByQuery ? p.t : p.s;
  for (int64_t other0 = 0; other0 < walked; other0 += kTile) {
    int64_t q0 = kByQuery ? fixed0 : other0;
    int64_t k0 = kByQuery ? other0 : fixed0;
    // weights[i][j]: query row q0 + ty + 16 i, key column k0 + tx + 16 j.
    float weights[kPerThread][kPerThread];
    bool kept[kPerThread][kPerThread];
    dotTile(q, p.s, q0, k, p.t, k0, p.d, dot, weights);
    maskScores(p, maskBase, q0, k0, weights, kept);
    // P from the forward's statistics; 0 outside the tile's S x T.
    for (int i = 0; i < kPerThread; ++i) {
      int64_t row = q0 + ty + 16 * i;
      bool rowInside = row < p.s;
      int64_t index = entry * p.s + row;
      float maximum = rowInside ? stats.rowMax[index] : 0.0f;
      float inverse = rowInside ? stats.rowInverse[index] : 0.0f;
      for (int j = 0; j < kPerThread; ++j)
        weights[i][j] = rowInside && k0 + tx + 16 * j < p.t
                            ? expf(weights[i][j] - maximum) * inverse
                            : 0.0f;
    }
    if constexpr (GRADIENT != Gradient::Value) {
      // dS = P * (dP - delta), in double as the CPU forms it.
      float dp[kPerThread][kPerThread];
      dotTile(g, p.s, q0, v, p.t, k0, p.dv, dot, dp);
      for (int i = 0; i < kPerThread; ++i) {
        int64_t row = q0 + ty + 16 * i;
        double rowDelta = row < p.s ? stats.delta[entry * p.s + row] : 0.0;
        for (int j = 0; j < kPerThread; ++j)
          weights[i][j] =
              kept[i][j]
                  ? static_cast<float>(static_cast<double>(weights[i][j]) *
                                       (dp[i][j] - rowDelta))
                  : 0.0f;
      }
    }
    for (int i = 0; i < kPerThread; ++i)
      for (int j = 0; j < kPerThread; ++j)
        accumulate.weights[ty + 16 * i][tx + 16 * j] = weights[i][j];
    __syncthreads();
    if constexpr (GRADIENT == Gradient::Query) // dq[q] += dS[q, k] k[k]
      accumulateTile<COLS, false>(accumulate, k, p.t, k0, p.d, c0, acc);
    else if constexpr (GRADIENT == Gradient::Key) // dk[k] += dS[q, k] q[q]
      accumulateTile<COLS, true>(accumulate, q, p.s, q0, p.d, c0, acc);
    else // dv[k] += P[q, k] dout[q]
      accumulateTile<COLS, true>(accumulate, g, p.s, q0, p.dv, c0, acc);
  }

  float factor = GRADIENT == Gradient::Value ? 1.0f : p.scale;
  float *target = grad + entry * rows * width;
  for (int i = 0; i < kPerThread; ++i) {
    int64_t row = fixed0 + ty + 16 * i;
    if (row >= rows)
      continue;
    for (int c = 0; c < COLS; ++c) {
      int64_t column = c0 + tx + 16 * c;
      if (column < width)
        target[row * width + column] = acc[i][c] * factor;
    }
  }
}

template <Gradient GRADIENT>
Status launchBackward(const KernelCall &call, const AttentionParams &params,
                      const AttentionStats &stats, float *grad) {
  int64_t rows = GRADIENT == Gradient::Query ? params.s : params.t;
  int64_t width = GRADIENT == Gradient::Value ? params.dv : params.d;
  int64_t rowTiles = (rows + kTile - 1) / kTile;
  int64_t chunks = chunkCount(width);
  const float *dout = call.host.operands[0].as<float>();
  cudaStream_t stream = call.device.stream;
  // No blocks for an empty gradient.
  return launchBlocks(
      call, params.entries * rowTiles * chunks, [&](unsigned grid) {
        if (chunkColumns(width) == 64)
          attentionBackward<4, GRADIENT><<<grid, kThreads, 0, stream>>>(
              params, dout, stats, grad, rowTiles, chunks);
        else
          attentionBackward<8, GRADIENT><<<grid, kThreads, 0, stream>>>(
              params, dout, stats, grad, rowTiles, chunks);
      });
}

} // namespace

Status runAttentionGrad(const KernelCall &call) {
  ops::AttentionShape shape;
  AttentionParams params;
  if (Status status =
          readAttention(call, ops::checkAttentionGrad, 1, shape, params);
      !status.ok())
    return status;
  const std::vector<TensorRef> &results = call.host.results;
  int64_t entries = params.entries;
  // Nothing reaches an empty dimension's partners: their gradients are 0.
  if (shape.s == 0 || shape.t == 0 || entries == 0) {
    for (const TensorRef &result : results)
      if (Status status = zeroFill(call, result); !status.ok())
        return status;
    return Status::success();
  }

  // The row statistics in the workspace: delta (double) first, then the
  // maxima and inverse denominators.
  int64_t queryRows = entries * shape.s;
  int64_t statsBytes = queryRows * int64_t(sizeof(double) + 2 * sizeof(float));
  if (statsBytes > static_cast<int64_t>(call.device.workspaceBytes))
    return call.error("the row statistics of " + std::to_string(queryRows) +
                      " query rows need " + std::to_string(statsBytes) +
                      " bytes of workspace, more than the backend's " +
                      std::to_string(call.device.workspaceBytes));
  AttentionStats stats;
  stats.dout = call.host.operands[0].as<float>();
  stats.delta = static_cast<double *>(call.device.workspace);
  stats.rowMax = reinterpret_cast<float *>(stats.delta + queryRows);
  stats.rowInverse = stats.rowMax + queryRows;
  if (Status status =
          checkCuda(call,
                    cudaMemsetAsync(stats.delta, 0, queryRows * sizeof(double),
                                    call.device.stream),
                    "cudaMemsetAsync");
      !status.ok())
    return status;
  if (Status status = launchAttentionForward(call, params, nullptr, &stats);
      !status.ok())
    return status;
  if (Status status = launchBackward<Gradient::Query>(call, params, stats,
                                                      results[0].as<float>());
      !status.ok())
    return status;
  if (Status status = launchBackward<Gradient::Key>(call, params, stats,
                                                    results[1].as<float>());
      !status.ok())
    return status;
  return launchBackward<Gradient::Value>(call, params, stats,
                                         results[2].as<float>());
}

} // namespace zplan::cuda
