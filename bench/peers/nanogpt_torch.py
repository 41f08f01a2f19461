"""GPT-2 written in plain PyTorch (nanoGPT's structure and parameter names, which are strata's
nn::Gpt names), for the peers that must run where `transformers` is not installed (Debian's
python3-torch on the CPU machine): training-curve parity and CPU decoding. Needs PyTorch 1.13 or
later; uses only torch.nn.functional ops that exist there.

safetensors files are written by safetensors_np.py when the `safetensors` package is absent.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402


def save_safetensors(tensors, path):
    try:
        from safetensors.torch import save_file
        return save_file(tensors, path)
    except ImportError:
        pass
    arrays, dtypes = {}, {}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            arrays[name], dtypes[name] = t.view(torch.int16).numpy().view("<u2"), "BF16"
        else:
            arrays[name] = t.numpy()
    safetensors_np.write(path, arrays, dtypes)


class Block(torch.nn.Module):
    def __init__(self, C, H, eps):
        super().__init__()
        self.H, self.eps = H, eps
        self.ln_1 = torch.nn.LayerNorm(C, eps=eps)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(C, 3 * C)
        self.attn.c_proj = torch.nn.Linear(C, C)
        self.ln_2 = torch.nn.LayerNorm(C, eps=eps)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(C, 4 * C)
        self.mlp.c_proj = torch.nn.Linear(4 * C, C)

    def attention(self, x, cache):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        if cache is not None:  # decoding: the keys and values seen so far, then these
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        S = k.shape[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        # Causal, aligned to the last key: query i sees keys 0 .. S - T + i.
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        return self.attn.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x, cache=None):
        x = x + self.attention(self.ln_1(x), cache)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class NanoGpt(torch.nn.Module):
    def __init__(self, vocab, block, layers, heads, embd, eps=1e-5):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, embd)
        self.wpe = torch.nn.Embedding(block, embd)
        self.h = torch.nn.ModuleList([Block(embd, heads, eps) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(embd, eps=eps)

    def init_gpt2(self, seed):
        """GPT-2's initialisation (normal 0.02, residual projections 0.02/sqrt(2L)), then biases and
        layer norms moved away from 0 and 1 so that every parameter counts."""
        g = torch.Generator().manual_seed(seed)
        L = len(self.h)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias") or ".ln_" in name or name.startswith("ln_f"):
                    base = 1.0 if name.endswith("weight") else 0.0
                    p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
                else:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                    p.copy_(std * torch.randn(p.shape, generator=g))
        return self

    def forward(self, ids, caches=None, start=0):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(start, start + T, device=ids.device))
        for i, blk in enumerate(self.h):
            x = blk(x, None if caches is None else caches[i])
        return self.ln_f(x) @ self.wte.weight.t()  # the tied head

    def weights(self):
        """strata's names and layout (the same as nanoGPT's): Linear weights [out, in]."""
        return {k: v.detach().float().contiguous() for k, v in self.state_dict().items()}


@torch.no_grad()
def greedy(model, prompt, n_new):
    """n_new greedy tokens after prompt [1, T] with a key/value cache."""
    caches = [{} for _ in model.h]
    logits = model(prompt, caches)
    tok = logits[:, -1].argmax(-1, keepdim=True)
    out, pos = [tok], prompt.shape[1]
    for _ in range(n_new - 1):
        tok = model(tok, caches, pos)[:, -1].argmax(-1, keepdim=True)
        pos += 1
        out.append(tok)
    return torch.cat([prompt] + out, dim=1)
