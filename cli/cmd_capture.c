/*
 * cmd_capture.c: `gpumemsim capture`, the launcher that runs an unmodified
 * CUDA program with the CUPTI capture library injected.
 *
 * It needs no CUDA: the driver loads the library itself at cuInit when
 * CUDA_INJECTION64_PATH names it, and NVTX finds it through
 * NVTX_INJECTION64_PATH. The launcher only sets the environment the library
 * reads (GPUMEMSIM_CAPTURE_*), runs the program, passes its exit status
 * through and lists the traces the program's processes wrote (each process
 * appends a line to a report file the launcher names). The program's stdout
 * and stderr are its own; the launcher speaks on stderr only.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../capture/convert.h"
#include "cli.h"
#include "../base/vec.h"

#define CAPTURE_LIB_NAME "libgpumemsim_capture.so"
#define CAPTURE_DEFAULT_OUT "capture.trace.gz"

static volatile sig_atomic_t capture_child_pid;

static void capture_usage(FILE *f)
{
	fprintf(f,
		"usage: gpumemsim capture [-o FILE] [--label KEY=VALUE]... [--no-links] [--api MODE]\n"
		"                         [--no-source] [--record LIST] [--syncs MODE] -- CMD [ARGS]\n"
		"\n"
		"Run CMD with the CUPTI capture library injected and write one trace per\n"
		"process that does CUDA work (kernels, copies, allocations): the first to\n"
		"FILE (default " CAPTURE_DEFAULT_OUT "), others to FILE with their pid before\n"
		"the .gz (FILE.PID without .gz), labelled capture_process=root|child.\n"
		"gzip when FILE ends in .gz. CMD's exit status is passed through.\n"
		"\n"
		"  -o FILE            trace to write (an existing FILE is replaced)\n"
		"  --label KEY=VALUE  add a label to the trace header (repeatable)\n"
		"  --no-links         do not record kernel-to-buffer links (less overhead)\n"
		"  --api MODE         how host API calls are timed: callbacks (default: only the\n"
		"                     calls the trace keeps), activity (CUPTI records every call:\n"
		"                     slower), off (no API records, no step-time what-ifs)\n"
		"  --no-source        do not ask CUPTI which library made each allocation: it\n"
		"                     slows every allocation call (use for step-time captures\n"
		"                     of programs that allocate per tensor)\n"
		"  --record LIST      what to record, comma-separated: kernels, memory, copies,\n"
		"                     syncs, nvtx, all (default all; fewer, less overhead)\n"
		"  --syncs MODE       how synchronisations are recorded: callbacks (on the sync\n"
		"                     calls) or activity (CUPTI's SYNCHRONIZATION records)\n"
		"\n"
		"environment: GPUMEMSIM_CAPTURE_LIB  the library (default: " CAPTURE_LIB_NAME "\n"
		"             next to the gpumemsim binary; build it with `make capture`)\n"
		"             GPUMEMSIM_CAPTURE_FLUSH_MS, GPUMEMSIM_CAPTURE_LAG_MS: see capture/README.md\n");
}

/* Forward a termination request to the program: it owns the trace. */
static void capture_forward(int sig)
{
	if (capture_child_pid > 0)
		kill((pid_t)capture_child_pid, sig);
}

/* The library: GPUMEMSIM_CAPTURE_LIB, else next to this binary. */
static int capture_find_lib(char *out, size_t len)
{
	const char *env = getenv("GPUMEMSIM_CAPTURE_LIB");
	char buf[PATH_MAX];
	if (env && *env) {
		if (!realpath(env, out) || access(out, R_OK) != 0) {
			fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_LIB=%s: %s\n", env,
				strerror(errno));
			return -1;
		}
		return 0;
	}
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0) {
		fprintf(stderr, "gpumemsim capture: cannot find my own binary: %s\n", strerror(errno));
		return -1;
	}
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	if ((size_t)snprintf(out, len, "%s/%s", buf, CAPTURE_LIB_NAME) >= len || access(out, R_OK) != 0) {
		fprintf(stderr,
			"gpumemsim capture: %s/%s not found (build it with `make capture`, or set "
			"GPUMEMSIM_CAPTURE_LIB)\n", buf, CAPTURE_LIB_NAME);
		return -1;
	}
	return 0;
}

/* An absolute path for FILE (its folder must exist), so every process of
 * the program writes where the user meant, whatever its working folder. */
static int capture_abs_out(const char *file, char *out, size_t len)
{
	char dir[PATH_MAX], rdir[PATH_MAX];
	const char *base = strrchr(file, '/');
	if (base) {
		size_t dl = (size_t)(base - file);
		if (dl >= sizeof(dir))
			return -1;
		memcpy(dir, file, dl);
		dir[dl] = '\0';
		if (dl == 0)
			strcpy(dir, "/");
		base++;
	} else {
		strcpy(dir, ".");
		base = file;
	}
	if (!*base) {
		fprintf(stderr, "gpumemsim capture: -o %s: not a file name\n", file);
		return -1;
	}
	if (!realpath(dir, rdir)) {
		fprintf(stderr, "gpumemsim capture: -o %s: folder %s: %s\n", file, dir, strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(out, len, "%s/%s", strcmp(rdir, "/") ? rdir : "", base) >= len) {
		fprintf(stderr, "gpumemsim capture: -o %s: path too long\n", file);
		return -1;
	}
	return 0;
}

/* Print the report the processes appended to: "path records dropped
 * complete" lines, one when a process claims its file (complete 0) and one
 * when it finishes it; the last line for a path wins, so a process that died
 * is still listed, as incomplete. Returns how many traces were written. */
static int capture_print_report(const char *report)
{
	FILE *f = fopen(report, "r");
	char line[PATH_MAX + 128];
	struct { char path[PATH_MAX]; unsigned long long recs, dropped; int complete; } *e = NULL;
	int n = 0;
	size_t cap = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char path[PATH_MAX];
		unsigned long long recs = 0, dropped = 0;
		int complete = 0, i;
		if (sscanf(line, "%4095s %llu %llu %d", path, &recs, &dropped, &complete) != 4)
			continue;
		for (i = 0; i < n && strcmp(e[i].path, path); i++)
			;
		if (i == n) {
			if (VEC_RESERVE(e, cap, (size_t)n + 1, 8) < 0)
				break;
			snprintf(e[n++].path, sizeof(e->path), "%s", path);
		}
		e[i].recs = recs;
		e[i].dropped = dropped;
		e[i].complete = complete;
	}
	fclose(f);
	for (int i = 0; i < n; i++) {
		if (e[i].complete)
			fprintf(stderr, "gpumemsim capture: wrote %s (%llu records, %llu dropped)\n",
				e[i].path, e[i].recs, e[i].dropped);
		else
			fprintf(stderr, "gpumemsim capture: wrote %s (incomplete: the process ended "
					"before finishing it)\n", e[i].path);
	}
	free(e);
	return n;
}

/* `gpumemsim capture ... -- CMD`: see capture_usage(). */
int cmd_capture(int argc, char **argv)
{
	const char *out_arg = CAPTURE_DEFAULT_OUT;
	char lib[PATH_MAX], out[PATH_MAX], report[] = "/tmp/gpumemsim-capture-XXXXXX";
	char *labels = NULL;
	size_t labels_len = 0;
	int links = 1, source = 1, i, rc = 1, report_fd = -1;
	const char *api = "callbacks", *record = "all", *syncs = NULL;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (cli_is_help(a)) {
			capture_usage(stdout);
			rc = 0;
			goto out;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (++i >= argc) {
				fprintf(stderr, "gpumemsim capture: %s needs a file\n", a);
				rc = EXIT_USAGE;
				goto out;
			}
			out_arg = argv[i];
		} else if (!strcmp(a, "--label")) {
			const char *kv = ++i < argc ? argv[i] : NULL;
			const char *eq = kv ? strchr(kv, '=') : NULL;
			const char *sp = kv ? strchr(kv, ' ') : NULL;
			if (!kv || !eq || eq == kv || strpbrk(kv, "\n\r") || (sp && sp < eq)) {
				fprintf(stderr, "gpumemsim capture: --label wants KEY=VALUE (a key without "
						"spaces, one line), got '%s'\n", kv ? kv : "");
				rc = EXIT_USAGE;
				goto out;
			}
			size_t l = strlen(kv);
			char *n = realloc(labels, labels_len + l + 2);
			if (!n) {
				fprintf(stderr, "gpumemsim capture: out of memory\n");
				goto out;
			}
			labels = n;
			memcpy(labels + labels_len, kv, l);
			labels_len += l;
			labels[labels_len++] = '\n';
			labels[labels_len] = '\0';
		} else if (!strcmp(a, "--no-links")) {
			links = 0;
		} else if (!strcmp(a, "--no-source")) {
			source = 0;
		} else if (!strcmp(a, "--record")) {
			record = ++i < argc ? argv[i] : "";
			unsigned bits;
			if (cap_record_parse(record, &bits) < 0) {
				fprintf(stderr, "gpumemsim capture: --record wants a comma-separated list "
						"of kernels, memory, copies, syncs, nvtx, all; got '%s'\n", record);
				rc = EXIT_USAGE;
				goto out;
			}
		} else if (!strcmp(a, "--syncs")) {
			syncs = ++i < argc ? argv[i] : "";
			if (strcmp(syncs, "callbacks") && strcmp(syncs, "activity")) {
				fprintf(stderr, "gpumemsim capture: --syncs wants callbacks or activity, "
						"got '%s'\n", syncs);
				rc = EXIT_USAGE;
				goto out;
			}
		} else if (!strcmp(a, "--api")) {
			api = ++i < argc ? argv[i] : "";
			if (strcmp(api, "callbacks") && strcmp(api, "activity") && strcmp(api, "off")) {
				fprintf(stderr, "gpumemsim capture: --api wants callbacks, activity or off, "
						"got '%s'\n", api);
				rc = EXIT_USAGE;
				goto out;
			}
		} else {
			fprintf(stderr, "gpumemsim capture: unknown option '%s' (the program goes after --)\n", a);
			capture_usage(stderr);
			rc = EXIT_USAGE;
			goto out;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "gpumemsim capture: no program to run (gpumemsim capture [options] -- CMD [ARGS])\n");
		rc = EXIT_USAGE;
		goto out;
	}
	if (capture_find_lib(lib, sizeof(lib)) < 0 || capture_abs_out(out_arg, out, sizeof(out)) < 0)
		goto out;
	if (unlink(out) < 0 && errno != ENOENT) {
		fprintf(stderr, "gpumemsim capture: cannot replace %s: %s\n", out, strerror(errno));
		goto out;
	}
	report_fd = mkstemp(report);
	if (report_fd < 0) {
		fprintf(stderr, "gpumemsim capture: cannot create a report file in /tmp: %s\n",
			strerror(errno));
		goto out;
	}
	const char *prev = getenv("CUDA_INJECTION64_PATH");
	if (prev && *prev && strcmp(prev, lib))
		fprintf(stderr, "gpumemsim capture: replacing CUDA_INJECTION64_PATH=%s\n", prev);
	if (setenv("CUDA_INJECTION64_PATH", lib, 1) || setenv("NVTX_INJECTION64_PATH", lib, 1) ||
	    setenv("GPUMEMSIM_CAPTURE_OUT", out, 1) || setenv("GPUMEMSIM_CAPTURE_REPORT", report, 1) ||
	    setenv("GPUMEMSIM_CAPTURE_LINKS", links ? "1" : "0", 1) ||
	    setenv("GPUMEMSIM_CAPTURE_API", api, 1) ||
	    setenv("GPUMEMSIM_CAPTURE_SOURCE", source ? "1" : "0", 1) ||
	    setenv("GPUMEMSIM_CAPTURE_RECORD", record, 1) ||
	    setenv("GPUMEMSIM_CAPTURE_LABELS", labels ? labels : "", 1) ||
	    (syncs && setenv("GPUMEMSIM_CAPTURE_SYNCS", syncs, 1))) {
		fprintf(stderr, "gpumemsim capture: cannot set the environment: %s\n", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "gpumemsim capture: fork: %s\n", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		char root[32];
		close(report_fd);
		/* the program's own process: its trace is labelled the root one */
		snprintf(root, sizeof(root), "%d", (int)getpid());
		setenv("GPUMEMSIM_CAPTURE_ROOT_PID", root, 1);
		execvp(argv[i], argv + i);
		fprintf(stderr, "gpumemsim capture: cannot run '%s': %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	capture_child_pid = pid;
	struct sigaction sa, old_int, old_term;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGINT, &sa, &old_int);  /* the terminal sends it to the program too */
	sa.sa_handler = capture_forward;
	sigaction(SIGTERM, &sa, &old_term);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "gpumemsim capture: waitpid: %s\n", strerror(errno));
			status = 1 << 8;
			break;
		}
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	capture_child_pid = 0;
	if (capture_print_report(report) == 0)
		fprintf(stderr, "gpumemsim capture: no trace written (no process of the program did "
				"CUDA work, or the capture library could not start)\n");
	if (WIFEXITED(status))
		rc = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		rc = 128 + WTERMSIG(status);
	else
		rc = 1;
out:
	if (report_fd >= 0) {
		close(report_fd);
		unlink(report);
	}
	free(labels);
	return rc;
}
