package custom

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/custom/frame"
)

// pool runs a custom processor's worker processes: it starts them, hands
// each request to one with a free thread, and restarts a process that dies,
// failing only the requests that process held.
type pool struct {
	name     string
	log      *slog.Logger
	init     frame.InitInfo
	command  func(index int) *exec.Cmd // one worker process; pool adds the socket
	maxFrame int
	// helloTimeout bounds how long a new process may take to say hello
	// (to reach allspark's run(), or the C worker's start).
	helloTimeout time.Duration

	nextID atomic.Uint64

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

	mu       sync.Mutex
	calls    map[uint64]chan frame.Frame
	inflight int
	dead     chan struct{} // closed when the connection ends
	deathErr error         // set before dead closes
}

func newPool(name string, log *slog.Logger, init frame.InitInfo, command func(int) *exec.Cmd, maxFrame int) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{
		name: name, log: log, init: init, command: command, maxFrame: maxFrame,
		helloTimeout: 2 * time.Minute,
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

// maxProcesses bounds worker_processes: each process holds its own copy of
// the model.
const maxProcesses = 64

type startResult struct {
	processes int
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
				first <- startResult{processes: hello.Processes, err: err}
				if err != nil {
					return
				}
			}
			if err == nil {
				if attempt > 0 {
					p.log.Info("custom processor worker restarted", "worker", index, "pid", w.pid)
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
			p.log.Error("custom processor worker ended; restarting", "worker", index, "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
				return
			}
			backoff = min(backoff*2, 10*time.Second)
		}
	}()
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
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.ExtraFiles = []*os.File{child}                                                // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL} // the server gone, its workers go too
	err = cmd.Start()
	child.Close()
	if err != nil {
		parent.Close()
		return nil, hello, fmt.Errorf("starting the worker process %s: %w", cmd.Path, err)
	}
	tail.log = tail.log.With("pid", cmd.Process.Pid)
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		killGroup(cmd)
		return nil, hello, err
	}
	w := &worker{pid: cmd.Process.Pid, cmd: cmd, conn: conn, w: frame.NewWriter(conn), log: tail,
		calls: map[uint64]chan frame.Frame{}, dead: make(chan struct{})}
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
	if err == nil && f.Kind != frame.Hello {
		err = fmt.Errorf("the worker's first frame is %q, not hello", f.Kind)
	}
	if err == nil {
		err = json.Unmarshal(f.Payload, &hello)
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
	go w.read(p, r)
	return w, hello, nil
}

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
		ch := w.calls[f.ID]
		delete(w.calls, f.ID)
		w.mu.Unlock()
		if ch != nil {
			ch <- f // buffered: never blocks, even for a caller gone
			p.release(w)
		}
	}
	w.conn.Close()
	w.mu.Lock()
	w.deathErr = err
	w.mu.Unlock()
	close(w.dead)
}

// serve waits until the worker's connection ends, then makes sure its
// process is gone and returns why it ended.
func (w *worker) serve(p *pool) error {
	select {
	case <-w.dead:
	case <-p.ctx.Done():
		w.conn.Close()
		<-w.dead
	}
	w.mu.Lock()
	err := w.deathErr
	w.mu.Unlock()
	return fmt.Errorf("worker process %d: %w%s", w.pid, w.exit(err), w.log.suffix())
}

// exit ends the process (its group: whatever it forked goes too) and says
// how it ended; cause is the connection's error.
func (w *worker) exit(cause error) error {
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	var err error
	select {
	case err = <-done: // it ended by itself, or on the closed socket
	case <-time.After(2 * time.Second):
		killGroup(w.cmd)
		err = <-done
	}
	killGroup(w.cmd) // children it left behind
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
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
	w, err := p.acquire(ctx)
	if err != nil {
		return Result{Err: err}
	}
	id := p.nextID.Add(1)
	ch := make(chan frame.Frame, 1)
	w.mu.Lock()
	w.calls[id] = ch
	w.mu.Unlock()
	if err := w.w.Send(frame.Request, id, body); err != nil {
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

// healthy reports an error while no worker process is serving.
func (p *pool) healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return fmt.Errorf("%w (the last one ended: %s)", errNoWorker, p.lastErr)
	}
	return nil
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

// tailLog passes a worker's output to the server's log a line at a time
// and keeps its last lines for error messages.
type tailLog struct {
	log *slog.Logger

	mu   sync.Mutex
	part []byte
	tail []string
}

const tailLines = 12

func newTailLog(log *slog.Logger) *tailLog { return &tailLog{log: log} }

func (t *tailLog) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, b...)
	for {
		i := strings.IndexByte(string(t.part), '\n')
		if i < 0 {
			break
		}
		t.line(string(t.part[:i]))
		t.part = t.part[i+1:]
	}
	if len(t.part) > 16<<10 { // a very long line: log it in pieces
		t.line(string(t.part))
		t.part = t.part[:0]
	}
	return len(b), nil
}

func (t *tailLog) line(s string) {
	s = strings.TrimRight(s, "\r")
	t.log.Info("worker: " + s)
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	t.tail = append(t.tail, s)
	if len(t.tail) > tailLines {
		t.tail = t.tail[1:]
	}
}

// suffix is "; its last output: ..." for an error message, or "".
func (t *tailLog) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.part) > 0 {
		t.line(string(t.part))
		t.part = t.part[:0]
	}
	if len(t.tail) == 0 {
		return ""
	}
	return "; its last output: " + strings.Join(t.tail, " | ")
}
