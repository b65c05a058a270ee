#!/usr/bin/env python3
"""Write the mixed-precision oracle test/models/goldens/llama-opset17-bf16.npz.

The oracle of test/train/check_mixed_precision.py (zcc --param-dtype bf16
[--reduce-dtype bf16] [--compute-dtype fp32|bf16]): "bf16 parameters over an
fp32 master", written out in torch, with float32 or bf16 matmul operands. Run
from the repository root (CPU only, under a minute):

    bench/.venv-peers/bin/python scripts/mp_goldens.py
    bench/.venv-peers/bin/python scripts/mp_goldens.py --out /tmp/x.npz

Last run with: python 3.11.7, torch 2.5.1 (CPU), transformers 4.46.3, numpy
2.4.6 (the exact versions of a file are in its `versions`). The weights come
from test/models/llama-opset17.onnx (export_fixtures.model_from_onnx), not from
torch's RNG; the bytes written are the same on every run (fixed zip
timestamps, one torch thread, deterministic algorithms).

Contract (zplan's mixed precision with --persistence-threshold 0, so that
every parameter is sharded and every one is rounded):
  master     the float32 parameters (the shards); AdamW's moments and the
             gradient accumulator are float32 too.
  working    per optimizer step, every parameter as the op that reads it sees
             it: master.to(torch.bfloat16).to(torch.float32) (round to
             nearest even, torch's own conversion). Forward and backward run
             in float32 on these values (a second float32 module), giving
             float32 gradients with respect to the working weights.
  reduce f32 (--reduce-dtype f32, the default) the float32 gradients of all
             K*N micro-batches (k, r) summed in float32, in the order k, r.
  reduce bf16 (--reduce-dtype bf16) for each micro-step k: each rank's float32
             gradient rounded to bf16; the N ranks summed in bf16, each
             addition done in float32 and rounded to bf16:
             bsum(a, b) = bf16(f32(a) + f32(b)); N = 2: bsum(r0, r1); N = 4:
             the reference order is the tree bsum(bsum(r0, r1), bsum(r2, r3)),
             written ((0+1)+(2+3)). MPI_Reduce_scatter_block of a commutative
             user operation adds in an order of its own choosing (Open MPI
             4.1.4's tuned recursive halving, at these sizes, gives
             ((0+2)+(1+3))), and a bf16 sum is not associative: so the curve
             is also written for each of the 15 orders of 4 ranks (n4_curve:
             below; they differ by up to 5e-4, because where ranks' gradients
             nearly cancel the order flips the sign of the sum, and AdamW
             moves such an entry by ~lr whatever |g| is). Then the float32
             value of the bf16 sum is added into a float32 accumulator
             (k = 0, 1, ...).
  compute    (--compute-dtype bf16, keys bf16c) every Linear layer (q, k, v, o,
             gate, up, down and lm_head; the fixture has no biases) is
             Bf16Linear: forward y = bf16(bf16(x) @ W^T), backward
             g = bf16(dy), dx = bf16(g @ W), dW = bf16(g^T @ bf16(x)), in
             float32 (W is the working weight, bf16 already; bf16 products
             are exact in float32, the sums are float32's, and each result is
             rounded, as autocast's bf16 matmul returns it). Autograd sums
             the dx of Linears that read one x in float32. Each MLP's SiLU
             (evaluated in float64, then float32) and its product with the
             up projection, elementwise ops whose operands are bf16, round
             their results to bf16 and pass gradients through in float32
             (Bf16Result). RMSNorm, rotary, attention (its QK^T and PV too),
             softmax, the loss and AdamW stay float32. The keys without bf16c are --compute-dtype fp32:
             the Linears multiply the working weights in float32.
  then       grad *= 1 / (K*N); torch.optim.AdamW(lr=1e-2, betas=(0.9, 0.999),
             eps=1e-8, weight_decay=0.1, foreach=False) on the float32 master.
  rows       exactly zrun train's (export_fixtures.train_steps): step s reads R =
             B*K*N rows batches.step_offsets(0, s, R, tokens, 16); micro-step
             k of rank r takes rows batches.micro_batch_rows(k, r, N, B); the
             loss of a micro-batch is the mean over its B*15 targets; the
             logged loss of a step is the mean of the K*N micro-batch losses,
             computed before the step's update.

Arrays (strings as numpy unicode scalars: np.load needs no pickle):
  param_names          the fixture's trainable initializers, ONNX file order
  input_ids            int64 [2, 8], goldens/llama-opset17.npz's
  bf16:loss            float64 [], the causal-LM loss (labels = input_ids) of
                       the model whose weights are all bf16-rounded, computed
                       in float64 (the rounded values converted exactly;
                       Llama's float32 islands made float64:
                       export_fixtures.float64_exact)
  bf16:gradidx:<name>  int64, 32 flat indices drawn with numpy
                       default_rng([11, parameter number]) plus the index of
                       the largest |g|, sorted (rl_goldens.store_gradients)
  bf16:gradval:<name>  float32, d bf16:loss / d working weight at those indices
                       (float64 computed: the gradient with respect to the
                       rounded weight, which zplan passes to the f32 master)
  bf16:gradmax:<name>  float64 [], max |g| over the whole tensor
  fp32:gradval:<name>  float32, the unrounded model's gradient (goldens/
                       llama-opset17.npz grad:<name>) at the same indices: a
                       run that does not round lands there (41x the bound
                       away from bf16:gradval at the sampled entries)
  bf16:f32_grad_bound_ratio  how far torch itself in float32 (same rounded
                       weights) is from these gradients, as a ratio to
                       check_gradients.py's bound; bf16:f32_loss_rel likewise
  bf16:vs_fp32_grad_bound_ratio  the largest ratio of |bf16 gradient - the
                       unrounded golden's grad:<name>| to that bound (> 1: a
                       run that does not round fails the test)
  bf16c:loss           float64 [], the loss of the compute-bf16 model (rounded
                       weights, Bf16Linear layers), computed in float32
  bf16c:grad:<name>    float32, its whole gradient with respect to the working
                       weight, computed in float32
  bf16c:linear_names   str [], the parameters whose bf16c gradient is bf16
                       values throughout (one rounded dW: the Linear weights)
  bf16c:f64_loss_rel, bf16c:f64_grad_l2  float64 [], the noise floor: the same
                       oracle in float64 arithmetic (same rounding points;
                       float64_exact) vs the float32 one: |loss| relative, and
                       the largest ||g32 - g64|| / ||g32|| of a tensor
  bf16c:operands_only_loss_rel, bf16c:operands_only_grad_l2  float64 [], how
                       far the variant that rounds the operands but not the
                       results lies: its loss, and the smallest
                       ||g - g32|| / ||g32|| of a tensor
  bf16c:elementwise_unrounded_loss_rel, bf16c:elementwise_unrounded_grad_l2
                       float64 [], the same for the variant that does not
                       round the elementwise results (Bf16Result)
  bf16c:vs_bf16_loss_rel, bf16c:vs_bf16_grad_l2  float64 [], the same for
                       compute fp32 (the bf16: keys' model)
  curve:<name>         float64 [10], the loss logged at each optimizer step
  curve_split:<name>   int64 [3], the B, K, N it was computed with
  curve_param_dtype:<name>, curve_reduce_dtype:<name>,
  curve_compute_dtype:<name>  "f32" or "bf16"
  curve_f64:<name>     float64 [10], a compute-bf16 curve in float64 arithmetic
                       (same rounding points)
  curve_f64_rel:<name> float64 [2], the noise floor of a compute-bf16 curve:
                       max |curve - curve_f64| / |curve_f64| at step 1 and over
                       all steps
  curve_vs_fp32_compute:<name>  float64 [2], the same between a compute-bf16
                       curve and its compute-fp32 counterpart (bf16c: bf16;
                       bf16c_reduce_bf16_n2: bf16_reduce_bf16_n2)
  split_spread_bf16c   float64 [2], the same between curve:bf16c and the
                       compute-bf16 curve of split (1,2,2) (reduce f32)
  curve_hyper          float64 [lr, beta1, beta2, eps, weight_decay, warmup,
                       clip] = [1e-2, 0.9, 0.999, 1e-8, 0.1, 0, 0]
  curve_lr             float64 [10] (constant 1e-2)
    curves:  fp32                    no rounding (plain float32 torch), 4,1,1
             bf16                    bf16 parameters, reduce f32, 4,1,1 (the
                                     same, to float32 noise, for every split:
                                     checked for (2,1,2) and (2,2,1))
             bf16_reduce_bf16_n2     bf16 parameters, reduce bf16, 2,1,2
             bf16_reduce_bf16_n4     bf16 parameters, reduce bf16, 1,1,4 (tree)
             bf16_reduce_bf16_n2_k2  bf16 parameters, reduce bf16, 1,2,2
             bf16c                   bf16 parameters, compute bf16, reduce
                                     f32, 4,1,1 (split (1,2,2): the same at
                                     step 1 to 4e-8, within 6e-5 later)
             bf16c_reduce_bf16_n2    bf16 parameters, compute bf16, reduce
                                     bf16, 2,1,2
  n4_orders            the 15 orders in which 4 ranks' bf16 gradients can be
                       added, as "((0+2)+(1+3))" (commutative, not associative)
  n4_curve:<order>     float64 [10], curve bf16_reduce_bf16_n4 with that order
  n4_reference_order   "((0+1)+(2+3))", the order of curve:bf16_reduce_bf16_n4
  split_spread_bf16    float64 [], the largest relative difference between the
                       bf16 curves of the three splits (float32 noise)
  n4_order_spread      float64 [], the largest relative difference between an
                       n4_curve: and curve:bf16_reduce_bf16_n4
  fp32_vs_bf16_rel     float64 [], max over steps of |bf16 - fp32| / fp32
  train_data, train_data_tokens, train_data_sha256, train_seed, train_steps
                       (10), train_seq_len (16), train_rows_per_step (4),
                       train_offsets int64 [10, 4] (the rows' token offsets)
  versions

Self-checks (the script exits non-zero and writes nothing otherwise): the
corpus is goldens/llama-opset17.npz's (SHA-256, token count); the rebuilt
model gives that golden's loss (1e-9); its curve_hyper:adamw is this
optimizer; this script's loop without rounding gives export_fixtures.
train_steps' 3-step float32 curve exactly, and the fp32 curve's 3 steps are
that golden's (float64) curve:adamw within 1e-5 relative; the bf16 curve is
the same for the splits (4,1,1), (2,1,2), (2,2,1) within 1e-5 relative; the
bf16 curve differs from the fp32 curve, and each reduce-bf16 curve from both,
by more than MIN_VISIBLE (2e-4) relative at some step (measured: bf16 vs fp32
3.9e-4; reduce-bf16 vs bf16 3.6e-4 to 5e-4); the bf16 gradients lie outside
10 x check_gradients.py's bound from the unrounded golden's at the sampled
entries (41x); float64 central differences of the rounded model agree with
autograd (export_fixtures.finite_difference_check, 1e-6).

Compute bf16 (BF16C_* are check_mixed_precision.py's tolerances; the
derivation is there): the float32-vs-float64 spread is at most a tenth of the
loss tolerance and half of the gradient (||.||_2 per tensor) and curve ones
(MIN_SEPARATION 10, MIN_GRAD_SEPARATION 2; measured: loss 1.5e-8, gradients
1.7e-7, curves 2.4e-6 at step 1 and 4.4e-4 at most over 10 steps), and the
variants that do not round the matmuls' results, do not round the
elementwise results, or compute in float32 lie at least those factors
outside on the loss and gradients (loss 3.3e-5, 5.5e-5 and 1.5e-5;
gradients at least 3.9e-3, 2.2e-3 and 4.3e-3). Compute fp32's curves lie
within the curves' float32 noise at step 1 (3e-6): the curves are an
envelope. The split (1,2,2) of curve:bf16c lies within half of the step-1
and curve tolerances (measured 6.4e-8 and 3.2e-4). Every result rounded
means float32 noise flips rounding decisions in every run: the margins
cannot be 10x on both sides.
"""

import argparse
import contextlib
import hashlib
import itertools
import os
import sys

import numpy as np
import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT_DIR = os.path.join(REPO_ROOT, "scripts")
MODELS_DIR = os.path.join(REPO_ROOT, "test", "models")
GOLDEN_DIR = os.path.join(MODELS_DIR, "goldens")
sys.path.insert(0, SCRIPT_DIR)
sys.path.insert(0, os.path.join(REPO_ROOT, "test", "train"))
sys.dont_write_bytecode = True

import export_fixtures as ef  # noqa: E402  (sets HF offline before transformers)
import batches  # noqa: E402

ARCH = "llama"
NAME = "llama-opset17"
DEFAULT_OUT = os.path.join(GOLDEN_DIR, f"{NAME}-bf16.npz")
STEPS = 10
HYPER = (1e-2, 0.9, 0.999, 1e-8, 0.1, 0, 0.0)  # lr, beta1, beta2, eps, wd, warmup, clip
CURVES = [
    # name, (B, K, N), round the parameters, reduce in bf16
    ("fp32", (4, 1, 1), False, False),
    ("bf16", (4, 1, 1), True, False),
    ("bf16_reduce_bf16_n2", (2, 1, 2), True, True),
    ("bf16_reduce_bf16_n4", (1, 1, 4), True, True),
    ("bf16_reduce_bf16_n2_k2", (1, 2, 2), True, True),
]
BF16_OTHER_SPLITS = [(2, 1, 2), (2, 2, 1)]
# --compute-dtype bf16 (bf16 parameters; every Linear layer's operands rounded
# to bf16): name, (B, K, N), reduce in bf16.
COMPUTE_CURVES = [
    ("bf16c", (4, 1, 1), False),
    ("bf16c_reduce_bf16_n2", (2, 1, 2), True),
]
BF16C_OTHER_SPLITS = [(1, 2, 2)]
SPLIT_RTOL = 1e-5
GOLDEN_RTOL = 1e-5  # fp32 curve vs the float64 golden curve:adamw
# The bf16 curves must differ from the ones a wrong implementation follows by
# more than this somewhere: 4x check_mixed_precision.py's reduce-fp32 curve
# tolerance (5e-5), 2x its reduce-bf16 one (1e-4). Rounding the weights moves
# this 10-step curve by 3.9e-4 only (AdamW's normalized steps barely notice a
# 2^-9 change of a weight), so not more.
MIN_VISIBLE = 2e-4
# check_mixed_precision.py's compute-bf16 tolerances (keep them equal; the
# derivation is there): the loss, the gradient bound's relative part, step 1
# of a curve, and steps 2-10. The compute-fp32 results must lie at least
# MIN_SEPARATION times each tolerance away from the compute-bf16 ones, and
# the float32-vs-float64 spread of the oracle at most 1 / MIN_SEPARATION of it.
BF16C_LOSS_RTOL = 1e-6
BF16C_GRAD_L2 = 2.0**-10
BF16C_STEP1_RTOL = 5e-6
BF16C_CURVE_RTOL = 2e-3
MIN_SEPARATION = 10.0
# The gradients' tolerance (a quarter of bf16's epsilon, in ||.||_2 per
# tensor) lies between the oracle's own float32-vs-float64 spread and the
# variants it must tell apart by only this factor on each side: a result
# rounding that falls the other way moves a value by a whole bf16 ulp, which
# is what not rounding does too, only rarer.
MIN_GRAD_SEPARATION = 2.0
GRADIENT_SAMPLES = 32
SEED_GRADIENT_SAMPLES = 11


def bf16_round(t):
    """float32 -> the nearest bf16 (ties to even) -> float32. A float64 `t`
    stays float64, rounded as torch rounds it: through float32."""
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Linear(torch.autograd.Function):
    """A bias-free Linear layer with bf16 operands, float32 accumulation and
    bf16 results (zcc --compute-dtype bf16; torch autocast's bf16 matmul), in
    the arithmetic of its inputs:
        forward   y = bf16(bf16(x) @ W^T)
        backward  g = bf16(dy); dx = bf16(g @ W); dW = bf16(g^T @ bf16(x))
    W is the working weight, bf16-rounded already. Products of bf16 values
    are exact in float32, so only the sums' order is the kernel's."""

    # How an operand is rounded.
    rounding = staticmethod(bf16_round)
    # How a result is rounded (identity: the operands-only variant, for
    # measuring what the results' rounding changes).
    result_rounding = staticmethod(bf16_round)

    @staticmethod
    def forward(ctx, x, weight):
        rounded = Bf16Linear.rounding(x)
        ctx.save_for_backward(rounded, weight)
        return Bf16Linear.result_rounding(torch.nn.functional.linear(rounded, weight))

    @staticmethod
    def backward(ctx, dy):
        rounded, weight = ctx.saved_tensors
        g = Bf16Linear.rounding(dy)
        dw = g.reshape(-1, g.shape[-1]).t() @ rounded.reshape(-1, rounded.shape[-1])
        return (Bf16Linear.result_rounding(g @ weight),
                Bf16Linear.result_rounding(dw))


class Bf16Result(torch.autograd.Function):
    """An elementwise op of bf16 operands, as autocast runs it: computed in
    float32 and its result rounded to bf16 once (zcc --compute-dtype bf16's
    elementwise rule). Forward y = bf16(y); backward passes dy through as it
    is: zplan's backward of such an op computes in float32 from the bf16
    values the forward stored (the rounded result is what the product's
    gradient reads, autograd's own use of this Function's output)."""

    # How the result is rounded (identity: the variant that does not round
    # elementwise results, for measuring what that rounding changes).
    rounding = staticmethod(bf16_round)

    @staticmethod
    def forward(ctx, y):
        return Bf16Result.rounding(y)

    @staticmethod
    def backward(ctx, dy):
        return dy


@contextlib.contextmanager
def unrounded(function, attribute):
    """`function.attribute`, one of the roundings above, is the identity for
    the block: the variants whose distance the golden records."""
    saved = function.__dict__[attribute]
    setattr(function, attribute, staticmethod(lambda t: t))
    try:
        yield
    finally:
        setattr(function, attribute, saved)


def bf16_mlp(mlp):
    """LlamaMLP's forward, down(act(gate(x)) * up(x)), with the two
    elementwise ops whose operands are both bf16 (the gate projection's
    result, then the activation's and the up projection's) rounded as
    Bf16Result. Every other elementwise op of the fixture has an f32 operand
    (the residual, the rotary tables) or only moves elements."""
    def forward(x):
        gate = mlp.gate_proj(x)
        # The activation correctly rounded (computed in float64), as zplan's
        # (and a libm's) is to within a float32 ulp: torch's float32 SiLU is
        # a few ulps off, and where that straddles a bf16 rounding boundary
        # it would be the oracle's own noise.
        act = Bf16Result.apply(mlp.act_fn(gate.double()).float().to(gate.dtype))
        return mlp.down_proj(Bf16Result.apply(act * mlp.up_proj(x)))
    return forward


def multiply_in_bf16(model):
    """Makes every nn.Linear of `model` a Bf16Linear (the fixture has no
    biases), and every MLP's activation and gate product bf16 (bf16_mlp);
    attention's own products, the norms and the loss stay as they are.
    Returns `model`."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            if module.bias is not None:
                raise SystemExit("multiply_in_bf16: a Linear layer with a bias")
            module.forward = lambda x, weight=module.weight: Bf16Linear.apply(x, weight)
        if type(module).__name__ == "LlamaMLP":
            module.forward = bf16_mlp(module)
    return model


@contextlib.contextmanager
def arithmetic(dtype):
    """Training in `dtype`: float64 makes Llama's float32 islands (RMSNorm,
    softmax) float64 too, and tensors made without a dtype float64."""
    if dtype == torch.float64:
        with ef.float64_exact(), ef.default_dtype(dtype):
            yield
    else:
        yield


def bf16_sum(a, b):
    """bf16 + bf16 as zplan's reduction does it: in float32, rounded to bf16."""
    return (a.to(torch.float32) + b.to(torch.float32)).to(torch.bfloat16)


def bf16_trees(leaves):
    """Every way to sum `leaves` with a commutative, non-associative
    addition: full binary trees, children unordered (15 for 4 ranks)."""
    leaves = tuple(leaves)
    if len(leaves) == 1:
        return [leaves[0]]
    first, rest = leaves[0], leaves[1:]
    out = []
    for mask in range(1 << len(rest)):
        left = (first,) + tuple(x for i, x in enumerate(rest) if mask >> i & 1)
        right = tuple(x for i, x in enumerate(rest) if not mask >> i & 1)
        if right:
            out += [(a, b) for a in bf16_trees(left) for b in bf16_trees(right)]
    return out


def tree_name(tree):
    return str(tree) if isinstance(tree, int) else \
        f"({tree_name(tree[0])}+{tree_name(tree[1])})"


TREE_N2 = (0, 1)
TREE_N4 = ((0, 1), (2, 3))  # the reference order of curve:bf16_reduce_bf16_n4


def reduce_bf16(grads, tree):
    """The bf16 sum over ranks of the float32 gradients `grads` (rank order)
    in the order `tree` (nested pairs of rank numbers), returned as float32."""
    parts = [g.to(torch.bfloat16) for g in grads]

    def total(node):
        return parts[node] if isinstance(node, int) else bf16_sum(total(node[0]),
                                                                   total(node[1]))
    return total(tree if len(parts) > 1 else 0).to(grads[0].dtype)


def train_mp(path, tokens, split, round_params, bf16_reduce, steps=STEPS, tree=None,
             compute_bf16=False, dtype=torch.float32):
    """Per-step logged losses and row offsets (see the docstring's contract);
    `dtype` is the arithmetic's (float64: the noise floor of float32's)."""
    with arithmetic(dtype):
        return train_loop(path, tokens, split, round_params, bf16_reduce, steps, tree,
                          compute_bf16, dtype)


def train_loop(path, tokens, split, round_params, bf16_reduce, steps, tree,
               compute_bf16, dtype):
    batch, k_steps, world = split
    master, names = ef.model_from_onnx(ARCH, path, dtype)
    master.train()  # every dropout probability is 0: same as eval
    mparams = dict(master.named_parameters())
    if round_params:
        working, _ = ef.model_from_onnx(ARCH, path, dtype)
        working.train()
    else:
        working = master
    if compute_bf16:
        if not round_params:
            raise SystemExit("train_mp: compute bf16 without bf16 parameters")
        multiply_in_bf16(working)
    wparams = dict(working.named_parameters())
    lr, beta1, beta2, eps, weight_decay, _, _ = HYPER
    optimizer = torch.optim.AdamW(list(mparams.values()), lr=lr, betas=(beta1, beta2),
                                  eps=eps, weight_decay=weight_decay, foreach=False)
    if tree is None:
        tree = {1: 0, 2: TREE_N2, 4: TREE_N4}.get(world)
    losses, offsets = [], []
    for step in range(steps):
        rows = batches.step_offsets(ef.TRAIN_SEED, step, batch * k_steps * world,
                                    len(tokens), ef.TRAIN_SEQ_LEN)
        if round_params:
            with torch.no_grad():
                for n in names:
                    wparams[n].copy_(bf16_round(mparams[n]))
        accumulated = {n: None for n in names}
        total = 0.0
        for micro in range(k_steps):
            per_rank = []
            for rank in range(world):
                picked = [rows[q] for q in batches.micro_batch_rows(micro, rank, world, batch)]
                x = torch.from_numpy(np.stack(
                    [tokens[o:o + ef.TRAIN_SEQ_LEN] for o in picked]).astype(np.int64))
                working.zero_grad(set_to_none=True)
                loss = ef.causal_lm_loss(working(x), x)
                loss.backward()
                total += float(loss.item())
                per_rank.append({n: wparams[n].grad.detach().clone() for n in names})
            with torch.no_grad():
                for n in names:
                    if bf16_reduce:
                        parts = [reduce_bf16([g[n] for g in per_rank], tree)]
                    else:
                        parts = [g[n] for g in per_rank]
                    for part in parts:
                        accumulated[n] = (part.clone() if accumulated[n] is None
                                          else accumulated[n] + part)
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for n in names:
                mparams[n].grad = accumulated[n].mul_(1.0 / (k_steps * world))
        optimizer.step()
        losses.append(total / (k_steps * world))
        offsets.append(rows)
    return np.array(losses), np.array(offsets, dtype=np.int64)


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))))


def store_gradients(arrays, names, grads, unrounded):
    """rl_goldens.store_gradients' sampled form: 32 seeded indices plus the
    largest |g|, their values, and max |g|; and the unrounded golden's
    gradient at the same indices. Returns the largest ratio, over the sampled
    entries, of |bf16 - unrounded| to check_gradients.py's bound."""
    largest = max(float(np.abs(grads[k]).max()) for k in names)
    worst = 0.0
    for number, k in enumerate(names):
        flat = np.asarray(grads[k]).reshape(-1)
        rng = np.random.default_rng([SEED_GRADIENT_SAMPLES, number])
        drawn = rng.choice(flat.size, size=min(GRADIENT_SAMPLES, flat.size), replace=False)
        index = np.unique(np.append(drawn, int(np.argmax(np.abs(flat)))))
        arrays[f"bf16:gradidx:{k}"] = index.astype(np.int64)
        arrays[f"bf16:gradval:{k}"] = flat[index].astype(np.float32)
        arrays[f"bf16:gradmax:{k}"] = np.float64(np.abs(flat).max())
        other = np.asarray(unrounded[k]).reshape(-1)[index]
        arrays[f"fp32:gradval:{k}"] = other.astype(np.float32)
        bound = 1e-4 * float(np.abs(flat).max()) + 1e-6 * largest
        worst = max(worst, float(np.abs(flat[index] - other).max()) / bound)
    return worst


def rounded_model(path, dtype):
    """The fixture with every parameter rounded to bf16, then converted
    (exactly) to `dtype`."""
    model, names = ef.model_from_onnx(ARCH, path, torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(bf16_round(p))
    return model.to(dtype).eval(), names


def rel_l2(a, b):
    """||a - b|| / ||b||, in float64."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))




def is_bf16_valued(array):
    """Whether every float32 element is a bf16 value (its low 16 bits 0)."""
    return bool(np.all((np.asarray(array, dtype=np.float32).view(np.uint32) & 0xFFFF) == 0))


def compute_bf16_gradients(path, ids, names, arrays):
    """The compute-bf16 loss and gradients of the golden input (bf16c:
    keys): the float32 oracle stored whole, its float64 twin's distance
    recorded, and how far the operands-only variant (results not rounded:
    zplan before it rounded them) and compute fp32 lie, per tensor as
    ||g - g_bf16c|| / ||g_bf16c||."""
    model32, _ = rounded_model(path, torch.float32)
    loss32, grads32 = ef.loss_and_gradients(multiply_in_bf16(model32), ids)
    with ef.float64_exact():
        model64, _ = rounded_model(path, torch.float64)
        loss64, grads64 = ef.loss_and_gradients(multiply_in_bf16(model64), ids)
    with unrounded(Bf16Linear, "result_rounding"):
        operands, _ = rounded_model(path, torch.float32)
        loss_ops, grads_ops = ef.loss_and_gradients(multiply_in_bf16(operands), ids)
    with unrounded(Bf16Result, "rounding"):
        results, _ = rounded_model(path, torch.float32)
        loss_ew, grads_ew = ef.loss_and_gradients(multiply_in_bf16(results), ids)
    fp32, _ = rounded_model(path, torch.float32)
    loss_fp32, grads_fp32 = ef.loss_and_gradients(fp32, ids)
    for k in names:
        arrays["bf16c:grad:" + k] = np.asarray(grads32[k], dtype=np.float32)
    # The Linear weights: their gradient is one rounded product (dW).
    linear = [k for k in names if is_bf16_valued(grads32[k])]
    f64_loss = abs(loss32 - loss64) / abs(loss64)
    f64_grad = max(rel_l2(grads64[k], grads32[k]) for k in names)
    ops_loss = abs(loss_ops - loss32) / abs(loss32)
    ops_grad = min(rel_l2(grads_ops[k], grads32[k]) for k in names)
    ew_loss = abs(loss_ew - loss32) / abs(loss32)
    ew_grad = min(rel_l2(grads_ew[k], grads32[k]) for k in names)
    fp32_loss = abs(loss_fp32 - loss32) / abs(loss32)
    fp32_grad = min(rel_l2(grads_fp32[k], grads32[k]) for k in names)
    print(f"  compute bf16: loss {loss32:.9f}; float32 vs float64: loss {f64_loss:.2e}, "
          f"gradients {f64_grad:.2e} (largest ||g32 - g64|| / ||g32|| of a tensor); "
          f"{len(linear)} of {len(names)} gradients are bf16 values (the Linear weights')")
    print(f"  matmul results not rounded: loss {ops_loss:.2e}, gradients {ops_grad:.2e} at "
          f"least; elementwise results not rounded: loss {ew_loss:.2e}, gradients "
          f"{ew_grad:.2e} at least; compute fp32: loss {fp32_loss:.2e}, gradients "
          f"{fp32_grad:.2e} at least")
    if not (f64_loss * MIN_SEPARATION <= BF16C_LOSS_RTOL
            and f64_grad * MIN_GRAD_SEPARATION <= BF16C_GRAD_L2):
        raise SystemExit(f"compute bf16: float32 vs float64 (loss {f64_loss:.2e}, gradients "
                         f"{f64_grad:.2e}) is not {MIN_SEPARATION}x / {MIN_GRAD_SEPARATION}x "
                         f"below the tolerances ({BF16C_LOSS_RTOL}, {BF16C_GRAD_L2})")
    for what, loss_apart, grad_apart in (("matmul results not rounded", ops_loss, ops_grad),
                                         ("elementwise results not rounded", ew_loss,
                                          ew_grad),
                                         ("compute fp32", fp32_loss, fp32_grad)):
        if not (loss_apart >= MIN_SEPARATION * BF16C_LOSS_RTOL
                and grad_apart >= MIN_GRAD_SEPARATION * BF16C_GRAD_L2):
            raise SystemExit(f"compute bf16 vs {what}: loss {loss_apart:.2e}, gradients "
                             f"{grad_apart:.2e}: not {MIN_SEPARATION}x / {MIN_GRAD_SEPARATION}x "
                             f"the tolerances apart")
    arrays.update({
        "bf16c:loss": np.float64(loss32),
        "bf16c:linear_names": np.array(linear),
        "bf16c:f64_loss_rel": np.float64(f64_loss),
        "bf16c:f64_grad_l2": np.float64(f64_grad),
        "bf16c:operands_only_loss_rel": np.float64(ops_loss),
        "bf16c:operands_only_grad_l2": np.float64(ops_grad),
        "bf16c:elementwise_unrounded_loss_rel": np.float64(ew_loss),
        "bf16c:elementwise_unrounded_grad_l2": np.float64(ew_grad),
        "bf16c:vs_bf16_loss_rel": np.float64(fp32_loss),
        "bf16c:vs_bf16_grad_l2": np.float64(fp32_grad),
    })


def step1_and_max(a, b):
    """[relative difference at step 1, the largest over the steps]."""
    error = np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))
    return np.array([error[0], error.max()], dtype=np.float64)


def compute_bf16_curves(path, tokens, offsets, curves, arrays):
    """The compute-bf16 curves (COMPUTE_CURVES), their float64 twins, the
    split (1,2,2) of curve:bf16c, and the distances the check relies on."""
    counterpart = {"bf16c": "bf16", "bf16c_reduce_bf16_n2": "bf16_reduce_bf16_n2"}
    for cname, split, bf16_reduce in COMPUTE_CURVES:
        losses, offs = train_mp(path, tokens, split, True, bf16_reduce, compute_bf16=True)
        twin, _ = train_mp(path, tokens, split, True, bf16_reduce, compute_bf16=True,
                           dtype=torch.float64)
        if not np.array_equal(offs, offsets):
            raise SystemExit(f"{cname}: row offsets differ between splits")
        curves[cname] = losses
        floor = step1_and_max(losses, twin)
        apart = step1_and_max(losses, curves[counterpart[cname]])
        print(f"  {cname:24s} B,K,N={','.join(map(str, split))}  "
              f"{' '.join(f'{v:.7f}' for v in losses)}")
        print(f"    vs float64: step 1 {floor[0]:.1e}, at most {floor[1]:.1e}; vs compute fp32 "
              f"{counterpart[cname]}: step 1 {apart[0]:.1e}, at most {apart[1]:.1e}")
        # Every micro-batch's products are rounded: a curve's float32 noise
        # is its rounding decisions', the same kind as the difference it
        # must show, so the margins are MIN_GRAD_SEPARATION's.
        if not (floor[0] * MIN_GRAD_SEPARATION <= BF16C_STEP1_RTOL
                and floor[1] * MIN_GRAD_SEPARATION <= BF16C_CURVE_RTOL):
            raise SystemExit(f"{cname}: float32 vs float64 {floor.tolist()} is not "
                             f"{MIN_GRAD_SEPARATION}x below the tolerances")
        # Compute fp32's step 1 lies within this float32 noise (3e-6 against
        # 2.4e-6): the curves are an envelope; the loss and gradients of
        # compute_bf16_gradients tell compute fp32 apart.
        arrays["curve_f64:" + cname] = twin
        arrays["curve_f64_rel:" + cname] = floor
        arrays["curve_vs_fp32_compute:" + cname] = apart
    spread = np.zeros(2)
    for split in BF16C_OTHER_SPLITS:
        other, offs = train_mp(path, tokens, split, True, False, compute_bf16=True)
        difference = step1_and_max(other, curves["bf16c"])
        spread = np.maximum(spread, difference)
        print(f"  bf16c B,K,N={','.join(map(str, split))} vs 4,1,1: step 1 {difference[0]:.1e}, "
              f"at most {difference[1]:.1e}")
        if not (np.array_equal(offs, offsets)
                and difference[0] * MIN_GRAD_SEPARATION <= BF16C_STEP1_RTOL
                and difference[1] * MIN_GRAD_SEPARATION <= BF16C_CURVE_RTOL):
            raise SystemExit(f"bf16c split {split}: {other.tolist()} vs "
                             f"{curves['bf16c'].tolist()} ({difference.tolist()})")
    arrays["split_spread_bf16c"] = spread


def produce(out, versions):
    path = os.path.join(MODELS_DIR, f"{NAME}.onnx")
    committed = np.load(os.path.join(GOLDEN_DIR, f"{NAME}.npz"), allow_pickle=False)
    tokens = np.fromfile(ef.CORPUS, dtype="<u2")
    digest = hashlib.sha256(open(ef.CORPUS, "rb").read()).hexdigest()
    if "train_data_sha256" in committed and (
            digest != str(committed["train_data_sha256"])
            or len(tokens) != int(committed["train_data_tokens"])):
        raise SystemExit(f"{ef.CORPUS}: sha256 {digest[:16]}, {len(tokens)} tokens; "
                         f"goldens/{NAME}.npz was made from another corpus")
    hyper = committed["curve_hyper:adamw"]
    if str(committed["curve_optimizer:adamw"]) != "adamw" or not np.array_equal(
            hyper, np.array(HYPER, dtype=np.float64)):
        raise SystemExit(f"goldens/{NAME}.npz curve_hyper:adamw {hyper.tolist()} is not "
                         f"{list(HYPER)}")
    ids = committed["input_ids"]
    ids_t = torch.from_numpy(ids)

    # ---- gradients of the single micro-batch golden input, rounded weights.
    with ef.float64_exact():
        exact, names = ef.model_from_onnx(ARCH, path, torch.float64)
        with torch.no_grad(), ef.default_dtype(torch.float64):
            unrounded = float(ef.causal_lm_loss(exact(ids_t), ids_t))
        if not abs(unrounded - float(committed["loss"])) <= 1e-9 * abs(unrounded):
            raise SystemExit(f"rebuilt model's loss {unrounded} != committed {committed['loss']}")
        if list(committed["param_names"]) != names:
            raise SystemExit(f"parameter names differ from goldens/{NAME}.npz")
        model64, _ = rounded_model(path, torch.float64)
        loss64, grads64 = ef.loss_and_gradients(model64, ids)
        fd_worst = ef.finite_difference_check(model64, ids, grads64, names)
    model32, _ = rounded_model(path, torch.float32)
    loss32, grads32 = ef.loss_and_gradients(model32, ids)
    f32_ratio = ef.gradient_bound_ratio(grads32, grads64)
    f32_loss = abs(loss32 - loss64) / abs(loss64)
    unrounded_grads = {k: committed["grad:" + k] for k in names}
    vs_fp32 = ef.gradient_bound_ratio(grads64, unrounded_grads)
    loss_shift = abs(loss64 - unrounded) / abs(unrounded)
    print(f"  bf16 weights: loss {loss64:.12f} (unrounded {unrounded:.12f}, {loss_shift:.2e} "
          f"relative); float32 torch vs float64: loss {f32_loss:.2e}, gradients at "
          f"{f32_ratio:.2e} of the bound; finite differences {fd_worst:.1e}")
    print(f"  bf16 gradients vs the unrounded golden: {vs_fp32:.2f} x check_gradients.py's bound")
    if not vs_fp32 > 1.0:
        raise SystemExit("the bf16 gradients are within check_gradients.py's bound of the "
                         "unrounded ones: the test could not tell them apart")

    arrays = {"param_names": np.array(names), "input_ids": ids,
              "bf16:loss": np.float64(loss64)}
    sampled_vs_fp32 = store_gradients(arrays, names, grads64, unrounded_grads)
    print(f"  at the sampled entries: {sampled_vs_fp32:.2f} x the bound")
    if not sampled_vs_fp32 > 10.0:
        raise SystemExit("at the sampled entries the bf16 gradients are within 10 x "
                         "check_gradients.py's bound of the unrounded ones")
    arrays.update({"bf16:f32_grad_bound_ratio": np.float64(f32_ratio),
                   "bf16:f32_loss_rel": np.float64(f32_loss),
                   "bf16:vs_fp32_grad_bound_ratio": np.float64(vs_fp32),
                   "bf16:sampled_vs_fp32_grad_bound_ratio": np.float64(sampled_vs_fp32)})
    compute_bf16_gradients(path, ids, names, arrays)

    # ---- training curves.
    torch_curve = ef.train_curve(ARCH, path, tokens, ("adamw", "adamw") + HYPER,
                                 ef.TRAIN_REFERENCE_SPLIT, torch.float32)[0]
    curves, offsets = {}, None
    for cname, split, round_params, bf16_reduce in CURVES:
        losses, offs = train_mp(path, tokens, split, round_params, bf16_reduce)
        if offsets is None:
            offsets = offs
        # Every split reads the same R rows a step (in a different grouping).
        if not np.array_equal(offs, offsets):
            raise SystemExit(f"{cname}: row offsets differ between splits")
        curves[cname] = losses
        print(f"  {cname:24s} B,K,N={','.join(map(str, split))}  "
              f"{' '.join(f'{v:.7f}' for v in losses)}")
    fp32 = curves["fp32"]
    if not np.array_equal(fp32[:3], torch_curve):
        raise SystemExit(f"this loop without rounding gives {fp32[:3].tolist()}, "
                         f"export_fixtures.train_steps {torch_curve.tolist()}")
    golden_rel = rel(fp32[:3], committed["curve:adamw"])
    print(f"  fp32 steps 1-3 vs goldens/{NAME}.npz curve:adamw (float64): {golden_rel:.2e}")
    if not golden_rel <= GOLDEN_RTOL:
        raise SystemExit(f"fp32 curve {fp32[:3].tolist()} vs curve:adamw "
                         f"{committed['curve:adamw'].tolist()}: {golden_rel:.3e}")
    spread = 0.0
    for split in BF16_OTHER_SPLITS:
        other, offs = train_mp(path, tokens, split, True, False)
        difference = rel(other, curves["bf16"])
        spread = max(spread, difference)
        print(f"  bf16 B,K,N={','.join(map(str, split))} vs 4,1,1: {difference:.2e}")
        if not (np.array_equal(offs, offsets) and difference <= SPLIT_RTOL):
            raise SystemExit(f"bf16 split {split}: {other.tolist()} vs "
                             f"{curves['bf16'].tolist()} ({difference:.3e})")
    # MPI's reduce-scatter of a commutative operation may add the 4 ranks in
    # any order: the N = 4 curve of each of the 15 orders.
    orders = bf16_trees(range(4))
    order_curves = {}
    for tree in orders:
        order_curves[tree_name(tree)] = (curves["bf16_reduce_bf16_n4"] if tree == TREE_N4
                                         else train_mp(path, tokens, (1, 1, 4), True, True,
                                                       tree=tree)[0])
    order_spread = max(rel(c, curves["bf16_reduce_bf16_n4"]) for c in order_curves.values())
    print(f"  bf16 reduce bf16 N=4: {len(orders)} addition orders, the largest difference "
          f"to {tree_name(TREE_N4)}'s curve {order_spread:.2e}")
    visible = rel(curves["bf16"], fp32)
    print(f"  bf16 vs fp32 curve: {visible:.2e} relative at most"
          + "".join(f"; {c} vs bf16 {rel(curves[c], curves['bf16']):.2e}"
                    for c, _, _, r in CURVES if r))
    if not visible > MIN_VISIBLE:
        raise SystemExit(f"the bf16 curve is within {MIN_VISIBLE} of the fp32 one")
    for c, _, _, bf16_reduce in CURVES:
        if bf16_reduce and not min(rel(curves[c], fp32), rel(curves[c], curves["bf16"])) \
                > MIN_VISIBLE:
            raise SystemExit(f"{c} is within {MIN_VISIBLE} of curve fp32 or bf16")

    compute_bf16_curves(path, tokens, offsets, curves, arrays)

    arrays["curve_hyper"] = np.array(HYPER, dtype=np.float64)
    arrays["curve_lr"] = np.full(STEPS, HYPER[0], dtype=np.float64)
    for order, losses in order_curves.items():
        arrays["n4_curve:" + order] = losses
    for cname, split, round_params, bf16_reduce in CURVES:
        arrays["curve:" + cname] = curves[cname]
        arrays["curve_split:" + cname] = np.array(split, dtype=np.int64)
        arrays["curve_param_dtype:" + cname] = np.array("bf16" if round_params else "f32")
        arrays["curve_reduce_dtype:" + cname] = np.array("bf16" if bf16_reduce else "f32")
        arrays["curve_compute_dtype:" + cname] = np.array("f32")
    for cname, split, bf16_reduce in COMPUTE_CURVES:
        arrays["curve:" + cname] = curves[cname]
        arrays["curve_split:" + cname] = np.array(split, dtype=np.int64)
        arrays["curve_param_dtype:" + cname] = np.array("bf16")
        arrays["curve_reduce_dtype:" + cname] = np.array("bf16" if bf16_reduce else "f32")
        arrays["curve_compute_dtype:" + cname] = np.array("bf16")
    arrays.update({
        "split_spread_bf16": np.float64(spread),
        "n4_order_spread": np.float64(order_spread),
        "n4_orders": np.array(list(order_curves)),
        "n4_reference_order": np.array(tree_name(TREE_N4)),
        "fp32_vs_bf16_rel": np.float64(visible),
        "train_data": np.array(os.path.relpath(ef.CORPUS, REPO_ROOT)),
        "train_data_tokens": np.int64(len(tokens)),
        "train_data_sha256": np.array(digest),
        "train_seed": np.int64(ef.TRAIN_SEED),
        "train_steps": np.int64(STEPS),
        "train_seq_len": np.int64(ef.TRAIN_SEQ_LEN),
        "train_rows_per_step": np.int64(4),
        "train_offsets": offsets,
        "versions": np.array(versions),
    })
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    ef.save_npz_deterministic(out, arrays)
    shown = os.path.relpath(out, REPO_ROOT)
    shown = out if shown.startswith("..") else shown
    print(f"  wrote {shown}: {os.path.getsize(out)} bytes, "
          f"sha256 {hashlib.sha256(open(out, 'rb').read()).hexdigest()[:16]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = ap.parse_args()
    versions = ef.golden_versions()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    batches.self_test()
    print(f"== {NAME} ({ARCH}), bf16 parameters over a float32 master")
    produce(args.out, versions)


if __name__ == "__main__":
    main()
