"""safetensors files read and written with numpy alone, for the scripts that must run where the
`safetensors` package is absent (Debian's python3 on the CPU machine, the ctest ONNX check). The
format: an 8-byte little-endian header length, a JSON header of dtype, shape and byte offsets
(padded with spaces to 8 bytes), then the raw little-endian data."""
import json
import struct

import numpy as np

# bf16 has no numpy dtype: it travels as its raw 16-bit pattern.
DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
          "I32": np.int32, "U8": np.uint8}
_NAMES = {np.dtype(v): k for k, v in DTYPES.items() if k != "BF16"}


def read(path):
    """{name: array} (BF16 tensors as uint16 bit patterns); the metadata entry skipped."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def write(path, arrays, dtypes=None):
    """arrays {name: array}; dtypes {name: "BF16"} names the file dtype where the array's own does
    not say it (bf16 given as uint16 bit patterns)."""
    header, blobs, at = {}, [], 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        dt = (dtypes or {}).get(name) or _NAMES[a.dtype]
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
