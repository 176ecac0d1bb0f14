package custom

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/eas-server/eas-server/processors/custom/cworker"
)

// crashReport is what a cpp worker said, on its way out, of the signal
// that killed it in user code (cworker.CrashMarker's line).
type crashReport struct {
	signal syscall.Signal
	code   int
	addr   string // the fault address, "0x0"; "" for a signal a process sent
	sender int    // who sent it, when addr is ""
	self   int    // the worker's pid
	pc     uint64
	// The mapping that held pc: its start, its file offset and its file;
	// path is "" when the worker could not tell.
	mapStart, mapOff uint64
	path             string
	// caller is, when pc is outside the library, the library's address
	// of the latest return address into it on the stack (0: none); lib is
	// the library's file.
	caller uint64
	lib    string
	inCall bool // the thread was running a call into the library
	// where (pc) and from (caller) are symbol+offset, "" when unknown:
	// found from the files by resolve, once.
	where, from string
	once        sync.Once
}

// parseCrash reads the report after cworker.CrashMarker; false when it is
// not one. lib is the library the worker runs.
func parseCrash(s, lib string) (*crashReport, bool) {
	c := crashReport{lib: lib}
	rest, path, hasPath := strings.Cut(s, " path=")
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, false
		}
		var err error
		switch k {
		case "signal":
			var n int
			n, err = strconv.Atoi(v)
			c.signal = syscall.Signal(n)
		case "code":
			c.code, err = strconv.Atoi(v)
		case "sender":
			c.sender, err = strconv.Atoi(v)
		case "self":
			c.self, err = strconv.Atoi(v)
		case "addr":
			c.addr = v
		case "pc":
			c.pc, err = strconv.ParseUint(v, 0, 64)
		case "caller":
			c.caller, err = strconv.ParseUint(v, 0, 64)
		case "user":
			c.inCall = v == "1"
		case "map":
			start, off, _ := strings.Cut(v, ":")
			if c.mapStart, err = strconv.ParseUint(start, 0, 64); err == nil {
				c.mapOff, err = strconv.ParseUint(off, 0, 64)
			}
		}
		if err != nil {
			return nil, false
		}
	}
	if c.signal <= 0 {
		return nil, false
	}
	if hasPath {
		c.path = strings.TrimSuffix(strings.TrimSpace(path), " (deleted)")
	}
	return &c, true
}

// resolve finds the symbol pc was in, from the library's file (the
// worker, dying, only tells the file and the offset).
//
// Only the library's own directory is read: the path comes from the
// worker, which may write what it likes, and the server reads no file of
// its choosing outside the package. A file elsewhere (libc) is named with
// its offset only.
func (c *crashReport) resolve() {
	if c.path != "" && c.pc >= c.mapStart && c.lib != "" && inDir(c.path, filepath.Dir(c.lib)) {
		c.where = symbolize(c.path, c.pc-c.mapStart+c.mapOff, true)
	}
	if c.caller != 0 && c.lib != "" {
		c.from = symbolize(c.lib, c.caller, false)
	}
}

// signalName is "SIGSEGV" for the signals the worker reports.
func (c *crashReport) signalName() string {
	names := map[syscall.Signal]string{syscall.SIGSEGV: "SIGSEGV", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
		syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGTRAP: "SIGTRAP", syscall.SIGSYS: "SIGSYS"}
	if n, ok := names[c.signal]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(c.signal))
}

// cause is what the signal means: si_code's meaning for a fault, or who
// sent it.
func (c *crashReport) cause() string {
	if c.addr == "" {
		if c.sender == c.self {
			if c.signal == syscall.SIGABRT {
				return "abort() in the process"
			}
			return "raised by the process itself"
		}
		return fmt.Sprintf("sent by process %d", c.sender)
	}
	codes := map[syscall.Signal][]string{
		syscall.SIGSEGV: {"address not mapped", "invalid permissions for the mapped address"},
		syscall.SIGBUS:  {"invalid address alignment", "nonexistent physical address (past the end of a mapped file?)", "object-specific hardware error"},
		syscall.SIGFPE: {"integer divide by zero", "integer overflow", "floating-point divide by zero", "floating-point overflow",
			"floating-point underflow", "floating-point inexact result", "floating-point invalid operation", "subscript out of range"},
		syscall.SIGILL: {"illegal opcode", "illegal operand", "illegal addressing mode", "illegal trap", "privileged opcode",
			"privileged register", "coprocessor error", "internal stack error"},
	}
	if cs := codes[c.signal]; c.code >= 1 && c.code <= len(cs) {
		return cs[c.code-1]
	}
	return fmt.Sprintf("code %d", c.code)
}

// location is where pc was: "touch_null+0x4 (/pkg/libx.so+0x1139)", the
// symbol and the file offset, or what is known of it; outside the
// library, with where in the library it was called from.
func (c *crashReport) location() string {
	var s string
	switch {
	case c.path == "" && c.mapStart == 0:
		s = fmt.Sprintf("pc %#x, in no mapped file (a call through a NULL or stale function pointer?)", c.pc)
	case c.path == "":
		s = fmt.Sprintf("pc %#x, in an anonymous mapping", c.pc)
	case c.where != "":
		s = fmt.Sprintf("%s (%s+%#x)", c.where, c.path, c.pc-c.mapStart+c.mapOff)
	default:
		s = fmt.Sprintf("%s+%#x", c.path, c.pc-c.mapStart+c.mapOff)
	}
	from := fmt.Sprintf("%s+%#x", c.lib, c.caller)
	if c.from != "" {
		from = c.from + " in " + c.lib
	}
	switch {
	case c.caller == 0:
	case c.inCall:
		s += ", called from " + from
	default: // a thread of the library's own, or the worker's code after a call
		s += ", the latest return address into the library on the thread's stack: " + from
	}
	return s
}

// String says it all in one line: "SIGSEGV (address not mapped) at address
// 0x0, in touch_null+0x4 (/pkg/libx.so+0x1139)".
func (c *crashReport) String() string {
	s := c.signalName() + " (" + c.cause() + ")"
	if c.addr != "" {
		s += " at address " + c.addr
	}
	return s + ", in " + c.location()
}

// inDir says whether path is inside dir (after cleaning both).
func inDir(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && filepath.IsAbs(path) && rel != ".." && !strings.HasPrefix(rel, "../")
}

// symbolize finds the function holding an address of the ELF file at
// path, a file offset (fileOffset) or an address as its symbols count:
// "name+0x4", or "" when the file or its symbols do not tell. The static
// symbol table (.symtab) comes first, so a static function of a library
// that was not stripped is named too.
func symbolize(path string, addr uint64, fileOffset bool) (name string) {
	defer func() {
		if recover() != nil { // a malformed file is the user's: no symbol
			name = ""
		}
	}()
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	vaddr := addr
	if fileOffset {
		found := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && addr >= p.Off && addr < p.Off+p.Filesz {
				vaddr, found = addr-p.Off+p.Vaddr, true
				break
			}
		}
		if !found {
			return ""
		}
	}
	for _, table := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, err := table()
		if err != nil {
			continue
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && vaddr >= s.Value && vaddr < s.Value+max(s.Size, 1) {
				return fmt.Sprintf("%s+%#x", s.Name, vaddr-s.Value)
			}
		}
	}
	return ""
}

// crashMarker is where a crash report starts in a line of a cpp worker's
// output.
const crashMarker = cworker.CrashMarker
