#!/usr/bin/env bash
# device_recapture.sh: the eager captures `whatif compile` predicts from,
# taken again with nothing else on the host: capture/torch/recipe.sh for
# each model and batch, one at a time. The shipped captures of these models
# were taken beside other work (compilations, or four recipe lanes side by
# side), and their host gaps, which a host-bound step is made of, were up to
# 2x those of the same program alone.
#   scripts/device_recapture.sh OUT
# First capture/torch/launch_cost.py --train on the same host (LAUNCH_COST=0: not).
# OUT: build.log, timeline.txt, recipes-bBATCH.tgz (recipe-MODEL-bBATCH/),
# launch_cost.json and its log.
# Environment: MODELS, BATCHES ("32 64"), PYTHON (python3), DEADLINE_S (560).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
T0=$(date +%s)
W=/tmp/recapture
MODELS=${MODELS:-"resnet18 vgg11 resnet50 mobilenet_v2 mobilenet_v3_large efficientnet_b0 densenet121 vit_b_16"}
left() { echo $((${DEADLINE_S:-560} - ($(date +%s) - T0))); }
log() { printf '+%ss\t%s\n' $(($(date +%s) - T0)) "$*" | tee -a "$OUT/timeline.txt"; }
rm -rf "$W" && mkdir -p "$W" || exit 1
device_devdeps
make -j16 > "$OUT/build.log" 2>&1 && make capture >> "$OUT/build.log" 2>&1
log "build rc $?"
# the host cost per kernel of a training graph, on the same quiet host
if [ "${LAUNCH_COST:-1}" = 1 ] && [ "$(left)" -gt 300 ]; then
	timeout 150 "$py" capture/torch/launch_cost.py --train --n 100 --iters 40 \
		--json "$OUT/launch_cost.json" > "$OUT/launch_cost.log" 2>&1
	log "launch_cost rc $?"
fi
for b in ${BATCHES:-32 64}; do
	for m in $MODELS; do
		if [ "$(left)" -lt 45 ]; then log "recipe $m b$b skipped: $(left) s left"; continue; fi
		s=$(date +%s)
		timeout $(($(left) - 15)) env PYTHON="$py" GPUMEMSIM="$root/build/gpumemsim" \
			bash capture/torch/recipe.sh "$m" "$b" "$W/recipe-$m-b$b" > "$W/recipe-$m-b$b.log" 2>&1
		log "recipe $m b$b rc $? $(($(date +%s) - s)) s"
		(cd "$W" && tar -czf "$OUT/recipes-b$b.tgz" recipe-*-b$b recipe-*-b$b.log)
	done
done
log done
