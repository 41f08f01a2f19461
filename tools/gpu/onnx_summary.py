#!/usr/bin/env python3
"""The summary of tools/gpu/onnx.sh and onnx_gpt.sh: joins their steps' JSON files (lists of
comparison rows) into one file and prints one line a row.

    onnx_summary.py OUT.json STEP.json...
"""
import json
import sys

rows = []
for p in sys.argv[2:]:
    try:
        rows += json.load(open(p))
    except Exception as e:  # noqa: BLE001 - a step that wrote nothing is a row of its own
        rows.append({"step": p, "status": "unreadable", "note": str(e)})
json.dump(rows, open(sys.argv[1], "w"), indent=1)
print("== summary")
print(f"{'comparison':<72}{'rel L2':>10}{'max abs':>10}{'argmax':>10}  status")
for r in rows:
    if "rel_l2" in r:
        print(f"{r['step'][:71]:<72}{r['rel_l2']:>10.2e}{r['max_abs']:>10.2e}{r['argmax_agree']:>6}/{r['rows']:<3}  "
              f"{r['status']}{' (bitwise)' if r.get('bitwise') else ''}")
    else:
        print(f"{r['step'][:71]:<72}{'':>30}  {r['status']} {r.get('exporter', '')} {r.get('ops', '')} "
              f"{r.get('note', '')}")
