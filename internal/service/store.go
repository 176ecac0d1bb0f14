package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/eas-server/eas-server/servicejson"
)

// The state dir keeps, per service:
//
//	services/<name>/state.json        the record: versions, status, events
//	services/<name>/versions/<N>.json each version's service.json as given
//	services/<name>/token             the effective token
//	services/<name>/queues.db         an asynchronous service's queues
//	cache/<name>/                     fetched models
//
// Every file is written atomically (writeFileAtomic). A version file is
// written before the state.json that names it, so a crash between the two
// leaves only an unreferenced file.
//
// Everything under services/ is the server's alone: directories 0700,
// files 0600 (secureStateDir tightens what an older server or a hand left
// looser). The cache is 0755/0644 and the state dir itself 0711 (entered,
// not listed), so that custom processors' workers running as a uid of
// their own reach their models (docs/custom-processors.md, Trust
// boundary).

const stateFile = "state.json"

// maxLoadAttempts is how many times restore loads a version whose earlier
// loads never finished (the server died during them) before it leaves the
// service Failed instead.
const maxLoadAttempts = 2

// validName matches the names servicejson accepts; anything else under
// services/ (such as a directory moved aside) is not a service.
var validName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// secureStateDir makes services/ and everything under it the owner's
// alone. Failures are logged: the server still runs.
func secureStateDir(dir string, log *slog.Logger) {
	root := filepath.Join(dir, "services")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm()&^want != 0 {
			return os.Chmod(p, info.Mode().Perm()&want)
		}
		return nil
	})
	if err != nil && log != nil {
		log.Warn("the state dir's services/ could not be made private to the server", "err", err)
	}
}

func (m *Manager) svcDir(name string) string {
	return filepath.Join(m.opt.StateDir, "services", name)
}

func (m *Manager) tokenPath(name string) string { return filepath.Join(m.svcDir(name), "token") }

func (m *Manager) versionPath(name string, v int) string {
	return filepath.Join(m.svcDir(name), "versions", strconv.Itoa(v)+".json")
}

func (m *Manager) persistent() bool { return m.opt.StateDir != "" }

// saveLocked writes the service's record; s.mu is held. A failed write is
// logged and returned: the service keeps running from memory.
func (m *Manager) saveLocked(s *Service) error {
	if !m.persistent() || s.deleted {
		return nil
	}
	b, err := json.MarshalIndent(&s.rec, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(m.svcDir(s.Name), stateFile), b, 0o600); err != nil {
		m.log.Error("saving service state", "service", s.Name, "err", err)
		return fmt.Errorf("save state of %s: %w", s.Name, err)
	}
	return nil
}

// saveToken writes the effective token; it is called before a token change
// takes effect.
func (m *Manager) saveToken(name, token string) error {
	if !m.persistent() {
		return nil
	}
	if err := writeFileAtomic(m.tokenPath(name), []byte(token), 0o600); err != nil {
		return fmt.Errorf("save token of %s: %w", name, err)
	}
	return nil
}

// register adds a service for spec, or returns the existing one
// (created=false). A new service is returned with its operation lock held,
// its token resolved and version 1 stored.
func (m *Manager) register(spec *servicejson.Service) (svc *Service, created bool, err error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, false, ErrShuttingDown
	}
	if old, ok := m.services[spec.Name]; ok {
		m.mu.Unlock()
		old.mu.Lock()
		deleting := old.deleted
		old.mu.Unlock()
		if deleting {
			return nil, false, fmt.Errorf("service %q is being deleted: %w; retry when it is gone", spec.Name, ErrBusy)
		}
		return old, false, nil
	}
	now := time.Now().UTC()
	svc = &Service{mgr: m, Name: spec.Name, configs: map[int][]byte{1: spec.Raw}, spec: spec, pending: 1, since: now, busy: true}
	svc.rec = record{
		Name: spec.Name, CreateTime: now, UpdateTime: now,
		CurrentVersion: 1, LatestVersion: 1, Status: Creating,
		Versions: []versionRecord{{Version: 1, CreateTime: now}},
	}
	svc.op.Lock()
	m.services[spec.Name] = svc
	m.mu.Unlock()

	fail := func(err error) (*Service, bool, error) {
		m.mu.Lock()
		delete(m.services, spec.Name)
		m.mu.Unlock()
		svc.op.Unlock()
		return nil, false, err
	}
	log := m.log.With("service", spec.Name)
	if svc.token, err = m.initialToken(spec, log); err != nil {
		return fail(err)
	}
	if m.persistent() {
		// A directory left by a service deleted while the server was down
		// (or never fully created) must not leak old versions into this one.
		_ = os.RemoveAll(filepath.Join(m.svcDir(spec.Name), "versions"))
		if err := writeFileAtomic(m.versionPath(spec.Name, 1), spec.Raw, 0o600); err != nil {
			return fail(fmt.Errorf("store version 1: %w", err))
		}
		if err := m.saveToken(spec.Name, svc.token); err != nil {
			return fail(err)
		}
	}
	svc.mu.Lock()
	svc.publishLocked()
	svc.eventLocked(EventNormal, "Created", "service created with version 1")
	if msg := svc.noEffectEventLocked(1, spec); msg != "" {
		log.Warn(msg)
	}
	err = m.saveLocked(svc)
	svc.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	return svc, true, nil
}

// addVersion stores spec as the service's next version and returns its
// number. The operation lock is held.
func (m *Manager) addVersion(s *Service, spec *servicejson.Service) (int, error) {
	s.mu.Lock()
	v := s.rec.LatestVersion + 1
	s.mu.Unlock()
	if m.persistent() {
		if err := writeFileAtomic(m.versionPath(s.Name, v), spec.Raw, 0o600); err != nil {
			return 0, fmt.Errorf("store version %d: %w", v, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configs[v] = spec.Raw
	s.rec.LatestVersion = v
	s.rec.Versions = append(s.rec.Versions, versionRecord{Version: v, CreateTime: time.Now().UTC()})
	s.versionEventLocked(v, EventNormal, "VersionCreated", fmt.Sprintf("version %d stored", v))
	if msg := s.noEffectEventLocked(v, spec); msg != "" {
		m.log.Warn(msg, "service", s.Name)
	}
	if err := m.saveLocked(s); err != nil {
		return 0, err
	}
	return v, nil
}

// Restore brings back every service of the state dir: a stopped one stays
// stopped, the others load their current version in the background (wait
// with Deploy or watch their status). A service whose state.json cannot be
// read is reported, moved aside to services/<name>.corrupt-<unix time> and
// skipped; one whose current version cannot be read is listed as Failed
// with the reason, so that it can be fixed with an update or deleted. No
// problem is fatal: the errors are only reported.
func (m *Manager) Restore() (restored int, problems []error) {
	if !m.persistent() {
		return 0, nil
	}
	root := filepath.Join(m.opt.StateDir, "services")
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, []error{fmt.Errorf("restore: %w", err)}
	}
	for _, e := range entries {
		if !e.IsDir() || !validName.MatchString(e.Name()) {
			continue
		}
		svc, err := m.restoreOne(e.Name())
		if err != nil {
			aside := filepath.Join(root, fmt.Sprintf("%s.corrupt-%d", e.Name(), time.Now().Unix()))
			if rerr := os.Rename(filepath.Join(root, e.Name()), aside); rerr == nil {
				err = fmt.Errorf("%w; moved aside to %s", err, aside)
			}
			m.log.Error("service not restored", "service", e.Name(), "err", err)
			problems = append(problems, err)
			continue
		}
		if svc == nil {
			continue
		}
		m.mu.Lock()
		if _, dup := m.services[svc.Name]; dup || m.closed {
			m.mu.Unlock()
			svc.op.Unlock()
			continue
		}
		m.services[svc.Name] = svc
		m.mu.Unlock()
		restored++

		svc.mu.Lock()
		load, spec, v := svc.rec.Status == Creating, svc.spec, svc.rec.CurrentVersion
		svc.mu.Unlock()
		if !load || spec == nil {
			m.leave(svc)
			continue
		}
		if err := m.async(svc, func(ctx context.Context) { _ = m.activate(ctx, svc, v, spec) }); err != nil {
			break
		}
	}
	return restored, problems
}

// notLoadedAtStart begins the message of a service restored Failed. A
// message that begins so is kept as it is at the next restore, so it does
// not wrap itself again at every restart.
const notLoadedAtStart = "not loaded at start: "

// restoreOne reads one service directory. It returns nil, nil for a
// directory without state.json (a token kept for a service deployed before
// this layout, or a create cut short by a crash): such a directory is no
// service. The returned service holds its operation lock.
func (m *Manager) restoreOne(name string) (*Service, error) {
	path := filepath.Join(m.svcDir(name), stateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("restore %s: %w", name, err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("restore %s: %s is not valid JSON: %w", name, path, err)
	}
	switch {
	case rec.Name != name:
		return nil, fmt.Errorf("restore %s: %s names service %q", name, path, rec.Name)
	case rec.CurrentVersion < 1 || rec.CurrentVersion > rec.LatestVersion:
		return nil, fmt.Errorf("restore %s: %s: current version %d is not between 1 and the latest version %d", name, path, rec.CurrentVersion, rec.LatestVersion)
	}
	svc := &Service{mgr: m, Name: name, rec: rec, configs: map[int][]byte{}, since: time.Now(), busy: true}
	log := m.log.With("service", name)
	for _, v := range rec.Versions {
		raw, err := os.ReadFile(m.versionPath(name, v.Version))
		if err != nil {
			log.Warn("version not restored", "version", v.Version, "err", err)
			continue
		}
		svc.configs[v.Version] = raw
	}
	var problem error
	if raw, ok := svc.configs[rec.CurrentVersion]; !ok {
		problem = fmt.Errorf("version %d: %s cannot be read", rec.CurrentVersion, m.versionPath(name, rec.CurrentVersion))
	} else if spec, err := servicejson.Parse(raw); err != nil {
		problem = fmt.Errorf("version %d: %s: %w", rec.CurrentVersion, m.versionPath(name, rec.CurrentVersion), err)
	} else if spec.Name != name {
		problem = fmt.Errorf("version %d: %s names service %q", rec.CurrentVersion, m.versionPath(name, rec.CurrentVersion), spec.Name)
	} else {
		svc.spec = spec
	}

	// The token file holds the effective token. A config that gives a token
	// wins over it: a crash between writing a new token and switching the
	// version leaves the file ahead of the current version.
	if tb, err := os.ReadFile(m.tokenPath(name)); err == nil {
		svc.token = string(tb)
	}
	if svc.spec != nil && !svc.spec.Token.IsZero() && svc.token != svc.spec.Token.Reveal() {
		svc.token = svc.spec.Token.Reveal()
		if err := m.saveToken(name, svc.token); err != nil {
			log.Warn("token not saved", "err", err)
		}
	}
	if svc.token == "" && svc.spec != nil {
		tok, err := m.initialToken(svc.spec, log)
		if err != nil {
			problem = errors.Join(problem, err)
		}
		svc.token = tok
		log.Warn("the token file was missing; a new token was generated (desc shows it)")
	}

	svc.op.Lock()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	switch {
	case problem != nil:
		svc.setStatusLocked(Failed, "restore: "+problem.Error()+"; update the service with a valid service.json or delete it", "RestoreFailed")
		svc.eventLocked(EventWarning, "RestoreFailed", svc.rec.Message)
	case rec.Stopped:
		svc.setStatusLocked(Stopped, "", "")
		svc.eventLocked(EventNormal, "Restored", fmt.Sprintf("restored at version %d, stopped", rec.CurrentVersion))
	case rec.Status == Failed && !rec.Retryable:
		// Loading it again would fail again, or worse (a model that
		// exhausted memory): it waits for start or modify.
		msg := rec.Message
		if !strings.HasPrefix(msg, notLoadedAtStart) { // restored Failed before: the message says so already
			msg = fmt.Sprintf(notLoadedAtStart+"the last load of version %d failed: %s; fix it with modify, or start it to try again", rec.CurrentVersion, msg)
		}
		svc.setStatusLocked(Failed, msg, "LoadFailed")
		svc.eventLocked(EventWarning, "Restored", svc.rec.Message)
	case rec.LoadAttempts >= maxLoadAttempts:
		svc.setStatusLocked(Failed, fmt.Sprintf(notLoadedAtStart+"the server stopped %d times while loading version %d (a model that exhausts memory or hangs?); fix it with modify, or start it to try again", rec.LoadAttempts, rec.CurrentVersion), "LoadInterrupted")
		svc.eventLocked(EventWarning, "Restored", svc.rec.Message)
	default:
		svc.rec.LoadAttempts++ // counted on disk before the load starts
		svc.setStatusLocked(Creating, fmt.Sprintf("loading version %d", rec.CurrentVersion), "")
		svc.pending = rec.CurrentVersion
		svc.eventLocked(EventNormal, "Restored", fmt.Sprintf("restored at version %d; loading", rec.CurrentVersion))
	}
	_ = m.saveLocked(svc)
	return svc, nil
}
