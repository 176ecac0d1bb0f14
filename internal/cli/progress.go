package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/humanize"
)

// progressLineEvery is how often the download's progress is printed as a
// line when stderr is not a terminal (a log, CI): on a terminal it is
// redrawn in place at every poll.
var progressLineEvery = 5 * time.Second

// maxDrawn bounds the line redrawn in place, in characters: narrower than
// most terminals, so that it never wraps.
const maxDrawn = 100

// progressView shows a service's download progress (ServiceObject.Progress)
// while create, modify and the other waiting verbs poll it.
type progressView struct {
	w     io.Writer
	tty   bool
	drawn int // the width of the line drawn in place; 0 when none
	// not a terminal: what the last line said, and when
	lastAt   time.Time
	lastDone int64
	retries  int
	key      string
}

func newProgressView(w io.Writer) *progressView {
	return &progressView{w: w, tty: isTerminal(w), lastDone: -1}
}

// isTerminal reports whether w is a character device: the CLI's test for
// a terminal, as upload's progress bar makes too.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// show draws p: in place on a terminal; otherwise as a line when a retry
// happened, a new download started or finished, or progressLineEvery has
// passed with bytes done since.
func (v *progressView) show(p *controlapi.ProgressObject) {
	if p == nil {
		return
	}
	line := progressLine(p)
	if v.tty {
		// One line only: a line that wraps cannot be redrawn with \r.
		if r := []rune(line); len(r) > maxDrawn {
			line = string(r[:maxDrawn-3]) + "..."
		}
		n := len([]rune(line))
		pad := ""
		if v.drawn > n {
			pad = strings.Repeat(" ", v.drawn-n)
		}
		fmt.Fprintf(v.w, "\r%s%s", line, pad)
		v.drawn = n
		return
	}
	now := time.Now()
	finished := p.TotalBytes >= 0 && p.DoneBytes >= p.TotalBytes
	due := p.DoneBytes != v.lastDone && (now.Sub(v.lastAt) >= progressLineEvery || finished)
	if p.Key != v.key || p.Retries != v.retries || due {
		fmt.Fprintf(v.w, "[%s] %s\n", now.Format("15:04:05"), line)
		v.lastAt, v.lastDone, v.retries, v.key = now, p.DoneBytes, p.Retries, p.Key
	}
}

// clear removes the line drawn in place, before other output or at the end.
func (v *progressView) clear() {
	if v.tty && v.drawn > 0 {
		fmt.Fprintf(v.w, "\r%s\r", strings.Repeat(" ", v.drawn))
		v.drawn = 0
	}
}

// progressLine says "model_path: 1.2 MiB of 4.0 MiB (30%), 1.1 MiB/s, ETA 3s",
// with "; retry 2/5 after: connection reset" while a retry has brought no
// bytes yet, then " (after 2 retries)".
func progressLine(p *controlapi.ProgressObject) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", p.Key, humanize.Bytes(p.DoneBytes))
	if p.TotalBytes >= 0 {
		fmt.Fprintf(&b, " of %s", humanize.Bytes(p.TotalBytes))
		if p.TotalBytes > 0 {
			fmt.Fprintf(&b, " (%d%%)", p.DoneBytes*100/p.TotalBytes)
		}
	}
	if p.BytesPerSecond > 0 {
		fmt.Fprintf(&b, ", %s/s", humanize.Bytes(int64(p.BytesPerSecond)))
	}
	if p.ETASeconds >= 0 && p.BytesPerSecond > 0 {
		fmt.Fprintf(&b, ", ETA %s", (time.Duration(p.ETASeconds+0.5) * time.Second).String())
	}
	switch {
	case p.Retries > 0 && p.BytesPerSecond == 0: // retrying: no bytes since
		fmt.Fprintf(&b, "; retry %d/%d after: %s", p.Retry, p.MaxRetries, oneLine(p.LastError))
	case p.Retries == 1:
		b.WriteString(" (after 1 retry)")
	case p.Retries > 1:
		fmt.Fprintf(&b, " (after %d retries)", p.Retries)
	}
	return b.String()
}
