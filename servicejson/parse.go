package servicejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// entry is one key of the document resolved to a known field (or, with f
// nil, to an unknown key of an open section), with the spelling that gave it.
type entry struct {
	f        *field
	path     string // canonical path; for map keys and extras it includes the key
	mapKey   string
	raw      json.RawMessage
	spelling string // the JSON keys as written, joined by " > "
}

// Parse reads, validates and completes a service.json. On failure it returns
// a nil Service and an *Errors holding every problem found. Parse does no
// I/O and keeps no reference to data.
func Parse(data []byte) (*Service, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	errs := &Errors{}
	if !json.Valid(data) {
		errs.Problems = append(errs.Problems, syntaxProblem(data))
		return nil, errs
	}
	if k := jsonKind(data); k != "object" {
		errs.add("", "a service.json must be a JSON object, got %s; write {\"name\": ..., \"processor\": ..., \"metadata\": {...}}", show(data))
		return nil, errs
	}

	w := &walker{errs: errs}
	w.object("", data, "")

	s := &Service{Raw: slices.Clone(data), given: map[string]bool{}}
	s.applyDefaults()
	mentioned := w.apply(s)
	validate(s, mentioned, errs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseFile reads and parses the service.json at path. Every problem carries
// the file name, so the CLI can print them as they come.
func ParseFile(path string) (*Service, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read service.json: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		var errs *Errors
		if errors.As(err, &errs) {
			for _, p := range errs.Problems {
				p.File = path
			}
		}
		return nil, err
	}
	return s, nil
}

// syntaxProblem turns the standard library's syntax error, which knows only
// a byte offset, into one with a line and column an editor can jump to.
func syntaxProblem(data []byte) *FieldError {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		msg := "invalid JSON"
		if err != nil {
			msg = err.Error()
		}
		return &FieldError{Msg: msg + "; fix the JSON syntax"}
	}
	// Offset counts the bytes read, the offending one included; at the end
	// of the input there is no offending byte and the position is the end.
	pos := min(max(int(se.Offset)-1, 0), len(data))
	if strings.HasPrefix(se.Error(), "unexpected end") {
		pos = len(data)
	}
	line := 1 + bytes.Count(data[:pos], []byte("\n"))
	lineStart := bytes.LastIndexByte(data[:pos], '\n') + 1
	col := 1 + utf8.RuneCount(data[lineStart:pos])
	return &FieldError{Line: line, Column: col, Msg: se.Error() + "; fix the JSON syntax"}
}

type walker struct {
	errs    *Errors
	entries []entry
}

// members splits a JSON object into its members in document order, keeping
// duplicates (which a map would silently collapse).
func members(obj []byte) ([]string, []json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		keys = append(keys, key)
		vals = append(vals, v)
	}
	return keys, vals
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// object walks the members of the section at prefix.
func (w *walker) object(prefix string, obj []byte, spelling string) {
	keys, vals := members(obj)
	for i, k := range keys {
		w.member(prefix, k, vals[i], spelling+k)
	}
}

// member resolves one key, which may be dotted, relative to the section at
// prefix: "rpc.keepalive" under "metadata" is metadata.rpc.keepalive.
func (w *walker) member(prefix, key string, v json.RawMessage, spelling string) {
	if w.errs.full() {
		return
	}
	if jsonKind(v) == "null" {
		return // null means "not given", as tools that write every key do
	}
	full := join(prefix, key)
	segs := strings.Split(key, ".")
	cur := prefix
	for i, seg := range segs {
		path := join(cur, seg)
		if seg == "" {
			w.errs.add(full, "empty key segment; write keys as name or section.name without empty parts")
			return
		}
		if f := fieldIndex[path]; f != nil {
			switch {
			case i == len(segs)-1:
				w.leaf(f, v, spelling)
			case f.isMap():
				w.add(entry{f: f, path: path, mapKey: strings.Join(segs[i+1:], "."), raw: v, spelling: spelling})
			default:
				w.errs.add(full, "unknown key; %s is a single value and has no keys below it", path)
			}
			return
		}
		if namespaces[path] {
			cur = path
			continue
		}
		if openNamespaces[cur] {
			if _, near := closest(full, pathsUnder(cur)); !near {
				rest := strings.Join(segs[i:], ".")
				w.add(entry{path: join(cur, rest), mapKey: strings.TrimPrefix(join(cur, rest), "cloud."), raw: v, spelling: spelling})
				return
			}
		}
		w.unknown(full, cur)
		return
	}
	if jsonKind(v) != "object" {
		w.errs.add(cur, "must be an object, got %s; write \"%s\": {...}", show(v), segs[len(segs)-1])
		return
	}
	w.object(cur, v, spelling+" > ")
}

// leaf records a value for a known key; a map key given whole is split into
// one entry per member so that dotted and nested members merge.
func (w *walker) leaf(f *field, v json.RawMessage, spelling string) {
	if !f.isMap() {
		w.add(entry{f: f, path: f.path, raw: v, spelling: spelling})
		return
	}
	if jsonKind(v) != "object" {
		w.errs.add(f.path, "%s", f.withHint("must be an object, got "+show(v)))
		return
	}
	keys, vals := members(v)
	for i, k := range keys {
		if jsonKind(vals[i]) == "null" {
			continue
		}
		w.add(entry{f: f, path: f.path, mapKey: k, raw: vals[i], spelling: spelling + " > " + k})
	}
}

func (w *walker) add(e entry) { w.entries = append(w.entries, e) }

// suggest finds the known key a user most likely meant by full: a key of the
// same name in another section (keepalive -> metadata.rpc.keepalive), else
// the nearest path by edit distance.
func suggest(full string) (string, bool) {
	last := full[strings.LastIndexByte(full, '.')+1:]
	for _, p := range allPaths {
		if p != full && (p == last || strings.HasSuffix(p, "."+last)) {
			return p, true
		}
	}
	return closest(full, allPaths)
}

// pathsUnder lists the known paths inside section, sorted.
func pathsUnder(section string) []string {
	var out []string
	for _, p := range allPaths {
		if strings.HasPrefix(p, section+".") {
			out = append(out, p)
		}
	}
	return out
}

// unknown reports a key that is not in the table, with a suggestion or else
// the keys that are allowed in that section.
func (w *walker) unknown(full, section string) {
	for key, why := range unsupported {
		if full == key || strings.HasPrefix(full, key+".") {
			w.errs.add(key, "%s", why)
			return
		}
	}
	if s, ok := suggest(full); ok {
		w.errs.add(full, "unknown key; did you mean %s?", s)
		return
	}
	var here []string
	for _, p := range allPaths {
		rest, ok := strings.CutPrefix(p, join(section, ""))
		if section == "" {
			rest, ok = p, true
		}
		if ok && rest != "" && !strings.Contains(rest, ".") {
			here = append(here, rest)
		}
	}
	where := "top-level keys"
	if section != "" {
		where = "keys in " + section
	}
	w.errs.add(full, "unknown key; remove it or use one of the %s: %s", where, strings.Join(here, ", "))
}

// apply converts every entry and sets it on s, reporting bad values and keys
// given twice with different values (in one or in two spellings). It
// returns the paths the document mentions, valid or not, so that a required
// key with a bad value is not also reported as missing.
func (w *walker) apply(s *Service) map[string]bool {
	type first struct{ value, shown, spelling string }
	seen := map[string]first{}
	mentioned := map[string]bool{}
	for _, e := range w.entries {
		if w.errs.full() {
			break
		}
		mentioned[e.path] = true
		display := e.path
		var v any
		if e.f == nil {
			v = compactCopy(e.raw) // an unknown key of an open section, kept as given
		} else if e.f.isMap() {
			display = e.path + "." + e.mapKey
			if e.mapKey == "" {
				w.errs.add(e.path, "has an entry with an empty key; give every entry a name")
				continue
			}
			var p string
			if v, p = e.f.convertEntry(e.raw); p != "" {
				w.errs.add(display, "%s", p)
				continue
			}
		} else {
			var p string
			if v, p = e.f.convert(e.raw); p != "" {
				w.errs.add(display, "%s", p)
				continue
			}
		}
		norm := fmt.Sprintf("%#v", v)
		if raw, ok := v.(json.RawMessage); ok {
			norm = string(raw)
		}
		if prev, dup := seen[display]; dup {
			if prev.value != norm {
				w.errs.add(display, "given twice with different values, %s as %s and %s as %s; keep one of them",
					prev.shown, prev.spelling, show(e.raw), e.spelling)
			}
			continue
		}
		seen[display] = first{value: norm, shown: show(e.raw), spelling: e.spelling}
		if e.f == nil {
			if s.Cloud.Extra == nil {
				s.Cloud.Extra = map[string]json.RawMessage{}
			}
			s.Cloud.Extra[e.mapKey] = v.(json.RawMessage)
			continue
		}
		e.f.set(s, e.mapKey, v)
		s.given[e.f.path] = true
	}
	return mentioned
}

var (
	nameRule         = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	instanceTypeRule = regexp.MustCompile(`^[a-z][a-z0-9]*(\.[a-z0-9_-]+)+$`)
)

// maxNameLen is the longest service name: EAS's limit, and short enough to
// be a directory and a Kubernetes object name.
const maxNameLen = 64

// validate runs the checks that need more than one key, after every key has
// been read, so that they see the final values whatever the key order.
func validate(s *Service, mentioned map[string]bool, errs *Errors) {
	switch {
	case !mentioned["name"]:
		errs.add("name", `is required; add "name": "my_service" (lowercase letters, digits and underscores, starting with a letter)`)
	case !s.given["name"]:
		// A bad value was reported where it was read.
	case s.Name == "":
		errs.add("name", `must not be empty; use lowercase letters, digits and underscores, starting with a letter, e.g. "my_service"`)
	case len(s.Name) > maxNameLen:
		errs.add("name", "must be at most %d characters, got %d (%q)", maxNameLen, len(s.Name), s.Name)
	case !nameRule.MatchString(s.Name):
		errs.add("name", "must start with a letter and hold only lowercase letters, digits and underscores, got %q", s.Name)
	}
	if !mentioned["metadata.instance"] {
		errs.add("metadata.instance", `is required; add "metadata": {"instance": 1} (the number of replicas, 1 to 1000)`)
	}

	validateToken(s, errs)
	validateProcessor(s, mentioned, errs)
	for _, k := range []string{"model_path", "warm_up_data_path", "processor_path", "pre_process.processor_path", "post_process.processor_path"} {
		validateLocation(k, locationOf(s, k), errs)
	}
	validateHooks(s, mentioned, errs)
	if !s.IsAsync() {
		for p := range mentioned {
			if strings.HasPrefix(p, "queue.") {
				errs.add(p, `applies to asynchronous services only; add "metadata": {"type": "Async"} or remove the queue section`)
				break
			}
		}
	}
	if t := s.Cloud.InstanceType; s.given["cloud.computing.instance_type"] && !instanceTypeRule.MatchString(t) {
		errs.add("cloud.computing.instance_type", "must look like ecs.c6.xlarge or ecs.gn6i-c4g1.xlarge (lowercase, dotted), got %q", t)
	}
	validateAutoscaler(s, errs)
	validateRPC(s, errs)
}

// validateToken refuses a token that no request can present: clients'
// Authorization headers are trimmed of white space and cannot carry control
// characters. "" stays allowed: it means "generate one". The message never
// repeats the token.
func validateToken(s *Service, errs *Errors) {
	tok := s.Token.Reveal()
	switch {
	case tok == "":
	case strings.TrimSpace(tok) == "":
		errs.add("token", `must not be blank (white space only): no request can present it; remove "token" to have one generated, or set a printable token`)
	case strings.TrimSpace(tok) != tok:
		errs.add("token", "must not start or end with white space: the Authorization header is trimmed, so no request can present it; remove the spaces")
	case strings.ContainsFunc(tok, unicode.IsControl):
		errs.add("token", "must not hold control characters: an HTTP header cannot carry them; use printable characters only")
	}
}

func locationOf(s *Service, key string) string {
	switch key {
	case "model_path":
		return s.ModelPath
	case "warm_up_data_path":
		return s.WarmUpDataPath
	case "pre_process.processor_path":
		if s.PreProcess != nil {
			return s.PreProcess.Path
		}
		return ""
	case "post_process.processor_path":
		if s.PostProcess != nil {
			return s.PostProcess.Path
		}
		return ""
	}
	return s.ProcessorPath
}

// validateLocation checks that a path-like key uses a scheme the storage
// package can fetch: oss, http, https, file, or a plain local path.
func validateLocation(key, loc string, errs *Errors) {
	scheme, rest, ok := strings.Cut(loc, "://")
	if !ok {
		return
	}
	switch strings.ToLower(scheme) {
	case "oss":
		if bucket, _, _ := strings.Cut(rest, "/"); bucket == "" {
			errs.add(key, "%q names no bucket; write oss://bucket/path/to/model", loc)
		}
	case "http", "https", "file":
	default:
		errs.add(key, "unsupported scheme %q in %q; use oss://bucket/key, http(s)://host/path, file:///path or a local path", scheme, loc)
	}
}

// validateHooks checks pre_process and post_process: each needs a package
// and a type, and they wrap a built-in processor only.
func validateHooks(s *Service, mentioned map[string]bool, errs *Errors) {
	for _, h := range []struct {
		key  string
		hook *Hook
	}{{"pre_process", s.PreProcess}, {"post_process", s.PostProcess}} {
		if h.hook == nil {
			continue
		}
		if mentioned["processor_path"] {
			errs.add(h.key, "wraps a built-in processor; a custom processor (processor_path) does its own pre- and post-processing, so remove %s", h.key)
			continue
		}
		if !mentioned[h.key+".processor_path"] {
			errs.add(h.key+".processor_path", "is required; point it at the custom processor's package (a .so or .py file, or an archive holding it)")
		}
		if !mentioned[h.key+".processor_type"] {
			errs.add(h.key+".processor_type", "is required; set it to cpp or python")
		}
	}
}

// validateProcessor checks the processor code, the custom processor keys
// and the device rule of docs/service-json.md.
func validateProcessor(s *Service, mentioned map[string]bool, errs *Errors) {
	builtin, custom := mentioned["processor"], mentioned["processor_path"]
	switch {
	case builtin && custom:
		errs.add("processor", "set together with processor_path; use processor for a built-in code or processor_path (with processor_type) for a custom processor, not both")
		return
	case custom:
		if !mentioned["processor_type"] {
			errs.add("processor_type", "is required with processor_path; set it to cpp, java or python")
		}
		return
	case !builtin:
		errs.add("processor", "is required; set a built-in code such as %q, or processor_path and processor_type for a custom processor", "pmml")
		return
	case !s.given["processor"]:
		return // its bad value was reported where it was read
	}
	if mentioned["processor_type"] {
		errs.add("processor_type", "applies only to custom processors (processor_path); remove it or replace processor with processor_path")
	}
	code, err := ParseCode(s.Processor)
	if err != nil {
		errs.add("processor", "%v", err)
		return
	}
	s.Code = code
	gpuAsked := s.Metadata.GPU > 0 || s.Metadata.GPUMemory > 0
	switch {
	case code.IsGPU() && !gpuAsked && !IsGPUInstanceType(s.Cloud.InstanceType):
		fix := "set metadata.gpu >= 1 or a GPU cloud.computing.instance_type"
		if cpu := otherDevice(code.Raw); cpu != "" {
			fix = "set metadata.gpu >= 1 or use " + cpu
		}
		errs.add("processor", "%q needs a GPU but metadata.gpu is %d; %s", code.Raw, s.Metadata.GPU, fix)
	case code.IsCPU() && gpuAsked:
		key, n := "metadata.gpu", s.Metadata.GPU
		if n == 0 {
			key, n = "metadata.gpu_memory", s.Metadata.GPUMemory
		}
		var fix string
		switch gpu := otherDevice(code.Raw); {
		case gpu != "":
			fix = "set " + key + " to 0 or use " + gpu
		case len(gpuCodesOf(code.Family)) > 0:
			fix = fmt.Sprintf("%s has no GPU build of this version; set %s to 0 or use one of %s", code.Family, key, strings.Join(gpuCodesOf(code.Family), ", "))
		default:
			fix = fmt.Sprintf("%s has no GPU variant; set %s to 0", code.Family, key)
		}
		errs.add("processor", "%q runs on CPU only but %s is %d; %s", code.Raw, key, n, fix)
	}
}

// validateRPC checks the batching keys against each other.
func validateRPC(s *Service, errs *Errors) {
	r := &s.Metadata.RPC
	for i, n := range r.PreferredBatchSizes {
		if n > r.MaxBatchSize {
			errs.add("metadata.rpc.preferred_batch_sizes", "element %d is %d, above metadata.rpc.max_batch_size %d; drop it or raise max_batch_size", i, n, r.MaxBatchSize)
			break
		}
		if i > 0 && n <= r.PreferredBatchSizes[i-1] {
			errs.add("metadata.rpc.preferred_batch_sizes", "must be strictly ascending, got %v; sort them and drop repeats", r.PreferredBatchSizes)
			break
		}
	}
	for i, n := range r.Buckets {
		if i > 0 && n <= r.Buckets[i-1] {
			errs.add("metadata.rpc.buckets", "must be strictly ascending, got %v; sort them and drop repeats", r.Buckets)
			break
		}
	}
	switch {
	case r.Batcher == "bucket" && len(r.Buckets) == 0:
		errs.add("metadata.rpc.buckets", `is required with metadata.rpc.batcher "bucket"; give ascending sequence-length bounds such as [32, 64, 128]`)
	case r.Batcher != "bucket" && s.given["metadata.rpc.buckets"]:
		errs.add("metadata.rpc.buckets", "is used only by metadata.rpc.batcher \"bucket\", but batcher is %q; set batcher to bucket or remove buckets", r.Batcher)
	}
}
