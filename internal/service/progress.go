package service

import (
	"fmt"

	"github.com/eas-server/eas-server/internal/humanize"
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
		what := key + ": " + humanize.Bytes(done)
		if total >= 0 {
			what += " of " + humanize.Bytes(total)
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
			s.eventLocked(EventNormal, "Downloaded", fmt.Sprintf("version %d: downloaded %s (%s)", s.pending, key, humanize.Bytes(total)))
			_ = m.saveLocked(s)
		}
	}
}
