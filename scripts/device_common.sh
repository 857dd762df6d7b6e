# device_common.sh: what every device script (scripts/device_*.sh) starts
# with, sourced after its `exec bash` line:
#   . "$(dirname "$0")/device_common.sh"; device_start "$@"
# device_start OUT: the one argument (else the usage, exit 2); the working
#   directory the repository root ($root); OUT made, absolute ($OUT);
#   py=${PYTHON:-python3}; set -u.
# device_work NAME: the work folder /tmp/NAME ($W, made), a clock ($T0),
#   note TEXT (a line with the seconds since, on stdout and in
#   $W/phases.txt) and pack (all of $W as $OUT/NAME.tgz, replaced whole, so
#   a call cut short keeps the last complete one).
# device_truth_runs DIR RUNS [ARG...]: capture/torch/train_torch.py --mode
#   truth (3 steps, 1 warm-up, as shared/data/torch-allocator-truth) for each
#   MODEL:BATCH of RUNS into DIR, 4 processes at a time, with the ARGs added
#   ("{}" in an ARG becomes MODEL-bBATCH); variables set before the call
#   (CUDA_MODULE_LOADING=...) reach the processes; notes the traces made.
# device_jax_python: $JPY, the first python that imports jax, flax and optax
#   ($JAX_PYTHON first), or empty.
# device_build: build/gpumemsim and the capture library when either is
#   missing (device_devdeps first; the log in $W/build.log); on failure
#   notes it, packs and exits 1. Call after device_work.
# device_left: the seconds left before DEADLINE_S (default 560) since
#   device_work started the clock.
# device_torch_env: $W/env.txt: the GPU and driver, torch, torchvision and
#   cuDNN versions, the CPUs (for the step-time scripts).
# device_pin: the array pin=(taskset -c $PIN) when PIN names CPUs (a taskset
#   list; scripts/device_cpu_scan.sh finds the fast ones), else empty.
# step_mean_ms JSON A B: the mean (ms) of step_s[A:B] of a train_torch JSON
#   ("-" when there are none).
# device_devdeps: SQLite's and zlib's headers and libraries from
#   .devdeps/*.deb (the device has no package manager; carry .devdeps with
#   the run), for a build there.
device_start() {
	set -u
	[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
	root=$(cd "$(dirname "$0")/.." && pwd -P)
	cd "$root" || exit 1
	mkdir -p "$1" && OUT=$(cd "$1" && pwd -P) || exit 1
	py=${PYTHON:-python3}
}

device_work() {
	WNAME=$1
	W=/tmp/$1
	mkdir -p "$W"
	T0=$SECONDS
}
note() { printf '%4ds %s\n' $((SECONDS - T0)) "$*" | tee -a "$W/phases.txt"; }
pack() { tar -czf "$OUT/$WNAME.tgz.tmp" -C /tmp "$WNAME" && mv "$OUT/$WNAME.tgz.tmp" "$OUT/$WNAME.tgz"; }

device_truth_runs() {
	local dir=$1 runs=$2 r m b
	shift 2
	mkdir -p "$dir"
	for r in $runs; do
		m=${r%:*} b=${r#*:}
		timeout 240 "$py" capture/torch/train_torch.py --mode truth --model "$m" --batch "$b" \
			--steps 3 --warmup 1 --outdir "$dir" "${@//\{\}/$m-b$b}" > "$dir/$m-b$b.log" 2>&1 &
		while [ "$(jobs -r | wc -l)" -ge 4 ]; do sleep 0.5; done
	done
	wait
	note "$dir: $(ls "$dir"/*.trace.gz 2>/dev/null | wc -l) traces"
}

device_devdeps() {
	ls .devdeps/*.deb > /dev/null 2>&1 || return 0
	mkdir -p /opt/dd && for f in .devdeps/*.deb; do dpkg -x "$f" /opt/dd; done
	export CPATH=/opt/dd/usr/include${CPATH:+:$CPATH}
	export LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
	export LD_LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

device_jax_python() {
	JPY=
	local c
	for c in ${JAX_PYTHON:-} /opt/jax/.venv/bin/python /opt/*/.venv/bin/python python3; do
		[ -x "$c" ] || command -v "$c" >/dev/null 2>&1 || continue
		"$c" -c "import jax, flax, optax" >/dev/null 2>&1 && { JPY=$c; return 0; }
	done
}

device_build() {
	[ -x build/gpumemsim ] && [ -f build/libgpumemsim_capture.so ] && return 0
	device_devdeps
	make -j16 > "$W/build.log" 2>&1 && make capture >> "$W/build.log" 2>&1 && return 0
	note "build failed (build.log)"
	pack
	exit 1
}

device_torch_env() {
	{
		nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
		"$py" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cudnn", torch.backends.cudnn.version())'
		nproc
	} > "$W/env.txt" 2>&1
}

device_pin() {
	pin=()
	if [ -n "${PIN:-}" ] && [ "$PIN" != - ]; then pin=(taskset -c "$PIN"); fi
}

step_mean_ms() {
	"$py" -c 'import json,sys; s=json.load(open(sys.argv[1]))["step_s"][int(sys.argv[2]):int(sys.argv[3])]; print("%.3f" % (1e3*sum(s)/len(s)) if s else "-")' "$@" 2>/dev/null || echo -
}

device_left() { echo $((${DEADLINE_S:-560} - (SECONDS - T0))); }
