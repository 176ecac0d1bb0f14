// Package custom serves custom processors: service.json's processor_path
// with processor_type "cpp" (a shared library with EAS's C ABI, run by
// package cworker) or "python" (an allspark processor, run on the allspark
// package this package embeds). processor_type "java" is refused at
// deploy: there is no JVM processor runtime here.
//
// User code never runs in the server's process. Each service gets its own
// worker processes (package frame is the wire between them), so a crash,
// a leak or a hang in user code costs only that service's requests in
// flight: the pool restarts the process, and the other services never
// notice. Requests reach the workers through the same scheduler as
// built-in processors (queue, deadlines, 450/408, metrics, batching); a
// batch is several process calls run at once across the workers' threads.
package custom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/custom/cworker"
	"github.com/eas-server/eas-server/processors/custom/frame"
)

func init() { processors.RegisterCustom(processors.CustomRuntime{New: New, WithHooks: WithHooks}) }

// New makes the processor for a processor_type.
func New(processorType string) (*processors.Engine, error) {
	switch processorType {
	case "cpp":
		return processors.Adapt[[]byte, Result](&Processor{kind: processorType}), nil
	case "python":
		return newPython(), nil
	case "java":
		return nil, errors.New("processor_type java: Java processors are not run here (there is no JVM processor runtime); port the processor to C or C++ (processor_type cpp, a shared library exporting initialize and process) or to Python (processor_type python, an allspark processor)")
	}
	return nil, fmt.Errorf("processor_type %q: unknown; use cpp or python", processorType)
}

// Result is one request's outcome: the status and body the user's code
// returned, or Err when it could not run (its worker died, no worker came
// up in time).
type Result struct {
	Status int
	Body   []byte
	Err    error
}

// Processor runs one service's custom processor in worker processes.
type Processor struct {
	kind string // cpp or python
	spec processors.Spec
	// tensors: a python entry that imports batch_inference is served as a
	// batch-inference model class (batch.go); set for a service's own
	// python processor, not for a hook.
	tensors bool

	mu      sync.Mutex
	pool    *pool
	desc    string         // the entry as the user named it, for Metadata
	batch   *batchInfo     // the batch-inference class; nil for an allspark processor
	sandbox *workerSandbox // the workers' trust boundary
}

// Configure checks processor_entry without any I/O.
func (p *Processor) Configure(spec processors.Spec) error {
	if spec.Logger == nil { // eas-server validate
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	p.spec = spec
	e := spec.ProcessorEntry
	if e == "" {
		return nil // the package may be the entry file itself
	}
	if filepath.IsAbs(e) || strings.HasPrefix(filepath.Clean(e), "..") {
		return fmt.Errorf("processor_entry: %q must be a path inside processor_path's package (relative, no ..)", e)
	}
	switch {
	case p.kind == "cpp" && !isSharedLibrary(e):
		return fmt.Errorf("processor_entry: %q is not a shared library; a cpp processor's entry is the .so file inside processor_path, e.g. \"libecho.so\"", e)
	case p.kind == "python" && !strings.HasSuffix(e, ".py"):
		return fmt.Errorf("processor_entry: %q is not a Python file; a python processor's entry is the .py file that calls run(), e.g. \"app.py\"", e)
	}
	return nil
}

// Load finds the entry in the fetched package and starts the worker
// processes; it returns once every one has run initialize.
func (p *Processor) Load(ctx context.Context, files processors.Files) error {
	if files.ProcessorPath == "" {
		return errors.New("processor_path: required for a custom processor; point it at the package (a .so or .py file, or an archive holding it)")
	}
	entry, pkgDir, err := findEntry(p.kind, files.ProcessorPath, p.spec.ProcessorEntry)
	if err != nil {
		return err
	}
	init := frame.InitInfo{
		Service:     p.spec.Service,
		Entry:       entry,
		ModelPath:   files.ModelPath,
		ModelEntry:  modelEntry(files.ModelPath, p.spec.ModelEntry),
		ModelConfig: string(p.spec.ModelConfig),
		Threads:     max(p.spec.WorkerThreads, 1),
	}
	log := p.spec.Logger.With("processor_type", p.kind)
	// Every worker starts inside the trust boundary (sandbox.go): it may
	// read the package, the model and its runtime, not the server's state.
	var command func(int) *exec.Cmd
	var sb *workerSandbox
	batch := false
	switch p.kind {
	case "cpp":
		exe, err := workerExecutable()
		if err != nil {
			return err
		}
		if sb, err = newWorkerSandbox(p.spec.Service, log, pkgDir, entry, files.ModelPath); err != nil {
			return err
		}
		command = func(int) *exec.Cmd {
			cmd := exec.Command(exe)
			cmd.Dir = pkgDir
			cmd.Env = append(append(childEnv(), sb.env()...), cworker.EnvMode+"=cpp")
			sb.launcher.Wrap(cmd, true)
			return cmd
		}
	case "python":
		if p.tensors {
			if batch, err = isBatchInference(entry); err != nil {
				return err
			}
		}
		py, err := pythonCommand(ctx, p.spec.Service, entry, pkgDir, batch, log)
		if err != nil {
			return err
		}
		if sb, err = newWorkerSandbox(p.spec.Service, log, append(py.needs, pkgDir, entry, files.ModelPath)...); err != nil {
			return err
		}
		command = func(i int) *exec.Cmd {
			cmd := py.command(i)
			cmd.Env = append(cmd.Env, sb.env()...)
			sb.launcher.Wrap(cmd, false)
			return cmd
		}
	}
	pl := newPool(p.spec.Service, log, init, command, maxFrame(p.spec))
	pl.kind, pl.event = p.kind, p.spec.Report
	if err := pl.start(ctx); err != nil {
		sb.close()
		return err
	}
	var bi *batchInfo
	if batch {
		if bi, err = parseBatchInfo(pl.readyInfo); err != nil {
			pl.close()
			sb.close()
			return err
		}
		log.Info("serving a batch-inference model class", "class", bi.Class, "batcher", bi.Batcher,
			"max_batch_size", bi.MaxBatchSize, "wait_ms", bi.WaitMS, "batch_inference", bi.Package)
	}
	p.mu.Lock()
	p.pool, p.desc, p.sandbox, p.batch = pl, filepath.Base(entry), sb, bi
	p.mu.Unlock()
	return nil
}

// maxFrame bounds an answer from user code: the model size limit, which is
// far above any sane response and keeps a runaway worker from exhausting
// the server's memory.
func maxFrame(spec processors.Spec) int {
	return int(min(spec.ModelLimit(), 1<<30))
}

// isSharedLibrary reports whether name looks like a shared library:
// libx.so, or a versioned libx.so.1.2.
func isSharedLibrary(name string) bool {
	b := filepath.Base(name)
	return strings.HasSuffix(b, ".so") || strings.Contains(b, ".so.")
}

// findEntry resolves processor_entry inside the fetched package: the
// package itself when it is a single file.
func findEntry(kind, pkg, entry string) (path, dir string, err error) {
	if pkg, err = filepath.Abs(pkg); err != nil { // the worker runs in another directory
		return "", "", fmt.Errorf("processor_path: %w", err)
	}
	st, err := os.Stat(pkg)
	if err != nil {
		return "", "", fmt.Errorf("processor_path: %w", err)
	}
	if !st.IsDir() {
		if entry != "" && entry != filepath.Base(pkg) {
			return "", "", fmt.Errorf("processor_entry: %q, but processor_path is the single file %q; remove processor_entry or name that file", entry, filepath.Base(pkg))
		}
		return pkg, filepath.Dir(pkg), nil
	}
	ext := ".so"
	if kind == "python" {
		ext = ".py"
	}
	if entry == "" {
		return "", "", fmt.Errorf("processor_entry: required when processor_path is a directory or an archive; name the %s file in it%s", ext, candidates(pkg, ext))
	}
	path = filepath.Join(pkg, entry)
	if _, err := os.Stat(path); err != nil {
		return "", "", fmt.Errorf("processor_entry: %q is not in the package%s", entry, candidates(pkg, ext))
	}
	return path, pkg, nil
}

// candidates lists the package's files with ext, for an error message.
func candidates(dir, ext string) string {
	var found []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error { //nolint:errcheck // best effort
		match := strings.HasSuffix(d.Name(), ext) || (ext == ".so" && isSharedLibrary(d.Name()))
		if err == nil && !d.IsDir() && match && len(found) < 10 {
			rel, _ := filepath.Rel(dir, p)
			found = append(found, rel)
		}
		return nil
	})
	if len(found) == 0 {
		return fmt.Sprintf(" (the package holds no %s file)", ext)
	}
	sort.Strings(found)
	return " (the package holds: " + strings.Join(found, ", ") + ")"
}

// modelEntry is what initialize receives as model_entry: the local model
// file, or model_entry inside the model directory, or model_entry as
// written when there is no model_path.
func modelEntry(modelPath, entry string) string {
	switch {
	case modelPath == "":
		return entry
	case entry == "":
		return modelPath
	}
	if st, err := os.Stat(modelPath); err == nil && !st.IsDir() {
		return modelPath
	}
	return filepath.Join(modelPath, entry)
}

// workerExecutable is the program run as a cpp worker: this process's own
// executable, which becomes a worker when cworker.EnvMode is set (the
// eas-server binary's main, and the TestMain of tests that deploy cpp
// processors, check it first).
func workerExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the eas-server binary to run the cpp worker: %w", err)
	}
	return exe, nil
}

// childEnv is the environment a worker process gets: the server's, less
// anything that looks like a credential (the server's OSS keys and tokens
// are not user code's business).
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(name)
		if strings.Contains(u, "SECRET") || strings.Contains(u, "ACCESS_KEY") || strings.Contains(u, "TOKEN") ||
			strings.Contains(u, "PASSWORD") || strings.HasPrefix(u, "OSS_") || strings.HasPrefix(u, "ALIBABA_CLOUD_") ||
			name == cworker.EnvMode {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Metadata describes the one bytes input and output.
func (p *Processor) Metadata() processors.Metadata {
	p.mu.Lock()
	defer p.mu.Unlock()
	return processors.Metadata{
		Processor: p.kind + ":" + p.desc,
		Inputs:    []processors.IOSpec{{Name: "body", DType: "BYTES"}},
		Outputs:   []processors.IOSpec{{Name: "body", DType: "BYTES"}},
	}
}

// Decode keeps the body as the payload.
func (p *Processor) Decode(_ context.Context, req *processors.Request) ([]byte, error) {
	return req.Body, nil
}

// BatchKey lets any payloads share a run: a batch is several process calls
// at once across the workers' threads.
func (p *Processor) BatchKey([]byte) (string, bool) { return "", true }

// Run sends each payload to a worker; several run at once.
func (p *Processor) Run(ctx context.Context, batch [][]byte) ([]Result, error) {
	p.mu.Lock()
	pl := p.pool
	p.mu.Unlock()
	out := make([]Result, len(batch))
	if pl == nil {
		return nil, &processors.StatusError{Code: http.StatusServiceUnavailable, Err: errors.New("the custom processor is closed")}
	}
	if len(batch) == 1 {
		out[0] = pl.call(ctx, batch[0])
		return out, nil
	}
	var wg sync.WaitGroup
	for i, b := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = pl.call(ctx, b)
		}()
	}
	wg.Wait()
	return out, nil
}

// Encode answers with the user's status and body.
func (p *Processor) Encode(_ context.Context, _ []byte, r Result) (*processors.Response, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	return &processors.Response{Body: r.Body, Status: r.Status}, nil
}

// Healthy fails while no worker process is serving (between a crash and
// the restart).
func (p *Processor) Healthy(context.Context) error {
	p.mu.Lock()
	pl := p.pool
	p.mu.Unlock()
	if pl == nil {
		return errNoWorker
	}
	return pl.healthy()
}

// Close stops the worker processes.
func (p *Processor) Close() error {
	p.mu.Lock()
	pl, sb := p.pool, p.sandbox
	p.pool, p.sandbox = nil, nil
	p.mu.Unlock()
	if pl != nil {
		pl.close()
	}
	sb.close()
	return nil
}

var (
	_ processors.Typed[[]byte, Result] = (*Processor)(nil)
	_ processors.Batcher[[]byte]       = (*Processor)(nil)
	_ processors.Closer                = (*Processor)(nil)
	_ processors.Healther              = (*Processor)(nil)
)
