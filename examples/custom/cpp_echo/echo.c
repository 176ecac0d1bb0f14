/* A custom processor in C with EAS's ABI: it answers the request body
 * unchanged. Build: gcc -shared -fPIC -O2 -o libecho.so echo.c
 * (make examples does, into examples/custom/cpp_echo/build/). */
#include <stdlib.h>
#include <string.h>

/* initialize runs once per worker process; what it returns is handed to
 * every process call. *state = 0 means loaded. */
void *initialize(const char *model_entry, const char *model_config, int *state) {
	(void)model_entry;
	(void)model_config;
	*state = 0;
	return NULL;
}

/* process runs once per request, from several threads at once. *output
 * must be malloc'd: the server frees it. The return value is the HTTP
 * status (0 or 200 for success). */
int process(void *model, const void *input, int input_size, void **output, int *output_size) {
	(void)model;
	void *out = malloc(input_size > 0 ? input_size : 1);
	if (!out) return 500;
	memcpy(out, input, input_size);
	*output = out;
	*output_size = input_size;
	return 200;
}
