package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/syncbuf"
	"github.com/eas-server/eas-server/internal/wait"
)

// readmeBlock is one ```sh block of README.md.
type readmeBlock struct {
	file string // "" for README.md
	line int    // of the opening fence
	text string // the commands
	// skip is the reason a block is not run (a marker before it:
	// <!-- readme-test: skip: REASON -->); "" runs it.
	skip string
	// httpErrors allows the block's curls HTTP error answers (a marker
	// <!-- readme-test: http-errors: REASON -->), for an example that
	// shows one.
	httpErrors bool
}

func (b readmeBlock) where() string {
	if b.file == "" {
		return "README.md"
	}
	return b.file
}

var readmeMarker = regexp.MustCompile(`^<!-- readme-test: (skip|http-errors): (.+) -->$`)

// readmeBlocks reads the ```sh blocks of the README and the marker, if
// any, on the line before each.
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeBlock
	var cur *readmeBlock
	var prev string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```sh":
			cur = &readmeBlock{line: n}
			if m := readmeMarker.FindStringSubmatch(prev); m != nil {
				if m[1] == "skip" {
					cur.skip = m[2]
				} else {
					cur.httpErrors = true
				}
			}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadmeExamplesRunAsWritten runs every ```sh block of README.md, in
// order, as a reader would after the README's first command (`make run`):
// the binary built into bin/, every local example service deployed, the
// admin token generated into eas-data/. Each block runs under bash -e with
// pipefail, in a folder that holds the repository's files (examples/ and
// the rest) through links, so what a block writes (input.json, answer.pb)
// stays out of the repository. The one change made to the text is the
// server's address: localhost:8080 becomes the test server's port. Curls
// fail on an HTTP error answer unless the block is marked as showing one;
// a block that cannot run here (make itself, Kubernetes, OSS, a GPU) is
// marked with its reason, and the test lists what it did not run.
func TestReadmeExamplesRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("-short leaves out the README's examples (a whole make run)")
	}
	for _, tool := range []string{"curl", "gcc", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's examples need %s (scripts/install-test-deps.sh installs it)", tool)
		}
	}
	root := require.RepoRoot()
	blocks := readmeBlocks(t, filepath.Join(root, "README.md"))
	if len(blocks) < 10 {
		t.Fatalf("found %d sh blocks in README.md; the parser or the README changed", len(blocks))
	}
	// The docs a user follows against the same server; docs/development.md
	// (fuzzing, benchmarks, make itself) and docs/kubernetes.md (a cluster)
	// are a developer's and an operator's, run elsewhere.
	for _, doc := range []string{"docs/custom-processors.md"} {
		more := readmeBlocks(t, filepath.Join(root, doc))
		for i := range more {
			more[i].file = doc
		}
		blocks = append(blocks, more...)
	}

	// The reader's folder: the repository's entries as links, bin/ and
	// eas-data/ of its own.
	dir := t.TempDir()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "bin", "eas-data", ".git":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin", "eas-server")
	build := exec.Command("go", "build", "-o", bin, "./cmd/eas-server")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// make run's other step: the example C processor (into the ignored
	// examples/custom/*/build, as make run does).
	if out, err := exec.Command("make", "-C", root, "examples").CombinedOutput(); err != nil {
		t.Fatalf("make examples: %v\n%s", err, out)
	}

	// make run: every example but oss_*, which needs OSS credentials.
	examples, _ := filepath.Glob(filepath.Join(root, "examples", "service-json", "*.json"))
	args := []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", "./eas-data"}
	for _, e := range examples {
		if !strings.HasPrefix(filepath.Base(e), "oss_") {
			args = append(args, "--deploy", filepath.Join("examples", "service-json", filepath.Base(e)))
		}
	}
	env := readerEnv()
	srv := exec.Command(bin, args...)
	srv.Dir, srv.Env = dir, env
	logs := &syncbuf.Buffer{}
	srv.Stdout, srv.Stderr = logs, logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill() //nolint:errcheck // it may have ended
		srv.Wait()         //nolint:errcheck
	})
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var addr string
	wait.Until(t, 60*time.Second, func() error {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
			return nil
		}
		return fmt.Errorf("the server does not listen yet; its output:\n%s", logs.String())
	})
	wait.Until(t, 3*time.Minute, func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d; the server's output:\n%s", resp.StatusCode, logs.String())
		}
		return nil
	})

	env = append(env, "EAS_ENDPOINT=http://"+addr)
	const strictCurl = `curl() { command curl --fail-with-body "$@"; }` + "\n"
	var skipped []string
	for _, b := range blocks {
		if b.skip != "" {
			skipped = append(skipped, fmt.Sprintf("%s line %d: %s", b.where(), b.line, b.skip))
			continue
		}
		script := strings.NewReplacer("localhost:8080", addr, "127.0.0.1:8080", addr).Replace(b.text)
		if !b.httpErrors {
			script = strictCurl + script
		}
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s line %d: the block fails (%v):\n%s\noutput:\n%s", b.where(), b.line, err, b.text, out)
		}
	}
	t.Logf("README blocks not run here: %s", strings.Join(skipped, "; "))
}

// readerEnv is this process's environment without the variables a reader
// who just ran make run would not have set.
func readerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "EAS_ADMIN_TOKEN=") || strings.HasPrefix(kv, "EAS_ENDPOINT=") || strings.HasPrefix(kv, "EAS_TOKEN=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
