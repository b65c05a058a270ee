#!/usr/bin/env python3
"""Write the RL-loss oracles test/models/goldens/rl-<fixture>.npz (GRPO/DAPO, DPO).

The per-token log-probs, the entropies, the GRPO/DAPO clipped losses and the DPO
sigmoid loss of a fixture model, with their gradients by PyTorch autograd in
float64, following TRL's formulas; then TRL's own loss code is called on the
same per-token tensors and must give the same losses and the same d loss / d
logprobs (1e-10) before anything is written.

Run from the repository root (CPU only, about 15 s; two interpreters: the
goldens need the versions the fixture ONNX files were exported with, the check
needs TRL):

    bench/.venv-peers/bin/python scripts/rl_goldens.py            # rl-llama-opset17.npz
    bench/.venv-peers/bin/python scripts/rl_goldens.py --arch gpt2 # rl-gpt2-opset17.npz
    bench/.venv-rl/bin/python scripts/rl_goldens.py \
        --trl-check test/models/goldens/rl-llama-opset17.npz

The first form re-invokes this script with --trl-python (default
bench/.venv-rl/bin/python) for the TRL check and stops, writing nothing, when
that check fails or cannot run. The last form repeats the check of the per-token
loss arithmetic on a written file (the log-prob alignment check needs the
model's hidden states, which only the first form has).

Last run with: goldens python 3.11.7, torch 2.5.1, transformers 4.46.3, numpy
2.4.6 (torch on CPU); TRL check python 3.11.7, torch 2.15.0, transformers 5.24.0,
trl 1.16.0. The exact versions of a file are in its `versions`.

Contract (zplan's per-token log-probs program and RL losses; B rows, T tokens):
  logprobs[b, 0] = 0; logprobs[b, t] = log_softmax(logits[b, t-1])[input_ids[b, t]]
  entropy[b, 0] = 0;  entropy[b, t] = -sum_v p log p of softmax(logits[b, t-1])
  (Hugging Face's label shift; TRL's fused LM head gives the same, checked.)
  GRPO (TRL GRPOTrainer._compute_loss, importance_sampling_level "token"), A the
  advantages broadcast to [B, T]:
    old = old_logprobs if given else logprobs.detach()
    ratio = exp(logprobs - old); clipped = clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    per_token = -min(ratio * A, clipped * A)
    if beta != 0:
      kl = exp(ref - logprobs) - (ref - logprobs) - 1
      if kl_bias_correction: kl = kl * ratio      (TRL 1.16's default, see below)
      per_token += beta * kl
    "grpo": mean over rows of sum_t(per_token * mask) / max(sum_t mask, 1)
    "dapo": sum over rows and t of per_token * mask / max(sum of mask, 1)
  over the GLOBAL batch: all rows of the file are what N ranks x K micro-steps
  process together in one optimizer step.
  TRL 1.16 multiplies the KL term by the ratio by default
  (GRPOConfig.use_bias_correction_kl = True; grpo_trainer.py, _compute_loss:
  `per_token_kl = per_token_kl * coef_1`). With old = logprobs.detach() the
  ratio is 1 in value but not in gradient: d/dlogprobs gains + beta * kl. The
  configs without a suffix follow TRL's default; each with beta != 0 has an
  "_uncorrected" twin (use_bias_correction_kl=False: the KL term without the
  ratio), whose gradients are checked to lie well outside check_gradients.py's
  bound from the corrected ones (so a golden tells the two forms apart).
  DPO (TRL DPOTrainer._compute_loss, loss_type "sigmoid", label_smoothing 0,
  f_divergence_type "reverse_kl"): per pair pi_c = sum_t logprobs(chosen) * mask_c,
  pi_r likewise, ref_c / ref_r the same sums of the reference's per-token
  log-probs; loss = mean over pairs of
  -logsigmoid(beta * ((pi_c - pi_r) - (ref_c - ref_r))).

Arrays (strings are numpy unicode scalars; np.load needs no pickle):
  param_names          the fixture's trainable initializers, ONNX file order
  input_ids            int64 [8, 8], numpy default_rng(DATA_SEED) in [0, 256)
  completion_mask      float32 [8, 8]: row b has a prompt of PROMPT_LENS[b]
                       (2..4) tokens (0), then its completion (1); rows of
                       EARLY_END end early (trailing 0s, as after an EOS);
                       column 0 is 0
  advantages           float32 [8]: two groups of 4 rewards normalized as TRL
                       does ((r - mean) / (std + 1e-4), std with Bessel's
                       correction), then row ZERO_ADVANTAGE_ROW's set to exactly
                       0, so they no longer sum to 0 (grpo_plain's loss value,
                       -mean(advantages), is then not 0 either)
  advantages_token     float32 [8, 8]: advantages[:, None] + normal(0, 0.5)
  old_logprobs         float32 [8, 8]: logprobs + normal(0, 0.3) at every t >= 1
                       (masked positions too: a loss that leaks them changes);
                       0 at t = 0. Ratios leave [1 - eps, 1 + eps_high] on both
                       sides with clipping active on both (checked)
  ref_logprobs         float32 [8, 8]: logprobs + another normal(0, 0.2), as above
  logprobs, entropy    float64 [8, 8] of the model on input_ids (contract above)
  configs              the GRPO/DAPO config names, in order
  <C>:loss             float64 [] for config C (the losses use the float32
                       arrays above, converted to float64)
  <C>:grad:<name>      float32, d <C>:loss / d parameter for every param_names
                       entry (zeros where the loss does not reach it); a tied
                       weight's is the sum over its uses (GPT-2's wte). Whole
                       tensors for the configs of FULL_GRADIENT_CONFIGS only
                       (the one that exercises every term); for the others,
                       to keep the committed file small:
  <C>:gradidx:<name>   int64, GRADIENT_SAMPLES flat indices drawn with a
                       fixed seed, and the index of the largest |g|, sorted
  <C>:gradval:<name>   float32, the gradient at those indices
  <C>:gradmax:<name>   float64 [], max |g| over the whole tensor (the bound's
                       scale)
  <C>:dlogprobs        float64 [8, 8], d <C>:loss / d logprobs (what TRL's code
                       is compared on)
  <C>:loss_type        "grpo" or "dapo"
  <C>:beta, <C>:epsilon, <C>:epsilon_high   float64 []
  <C>:old              bool: old_logprobs used (else old = logprobs.detach())
  <C>:advantages       "sequence" (advantages) or "token" (advantages_token)
  <C>:kl_bias_correction  bool: the KL term multiplied by the ratio
  dpo_chosen_ids, dpo_rejected_ids    int64 [4, 8]: per pair the same 3-token
                       prompt, different 5-token completions
  dpo_chosen_mask, dpo_rejected_mask  float32 [4, 8]: 0 on the prompt (so
                       column 0), 1 on the completion; one chosen and one
                       rejected row end early
  dpo_chosen_logprobs, dpo_rejected_logprobs  float64 [4, 8], the contract's
                       per-token log-probs of the model
  dpo_ref_chosen_logprobs, dpo_ref_rejected_logprobs  float32 [4, 8]: the
                       policy's + normal(0, 0.2) at t >= 1
  dpo:loss, dpo:grad*:<name>, dpo:beta (0.1), dpo:loss_type ("sigmoid"),
  dpo:dlogprobs_chosen, dpo:dlogprobs_rejected  as for the GRPO configs
  ort_logits_rel       max |onnxruntime - torch float64| logit over input_ids,
                       relative to the largest |logit|
  versions             the versions of both steps
  trl_checked          per config: which TRL code ran on these tensors, how it
                       was scaled, and the largest differences seen

Self-checks (the script exits non-zero and writes nothing otherwise): the model
rebuilt from the ONNX file gives the committed goldens/<fixture>.npz loss
(1e-9) and onnxruntime's logits (1e-4 relative); logprobs and entropy equal a
per-position torch.log_softmax / Categorical.entropy computation (1e-12) and
transformers' own float32 loss with labels = input_ids masked by
completion_mask (1e-6 relative); float64 central differences agree with
autograd at six entries each for grpo_clip_kl, dapo_clip_kl_token and dpo
(1e-6 of the tensor's max |g|); grpo_plain and dapo_plain with zero advantages
give exactly zero gradients; clipping is active on both sides; TRL's
GRPOTrainer._compute_loss and DPOTrainer._compute_loss give every loss and
d loss / d logprobs within 1e-10; TRL's fused LM head (add_fused_lm_head, which
both trainers use for per-token log-probs) on the model's last hidden states
gives logprobs and entropy within 1e-5 (its accumulators are float32) and, with
DPO's label masking, the same masked sums.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types
import warnings

import numpy as np
import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT_DIR = os.path.join(REPO_ROOT, "scripts")
MODELS_DIR = os.path.join(REPO_ROOT, "test", "models")
GOLDEN_DIR = os.path.join(MODELS_DIR, "goldens")
DEFAULT_TRL_PYTHON = os.path.join(REPO_ROOT, "bench", ".venv-rl", "bin", "python")

FIXTURES = {"llama": "llama-opset17", "gpt2": "gpt2-opset17"}

DATA_SEED = 23
ROWS, TOKENS = 8, 8
PROMPT_LENS = (2, 3, 4, 2, 3, 4, 3, 2)
EARLY_END = {2: 2, 6: 1}  # row -> trailing masked tokens
GROUP_REWARDS = ((0.0, 0.9, 0.4, 0.5), (1.0, 0.0, 0.2, 1.0))  # rows 0-3, 4-7
ZERO_ADVANTAGE_ROW = 3  # its normalized advantage (0.135) replaced by exactly 0
OLD_NOISE, REF_NOISE, TOKEN_ADVANTAGE_NOISE = 0.3, 0.2, 0.5

DPO_PAIRS, DPO_PROMPT = 4, 3
DPO_EARLY_END = {"chosen": {1: 1}, "rejected": {2: 2}}
DPO_BETA = 0.1

# name, loss_type, beta, epsilon, epsilon_high, old given, advantages, KL bias correction
GRPO_CONFIGS = [
    ("grpo_plain", "grpo", 0.0, 0.2, 0.2, False, "sequence", True),
    ("grpo_clip_kl", "grpo", 0.04, 0.2, 0.28, True, "sequence", True),
    ("dapo_plain", "dapo", 0.0, 0.2, 0.2, False, "sequence", True),
    ("dapo_clip_kl_token", "dapo", 0.04, 0.2, 0.28, True, "token", True),
    ("grpo_kl_only", "grpo", 0.04, 0.2, 0.2, False, "sequence", True),
    ("grpo_clip_kl_uncorrected", "grpo", 0.04, 0.2, 0.28, True, "sequence", False),
]
UNCORRECTED = "_uncorrected"
FD_CONFIGS = ("grpo_clip_kl", "dapo_clip_kl_token", "dpo")
# Whole gradients for these; sampled entries for the rest (the file stays
# small: whole float32 gradients are ~350 KB a config).
FULL_GRADIENT_CONFIGS = ("dapo_clip_kl_token",)
GRADIENT_SAMPLES = 32
ZERO_CONFIGS = ("grpo_plain", "dapo_plain")
TRL_TOLERANCE = 1e-10
FUSED_HEAD_TOLERANCE = 1e-5


def store_gradients(arrays, config, names, grads):
    """Whole float32 tensors for FULL_GRADIENT_CONFIGS; else, per tensor,
    GRADIENT_SAMPLES entries at seeded indices plus its largest |g|, and that
    largest |g| (the docstring's <C>:gradidx/gradval/gradmax)."""
    for number, k in enumerate(names):
        g = np.asarray(grads[k])
        if config in FULL_GRADIENT_CONFIGS:
            arrays[f"{config}:grad:{k}"] = g.astype(np.float32)
            continue
        flat = g.reshape(-1)
        rng = np.random.default_rng([SEED_GRADIENT_SAMPLES, number])
        drawn = rng.choice(flat.size, size=min(GRADIENT_SAMPLES, flat.size), replace=False)
        index = np.unique(np.append(drawn, int(np.argmax(np.abs(flat)))))
        arrays[f"{config}:gradidx:{k}"] = index.astype(np.int64)
        arrays[f"{config}:gradval:{k}"] = flat[index].astype(np.float32)
        arrays[f"{config}:gradmax:{k}"] = np.float64(np.abs(flat).max())


SEED_GRADIENT_SAMPLES = 11


def selected_configs(args):
    return [row for row in GRPO_CONFIGS if not args.config or row[0] in args.config]


def config_dict(row):
    keys = ("name", "loss_type", "beta", "epsilon", "epsilon_high", "old", "advantages",
            "kl_bias_correction")
    return dict(zip(keys, row))


# ===========================================================================
# Inputs that do not depend on the model.
# ===========================================================================

def make_inputs(rng):
    ids = rng.integers(0, 256, size=(ROWS, TOKENS), dtype=np.int64)
    mask = np.zeros((ROWS, TOKENS), dtype=np.float32)
    for row, prompt in enumerate(PROMPT_LENS):
        mask[row, prompt:TOKENS - EARLY_END.get(row, 0)] = 1.0
    rewards = np.array(GROUP_REWARDS, dtype=np.float64)
    advantages = ((rewards - rewards.mean(axis=1, keepdims=True))
                  / (rewards.std(axis=1, ddof=1, keepdims=True) + 1e-4)).reshape(-1)
    advantages[ZERO_ADVANTAGE_ROW] = 0.0
    advantages = advantages.astype(np.float32)
    advantages_token = (advantages[:, None].astype(np.float64)
                        + rng.normal(0.0, TOKEN_ADVANTAGE_NOISE, size=(ROWS, TOKENS))
                        ).astype(np.float32)
    old_noise = rng.normal(0.0, OLD_NOISE, size=(ROWS, TOKENS))
    ref_noise = rng.normal(0.0, REF_NOISE, size=(ROWS, TOKENS))

    prompts = rng.integers(0, 256, size=(DPO_PAIRS, DPO_PROMPT), dtype=np.int64)
    completions = {}
    for kind in ("chosen", "rejected"):
        completions[kind] = rng.integers(0, 256, size=(DPO_PAIRS, TOKENS - DPO_PROMPT),
                                         dtype=np.int64)
    same = completions["chosen"][:, 0] == completions["rejected"][:, 0]
    completions["rejected"][same, 0] = (completions["rejected"][same, 0] + 1) % 256
    dpo = {}
    for kind in ("chosen", "rejected"):
        dpo[f"dpo_{kind}_ids"] = np.concatenate([prompts, completions[kind]], axis=1)
        m = np.zeros((DPO_PAIRS, TOKENS), dtype=np.float32)
        for row in range(DPO_PAIRS):
            m[row, DPO_PROMPT:TOKENS - DPO_EARLY_END[kind].get(row, 0)] = 1.0
        dpo[f"dpo_{kind}_mask"] = m
        dpo[f"dpo_{kind}_ref_noise"] = rng.normal(0.0, REF_NOISE, size=(DPO_PAIRS, TOKENS))
    return ids, mask, advantages, advantages_token, old_noise, ref_noise, dpo


def noisy(logprobs, noise):
    """logprobs + noise at t >= 1, 0 at t = 0, rounded to float32."""
    out = logprobs + noise
    out[:, 0] = 0.0
    return out.astype(np.float32)


# ===========================================================================
# The losses (float64 torch; also what TRL's code is compared with).
# ===========================================================================

def per_token(wrapper, ids):
    """Per-token log-probs and entropies aligned with ids (0 at t = 0), and the logits."""
    logits = wrapper(ids)
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
    lp = log_probs.gather(-1, ids[:, 1:, None]).squeeze(-1)
    ent = -(log_probs.exp() * log_probs).sum(-1)
    zero = lp.new_zeros((ids.shape[0], 1))
    return torch.cat([zero, lp], dim=1), torch.cat([zero, ent], dim=1), logits


def grpo_loss(lp, mask, advantages, old, ref, cfg):
    a = advantages[:, None] if advantages.dim() == 1 else advantages
    old = old if cfg["old"] else lp.detach()
    ratio = torch.exp(lp - old)
    clipped = torch.clamp(ratio, 1 - cfg["epsilon"], 1 + cfg["epsilon_high"])
    per = -torch.min(ratio * a, clipped * a)
    if cfg["beta"] != 0.0:
        kl = torch.exp(ref - lp) - (ref - lp) - 1
        if cfg["kl_bias_correction"]:
            kl = kl * ratio
        per = per + cfg["beta"] * kl
    if cfg["loss_type"] == "grpo":
        return ((per * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if cfg["loss_type"] == "dapo":
        return (per * mask).sum() / mask.sum().clamp(min=1.0)
    raise ValueError(cfg["loss_type"])


def dpo_loss(lp_c, lp_r, mask_c, mask_r, ref_c, ref_r, beta):
    logits = ((lp_c * mask_c).sum(-1) - (lp_r * mask_r).sum(-1)) \
        - ((ref_c * mask_c).sum(-1) - (ref_r * mask_r).sum(-1))
    return -torch.nn.functional.logsigmoid(beta * logits).mean()


# ===========================================================================
# Goldens (bench/.venv-peers: the fixtures' torch and transformers).
# ===========================================================================

def gradients(wrapper, closure):
    wrapper.zero_grad(set_to_none=True)
    loss = closure()
    loss.backward()
    grads = {}
    for name, param in wrapper.named_parameters():
        grads[name] = (param.grad.detach().numpy().copy() if param.grad is not None
                       else np.zeros(tuple(param.shape), dtype=np.float64))
    wrapper.zero_grad(set_to_none=True)
    return float(loss.item()), grads


def check_per_token(logits, ids, lp, ent):
    """The contract, position by position, with other torch code."""
    worst = 0.0
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1]):
            if t == 0:
                want_lp, want_ent = 0.0, 0.0
            else:
                row = logits[b, t - 1].detach()
                want_lp = float(torch.log_softmax(row, dim=0)[ids[b, t]])
                want_ent = float(torch.distributions.Categorical(logits=row).entropy())
            worst = max(worst, abs(float(lp[b, t]) - want_lp), abs(float(ent[b, t]) - want_ent))
    if not worst <= 1e-12:
        raise SystemExit(f"logprobs/entropy differ from log_softmax/Categorical: {worst:.3e}")
    return worst


def hf_masked_loss(wrapper, ids, mask, lp, what):
    """transformers' loss with labels = ids, -100 where mask is 0, equals the
    masked mean of -logprobs (HF upcasts logits to float32: 1e-6)."""
    labels = ids.clone()
    labels[mask == 0] = -100
    with torch.no_grad():
        hf = float(wrapper.model(input_ids=ids, labels=labels, use_cache=False).loss)
    ours = float(-(lp * mask).sum() / mask.sum())
    if not abs(hf - ours) <= 1e-6 * abs(ours):
        raise SystemExit(f"{what}: masked -logprobs mean {ours} != transformers' loss {hf}")
    return abs(hf - ours) / abs(ours)


def clip_activity(lp, old, advantages, mask, cfg):
    a = advantages[:, None] if advantages.dim() == 1 else advantages
    a = a.expand_as(lp)
    ratio = torch.exp(lp - old)
    on = mask > 0
    low = int(((ratio < 1 - cfg["epsilon"]) & (a < 0) & on).sum())
    high = int(((ratio > 1 + cfg["epsilon_high"]) & (a > 0) & on).sum())
    below = int(((ratio < 1 - cfg["epsilon"]) & on).sum())
    above = int(((ratio > 1 + cfg["epsilon_high"]) & on).sum())
    if min(low, high, below, above) == 0:
        raise SystemExit(f"{cfg['name']}: clipping not exercised on both sides "
                         f"(below {below}, above {above}, active low {low}, high {high})")
    return f"below {below}, above {above}, clip active low {low}, high {high}"


def produce(arch, args, versions):
    sys.path.insert(0, SCRIPT_DIR)
    import export_fixtures as ef
    import onnxruntime as ort

    name = FIXTURES[arch]
    path = os.path.join(MODELS_DIR, f"{name}.onnx")
    print(f"== {name} ({arch})")
    wrapper, names = ef.model_from_onnx(arch, path, torch.float64)
    wrapper.eval()
    pad = wrapper.model.config.pad_token_id

    # The model is the committed fixture's: its SFT golden loss, onnxruntime's logits.
    committed = np.load(os.path.join(GOLDEN_DIR, f"{name}.npz"), allow_pickle=False)
    if list(committed["param_names"]) != names:
        raise SystemExit(f"{name}: parameter names differ from goldens/{name}.npz")
    sft_ids = torch.from_numpy(committed["input_ids"])
    with torch.no_grad():
        sft = float(ef.causal_lm_loss(wrapper(sft_ids), sft_ids))
    if not abs(sft - float(committed["loss"])) <= 1e-9 * abs(sft):
        raise SystemExit(f"{name}: rebuilt model's loss {sft} != committed {committed['loss']}")

    rng = np.random.default_rng(DATA_SEED)
    ids_np, mask_np, adv_np, adv_tok_np, old_noise, ref_noise, dpo_np = make_inputs(rng)
    if pad is not None:  # see export_fixtures.produce_golden: ONNX has no padding_idx
        for x in (ids_np, dpo_np["dpo_chosen_ids"], dpo_np["dpo_rejected_ids"]):
            x[x == pad] = (pad + 1) % 256
    ids = torch.from_numpy(ids_np)
    mask = torch.from_numpy(mask_np).double()

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_logits = sess.run(["logits"], {"input_ids": ids_np})[0].astype(np.float64)

    lp, ent, logits = per_token(wrapper, ids)
    lp_np = lp.detach().numpy().copy()
    ent_np = ent.detach().numpy().copy()
    torch_logits = logits.detach().numpy()
    ort_rel = float(np.abs(ort_logits - torch_logits).max() / np.abs(torch_logits).max())
    if not ort_rel <= ef.TOLERANCE:
        raise SystemExit(f"{name}: onnxruntime logits differ from torch: {ort_rel:.3e}")
    per_token_err = check_per_token(logits, ids, lp, ent)
    hf_rel = hf_masked_loss(wrapper, ids, mask, lp, name)
    print(f"  model: SFT golden loss {sft:.12f} reproduced; onnxruntime logits rel {ort_rel:.2e}; "
          f"per-token check {per_token_err:.1e}; transformers masked loss rel {hf_rel:.1e}")

    old_np = noisy(lp_np, old_noise)
    ref_np = noisy(lp_np, ref_noise)
    old = torch.from_numpy(old_np).double()
    ref = torch.from_numpy(ref_np).double()
    adv = {"sequence": torch.from_numpy(adv_np).double(),
           "token": torch.from_numpy(adv_tok_np).double()}

    arrays = {
        "param_names": np.array(names),
        "input_ids": ids_np,
        "completion_mask": mask_np,
        "advantages": adv_np,
        "advantages_token": adv_tok_np,
        "old_logprobs": old_np,
        "ref_logprobs": ref_np,
        "logprobs": lp_np,
        "entropy": ent_np,
        "configs": np.array([c[0] for c in selected_configs(args)]),
    }
    fd_report, all_grads = {}, {}
    for row in selected_configs(args):
        cfg = config_dict(row)
        c = cfg["name"]
        a = adv[cfg["advantages"]]

        def closure(cfg=cfg, a=a):
            return grpo_loss(per_token(wrapper, ids)[0], mask, a, old, ref, cfg)

        loss, grads = gradients(wrapper, closure)
        leaf = torch.from_numpy(lp_np).requires_grad_()
        leaf_loss = grpo_loss(leaf, mask, a, old, ref, cfg)
        (dlp,) = torch.autograd.grad(leaf_loss, leaf)
        if float(leaf_loss) != loss:
            raise SystemExit(f"{c}: loss from the stored logprobs {float(leaf_loss)} != {loss}")
        note = ""
        if cfg["old"]:
            note = "; " + clip_activity(lp.detach(), old, a, mask, cfg)
        if c in FD_CONFIGS:
            fd_report[c] = ef.finite_differences(wrapper, names, closure, grads, c)
            note += f"; finite differences {fd_report[c]:.1e}"
        if c in ZERO_CONFIGS:
            _, zero_grads = gradients(wrapper, lambda: grpo_loss(
                per_token(wrapper, ids)[0], mask, torch.zeros_like(a), old, ref, cfg))
            nonzero = [k for k, g in zero_grads.items() if np.any(g != 0)]
            if nonzero:
                raise SystemExit(f"{c}: zero advantages give nonzero gradients in {nonzero}")
            note += "; zero advantages: all gradients exactly 0"
        base = c[:-len(UNCORRECTED)] if c.endswith(UNCORRECTED) else None
        if base in all_grads:
            # A golden must tell the two KL forms apart: how far beyond
            # test/train/check_gradients.py's bound one is from the other.
            apart = ef.gradient_bound_ratio(grads, all_grads[base])
            if not apart > 10:
                raise SystemExit(f"{c}: gradients only {apart:.2f}x the test bound from {base}'s")
            note += f"; gradients {apart:.0f}x check_gradients' bound away from {base}'s"
        all_grads[c] = grads
        print(f"  {c:32s} loss {loss:+.12f}{note}")
        arrays[f"{c}:loss"] = np.float64(loss)
        store_gradients(arrays, c, names, grads)
        arrays[f"{c}:dlogprobs"] = dlp.numpy().copy()
        arrays[f"{c}:loss_type"] = np.array(cfg["loss_type"])
        arrays[f"{c}:beta"] = np.float64(cfg["beta"])
        arrays[f"{c}:epsilon"] = np.float64(cfg["epsilon"])
        arrays[f"{c}:epsilon_high"] = np.float64(cfg["epsilon_high"])
        arrays[f"{c}:old"] = np.bool_(cfg["old"])
        arrays[f"{c}:advantages"] = np.array(cfg["advantages"])
        arrays[f"{c}:kl_bias_correction"] = np.bool_(cfg["kl_bias_correction"])

    # DPO: chosen rows then rejected rows, one forward.
    pair_ids = torch.from_numpy(np.concatenate([dpo_np["dpo_chosen_ids"],
                                                dpo_np["dpo_rejected_ids"]]))
    pair_mask = torch.from_numpy(np.concatenate([dpo_np["dpo_chosen_mask"],
                                                 dpo_np["dpo_rejected_mask"]])).double()
    plp, pent, plogits = per_token(wrapper, pair_ids)
    check_per_token(plogits, pair_ids, plp, pent)
    hf_masked_loss(wrapper, pair_ids, pair_mask, plp, "dpo")
    plp_np = plp.detach().numpy().copy()
    ref_c_np = noisy(plp_np[:DPO_PAIRS], dpo_np["dpo_chosen_ref_noise"])
    ref_r_np = noisy(plp_np[DPO_PAIRS:], dpo_np["dpo_rejected_ref_noise"])
    mask_c, mask_r = pair_mask[:DPO_PAIRS], pair_mask[DPO_PAIRS:]
    ref_c, ref_r = torch.from_numpy(ref_c_np).double(), torch.from_numpy(ref_r_np).double()

    def dpo_closure():
        p = per_token(wrapper, pair_ids)[0]
        return dpo_loss(p[:DPO_PAIRS], p[DPO_PAIRS:], mask_c, mask_r, ref_c, ref_r,
                        DPO_BETA)

    dloss, dgrads = gradients(wrapper, dpo_closure)
    leaf_c = torch.from_numpy(plp_np[:DPO_PAIRS].copy()).requires_grad_()
    leaf_r = torch.from_numpy(plp_np[DPO_PAIRS:].copy()).requires_grad_()
    leaf_loss = dpo_loss(leaf_c, leaf_r, mask_c, mask_r, ref_c, ref_r, DPO_BETA)
    d_c, d_r = torch.autograd.grad(leaf_loss, (leaf_c, leaf_r))
    if float(leaf_loss) != dloss:
        raise SystemExit(f"dpo: loss from the stored logprobs {float(leaf_loss)} != {dloss}")
    fd_report["dpo"] = ef.finite_differences(wrapper, names, dpo_closure, dgrads, "dpo")
    print(f"  {'dpo':32s} loss {dloss:+.12f}; finite differences {fd_report['dpo']:.1e}")
    arrays.update({
        "dpo_chosen_ids": dpo_np["dpo_chosen_ids"],
        "dpo_rejected_ids": dpo_np["dpo_rejected_ids"],
        "dpo_chosen_mask": dpo_np["dpo_chosen_mask"],
        "dpo_rejected_mask": dpo_np["dpo_rejected_mask"],
        "dpo_chosen_logprobs": plp_np[:DPO_PAIRS].copy(),
        "dpo_rejected_logprobs": plp_np[DPO_PAIRS:].copy(),
        "dpo_ref_chosen_logprobs": ref_c_np,
        "dpo_ref_rejected_logprobs": ref_r_np,
        "dpo:loss": np.float64(dloss),
        "dpo:beta": np.float64(DPO_BETA),
        "dpo:loss_type": np.array("sigmoid"),
        "dpo:dlogprobs_chosen": d_c.numpy().copy(),
        "dpo:dlogprobs_rejected": d_r.numpy().copy(),
    })
    store_gradients(arrays, "dpo", names, dgrads)
    arrays["ort_logits_rel"] = np.float64(ort_rel)

    # What TRL's fused LM head needs: the last hidden states and the LM head.
    with torch.no_grad():
        base = wrapper.model.base_model
        side = {
            "hidden": base(input_ids=ids, use_cache=False)[0].numpy().copy(),
            "pair_hidden": base(input_ids=pair_ids, use_cache=False)[0].numpy().copy(),
            "lm_head": wrapper.model.get_output_embeddings().weight.detach().numpy().copy(),
            "pair_entropy": pent.detach().numpy().copy(),
        }
        if wrapper.model.get_output_embeddings().bias is not None:
            raise SystemExit(f"{name}: the LM head has a bias; extend the fused-head check")
        check = wrapper.model.get_output_embeddings()(torch.from_numpy(side["hidden"]))
        if not torch.equal(check, logits.detach()):
            raise SystemExit(f"{name}: lm_head(last hidden state) != the model's logits")

    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "goldens.npz")
        side_path = os.path.join(tmp, "side.npz")
        report_path = os.path.join(tmp, "trl.json")
        np.savez(npz, **arrays)
        np.savez(side_path, **side)
        cmd = [args.trl_python, os.path.abspath(__file__), "--trl-check", npz,
               "--side", side_path, "--json-out", report_path]
        print("  " + " ".join(os.path.relpath(c, REPO_ROOT) if c.startswith(REPO_ROOT) else c
                              for c in cmd[:3]) + " ... (TRL check)")
        done = subprocess.run(cmd, cwd=REPO_ROOT)
        if done.returncode != 0 or not os.path.exists(report_path):
            raise SystemExit(f"the TRL check failed (exit {done.returncode}); nothing written")
        with open(report_path) as f:
            report = json.load(f)
    if not report["ok"]:
        raise SystemExit("the TRL check found differences; nothing written")

    arrays["versions"] = np.array(f"goldens: {versions}; TRL check: {report['versions']}")
    arrays["trl_checked"] = np.array("\n".join(report["lines"]))
    out = os.path.join(args.golden_dir, f"rl-{name}.npz")
    os.makedirs(args.golden_dir, exist_ok=True)
    ef.save_npz_deterministic(out, arrays)
    shown = os.path.relpath(out, REPO_ROOT)
    shown = out if shown.startswith("..") else shown
    print(f"  wrote {shown}: {os.path.getsize(out)} bytes, sha256 {ef.sha256(out)[:16]}")


# ===========================================================================
# TRL check (bench/.venv-rl: TRL and its torch/transformers).
# ===========================================================================

class _Accelerator:
    """The accelerator methods _compute_loss calls, for one process."""
    num_processes = 1
    device = "cpu"

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def trl_grpo(z, cfg, tmp):
    """TRL's GRPOTrainer._compute_loss on the file's tensors: its loss and d loss / d logprobs."""
    from collections import defaultdict

    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=tmp, report_to="none", use_cpu=True, loss_type=cfg["loss_type"],
                      beta=cfg["beta"], epsilon=cfg["epsilon"], epsilon_high=cfg["epsilon_high"],
                      use_bias_correction_kl=cfg["kl_bias_correction"],
                      per_device_train_batch_size=ROWS, gradient_accumulation_steps=1,
                      num_generations=4)
    trainer = object.__new__(GRPOTrainer)
    # The attributes GRPOTrainer.__init__ sets from args that _compute_loss reads.
    trainer.args = args
    trainer.beta = args.beta
    trainer.loss_type = args.loss_type
    trainer.importance_sampling_level = args.importance_sampling_level
    trainer.off_policy_mask_threshold = args.off_policy_mask_threshold
    trainer.top_entropy_quantile = args.top_entropy_quantile
    trainer.entropy_coef = args.entropy_coef
    trainer.use_adaptive_entropy = args.use_adaptive_entropy
    trainer._entropy_bonus_enabled = trainer.entropy_coef != 0.0 or trainer.use_adaptive_entropy
    trainer.use_vllm = args.use_vllm
    trainer.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    trainer.epsilon_low = args.epsilon
    trainer.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    trainer.aux_loss_enabled = False  # dense model: no output_router_logits in its config
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer.model = torch.nn.Module()  # .training is True: "train" mode
    trainer.accelerator = _Accelerator()
    trainer.current_gradient_accumulation_steps = 1

    ids = torch.from_numpy(z["input_ids"])
    mask = torch.from_numpy(z["completion_mask"]).long()  # TRL's collator gives int masks
    lp = torch.from_numpy(z["logprobs"]).requires_grad_()
    ent = torch.from_numpy(z["entropy"])
    keep = ids.shape[1] - 1  # the prompt is column 0, whose log-prob the contract makes 0

    def per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, **_):
        if logits_to_keep != keep or not torch.equal(input_ids, ids):
            raise RuntimeError("TRL asked for other log-probs than the file's")
        return lp[:, 1:], ent[:, 1:], None

    trainer._get_per_token_logps_and_entropies = per_token_logps_and_entropies
    adv = torch.from_numpy(z["advantages"] if cfg["advantages"] == "sequence"
                           else z["advantages_token"][:, 1:]).double()
    inputs = {
        "prompt_ids": ids[:, :1], "prompt_mask": torch.ones_like(ids[:, :1]),
        "completion_ids": ids[:, 1:], "completion_mask": mask[:, 1:],
        "advantages": adv,
        # As _generate_and_score_completions computes it (one process).
        "num_items_in_batch": mask[:, 1:].sum(),
    }
    if cfg["old"]:
        inputs["old_per_token_logps"] = torch.from_numpy(z["old_logprobs"][:, 1:]).double()
    if cfg["beta"] != 0.0:
        inputs["ref_per_token_logps"] = torch.from_numpy(z["ref_logprobs"][:, 1:]).double()
    loss = GRPOTrainer._compute_loss(trainer, None, inputs)
    loss.backward()
    return float(loss.detach()), lp.grad.numpy(), {
        "args.steps_per_generation": args.steps_per_generation,
        "epsilon_low": trainer.epsilon_low, "epsilon_high": trainer.epsilon_high,
        "delta": args.delta, "importance_sampling_level": args.importance_sampling_level,
        "use_bias_correction_kl": args.use_bias_correction_kl,
        "top_entropy_quantile": args.top_entropy_quantile, "temperature": args.temperature}


def trl_dpo(z, tmp):
    """TRL's DPOTrainer._compute_loss on the file's tensors: loss and d loss / d logprobs."""
    from collections import defaultdict

    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(output_dir=tmp, report_to="none", use_cpu=True, beta=float(z["dpo:beta"]))
    trainer = object.__new__(DPOTrainer)
    trainer.args = args
    trainer.beta = args.beta
    trainer.precompute_ref_logps = args.precompute_ref_log_probs
    trainer.loss_types = args.loss_type
    trainer.loss_weights = args.loss_weights or [1.0] * len(trainer.loss_types)
    trainer.ld_alpha = args.ld_alpha
    trainer.f_divergence_type = args.f_divergence_type
    trainer.f_alpha_divergence_coef = args.f_alpha_divergence_coef
    trainer.label_smoothing = args.label_smoothing
    trainer.use_weighting = args.use_weighting
    trainer.aux_loss_enabled = False
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer._total_train_tokens = 0
    trainer._tp_size = 1
    trainer.accelerator = _Accelerator()

    ids = torch.from_numpy(np.concatenate([z["dpo_chosen_ids"], z["dpo_rejected_ids"]]))
    mask = torch.from_numpy(np.concatenate([z["dpo_chosen_mask"],
                                            z["dpo_rejected_mask"]])).long()
    lp_c = torch.from_numpy(z["dpo_chosen_logprobs"].copy()).requires_grad_()
    lp_r = torch.from_numpy(z["dpo_rejected_logprobs"].copy()).requires_grad_()
    ref = torch.from_numpy(np.concatenate([z["dpo_ref_chosen_logprobs"],
                                           z["dpo_ref_rejected_logprobs"]])).double()

    class FusedHeadStandIn(torch.nn.Module):
        """What add_fused_lm_head's forward returns, from given per-token
        log-probs: shifted labels, zero where the label is -100 (utils.py)."""
        is_gradient_checkpointing = False

        def __init__(self, per_token):
            super().__init__()
            self.per_token = per_token

        def forward(self, input_ids=None, attention_mask=None, use_cache=None, labels=None,
                    fused_lm_head=False):
            if not fused_lm_head or not torch.equal(input_ids, ids):
                raise RuntimeError("TRL asked for other log-probs than the file's")
            valid = labels[:, 1:] != -100
            per_token = self.per_token()[:, 1:]
            zeros = torch.zeros_like(valid, dtype=torch.float64)
            return types.SimpleNamespace(
                log_probs=per_token.masked_fill(~valid, 0), entropy=zeros, mean_logits=zeros,
                is_top1=torch.zeros_like(valid), log_sum_sq_probs=None, aux_loss=None)

    trainer.model = FusedHeadStandIn(lambda: torch.cat([lp_c, lp_r]))
    trainer.ref_model = FusedHeadStandIn(lambda: ref)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "completion_mask": mask}
    loss = DPOTrainer._compute_loss(trainer, trainer.model, inputs, return_outputs=False)
    loss.backward()
    return float(loss.detach()), lp_c.grad.numpy(), lp_r.grad.numpy(), {
        "loss_type": args.loss_type, "label_smoothing": args.label_smoothing,
        "f_divergence_type": args.f_divergence_type, "ld_alpha": args.ld_alpha,
        "use_weighting": args.use_weighting,
        "precompute_ref_log_probs": args.precompute_ref_log_probs}


def trl_fused_head(ids, hidden, lm_head, labels):
    """TRL's add_fused_lm_head forward on a backbone that returns `hidden`."""
    from trl.trainer.utils import add_fused_lm_head

    class Config:
        model_type = "stand-in"

        def get_text_config(self):
            return self

    class Backbone(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None, use_cache=None):
            if not torch.equal(input_ids, ids):
                raise RuntimeError("unexpected input_ids")
            return types.SimpleNamespace(last_hidden_state=hidden)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = Config()
            self.base_model = Backbone()
            self.head = torch.nn.Linear(lm_head.shape[1], lm_head.shape[0], bias=False,
                                        dtype=lm_head.dtype)
            with torch.no_grad():
                self.head.weight.copy_(lm_head)

        def get_output_embeddings(self):
            return self.head

        def forward(self, *a, **k):
            raise RuntimeError("only the fused path is used")

    model = Model()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels,
                    fused_lm_head=True)
    return out.log_probs.numpy(), out.entropy.numpy()


def trl_check(npz_path, side_path, json_out):
    import transformers
    import trl

    # TrainingArguments' own deprecation notice about a field left at its default.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    versions = (f"python {sys.version.split()[0]}, torch {torch.__version__}, "
                f"transformers {transformers.__version__}, trl {trl.__version__}")
    print(f"  TRL check with {versions}")
    z = np.load(npz_path, allow_pickle=False)
    lines, ok = [], True
    scaling = ("self.current_gradient_accumulation_steps = 1, accelerator.num_processes = 1, "
               "args.steps_per_generation = 1 (GRPOConfig's default = gradient_accumulation_steps "
               "= 1), inputs['num_items_in_batch'] = completion_mask.sum() over all 8 rows")
    with tempfile.TemporaryDirectory() as tmp:
        for c in [str(x) for x in z["configs"]]:
            cfg = {"name": c, "loss_type": str(z[f"{c}:loss_type"]), "beta": float(z[f"{c}:beta"]),
                   "epsilon": float(z[f"{c}:epsilon"]),
                   "epsilon_high": float(z[f"{c}:epsilon_high"]), "old": bool(z[f"{c}:old"]),
                   "advantages": str(z[f"{c}:advantages"]),
                   "kl_bias_correction": bool(z[f"{c}:kl_bias_correction"])}
            loss, grad, used = trl_grpo(z, cfg, tmp)
            dl = abs(loss - float(z[f"{c}:loss"]))
            dg = float(np.abs(grad - z[f"{c}:dlogprobs"]).max())
            good = dl <= TRL_TOLERANCE and dg <= TRL_TOLERANCE
            ok &= good
            lines.append(
                f"{c}: trl {trl.__version__} GRPOTrainer._compute_loss called on these tensors "
                f"(stand-in self; GRPOConfig(loss_type={cfg['loss_type']!r}, beta={cfg['beta']}, "
                f"epsilon={cfg['epsilon']}, epsilon_high={cfg['epsilon_high']}, "
                f"use_bias_correction_kl={cfg['kl_bias_correction']}), other fields default: "
                f"delta={used['delta']}, importance_sampling_level="
                f"{used['importance_sampling_level']!r}, top_entropy_quantile="
                f"{used['top_entropy_quantile']}; "
                f"{'old_per_token_logps given' if cfg['old'] else 'no old_per_token_logps'}"
                f"{', ref_per_token_logps given' if cfg['beta'] else ''}); "
                f"max |loss diff| {dl:.1e}, max |d loss/d logprobs diff| {dg:.1e}"
                f"{'' if good else ' FAILED'}")
        loss, g_c, g_r, used = trl_dpo(z, tmp)
    dl = abs(loss - float(z["dpo:loss"]))
    dg = max(float(np.abs(g_c - z["dpo:dlogprobs_chosen"]).max()),
             float(np.abs(g_r - z["dpo:dlogprobs_rejected"]).max()))
    good = dl <= TRL_TOLERANCE and dg <= TRL_TOLERANCE
    ok &= good
    lines.append(
        f"dpo: trl {trl.__version__} DPOTrainer._compute_loss called on these tensors (stand-in "
        f"self; DPOConfig(beta={float(z['dpo:beta'])}), defaults loss_type={used['loss_type']}, "
        f"label_smoothing={used['label_smoothing']}, f_divergence_type="
        f"{used['f_divergence_type']!r}, ld_alpha={used['ld_alpha']}, use_weighting="
        f"{used['use_weighting']}; policy and ref_model are stand-ins for add_fused_lm_head's "
        f"forward returning the given per-token log-probs, zero where the label is -100; "
        f"no precomputed ref log-probs); max |loss diff| {dl:.1e}, "
        f"max |d loss/d logprobs diff| {dg:.1e}{'' if good else ' FAILED'}")
    lines.append("scaling for one call = the global batch: " + scaling)

    if side_path:
        s = np.load(side_path, allow_pickle=False)
        ids = torch.from_numpy(z["input_ids"])
        lm_head = torch.from_numpy(s["lm_head"])
        got_lp, got_ent = trl_fused_head(ids, torch.from_numpy(s["hidden"]), lm_head, ids)
        d_lp = float(np.abs(got_lp - z["logprobs"][:, 1:]).max())
        d_ent = float(np.abs(got_ent - z["entropy"][:, 1:]).max())
        pair_ids = torch.from_numpy(np.concatenate([z["dpo_chosen_ids"], z["dpo_rejected_ids"]]))
        pair_mask = np.concatenate([z["dpo_chosen_mask"], z["dpo_rejected_mask"]])
        labels = pair_ids.masked_fill(torch.from_numpy(pair_mask) == 0, -100)  # as DPOTrainer
        got_plp, _ = trl_fused_head(pair_ids, torch.from_numpy(s["pair_hidden"]),
                                    lm_head, labels)
        pair_lp = np.concatenate([z["dpo_chosen_logprobs"], z["dpo_rejected_logprobs"]])
        d_sum = float(np.abs(got_plp.sum(1) - (pair_lp * pair_mask).sum(1)).max())
        d_pair = float(np.abs(got_plp - (pair_lp * pair_mask)[:, 1:]).max())
        good = max(d_lp, d_ent, d_pair, d_sum) <= FUSED_HEAD_TOLERANCE
        ok &= good
        lines.append(
            f"alignment: trl.trainer.utils.add_fused_lm_head (the per-token log-probs of both "
            f"trainers) on the model's last hidden states and LM head, labels = input_ids: "
            f"max |diff| logprobs[:, 1:] {d_lp:.1e}, entropy[:, 1:] {d_ent:.1e}; DPO rows with "
            f"labels masked by the completion masks as DPOTrainer does: per-token {d_pair:.1e}, "
            f"sequence sums {d_sum:.1e} (tolerance {FUSED_HEAD_TOLERANCE:g}: TRL's kernel "
            f"accumulates in float32){'' if good else ' FAILED'}")
    else:
        lines.append("alignment: not checked in this run (needs the hidden states, --side)")
    for line in lines:
        print("  " + line)
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"ok": bool(ok), "versions": versions, "lines": lines}, f)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", action="append", choices=sorted(FIXTURES),
                    help="fixture architecture(s) to write (default: llama)")
    ap.add_argument("--golden-dir", default=GOLDEN_DIR)
    ap.add_argument("--config", action="append", choices=[c[0] for c in GRPO_CONFIGS],
                    help="GRPO/DAPO config(s) to write (default: all; dpo is always written)")
    ap.add_argument("--trl-python", default=DEFAULT_TRL_PYTHON,
                    help="interpreter with trl for the cross-check (default: %(default)s)")
    ap.add_argument("--trl-check", metavar="NPZ",
                    help="only check NPZ's losses against TRL's code (run with the trl venv)")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--json-out", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.trl_check:
        sys.exit(0 if trl_check(args.trl_check, args.side, args.json_out) else 1)

    sys.path.insert(0, SCRIPT_DIR)
    import export_fixtures as ef

    versions = ef.golden_versions()
    if not os.path.exists(args.trl_python):
        raise SystemExit(f"{args.trl_python} not found: the TRL check cannot run; "
                         "pass --trl-python")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with ef.float64_exact(), ef.default_dtype(torch.float64):
        for arch in args.arch or ["llama"]:
            produce(arch, args, versions)
    print("all RL goldens written")


if __name__ == "__main__":
    main()
