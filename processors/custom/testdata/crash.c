/* A cpp custom processor for the crash-report tests: "segv" dereferences
 * NULL in touch_null, "abort" calls abort(), "fpe" divides by zero,
 * "thread" dereferences NULL on a thread of its own, "strlen" hands NULL
 * to strlen (a crash in libc, called from process), "pid" answers the
 * process id; anything else is echoed. initialize dereferences NULL when
 * model_config says "segv". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static int touch_null(volatile int *p) {
	*p = 1;
	return *p;
}

static volatile int zero = 0;

__attribute__((noinline)) static int divide(int a) { return a / zero; }

static void *crash_thread(void *arg) {
	(void)arg;
	touch_null(NULL);
	return NULL;
}

void *initialize(const char *model_entry, const char *model_config, int *state) {
	(void)model_entry;
	if (strstr(model_config, "segv")) touch_null(NULL);
	*state = 0;
	return NULL;
}

int process(void *model, const void *in, int in_size, void **out, int *out_size) {
	(void)model;
	if (in_size == 4 && memcmp(in, "segv", 4) == 0) touch_null(NULL);
	if (in_size == 3 && memcmp(in, "pid", 3) == 0) {
		char buf[32];
		int n = snprintf(buf, sizeof buf, "%d", (int)getpid());
		*out = strdup(buf);
		*out_size = n;
		return 200;
	}
	if (in_size == 5 && memcmp(in, "abort", 5) == 0) abort();
	if (in_size == 6 && memcmp(in, "strlen", 6) == 0) {
		const char *volatile null = NULL;
		return (int)strlen(null);
	}
	if (in_size == 3 && memcmp(in, "fpe", 3) == 0) return divide(in_size);
	if (in_size == 6 && memcmp(in, "thread", 6) == 0) {
		pthread_t t;
		pthread_create(&t, NULL, crash_thread, NULL);
		pthread_join(t, NULL);
	}
	*out = malloc(in_size > 0 ? in_size : 1);
	memcpy(*out, in, in_size);
	*out_size = in_size;
	return 200;
}
