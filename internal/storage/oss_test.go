package storage

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/eas-server/eas-server/internal/wait"
)

const testBucket = "models"

var testCreds = &Credentials{AccessKeyID: "LTAItestkey", AccessKeySecret: "test-secret", Source: "test"}

// fakeOSS is gofakes3 on loopback behind a handler that counts requests
// and, when verify is on, checks the OSS v1 signature as OSS does.
type fakeOSS struct {
	endpoint string
	srv      *httptest.Server
	backend  *s3mem.Backend
	verify   bool

	mu   sync.Mutex
	reqs []string // "METHOD /path range"
	// failGet makes the given number of the next ranged GETs fail with a
	// dropped connection; failPart does it to uploads of part 3.
	failGet, failPart int
	// beforePartFail, when set, runs before a failPart failure is
	// answered (outside mu).
	beforePartFail func()
}

func newFakeOSS(t *testing.T) *fakeOSS {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog()))
	fo := &fakeOSS{backend: be}
	inner := faker.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fo.mu.Lock()
		fo.reqs = append(fo.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Range"))
		fail := fo.failGet > 0 && r.Method == http.MethodGet && r.Header.Get("Range") != ""
		var before func()
		if fail {
			fo.failGet--
		}
		if fo.failPart > 0 && r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "3" {
			fo.failPart--
			fail = true
			before = fo.beforePartFail
		}
		verify := fo.verify
		fo.mu.Unlock()
		if verify {
			if code, msg := checkOSSSignature(r, testCreds); code != "" {
				body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>test</RequestId></Error>`, code, msg)
				w.Header().Set("Content-Type", "application/xml")
				if r.Method == http.MethodHead {
					// Like OSS, answer a HEAD's error in a header.
					w.Header().Set("x-oss-err", base64.StdEncoding.EncodeToString([]byte(body)))
					w.WriteHeader(http.StatusForbidden)
					return
				}
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, body)
				return
			}
		}
		if fail {
			if before != nil {
				before()
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fo.srv = srv
	fo.endpoint = srv.URL // http://127.0.0.1:port: the SDK uses path-style for an IP
	return fo
}

func (fo *fakeOSS) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := fo.backend.PutObject(testBucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

func (fo *fakeOSS) requests(match func(string) bool) []string {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	var out []string
	for _, r := range fo.reqs {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// checkOSSSignature verifies an "OSS AccessKeyId:Signature" header (OSS
// signature version 1) against creds, returning OSS's error code on failure.
func checkOSSSignature(r *http.Request, creds *Credentials) (code, msg string) {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "OSS ")
	if !ok {
		return "AccessDenied", "anonymous access is forbidden"
	}
	id, sig, ok := strings.Cut(auth, ":")
	if !ok || id != creds.AccessKeyID {
		return "InvalidAccessKeyId", "the OSS access key id you provided does not exist"
	}
	var ossHeaders []string
	for k, v := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-oss-") {
			ossHeaders = append(ossHeaders, lk+":"+v[0]+"\n")
		}
	}
	sort.Strings(ossHeaders)
	resource, _ := url.PathUnescape(r.URL.EscapedPath())
	var sub []string
	for k, vs := range r.URL.Query() {
		switch k {
		case "uploads", "uploadId", "partNumber", "continuation-token", "acl":
			if vs[0] == "" {
				sub = append(sub, k)
			} else {
				sub = append(sub, k+"="+vs[0])
			}
		}
	}
	sort.Strings(sub)
	if len(sub) > 0 {
		resource += "?" + strings.Join(sub, "&")
	}
	toSign := r.Method + "\n" + r.Header.Get("Content-MD5") + "\n" + r.Header.Get("Content-Type") + "\n" +
		r.Header.Get("Date") + "\n" + strings.Join(ossHeaders, "") + resource
	h := hmac.New(sha1.New, []byte(creds.AccessKeySecret))
	h.Write([]byte(toSign))
	if base64.StdEncoding.EncodeToString(h.Sum(nil)) != sig {
		return "SignatureDoesNotMatch", "the request signature we calculated does not match the signature you provided"
	}
	return "", ""
}

func ossFetcher(dir string) *Fetcher {
	f := testFetcher(dir)
	f.Credentials = testCreds
	return f
}

func TestOSSObjectCachedAcrossRestart(t *testing.T) {
	fo := newFakeOSS(t)
	blob := randomBytes(40_000, 10)
	fo.put(t, "resnet/model.onnx", blob)
	cache := t.TempDir()
	u := "oss://" + testBucket + "/resnet/model.onnx"

	p, err := ossFetcher(cache).Fetch(t.Context(), u, FetchOptions{OSSEndpoint: fo.endpoint})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, blob) || filepath.Base(p) != "model.onnx" {
		t.Fatalf("fetched %s (%d bytes); want model.onnx with %d bytes", p, len(got), len(blob))
	}
	isGet := func(r string) bool { return strings.HasPrefix(r, "GET /models/resnet/model.onnx") }
	if n := len(fo.requests(isGet)); n != 1 {
		t.Fatalf("%d GETs for the first fetch; want 1", n)
	}
	// A restarted server (new Fetcher, same cache) only asks for the ETag.
	// The endpoint comes from the environment this time.
	t.Setenv(OSSEndpointEnv, strings.TrimPrefix(fo.endpoint, "http://"))
	t.Setenv(OSSEndpointEnv, fo.endpoint)
	again, err := ossFetcher(cache).Fetch(t.Context(), u, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again != p || len(fo.requests(isGet)) != 1 {
		t.Errorf("restart: %s with %d GETs; want %s with no second download", again, len(fo.requests(isGet)), p)
	}
	// With OSS out of reach, a restart serves the cached copy.
	fo.srv.Close()
	offline, err := ossFetcher(cache).Fetch(t.Context(), u, FetchOptions{})
	if err != nil || offline != p {
		t.Errorf("offline restart = %s, %v; want the cached %s", offline, err, p)
	}
}

func TestOSSLargeObjectParallelRangesResume(t *testing.T) {
	fo := newFakeOSS(t)
	blob := randomBytes(1_000_000, 11)
	fo.put(t, "big/model.bin", blob)
	fo.failGet = 2 // two of the ranged GETs die mid-way
	f := ossFetcher(t.TempDir())
	f.PartSize = 128 << 10
	var last [2]int64
	p, err := f.Fetch(t.Context(), "oss://"+testBucket+"/big/model.bin", FetchOptions{OSSEndpoint: fo.endpoint, SHA256: sha(blob), Progress: func(d, tot int64) { last = [2]int64{d, tot} }})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, blob) {
		t.Fatal("the reassembled object differs from the one stored")
	}
	ranged := fo.requests(func(r string) bool { return strings.HasPrefix(r, "GET /models/big/model.bin bytes=") })
	parts := (len(blob) + int(f.PartSize) - 1) / int(f.PartSize)
	// Every part once, plus the two that failed; the checkpoint keeps the
	// parts that finished before a failure from being fetched again.
	if len(ranged) > parts+2*f.Parallel || len(ranged) < parts+2 {
		t.Errorf("%d ranged GETs for %d parts with 2 failures: %q", len(ranged), parts, ranged)
	}
	if last != [2]int64{int64(len(blob)), int64(len(blob))} {
		t.Errorf("last progress %v; want %d of %d", last, len(blob), len(blob))
	}
}

func TestOSSPrefix(t *testing.T) {
	fo := newFakeOSS(t)
	fo.put(t, "bert/v1/model.onnx", []byte("onnx"))
	fo.put(t, "bert/v1/vocab/vocab.txt", []byte("a b c"))
	fo.put(t, "bert/v1/", nil) // a folder marker
	fo.put(t, "bert/v2/model.onnx", []byte("other version"))
	cache := t.TempDir()
	u := "oss://" + testBucket + "/bert/v1/"
	dir, err := ossFetcher(cache).Fetch(t.Context(), u, FetchOptions{OSSEndpoint: fo.endpoint})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	want := map[string]string{"model.onnx": "onnx", "vocab/vocab.txt": "a b c"}
	var got []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			if want[filepath.ToSlash(rel)] != string(b) {
				t.Errorf("%s = %q; want %q", rel, b, want[rel])
			}
			got = append(got, rel)
		}
		return nil
	})
	if len(got) != len(want) {
		t.Errorf("fetched %v; want %d files", got, len(want))
	}
	gets := func(r string) bool { return strings.HasPrefix(r, "GET /models/bert/v1/") }
	before := len(fo.requests(gets))
	again, err := ossFetcher(cache).Fetch(t.Context(), u, FetchOptions{OSSEndpoint: fo.endpoint})
	if err != nil || again != dir || len(fo.requests(gets)) != before {
		t.Errorf("restart: %s, %v, %d new GETs; want %s with no download", again, err, len(fo.requests(gets))-before, dir)
	}
}

func TestOSSArchiveUnpacked(t *testing.T) {
	fo := newFakeOSS(t)
	fo.put(t, "m/model.zip", makeZip(t, goodEntries))
	dir, err := ossFetcher(t.TempDir()).Fetch(t.Context(), "oss://"+testBucket+"/m/model.zip", FetchOptions{OSSEndpoint: fo.endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "model", "sub", "config.json")); err != nil || string(b) != `{"layers": 2}` {
		t.Errorf("unpacked config = %q, %v", b, err)
	}
}

func TestOSSErrors(t *testing.T) {
	fo := newFakeOSS(t)
	fo.put(t, "folder/model.onnx", []byte("m"))
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	tests := []struct {
		name, url, endpoint string
		creds               *Credentials
		is                  error
		retryable           bool
		want                string
	}{
		{"no key", "oss://models/missing.onnx", fo.endpoint, testCreds, ErrNotFound, false, `no object "missing.onnx" in bucket "models"`},
		{"no bucket", "oss://nobucket/m.onnx", fo.endpoint, testCreds, ErrNotFound, false, `bucket "nobucket" does not exist`},
		{"folder without slash", "oss://models/folder", fo.endpoint, testCreds, ErrNotFound, false, "use oss://models/folder/ (with the trailing slash)"},
		{"empty prefix", "oss://models/none/", fo.endpoint, testCreds, ErrNotFound, false, `no objects under prefix "none/"`},
		{"unreachable", "oss://models/m.onnx", dead.URL, testCreds, ErrUnreachable, true, "cannot reach OSS endpoint " + dead.URL},
		{"bad bucket", "oss://Bad_Bucket/m.onnx", fo.endpoint, testCreds, nil, false, "want 3 to 63 lowercase letters"},
		{"query", "oss://models/m.onnx?AccessKeySecret=s3cr3t", fo.endpoint, testCreds, nil, false, "take no query"},
		{"no endpoint", "oss://models/m.onnx", "", testCreds, nil, false, "no OSS endpoint for the server to fetch from: set oss_endpoint in service.json, or OSS_ENDPOINT in the environment of the eas-server serve process"},
	}
	t.Setenv(OSSEndpointEnv, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testFetcher(t.TempDir())
			f.Credentials = tc.creds
			_, err := f.Fetch(t.Context(), tc.url, FetchOptions{OSSEndpoint: tc.endpoint})
			var fe *FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("Fetch = %v; want a *FetchError", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) || fe.Retryable != tc.retryable || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fetch = %v (retryable %v); want %v, retryable %v, %q", err, fe.Retryable, tc.is, tc.retryable, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), testCreds.AccessKeySecret) {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

func TestOSSCredentialFailures(t *testing.T) {
	fo := newFakeOSS(t)
	fo.verify = true
	fo.put(t, "m.onnx", []byte("model"))
	tests := []struct {
		name  string
		creds *Credentials
		want  string
	}{
		{"right", testCreds, ""},
		{"unknown id", &Credentials{AccessKeyID: "LTAIother", AccessKeySecret: "test-secret", Source: "OSS_ACCESS_KEY_ID"}, "OSS does not know the access key id from OSS_ACCESS_KEY_ID"},
		{"wrong secret", &Credentials{AccessKeyID: testCreds.AccessKeyID, AccessKeySecret: "wrong-secret", Source: "/home/u/.alibabacloud/credentials.ini"}, "the access key secret from /home/u/.alibabacloud/credentials.ini is wrong"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testFetcher(t.TempDir())
			f.Credentials = tc.creds
			p, err := f.Fetch(t.Context(), "oss://"+testBucket+"/m.onnx", FetchOptions{OSSEndpoint: fo.endpoint})
			if tc.want == "" {
				if b, _ := os.ReadFile(p); err != nil || string(b) != "model" {
					t.Fatalf("Fetch with the right key = %v; want the model through the signature check", err)
				}
				return
			}
			var fe *FetchError
			if !errors.As(err, &fe) || !errors.Is(err, ErrAccessDenied) || fe.Retryable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch = %v; want a final ErrAccessDenied with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.creds.AccessKeySecret) {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
	if n := len(fo.requests(func(string) bool { return true })); n > 10 {
		t.Errorf("%d requests: access denied must not be retried", n)
	}
}

func TestUpload(t *testing.T) {
	fo := newFakeOSS(t)
	fo.verify = true
	dir := t.TempDir()
	small := filepath.Join(dir, "small.onnx")
	os.WriteFile(small, []byte("small model"), 0o644)
	big := filepath.Join(dir, "big.bin")
	bigBlob := randomBytes(700_000, 12)
	os.WriteFile(big, bigBlob, 0o644)
	tests := []struct {
		src, dst, want string
		data           []byte
	}{
		{small, "oss://models/up/", "oss://models/up/small.onnx", []byte("small model")},
		{small, "oss://models/up/renamed.onnx", "oss://models/up/renamed.onnx", []byte("small model")},
		{big, "oss://models", "oss://models/big.bin", bigBlob},
	}
	for _, tc := range tests {
		var last [2]int64
		got, err := Upload(t.Context(), tc.src, tc.dst, UploadOptions{Endpoint: fo.endpoint, Credentials: testCreds, PartSize: 100 << 10, CheckpointDir: t.TempDir(), Progress: func(d, tot int64) { last = [2]int64{d, tot} }})
		if err != nil || got != tc.want {
			t.Fatalf("Upload(%s, %s) = %s, %v; want %s", filepath.Base(tc.src), tc.dst, got, err, tc.want)
		}
		if last != [2]int64{int64(len(tc.data)), int64(len(tc.data))} {
			t.Errorf("upload progress ended at %v; want %d of %d", last, len(tc.data), len(tc.data))
		}
		p, err := ossFetcher(t.TempDir()).Fetch(t.Context(), got, FetchOptions{OSSEndpoint: fo.endpoint})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, tc.data) {
			t.Errorf("%s: fetched back %d bytes; want the %d uploaded", got, len(b), len(tc.data))
		}
	}
	if parts := fo.requests(func(r string) bool { return strings.HasPrefix(r, "PUT /models/big.bin") }); len(parts) != 7 {
		t.Errorf("big upload sent %d PUTs; want 7 parts of 100 KiB", len(parts))
	}
	// A part that fails is sent again; the parts already up are not. The
	// SDK records a part in its checkpoint only when its loop reads the
	// part's result, and may see the failure of part 3 first: the failure
	// is answered once parts 1 and 2 are recorded, so "already up" is
	// exact.
	fo.failPart = 1
	cpDir := t.TempDir()
	fo.mu.Lock()
	fo.beforePartFail = func() {
		if err := wait.Poll(30*time.Second, func() error { return checkpointHas(cpDir, 2) }); err != nil {
			t.Error(err)
		}
	}
	fo.mu.Unlock()
	got, err := Upload(t.Context(), big, "oss://models/again/", UploadOptions{Endpoint: fo.endpoint, Credentials: testCreds, PartSize: 100 << 10, Parallel: 1, CheckpointDir: cpDir, RetryBackoff: time.Millisecond})
	if err != nil || got != "oss://models/again/big.bin" {
		t.Fatalf("upload with a failing part = %s, %v", got, err)
	}
	if parts := fo.requests(func(r string) bool { return strings.HasPrefix(r, "PUT /models/again/big.bin") }); len(parts) != 8 {
		t.Errorf("resumed upload sent %d part PUTs; want 7 + the one retried", len(parts))
	}
	p, err := ossFetcher(t.TempDir()).Fetch(t.Context(), got, FetchOptions{OSSEndpoint: fo.endpoint})
	if b, _ := os.ReadFile(p); err != nil || !bytes.Equal(b, bigBlob) {
		t.Errorf("resumed upload fetched back: %d bytes, %v", len(b), err)
	}
	_, err = Upload(t.Context(), small, "oss://models/x/", UploadOptions{Endpoint: fo.endpoint, Credentials: &Credentials{AccessKeyID: "LTAIother", AccessKeySecret: "x", Source: "test"}})
	if !errors.Is(err, ErrAccessDenied) || !strings.Contains(err.Error(), "oss:PutObject") {
		t.Errorf("upload with an unknown key = %v; want access denied naming oss:PutObject", err)
	}
	_, err = Upload(t.Context(), dir, "oss://models/x/", UploadOptions{Endpoint: fo.endpoint, Credentials: testCreds})
	if err == nil || !strings.Contains(err.Error(), "is a directory; pack it first") {
		t.Errorf("upload of a directory = %v", err)
	}
}

func TestOSSEndpoint(t *testing.T) {
	t.Setenv(OSSEndpointEnv, "oss-cn-shanghai.aliyuncs.com")
	tests := []struct{ given, want, err string }{
		{"oss-cn-hangzhou.aliyuncs.com", "https://oss-cn-hangzhou.aliyuncs.com", ""},
		{"http://127.0.0.1:9000/", "http://127.0.0.1:9000", ""},
		{"", "https://oss-cn-shanghai.aliyuncs.com", ""},
		{"ftp://x", "", "want a host"},
	}
	for _, tc := range tests {
		got, err := OSSEndpoint(tc.given)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("OSSEndpoint(%q) = %q, %v; want %q, %q", tc.given, got, err, tc.want, tc.err)
		}
	}
}

// TestOSSSettingsSayWhose: the server fetches with its own environment and
// the CLI uploads with the shell's; a missing endpoint or key says which,
// so a user who exported keys in the CLI's shell learns the server does not
// see them.
func TestOSSSettingsSayWhose(t *testing.T) {
	home := t.TempDir()
	for _, k := range []string{"OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", CredentialsFileEnv} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", home)
	t.Setenv(OSSEndpointEnv, "")

	f := testFetcher(t.TempDir())
	_, err := f.Fetch(t.Context(), "oss://models/m.onnx", FetchOptions{OSSEndpoint: "oss-cn-hangzhou.aliyuncs.com"})
	for _, w := range []string{"fetch oss://models/m.onnx: the server: no OSS credentials", "eas-server serve process", "restart", "CLI's shell do not reach it"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("server fetch without keys: %v, want %q", err, w)
		}
	}

	src := filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(src, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Upload(t.Context(), src, "oss://models/m.onnx", UploadOptions{Endpoint: "oss-cn-hangzhou.aliyuncs.com"})
	if err == nil || !strings.Contains(err.Error(), "upload oss://models/m.onnx: this shell: no OSS credentials") || strings.Contains(err.Error(), "server") {
		t.Errorf("upload without keys: %v", err)
	}
	_, err = Upload(t.Context(), src, "oss://models/m.onnx", UploadOptions{Credentials: testCreds})
	if err == nil || !strings.Contains(err.Error(), "upload oss://models/m.onnx: no OSS endpoint to upload to: pass --endpoint or set OSS_ENDPOINT") || strings.Contains(err.Error(), "service.json") {
		t.Errorf("upload without an endpoint: %v", err)
	}
}

// checkpointHas says whether the multipart checkpoint in dir records at
// least n completed parts.
func checkpointHas(dir string, n int) error {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var cp struct{ Parts []struct{ IsCompleted bool } }
		if json.Unmarshal(b, &cp) != nil {
			continue // being written
		}
		done := 0
		for _, p := range cp.Parts {
			if p.IsCompleted {
				done++
			}
		}
		if done >= n {
			return nil
		}
		return fmt.Errorf("the checkpoint records %d completed parts; want %d", done, n)
	}
	return fmt.Errorf("no checkpoint in %s yet", dir)
}
