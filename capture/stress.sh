#!/usr/bin/env bash
# stress.sh: many back-to-back captures of two small programs, K at a time,
# each checked (issue 12). Run on the GPU host from the repository root,
# after `make capture cnn`.
#
#   capture/stress.sh [BUILD] [N] [OUTDIR]        (defaults: build, 20, traces/stress)
#
# Programs (STRESS_PROGRAMS, default "jax cnn"):
#   jax  capture/jax/train_jax.py --alloc growth --autotune --model cnn --batch 16
#        --image 32 --steps 3 (XLA_FLAGS unset: autotuning on;
#        XLA_PYTHON_CLIENT_PREALLOCATE=false, so K processes share the GPU)
#   cnn  build/cnn --model resnet --batch 8 --image 64 --steps 3 --print-every 1
# Each program first runs REF_RUNS (2) times without capture: the expected
# exit status (the first one's) and stdout. Then N runs under `gpumemsim
# capture` with GPUMEMSIM_CAPTURE_VERBOSE=1, PAR (4) processes at a time
# (both programs' runs interleaved). Each captured run is checked:
#   exit       equals the uncaptured run's (and that one is 0)
#   output     stdout equals an uncaptured run's, after blanking what varies
#              from run to run (times, losses, chosen algorithms, memory
#              figures): same lines, same order, same final marker line
#              (`train_jax: ... ok=True`, `cnn: end ... live_after_free 0`)
#   complete   the launcher's stderr says `wrote FILE (N records, M dropped)`
#              for the trace, not `incomplete`
#   validate   `gpumemsim trace validate FILE` passes
# Output:
#   OUTDIR/stress.tsv   program run exit expected_exit output_ok trace_complete
#                       validates records dropped traces secs
#   OUTDIR/refs.tsv     the uncaptured runs: program ref exit stdout_lines secs
#   OUTDIR/verbose.txt  every `gpumemsim capture:` stderr line of every
#                       captured run (the verbose summary line included),
#                       prefixed with program and run
#   OUTDIR/summary.txt  one line per program, also printed on stdout:
#                       `jax: 20/20 complete, 20/20 exit equal, 20/20 output equal, 20/20 validate`
#   OUTDIR/fail/PROGRAM-RUN/  for a run that failed any check: its stdout,
#                       stderr, validate output and trace(s); passing runs'
#                       traces are deleted
# Exit status 1 when any check of any run failed (or a reference run did
# not exit 0).
#
# Environment: PAR (4), REF_RUNS (2), STRESS_PROGRAMS, RUN_TIMEOUT (180 s per
# run), PYTHON (python3), JAX_PYTHON ($PYTHON), STRESS_JAX_ARGS and
# STRESS_CNN_ARGS (replace the program arguments above). About 2 minutes for
# N=20 on an H200 (a JAX run takes 10-20 s, most of it compiling and
# autotuning; a CNN run 2-4 s).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

B=${1:-build}
N=${2:-20}
OUTDIR=${3:-${OUTDIR:-traces/stress}}
here=$(cd "$(dirname "$0")" && pwd -P)
root=$(cd "$here/.." && pwd -P)
case $N in '' | *[!0-9]*) echo "stress.sh: N must be a number, got '$N'" >&2; exit 2 ;; esac
if [ ! -d "$B" ]; then
	echo "stress.sh: $B: no such build folder" >&2
	exit 2
fi
B=$(cd "$B" && pwd -P)
G=$B/gpumemsim
if [ ! -x "$G" ]; then
	echo "stress.sh: $G missing (make && make capture)" >&2
	exit 2
fi
mkdir -p "$OUTDIR" || exit 1
O=$(cd "$OUTDIR" && pwd -P)
rm -rf "$O/fail"
rm -f "$O/stress.tsv" "$O/refs.tsv" "$O/verbose.txt" "$O/summary.txt"
W=$(mktemp -d "${TMPDIR:-/tmp}/gpumemsim-stress.XXXXXX") || exit 1
W=$(cd "$W" && pwd -P)
trap 'rm -rf "$W"' EXIT
# TERM/INT (a caller's time limit): stop the runs in progress (timeout passes
# the TERM on: the launcher forwards it, the capture writes its trailer),
# then check and report what ran; the runs that did not count as failed.
stopped() {
	local f n=0 alive
	trap - TERM INT
	note "terminated: stopping the runs in progress"
	for f in "$W"/*/pid; do
		[ -f "$f" ] && kill -TERM "$(cat "$f")" 2> /dev/null
	done
	while [ $n -lt 15 ]; do # up to 15 s for them to finish their traces
		ls "$W"/*/pid > /dev/null 2>&1 || break
		alive=0
		for f in "$W"/*/pid; do
			[ -f "$f" ] && kill -0 "$(cat "$f")" 2> /dev/null && alive=1
		done
		[ $alive = 0 ] && break
		sleep 1
		n=$((n + 1))
	done
	STOPPED=" (terminated before all runs finished)"
	evaluate > /dev/null 2>&1 || true
	cat "$O/summary.txt" 2> /dev/null
	exit 143
}
STOPPED="" refbad="" fails=0
trap stopped TERM INT

PY=${PYTHON:-python3}
JPY=${JAX_PYTHON:-$PY}
PAR=${PAR:-4}
REFS=${REF_RUNS:-2}
tmo=${RUN_TIMEOUT:-180}
programs=${STRESS_PROGRAMS:-jax cnn}
T0=$SECONDS
CLEAN=(-u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH
	-u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF
	-u XLA_FLAGS -u XLA_PYTHON_CLIENT_PREALLOCATE -u XLA_PYTHON_CLIENT_ALLOCATOR
	-u XLA_PYTHON_CLIENT_MEM_FRACTION -u GPUMEMSIM_CAPTURE_VERBOSE)

note() { printf '[stress %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
now() { date +%s.%N; }

define() { # NAME: sets CMD (@JSON@ = the run's json path) and ENVV
	local extra
	ENVV=()
	case $1 in
	jax)
		ENVV=(XLA_PYTHON_CLIENT_PREALLOCATE=false)
		read -r -a extra <<< "${STRESS_JAX_ARGS:---model cnn --batch 16 --image 32 --steps 3}"
		CMD=("$JPY" "$root/capture/jax/train_jax.py" --alloc growth --autotune "${extra[@]}" --json @JSON@) ;;
	cnn)
		read -r -a extra <<< "${STRESS_CNN_ARGS:---model resnet --batch 8 --image 64 --steps 3 --print-every 1}"
		CMD=("$B/cnn" "${extra[@]}") ;;
	*)
		return 1 ;;
	esac
}

# norm PROGRAM FILE: stdout with what varies between runs blanked.
norm() {
	case $1 in
	jax)
		sed -E 's/^(train_jax: .* step [0-9]+) .*/\1/; s/^(train_jax: .* ok=[A-Za-z]+) .*/\1/' "$2" ;;
	cnn)
		sed -E 's/^(cnn: step [0-9]+) .*/\1/; s/^(cnn: algo [^ ]+) .*/\1/;
			s/^(cnn: (peak_live_bytes|first_step_ms)) .*/\1/' "$2" ;;
	*)
		cat "$2" ;;
	esac
}

# job KIND PROGRAM I: one run in $W/KIND-PROGRAM-I (KIND ref: uncaptured,
# cap: captured, then its trace validated). Leaves out, err, rc, secs (and
# validate, vrc).
job() {
	local kind=$1 prog=$2 i=$3 a t0 t1 rc
	local d=$W/$kind-$prog-$i cmd=()
	mkdir -p "$d"
	define "$prog" || return 1
	for a in "${CMD[@]}"; do
		[ "$a" = @JSON@ ] && a=$d/run.json
		cmd+=("$a")
	done
	# timeout's pid in $d/pid while it runs: the TERM trap stops it by id
	t0=$(now)
	if [ "$kind" = ref ]; then
		timeout -k 10 "$tmo" env "${CLEAN[@]}" ${ENVV[@]+"${ENVV[@]}"} "${cmd[@]}" \
			> "$d/out" 2> "$d/err" < /dev/null &
	else
		timeout -k 10 "$tmo" env "${CLEAN[@]}" ${ENVV[@]+"${ENVV[@]}"} GPUMEMSIM_CAPTURE_VERBOSE=1 \
			"$G" capture -o "$d/t.trace.gz" --label program="$prog" --label stress_run="$i" -- \
			"${cmd[@]}" > "$d/out" 2> "$d/err" < /dev/null &
	fi
	echo $! > "$d/pid"
	wait $!
	rc=$?
	rm -f "$d/pid"
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }' > "$d/secs"
	if [ "$kind" = cap ] && [ -f "$d/t.trace.gz" ]; then
		"$G" trace validate "$d/t.trace.gz" > "$d/validate" 2>&1
		echo $? > "$d/vrc"
	fi
	echo "$rc" > "$d/rc"
}

# evaluate: the checks of every run into stress.tsv, verbose.txt, summary.txt
# and fail/; sets fails.
evaluate() {
	local p r i d t rc exp ex out line traces records dropped comp va f rng s
	local n_complete n_exit n_out n_valid n_pass recs drops
	printf 'program\trun\texit\texpected_exit\toutput_ok\ttrace_complete\tvalidates\trecords\tdropped\ttraces\tsecs\n' > "$O/stress.tsv"
	: > "$O/verbose.txt"
	: > "$O/summary.txt"
	fails=0
	for p in $programs; do
		exp=$(cat "$W/ref-$p-1/rc" 2>/dev/null || echo -)
		for r in $(seq 1 "$REFS"); do
			[ -d "$W/ref-$p-$r" ] && norm "$p" "$W/ref-$p-$r/out" > "$W/ref-$p-$r/norm" 2>/dev/null
		done
		n_complete=0 n_exit=0 n_out=0 n_valid=0 n_pass=0 recs="" drops=0
		for i in $(seq 1 "$N"); do
			d=$W/cap-$p-$i
			t=$d/t.trace.gz
			rc=$(cat "$d/rc" 2>/dev/null || echo -)
			grep '^gpumemsim capture:' "$d/err" 2>/dev/null | sed "s/^/$p $i: /" >> "$O/verbose.txt"
			# exit
			if [ "$rc" = "$exp" ] && [ "$exp" = 0 ]; then ex=yes; n_exit=$((n_exit + 1)); else ex=no; fi
			# output against any reference run
			out=no
			[ -d "$d" ] && norm "$p" "$d/out" > "$d/norm" 2>/dev/null
			if [ -s "$d/norm" ]; then
				for r in $(seq 1 "$REFS"); do
					if [ -s "$W/ref-$p-$r/norm" ] && cmp -s "$d/norm" "$W/ref-$p-$r/norm"; then out=yes; break; fi
				done
			fi
			[ $out = yes ] && n_out=$((n_out + 1))
			# the launcher's line for this trace
			line=$(grep -F "gpumemsim capture: wrote $t (" "$d/err" 2>/dev/null | tail -1)
			traces=$(grep -c '^gpumemsim capture: wrote ' "$d/err" 2>/dev/null)
			records=- dropped=-
			case $line in
			"") comp=missing ;;
			*"(incomplete"*) comp=incomplete ;;
			*" records, "*" dropped)")
				comp=yes
				records=$(printf '%s\n' "$line" | sed -n 's/.*(\([0-9]*\) records, \([0-9]*\) dropped)$/\1/p')
				dropped=$(printf '%s\n' "$line" | sed -n 's/.*(\([0-9]*\) records, \([0-9]*\) dropped)$/\2/p')
				n_complete=$((n_complete + 1))
				recs="$recs ${records:-0}"
				drops=$((drops + ${dropped:-0})) ;;
			*) comp=unknown ;;
			esac
			if [ "$(cat "$d/vrc" 2>/dev/null)" = 0 ]; then va=ok; n_valid=$((n_valid + 1)); else va=FAIL; fi
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$i" "$rc" "$exp" "$out" "$comp" "$va" \
				"$records" "$dropped" "${traces:-0}" "$(cat "$d/secs" 2>/dev/null || echo -)" >> "$O/stress.tsv"
			if [ $ex = yes ] && [ $out = yes ] && [ $comp = yes ] && [ $va = ok ]; then
				n_pass=$((n_pass + 1))
			elif [ -d "$d" ]; then
				f=$O/fail/$p-$i
				mkdir -p "$f"
				cp "$d/out" "$f/stdout" 2>/dev/null
				tail -n 300 "$d/err" > "$f/stderr" 2>/dev/null
				head -n 50 "$d/validate" > "$f/validate" 2>/dev/null
				diff "$W/ref-$p-1/norm" "$d/norm" > "$f/stdout.diff" 2>/dev/null
				mv "$d"/t.trace*.gz "$f/" 2>/dev/null
				[ -f "$d/run.json" ] && cp "$d/run.json" "$f/"
			fi
		done
		# shellcheck disable=SC2086 # one record count a word
		rng=$(printf '%s\n' $recs | awk 'NF { if (mn == "" || $1 < mn) mn = $1; if ($1 > mx) mx = $1 } END { if (mn != "") printf "%s..%s", mn, mx; else printf "-" }')
		s="$p: $n_complete/$N complete, $n_exit/$N exit equal, $n_out/$N output equal, $n_valid/$N validate"
		s="$s (records $rng, dropped $drops in all; expected exit $exp"
		case " $refbad " in *" $p "*) s="$s: the uncaptured run FAILED, see fail/$p-ref1" ;; esac
		if [ "$REFS" -ge 2 ] && ! cmp -s "$W/ref-$p-1/norm" "$W/ref-$p-2/norm"; then
			s="$s; the uncaptured runs' outputs differ"
		fi
		s="$s)$STOPPED"
		echo "$s" | tee -a "$O/summary.txt"
		[ "$n_pass" -eq "$N" ] || fails=$((fails + N - n_pass))
	done
	[ -n "$refbad" ] && fails=$((fails + 1))
}

running=0
spawn() { # job arguments: run it in the background, at most PAR at a time
	job "$@" &
	running=$((running + 1))
	if [ "$running" -ge "$PAR" ]; then
		wait -n
		running=$((running - 1))
	fi
}
drain() { wait; running=0; }

valid=""
for p in $programs; do
	if define "$p"; then valid="$valid $p"; else note "unknown program '$p' (known: jax cnn)"; fi
done
[ -n "$valid" ] || exit 2
programs=$valid

# ---- reference runs (uncaptured) ----------------------------------------
note "reference runs: $REFS per program ($programs), $PAR at a time"
for r in $(seq 1 "$REFS"); do
	for p in $programs; do spawn ref "$p" "$r"; done
done
drain
printf 'program\tref\texit\tstdout_lines\tsecs\n' > "$O/refs.tsv"
refbad=""
for p in $programs; do
	for r in $(seq 1 "$REFS"); do
		d=$W/ref-$p-$r
		printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$r" "$(cat "$d/rc" 2>/dev/null || echo -)" \
			"$(wc -l < "$d/out" 2>/dev/null || echo -)" "$(cat "$d/secs" 2>/dev/null || echo -)" >> "$O/refs.tsv"
	done
	if [ "$(cat "$W/ref-$p-1/rc" 2>/dev/null)" != 0 ]; then
		refbad="$refbad $p"
		mkdir -p "$O/fail/$p-ref1"
		cp "$W/ref-$p-1/out" "$O/fail/$p-ref1/stdout" 2>/dev/null
		tail -n 200 "$W/ref-$p-1/err" > "$O/fail/$p-ref1/stderr" 2>/dev/null
	fi
done
note "reference runs done: $(awk -F'\t' 'NR > 1 { printf "%s#%s exit %s %ss; ", $1, $2, $3, $5 }' "$O/refs.tsv")"

# ---- captured runs ------------------------------------------------------
note "captured runs: $N per program, $PAR at a time"
for i in $(seq 1 "$N"); do
	for p in $programs; do spawn cap "$p" "$i"; done
done
drain
note "captured runs done"

# ---- checks -------------------------------------------------------------
evaluate
note "done in $((SECONDS - T0)) s; $fails failed run(s); $O/stress.tsv"
[ "$fails" -eq 0 ]
