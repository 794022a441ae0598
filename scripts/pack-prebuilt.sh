#!/usr/bin/env bash
# Packs a local CUDA build for a GPU run without a build on the device (scripts/gpu-batch.sh PREBUILT=DIR):
#   scripts/pack-prebuilt.sh [BUILD] [DIR]       (defaults build-cuda and results/carry; results/ is ignored)
# builds BUILD for sm_90 if it is stale (make CUDA=1 CUDA_ARCH=90), then writes DIR/gpureduce/core.so.xz
# (the module) and DIR/hosts.tar.xz (the host programs and the C library, for their specs). Carry DIR with
# the call; both together are about 25 MB of the 64 MiB a call may carry.
set -euo pipefail
build=${1:-build-cuda}
dir=${2:-results/carry}
hosts=(c_api_host comm_env_host embed_host kcache_host nvrtc_compile nvrtc_headers
       libgpureduce.so.0 libgpureduce.so libgpureduce.a gpureduce.pc)
make -s CUDA=1 CUDA_ARCH=90 BUILD="$build" -j"$(nproc)" all
mkdir -p "$dir/gpureduce"
xz -T0 -3 -c "$build/gpureduce/core.so" > "$dir/gpureduce/core.so.xz"
# one stream with a large dictionary: the two statically linked programs and the library share most bytes
tar -C "$build" -cf - "${hosts[@]}" | xz -T1 --lzma2=preset=6,dict=192MiB > "$dir/hosts.tar.xz"
ls -l "$dir/gpureduce/core.so.xz" "$dir/hosts.tar.xz"
