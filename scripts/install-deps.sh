#!/usr/bin/env bash
# Installs what syncd needs to build, run and test on Debian 12. Safe to re-run: packages already
# present are skipped without touching the network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libuv1-dev libhttp-parser-dev libxxhash-dev libssl-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libudev-dev libyuv-dev
  clang-14 libclang-rt-14-dev
  python3 python3-websockets python3-xxhash python3-numpy python3-matplotlib
  curl util-linux
  libboost-dev libwebsockets-dev
  libjack-jackd2-dev jackd2
  chromium nodejs janus
  pipewire pipewire-bin wireplumber libpipewire-0.3-dev libspa-0.2-dev dbus-daemon
  gstreamer1.0-pipewire gstreamer1.0-tools gstreamer1.0-plugins-base python3-gst-1.0
  gir1.2-gstreamer-1.0 python3-gi
  gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-nice gir1.2-gst-plugins-base-1.0
  gir1.2-gst-plugins-bad-1.0
  xvfb xdg-desktop-portal xdg-desktop-portal-gtk libglib2.0-bin
  libsrtp2-dev libisal-dev x264 openssl iproute2 libopus-dev
  libx264-dev libavcodec-dev libavutil-dev zlib1g-dev
)
# npm: Debian's package only when no npm is on PATH (NodeSource's nodejs ships its own npm and
# conflicts with Debian's).
command -v npm >/dev/null || packages+=(npm)
if [[ "${1:-}" == "--run-only" ]]; then
  packages=(build-essential cmake ninja-build pkg-config libuv1-dev libhttp-parser-dev
            libxxhash-dev libssl-dev nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
            libudev-dev libjack-jackd2-dev libyuv-dev libpipewire-0.3-dev libspa-0.2-dev
            libsrtp2-dev libisal-dev libopus-dev libx264-dev libavcodec-dev libavutil-dev
            zlib1g-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  echo "installing: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
