package service

import (
	"fmt"
	"time"

	"github.com/eas-server/eas-server/internal/humanize"
)

// Progress is how far the download of the version being loaded has come:
// what Info carries while a load fetches model_path or warm_up_data_path,
// so that desc and the CLI can show bytes, rate, time left and retries.
type Progress struct {
	Version        int     // the version being loaded
	Key            string  // what is fetched: model_path, warm_up_data_path
	DoneBytes      int64   // bytes on disk so far
	TotalBytes     int64   // the download's size; -1 when unknown
	BytesPerSecond float64 // the recent rate; 0 until measured and right after a retry
	ETASeconds     float64 // seconds left at that rate; -1 when unknown
	Retries        int     // retries of this download so far
	Retry          int     // the latest retry's number in a row (as in "retry 2/5")
	MaxRetries     int     // the retries allowed in a row without progress
	LastError      string  // what the latest retry was after
	UpdateTime     time.Time

	sampled  time.Time // when DoneBytes was last measured for the rate
	sampleAt int64
}

// fetchReport returns the progress and retry callbacks
// (storage.FetchOptions.Progress and Retry) for one download of service
// name; key names what is fetched (model_path, warm_up_data_path). While an
// operation loads a version, the service's Message and Progress show how
// far the download is, so that desc and the CLI's progress say more than
// "loading"; the start and the end of the download, and each retry, are
// events. Only the events are written to disk, so the callbacks stay cheap.
func (m *Manager) fetchReport(name, key string) (progress func(done, total int64), retry func(n, max int, err error)) {
	started := false
	if s, ok := m.Get(name); ok {
		s.mu.Lock()
		s.progress = nil // a new download: no rate, retries or error from an earlier one
		s.mu.Unlock()
	}
	// locked runs fn on the service's progress for this download with mu
	// held, creating it at the first report; false when no load runs.
	locked := func(fn func(s *Service, p *Progress)) {
		s, ok := m.Get(name)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pending == 0 {
			return
		}
		p := s.progress
		if p == nil || p.Version != s.pending || p.Key != key {
			p = &Progress{Version: s.pending, Key: key, TotalBytes: -1, ETASeconds: -1}
			s.progress = p
		}
		fn(s, p)
		p.UpdateTime = time.Now().UTC()
		s.rec.Message = fmt.Sprintf("loading version %d: downloading %s", s.pending, p.describe())
		s.publishLocked()
	}
	progress = func(done, total int64) {
		locked(func(s *Service, p *Progress) {
			p.sample(time.Now(), done, total)
			what := p.bytes()
			switch {
			case !started:
				started = true
				s.eventLocked(EventNormal, "Downloading", fmt.Sprintf("version %d: downloading %s", s.pending, what))
				_ = m.saveLocked(s)
			case total >= 0 && done >= total:
				s.eventLocked(EventNormal, "Downloaded", fmt.Sprintf("version %d: downloaded %s (%s)", s.pending, key, humanize.Bytes(total)))
				_ = m.saveLocked(s)
			}
		})
	}
	retry = func(n, max int, err error) {
		locked(func(s *Service, p *Progress) {
			p.Retries++
			p.Retry, p.MaxRetries, p.LastError = n, max, err.Error()
			p.BytesPerSecond, p.ETASeconds, p.sampled = 0, -1, time.Time{}
			s.eventLocked(EventWarning, "DownloadRetry", fmt.Sprintf("version %d: %s at %s: retry %d/%d after: %s", s.pending, key, humanize.Bytes(p.DoneBytes), n, max, p.LastError))
			_ = m.saveLocked(s)
		})
	}
	return progress, retry
}

// sample records done and total at now and updates the rate, smoothed over
// the recent reports, and the time left.
func (p *Progress) sample(now time.Time, done, total int64) {
	if !p.sampled.IsZero() && done >= p.sampleAt {
		if dt := now.Sub(p.sampled).Seconds(); dt > 0.05 {
			rate := float64(done-p.sampleAt) / dt
			if p.BytesPerSecond > 0 {
				rate = 0.5*p.BytesPerSecond + 0.5*rate
			}
			p.BytesPerSecond = rate
			p.sampled, p.sampleAt = now, done
		}
	} else {
		// The first report, or one after a restart from fewer bytes.
		p.BytesPerSecond = 0
		p.sampled, p.sampleAt = now, done
	}
	p.DoneBytes, p.TotalBytes = done, total
	p.ETASeconds = -1
	if total >= done && p.BytesPerSecond > 0 {
		p.ETASeconds = float64(total-done) / p.BytesPerSecond
	}
}

// bytes says "model_path: 1.0 MiB of 4.0 MiB (25%)".
func (p *Progress) bytes() string {
	what := p.Key + ": " + humanize.Bytes(p.DoneBytes)
	if p.TotalBytes >= 0 {
		what += " of " + humanize.Bytes(p.TotalBytes)
		if p.TotalBytes > 0 {
			what += fmt.Sprintf(" (%d%%)", p.DoneBytes*100/p.TotalBytes)
		}
	}
	return what
}

// describe is the download's part of the Message: the bytes, the rate and
// time left when known, and the latest retry.
func (p *Progress) describe() string {
	what := p.bytes()
	if p.BytesPerSecond > 0 {
		what += ", " + humanize.Bytes(int64(p.BytesPerSecond)) + "/s"
		if p.ETASeconds >= 0 {
			what += fmt.Sprintf(", %s left", (time.Duration(p.ETASeconds) * time.Second).String())
		}
	}
	if p.Retries > 0 {
		what += fmt.Sprintf("; retry %d/%d after: %s", p.Retry, p.MaxRetries, p.LastError)
	}
	return what
}
