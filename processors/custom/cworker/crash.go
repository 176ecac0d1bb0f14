package cworker

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

// eas_in_user is set on a thread while it runs the library's initialize or
// process (see eas_call_initialize, eas_call_process in cworker.go).
__thread int eas_in_user;

// The program's own mappings: a fault there, outside a call into the
// library, is the Go runtime's (a nil dereference in Go code becomes a
// panic) and goes to its handler.
static uintptr_t eas_exe_lo, eas_exe_hi;
static struct sigaction eas_prev[NSIG];
static volatile int eas_crashing;

static const int eas_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};

typedef struct {
	char b[1536];
	size_t n;
} eas_buf;

static void eas_put(eas_buf *b, const char *s) {
	while (*s && b->n < sizeof b->b - 1) b->b[b->n++] = *s++;
}

static void eas_puthex(eas_buf *b, uintptr_t v) {
	char t[2 + 2 * sizeof v + 1];
	int i = sizeof t - 1;
	t[i] = 0;
	do {
		t[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	t[--i] = 'x';
	t[--i] = '0';
	eas_put(b, t + i);
}

static void eas_putdec(eas_buf *b, long v) {
	char t[24];
	int i = sizeof t - 1;
	int neg = v < 0;
	unsigned long u = neg ? -(unsigned long)v : (unsigned long)v;
	t[i] = 0;
	do {
		t[--i] = '0' + u % 10;
		u /= 10;
	} while (u);
	if (neg) t[--i] = '-';
	eas_put(b, t + i);
}

static const char *eas_hex(const char *s, uintptr_t *v) {
	*v = 0;
	for (;; s++) {
		int d;
		if (*s >= '0' && *s <= '9') d = *s - '0';
		else if (*s >= 'a' && *s <= 'f') d = *s - 'a' + 10;
		else return s;
		*v = *v * 16 + d;
	}
}

static const char *eas_field(const char *l) { // skips a field and the blanks after it
	while (*l && *l != ' ') l++;
	while (*l == ' ') l++;
	return l;
}

// eas_map_line parses a line of /proc/self/maps ("lo-hi perms offset dev
// inode path") and says whether it maps pc; then it sets its bounds, its
// file offset and its path.
static int eas_map_line(const char *l, uintptr_t pc, uintptr_t *start, uintptr_t *end, uintptr_t *off, const char **path) {
	uintptr_t lo, hi;
	l = eas_hex(l, &lo);
	if (*l != '-') return 0;
	l = eas_hex(l + 1, &hi);
	if (pc < lo || pc >= hi) return 0;
	*end = hi;
	while (*l == ' ') l++;
	l = eas_field(l); // perms
	eas_hex(l, off);
	l = eas_field(l); // offset
	l = eas_field(l); // dev
	l = eas_field(l); // inode
	*start = lo;
	*path = l;
	return 1;
}

// eas_find_map finds the mapping holding addr in /proc/self/maps, with
// async-signal-safe calls only: its bounds, its file offset and its path
// (copied to path, "" for an anonymous one). 0 when there is none.
static int eas_find_map(uintptr_t addr, uintptr_t *start, uintptr_t *end, uintptr_t *off, char *path, size_t pathlen) {
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) return 0;
	char buf[4096], line[1024];
	size_t ln = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n') {
				if (ln < sizeof line - 1) line[ln++] = buf[i];
				continue;
			}
			line[ln] = 0;
			ln = 0;
			const char *p;
			if (eas_map_line(line, addr, start, end, off, &p)) {
				size_t k = 0;
				while (p[k] && k < pathlen - 1) {
					path[k] = p[k];
					k++;
				}
				path[k] = 0;
				close(fd);
				return 1;
			}
		}
	}
	close(fd);
	return 0;
}

// The user library's executable segment and its load address, set by
// eas_note_library once it is open.
static uintptr_t eas_lib_lo, eas_lib_hi, eas_lib_base;

static int eas_lib_range(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	uintptr_t sym = (uintptr_t)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (sym >= lo && sym < hi) {
			eas_lib_lo = lo;
			eas_lib_hi = hi;
			eas_lib_base = info->dlpi_addr;
			return 1;
		}
	}
	return 0;
}

// eas_note_library records the code of the library that holds sym (its
// initialize): a crash outside it (in libc, called from it) is then placed
// by the latest return address into it on the stack.
static void eas_note_library(void *sym) { dl_iterate_phdr(eas_lib_range, sym); }

static uintptr_t eas_sp(void *ucv) {
	ucontext_t *uc = ucv;
#if defined(__x86_64__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
	return (uintptr_t)uc->uc_mcontext.sp;
#else
	(void)uc;
	return 0;
#endif
}

// eas_put_caller appends " caller=<address in the library>" for the word
// nearest the top of the stack (up to 64 KiB from sp, within its
// mapping) that points into the library's code: most likely the return
// address of its call that led to the crash.
static void eas_put_caller(eas_buf *b, uintptr_t sp) {
	uintptr_t start, end, off;
	char path[8];
	if (eas_lib_hi == 0 || sp == 0 || !eas_find_map(sp, &start, &end, &off, path, sizeof path)) return;
	if (end - sp > 64 << 10) end = sp + (64 << 10);
	for (uintptr_t a = sp & ~(uintptr_t)(sizeof(uintptr_t) - 1); a + sizeof(uintptr_t) <= end; a += sizeof(uintptr_t)) {
		uintptr_t w = *(const uintptr_t *)a;
		if (w > eas_lib_lo && w <= eas_lib_hi) {
			eas_put(b, " caller=");
			eas_puthex(b, w - 1 - eas_lib_base); // the call, not the instruction after it
			return;
		}
	}
}

static uintptr_t eas_pc(void *ucv) {
	ucontext_t *uc = ucv;
#if defined(__x86_64__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uintptr_t)uc->uc_mcontext.pc;
#else
	(void)uc;
	return 0;
#endif
}

static void eas_die(int sig) {
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	// Pending until the handler returns, with the default action then: the
	// process ends by sig, whether it was a fault (which would recur
	// anyway) or sent.
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
}

// eas_crash reports a fatal signal in user code as one line on stderr
// (the server turns it into its log line and the service's event), then
// lets the process die by the signal. Any other goes to the Go runtime.
static void eas_crash(int sig, siginfo_t *si, void *ucv) {
	int saved = errno;
	uintptr_t pc = eas_pc(ucv);
	if (!eas_in_user && pc >= eas_exe_lo && pc < eas_exe_hi) {
		struct sigaction *p = &eas_prev[sig];
		if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction) p->sa_sigaction(sig, si, ucv);
		else if (p->sa_handler == SIG_DFL) eas_die(sig);
		else if (p->sa_handler != SIG_IGN) p->sa_handler(sig);
		errno = saved;
		return;
	}
	if (__sync_lock_test_and_set(&eas_crashing, 1)) {
		for (;;) pause(); // another thread reports; the process ends with it
	}
	eas_buf b;
	b.n = 0;
	eas_put(&b, "eas-cworker-crash: signal=");
	eas_putdec(&b, sig);
	eas_put(&b, " code=");
	eas_putdec(&b, si->si_code);
	if (si->si_code <= 0) {
		eas_put(&b, " sender=");
		eas_putdec(&b, si->si_pid);
	} else {
		eas_put(&b, " addr=");
		eas_puthex(&b, (uintptr_t)si->si_addr);
	}
	eas_put(&b, " self=");
	eas_putdec(&b, getpid());
	eas_put(&b, " pc=");
	eas_puthex(&b, pc);
	if (eas_in_user) eas_put(&b, " user=1");
	if (pc < eas_lib_lo || pc >= eas_lib_hi) eas_put_caller(&b, eas_sp(ucv));
	uintptr_t start, end, off;
	char path[512];
	if (eas_find_map(pc, &start, &end, &off, path, sizeof path)) {
		eas_put(&b, " map=");
		eas_puthex(&b, start);
		eas_put(&b, ":");
		eas_puthex(&b, off);
		eas_put(&b, " path=");
		eas_put(&b, path);
	}
	eas_put(&b, "\n");
	for (size_t done = 0; done < b.n;) {
		ssize_t n = write(2, b.b + done, b.n - done);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) break;
		done += n;
	}
	eas_die(sig);
	errno = saved;
}

static int eas_exe_range(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	(void)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD) continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (eas_exe_hi == 0 || lo < eas_exe_lo) eas_exe_lo = lo;
		if (hi > eas_exe_hi) eas_exe_hi = hi;
	}
	return 1; // the first object is the program itself
}

static int eas_install_crash_handler(void) {
	dl_iterate_phdr(eas_exe_range, NULL);
	for (size_t i = 0; i < sizeof eas_signals / sizeof eas_signals[0]; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = eas_crash;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigfillset(&sa.sa_mask);
		if (sigaction(eas_signals[i], &sa, &eas_prev[eas_signals[i]]) != 0) return errno;
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// CrashMarker starts the line a worker writes on stderr when user code
// dies of a signal: "eas-cworker-crash: signal=11 code=1 addr=0x0 self=123
// pc=0x7f.. user=1 caller=0x1139 map=0x7f..:0x1000 path=/pkg/libx.so".
// addr is the fault address (for a signal sent by a process, kill or
// abort, sender= its pid instead); user=1 says the thread was running the
// worker's call into the library (initialize or process), not a thread of
// the library's own nor the worker's code; caller, only when pc is outside
// the library, is the library's address (as its symbols count) of the
// latest return address into its code on the stack; map is the start and
// the file offset of the mapping holding pc, and path its file, as
// /proc/self/maps says (both absent when it could not be read). The server
// turns it into its log line and the service's event, finding the symbols
// in the library's file.
const CrashMarker = "eas-cworker-crash: "

// installCrashHandler makes a fatal signal (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT, SIGTRAP, SIGSYS) in user code write one line,
// CrashMarker's, and end the process by that signal, instead of the Go
// runtime's goroutine and register dump. A fault in the worker's own Go
// code (outside a call into the library, with the pc in the program) is
// passed on to the Go runtime's handler, so Go's nil-dereference panics
// still work. The handler reads and writes with async-signal-safe calls
// only: the symbol is found by the server, from the library's file.
// noteLibrary tells the crash handler where the library's code is (the
// object that holds sym, its initialize), to place a crash outside it by
// its caller in it.
func noteLibrary(sym unsafe.Pointer) { C.eas_note_library(sym) }

func installCrashHandler() error {
	if e := C.eas_install_crash_handler(); e != 0 {
		return fmt.Errorf("installing the crash handler: %w", syscall.Errno(e))
	}
	return nil
}
