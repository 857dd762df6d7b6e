/*
 * launcher.h: run a program with the CUPTI capture library injected, the
 * process side of `gpumemsim capture` (cli/cmd_capture.c parses the
 * arguments and prints the usage). Plain C, no CUDA: part of the simulator
 * library (capture/launcher.c).
 */
#ifndef GPUMEMSIM_CAPTURE_LAUNCHER_H
#define GPUMEMSIM_CAPTURE_LAUNCHER_H

#define CAPTURE_LIB_NAME "libgpumemsim_capture.so"
#define CAPTURE_DEFAULT_OUT "capture.trace.gz"

/* What the capture was asked for; each becomes a GPUMEMSIM_CAPTURE_*
 * variable the library reads (capture/README.md, "How it works"). The
 * caller has checked the values. */
struct capture_opts {
	const char *out;      /* -o FILE: the trace (CAPTURE_DEFAULT_OUT) */
	const char *labels;   /* --label: "KEY=VALUE\n" lines; NULL: none */
	int links;            /* 0: --no-links */
	int source;           /* 0: --no-source */
	const char *api;      /* --api: callbacks, activity or off */
	const char *record;   /* --record LIST as given ("all") */
	const char *syncs;    /* --syncs: callbacks or activity; NULL: the library's default */
	const char *pause_step; /* --pause-at-step K (digits); NULL: never */
};

/* Run ARGV (ARGV[0] looked up in PATH, NULL-terminated) with the library
 * injected, wait for it and list the traces its processes wrote on stderr
 * ("gpumemsim capture: wrote ..."). Returns the exit status to pass on: the
 * program's, 128+N when signal N killed it, 127 when it could not be run,
 * 1 when the capture could not be set up (said on stderr). */
int capture_launch(const struct capture_opts *o, char *const argv[]);

#endif
