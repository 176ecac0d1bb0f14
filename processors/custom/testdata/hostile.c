/* A hostile cpp custom processor for the trust-boundary test: each request
 * is one attempt, and the answer says "ok: ..." or "denied: <strerror>".
 * "read <path>" reads a file, "list <dir>" lists a directory, "signal <pid>
 * <sig>" sends a signal, "ppid" and "uid" answer those numbers. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *initialize(const char *model_entry, const char *model_config, int *state) {
	(void)model_entry;
	(void)model_config;
	*state = 0;
	return NULL;
}

static int answer(void **output, int *output_size, const char *s) {
	size_t n = strlen(s);
	*output = malloc(n + 1);
	memcpy(*output, s, n + 1);
	*output_size = (int)n;
	return 200;
}

static int denied(void **output, int *output_size) {
	char buf[256];
	snprintf(buf, sizeof buf, "denied: %s", strerror(errno));
	return answer(output, output_size, buf);
}

int process(void *model, const void *input, int input_size, void **output, int *output_size) {
	(void)model;
	char cmd[1024], buf[256];
	if (input_size <= 0 || input_size >= (int)sizeof cmd) return 400;
	memcpy(cmd, input, (size_t)input_size);
	cmd[input_size] = 0;
	if (strncmp(cmd, "read ", 5) == 0) {
		FILE *f = fopen(cmd + 5, "r");
		if (!f) return denied(output, output_size);
		size_t n = fread(buf + 4, 1, sizeof buf - 5, f);
		fclose(f);
		memcpy(buf, "ok: ", 4);
		buf[4 + n] = 0;
		return answer(output, output_size, buf);
	}
	if (strncmp(cmd, "list ", 5) == 0) {
		DIR *d = opendir(cmd + 5);
		if (!d) return denied(output, output_size);
		closedir(d);
		return answer(output, output_size, "ok: listed");
	}
	if (strncmp(cmd, "signal ", 7) == 0) {
		int pid = 0, sig = 0;
		if (sscanf(cmd + 7, "%d %d", &pid, &sig) != 2) return 400;
		if (kill(pid, sig) != 0) return denied(output, output_size);
		return answer(output, output_size, "ok: signalled");
	}
	if (strcmp(cmd, "ppid") == 0) {
		snprintf(buf, sizeof buf, "%d", (int)getppid());
		return answer(output, output_size, buf);
	}
	if (strcmp(cmd, "uid") == 0) {
		snprintf(buf, sizeof buf, "%d", (int)getuid());
		return answer(output, output_size, buf);
	}
	if (strcmp(cmd, "pid") == 0) {
		snprintf(buf, sizeof buf, "%d", (int)getpid());
		return answer(output, output_size, buf);
	}
	return 400;
}
