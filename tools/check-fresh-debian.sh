#!/usr/bin/env bash
# Runs the README's two first-screen commands, unchanged, on a fresh Debian 12: a minimal Debian
# (debootstrap --variant=minbase) in a scratch folder, entered with chroot, holding a clean clone of
# this repository's HEAD. Proves that tools/setup-deps.sh installs everything a new machine lacks.
#   tools/check-fresh-debian.sh [WORK_DIR]      as root; needs Debian's mirror; 20-40 minutes on 2 cores
# The cuda backend is skipped there (no /usr/local/cuda), as on any machine without NVIDIA's toolkit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/strata-fresh}
root=$work/root
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "check-fresh-debian: run as root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap
if [ ! -x "$root/usr/bin/apt-get" ]; then
  mkdir -p "$work"
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev; do mountpoint -q "$root/$m" || mount --rbind "/$m" "$root/$m"; done
trap 'for m in dev sys proc; do umount -R "$root/$m" 2>/dev/null || true; done' EXIT
rm -rf "$root/src/strata"
mkdir -p "$root/src"
git clone -q "$repo" "$root/src/strata"
# The two commands exactly as the README's first screen shows them (its first two sh blocks).
mapfile -t cmds < <(awk '/^```sh$/{getline; print; n++} n==2{exit}' "$repo/README.md")
[ ${#cmds[@]} -eq 2 ] || { echo "check-fresh-debian: README's first screen has no two sh commands" >&2; exit 1; }
for c in "${cmds[@]}"; do
  echo "== fresh Debian 12: $c"
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
    /bin/bash -c "cd /src/strata && $c"
done
echo "check-fresh-debian: both README commands passed on a fresh Debian 12"
