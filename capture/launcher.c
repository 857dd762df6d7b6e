/*
 * launcher.c: `gpumemsim capture`'s launcher, which runs an unmodified CUDA
 * program with the CUPTI capture library injected (the arguments are parsed
 * in cli/cmd_capture.c).
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

#include "../base/vec.h"
#include "launcher.h"

static volatile sig_atomic_t capture_child_pid;

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
	/* next to the binary (the build folder), or PREFIX/lib beside
	 * PREFIX/bin (make install) */
	if ((size_t)snprintf(out, len, "%s/%s", buf, CAPTURE_LIB_NAME) < len && access(out, R_OK) == 0)
		return 0;
	if ((size_t)snprintf(out, len, "%s/../lib/%s", buf, CAPTURE_LIB_NAME) >= len ||
	    access(out, R_OK) != 0) {
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

/* Run ARGV under capture: see launcher.h. */
int capture_launch(const struct capture_opts *o, char *const argv[])
{
	char lib[PATH_MAX], out[PATH_MAX], report[] = "/tmp/gpumemsim-capture-XXXXXX";
	int rc = 1, report_fd = -1;

	if (capture_find_lib(lib, sizeof(lib)) < 0 || capture_abs_out(o->out, out, sizeof(out)) < 0)
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
	    setenv("GPUMEMSIM_CAPTURE_LINKS", o->links ? "1" : "0", 1) ||
	    setenv("GPUMEMSIM_CAPTURE_API", o->api, 1) ||
	    setenv("GPUMEMSIM_CAPTURE_SOURCE", o->source ? "1" : "0", 1) ||
	    setenv("GPUMEMSIM_CAPTURE_RECORD", o->record, 1) ||
	    setenv("GPUMEMSIM_CAPTURE_LABELS", o->labels ? o->labels : "", 1) ||
	    (o->syncs && setenv("GPUMEMSIM_CAPTURE_SYNCS", o->syncs, 1)) ||
	    (o->pause_step ? setenv("GPUMEMSIM_CAPTURE_PAUSE_STEP", o->pause_step, 1)
			   : unsetenv("GPUMEMSIM_CAPTURE_PAUSE_STEP"))) {
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
		execvp(argv[0], argv);
		fprintf(stderr, "gpumemsim capture: cannot run '%s': %s\n", argv[0], strerror(errno));
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
	return rc;
}
