#!/usr/bin/env python3
"""GRPO peer on CPU ranks: TRL's GRPOTrainer with DeepSpeed ZeRO-3 (gloo,
DS_ACCELERATOR=cpu), one GRPO iteration timed and split into generation,
log-probs (policy old log-probs and reference) and training, with the
torch.distributed collectives it issues. The peer half of a GRPO benchmark.

Runs with the interpreter of bench/.venv-rl (git-ignored; torch, transformers,
trl, deepspeed, accelerate, datasets from PyPI, not pinned here: the versions
are printed and land in the JSON line):

    bench/.venv-rl/bin/python bench/grpo_peers.py                     # llama-156m, ~2 min
    bench/.venv-rl/bin/python bench/grpo_peers.py --num-iterations 2  # + old log-probs
    bench/.venv-rl/bin/python bench/grpo_peers.py --layers 4 --hidden 256 --vocab 2048  # ~15 s
    bench/.venv-rl/bin/python bench/grpo_peers.py --json /tmp/grpo.json

What it runs (one thread per rank: OMP_NUM_THREADS=1, torch.set_num_threads(1)):

  model   a transformers LlamaForCausalLM, fp32, no download (HF_HUB_OFFLINE=1).
          Default: the bench model, llama-156m (generate_bench.py's builder:
          its saved weights bench/.models/llama-156m/weights.pt, or the same
          seeded init when that is absent). --layers/--hidden/--heads/--vocab:
          its shape (GQA 4:1, intermediate 2.75 x hidden, untied lm_head) at
          that size, seeded init. Saved with save_pretrained into --work-dir,
          since GRPOTrainer builds the reference model from the policy's
          `config._name_or_path` (trl/trainer/grpo_trainer.py, __init__,
          create_model_from_path). SDPA attention (--attn eager for eager).
  tokens  a word-level PreTrainedTokenizerFast built in code: <pad> 0, <eos> 1,
          <unk> 2, then "t3" .. "t{V-1}"; a prompt is P random words, so P
          tokens. EOS is suppressed until M tokens (min_new_tokens = M), so
          every completion has exactly M tokens (--allow-eos: they may stop).
  task    reward = fraction of completion tokens whose id is below V/2
          (verifiable, varies between completions, so advantages are not 0).
  GRPO    num_generations G, max_completion_length M, beta 0.04 (a reference
          model is built and run), --num-iterations mu (default 1; 2 makes TRL
          compute the old log-probs), per_device_train_batch_size = K x G
          (K = --prompts-per-rank: each rank generates G completions for each
          of its own K prompts: data parallel), gradient_accumulation_steps 1,
          steps_per_generation 1, AdamW (the Trainer's) lr 1e-6, fp32
          (bf16=False: TRL defaults it to True), no gradient checkpointing
          (TRL's default is on: --gradient-checkpointing), use_vllm=False (the
          plain transformers generate path), ds3_gather_for_generation True
          (TRL's default: the whole policy is gathered once for generation).
  DS      GRPOConfig(deepspeed={"zero_optimization": {"stage": 3, ...}}), the
          policy and the reference model each a ZeRO-3 engine (the reference
          through trl prepare_deepspeed), both with the bucket sizes
          transformers derives for "auto" from the hidden size h (reduce
          h^2, prefetch 0.9 h^2, persistence threshold 10 h), written out:
          see zero_settings() for why (--ds-auto keeps "auto").

Running it on CPU ranks needs GRPOConfig(use_cpu=True) (on by default;
--no-use-cpu shows the failure). Without it, transformers builds accelerate's
PartialState with DeepSpeed on and no backend
(transformers/training_args.py, _setup_devices, the `elif self.deepspeed`
branch passes no ddp_backend); accelerate then lets DeepSpeed pick the
backend (deepspeed.init_distributed(dist_backend=None) -> gloo, from the CPU
accelerator, accelerate/state.py:215), but keeps its own backend None and so
sets num_processes = 1 (accelerate/state.py:288-290) while torch.distributed
has 2 ranks. The first accelerate gather in GRPO (trl/trainer/
grpo_trainer.py:2280, `self.accelerator.gather(prompt_lengths)` in
_generate) then calls torch.distributed.all_gather with a 1-tensor list
(accelerate/utils/operations.py:354-355) and gloo raises "ProcessGroupGloo::
allgather: invalid output tensor list at index 0 (expected length 2, got 1)".
ddp_backend="gloo" is not passed on when deepspeed is set, and a process
group made first (init_process_group("gloo")) leaves accelerate's backend
None as well: both fail the same way. With use_cpu=True, PartialState is
MULTI_CPU with gloo and 2 processes, and the Trainer's AcceleratorState still
turns DeepSpeed on (distributed_type DEEPSPEED; both models are DeepSpeed
engines holding half of each sharded parameter: see the "setup" line).
--dist-setup configured-state is a second workaround (a PartialState made
before GRPOConfig with backend "gloo" and DeepSpeed on, then
accelerator_config={"use_configured_state": True}); it runs without
use_cpu. With `accelerate launch` (--accelerate-config, distributed_type
DEEPSPEED, zero_stage 3), `use_cpu: true` in the accelerate config is not
enough: the DeepSpeed launch path does not export ACCELERATE_USE_CPU
(accelerate/utils/launch.py: only prepare_simple_launcher_cmd_env sets it),
and zero.Init fails on DeepSpeed's batch assertion (train_batch_size from
accelerate's num_processes 1); use_cpu=True in GRPOConfig makes it run.
ds3_gather_for_generation=False (--no-ds3-gather-for-generation) fails in
the first training forward: TRL's fused log-prob head gathers lm_head with
deepspeed.zero.GatheredParameters unless it is AVAILABLE
(trl/trainer/utils.py, maybe_gather_lm_head_ctx, used at utils.py:1643 in
_fused_forward); the ZeRO-3 prefetcher has it INFLIGHT, and the exit's
re-partition asserts "Cannot partition a param in flight"
(deepspeed/runtime/zero/partition_parameters.py:1779).

One GRPO iteration (a "cycle") = one generation batch: generate, score, the
log-probs, then mu optimizer steps on it. Timing wraps GRPOTrainer methods on
the trainer instance, on every rank:

  generate   GRPOTrainer._generate (prompt tokenization, the ZeRO-3 gather for
             generation, model.generate, decoding)
  logprobs   _get_per_token_logps_and_entropies inside
             _generate_and_score_completions: the reference model's, and the
             policy's old log-probs (only when mu > 1)
  score      the rest of _generate_and_score_completions (rewards, their
             all-gather, advantages)
  train      from the end of _prepare_inputs to the Trainer's on_step_end
             (forward with log-probs, loss, DeepSpeed backward + step), summed
             over the mu steps of the cycle
  iteration  wall time between the ends of two consecutive cycles; "other" is
             what the phases above leave of it (data loading, logging)

--warmup cycles (default 1) are left out; the figures are the median over the
--iterations timed cycles (default 3), the max over ranks. Collectives: every
torch.distributed collective (wrapped before DeepSpeed or accelerate bind
them) is counted per cycle and phase; the figures are rank 0's last timed
cycle (the totals of each timed cycle are in the JSON). Bytes are the full
tensor of each call (a gather's output, a reduce-scatter's input).

Prints one line per phase and a JSON line
{"peer": "trl-grpo-deepspeed-zero3", "iteration_s": ..., "generate_s": ...,
 "logprobs_s": ..., "train_s": ..., "collectives": {...}, "versions": {...}},
or {"peer": ..., "error": "..."} when the peer cannot run (exit status 1).
"""

import os

# Before transformers is imported anywhere: never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import argparse
import json
import statistics
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
RL_VENV = os.path.join(BENCH_DIR, ".venv-rl")
PEER = "trl-grpo-deepspeed-zero3"
MODEL_SEED = 20261201
PROMPT_SEED = 7
PAD, EOS, UNK = 0, 1, 2
BETA = 0.04
LR = 1e-6
PHASES = ["generate", "logprobs_old", "logprobs_ref", "score", "train", "other"]

# What the workers count: every collective DeepSpeed, accelerate or TRL may call.
COUNTED = ["all_gather_into_tensor", "_all_gather_base", "all_gather",
           "reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter",
           "all_reduce", "broadcast", "reduce", "all_to_all_single", "all_to_all",
           "all_gather_coalesced", "all_reduce_coalesced", "all_gather_object",
           "broadcast_object_list", "gather_object", "gather", "scatter", "barrier"]


#===------------------------------------------------------------------------===#
# Model and tokenizer
#===------------------------------------------------------------------------===#

def model_config(args):
    """LlamaConfig kwargs of the model to run: generate_bench.LLAMA (the
    bench model), or its shape at --layers x --hidden, --heads, --vocab."""
    sys.path.insert(0, BENCH_DIR)
    import generate_bench  # the bench model (imports nothing heavy)
    llama = dict(generate_bench.LLAMA)
    if args.model == "custom":
        heads = args.heads
        kv = max(1, heads * llama["num_key_value_heads"] // llama["num_attention_heads"])
        llama.update(vocab_size=args.vocab, hidden_size=args.hidden,
                     intermediate_size=int(round(args.hidden * llama["intermediate_size"]
                                                 / llama["hidden_size"] / 8)) * 8,
                     num_hidden_layers=args.layers, num_attention_heads=heads,
                     num_key_value_heads=kv,
                     max_position_embeddings=max(256, args.prompt_length
                                                 + args.max_completion_length))
    return llama


def model_name(args):
    if args.model == "llama-156m":
        return "llama-156m"
    return f"custom-{args.layers}x{args.hidden}-h{args.heads}-v{args.vocab}"


def build_tokenizer(vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = {"<pad>": PAD, "<eos>": EOS, "<unk>": UNK}
    words.update({f"t{i}": i for i in range(3, vocab)})
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", padding_side="left",
                                   truncation_side="left")


def prepare(args):
    """Writes the model (save_pretrained) and tokenizer into args.model_dir
    unless they are there already; returns a description."""
    sys.path.insert(0, BENCH_DIR)
    import generate_bench
    llama = model_config(args)
    weights = os.path.join(generate_bench.MODEL_DIR, "weights.pt")
    if args.model == "llama-156m":
        source = (os.path.relpath(weights, REPO_ROOT) if os.path.exists(weights)
                  else f"generate_bench.llama_model() (seed {generate_bench.MODEL_SEED})")
    else:
        source = f"transformers init, seed {MODEL_SEED}"
    stamp = {"format": 1, "llama": llama, "attn": args.attn, "source": source}
    stamp_path = os.path.join(args.model_dir, "grpo_peers.json")
    if os.path.exists(stamp_path) and json.load(open(stamp_path)).get("stamp") == stamp:
        return json.load(open(stamp_path))["description"]
    import torch
    import transformers
    if args.model == "llama-156m":
        # generate_bench's builder: the bench model with its saved weights
        # (or the same seeded init when bench/.models/ has not been built).
        model = (generate_bench.load_model() if os.path.exists(weights)
                 else generate_bench.llama_model())
    else:
        config = transformers.LlamaConfig(
            **llama, hidden_act="silu", attention_bias=False, mlp_bias=False,
            attention_dropout=0.0, use_cache=True)
        torch.manual_seed(MODEL_SEED)
        model = transformers.LlamaForCausalLM(config)
    model.config._attn_implementation = args.attn
    model.config.eos_token_id = EOS
    model.config.pad_token_id = PAD
    model.config.bos_token_id = None
    model.generation_config.eos_token_id = EOS
    model.generation_config.pad_token_id = PAD
    model.generation_config.bos_token_id = None
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)
    build_tokenizer(llama["vocab_size"]).save_pretrained(args.model_dir)
    count = sum(p.numel() for p in model.parameters())
    description = (
        f"{model_name(args)}: Llama {llama['num_hidden_layers']} layers x "
        f"{llama['hidden_size']} hidden, {llama['num_attention_heads']} heads "
        f"({llama['num_key_value_heads']} kv), intermediate {llama['intermediate_size']}, "
        f"vocab {llama['vocab_size']}, {count:,} parameters fp32, {args.attn} attention, "
        f"weights: {source}")
    with open(stamp_path, "w") as handle:
        json.dump({"stamp": stamp, "description": description}, handle)
    return description


def versions():
    import importlib.metadata as md
    out = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "trl", "deepspeed", "accelerate", "datasets"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


#===------------------------------------------------------------------------===#
# Worker (one process per rank)
#===------------------------------------------------------------------------===#

class Probe:
    """Phase timers and collective counters of one rank."""

    def __init__(self):
        self.phase = "other"
        self.counting = False
        self.cycle = None  # dict of the cycle in progress
        self.cycles = []
        self.setup_counts = {}

    def new_cycle(self):
        self.cycle = {"seconds": {p: 0.0 for p in PHASES}, "collectives": {}, "steps": 0}

    def count(self, name, nbytes):
        if self.cycle is None or not self.counting:
            target = self.setup_counts
            key = name
        else:
            target = self.cycle["collectives"]
            key = f"{self.phase}/{name}"
        entry = target.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += nbytes

    def add(self, phase, seconds):
        if self.cycle is not None:
            self.cycle["seconds"][phase] += seconds


PROBE = Probe()


def tensor_bytes(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def install_counters():
    """Wraps torch.distributed's collectives (before deepspeed.comm binds
    all_gather_into_tensor / reduce_scatter_tensor at its init)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    def wrap(name, original):
        def counted(*args, **kwargs):
            tensors = list(args[:2]) + [v for k, v in kwargs.items()
                                        if k in ("output", "input", "tensor", "output_tensor",
                                                 "input_tensor", "tensor_list", "input_list",
                                                 "output_tensor_list", "tensors",
                                                 "output_tensors", "input_tensors")]
            PROBE.count(name, max((tensor_bytes(t) for t in tensors), default=0))
            return original(*args, **kwargs)
        counted.bench_counted = True
        return counted

    for name in COUNTED:
        for module in (dist, c10d):
            original = getattr(module, name, None)
            if original is not None and not getattr(original, "bench_counted", False):
                setattr(module, name, wrap(name, original))


def instrument(trainer, num_iterations):
    """Wraps the trainer's methods (on the instance) to time the phases."""
    from transformers import TrainerCallback
    clock = time.perf_counter
    state = {"in_score": False, "train_start": None, "last_cycle_end": None}

    def timed(phase, fn, inner=None):
        def wrapper(*args, **kwargs):
            outer = PROBE.phase
            PROBE.phase = phase if inner is None else inner(args, kwargs)
            begin = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                PROBE.add(PROBE.phase, clock() - begin)
                PROBE.phase = outer
        return wrapper

    generate = trainer._generate
    timed_generate = timed("generate", generate)

    def generate_wrapper(prompts, *args, **kwargs):
        # What this rank generates for: its own prompts (data parallel).
        PROBE.cycle.setdefault("prompts", []).extend(p[:40] for p in prompts)
        return timed_generate(prompts, *args, **kwargs)
    trainer._generate = generate_wrapper

    logps = trainer._get_per_token_logps_and_entropies

    def logps_phase(args, kwargs):
        model = args[0] if args else kwargs.get("model")
        if not state["in_score"]:
            return "train"
        return "logprobs_ref" if model is trainer.ref_model else "logprobs_old"

    def logps_wrapper(*args, **kwargs):
        phase = logps_phase(args, kwargs)
        if phase == "train":  # inside the train phase already; not timed apart
            return logps(*args, **kwargs)
        return timed(phase, logps)(*args, **kwargs)
    trainer._get_per_token_logps_and_entropies = logps_wrapper

    score = trainer._generate_and_score_completions

    def score_wrapper(*args, **kwargs):
        state["in_score"] = True
        outer = PROBE.phase
        PROBE.phase = "score"
        begin = clock()
        spent_before = sum(PROBE.cycle["seconds"][p] for p in
                           ("generate", "logprobs_old", "logprobs_ref"))
        try:
            return score(*args, **kwargs)
        finally:
            spent = sum(PROBE.cycle["seconds"][p] for p in
                        ("generate", "logprobs_old", "logprobs_ref")) - spent_before
            PROBE.add("score", clock() - begin - spent)
            PROBE.phase = outer
            state["in_score"] = False
    trainer._generate_and_score_completions = score_wrapper

    prepare_inputs = trainer._prepare_inputs

    def prepare_wrapper(*args, **kwargs):
        PROBE.phase = "other"
        try:
            return prepare_inputs(*args, **kwargs)
        finally:
            PROBE.phase = "train"
            state["train_start"] = clock()
    trainer._prepare_inputs = prepare_wrapper

    class Cycles(TrainerCallback):
        def on_train_begin(self, args, st, control, **kwargs):
            PROBE.counting = True
            PROBE.new_cycle()
            state["last_cycle_end"] = clock()

        def on_step_end(self, args, st, control, **kwargs):
            now = clock()
            if state["train_start"] is not None:
                PROBE.add("train", now - state["train_start"])
                state["train_start"] = None
            PROBE.phase = "other"
            PROBE.cycle["steps"] += 1
            if PROBE.cycle["steps"] == num_iterations:
                PROBE.cycle["iteration"] = now - state["last_cycle_end"]
                PROBE.cycles.append(PROBE.cycle)
                PROBE.new_cycle()
                state["last_cycle_end"] = clock()

    trainer.add_callback(Cycles())


def zero_settings(args, hidden):
    """zero_optimization of the DeepSpeed config. By default the values
    transformers gives "auto" for the model's hidden size h (reduce bucket
    h^2, prefetch bucket 0.9 h^2, persistence threshold 10 h), written out:
    GRPOTrainer builds the reference engine in its __init__, before
    transformers fills "auto" (at train start), and DeepSpeed drops "auto"
    values (deepspeed/runtime/config_utils.py), so with "auto" the reference
    runs with DeepSpeed's defaults (1e5, 5e7, 5e8) while the policy runs with
    h-derived ones; TRL's prepare_deepspeed means to set them but writes
    dotted top-level keys ("zero_optimization.reduce_bucket_size": ...,
    trl/models/utils.py) that DeepSpeed does not read. --ds-auto keeps "auto"
    (what an HF config file usually says)."""
    if args.ds_auto:
        zero = {"stage": 3, "reduce_bucket_size": "auto",
                "stage3_prefetch_bucket_size": "auto",
                "stage3_param_persistence_threshold": "auto"}
    else:
        zero = {"stage": 3, "reduce_bucket_size": hidden * hidden,
                "stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
                "stage3_param_persistence_threshold": 10 * hidden}
    if args.persistence_threshold is not None:
        zero["stage3_param_persistence_threshold"] = args.persistence_threshold
    return zero


def engine_zero_config(engine):
    """The ZeRO settings a DeepSpeed engine actually runs with."""
    zero = getattr(getattr(engine, "_config", None), "zero_config", None)
    if zero is None:
        return None
    return {k: getattr(zero, k, None) for k in (
        "stage", "param_persistence_threshold", "prefetch_bucket_size", "reduce_bucket_size",
        "max_live_parameters", "max_reuse_distance")}


def zero3_params(model):
    """How ZeRO-3 holds a model's parameters on this rank, after training:
    elements in all, held in this rank's partitions, and parameters still
    gathered (ds_status AVAILABLE) or persistent (never partitioned)."""
    module = getattr(model, "module", model)
    total = held = available = persistent = count = 0
    for p in module.parameters():
        count += 1
        total += getattr(p, "ds_numel", p.numel())
        tensor = getattr(p, "ds_tensor", None)
        held += tensor.numel() if tensor is not None else p.numel()
        status = getattr(p, "ds_status", None)
        available += status is not None and status.name == "AVAILABLE"
        persistent += bool(getattr(p, "ds_persist", False))
    return {"parameters": count, "elements": total, "held_elements": held,
            "gathered_after_training": available, "persistent": persistent}


def reward_low_half(completions, completion_ids, **kwargs):
    """Fraction of completion tokens whose id is below V/2 (V from the
    environment of the worker)."""
    half = int(os.environ["GRPO_PEERS_VOCAB"]) // 2
    return [sum(1 for t in ids if t < half) / max(1, len(ids)) for ids in completion_ids]


def diagnose():
    """accelerate's view of the processes against torch.distributed's (the
    mismatch behind the failure without use_cpu)."""
    out = {}
    try:
        import torch.distributed as dist
        from accelerate import PartialState
        state = PartialState()
        out["accelerate"] = {"backend": state.backend, "num_processes": state.num_processes,
                             "distributed_type": str(state.distributed_type),
                             "device": str(state.device)}
        if dist.is_initialized():
            out["torch.distributed"] = {"backend": dist.get_backend(),
                                        "world_size": dist.get_world_size()}
    except Exception as exc:  # noqa: BLE001
        out["failed"] = repr(exc)
    return out


def worker(args):
    import torch
    torch.set_num_threads(1)
    install_counters()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    result = {"rank": rank, "versions": versions()}
    try:
        import random
        from datasets import Dataset
        from transformers import PreTrainedTokenizerFast
        from trl import GRPOConfig, GRPOTrainer

        tokenizer = PreTrainedTokenizerFast.from_pretrained(args.model_dir)
        with open(os.path.join(args.model_dir, "config.json")) as handle:
            hidden = json.load(handle)["hidden_size"]
        vocab = len(tokenizer)
        os.environ["GRPO_PEERS_VOCAB"] = str(vocab)
        cycles = args.warmup + args.iterations
        rng = random.Random(PROMPT_SEED)
        prompts = [" ".join(f"t{rng.randrange(3, vocab)}" for _ in range(args.prompt_length))
                   for _ in range(cycles * world * args.prompts_per_rank)]
        dataset = Dataset.from_dict({"prompt": prompts})
        ds_config = {
            "zero_optimization": zero_settings(args, hidden),
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto",
            "gradient_clipping": "auto",
            "bf16": {"enabled": False}, "fp16": {"enabled": False},
            "steps_per_print": 1 << 30,
            "wall_clock_breakdown": False,
        }
        generation_kwargs = {} if args.allow_eos else {"min_new_tokens": args.max_completion_length}
        extra = {}
        if args.dist_setup == "configured-state":
            # accelerate's PartialState, made here with backend "gloo" and
            # DeepSpeed on; the Trainer then uses it as it is.
            from accelerate import PartialState
            os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
            PartialState(backend="gloo")
            del os.environ["ACCELERATE_USE_DEEPSPEED"]
            extra["accelerator_config"] = {"use_configured_state": True}
        elif args.dist_setup == "init-gloo":
            torch.distributed.init_process_group("gloo")
        elif args.dist_setup == "ddp-backend":
            extra["ddp_backend"] = "gloo"
        config = GRPOConfig(
            output_dir=os.path.join(args.work_dir, "trainer"),
            # --accelerate-config: `accelerate launch --config_file` supplies
            # the DeepSpeed plugin (ACCELERATE_USE_DEEPSPEED and friends).
            deepspeed=None if args.accelerate_config else ds_config,
            # use_cpu=True is what makes it run on CPU ranks (see the
            # docstring); DeepSpeed stays on (distributed_type DEEPSPEED).
            use_cpu=args.use_cpu,
            bf16=False, fp16=False,
            per_device_train_batch_size=args.prompts_per_rank * args.num_generations,
            gradient_accumulation_steps=1,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            num_iterations=args.num_iterations,
            beta=BETA,
            learning_rate=LR,
            max_steps=cycles * args.num_iterations,
            gradient_checkpointing=args.gradient_checkpointing,
            use_vllm=False,
            ds3_gather_for_generation=not args.no_ds3_gather_for_generation,
            generation_kwargs=generation_kwargs,
            logging_steps=1 << 20,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            shuffle_dataset=False,
            dataloader_num_workers=0,
            seed=0,
            **extra,
        )
        trainer = GRPOTrainer(model=args.model_dir, reward_funcs=reward_low_half, args=config,
                              train_dataset=dataset, processing_class=tokenizer)
        result["setup"] = {
            "distributed_type": str(trainer.accelerator.distributed_type),
            "device": str(trainer.accelerator.device),
            "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
            "ref_model": type(trainer.ref_model).__name__,
            "model_wrapped": type(trainer.model_wrapped).__name__,
            "loss_type": config.loss_type,
            "ds3_gather_for_generation": config.ds3_gather_for_generation,
            "steps_per_generation": config.steps_per_generation,
        }
        instrument(trainer, args.num_iterations)
        trainer.train()
        PROBE.counting = False
        result["setup"]["model_wrapped"] = type(trainer.model_wrapped).__name__
        result["setup"]["policy_zero"] = engine_zero_config(trainer.model_wrapped)
        result["setup"]["ref_zero"] = engine_zero_config(trainer.ref_model)
        result["setup"]["policy_params"] = zero3_params(trainer.model)
        result["setup"]["ref_params"] = zero3_params(trainer.ref_model)
        result["cycles"] = PROBE.cycles
        result["setup_collectives"] = PROBE.setup_counts
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
        result["frames"] = [f"{f.filename}:{f.lineno} ({f.name})"
                            for f in traceback.extract_tb(exc.__traceback__)]
        result["diagnosis"] = diagnose()
    with open(os.path.join(args.work_dir, f"rank{rank}.json"), "w") as handle:
        json.dump(result, handle)
    if "error" in result:
        print(result["traceback"], file=sys.stderr, flush=True)
        os._exit(1)  # a peer rank may be stuck in a collective; do not wait for it
    import torch.distributed as dist
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


#===------------------------------------------------------------------------===#
# Parent
#===------------------------------------------------------------------------===#

def launch(args, timeout):
    """Runs one worker per rank (torch.distributed env, one thread each,
    DS_ACCELERATOR=cpu); returns (results, error)."""
    port = 29500 + os.getpid() % 1000
    worker_args = ["--worker", "--work-dir", args.work_dir, "--model-dir", args.model_dir]
    for name in ("prompts_per_rank", "num_generations", "max_completion_length",
                 "prompt_length", "iterations", "warmup", "num_iterations"):
        worker_args += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    worker_args += ["--dist-setup", args.dist_setup]
    if args.persistence_threshold is not None:
        worker_args += ["--persistence-threshold", str(args.persistence_threshold)]
    if not args.use_cpu:
        worker_args.append("--no-use-cpu")
    for flag in ("allow_eos", "gradient_checkpointing", "ds_auto",
                 "no_ds3_gather_for_generation"):
        if getattr(args, flag):
            worker_args.append(f"--{flag.replace('_', '-')}")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="",
               TOKENIZERS_PARALLELISM="false")
    env.update(dict(kv.split("=", 1) for kv in args.env))
    for rank in range(args.world):
        path = os.path.join(args.work_dir, f"rank{rank}.json")
        if os.path.exists(path):
            os.remove(path)
    if args.accelerate_config:
        worker_args += ["--accelerate-config", args.accelerate_config]
    script = [os.path.abspath(__file__)] + worker_args
    procs, logs = [], []
    if args.launcher in ("torchrun", "accelerate"):
        # One torchrun (it sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*).
        # `accelerate launch` runs torchrun's elastic launcher in turn.
        bindir = os.path.dirname(sys.executable)
        if args.launcher == "torchrun":
            launcher = [os.path.join(bindir, "torchrun"), "--nproc_per_node", str(args.world),
                        "--master_addr", "127.0.0.1", "--master_port", str(port)]
        else:
            launcher = [os.path.join(bindir, "accelerate"), "launch", "--config_file",
                        args.accelerate_config, "--num_processes", str(args.world),
                        "--main_process_port", str(port)]
        log = open(os.path.join(args.work_dir, "ranks.log"), "w")
        logs.append(log)
        procs.append(subprocess.Popen(
            launcher + script,
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    else:
        # One process per rank, as train_peers.py launches its peers.
        for rank in range(args.world):
            rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank),
                            WORLD_SIZE=str(args.world), LOCAL_WORLD_SIZE=str(args.world),
                            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            log = open(os.path.join(args.work_dir, f"rank{rank}.log"), "w")
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable] + script, env=rank_env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
    error = None
    deadline = time.time() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            error = error or f"timed out after {timeout:.0f} s"
            break
    # A rank that failed exits at once; give the others a moment, then stop
    # them (each was started in its own session: its process group is ours).
    grace = time.time() + 10
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.wait(timeout=max(0.1, grace - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
    for log in logs:
        log.close()
    results = []
    for rank in range(args.world):
        path = os.path.join(args.work_dir, f"rank{rank}.json")
        result = json.load(open(path)) if os.path.exists(path) else None
        if result and "error" in result:
            library = [f.split("site-packages/")[-1] for f in result["frames"]
                       if "site-packages" in f]
            where = " <- ".join(reversed(library[-4:])) or (result["frames"] or ["?"])[-1]
            trl_frames = [f for f in library if f.startswith("trl/")]
            if trl_frames and trl_frames[-1] not in library[-4:]:
                where += f" <- ... <- {trl_frames[-1]}"
            error = error or (f"rank {rank}: {result['error']} (at {where}); "
                              f"state: {json.dumps(result.get('diagnosis'))}")
        elif result is None:
            codes = [p.returncode for p in procs]
            error = error or (f"rank {rank} left no result (exit status {codes}); logs: "
                              f"{args.work_dir}/{'rank*' if args.launcher == 'spawn' else 'ranks'}.log")
        results.append(result)
    return (None if error else results), error


def summarize(results, args):
    timed = [r["cycles"][args.warmup:] for r in results]
    if not all(timed):
        raise RuntimeError(f"a rank recorded {min(len(r['cycles']) for r in results)} cycles, "
                           f"expected {args.warmup + args.iterations}")

    def med(values):
        return statistics.median(values)

    def phase(name):
        return max(med([c["seconds"][name] for c in cycles]) for cycles in timed)

    out = {p: phase(p) for p in PHASES}
    # Each rank generated K x G completions of its own K prompts.
    firsts = [cycles[0].get("prompts", []) for cycles in timed]
    out["rows_per_rank"] = len(firsts[0])
    out["distinct_prompts_per_rank"] = [len(set(f)) for f in firsts]
    out["ranks_share_prompts"] = bool(set(firsts[0]) & set(firsts[-1])) and len(firsts) > 1
    out["iteration"] = max(med([c["iteration"] for c in cycles]) for cycles in timed)
    out["other"] = max(med([c["iteration"] - sum(c["seconds"].values()) for c in cycles])
                       for cycles in timed)
    # Collectives: rank 0, the last timed cycle (the ranks issue the same; the
    # totals of every timed cycle are listed too).
    cycle = timed[0][-1]
    by_name, by_phase = {}, {}
    for key, (calls, nbytes) in cycle["collectives"].items():
        ph, name = key.split("/", 1)
        by_name.setdefault(name, [0, 0])
        by_name[name][0] += calls
        by_name[name][1] += nbytes
        by_phase.setdefault(ph, [0, 0])
        by_phase[ph][0] += calls
        by_phase[ph][1] += nbytes
    same = all(c["collectives"] == cycle["collectives"] for cycles in timed for c in cycles)
    out["collectives"] = {
        "total": sum(v[0] for v in by_name.values()),
        "bytes": sum(v[1] for v in by_name.values()),
        "by_name": {k: {"calls": v[0], "bytes": v[1]} for k, v in sorted(by_name.items())},
        "by_phase": {k: {"calls": v[0], "bytes": v[1]} for k, v in sorted(by_phase.items())},
        "same_every_cycle_and_rank": same,
        "totals_per_timed_cycle": [sum(v[0] for v in c["collectives"].values())
                                   for c in timed[0]],
    }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--prompts-per-rank", type=int, default=1, help="K (default 1)")
    parser.add_argument("--num-generations", type=int, default=4, help="G (default 4)")
    parser.add_argument("--max-completion-length", type=int, default=16, help="M (default 16)")
    parser.add_argument("--prompt-length", type=int, default=32, help="P (default 32)")
    parser.add_argument("--iterations", type=int, default=3,
                        help="timed GRPO iterations (cycles) after warm-up (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up cycles (default 1)")
    parser.add_argument("--num-iterations", type=int, default=1,
                        help="TRL num_iterations (mu): optimizer steps per generation batch; "
                             "> 1 makes TRL compute old log-probs (default 1)")
    parser.add_argument("--model", choices=["llama-156m", "custom"], default=None,
                        help="llama-156m (default): the bench model of generate_bench.py; "
                             "custom: its shape at --layers/--hidden/--heads/--vocab (implied "
                             "by any of them)")
    parser.add_argument("--layers", type=int, default=None, help="custom model (default 4)")
    parser.add_argument("--hidden", type=int, default=None, help="custom model (default 256)")
    parser.add_argument("--heads", type=int, default=None, help="custom model (default 4)")
    parser.add_argument("--vocab", type=int, default=None, help="custom model (default 2048)")
    parser.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa")
    parser.add_argument("--allow-eos", action="store_true",
                        help="let completions stop at EOS (default: exactly M tokens)")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="TRL's default; off here unless given")
    parser.add_argument("--dist-setup", default="trainer",
                        choices=["trainer", "configured-state", "init-gloo", "ddp-backend"],
                        help="how the process group and accelerate's state are made: "
                             "trainer (default): by GRPOConfig/Trainer alone; "
                             "configured-state: PartialState(backend='gloo') with DeepSpeed "
                             "on, made before GRPOConfig(accelerator_config="
                             "{'use_configured_state': True}) (runs without use_cpu too); "
                             "init-gloo: torch.distributed.init_process_group('gloo') first; "
                             "ddp-backend: GRPOConfig(ddp_backend='gloo')")
    parser.add_argument("--persistence-threshold", type=int, default=None,
                        help="zero_optimization.stage3_param_persistence_threshold "
                             "(default 10 x hidden); 0 shards every parameter")
    parser.add_argument("--ds-auto", action="store_true",
                        help='leave the ZeRO bucket sizes and persistence threshold "auto" '
                             "(the reference engine then gets DeepSpeed's defaults)")
    parser.add_argument("--no-ds3-gather-for-generation", action="store_true",
                        help="GRPOConfig(ds3_gather_for_generation=False): generate with "
                             "ZeRO-3 gathers per layer and token instead of one full gather. "
                             "Fails with TRL 1.16 (see the docstring)")
    parser.add_argument("--no-use-cpu", dest="use_cpu", action="store_false",
                        help="GRPOConfig(use_cpu=False): without the workaround (with "
                             "--dist-setup trainer, init-gloo or ddp-backend it fails)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment of the ranks")
    parser.add_argument("--work-dir", default=os.path.join(REPO_ROOT, "build", "grpo-peers"))
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--launcher", choices=["spawn", "torchrun", "accelerate"],
                        default="spawn",
                        help="spawn (default): one process per rank made here, as "
                             "train_peers.py does; torchrun: bench/.venv-rl/bin/torchrun; "
                             "accelerate: bench/.venv-rl/bin/accelerate launch with "
                             "--accelerate-config")
    parser.add_argument("--accelerate-config", metavar="YAML",
                        help="accelerate config file (distributed_type DEEPSPEED, "
                             "deepspeed_config zero_stage 3, use_cpu): the DeepSpeed settings "
                             "come from it, not from this script (implies --launcher accelerate)")
    parser.add_argument("--json", metavar="OUT", help="also write the JSON line to OUT")
    args = parser.parse_args()
    sizes = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 2048}
    if args.model is None:
        args.model = ("custom" if any(getattr(args, k) is not None for k in sizes)
                      else "llama-156m")
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.accelerate_config:
        args.launcher = "accelerate"
    args.model_dir = args.model_dir or os.path.join(args.work_dir, model_name(args))
    if args.worker:
        worker(args)
        return 0

    def finish(record):
        line = json.dumps(record)
        print(line, flush=True)
        if args.json:
            with open(args.json, "w") as handle:
                handle.write(line + "\n")
        return 0 if "error" not in record else 1

    try:
        import torch  # noqa: F401
        import trl  # noqa: F401
    except ImportError as exc:
        return finish({"peer": PEER, "error": f"{exc}; run with {RL_VENV}/bin/python"})
    os.makedirs(args.work_dir, exist_ok=True)
    vers = versions()
    print("# " + ", ".join(f"{k} {v}" for k, v in vers.items())
          + f", cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f} before", flush=True)
    print(f"# model: {prepare(args)}", flush=True)
    print(f"# {args.world} ranks (gloo, DS_ACCELERATOR=cpu, 1 thread each), K={args.prompts_per_rank} "
          f"prompts/rank x G={args.num_generations}, P={args.prompt_length}, "
          f"M={args.max_completion_length}, beta={BETA}, num_iterations={args.num_iterations}; "
          f"{args.warmup} warm-up + {args.iterations} timed iterations", flush=True)
    begin = time.time()
    results, error = launch(args, args.timeout)
    print(f"# ranks ran {time.time() - begin:.0f} s; logs in {args.work_dir}/"
          f"{'rank*' if args.launcher == 'spawn' else 'ranks'}.log",
          flush=True)
    if error:
        print(f"grpo_peers: {PEER} cannot run: {error}", flush=True)
        return finish({"peer": PEER, "error": error, "versions": vers})
    try:
        s = summarize(results, args)
    except RuntimeError as exc:
        return finish({"peer": PEER, "error": str(exc), "versions": vers})
    setup = results[0].get("setup", {})
    print(f"# setup: {json.dumps(setup)}")
    logprobs = s["logprobs_old"] + s["logprobs_ref"]
    print(f"iteration  {s['iteration']:8.3f} s")
    print(f"generate   {s['generate']:8.3f} s")
    print(f"logprobs   {logprobs:8.3f} s   (old {s['logprobs_old']:.3f}, ref {s['logprobs_ref']:.3f})")
    print(f"train      {s['train']:8.3f} s   ({args.num_iterations} optimizer step(s))")
    print(f"score      {s['score']:8.3f} s   (rewards, advantages)")
    print(f"other      {s['other']:8.3f} s   (data loading, logging)")
    print(f"# rank 0 generated {s['rows_per_rank']} completions per iteration; distinct prompts "
          f"per rank {s['distinct_prompts_per_rank']}, ranks share prompts: "
          f"{s['ranks_share_prompts']}")
    c = s["collectives"]
    print(f"collectives/iteration {c['total']} ({c['bytes'] / 2**20:.2f} MiB, rank 0): "
          + ", ".join(f"{k} {v['calls']}" for k, v in c["by_phase"].items()) + "; "
          + ", ".join(f"{k} {v['calls']}" for k, v in c["by_name"].items()))
    return finish({"peer": PEER, "iteration_s": s["iteration"], "generate_s": s["generate"],
                   "logprobs_s": logprobs, "logprobs_old_s": s["logprobs_old"],
                   "logprobs_ref_s": s["logprobs_ref"], "train_s": s["train"],
                   "score_s": s["score"], "other_s": s["other"], "collectives": c,
                   "config": {"world": args.world, "prompts_per_rank": args.prompts_per_rank,
                              "num_generations": args.num_generations,
                              "max_completion_length": args.max_completion_length,
                              "prompt_length": args.prompt_length,
                              "num_iterations": args.num_iterations, "beta": BETA,
                              "model": dict(name=model_name(args), **model_config(args)),
                              "timed_iterations": args.iterations,
                              "setup": setup},
                   "versions": vers})


if __name__ == "__main__":
    sys.exit(main())
