#!/usr/bin/env python3
"""The source tree's layout rules, checked on the tree as it is (no build folder):

- includes: every `#include "strata/..."` in a source or header resolves to a file from the
  repository root (strata/<layer> are committed links), so an editor, clangd or any tool that reads
  the tree without configuring it follows every include;
- the links themselves: strata/<layer> points at the layer's folder;
- nn/ holds modules, models and optimizers' bookkeeping only: it never calls a backend kernel
  itself (no run_kernel, no op of the table called on a backend object); every op it runs goes
  through the front end (ops::, autograd::) or a plan of ops/direct/, which validate it;
- nor does it define a step class (`class|struct <Name>Step`, a direct-mode composition of plans):
  steps live in ops/direct/steps/, and a layer only names its step (a `...StepOf` selector);
- an op is defined once: its checks, outputs and argument struct are its binding in ops/bind/,
  which the front end runs once and a direct plan keeps; so nowhere else in ops/ or nn/ calls a
  validate_* function or fills an argument struct of the table (`<Op>Args{`).

usage: layout_test.py <repository root>
"""
import os
import re
import sys

SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh", ".def", ".in")
SKIP_DIRS = {".git", "__pycache__"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(strata/[^"]+)"', re.M)
LAYERS = ("core", "ops", "backends", "autograd", "nn", "data", "onnx", "dist", "codegen")


def source_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        top = rel.split(os.sep)[0]
        # build folders (build, build-asan, ...) and hidden folders are not the tree; the strata/
        # links would only repeat the layers.
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")
                       and not (rel == "." and (d.startswith("build") or d == "strata" or d == "runs"))]
        if top.startswith("build"):
            continue
        for f in filenames:
            if f.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, f)


def op_names(root):
    with open(os.path.join(root, "ops", "table", "op_table.def"), encoding="utf-8") as fh:
        return re.findall(r"^STRATA_OP\((\w+),", fh.read(), re.M)


def nn_kernel_calls(root):
    ops = op_names(root)
    if len(ops) < 10:
        return [f"only {len(ops)} ops read from ops/table/op_table.def"]
    # a backend object (impl, impl_, p.impl, backend, ...) calling an op of the table, or run_kernel
    call = re.compile(r"\b\w*(impl|backend)\w*\s*(->|\.)\s*(" + "|".join(ops) + r")\s*\(|\brun_kernel\s*<|"
                      r"\bOpCall<\s*ops::OpId")
    found = []
    for path in source_files(os.path.join(root, "nn")):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                code = line.split("//")[0]
                if call.search(code):
                    found.append(f"{os.path.relpath(path, root)}:{n}: a backend kernel called from nn/ "
                                 f"(run it through ops:: or a plan of ops/direct/): {line.strip()}")
    return found


# a class or struct definition (not a declaration) whose name ends in Step, templated or not: the
# name, then `final`, a base clause or nothing, then the opening brace
STEP_CLASS = re.compile(r"\b(?:class|struct)\s+(\w+Step)\b\s*(?:final\b\s*)?(?::[^;{}()]*)?\{")


def strip_comments(text):
    # line comments only (strata writes no block comments in code); keeps line numbers
    return re.sub(r"//[^\n]*", "", text)


def code_matches(root, layers, pattern, skip=()):
    """(path relative to root, line, match) for each match of pattern in the code (comments
    stripped) of the layers' files, but those whose relative path starts with one in skip."""
    for layer in layers:
        for path in source_files(os.path.join(root, layer)):
            rel = os.path.relpath(path, root)
            if skip and rel.startswith(skip):
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                code = strip_comments(fh.read())
            for m in pattern.finditer(code):
                yield rel, code.count("\n", 0, m.start()) + 1, m


def nn_step_classes(root):
    return [f"{rel}:{line}: step class {m.group(1)} defined in nn/ (a direct-mode step belongs in "
            "ops/direct/steps/; the layer names it in its StepOf)"
            for rel, line, m in code_matches(root, ("nn",), STEP_CLASS)]


def arg_structs(root):
    with open(os.path.join(root, "ops", "table", "op_table.def"), encoding="utf-8") as fh:
        return sorted(set(re.findall(r"^STRATA_OP\(\w+,\s*(\w+),", fh.read(), re.M)))


def ops_defined_twice(root):
    """Checks or argument structs of an op written outside its binding (ops/bind/)."""
    structs = arg_structs(root)
    if len(structs) < 10:
        return [f"only {len(structs)} argument structs read from ops/table/op_table.def"]
    use = re.compile(r"\bvalidate_\w+\s*\(|\b(?:" + "|".join(structs) + r")\s*\{")
    # where an op's definition lives: its binding, the checks it calls, the table itself
    own = (os.path.join("ops", "bind") + os.sep, os.path.join("ops", "table") + os.sep,
           os.path.join("ops", "validate"))
    return [f"{rel}:{line}: `{m.group(0).strip()}` outside the op's binding (ops/bind/): the front end and the "
            "plans bind an op with bind::<op>, its one definition"
            for rel, line, m in code_matches(root, ("ops", "nn"), use, own)]


def main():
    root = os.path.abspath(sys.argv[1])
    failures = []
    for layer in LAYERS:
        link = os.path.join(root, "strata", layer)
        if not (os.path.islink(link) and os.path.realpath(link) == os.path.realpath(os.path.join(root, layer))):
            failures.append(f"strata/{layer} is not a link to the layer folder {layer}/")
    checked = 0
    for path in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in INCLUDE.finditer(text):
            checked += 1
            if not os.path.isfile(os.path.join(root, m.group(1))):
                line = text.count("\n", 0, m.start()) + 1
                failures.append(f"{os.path.relpath(path, root)}:{line}: \"{m.group(1)}\" does not resolve "
                                "from the repository root without a build")
    failures += nn_kernel_calls(root)
    failures += nn_step_classes(root)
    failures += ops_defined_twice(root)
    if checked < 100:
        failures.append(f"only {checked} strata/ includes found: is {root} the repository root?")
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} includes checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
