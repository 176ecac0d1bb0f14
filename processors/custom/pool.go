package custom

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/custom/frame"
)

// pool runs a custom processor's worker processes: it starts them, hands
// each request to one with a free thread, and restarts a process that dies
// or hangs, failing only the requests that process held.
type pool struct {
	name string
	log  *slog.Logger
	// kind is the processor_type, cpp or python: a cpp worker reports a
	// crash in user code (cworker.CrashMarker), and a python worker that
	// ends before hello is a script that did not reach run().
	kind string
	// event reports to the service's events (processors.Spec.Report):
	// a crash, a hang, a restart. Nil reports nothing.
	event    func(warning bool, reason, message string)
	init     frame.InitInfo
	command  func(index int) *exec.Cmd // one worker process; pool adds the socket
	maxFrame int
	// helloTimeout bounds how long a new process may take to say hello
	// (to reach allspark's run(), or the C worker's start).
	helloTimeout time.Duration
	// hangGrace is the watchdog's rule (see worker.hung): a process is
	// killed as hung once it holds a request per thread more than
	// hangGrace past its deadline and has answered nothing for hangGrace.
	hangGrace time.Duration

	nextID atomic.Uint64
	// readyInfo is the first worker's Ready payload (set by start).
	readyInfo []byte

	mu      sync.Mutex
	ready   []*worker     // handshaken, serving
	changed chan struct{} // closed (and replaced) when ready or a worker's load changes
	waiters int           // acquires waiting on changed
	slots   int           // supervisors started
	lastErr string        // why the latest process ended, for Healthy
	closed  bool
	// ctx ends when the pool closes: it ends waits for workers and
	// handshakes in progress.
	ctx  context.Context
	quit context.CancelFunc
	wg   sync.WaitGroup
}

// worker is one live worker process and its connection.
type worker struct {
	pid     int
	cmd     *exec.Cmd
	conn    net.Conn
	w       *frame.Writer
	threads int
	log     *tailLog
	// readyInfo is the Ready frame's payload: what a batch-inference
	// worker says about its model class (JSON); empty otherwise.
	readyInfo []byte

	mu         sync.Mutex
	calls      map[uint64]*pending // sent, not answered yet (whether or not the caller still waits)
	lastAnswer time.Time           // when it said ready, then answered last
	hungWhy    string              // set when the watchdog kills it
	inflight   int                 // under the pool's mu
	dead       chan struct{}       // closed when the connection ends
	deathErr   error               // set before dead closes

	exited  chan struct{} // closed once the process is reaped and its group killed
	waitErr error         // cmd.Wait's, set before exited closes
}

// pending is a request sent to a worker.
type pending struct {
	answer   chan frame.Frame // buffered: the reader never blocks on it
	deadline time.Time        // the caller's; zero when it had none
}

func newPool(name string, log *slog.Logger, init frame.InitInfo, command func(int) *exec.Cmd, maxFrame int) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{
		name: name, log: log, init: init, command: command, maxFrame: maxFrame,
		helloTimeout: 2 * time.Minute,
		hangGrace:    defaultHangGrace,
		changed:      make(chan struct{}),
		ctx:          ctx,
		quit:         cancel,
	}
}

// start runs the first process and, once it has said how many it wants
// (allspark's worker_processes), the others, and returns when all are
// ready or one failed to start. A failure closes the pool.
func (p *pool) start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	wait := func(ch <-chan startResult) (startResult, error) {
		select {
		case r := <-ch:
			return r, r.err
		case <-ctx.Done():
			return startResult{}, ctx.Err()
		}
	}
	first := make(chan startResult, 1)
	p.supervise(0, first)
	r, err := wait(first)
	if err != nil {
		return err
	}
	p.readyInfo = r.ready
	n := min(max(r.processes, 1), maxProcesses)
	rest := make(chan startResult, n)
	for i := 1; i < n; i++ {
		p.supervise(i, rest)
	}
	for i := 1; i < n; i++ {
		if _, err := wait(rest); err != nil {
			return err
		}
	}
	return nil
}

// defaultHangGrace is how far past their deadlines a process's requests
// may run, with no answer from it for as long, before the watchdog kills
// it: long enough that a slow answer is not taken for a hang, short enough
// that a stuck process does not hold the service for minutes.
const defaultHangGrace = 30 * time.Second

// maxProcesses bounds worker_processes: each process holds its own copy of
// the model.
const maxProcesses = 64

type startResult struct {
	processes int
	ready     []byte // the first worker's Ready payload
	err       error
}

// supervise keeps worker process index running until the pool closes. The
// outcome of its first start goes to first.
func (p *pool) supervise(index int, first chan<- startResult) {
	p.mu.Lock()
	p.slots++
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		backoff := 100 * time.Millisecond
		for attempt := 0; ; attempt++ {
			began := time.Now()
			w, hello, err := p.spawn(index)
			if attempt == 0 {
				r := startResult{processes: hello.Processes, err: err}
				if w != nil {
					r.ready = w.readyInfo
				}
				first <- r
				if err != nil {
					return
				}
			}
			served := err == nil
			if served {
				if attempt > 0 {
					p.log.Info("custom processor worker restarted", "worker", index, "pid", w.pid)
					p.report(false, "WorkerRestarted", fmt.Sprintf("worker %d restarted as process %d", index, w.pid))
				}
				p.add(w)
				err = w.serve(p)
				p.remove(w)
			}
			p.mu.Lock()
			p.lastErr = err.Error()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if time.Since(began) > 30*time.Second {
				backoff = 100 * time.Millisecond
			}
			p.ended(index, w, served, err, backoff)
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
				return
			}
			backoff = min(backoff*2, 10*time.Second)
		}
	}()
}

// ended logs, as one error line, why worker index ended (served: after
// serving; else its restart failed) and that it is restarted after backoff,
// and reports it to the service's events. A crash in user code that the
// worker reported (a cpp worker's signal) is logged with the signal, the
// fault address and where it happened as attributes of their own.
func (p *pool) ended(index int, w *worker, served bool, err error, backoff time.Duration) {
	attrs := []any{"worker", index}
	var crash *crashReport
	if w != nil {
		attrs = append(attrs, "pid", w.pid)
		crash = w.log.crashReport()
	}
	if crash != nil {
		attrs = append(attrs, "signal", crash.signalName())
		if crash.addr != "" {
			attrs = append(attrs, "addr", crash.addr)
		}
		attrs = append(attrs, "at", crash.location())
	}
	attrs = append(attrs, "err", err, "in", backoff)
	msg, reason := "custom processor worker ended; restarting", "WorkerCrashed"
	switch {
	case !served:
		msg, reason = "custom processor worker restart failed; retrying", "WorkerRestartFailed"
	case crash != nil:
		msg = "custom processor worker crashed; restarting"
	case w.hungReason() != "":
		reason = "WorkerHung"
	}
	p.log.Error(msg, attrs...)
	p.report(true, reason, fmt.Sprintf("%v; restarting in %s", err, backoff))
}

// maxEventMessage bounds the message of an event the pool reports: the
// worker's last output is in the log, not in the service's history.
const maxEventMessage = 1 << 10

// report sends an event to the service (processors.Spec.Report).
func (p *pool) report(warning bool, reason, message string) {
	if p.event == nil {
		return
	}
	if len(message) > maxEventMessage {
		cut := maxEventMessage
		for cut > 0 && !utf8.RuneStart(message[cut]) {
			cut--
		}
		message = message[:cut] + "..."
	}
	p.event(warning, reason, message)
}

func (w *worker) hungReason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hungWhy
}

// spawn starts one process and runs the handshake: Hello, Init, Ready.
func (p *pool) spawn(index int) (*worker, frame.HelloInfo, error) {
	var hello frame.HelloInfo
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, hello, fmt.Errorf("socketpair: %w", err)
	}
	parent, child := os.NewFile(uintptr(fds[0]), "eas-worker-parent"), os.NewFile(uintptr(fds[1]), "eas-worker-child")
	cmd := p.command(index)
	tail := newTailLog(p.log.With("worker", index))
	tail.crashes, tail.lib = p.kind == "cpp", p.init.Entry
	cmd.Stdout, cmd.Stderr = tail, tail
	// A child that left the process group (setsid) may keep the output
	// pipes open: Wait gives up on them this long after the process ended.
	cmd.WaitDelay = time.Second
	cmd.ExtraFiles = []*os.File{child}                                                // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL} // the server gone, its workers go too
	err = cmd.Start()
	child.Close()
	if err != nil {
		parent.Close()
		return nil, hello, fmt.Errorf("starting the worker process %s: %w", cmd.Path, err)
	}
	tail.mu.Lock() // its output may be arriving already
	tail.log = tail.log.With("pid", cmd.Process.Pid)
	tail.mu.Unlock()
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		killGroup(cmd)
		cmd.Wait() //nolint:errcheck // killed
		return nil, hello, err
	}
	w := &worker{pid: cmd.Process.Pid, cmd: cmd, conn: conn, w: frame.NewWriter(conn), log: tail,
		calls: map[uint64]*pending{}, dead: make(chan struct{}), exited: make(chan struct{})}
	// The process's end, not the socket's, is what counts: a child it
	// forked holds the socket open after it died.
	go w.waitExit()
	r := bufio.NewReaderSize(conn, 64<<10)
	fail := func(stage string, err error) (*worker, frame.HelloInfo, error) {
		conn.Close()
		return nil, hello, fmt.Errorf("%s: %w%s", stage, w.exit(err), tail.suffix())
	}
	// A process that never says hello (a script that does not reach
	// run()) or is killed mid-handshake must not hang the load: the
	// deadline and the pool closing both end the wait.
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	defer stop()
	conn.SetReadDeadline(time.Now().Add(p.helloTimeout)) //nolint:errcheck // a socket
	f, err := frame.Read(r, p.maxFrame)
	switch {
	case err == nil && f.Kind == frame.Fail:
		// Why it cannot start (allspark: the script ended without
		// calling run()), in place of hello.
		conn.Close()
		how := w.exit(nil)
		status := ""
		if w.waitErr != nil {
			status = fmt.Sprintf(" (%v)", how)
		}
		return nil, hello, fmt.Errorf("worker start: %s%s%s", strings.TrimSpace(string(f.Payload)), status, tail.suffix())
	case err == nil && f.Kind != frame.Hello:
		err = fmt.Errorf("the worker's first frame is %q, not hello", f.Kind)
	case err == nil:
		err = json.Unmarshal(f.Payload, &hello)
	case p.kind == "python" && errors.Is(err, io.EOF):
		conn.Close()
		if how := w.exit(err); w.waitErr != nil {
			return nil, hello, fmt.Errorf("worker start: %w%s", how, tail.suffix())
		}
		return nil, hello, fmt.Errorf("worker start: %s (it exited with status 0 without connecting to the server): "+
			"call <your processor>.run() at the end of the script, as in `MyProcessor().run()` under `if __name__ == \"__main__\":`%s",
			errNoRun, tail.suffix())
	}
	if err != nil {
		return fail("worker start", err)
	}
	conn.SetReadDeadline(time.Time{}) //nolint:errcheck
	init := p.init
	if hello.Threads > 0 {
		init.Threads = hello.Threads
	}
	w.threads = max(init.Threads, 1)
	payload, _ := json.Marshal(init)
	if err := w.w.Send(frame.Init, 0, payload); err != nil {
		return fail("worker start", err)
	}
	f, err = frame.Read(r, p.maxFrame)
	switch {
	case err != nil:
		return fail("initialize", err)
	case f.Kind == frame.Fail:
		conn.Close()
		w.exit(nil) //nolint:errcheck // it failed; its output says more
		return nil, hello, fmt.Errorf("initialize failed: %s%s", strings.TrimSpace(string(f.Payload)), tail.suffix())
	case f.Kind != frame.Ready:
		return fail("initialize", fmt.Errorf("expected ready, got frame %q", f.Kind))
	}
	w.lastAnswer = time.Now()
	w.readyInfo = f.Payload
	go w.read(p, r)
	return w, hello, nil
}

// errNoRun starts the error of a python worker that ended before hello
// with status 0. allspark says the same, naming the processor class, when
// the script imported it.
const errNoRun = "the processor's script ended without calling run()"

// read delivers answers until the connection ends. A request's thread is
// free again when its answer arrives, not when its caller stops waiting:
// a worker still busy with a timed-out request gets no new one meanwhile.
func (w *worker) read(p *pool, r *bufio.Reader) {
	var err error
	for {
		var f frame.Frame
		if f, err = frame.Read(r, p.maxFrame); err != nil {
			break
		}
		if f.Kind != frame.Answer {
			err = fmt.Errorf("unexpected frame %q from the worker", f.Kind)
			break
		}
		w.mu.Lock()
		c := w.calls[f.ID]
		delete(w.calls, f.ID)
		w.lastAnswer = time.Now()
		w.mu.Unlock()
		if c != nil {
			c.answer <- f // buffered: never blocks, even for a caller gone
			p.release(w)
		}
	}
	w.conn.Close()
	w.mu.Lock()
	w.deathErr = err
	w.mu.Unlock()
	close(w.dead)
}

// serve waits until the worker's connection ends (the process ended, broke
// the protocol, or the pool closed), watching meanwhile for a hang; then it
// makes sure the process is gone and returns why it ended.
func (w *worker) serve(p *pool) error {
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		w.watch(p, stop)
	}()
	select {
	case <-w.dead:
	case <-p.ctx.Done():
		w.conn.Close()
		<-w.dead
	}
	close(stop)
	<-watched
	w.mu.Lock()
	err, hung := w.deathErr, w.hungWhy
	w.mu.Unlock()
	err = w.exit(err)
	w.log.reportDropped(time.Now(), true)
	if hung != "" {
		return fmt.Errorf("worker process %d: killed as hung (%s): %w%s", w.pid, hung, err, w.log.suffix())
	}
	return fmt.Errorf("worker process %d: %w%s", w.pid, err, w.log.suffix())
}

// watch is the watchdog of one live worker: every tick it kills the
// process (its group) if it is hung, and reports the output it dropped.
// The kill ends the connection as a crash does.
func (w *worker) watch(p *pool, stop <-chan struct{}) {
	every := min(max(p.hangGrace/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.log.reportDropped(now, false)
			why := w.hung(now, p.hangGrace)
			if why == "" {
				continue
			}
			w.mu.Lock()
			w.hungWhy = why
			w.mu.Unlock()
			p.log.Error("custom processor worker hung; killing it", "pid", w.pid, "why", why)
			killGroup(w.cmd)
			return
		}
	}
}

// hung is the watchdog's rule: a process is hung when at least as many of
// the requests it holds as it has threads are more than grace past their
// deadlines (so each of its threads is taken by a request nobody waits for
// any more), and it has answered nothing for grace. It then says why.
// Requests without a deadline never count.
func (w *worker) hung(now time.Time, grace time.Duration) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	quiet := now.Sub(w.lastAnswer)
	if quiet <= grace {
		return ""
	}
	overdue := 0
	for _, c := range w.calls {
		if !c.deadline.IsZero() && now.Sub(c.deadline) > grace {
			overdue++
		}
	}
	if overdue < w.threads {
		return ""
	}
	return fmt.Sprintf("%d requests for its %d threads more than %s past their deadlines, no answer for %s",
		overdue, w.threads, grace, quiet.Round(time.Millisecond))
}

// waitExit waits for the process to end, then kills its process group
// (whatever it forked goes too) and ends the connection: its requests fail
// at once, even while a child it forked holds its end of the socket open.
// Answers it sent before it ended are still read.
func (w *worker) waitExit() {
	// Waiting without reaping leaves the process a zombie, so its pid,
	// the group's id, cannot be reused while the group is killed.
	zombie := waitNoReap(w.pid) == nil
	if zombie {
		killGroup(w.cmd)
	}
	if c, ok := w.conn.(interface{ CloseRead() error }); ok {
		c.CloseRead() //nolint:errcheck // the reader reads what is buffered, then EOF
	} else {
		w.conn.Close()
	}
	err := w.cmd.Wait()
	if !zombie {
		killGroup(w.cmd)
	}
	w.waitErr = err
	close(w.exited)
}

// waitNoReap waits for process pid to end without reaping it
// (waitid(P_PID, pid, WEXITED|WNOWAIT)).
func waitNoReap(pid int) error {
	const pPID, wNOWAIT = 1, 0x01000000
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|wNOWAIT, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}

// exit makes sure the process has ended (it is killed with its group if it
// has not 2 s after its socket closed) and says how it ended; cause is the
// connection's error.
func (w *worker) exit(cause error) error {
	select {
	case <-w.exited: // it ended by itself, or on the closed socket
	case <-time.After(2 * time.Second):
		killGroup(w.cmd)
		<-w.exited
	}
	err := w.waitErr
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if c := w.log.crashReport(); c != nil && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			return fmt.Errorf("crashed: %s", c)
		}
		return fmt.Errorf("exited: %s", ee.ProcessState)
	case err != nil:
		return err
	case cause != nil && !errors.Is(cause, net.ErrClosed) && cause.Error() != "EOF":
		return fmt.Errorf("exited (status 0) after: %v", cause)
	}
	return errors.New("exited (status 0)")
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // it may be gone already
	}
}

func (p *pool) add(w *worker) {
	p.mu.Lock()
	p.ready = append(p.ready, w)
	p.signalLocked()
	p.mu.Unlock()
}

// remove takes w out of service and fails the requests it held.
func (p *pool) remove(w *worker) {
	p.mu.Lock()
	for i, x := range p.ready {
		if x == w {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			break
		}
	}
	p.signalLocked()
	p.mu.Unlock()
}

func (p *pool) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// errNoWorker is why Healthy fails between a crash and the restart.
var errNoWorker = errors.New("no worker process of the custom processor is running")

// pipelineDepth is how many requests a worker holds per thread: one it
// runs and one waiting in its socket, so that it starts the next as soon
// as it answers one instead of idling for a round trip through the
// server. A request waits behind at most one other on its thread.
const pipelineDepth = 2

// acquire picks the ready worker with the most free room, waiting for one
// while every worker holds pipelineDepth requests per thread.
func (p *pool) acquire(ctx context.Context) (*worker, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, &processors.StatusError{Code: http.StatusServiceUnavailable, Err: errors.New("the custom processor is stopping")}
		}
		var best *worker
		bestFree := 0
		for _, w := range p.ready {
			if free := pipelineDepth*w.threads - w.inflight; free > bestFree {
				best, bestFree = w, free
			}
		}
		if best != nil {
			best.inflight++
			p.mu.Unlock()
			return best, nil
		}
		wait := p.changed
		p.waiters++
		p.mu.Unlock()
		select {
		case <-wait:
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
		case <-ctx.Done():
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
			return nil, ctx.Err() // the request's deadline: 408, whether or not a worker is up
		}
	}
}

func (p *pool) release(w *worker) {
	p.mu.Lock()
	w.inflight--
	if p.waiters > 0 {
		p.signalLocked()
	}
	p.mu.Unlock()
}

// call sends one request body and waits for its answer.
func (p *pool) call(ctx context.Context, body []byte) Result {
	return p.send(ctx, frame.Request, body)
}

// send sends one frame of kind (Request, Batch) and waits for its answer.
func (p *pool) send(ctx context.Context, kind frame.Kind, body []byte) Result {
	w, err := p.acquire(ctx)
	if err != nil {
		return Result{Err: err}
	}
	id := p.nextID.Add(1)
	ch := make(chan frame.Frame, 1)
	deadline, _ := ctx.Deadline()
	w.mu.Lock()
	w.calls[id] = &pending{answer: ch, deadline: deadline}
	w.mu.Unlock()
	if err := w.w.Send(kind, id, body); err != nil {
		return Result{Err: p.crashed(w)}
	}
	select {
	case f := <-ch:
		status, out, err := frame.ParseAnswer(f.Payload)
		if err != nil {
			return Result{Err: err}
		}
		return Result{Status: status, Body: out}
	case <-w.dead:
		return Result{Err: p.crashed(w)}
	case <-ctx.Done():
		return Result{Err: ctx.Err()} // the answer, when it comes, frees the thread
	}
}

// crashed is the error of a request whose worker died holding it.
func (p *pool) crashed(w *worker) error {
	<-w.dead
	return &processors.StatusError{Code: http.StatusInternalServerError,
		Err: fmt.Errorf("the custom processor's worker process %d ended while running this request; it is being restarted", w.pid)}
}

// healthy reports an error while no worker process is serving: between a
// process's end (crash, exit, hang) and its restart, and while restarts
// fail.
func (p *pool) healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return fmt.Errorf("%w (the last one ended: %s)", errNoWorker, p.lastErr)
	}
	return nil
}

// lastError is why the latest process ended or failed to start; "" when
// none has.
func (p *pool) lastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// close stops every worker process and waits for the supervisors.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.quit()
	p.signalLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

// tailLog passes a worker's output to the server's log a line at a time,
// within bounds (a worker writing without end must not fill the server's
// disk), and keeps its last lines for error messages:
//   - a line is logged up to maxLogLine bytes; the rest of it is cut and
//     its size logged with it (cut_bytes);
//   - at most logRate lines a second are logged per worker process, in
//     bursts of up to logBurst; the lines over it are dropped, and counted;
//   - the count is logged at most every dropReportEvery (a warning with
//     dropped_lines, dropped_bytes and dropped_total), and when the process
//     ends.
//
// The last lines kept for error messages are taken before the rate limit:
// a crash after a flood still tells its last words.
type tailLog struct {
	log *slog.Logger
	// crashes: the worker may write a crash report
	// (cworker.CrashMarker), which is kept, not logged; lib is the
	// library it runs.
	crashes bool
	lib     string

	mu   sync.Mutex
	part []byte // the line being written, up to maxLogLine bytes
	cut  int    // the bytes of that line past maxLogLine, discarded
	tail []string

	tokens       float64   // lines that may be logged now
	refilled     time.Time // when tokens was last topped up
	dropped      int64     // lines dropped since the last report
	droppedBytes int64
	droppedTotal int64
	reported     time.Time // the last report of dropped lines

	crash *crashReport // the worker's crash report; nil when none

	// A Go runtime dump being held back (goDump).
	held      *heldLine // a line that may start one
	dumpLines int       // lines of the dump so far; 0 when none
	dumpHead  []string  // its first lines
	dumpSince time.Time
}

const (
	tailLines       = 12
	maxLogLine      = 2 << 10 // bytes of one line logged
	logRate         = 50      // lines a second logged per worker process
	logBurst        = 200     // lines logged at once before the rate applies
	dropReportEvery = 10 * time.Second
)

func newTailLog(log *slog.Logger) *tailLog {
	now := time.Now()
	return &tailLog{log: log, tokens: logBurst, refilled: now, reported: now}
}

func (t *tailLog) Write(b []byte) (int, error) {
	n := len(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(b) > 0 {
		end := bytes.IndexByte(b, '\n')
		chunk := b
		if end >= 0 {
			chunk = b[:end]
		}
		room := maxLogLine - len(t.part)
		if len(chunk) > room {
			t.part = append(t.part, chunk[:room]...)
			t.cut += len(chunk) - room
		} else {
			t.part = append(t.part, chunk...)
		}
		if end < 0 {
			break
		}
		t.line(time.Now())
		b = b[end+1:]
	}
	return n, nil
}

// line ends the line being written: it keeps it for the tail and logs it
// when the rate allows.
func (t *tailLog) line(now time.Time) {
	s := string(bytes.TrimRight(t.part, "\r"))
	cut := t.cut
	t.part, t.cut = t.part[:0], 0
	if i := strings.Index(s, crashMarker); t.crashes && i >= 0 {
		if c, ok := parseCrash(s[i+len(crashMarker):], t.lib); ok && t.crash == nil {
			t.crash = c
		}
		// What the library had written of the line before it died is
		// output like any other; the report is the server's.
		if s, cut = s[:i], 0; s == "" {
			return
		}
	}
	for i := 0; cut > 0 && i < utf8.UTFMax-1 && len(s) > 0; i++ { // do not end on half a character
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	if t.crashes && t.goDump(now, s, cut) {
		return
	}
	t.emit(now, s, cut)
}

// goDump holds back a cpp worker's Go runtime dump (a fault in the
// worker's own Go code, SIGQUIT: each goroutine's stack and the registers,
// well over a hundred lines) from the log: the dump's first lines go to
// the error of the process's end instead, with its length. A line that
// may start one ("fatal error: ", "panic: ", "SIGQUIT: quit") is held
// until the next tells whether it does; a dump is over when the process
// ends, or, for output that only looked like one, after goDumpWindow,
// when what was held back is logged as one warning. It reports whether it
// took s.
func (t *tailLog) goDump(now time.Time, s string, cut int) bool {
	switch {
	case t.dumpLines > 0 && now.Sub(t.dumpSince) < goDumpWindow:
		t.dumpLines++
		if len(t.dumpHead) < goDumpHead && s != "" {
			t.dumpHead = append(t.dumpHead, shorten(s))
		}
		return true
	case t.dumpLines > 0:
		t.log.Warn("worker output that looked like a Go runtime dump, not logged", "lines", t.dumpLines,
			"began", strings.Join(t.dumpHead, " | "))
		t.dumpLines, t.dumpHead = 0, nil
	case t.held != nil:
		h := *t.held
		t.held = nil
		if goDumpNext(s) {
			t.dumpLines, t.dumpHead, t.dumpSince = 2, []string{shorten(h.s)}, now
			if s != "" {
				t.dumpHead = append(t.dumpHead, shorten(s))
			}
			return true
		}
		t.emit(now, h.s, h.cut)
	}
	if goDumpStart(s) {
		t.held = &heldLine{s: s, cut: cut}
		return true
	}
	return false
}

// heldLine is a line held back by goDump.
type heldLine struct {
	s   string
	cut int
}

const (
	goDumpWindow = 5 * time.Second // a Go runtime dump takes milliseconds
	goDumpHead   = 4               // lines of a dump quoted in the error
)

// goDumpStart says whether a line may start a Go runtime dump: a fatal
// error, a panic, or a signal the Go runtime dumps on ("SIGQUIT: quit").
func goDumpStart(s string) bool {
	for _, p := range []string{"fatal error: ", "panic: ", "unexpected fault address "} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	name, _, ok := strings.Cut(s, ": ")
	return ok && len(name) > 3 && strings.HasPrefix(name, "SIG") && strings.ToUpper(name) == name && !strings.Contains(name, " ")
}

// goDumpNext says whether the line after goDumpStart's confirms a dump.
func goDumpNext(s string) bool {
	if s == "" {
		return true
	}
	for _, p := range []string{"[signal ", "PC=", "goroutine ", "runtime stack:", "fatal error: ", "[recovered"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func shorten(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// emit keeps a line for the tail and logs it when the rate allows.
func (t *tailLog) emit(now time.Time, s string, cut int) {
	short := shorten(s)
	t.tail = append(t.tail, short)
	if len(t.tail) > tailLines {
		t.tail = t.tail[1:]
	}
	t.tokens = min(logBurst, t.tokens+now.Sub(t.refilled).Seconds()*logRate)
	t.refilled = now
	if t.tokens < 1 {
		t.dropped++
		t.droppedBytes += int64(len(s) + cut)
		t.droppedTotal++
		t.reportDroppedLocked(now, false)
		return
	}
	t.tokens--
	if cut > 0 {
		t.log.Info("worker: "+s, "cut_bytes", cut)
	} else {
		t.log.Info("worker: " + s)
	}
}

// reportDropped logs how many lines were dropped since the last report, if
// any were and dropReportEvery has passed since (or at once when final).
func (t *tailLog) reportDropped(now time.Time, final bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reportDroppedLocked(now, final)
}

func (t *tailLog) reportDroppedLocked(now time.Time, final bool) {
	if t.dropped == 0 || (!final && now.Sub(t.reported) < dropReportEvery) {
		return
	}
	t.log.Warn(fmt.Sprintf("worker output dropped: over %d lines a second", logRate),
		"dropped_lines", t.dropped, "dropped_bytes", t.droppedBytes, "dropped_total", t.droppedTotal)
	t.dropped, t.droppedBytes, t.reported = 0, 0, now
}

// crashReport is the worker's report of the signal that killed it, with
// the symbol looked up; nil when it made none.
func (t *tailLog) crashReport() *crashReport {
	t.mu.Lock()
	c := t.crash
	t.mu.Unlock()
	if c != nil {
		c.once.Do(c.resolve) // reading the library's symbols: outside the lock
	}
	return c
}

// suffix is "; its last output: ..." for an error message, or "".
func (t *tailLog) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if len(t.part) > 0 || t.cut > 0 {
		t.line(now)
	}
	if h := t.held; h != nil { // nothing came after it
		t.held = nil
		t.emit(now, h.s, h.cut)
	}
	var s string
	if len(t.tail) > 0 {
		s = "; its last output: " + strings.Join(t.tail, " | ")
	}
	if t.dumpLines > 0 {
		s += fmt.Sprintf("; the Go runtime's dump (%d lines, not logged) began: %s", t.dumpLines, strings.Join(t.dumpHead, " | "))
	}
	return s
}
