/* A cpp custom processor for the tests: upper-cases the body after a
 * prefix read from model_config; "entry" answers model_entry, "pid" the
 * process id, "crash" dies with SIGSEGV, "" is a 400, "zero" returns 0
 * (success) with an empty output. "fork" forks a child that keeps the
 * worker's socket and output and sleeps, and answers its pid ("setsid": the
 * same in a session of its own, out of the worker's group); "hang" never
 * returns; "flood" writes a 20 MB line and 20,000 short ones to stdout;
 * "negative" and "oversize" set *output_size below 0 and past the buffer.
 * initialize fails (state 4) while the file model_config's "fail_if" names
 * exists. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
	char prefix[64];
	char entry[512];
} model_t;

void *initialize(const char *model_entry, const char *model_config, int *state) {
	model_t *m = calloc(1, sizeof *m);
	const char *p = strstr(model_config, "\"prefix\":\"");
	if (p) {
		p += strlen("\"prefix\":\"");
		size_t n = strcspn(p, "\"");
		if (n >= sizeof m->prefix) n = sizeof m->prefix - 1;
		memcpy(m->prefix, p, n);
	}
	snprintf(m->entry, sizeof m->entry, "%s", model_entry);
	const char *f = strstr(model_config, "\"fail_if\":\"");
	if (f) {
		char path[512];
		f += strlen("\"fail_if\":\"");
		size_t n = strcspn(f, "\"");
		if (n >= sizeof path) n = sizeof path - 1;
		memcpy(path, f, n);
		path[n] = 0;
		if (access(path, F_OK) == 0) {
			fprintf(stderr, "upper: %s exists: failing initialize\n", path);
			free(m);
			*state = 4;
			return NULL;
		}
	}
	fprintf(stderr, "upper: initialized with prefix %s\n", m->prefix);
	*state = 0;
	return m;
}

static int answer(const char *s, void **out, int *out_size, int status) {
	*out = strdup(s);
	*out_size = (int)strlen(s);
	return status;
}

int process(void *model, const void *in, int in_size, void **out, int *out_size) {
	model_t *m = model;
	if (in_size == 0) return answer("empty body", out, out_size, 400);
	if (in_size == 5 && memcmp(in, "crash", 5) == 0) {
		volatile int *null = 0;
		*null = 1;
	}
	if (in_size == 5 && memcmp(in, "entry", 5) == 0) return answer(m->entry, out, out_size, 200);
	if (in_size == 4 && memcmp(in, "zero", 4) == 0) { *out = NULL; *out_size = 0; return 0; }
	if (in_size == 3 && memcmp(in, "pid", 3) == 0) {
		char buf[32];
		snprintf(buf, sizeof buf, "%d", (int)getpid());
		return answer(buf, out, out_size, 200);
	}
	if (in_size == 5 && memcmp(in, "sleep", 5) == 0) usleep(300 * 1000);
	if (in_size == 4 && memcmp(in, "fork", 4) == 0) {
		pid_t c = fork();
		if (c == 0)
			for (;;) pause();
		char buf[32];
		snprintf(buf, sizeof buf, "%d", (int)c);
		return answer(buf, out, out_size, 200);
	}
	if (in_size == 6 && memcmp(in, "setsid", 6) == 0) {
		pid_t c = fork();
		if (c == 0) {
			setsid();
			for (;;) pause();
		}
		char buf[32];
		snprintf(buf, sizeof buf, "%d", (int)c);
		return answer(buf, out, out_size, 200);
	}
	if (in_size == 4 && memcmp(in, "hang", 4) == 0)
		for (;;) sleep(3600);
	if (in_size == 5 && memcmp(in, "flood", 5) == 0) {
		size_t n = 1 << 20;
		char *big = malloc(n);
		memset(big, 'x', n);
		for (int i = 0; i < 20; i++) fwrite(big, 1, n, stdout);
		free(big);
		fputc('\n', stdout);
		for (int i = 0; i < 20000; i++) printf("flood line %d\n", i);
		fflush(stdout);
		return answer("flooded", out, out_size, 200);
	}
	if (in_size == 8 && memcmp(in, "negative", 8) == 0) {
		answer("lost", out, out_size, 200);
		*out_size = -5;
		return 200;
	}
	if (in_size == 8 && memcmp(in, "oversize", 8) == 0) {
		answer("tiny", out, out_size, 200);
		*out_size = 1 << 20;
		return 200;
	}
	size_t pl = strlen(m->prefix);
	char *o = malloc(pl + in_size);
	memcpy(o, m->prefix, pl);
	for (int i = 0; i < in_size; i++) o[pl + i] = (char)toupper(((const unsigned char *)in)[i]);
	*out = o;
	*out_size = (int)(pl + in_size);
	return 200;
}
