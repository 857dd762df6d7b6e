/*
 * inject_header.c: the trace header of the injection library (inject.c):
 * device 0, driver, CUDA, CUPTI and cuDNN versions, the command line, the
 * launcher's labels and how the trace was recorded. Written just before the
 * first record (CUDA calls are not allowed inside InitializeInjection).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/version.h"
#include "inject_int.h"

atomic_int cap_header_done;

/* ------------------------------------------------------------- header */

static char *cap_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *cap_strdup_printf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return strdup(buf);
}

/* The NVIDIA kernel module's version ("580.159.04"): the first word of
 * /proc/driver/nvidia/version that looks like N.N[.N]; NULL if none. */
static char *cap_driver_version(void)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	char line[512], *save = NULL, *res = NULL;
	if (!f)
		return NULL;
	if (fgets(line, sizeof(line), f)) {
		for (char *w = strtok_r(line, " \t\n", &save); w && !res; w = strtok_r(NULL, " \t\n", &save)) {
			size_t digits = strspn(w, "0123456789."), dots = 0;
			for (char *p = w; *p; p++)
				dots += *p == '.';
			if (digits == strlen(w) && dots >= 1 && w[0] != '.')
				res = strdup(w);
		}
	}
	fclose(f);
	return res;
}

/* cuDNN's version if the program has loaded it: never load it ourselves, a
 * second cuDNN in the process could replace the one the program ships. */
static char *cap_cudnn_version(void)
{
	static const char *names[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", NULL};
	for (int i = 0; names[i]; i++) {
		void *h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		size_t (*fn)(void) = (size_t (*)(void))dlsym(h, "cudnnGetVersion");
		char *res = fn ? cap_strdup_printf("%zu", fn()) : NULL;
		dlclose(h);
		if (res)
			return res;
	}
	return strdup("not loaded");
}

/* The command line from /proc/self/cmdline, arguments joined by spaces. */
static char *cap_command_line(void)
{
	char buf[4096];
	int fd = open("/proc/self/cmdline", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return strdup("unknown");
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
	return strdup(buf);
}

/* Write the header once, before the first record: written late (not at
 * cuInit) because CUDA calls are not allowed inside InitializeInjection.
 * Returns 0 when written; -1 while the driver cannot answer yet and FORCE
 * is 0 (records wait until it can). The driver is asked without cap_lock
 * held (CUPTI may deliver buffers on this thread); the write takes it. */
int cap_write_header(int force)
{
	struct trace_header h;
	char name[256] = "unknown";
	CUdevice dev;
	int major = 0, minor = 0, drv = 0, rc = 0;
	size_t total = 0;
	uint32_t cupti_ver = 0;
	struct trace_label labels[64];
	char *labtext = NULL;

	if (atomic_load(&cap_header_done))
		return 0;
	memset(&h, 0, sizeof(h));
	if (cuDeviceGet(&dev, 0) == CUDA_SUCCESS) {
		cuDeviceGetName(name, sizeof(name), dev);
		cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
		cuDeviceTotalMem(&total, dev);
	} else if (!force) {
		return -1;
	}
	cuDriverGetVersion(&drv);
	cuptiGetVersion(&cupti_ver);
	h.version = TRACE_FORMAT_VERSION;
	h.producer = "gpumemsim-capture";
	h.producer_version = GPUMEMSIM_VERSION;
	h.gpu = name;
	h.compute_capability = cap_strdup_printf("%d.%d", major, minor);
	h.total_memory = total;
	h.driver = cap_driver_version();
	if (!h.driver)
		h.driver = strdup("unknown");
	h.cuda = cap_strdup_printf("%d.%d", drv / 1000, (drv % 1000) / 10);
	h.cupti = cap_strdup_printf("%u", cupti_ver);
	h.cudnn = cap_cudnn_version();
	h.command = cap_command_line();
	const char *env = getenv("GPUMEMSIM_CAPTURE_LABELS");
	if (env && *env && (labtext = strdup(env))) {
		char *save = NULL;
		for (char *l = strtok_r(labtext, "\n", &save); l && h.nlabels < 64;
		     l = strtok_r(NULL, "\n", &save)) {
			char *eq = strchr(l, '=');
			if (!eq || eq == l)
				continue;
			*eq = '\0';
			labels[h.nlabels].key = l;
			labels[h.nlabels].value = eq + 1;
			h.nlabels++;
		}
	}
	/* How this trace was recorded: what its host times include. The
	 * writer only reads the strings (trace_label's are not const). */
	static char k_api[] = "capture_api", k_links[] = "capture_links",
		    k_source[] = "capture_source", k_record[] = "capture_record",
		    k_syncs[] = "capture_syncs", k_proc[] = "capture_process",
		    k_pid[] = "capture_pid", k_ppid[] = "capture_ppid",
		    k_pause[] = "capture_pause_step";
	static char v_api[3][10] = {"off", "callbacks", "activity"}, v_on[] = "on", v_off[] = "off";
	static char v_syncs[2][10] = {"activity", "callbacks"};
	/* Which process of the program this is: the launcher's direct child
	 * (root) or one it started (torch.compile workers, data loaders). */
	static char v_proc[8], v_pid[16], v_ppid[16];
	const char *root = getenv("GPUMEMSIM_CAPTURE_ROOT_PID");
	snprintf(v_proc, sizeof(v_proc), "%s",
		 !root ? "unknown" : atoi(root) == (int)getpid() ? "root" : "child");
	snprintf(v_pid, sizeof(v_pid), "%d", (int)getpid());
	snprintf(v_ppid, sizeof(v_ppid), "%d", (int)getppid());
	/* `none` or the step from which ranges ran uncaptured (inject_pause.c) */
	static char v_pause[16];
	snprintf(v_pause, sizeof(v_pause), cap_pause_step < 0 ? "none" : "%d", cap_pause_step);
	char v_record[64] = "all";
	const char *rec_env = getenv("GPUMEMSIM_CAPTURE_RECORD");
	if (cap_record_bits != CAP_REC_ALL && rec_env)
		snprintf(v_record, sizeof(v_record), "%s", rec_env);
	const struct trace_label settings[] = {
		{k_api, v_api[cap_api_mode]},
		{k_links, cap_links_on ? v_on : v_off},
		{k_source, cap_source_on ? v_on : v_off},
		{k_record, v_record},
		{k_syncs, v_syncs[cap_sync_cb ? 1 : 0]},
		{k_proc, v_proc},
		{k_pid, v_pid},
		{k_ppid, v_ppid},
		{k_pause, v_pause},
	};
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]) && h.nlabels < 64; i++)
		labels[h.nlabels++] = settings[i];
	h.labels = labels;
	pthread_mutex_lock(&cap_lock);
	if (cap_writer && !atomic_load(&cap_header_done)) {
		if (trace_writer_header(cap_writer, &h) < 0) {
			fprintf(stderr, "gpumemsim capture: cannot write the header of %s\n", cap_path);
			rc = -1;
		}
		atomic_store(&cap_header_done, 1);
	}
	pthread_mutex_unlock(&cap_lock);
	free(h.compute_capability);
	free(h.driver);
	free(h.cuda);
	free(h.cupti);
	free(h.cudnn);
	free(h.command);
	free(labtext);
	return rc;
}
