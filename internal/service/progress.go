package service

import (
	"fmt"
	"strconv"
)

// fetchProgress returns a progress callback (storage.FetchOptions.Progress)
// for one download of service name; key names what is fetched (model_path,
// warm_up_data_path). While an operation loads a version, the service's
// Message shows how far the download is, so that desc and the CLI's progress
// say more than "loading"; the start and the end of the download are events.
// Only the events are written to disk, so the callback stays cheap.
func (m *Manager) fetchProgress(name, key string) func(done, total int64) {
	started := false
	return func(done, total int64) {
		s, ok := m.Get(name)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pending == 0 {
			return
		}
		what := key + ": " + humanSize(done)
		if total >= 0 {
			what += " of " + humanSize(total)
			if total > 0 {
				what += fmt.Sprintf(" (%d%%)", done*100/total)
			}
		}
		s.rec.Message = fmt.Sprintf("loading version %d: downloading %s", s.pending, what)
		s.publishLocked()
		switch {
		case !started:
			started = true
			s.eventLocked(EventNormal, "Downloading", fmt.Sprintf("version %d: downloading %s", s.pending, what))
			_ = m.saveLocked(s)
		case total >= 0 && done >= total:
			s.eventLocked(EventNormal, "Downloaded", fmt.Sprintf("version %d: downloaded %s (%s)", s.pending, key, humanSize(total)))
			_ = m.saveLocked(s)
		}
	}
}

// humanSize writes a byte count with a binary unit, e.g. 1.5 GiB.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit && exp < 4; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
