/* initialize fails: state 3. */
#include <stdio.h>
void *initialize(const char *model_entry, const char *model_config, int *state) {
	fprintf(stderr, "badinit: cannot load %s\n", model_entry);
	*state = 3;
	return 0;
}
int process(void *model, const void *in, int in_size, void **out, int *out_size) { return 500; }
