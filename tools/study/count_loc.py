#!/usr/bin/env python3
"""Lines of code of the ResNet definition in each implementation of the study (issue
#7's "effort"): non-blank lines that are not only a comment (C++ // and /* */, Python #
and docstrings).

    python3 tools/study/count_loc.py [--json loc.json]

What is counted, per implementation:
  strata_*        nn/resnet.{h,cpp} and nn/layers/blocks.{h,cpp}: ResNet-18..152 with
                  both block types, one source for the three dispatch modes. Lines inside
                  `if constexpr (is_direct_v<P>)` branches and the explicit backward passed
                  to `explicit_backward<P>(...)` count for direct mode only; `else` branches
                  and the tape formulas passed to a layer's direct_ (`[&](const auto& tape)
                  {...}` over several lines; one on a single line shares it) for the tape
                  modes (virtual, static) only.
  pytorch_eager   torchvision/models/resnet.py's conv3x3, conv1x1, BasicBlock,
                  Bottleneck and ResNet (the same coverage), found through the installed
                  torchvision (needs it importable; otherwise reported as missing).
  torchscript, torch_compile, pytorch_cudagraph
                  pytorch_eager's lines plus what bench/peers/study_torch.py adds
                  between its "study-loc: begin/end <name>" markers.
  libtorch        bench/study/libtorch/resnet50.h between its markers (ResNet-50 only).
"""
import argparse
import ast
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRATA_FILES = ["nn/resnet.h", "nn/resnet.cpp", "nn/layers/blocks.h", "nn/layers/blocks.cpp"]
TORCHVISION_DEFS = ["conv3x3", "conv1x1", "BasicBlock", "Bottleneck", "ResNet"]
PEER_SCRIPT = "bench/peers/study_torch.py"
MARKER = re.compile(r"study-loc:\s*(begin|end)\s+(\S+)")


def cpp_code_lines(text):
    """Per line: True when it holds code (not blank, not only a comment)."""
    out, in_block = [], False
    for line in text.split("\n"):
        s, code = line, ""
        i = 0
        while i < len(s):
            if in_block:
                j = s.find("*/", i)
                if j < 0:
                    i = len(s)
                else:
                    in_block, i = False, j + 2
            elif s.startswith("//", i):
                break
            elif s.startswith("/*", i):
                in_block, i = True, i + 2
            else:
                code += s[i]
                i += 1
        out.append(bool(code.strip()))
    return out


def py_code_lines(text):
    docstring_lines = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return [bool(line.strip()) and not line.strip().startswith("#") and (n + 1) not in docstring_lines
            for n, line in enumerate(text.split("\n"))]


def direct_branches(text):
    """Line numbers (0-based) of code for one kind of mode (see the module's docstring):
    (direct_only, tape_only)."""
    direct, tape = set(), set()

    def block(pos):  # [start line, end line] of the {...} opening at or after pos
        o = text.index("{", pos)
        depth, i = 0, o
        while True:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text.count("\n", 0, o), text.count("\n", 0, i), i
            i += 1

    for m in re.finditer(r"explicit_backward<[^>]*>\(", text):
        a, b, _ = block(m.end())
        direct.update(range(a, b + 1))
    for m in re.finditer(r"\(const auto& tape\)", text):
        a, b, _ = block(m.end())
        if a < b:
            tape.update(range(a, b + 1))
    for m in re.finditer(r"if\s+constexpr\s*\(\s*(!?)\s*is_direct_v<[^>]*>\s*\)", text):
        a, b, end = block(m.end())
        (tape if m.group(1) else direct).update(range(a, b + 1))
        rest = text[end + 1:]
        e = re.match(r"\s*else\s*\{", rest)
        if e:
            a2, b2, _ = block(end + 1 + e.start())
            (direct if m.group(1) else tape).update(range(a2, b2 + 1))
    return direct, tape


def strata_counts():
    total = direct_only = tape_only = 0
    for rel in STRATA_FILES:
        text = open(os.path.join(ROOT, rel)).read()
        code = cpp_code_lines(text)
        d, t = direct_branches(text)
        total += sum(code)
        direct_only += sum(1 for n in d if code[n])
        tape_only += sum(1 for n in t if code[n])
    tape = total - direct_only
    return {"strata_virtual": tape, "strata_static": tape, "strata_direct": total - tape_only}, \
        {"files": STRATA_FILES, "shared_lines": total - direct_only - tape_only, "direct_only_lines": direct_only,
         "tape_only_lines": tape_only}


def marked(path, code_lines_of):
    text = open(path).read()
    code = code_lines_of(text)
    counts, open_at = {}, {}
    for n, line in enumerate(text.split("\n")):
        m = MARKER.search(line)
        if not m:
            continue
        if m.group(1) == "begin":
            open_at[m.group(2)] = n
        elif m.group(2) in open_at:
            a = open_at.pop(m.group(2))
            counts[m.group(2)] = counts.get(m.group(2), 0) + sum(code[a + 1:n])
    return counts


def torchvision_count():
    try:
        import importlib.util
        spec = importlib.util.find_spec("torchvision.models.resnet")
        path = spec.origin
        import torchvision
        version = torchvision.__version__
    except Exception as e:  # noqa: BLE001 - torchvision missing: reported, not fatal
        return None, {"error": f"torchvision not importable: {e}"}
    text = open(path).read()
    code = py_code_lines(text)
    n = 0
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in TORCHVISION_DEFS:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            n += sum(code[start - 1:node.end_lineno])
    return n, {"file": path, "torchvision": version, "defs": TORCHVISION_DEFS}


def count():
    strata, strata_how = strata_counts()
    tv, tv_how = torchvision_count()
    extra = marked(os.path.join(ROOT, PEER_SCRIPT), py_code_lines)
    lt = marked(os.path.join(ROOT, "bench/study/libtorch/resnet50.h"), cpp_code_lines)
    impls = dict(strata)
    impls["libtorch"] = lt.get("libtorch")
    impls["pytorch_eager"] = tv
    for impl, key in (("torchscript", "torchscript"), ("torch_compile", "compile"), ("pytorch_cudagraph", "cudagraph")):
        impls[impl] = None if tv is None else tv + extra.get(key, 0)
    return {"loc": impls,
            "how": {"strata": strata_how, "torchvision": tv_how,
                    "peer_additions": {"file": PEER_SCRIPT, "lines": extra},
                    "libtorch": {"file": "bench/study/libtorch/resnet50.h", "covers": "ResNet-50 only"}}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    doc = count()
    for impl, n in doc["loc"].items():
        print(f"{impl:<20} {'-' if n is None else n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
