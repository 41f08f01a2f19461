#!/usr/bin/env python3
"""GPT-2 in plain JAX (jax.numpy and jax.lax, no Flax), the second framework beside PyTorch for
GPT's two points: batch-1 decoding and a training step.

    python3 bench/peers/jax_gpt2.py decode DIR --new 256 --rounds 3 --precision bf16 [--check-logits F] [--json F]
    python3 bench/peers/jax_gpt2.py train --batch 16 --seq 1024 --steps 10 --rounds 3 [--lr 6e-4]

decode  reads DIR as bench/peers/pytorch_gpt2.py export writes it (hf.safetensors: transformers'
        GPT2LMHeadModel state dict, Conv1D weights [in, out]; ids.safetensors; config.json) and
        generates --new greedy tokens after the first row of ids with a static key/value cache in
        two forms: "jit step" (one jitted one-token step per token, the cache donated, the tokens
        kept on the device: the form of PyTorch's compiled static-cache loop) and "jit scan" (the
        whole generation as one jitted lax.fori_loop: no host between tokens, the form of strata's
        captured step). Time per token = a generation's wall time (prompt's step included) over
        --new; median and range over --rounds, the forms alternated. Both forms must give the same
        tokens; --check-logits compares the f32 prompt logits with a file of strata's
        (gpt2_forward --out, key "logits") and prints the relative L2 difference; --json writes
        every round's figures (bench/peers/decode_record.py), for the study's page.
train   GPT-2 small (or --layers/--heads/--embd) from GPT-2's initialisation (normal 0.02, the
        residual projections 0.02/sqrt(2 L)), on the same random tokens every step, bf16 compute
        with f32 parameters (as autocast: products and attention in bf16, layer norm statistics,
        softmax and loss in f32), AdamW (betas 0.9/0.999, eps 1e-8, decoupled weight decay 0.1 on
        every parameter, as bench/peers/pytorch_gpt2_train.py speed), one jitted step with the
        parameters and moments donated; attention by jax.nn.dot_product_attention (XLA picks cuDNN's
        fused attention where it can). Prints one JSON line as pytorch_gpt2_train.py speed does.
Not run yet on the GPU machine when written: the first call checks it (tools/gpu/gpt2_check.sh and
gpt2_train.sh do not call it yet).
"""
import argparse
import functools
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_record  # noqa: E402
import safetensors_np  # noqa: E402

EPS = 1e-5


def layer_norm(x, w, b):
    xf = x.astype(jnp.float32)
    m = xf.mean(-1, keepdims=True)
    v = jnp.square(xf - m).mean(-1, keepdims=True)
    return ((xf - m) * jax.lax.rsqrt(v + EPS) * w + b).astype(x.dtype)


def gelu(x):  # GPT-2's tanh approximation
    return jax.nn.gelu(x, approximate=True)


def cast(params, dt):
    return jax.tree_util.tree_map(lambda p: p.astype(dt), params)


# ---- parameters ----------------------------------------------------------------------------
def from_hf(path, layers):
    """The HF state dict as a parameter tree: Conv1D weights stay [in, out] (x @ W + b)."""
    sd = safetensors_np.read(path)

    def get(name):
        a = sd[name]
        if a.dtype == np.uint16:  # bf16 bit patterns
            a = (a.astype(np.uint32) << 16).view(np.float32)
        return jnp.asarray(a.astype(np.float32))

    blocks = []
    for i in range(layers):
        p = f"transformer.h.{i}."
        blocks.append({k: get(p + k) for k in (
            "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
            "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
            "mlp.c_proj.weight", "mlp.c_proj.bias")})
    return {"wte": get("transformer.wte.weight"), "wpe": get("transformer.wpe.weight"), "h": blocks,
            "ln_f.weight": get("transformer.ln_f.weight"), "ln_f.bias": get("transformer.ln_f.bias")}


def init(key, layers, heads, embd, vocab, block):
    keys = iter(jax.random.split(key, 4 * layers + 2))
    C = embd

    def normal(shape, std):
        return std * jax.random.normal(next(keys), shape, jnp.float32)

    proj_std = 0.02 / math.sqrt(2 * layers)
    blocks = [{"ln_1.weight": jnp.ones(C), "ln_1.bias": jnp.zeros(C),
               "attn.c_attn.weight": normal((C, 3 * C), 0.02), "attn.c_attn.bias": jnp.zeros(3 * C),
               "attn.c_proj.weight": normal((C, C), proj_std), "attn.c_proj.bias": jnp.zeros(C),
               "ln_2.weight": jnp.ones(C), "ln_2.bias": jnp.zeros(C),
               "mlp.c_fc.weight": normal((C, 4 * C), 0.02), "mlp.c_fc.bias": jnp.zeros(4 * C),
               "mlp.c_proj.weight": normal((4 * C, C), proj_std), "mlp.c_proj.bias": jnp.zeros(C)}
              for _ in range(layers)]
    return {"wte": normal((vocab, C), 0.02), "wpe": normal((block, C), 0.01), "h": blocks,
            "ln_f.weight": jnp.ones(C), "ln_f.bias": jnp.zeros(C)}


def mlp(blk, x):
    h = layer_norm(x, blk["ln_2.weight"], blk["ln_2.bias"])
    m = gelu(h @ blk["mlp.c_fc.weight"] + blk["mlp.c_fc.bias"])
    return x + m @ blk["mlp.c_proj.weight"] + blk["mlp.c_proj.bias"]


def qkv_of(blk, x, heads):
    B, T, C = x.shape
    h = layer_norm(x, blk["ln_1.weight"], blk["ln_1.bias"])
    qkv = (h @ blk["attn.c_attn.weight"] + blk["attn.c_attn.bias"]).reshape(B, T, 3, heads, C // heads)
    return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, T, H, D] each


# ---- decoding with a static cache ------------------------------------------------------------
def cached_forward(params, cache, ids, pos0, heads):
    """ids [B, T] at positions pos0..pos0+T-1; cache [L, 2, B, capacity, H, D]. Returns the last
    position's logits [B, vocab] (f32) and the updated cache."""
    B, T = ids.shape
    cap = cache.shape[3]
    pos = pos0 + jnp.arange(T)
    x = params["wte"][ids] + params["wpe"][pos][None]
    mask = jnp.arange(cap)[None, :] <= pos[:, None]  # [T, capacity]
    for i, blk in enumerate(params["h"]):
        q, k, v = qkv_of(blk, x, heads)
        cache = jax.lax.dynamic_update_slice(cache, jnp.stack([k, v])[None].astype(cache.dtype), (i, 0, 0, pos0, 0, 0))
        kc, vc = cache[i, 0], cache[i, 1]
        s = jnp.einsum("bqhd,bkhd->bhqk", q, kc, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
        p = jax.nn.softmax(jnp.where(mask[None, None], s, -jnp.inf), axis=-1).astype(x.dtype)
        y = jnp.einsum("bhqk,bkhd->bqhd", p, vc).reshape(B, T, -1)
        x = x + y @ blk["attn.c_proj.weight"] + blk["attn.c_proj.bias"]
        x = mlp(blk, x)
    x = layer_norm(x[:, -1], params["ln_f.weight"], params["ln_f.bias"])
    return (x @ params["wte"].T).astype(jnp.float32), cache


def decode(args):
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    dt = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[args.precision]
    params32 = from_hf(os.path.join(args.dir, "hf.safetensors"), cfg["layers"])
    params = cast(params32, dt)
    prompt = jnp.asarray(safetensors_np.read(os.path.join(args.dir, "ids.safetensors"))["ids"][:1])
    T0, n, heads = prompt.shape[1], args.new, cfg["heads"]
    D = cfg["embd"] // heads
    empty = jnp.zeros((cfg["layers"], 2, 1, T0 + n, heads, D), dt)

    prefill = jax.jit(lambda p, c, ids: cached_forward(p, c, ids, 0, heads))

    @functools.partial(jax.jit, donate_argnums=(1,))
    def step(p, c, tok, pos):
        logits, c = cached_forward(p, c, tok[:, None], pos, heads)
        return jnp.argmax(logits, -1).astype(jnp.int32), c

    def jit_step():
        logits, c = prefill(params, empty, prompt)
        tok = jnp.argmax(logits, -1).astype(jnp.int32)
        out = [tok]
        for t in range(n - 1):
            tok, c = step(params, c, tok, T0 + t)
            out.append(tok)
        return jnp.stack(out, 1)

    @jax.jit
    def scan(p, ids):
        logits, c = cached_forward(p, empty, ids, 0, heads)
        tok = jnp.argmax(logits, -1).astype(jnp.int32)
        toks = jnp.zeros((1, n), jnp.int32).at[:, 0].set(tok)

        def body(t, carry):
            tok, c, toks = carry
            logits, c = cached_forward(p, c, tok[:, None], T0 + t - 1, heads)
            tok = jnp.argmax(logits, -1).astype(jnp.int32)
            return tok, c, toks.at[:, t].set(tok)

        return jax.lax.fori_loop(1, n, body, (tok, c, toks))[2]

    forms = {"jit step": jit_step, "jit scan": lambda: scan(params, prompt)}
    tokens = {k: np.asarray(f().block_until_ready()) for k, f in forms.items()}  # compiles
    times = {k: [] for k in forms}
    names = list(forms)
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            forms[name]().block_until_ready()
            times[name].append(1e3 * (time.perf_counter() - t0) / n)
    same_as_first = {k: np.array_equal(tokens[k], tokens[names[0]]) for k in names}
    same = all(same_as_first.values())
    dev = jax.devices()[0].device_kind
    for name in names:
        ms = sorted(times[name])
        print(f"JAX {jax.__version__} ({dev}) decode {name} ({args.precision}): {n} tokens after {T0}, "
              f"{statistics.median(ms):.4f} ms per token ({1e3 / statistics.median(ms):.0f} tokens/s), "
              f"range {ms[0]:.4f}-{ms[-1]:.4f} over {args.rounds} rounds")
    print(f"JAX decode: {'the same tokens in both forms' if same else 'the forms DISAGREE'}; "
          f"first tokens {tokens[names[0]][0, :8].tolist()}")
    if args.check_logits:
        logits, _ = prefill(params32, jnp.zeros_like(empty, jnp.float32), prompt)
        ref = safetensors_np.read(args.check_logits)["logits"].astype(np.float64)[:1, -1]
        got = np.asarray(logits, np.float64)
        rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        print(f"JAX f32 prompt logits vs {os.path.basename(args.check_logits)}: relative L2 {rel:.3e}")
    if args.json:
        decode_record.write(args.json, f"JAX {jax.__version__}", dev, args.precision, cfg, n, T0, args.rounds, times,
                            same_as_first)
    if not same:
        sys.exit(1)


# ---- training ----------------------------------------------------------------------------------
def loss_fn(params, x, y, heads, dt):
    p = cast(params, dt)
    B, T = x.shape
    h = p["wte"][x] + p["wpe"][:T][None]
    for blk in p["h"]:
        q, k, v = qkv_of(blk, h, heads)
        a = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(B, T, -1)
        h = h + a @ blk["attn.c_proj.weight"] + blk["attn.c_proj.bias"]
        h = mlp(blk, h)
    h = layer_norm(h, p["ln_f.weight"], p["ln_f.bias"])
    logits = (h @ p["wte"].T).astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, -1)
    picked = jnp.take_along_axis(logits, y[..., None], -1)[..., 0]
    return (lse - picked).mean()


def train(args):
    heads, dt = args.heads, jnp.bfloat16
    params = init(jax.random.PRNGKey(0), args.layers, heads, args.embd, args.vocab, 1024)
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    kx, ky = jax.random.split(jax.random.PRNGKey(1))
    x = jax.random.randint(kx, (args.batch, args.seq), 0, args.vocab)
    y = jax.random.randint(ky, (args.batch, args.seq), 0, args.vocab)
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, 0.1

    def step(params, m, v, t):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y, heads, dt)
        m = jax.tree_util.tree_map(lambda a, b: b1 * a + (1 - b1) * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: b2 * a + (1 - b2) * b * b, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        params = jax.tree_util.tree_map(
            lambda p, a, b: p * (1 - args.lr * wd) - args.lr * (a / c1) / (jnp.sqrt(b / c2) + eps), params, m, v)
        return params, m, v, loss

    step = jax.jit(step, donate_argnums=(0, 1, 2))
    t = 1
    for _ in range(args.warmup):
        params, m, v, loss = step(params, m, v, float(t))
        t += 1
    loss.block_until_ready()
    ms = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            params, m, v, loss = step(params, m, v, float(t))
            t += 1
        loss.block_until_ready()
        ms.append(1e3 * (time.perf_counter() - t0) / args.steps)
    C, L = args.embd, args.layers
    flops_per_token = 6 * (L * 12 * C * C + args.vocab * C) + 6 * L * C * args.seq
    med = statistics.median(ms)
    tok = args.batch * args.seq * 1e3 / med
    print(json.dumps(dict(framework=f"JAX {jax.__version__}", mode="jit", precision="bf16 compute, f32 parameters",
                          batch=args.batch, seq=args.seq, ms_per_step=med, ms_range=[min(ms), max(ms)],
                          tokens_per_s=tok, tflops=tok * flops_per_token / 1e12, last_loss=float(loss),
                          rounds=args.rounds, steps_per_round=args.steps, device=jax.devices()[0].device_kind)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("decode")
    d.add_argument("dir")
    d.add_argument("--new", type=int, default=256)
    d.add_argument("--rounds", type=int, default=3)
    d.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    d.add_argument("--check-logits", help="strata's logits for the same ids (gpt2_forward --out)")
    d.add_argument("--json", help="also write every round's figures here (bench/peers/decode_record.py)")
    t = sub.add_parser("train")
    for name, default in (("layers", 12), ("heads", 12), ("embd", 768), ("vocab", 50257), ("batch", 16),
                          ("seq", 1024), ("steps", 10), ("rounds", 3), ("warmup", 3)):
        t.add_argument(f"--{name}", type=int, default=default)
    t.add_argument("--lr", type=float, default=6e-4)
    args = ap.parse_args()
    if args.cmd == "decode" and args.precision == "fp32":
        jax.config.update("jax_default_matmul_precision", "highest")  # no TF32, as the PyTorch peer
    {"decode": decode, "train": train}[args.cmd](args)


if __name__ == "__main__":
    main()
