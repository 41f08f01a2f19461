#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Small valid files of every reader's format plus a few broken ones, deterministic
(fixed contents, no randomness), so re-running this script reproduces the committed
seeds byte for byte. Files named regression_* (inputs that once crashed a reader) and
any files merged in by tools/fuzz.sh --merge are left alone.

    python3 fuzz/make_corpus.py            # (re)write the seeds
"""
import gzip
import json
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def put_regression(target, name, data):
    """An input that once made a reader crash, hang or misbehave: kept under its own
    prefix, replayed by the ctest corpus replay, never deleted by a merge."""
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "regression_" + name), "wb") as f:
        f.write(data)


def gz(data):
    # mtime=0: gzip headers carry a timestamp; a fixed one keeps the seeds reproducible.
    return gzip.compress(data, mtime=0)


def pattern(n, mul=7, add=3):
    return bytes((i * mul + add) & 0xFF for i in range(n))


# --- IDX: magic 00 00 08 <ndims>, big-endian u32 dims, u8 data ----------------------
def idx(dims, data, type_byte=0x08):
    return bytes([0, 0, type_byte, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def make_idx():
    images = idx([2, 4, 4], pattern(32))
    labels = idx([5], bytes([0, 9, 3, 1, 7]))
    put("idx", "images_2x4x4", images)
    put("idx", "labels_5", labels)
    put("idx", "images_gz", gz(images))
    put("idx", "labels_gz", gz(labels))
    put("idx", "images_28x28", idx([1, 28, 28], pattern(784)))
    put("idx", "images_empty_n0", idx([0, 4, 4], b""))
    put("idx", "labels_concat_gz", gz(labels[:6]) + gz(labels[6:]))  # two gzip members
    put("idx", "images_truncated", images[:-5])
    put("idx", "images_too_long", images + b"\x00")
    put("idx", "labels_out_of_range", idx([3], bytes([1, 10, 255])))
    put("idx", "bad_type_float", idx([2], b"\x00" * 8, type_byte=0x0D))
    put("idx", "huge_dims", idx([0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF], b""))
    put("idx", "gz_truncated", gz(images)[:-6])
    # A 1 KB file that inflates to 1 MB past what its dims need: the reader inflates
    # only what the header allows, plus one byte.
    put("idx", "gz_bomb", gz(idx([1, 4, 4], pattern(16)) + bytes(1 << 20)))


# --- CIFAR-10: records of 1 label byte + 3072 pixel bytes ----------------------------
def make_cifar10():
    rec = lambda label, k: bytes([label]) + pattern(3072, 5 + k, k)
    put("cifar10", "one_record", rec(3, 0))
    put("cifar10", "two_records", rec(0, 1) + rec(9, 2))
    put("cifar10", "bad_label", rec(10, 3))
    put("cifar10", "truncated", rec(1, 4)[:3000])
    put("cifar10", "one_and_a_bit", rec(2, 5) + b"\x01\x02")


# --- STL-10: images of 3x96x96 bytes (column-major planes); labels 1..10 ------------
def make_stl10():
    img = pattern(3 * 96 * 96, 11, 1)
    put("stl10", "one_image", img)
    put("stl10", "labels", bytes([1, 2, 3, 10, 5]))
    put("stl10", "labels_bad", bytes([1, 0, 11]))
    put("stl10", "image_truncated", img[:27000])


# --- VOC annotations -----------------------------------------------------------------
VOC_OK = """<annotation>
\t<folder>VOC2007</folder>
\t<filename>000005.jpg</filename>
\t<size><width>500</width><height>375</height><depth>3</depth></size>
\t<segmented>0</segmented>
\t<object>
\t\t<name>chair</name><pose>Rear</pose><truncated>0</truncated><difficult>0</difficult>
\t\t<bndbox><xmin>263</xmin><ymin>211</ymin><xmax>324</xmax><ymax>339</ymax></bndbox>
\t</object>
\t<object>
\t\t<name> dog </name><pose>Unspecified</pose><truncated>1</truncated><difficult>1</difficult>
\t\t<bndbox><xmin>5</xmin><ymin>244</ymin><xmax>67</xmax><ymax>374</ymax></bndbox>
\t</object>
</annotation>
"""


def make_voc():
    put("voc", "ok.xml", VOC_OK)
    put("voc", "all_classes.xml", "<annotation>" + "".join(
        f"<object><name>{c}</name><difficult>{i % 2}</difficult></object>" for i, c in enumerate(
            "aeroplane bicycle bird boat bottle bus car cat chair cow diningtable dog horse motorbike "
            "person pottedplant sheep sofa train tvmonitor".split())) + "</annotation>")
    put("voc", "no_objects.xml", "<annotation><filename>x.jpg</filename></annotation>")
    put("voc", "unknown_class.xml", "<annotation><object><name>unicorn</name></object></annotation>")
    put("voc", "no_name.xml", "<annotation><object><pose>Left</pose></object></annotation>")
    put("voc", "malformed.xml", "<annotation><object><name>cat</name></object>")
    put("voc", "wrong_root.xml", "<?xml version=\"1.0\"?><root><object><name>cat</name></object></root>")
    put("voc", "entities_cdata.xml",
        "<!DOCTYPE a [<!ENTITY e \"cat\">]><annotation><object><name><![CDATA[cat]]></name></object>"
        "<object><name>&e;</name></object></annotation>")


# --- images of strata_infer --image: binary PGM/PPM and JPEG -------------------------
# Two small JPEGs written by libjpeg-turbo through strata's data::encode_jpeg (quality
# 50, 4:4:4): an 8x8 RGB and a 4x4 greyscale image.
JPEG_RGB_8X8 = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123"
    "251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffdb0043011112"
    "121815182f1a1a2f63423842636363636363636363636363636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363ffc00011080008000803011100021101031101ffc4001f0000010501010101010100"
    "000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d010203000411051221"
    "31410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a"
    "434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a9293949596979899"
    "9aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1"
    "f2f3f4f5f6f7f8f9faffc4001f0100030101010101010101010000000000000102030405060708090a0bffc400b51100"
    "020102040403040705040400010277000102031104052131061241510761711322328108144291a1b1c109233352f015"
    "6272d10a162434e125f11718191a262728292a35363738393a434445464748494a535455565758595a63646566676869"
    "6a737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4"
    "c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f0042"
    "892c61a4fdd59c670abfdf3fe27fcf1924729c1a72f7aa3d9744bfcbf17f93492bd1a2ff00c52e9e97edf9fe7fffd9")
JPEG_GREY_4X4 = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123"
    "251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffc0000b080004"
    "000401011100ffc4001f0000010501010101010100000000000000000102030405060708090a0bffc400b51000020103"
    "03020403050504040000017d01020300041105122131410613516107227114328191a1082342b1c11552d1f024336272"
    "82090a161718191a25262728292a3435363738393a434445464748494a535455565758595a636465666768696a737475"
    "767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9"
    "cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda0008010100003f00dab4f0c697e42fee"
    "2bffd9")


def make_image():
    put("image", "pgm_4x3", b"P5\n# a comment\n4 3\n255\n" + pattern(12))
    put("image", "ppm_2x2", b"P6 2 2 255\n" + pattern(12, 13, 5))
    put("image", "pgm_maxval_15", b"P5 3 1 15\n" + bytes([0, 7, 15]))
    put("image", "jpeg_rgb", JPEG_RGB_8X8)
    put("image", "jpeg_grey", JPEG_GREY_4X4)
    put("image", "pgm_0x0", b"P5 0 0 255\n")
    put("image", "pgm_16bit", b"P5 1 1 65535\n\x01\x02")
    put("image", "ppm_truncated", b"P6 4 4 255\n" + pattern(20))
    put("image", "jpeg_truncated", JPEG_RGB_8X8[: len(JPEG_RGB_8X8) // 2])
    put("image", "not_an_image", b"GIF89a")


# --- safetensors checkpoints of fuzz/safetensors_fuzz.cpp's model --------------------
DT = {"F32": ("<f", 4), "F64": ("<d", 8), "I64": ("<q", 8), "I32": ("<i", 4), "U8": ("<B", 1),
      "F16": ("<e", 2), "BF16": (None, 2)}


def safetensors(entries, metadata=None):
    """entries: [(name, dtype, shape, values)]; written as strata's writer does."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, off = [], 0
    for name, dt, shape, values in sorted(entries, key=lambda e: -DT[e[1]][1]):
        fmt, size = DT[dt]
        if fmt is None:  # bf16: the top half of an f32
            blob = b"".join(struct.pack("<f", v)[2:] for v in values)
        else:
            blob = b"".join(struct.pack(fmt, v) for v in values)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs)


def model_entries(dt="F32"):
    return [
        ("0.weight", dt, [2, 3], [0.5, -1.0, 0.25, 2.0, -0.125, 1.5]),
        ("0.bias", dt, [2], [0.1, -0.2]),
        ("1.weight", dt, [2], [1.0, 1.0]),
        ("1.bias", dt, [2], [0.0, 0.0]),
        ("1.running_mean", dt, [2], [0.0, 0.5]),
        ("1.running_var", dt, [2], [1.0, 2.0]),
        ("1.num_batches_tracked", "I64", [], [7]),
    ]


def adam_entries(step_dt="I64"):
    out = []
    for name, shape, n in [("0.weight", [2, 3], 6), ("0.bias", [2], 2), ("1.weight", [2], 2), ("1.bias", [2], 2)]:
        out += [(f"optimizer.{name}.exp_avg", "F32", shape, [0.01] * n),
                (f"optimizer.{name}.exp_avg_sq", "F32", shape, [0.001] * n),
                (f"optimizer.{name}.step", step_dt, [], [3])]
    return out


def make_safetensors_regressions():
    # Float values loaded into integer state: NaN / 1e30 as BatchNorm's i64
    # num_batches_tracked went through a float->int static_cast (undefined behaviour,
    # UBSan float-cast-overflow) before core/dtype_dispatch.h saturated the conversion.
    nan_entries = [e if e[0] != "1.num_batches_tracked" else ("1.num_batches_tracked", "F32", [], [float("nan")])
                   for e in model_entries()]
    put_regression("safetensors", "nan_num_batches_tracked", safetensors(nan_entries))
    big_entries = [e if e[0] != "1.num_batches_tracked" else ("1.num_batches_tracked", "F64", [], [1e30])
                   for e in model_entries()]
    put_regression("safetensors", "huge_num_batches_tracked", safetensors(big_entries))
    # Adam step counts that are not counts (NaN, negative, 2^63-1): accepted before, and
    # the next step's ++step overflowed int64; now refused by Optimizer::load_state_dict.
    meta = {"format": "pt", "strata.optimizer_steps": "3"}
    for name, dt, v in [("nan_adam_step", "F32", float("nan")), ("negative_adam_step", "I64", -5),
                        ("int64_max_adam_step", "I64", 2**63 - 1)]:
        adam = [(n, d, s, [v] if n.endswith(".step") else vals) for n, d, s, vals in adam_entries(dt)]
        entries = model_entries() + adam
        put_regression("safetensors", name, safetensors(entries, meta))
    # A shape whose element count overflows int64 partway, with a zero after it
    # ([2^32, 2^31, 0]: 0 bytes of data, so the file is consistent, and the parser's
    # unsigned count does not overflow): Shape::numel() overflowed (signed overflow)
    # before Tensor::empty refused such shapes.
    put_regression("safetensors", "numel_overflow_zero_size",
                   safetensors([("z", "F32", [2**32, 2**31, 0], [])]))


def make_safetensors():
    make_safetensors_regressions()
    meta = {"format": "pt", "strata.step": "3", "strata.optimizer_steps": "3", "strata.optimizer_lr": "0.001"}
    put("safetensors", "model", safetensors(model_entries()))
    put("safetensors", "checkpoint_adam", safetensors(model_entries() + adam_entries(), meta))
    put("safetensors", "checkpoint_float_step", safetensors(model_entries() + adam_entries("F32"), meta))
    put("safetensors", "model_f64", safetensors(model_entries("F64")))
    put("safetensors", "model_f16", safetensors(model_entries("F16")))
    put("safetensors", "model_bf16", safetensors(model_entries("BF16")))
    put("safetensors", "other_dtypes", safetensors([("a", "I32", [2, 2], [1, -2, 3, -4]), ("b", "U8", [3], [1, 2, 255]),
                                                    ("empty", "F32", [0, 5], [])]))
    put("safetensors", "empty_header", struct.pack("<Q", 8) + b"{}      ")
    good = safetensors(model_entries())
    put("safetensors", "truncated", good[:-3])
    put("safetensors", "bad_json", struct.pack("<Q", 8) + b"{\"a\":[1")
    put("safetensors", "overlap", struct.pack("<Q", 112) + json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, separators=(",", ":")).ljust(112).encode()
        + b"\x00" * 12)


# --- ONNX models: protobuf written by hand (field numbers of onnx.proto) --------------
def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_int(field, v):
    return varint(field << 3) + varint(v)


def pb_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def pb_float(field, v):
    return varint(field << 3 | 5) + struct.pack("<f", v)


FLOAT, INT64 = 1, 7
A_FLOAT, A_INT, A_STRING, A_INTS = 1, 2, 3, 7


def attr(name, value):
    """AttributeProto: name 1, f 2, i 3, s 4, ints 8, type 20."""
    a = pb_bytes(1, name)
    if isinstance(value, float):
        return a + pb_float(2, value) + pb_int(20, A_FLOAT)
    if isinstance(value, int):
        return a + pb_int(3, value) + pb_int(20, A_INT)
    if isinstance(value, str):
        return a + pb_bytes(4, value) + pb_int(20, A_STRING)
    return a + b"".join(pb_int(8, v) for v in value) + pb_int(20, A_INTS)


def node(op, inputs, outputs, name, attrs=(), domain=None):
    """NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7."""
    n = b"".join(pb_bytes(1, i) for i in inputs) + b"".join(pb_bytes(2, o) for o in outputs)
    n += pb_bytes(3, name) + pb_bytes(4, op) + b"".join(pb_bytes(5, attr(k, v)) for k, v in attrs)
    return n + (pb_bytes(7, domain) if domain else b"")


def tensor(name, dims, values, dtype=FLOAT):
    """TensorProto: dims 1, data_type 2, name 8, raw_data 9."""
    raw = struct.pack(f"<{len(values)}{'f' if dtype == FLOAT else 'q'}", *values)
    return b"".join(pb_int(1, d) for d in dims) + pb_int(2, dtype) + pb_bytes(8, name) + pb_bytes(9, raw)


def value_info(name, dims, elem=FLOAT):
    """ValueInfoProto name 1, type 2 -> TypeProto tensor_type 1 -> elem_type 1, shape 2 -> dim 1."""
    shape = b"".join(pb_bytes(1, pb_bytes(2, d) if isinstance(d, str) else pb_int(1, d)) for d in dims)
    return pb_bytes(1, name) + pb_bytes(2, pb_bytes(1, pb_int(1, elem) + pb_bytes(2, shape)))


def model(nodes, inits, inputs, outputs, opset=17):
    """ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (domain 1, version 2).
    GraphProto: node 1, name 2, initializer 5, input 11, output 12."""
    g = b"".join(pb_bytes(1, n) for n in nodes) + pb_bytes(2, "g") + b"".join(pb_bytes(5, t) for t in inits)
    g += b"".join(pb_bytes(11, v) for v in inputs) + b"".join(pb_bytes(12, v) for v in outputs)
    return pb_int(1, 8) + pb_bytes(2, "make_corpus") + pb_bytes(7, g) + pb_bytes(8, pb_bytes(1, "") + pb_int(2, opset))


def ramp(n, scale=0.1):
    return [((i * 7 + 3) % 11 - 5) * scale for i in range(n)]


def onnx_convnet(opset=17):
    """x [N,2,6,6] -> Conv 3x3 pad 1 (+bias) -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    inits = [tensor("conv.weight", [3, 2, 3, 3], ramp(54)), tensor("conv.bias", [3], ramp(3)),
             tensor("bn.weight", [3], [1.0, 0.5, 1.5]), tensor("bn.bias", [3], ramp(3)),
             tensor("bn.running_mean", [3], ramp(3, 0.01)), tensor("bn.running_var", [3], [1.0, 2.0, 0.5]),
             tensor("fc.weight", [2, 3], ramp(6)), tensor("fc.bias", [2], [0.1, -0.1])]
    nodes = [node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], "conv",
                  [("kernel_shape", [3, 3]), ("pads", [1, 1, 1, 1]), ("strides", [1, 1])]),
             node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"], ["n"],
                  "bn", [("epsilon", 1e-5)]),
             node("Relu", ["n"], ["r"], "relu"),
             node("GlobalAveragePool", ["r"], ["g"], "pool"),
             node("Flatten", ["g"], ["f"], "flatten", [("axis", 1)]),
             node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], "fc", [("transB", 1)])]
    return model(nodes, inits, [value_info("x", ["N", 2, 6, 6])], [value_info("y", ["N", 2])], opset)


def onnx_residual():
    """Max and average pooling, a residual Add, Identity, Dropout, ReduceMean and a Reshape by a constant."""
    inits = [tensor("a.weight", [2, 2, 1, 1], [1.0, 0.5, -0.5, 1.0]), tensor("shape", [2], [0, -1], INT64),
             tensor("fc.weight", [3, 2], ramp(6))]
    nodes = [node("MaxPool", ["x"], ["m"], "maxpool", [("kernel_shape", [2, 2]), ("strides", [2, 2])]),
             node("Conv", ["m", "a.weight"], ["c"], "a", [("group", 1)]),
             node("Add", ["c", "m"], ["s"], "add"),
             node("Identity", ["s"], ["i"], "identity"),
             node("Dropout", ["i"], ["d"], "dropout"),
             node("AveragePool", ["d"], ["p"], "avgpool",
                  [("kernel_shape", [3, 3]), ("pads", [1, 1, 1, 1]), ("count_include_pad", 1)]),
             node("ReduceMean", ["p"], ["r"], "mean", [("axes", [2, 3]), ("keepdims", 1)]),
             node("Reshape", ["r", "shape"], ["f"], "reshape"),
             node("Gemm", ["f", "fc.weight"], ["y"], "fc", [("transB", 1)])]
    return model(nodes, inits, [value_info("x", ["N", 2, 8, 8])], [value_info("y", ["N", 3])], 13)


def make_onnx():
    put("onnx", "convnet", onnx_convnet())
    put("onnx", "convnet_opset11", onnx_convnet(11))
    put("onnx", "residual", onnx_residual())
    unsupported = [node("Sigmoid", ["x"], ["s"], "sigmoid"),
                   node("Conv", ["s", "w"], ["c"], "conv", [("auto_pad", "SAME_UPPER"), ("pads", [1, 0, 1, 0])]),
                   node("Fused", ["c"], ["y"], "custom", domain="com.example")]
    put("onnx", "unsupported", model(unsupported, [tensor("w", [1, 1, 3, 3], ramp(9))],
                                     [value_info("x", ["N", 1, 4, 4])], [value_info("y", ["N", 1, 4, 4])]))
    put("onnx", "truncated", onnx_convnet()[:-20])
    put("onnx", "int_input", model([node("Relu", ["x"], ["y"], "relu")], [], [value_info("x", [1, 4], INT64)],
                                   [value_info("y", [1, 4])]))


def main():
    make_idx()
    make_cifar10()
    make_stl10()
    make_voc()
    make_image()
    make_safetensors()
    make_onnx()
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(ROOT) for f in fs)
    count = sum(len(fs) for _, _, fs in os.walk(ROOT))
    print(f"{count} files, {total} bytes under {ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
