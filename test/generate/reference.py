"""The oracle for `zrun generate`: an onnxruntime greedy loop, FULL recompute.

Given a PLAIN causal-LM fixture (input_ids [batch, seq] -> logits [batch, seq,
V]) and a batch of right-padded prompts, each row is generated on its own: the
model is run on the row's prompt[:len] plus every token generated so far (no
cache: the whole sequence again at every step), and the next token is the
argmax of the last position's logits (the first index on a tie, as
numpy.argmax). A row stops after emitting --eos (EOS included) or after
--max-new-tokens tokens.

Files, in the layout of docs/generation.md section 5 (what `zrun generate --output
tokens.npy --logits-output logits.npy` writes):
  tokens  int64 [B, M]: the generated tokens per row; after a row's EOS the
          rest of the row is the EOS id
  logits  float32 [M, B, V]: at step k, row b, the logits that chose token
          [b, k] (step 0: the prompt's last position); zeros where row b had
          finished before step k

Modes:
  reference.py MODEL --prompts P.npy [--prompt-lengths L.npy] --max-new-tokens M
      [--eos ID] --tokens-output T.npy [--logits-output G.npy]
          writes the oracle's files
  reference.py MODEL --prompts P.npy ... --compare T.npy G.npy [--tolerance 1e-4]
          checks another run's files against the oracle: tokens identical,
          logits max |diff| <= tolerance where the row was still running at
          that step (the step that emits EOS included); prints the max diff
          and exits 1 on any mismatch, naming the row and step
  --bf16-ulps K (with --compare): the logits are bf16 values (zcc
          --compute-dtype bf16 rounds every product, the LM head's included),
          so one rounding that falls the other way between two GEMMs' sum
          orders moves a logit by a bf16 ulp, and one upstream moves the
          row's logits on the scale of its largest: each must lie within K
          bf16 ulps at the magnitude of its row's largest |logit| (in
          [2^e, 2^(e+1)): 2^(e-7)) instead of --tolerance; prints how many
          logits differ at all
  --cached KV_MODEL (instead of full recompute on MODEL): the same greedy loop
          through a cache export (past_key_values in, present out) fed its own
          present: an independent second route to the same tokens, used to
          check this oracle and the cache exports against each other

prompts: int64 (int32 accepted) [B, Pmax]; lengths: int64 or int32 [B], each
in 1..Pmax (default: every row Pmax). Token ids must lie in the vocabulary.
"""
import argparse
import sys

import numpy as np
import onnxruntime as ort


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def load_inputs(args):
    prompts = np.load(args.prompts)
    if prompts.dtype not in (np.int64, np.int32) or prompts.ndim != 2 or prompts.shape[1] < 1:
        raise SystemExit(f"reference: {args.prompts}: prompts must be int64 or int32 "
                         f"[B, Pmax], not {prompts.dtype} {list(prompts.shape)}")
    prompts = prompts.astype(np.int64)
    batch, width = prompts.shape
    if args.prompt_lengths:
        lengths = np.load(args.prompt_lengths)
        if lengths.dtype not in (np.int64, np.int32) or lengths.shape != (batch,):
            raise SystemExit(f"reference: {args.prompt_lengths}: lengths must be int64 [{batch}], "
                             f"not {lengths.dtype} {list(lengths.shape)}")
        lengths = lengths.astype(np.int64)
    else:
        lengths = np.full((batch,), width, dtype=np.int64)
    for row, length in enumerate(lengths):
        if not 1 <= length <= width:
            raise SystemExit(f"reference: row {row}: prompt length {length} is not in 1..{width}")
    if args.max_new_tokens < 1:
        raise SystemExit("reference: --max-new-tokens must be at least 1")
    return prompts, lengths


class FullRecompute:
    """Logits of the last position of a whole sequence, recomputed each time."""

    def __init__(self, path):
        self.session = session(path)

    def start(self, tokens):
        self.tokens = list(tokens)
        return self._last()

    def step(self, token):
        self.tokens.append(int(token))
        return self._last()

    def _last(self):
        ids = np.array([self.tokens], dtype=np.int64)
        (logits,) = self.session.run(["logits"], {"input_ids": ids})
        return logits[0, -1]


class CachedLoop:
    """The same logits through a cache export: each call feeds only the new
    tokens and the previous call's present as the past."""

    def __init__(self, path):
        self.session = session(path)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.past_inputs = [i for i in self.session.get_inputs()
                            if i.name.startswith("past_key_values.")]

    def start(self, tokens):
        # A zero-length past of the right heads and head size.
        self.past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
                     for i in self.past_inputs}
        self.length = 0
        return self._feed(list(tokens))

    def step(self, token):
        return self._feed([int(token)])

    def _feed(self, tokens):
        start, stop = self.length, self.length + len(tokens)
        feed = {"input_ids": np.array([tokens], dtype=np.int64),
                "attention_mask": np.ones((1, stop), dtype=np.int64),
                "position_ids": np.arange(start, stop, dtype=np.int64)[None, :]}
        feed.update(self.past)
        results = dict(zip(self.outputs, self.session.run(self.outputs, feed)))
        self.past = {name: results["present." + name[len("past_key_values."):]]
                     for name in self.past}
        self.length = stop
        return results["logits"][0, -1]


def generate(model, prompts, lengths, max_new, eos):
    """tokens [B, M] int64 and logits [M, B, V] float32, as the module says;
    also the smallest gap between the top two logits of any step (how close
    the greedy choice came to a tie)."""
    batch = prompts.shape[0]
    tokens = np.zeros((batch, max_new), dtype=np.int64)
    steps = []
    closest = np.inf
    for row in range(batch):
        logits = model.start(prompts[row, :lengths[row]])
        row_logits = []
        for k in range(max_new):
            token = int(np.argmax(logits))
            top2 = np.partition(logits, -2)[-2:]
            closest = min(closest, float(top2[1] - top2[0]))
            tokens[row, k] = token
            row_logits.append(logits.astype(np.float32))
            if eos is not None and token == eos:
                tokens[row, k + 1:] = eos
                break
            if k + 1 < max_new:
                logits = model.step(token)
        steps.append(row_logits)
    vocab = len(steps[0][0])
    out = np.zeros((max_new, batch, vocab), dtype=np.float32)
    for row, row_logits in enumerate(steps):
        for k, logits in enumerate(row_logits):
            out[k, row] = logits
    return tokens, out, closest


def running_mask(tokens, eos):
    """[M, B]: True where the row was still running at that step (the step
    that emits EOS is the row's last running step)."""
    batch, max_new = tokens.shape
    mask = np.ones((max_new, batch), dtype=bool)
    if eos is None:
        return mask
    for row in range(batch):
        hits = np.nonzero(tokens[row] == eos)[0]
        if hits.size:
            mask[hits[0] + 1:, row] = False
    return mask


def compare(args, tokens, logits, closest):
    got_tokens = np.load(args.compare[0])
    got_logits = np.load(args.compare[1])
    if got_tokens.dtype != np.int64 or got_tokens.shape != tokens.shape:
        print(f"FAIL {args.compare[0]}: tokens are {got_tokens.dtype} {list(got_tokens.shape)}, "
              f"the oracle's int64 {list(tokens.shape)}")
        return 1
    if got_logits.dtype != np.float32 or got_logits.shape != logits.shape:
        print(f"FAIL {args.compare[1]}: logits are {got_logits.dtype} {list(got_logits.shape)}, "
              f"the oracle's float32 {list(logits.shape)}")
        return 1
    mask = running_mask(tokens, args.eos)
    diff = np.where(mask[:, :, None], np.abs(got_logits.astype(np.float64) - logits), 0.0)
    worst = float(diff.max())
    where = np.unravel_index(int(np.argmax(diff)), diff.shape)
    status = 0
    ulps_text = ""
    if args.bf16_ulps is not None:
        # One bf16 ulp at the magnitude of the row's largest logit: a rounding
        # upstream moves every logit of the row on that scale, not its own.
        scale = np.abs(logits.astype(np.float64)).max(axis=2, keepdims=True)
        exponent = np.floor(np.log2(np.maximum(scale, 2.0**-126)))
        ulps = diff / np.exp2(exponent - 7)
        worst_ulps = float(ulps.max())
        where = np.unravel_index(int(np.argmax(ulps)), ulps.shape)
        differ = int(np.count_nonzero(diff))
        ulps_text = (f", {worst_ulps:.2f} bf16 ulps; {differ} of {int(mask.sum()) * logits.shape[2]} "
                     f"logits differ")
        if not worst_ulps <= args.bf16_ulps:
            print(f"FAIL logits: {worst_ulps:.2f} bf16 ulps (|diff| {diff[where]:.3e}) > "
                  f"{args.bf16_ulps:g} at step {where[0]}, row {where[1]}, token id {where[2]}")
            status = 1
    elif not worst <= args.tolerance:  # also catches NaN
        print(f"FAIL logits: max |diff| {worst:.3e} > {args.tolerance:g} at step {where[0]}, "
              f"row {where[1]}, token id {where[2]}")
        status = 1
    wrong = np.argwhere(got_tokens != tokens)
    if wrong.size:
        row, step = (int(v) for v in wrong[0])
        print(f"FAIL tokens: {len(wrong)} differ; first at row {row}, step {step}: "
              f"{got_tokens[row, step]}, the oracle {tokens[row, step]} "
              f"(closest top-2 gap of the oracle {closest:.3e})")
        status = 1
    if status == 0:
        print(f"ok tokens identical ({tokens.shape[0]} rows x {tokens.shape[1]} steps, "
              f"{int(mask.sum())} running row-steps); logits max |diff| {worst:.3e}{ulps_text}")
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="the plain fixture (input_ids -> logits)")
    parser.add_argument("--cached", metavar="KV_MODEL",
                        help="generate through this cache export instead of full recompute")
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--prompt-lengths")
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--eos", type=int)
    parser.add_argument("--tokens-output")
    parser.add_argument("--logits-output")
    parser.add_argument("--compare", nargs=2, metavar=("TOKENS", "LOGITS"))
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--bf16-ulps", type=float)
    args = parser.parse_args()
    if (args.model is None) == (args.cached is None):
        parser.error("give either MODEL (full recompute) or --cached KV_MODEL")
    if not (args.compare or args.tokens_output):
        parser.error("give --tokens-output (write the oracle) or --compare (check a run)")

    prompts, lengths = load_inputs(args)
    model = FullRecompute(args.model) if args.model else CachedLoop(args.cached)
    vocab = model.session.get_outputs()[0].shape[-1]  # logits [..., V]
    for row, length in enumerate(lengths if isinstance(vocab, int) else []):
        bad = [int(t) for t in prompts[row, :length] if not 0 <= t < vocab]
        if bad:
            raise SystemExit(f"reference: {args.prompts}: row {row}: token id {bad[0]} is "
                             f"outside the vocabulary 0..{vocab - 1}")
    tokens, logits, closest = generate(model, prompts, lengths, args.max_new_tokens, args.eos)
    if args.tokens_output:
        np.save(args.tokens_output, tokens)
    if args.logits_output:
        np.save(args.logits_output, logits)
    if args.compare:
        return compare(args, tokens, logits, closest)
    print(f"wrote {tokens.shape[0]} rows x {tokens.shape[1]} tokens; "
          f"closest top-2 gap {closest:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
