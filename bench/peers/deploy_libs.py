#!/usr/bin/env python3
"""The shared libraries a deployed program loads, for the deployment table (tools/gpu/deploy.sh).

    python3 bench/peers/deploy_libs.py maps PID [--own SUBSTRING]...   # what a running process has mapped
    python3 bench/peers/deploy_libs.py ldd LDD_OUTPUT_FILE [--own SUBSTRING]...  # what `ldd BINARY` resolved

Both print one JSON line: {"count", "bytes", "files": [[path, bytes], ...]} over the distinct shared
objects (by real path: a library mapped through two links is counted once), and "own_files" for
mapped files matching --own (the program's own generated .so, e.g. an AOTI model extracted from its
package: code, not a library it depends on). `ldd` lists only what the dynamic linker loads at start;
libraries opened later with dlopen (cuDNN's engine libraries, libcuda through the runtime, PyTorch's
extension modules) only show in a running process's maps, which is why the table gives both.
`ldd` is run by the caller, under the LD_LIBRARY_PATH the program runs with, since that decides what
it resolves to. Standard library only (also imported by aoti_resnet50.py for its own process).
"""
import json
import os
import re
import sys

_SO = re.compile(r"\.so($|\.)")


def _summary(paths, own=()):
    seen, files, own_files = set(), [], []
    for p in paths:
        try:
            real = os.path.realpath(p)
            if real in seen:
                continue
            seen.add(real)
            size = os.stat(real).st_size
        except OSError:  # unmapped or deleted since: not counted
            continue
        (own_files if any(o in p for o in own) else files).append([p, size])
    files.sort(key=lambda f: -f[1])
    return {"count": len(files), "bytes": sum(s for _, s in files), "files": files,
            "own_files": own_files, "own_bytes": sum(s for _, s in own_files)}


def mapped(pid="self", own=()):
    """The distinct .so files in /proc/PID/maps (pathname column; "(deleted)" ones are skipped)."""
    paths = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            if path.startswith("/") and not path.endswith("(deleted)") and _SO.search(os.path.basename(path)):
                paths.append(path)
    return _summary(dict.fromkeys(paths), own)


def from_ldd(text, own=()):
    """`ldd` lines "name => /path (0x...)" and "/lib64/ld-linux... (0x...)"; a "not found" is reported."""
    paths, missing = [], []
    for line in text.splitlines():
        line = line.strip()
        if "=> not found" in line:
            missing.append(line.split()[0])
            continue
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"(/\S+)\s+\(0x", line)
        if m:
            paths.append(m.group(1))
    r = _summary(dict.fromkeys(paths), own)
    r["not_found"] = missing
    return r


def main(argv):
    own = [argv[i + 1] for i in range(2, len(argv) - 1) if argv[i] == "--own"]
    if len(argv) >= 2 and argv[0] == "maps":
        print(json.dumps(mapped(argv[1], own)))
        return 0
    if len(argv) >= 2 and argv[0] == "ldd":
        with open(argv[1]) as f:
            print(json.dumps(from_ldd(f.read(), own)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
