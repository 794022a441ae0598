#!/usr/bin/env bash
# Packs a local CUDA build for a GPU run without a build on the device (scripts/gpu-batch.sh PREBUILT=DIR):
#   scripts/pack-prebuilt.sh [BUILD] [DIR]       (defaults build-cuda and results/carry; results/ is ignored)
# builds BUILD for sm_90 if it is stale (make CUDA=1 CUDA_ARCH=90), then writes DIR/prebuilt.tar.xz: the
# module (gpureduce/core.so) and the host programs and the C library (for their specs) in one xz stream with
# a 256 MiB dictionary, where the module, the library and the two statically linked programs share most
# of their bytes -- about 46 MB, where the module (43 MB) and the hosts (44 MB) packed apart no longer fit
# the 64 MiB a call may carry. Carry DIR with the call; gpu-batch.sh unpacks it into build/.
set -euo pipefail
build=${1:-build-cuda}
dir=${2:-results/carry}
files=(gpureduce/core.so libgpureduce.so.0 libgpureduce.a c_api_host comm_env_host nvrtc_compile embed_host
       kcache_host nvrtc_headers libgpureduce.so gpureduce.pc)
make -s CUDA=1 CUDA_ARCH=90 BUILD="$build" -j"$(nproc)" all
mkdir -p "$dir"
rm -f "$dir/gpureduce/core.so.xz" "$dir/hosts.tar.xz"      # an older pack's: gpu-batch.sh would prefer them
tar -C "$build" -cf - "${files[@]}" | xz -T1 --lzma2=preset=6,dict=256MiB > "$dir/prebuilt.tar.xz"
ls -l "$dir/prebuilt.tar.xz"
