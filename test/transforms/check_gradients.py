"""Checks zplan-autodiff's gradients numerically.

Reads the output of `zcc-opt -zplan-autodiff --mlir-print-op-generic`,
interprets @train_micro_step in float64 numpy (the forward ops, the loss, the
backward ops with reference implementations written from the math their
descriptions in dialects/nn/NNOps.td give), and compares the gradient each
zero.reduce_scatter_start receives for a parameter with a central finite
difference of the loss along a random direction:
    (L(p + eps d) - L(p - eps d)) / (2 eps)  ==  sum(grad_p * d).
Parameters and float inputs are random; integer inputs are random in
[0, --int-bound) (input_ids: [0, vocabulary), read from the logits).
With --onnx MODEL, the parameters are the model's weights and the
interpreted logits must first match onnxruntime's on the same tokens, so the
gradients checked are those of the model itself, not only of the IR.

Usage: check_gradients.py TRAIN.mlir [--int-bound N] [--positive]
                          [--onnx MODEL.onnx] [--tolerance T]
The file may hold several modules (zcc-opt -split-input-file). Prints one
line per parameter; exits 1 if any relative error exceeds T (or a
parameter has no reduce-scatter).
"""

import argparse
import math
import re
import sys

import numpy as np

# Out-of-domain inputs are reported as a non-finite loss, not as warnings.
np.seterr(all="ignore")

# --------------------------------------------------------------------------
# Parsing the generic form
# --------------------------------------------------------------------------

OP_RE = re.compile(
    r'^\s*(?:(%[\w]+)(?::(\d+))?\s*=\s*)?"([\w.]+)"\((.*?)\)\s*(<\{.*\}>)?\s*'
    r'(\{.*\})?\s*:\s*\((.*?)\)\s*->\s*(.*)$')


def split_top(text, sep=','):
    """Splits at `sep` outside brackets, angle brackets and quotes."""
    parts, depth, quote, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == '"':
            quote = not quote
        elif quote:
            continue
        elif ch in '<[({':
            depth += 1
        elif ch in '>])}':
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_type(text):
    """tensor<2x8xf32> -> ((2, 8), 'f32'); others -> (None, text)."""
    m = re.match(r'tensor<(.*)>$', text.strip())
    if not m:
        return (None, text.strip())
    dims = m.group(1).split('x')
    return (tuple(int(d) for d in dims[:-1]), dims[-1])


NP_TYPES = {'f16': np.float64, 'bf16': np.float64, 'f32': np.float64,
            'f64': np.float64, 'i64': np.int64, 'i32': np.int64,
            'i8': np.int64, 'i1': np.bool_}
RAW_TYPES = {'f32': '<f4', 'f64': '<f8', 'f16': '<f2', 'i64': '<i8',
             'i32': '<i4', 'i8': '<i1', 'i1': '<u1'}


def parse_dense(text):
    """dense<...> : tensor<...> -> numpy array."""
    m = re.match(r'dense<(.*)>\s*:\s*(tensor<.*>)$', text.strip(), re.S)
    body, (shape, elem) = m.group(1), parse_type(m.group(2))
    count = int(np.prod(shape)) if shape else 1
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        values = np.frombuffer(raw, dtype=RAW_TYPES[elem])
        if values.size == 1:
            values = np.repeat(values, count)
        return values.reshape(shape).astype(NP_TYPES[elem])
    body = body.replace('true', '1').replace('false', '0')
    values = np.array(eval(body), dtype=np.float64)  # nested lists / scalar
    if values.ndim == 0:
        values = np.full(shape, values)
    return values.reshape(shape).astype(NP_TYPES[elem])


def parse_attrs(text):
    attrs = {}
    if not text:
        return attrs
    inner = text.strip()
    inner = inner[2:-2] if inner.startswith('<{') else inner[1:-1]
    for item in split_top(inner):
        if '=' not in item:
            attrs[item] = True
            continue
        key, value = item.split('=', 1)
        key, value = key.strip(), value.strip()
        if value.startswith('dense<'):
            attrs[key] = parse_dense(value)
        elif value.startswith('array<'):
            nums = value[value.index(':') + 1:-1] if ':' in value else ''
            attrs[key] = [int(v) for v in nums.split(',') if v.strip()]
        elif value.startswith('"'):
            attrs[key] = value[1:-1]
        elif value.startswith('@'):
            attrs[key] = value[1:].strip('"')
        elif value in ('true', 'false'):
            attrs[key] = value == 'true'
        else:
            number = value.split(':')[0].strip()
            attrs[key] = float(number) if any(
                c in number for c in '.eE') else int(number)
    return attrs


def parse_function(text, name):
    """The ops of func `name`: (results, op name, operands, attrs, types)."""
    lines = text.split('\n')
    start = next(i for i, l in enumerate(lines)
                 if f'sym_name = "{name}"' in l)
    args = re.findall(r'(%arg\d+): (tensor<[^>]*>)', lines[start + 1])
    arg_names = re.search(r'arg_attrs = \[(.*?)\], function_type', lines[start])
    names = re.findall(r'nn.name = "([^"]*)"', arg_names.group(1)) \
        if arg_names else []
    ops = []
    for line in lines[start + 2:]:
        if line.strip().startswith('"func.return"'):
            ret = re.search(r'\((.*?)\)', line).group(1)
            return args, names, ops, ret.strip()
        m = OP_RE.match(line)
        if not m:
            raise SystemExit(f'cannot parse: {line[:200]}')
        result, count, opname, operands, props, discard, _, rtypes = \
            m.groups()
        attrs = parse_attrs(props)
        attrs.update(parse_attrs(discard))
        rtypes = rtypes.strip()
        if rtypes.startswith('('):
            rtypes = rtypes[1:-1]
        types = [parse_type(t) for t in split_top(rtypes)]
        results = []
        if result:
            results = [result] if not count else [
                f'{result}#{i}' for i in range(int(count))]
        ops.append((results, opname, [o.strip() for o in operands.split(',')
                                      if o.strip()], attrs, types))
    raise SystemExit('no func.return')


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------

ERF = np.vectorize(math.erf)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x, approximate):
    if approximate == 'tanh':
        return 0.5 * x * (1 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + ERF(x / math.sqrt(2.0)))


def gelu_grad(dy, x, approximate):
    if approximate == 'tanh':
        t = np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3))
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI *
                     (1 + 3 * 0.044715 * x * x))
    cdf = 0.5 * (1 + ERF(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return dy * (cdf + x * pdf)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def norm_axes(x, axis):
    return tuple(range(axis, x.ndim))


def layer_norm(x, w, b, axis, eps):
    axes = norm_axes(x, axis)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean)**2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def layer_norm_grad(dy, x, w, axis, eps):
    axes = norm_axes(x, axis)
    lead = tuple(range(axis))
    mean = x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean)**2).mean(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    g = dy * w
    dx = rstd * (g - g.mean(axis=axes, keepdims=True) -
                 xhat * (g * xhat).mean(axis=axes, keepdims=True))
    return dx, (dy * xhat).sum(axis=lead), dy.sum(axis=lead)


def rms_norm(x, w, eps):
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def rms_norm_grad(dy, x, w, eps):
    rstd = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    xhat = x * rstd
    g = dy * w
    dx = rstd * (g - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, x.shape[-1]).sum(axis=0)


def swap(x):
    return np.swapaxes(x, -1, -2)


def attention_probs(q, k, mask, a):
    s = q @ swap(k) * a['scale']
    if mask is not None:
        if a.get('mask_kind', 'additive') == 'select':
            s = np.where(mask, s, a['masked_value'])
        else:
            s = s + mask
    return softmax(s, -1)


def attention_grad(do, q, k, v, mask, a):
    p = attention_probs(q, k, mask, a)
    dv = swap(p) @ do
    dp = do @ swap(v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    if mask is not None and a.get('mask_kind', 'additive') == 'select':
        ds = np.where(mask, ds, 0.0)
    dq = ds @ k * a['scale']
    dk = swap(ds) @ q * a['scale']
    # Broadcast leading dimensions cannot occur (same leading dims).
    return dq, dk, dv


def cross_entropy_rows(logits, targets, ignore):
    v = logits.shape[-1]
    rows = logits.reshape(-1, v)
    t = targets.reshape(-1)
    counted = t != ignore
    return rows, t, counted


def cross_entropy(logits, targets, ignore):
    rows, t, counted = cross_entropy_rows(logits, targets, ignore)
    if not counted.any():
        return np.array(0.0)
    m = rows.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(rows - m).sum(axis=1, keepdims=True)))[:, 0]
    picked = rows[np.arange(len(t)), np.where(counted, t, 0)]
    return np.array(((lse - picked)[counted]).mean())


def cross_entropy_grad(logits, targets, dloss, ignore):
    rows, t, counted = cross_entropy_rows(logits, targets, ignore)
    count = counted.sum()
    d = softmax(rows, 1)
    d[np.arange(len(t))[counted], t[counted]] -= 1
    d[~counted] = 0
    d = d * dloss / max(count, 1)
    return d.reshape(logits.shape)


def scatter_add(shape, axis, indices, dy):
    out = np.zeros(shape)
    moved = np.moveaxis(out, axis, 0)
    k = indices.ndim
    dy_moved = np.moveaxis(dy, list(range(axis, axis + k)), list(range(k)))
    dy_flat = dy_moved.reshape((-1,) + moved.shape[1:])
    np.add.at(moved, indices.reshape(-1) % shape[axis], dy_flat)
    return out


def strided_index(starts, steps, shape):
    return np.ix_(*[s + st * np.arange(n)
                    for s, st, n in zip(starts, steps, shape)])


def run_op(name, x, a, types):
    shape = types[0][0] if types else None
    elem = types[0][1] if types else None
    unary = {'nn.neg': np.negative, 'nn.abs': np.abs, 'nn.sqrt': np.sqrt,
             'nn.reciprocal': lambda v: 1 / v, 'nn.exp': np.exp,
             'nn.log': np.log, 'nn.erf': ERF, 'nn.tanh': np.tanh,
             'nn.sigmoid': lambda v: 1 / (1 + np.exp(-v)),
             'nn.relu': lambda v: np.maximum(v, 0), 'nn.cos': np.cos,
             'nn.sin': np.sin, 'nn.silu': lambda v: v / (1 + np.exp(-v))}
    if name in unary:
        return [unary[name](x[0])]
    binary = {'nn.add': np.add, 'nn.sub': np.subtract, 'nn.mul': np.multiply,
              'nn.pow': np.power, 'nn.max': np.maximum, 'nn.min': np.minimum,
              'nn.equal': np.equal, 'nn.less': np.less,
              'nn.greater': np.greater}
    if name in binary:
        return [binary[name](x[0], x[1])]
    if name == 'nn.div':
        if elem in ('i64', 'i32'):
            return [np.trunc(x[0] / x[1]).astype(np.int64)]
        return [x[0] / x[1]]
    if name == 'nn.constant':
        return [a['value']]
    if name == 'nn.where':
        return [np.where(x[0], x[1], x[2])]
    if name == 'nn.cast':
        return [x[0].astype(NP_TYPES[elem]) if elem != 'i1'
                else x[0] != 0]
    if name == 'nn.gelu':
        return [gelu(x[0], a.get('approximate', 'none'))]
    if name == 'nn.matmul':
        rhs = swap(x[1]) if a.get('transpose_rhs') else x[1]
        y = np.matmul(x[0], rhs)
        return [y + x[2] if len(x) > 2 else y]
    if name == 'nn.transpose':
        return [np.transpose(x[0], a['perm'])]
    if name == 'nn.reshape':
        return [x[0].reshape(shape)]
    if name == 'nn.expand':
        return [np.broadcast_to(x[0], shape).copy()]
    if name == 'nn.slice':
        return [x[0][strided_index(a['starts'], a['steps'], shape)]]
    if name == 'nn.concat':
        return [np.concatenate(x, axis=a['axis'])]
    if name == 'nn.gather':
        idx = x[1] % x[0].shape[a['axis']]
        return [np.take(x[0], idx, axis=a['axis'])]
    if name == 'nn.embedding':
        return [x[0][x[1] % x[0].shape[0]]]
    if name in ('nn.reduce_sum', 'nn.reduce_mean', 'nn.reduce_max'):
        fn = {'nn.reduce_sum': np.sum, 'nn.reduce_mean': np.mean,
              'nn.reduce_max': np.max}[name]
        return [fn(x[0], axis=tuple(a['axes']), keepdims=a['keepdims'])]
    if name == 'nn.softmax':
        return [softmax(x[0], a['axis'])]
    if name == 'nn.layer_norm':
        seg = a.get('operandSegmentSizes', [1, len(x) > 1, len(x) > 2])
        w = x[1] if seg[1] else None
        b = x[1 + seg[1]] if seg[2] else None
        return [layer_norm(x[0], w, b, a['axis'], a['epsilon'])]
    if name == 'nn.rms_norm':
        return [rms_norm(x[0], x[1] if len(x) > 1 else None, a['epsilon'])]
    if name == 'nn.attention':
        p = attention_probs(x[0], x[1], x[3] if len(x) > 3 else None, a)
        return [p @ x[2]]
    if name == 'nn.cross_entropy':
        return [cross_entropy(x[0], x[1], a.get('ignore_index', -100))]
    if name == 'nn.cross_entropy_grad':
        return [cross_entropy_grad(x[0], x[1], x[2],
                                   a.get('ignore_index', -100))]
    if name == 'nn.embedding_grad':
        return [scatter_add(shape, 0, x[1], x[0])]
    if name == 'nn.gather_grad':
        return [scatter_add(shape, a['axis'], x[1], x[0])]
    if name == 'nn.slice_grad':
        out = np.zeros(shape)
        out[strided_index(a['starts'], a['steps'], x[0].shape)] = x[0]
        return [out]
    if name == 'nn.layer_norm_grad':
        return list(layer_norm_grad(x[0], x[1], x[2], a['axis'],
                                    a['epsilon']))
    if name == 'nn.rms_norm_grad':
        return list(rms_norm_grad(x[0], x[1], x[2], a['epsilon']))
    if name == 'nn.softmax_grad':
        dy, y = x
        return [y * (dy - (dy * y).sum(axis=a['axis'], keepdims=True))]
    if name == 'nn.attention_grad':
        return list(attention_grad(x[0], x[1], x[2], x[3],
                                   x[4] if len(x) > 4 else None, a))
    if name == 'nn.gelu_grad':
        return [gelu_grad(x[0], x[1], a.get('approximate', 'none'))]
    raise SystemExit(f'no kernel for {name}')


# --------------------------------------------------------------------------
# Running @train_micro_step
# --------------------------------------------------------------------------

class Program:

    def __init__(self, text):
        self.args, self.arg_names, self.ops, self.ret = parse_function(
            text, 'train_micro_step')
        self.loss_op = next(i for i, op in enumerate(self.ops)
                            if self.ret in op[0])

    def run(self, inputs, params, forward_only=False):
        env = dict(inputs)
        grads, tokens = {}, {}
        shard_param = {}
        last = self.loss_op if forward_only else len(self.ops) - 1
        for results, name, operands, attrs, types in self.ops[:last + 1]:
            if name in ('zero.shard', 'zero.grad_shard'):
                shard_param[results[0]] = attrs['param']
                continue
            if name == 'zero.gather_start':
                env[results[0]] = [shard_param[o] for o in operands]
                continue
            if name == 'zero.gather_wait':
                for r, p in zip(results, env[operands[0]]):
                    env[r] = params[p]
                continue
            if name == 'zero.reduce_scatter_start':
                tokens[results[0]] = [env[o] for o in operands]
                continue
            if name == 'zero.reduce_scatter_wait':
                for g, acc in zip(tokens[operands[0]], operands[1:]):
                    p = shard_param[acc]
                    assert p not in grads, f'two reduce-scatters for {p}'
                    grads[p] = g
                continue
            values = run_op(name, [env[o] for o in operands], attrs, types)
            for r, v in zip(results, values):
                env[r] = v
        self.env = env
        return float(env[self.ret]), grads


def load_weights(path):
    """The ONNX model's initializers by name, as float64 arrays."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    return {t.name: numpy_helper.to_array(t).astype(np.float64)
            for t in model.graph.initializer}


def check_against_onnxruntime(program, inputs, path):
    """The interpreted logits (the cross_entropy's operand) against
    onnxruntime's on the same tokens; returns the relative difference."""
    import onnxruntime
    session = onnxruntime.InferenceSession(
        path, providers=['CPUExecutionProvider'])
    feeds = {}
    for (arg, _), name in zip(program.args, program.arg_names):
        wanted = next((i for i in session.get_inputs() if i.name == name),
                      None)
        if wanted is not None:
            feeds[name] = inputs[arg].astype(
                np.int32 if 'int32' in wanted.type else np.int64)
    expected = session.run(['logits'], feeds)[0].astype(np.float64)
    loss_op = program.ops[program.loss_op]
    logits = program.env[loss_op[2][0]]
    return float(np.abs(logits - expected).max() / np.abs(expected).max())


def check_module(text, options, rng):
    """Checks one module's @train_micro_step; returns the worst error."""
    program = Program(text)
    weights = load_weights(options.onnx) if options.onnx else None
    params = {}
    for results, name, operands, attrs, types in program.ops:
        if name == 'zero.shard':
            shape, _ = parse_type(re.search(
                r'shard<(tensor<[^>]*>)>', text[text.index(
                    f'param = @{attrs["param"]}'):]).group(1))
            if weights is not None:
                params[attrs['param']] = weights[attrs['param']].reshape(shape)
                continue
            values = rng.normal(0, 0.5, shape)
            params[attrs['param']] = (np.abs(values) + 0.5
                                      if options.positive else values)
    losses = [op for op in program.ops if op[1] == 'nn.cross_entropy']
    inputs = {}
    for arg, type_text in program.args:
        shape, elem = parse_type(type_text)
        if elem == 'i1':
            inputs[arg] = rng.integers(0, 2, shape).astype(bool)
        elif elem.startswith('i'):
            bound = options.int_bound
            if not bound and losses:
                # Tokens index the vocabulary: the logits' last dimension.
                logits = losses[0][2][0]
                bound = next(op[4][0][0][-1] for op in program.ops
                             if logits in op[0])
            inputs[arg] = rng.integers(0, bound or 2, shape)
        else:
            values = rng.normal(0, 1.0, shape)
            inputs[arg] = (np.abs(values) + 0.5 if options.positive
                           else values)
    loss, grads = program.run(inputs, params)
    if not math.isfinite(loss) and options.skip_nonfinite:
        # log, sqrt or pow outside their domain: --positive covers them.
        print('skipped: the loss is not finite at these inputs')
        return 0.0
    missing = set(params) - set(grads)
    if missing:
        print('no reduce-scatter for', sorted(missing))
        return float('inf')
    print(f'loss {loss:.6f}')
    if options.onnx:
        difference = check_against_onnxruntime(program, inputs, options.onnx)
        print(f'logits against onnxruntime: max |difference| / max |logit| '
              f'{difference:.2e}')
        if difference > 1e-4:
            return float('inf')
    worst = 0.0
    eps = 1e-6
    for name in sorted(params):
        direction = rng.normal(0, 1.0, params[name].shape)
        analytic = float((grads[name] * direction).sum())
        shifted = dict(params)
        shifted[name] = params[name] + eps * direction
        plus, _ = program.run(inputs, shifted, forward_only=True)
        shifted[name] = params[name] - eps * direction
        minus, _ = program.run(inputs, shifted, forward_only=True)
        numeric = (plus - minus) / (2 * eps)
        error = abs(analytic - numeric) / max(abs(numeric), abs(analytic),
                                               1e-3)
        if not math.isfinite(error):
            error = float('inf')
        worst = max(worst, error)
        flag = 'ok' if error <= options.tolerance else 'MISMATCH'
        print(f'{flag} {name}: analytic {analytic:.8g} numeric {numeric:.8g}'
              f' relative error {error:.2e}')
    return worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('file')
    parser.add_argument('--int-bound', type=int, default=0,
                        help='integer inputs in [0, N) (default: the '
                        'vocabulary for a causal-lm loss, else 2)')
    parser.add_argument('--positive', action='store_true',
                        help='parameters and float inputs in [0.5, inf), '
                        'for log, sqrt, pow')
    parser.add_argument('--skip-nonfinite', action='store_true',
                        help='skip a module whose loss is not finite')
    parser.add_argument('--onnx',
                        help='the model the IR was imported from: use its '
                        'weights, and check the interpreted logits against '
                        'onnxruntime before differentiating')
    parser.add_argument('--tolerance', type=float, default=1e-5)
    parser.add_argument('--seed', type=int, default=0)
    options = parser.parse_args()
    rng = np.random.default_rng(options.seed)
    worst = 0.0
    # zcc-opt -split-input-file separates the modules it prints so.
    modules = open(options.file).read().split('// -----')
    for index, text in enumerate(modules):
        print(f'module {index}')
        worst = max(worst, check_module(text, options, rng))
    print(f'{len(modules)} modules, worst relative error {worst:.2e}')
    return 0 if worst <= options.tolerance else 1


if __name__ == '__main__':
    sys.exit(main())
