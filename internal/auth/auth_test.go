package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The SDK helpers below rebuild each SDK's header construction from its
// documented behaviour, with their own HMAC code, so that the tests do not
// check Verify against the package's own Sign.

func sdkSign(token, msg string) string {
	h := hmac.New(sha1.New, []byte(token))
	h.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// goSDKHeaders mirrors the Go SDK: lowercase hex MD5, local wall-clock time
// formatted with a literal "GMT", resource /api/predict/<service><path>.
func goSDKHeaders(token, service, path string, body []byte, now time.Time) http.Header {
	sum := md5.Sum(body)
	contentMD5 := hex.EncodeToString(sum[:])
	date := now.Format("Mon, 02 Jan 2006 15:04:05 GMT") // local time, wrong zone label on purpose
	ct := "application/octet-stream"
	msg := fmt.Sprintf("%s\n%s\n%s\n%s\n%s", "POST", contentMD5, ct, date, "/api/predict/"+service+path)
	h := http.Header{}
	h.Set("Content-MD5", contentMD5)
	h.Set("Date", date)
	h.Set("Content-Type", ct)
	h.Set("Authorization", "EAS "+sdkSign(token, msg))
	return h
}

// pythonSDKHeaders mirrors the Python SDK: hexdigest MD5, local time from
// datetime.now() with strftime('%a, %d %b %Y %H:%M:%S GMT'), resource without
// any extra path, and the message passed through str.strip().
func pythonSDKHeaders(token, service string, body []byte, now time.Time) http.Header {
	sum := md5.Sum(body)
	contentMD5 := hex.EncodeToString(sum[:])
	days := []string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	months := []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	date := fmt.Sprintf("%s, %02d %s %04d %02d:%02d:%02d GMT", days[now.Weekday()], now.Day(),
		months[now.Month()-1], now.Year(), now.Hour(), now.Minute(), now.Second())
	ct := "application/octet-stream"
	msg := strings.TrimSpace("POST\n" + contentMD5 + "\n" + ct + "\n" + date + "\n" + "/api/predict/" + service)
	h := http.Header{}
	h.Set("Content-MD5", contentMD5)
	h.Set("Date", date)
	h.Set("Content-Type", ct)
	h.Set("Authorization", "EAS "+sdkSign(token, msg))
	return h
}

// javaSDK mirrors the Java SDK's generateSignature in its variants.
type javaSDK struct {
	contentType   string // setContentType; the header always carries it
	signLiteralCT bool   // old versions sign "application/octet-stream" whatever the header says
	withQuery     bool   // newer versions append "?<query>" to the resource
	urlMode       bool   // setUrl: the resource is only the request path
}

func (j javaSDK) headers(token, model, requestPath, query string, body []byte, now time.Time) http.Header {
	sum := md5.Sum(body)
	contentMD5 := new(big.Int).SetBytes(sum[:]).Text(16) // BigInteger(1, d).toString(16): no leading zeros
	date := now.UTC().Format("Mon, 02 Jan 2006 15:04:05") + " GMT"
	ct := j.contentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	signedCT := ct
	if j.signLiteralCT {
		signedCT = "application/octet-stream"
	}
	resource := "/api/predict/" + model + requestPath
	if j.urlMode {
		resource = requestPath
	}
	if j.withQuery && query != "" {
		resource += "?" + query
	}
	msg := "POST" + "\n" + contentMD5 + "\n" + signedCT + "\n" + date + "\n" + resource
	h := http.Header{}
	h.Set("Content-MD5", contentMD5)
	h.Set("Date", date)
	h.Set("Content-Type", ct)
	h.Set("Authorization", "EAS "+sdkSign(token, msg))
	return h
}

var (
	cst       = time.FixedZone("CST", 8*3600)
	fixedTime = time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	// zeroMD5Body has an MD5 that starts with "00", so the Java SDK's hex
	// differs from the Go and Python SDKs' hex.
	zeroMD5Body = []byte(`[{"x":12}]`)
)

// verifyAnyDate verifies with the Date check off: the tests of the SDKs'
// header forms use fixed dates. replay_test.go tests the window.
func verifyAnyDate(token string, req Request) error {
	_, err := Options{SignatureWindow: -1}.Verify(token, req)
	return err
}

func TestZeroMD5BodyReallyStartsWithZero(t *testing.T) {
	sum := md5.Sum(zeroMD5Body)
	if got := hex.EncodeToString(sum[:]); got != "00c489acdf2361ef2d7a07b688c473a9" {
		t.Fatalf("md5 = %s; the Java leading-zero cases below rely on it", got)
	}
}

func TestVerifySDKs(t *testing.T) {
	const token = "MzM4ZTc5NDFmNmE1NDBkNWE1OGQxMmE1ZjJjN2Qz"
	tests := []struct {
		name      string
		method    string
		service   string
		extraPath string
		query     string
		header    http.Header
	}{
		{"go sdk", "POST", "demo", "", "", goSDKHeaders(token, "demo", "", zeroMD5Body, fixedTime.In(cst))},
		{"go sdk with request path", "POST", "demo", "/v1/models/m:predict", "", goSDKHeaders(token, "demo", "/v1/models/m:predict", []byte("{}"), fixedTime.In(cst))},
		{"go sdk empty body", "POST", "demo", "", "", goSDKHeaders(token, "demo", "", nil, fixedTime)},
		{"python sdk", "POST", "demo", "", "", pythonSDKHeaders(token, "demo", zeroMD5Body, fixedTime.In(cst))},
		{"python sdk single-digit day", "POST", "demo", "", "", pythonSDKHeaders(token, "demo", []byte("x"), time.Date(2026, 3, 5, 1, 2, 3, 0, cst))},
		{"java sdk", "POST", "demo", "", "", javaSDK{}.headers(token, "demo", "", "", zeroMD5Body, fixedTime)},
		{"java sdk request path and query", "POST", "demo", "/v2", "a=1&b=2", javaSDK{withQuery: true}.headers(token, "demo", "/v2", "a=1&b=2", zeroMD5Body, fixedTime)},
		{"java sdk query not signed", "POST", "demo", "/v2", "a=1", javaSDK{}.headers(token, "demo", "/v2", "a=1", zeroMD5Body, fixedTime)},
		{"java sdk custom content type", "POST", "demo", "", "", javaSDK{contentType: "application/json"}.headers(token, "demo", "", "", zeroMD5Body, fixedTime)},
		{"old java sdk signs literal content type", "POST", "demo", "", "", javaSDK{contentType: "application/json", signLiteralCT: true}.headers(token, "demo", "", "", zeroMD5Body, fixedTime)},
		{"java sdk url mode", "POST", "demo", "/v1/infer", "", javaSDK{urlMode: true}.headers(token, "demo", "/v1/infer", "", zeroMD5Body, fixedTime)},
		{"signed with POST but sent as PUT", "PUT", "demo", "", "", goSDKHeaders(token, "demo", "", zeroMD5Body, fixedTime)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Method: tt.method, Service: tt.service, ExtraPath: tt.extraPath, RawQuery: tt.query, Header: tt.header}
			if err := verifyAnyDate(token, req); err != nil {
				t.Fatalf("Verify: %v (headers %v)", err, tt.header)
			}
			// The same signature must fail for another token, another
			// service, and another Date.
			if err := verifyAnyDate(token+"x", req); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("wrong token: err = %v, want ErrUnauthorized", err)
			}
			other := req
			other.Service = "other"
			other.ExtraPath = "/elsewhere"
			if err := verifyAnyDate(token, other); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("other resource: err = %v, want ErrUnauthorized", err)
			}
			tampered := req
			tampered.Header = req.Header.Clone()
			tampered.Header.Set("Date", "Tue, 01 Dec 2026 00:00:00 GMT")
			if err := verifyAnyDate(token, tampered); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("tampered Date: err = %v, want ErrUnauthorized", err)
			}
		})
	}
}

// TestVerifyLiteralVectors uses signatures computed outside Go with
//
//	printf '%s' "$msg" | openssl dgst -sha1 -hmac "$token" -binary | base64
//
// so that a shared mistake in the HMAC code of the test and the package
// cannot hide.
func TestVerifyLiteralVectors(t *testing.T) {
	tests := []struct {
		name, token, sig, md5, ct, date, service, extra, query string
	}{
		{
			name: "go style, local time labelled GMT", token: "test-token-1", sig: "kDaBQJju8wXrfFT5RWTtRivHupg=",
			md5: "00c489acdf2361ef2d7a07b688c473a9", ct: "application/octet-stream",
			date: "Mon, 30 Nov 2026 07:00:00 GMT", service: "demo",
		},
		{
			name: "java style, md5 without leading zeros, query signed", token: "test-token-1", sig: "GTOE2NCnS0TxLhxhiYO0x07i5EU=",
			md5: "c489acdf2361ef2d7a07b688c473a9", ct: "application/json",
			date: "Sun, 29 Nov 2026 23:00:00 GMT", service: "demo", extra: "/v1/infer", query: "trace=1",
		},
		{
			name: "python style, empty body", token: "NWJlYTM0ZjE4YjY3OGQzOGE5YzE=", sig: "uO1XB6k6/pqqUU6O+vyFwWEqXcU=",
			md5: "d41d8cd98f00b204e9800998ecf8427e", ct: "application/octet-stream",
			date: "Mon, 30 Nov 2026 07:00:00 GMT", service: "echo",
		},
		{
			name: "java url mode, only the request path signed", token: "test-token-1", sig: "WVdTomuoFhwC5TsJhlJjKTHa6co=",
			md5: "c489acdf2361ef2d7a07b688c473a9", ct: "application/json",
			date: "Sun, 29 Nov 2026 23:00:00 GMT", service: "demo", extra: "/v1/infer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("Content-MD5", tt.md5)
			h.Set("Content-Type", tt.ct)
			h.Set("Date", tt.date)
			h.Set("Authorization", "EAS "+tt.sig)
			req := Request{Method: "POST", Service: tt.service, ExtraPath: tt.extra, RawQuery: tt.query, Header: h}
			if err := verifyAnyDate(tt.token, req); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if tt.query == "" && tt.extra == "" {
				if got := Sign(tt.token, "POST", tt.md5, tt.ct, tt.date, req.Resource()); got != tt.sig {
					t.Errorf("Sign = %s, want %s", got, tt.sig)
				}
			}
		})
	}
}

func TestVerifyRaw(t *testing.T) {
	const token = "abc123=="
	tests := []struct {
		name    string
		authz   []string // nil: no header
		wantErr bool
	}{
		{"raw", []string{token}, false},
		{"raw with spaces around", []string{"  " + token + " "}, false},
		{"bearer", []string{"Bearer " + token}, false},
		{"bearer lowercase", []string{"bearer " + token}, false},
		{"missing", nil, true},
		{"empty", []string{""}, true},
		{"wrong raw", []string{"abc124=="}, true},
		{"prefix of token", []string{"abc123"}, true},
		{"token plus suffix", []string{token + "x"}, true},
		{"wrong bearer", []string{"Bearer nope"}, true},
		{"eas with raw token", []string{"EAS " + token}, true},
		{"eas garbage", []string{"EAS !!!not-base64!!!"}, true},
		{"eas empty", []string{"EAS "}, true},
		{"eas right length wrong bytes", []string{"EAS " + base64.StdEncoding.EncodeToString(make([]byte, 20))}, true},
		{"basic scheme", []string{"Basic " + token}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.authz {
				h.Add("Authorization", v)
			}
			err := verifyAnyDate(token, Request{Method: "POST", Service: "s", Header: h})
			if tt.wantErr {
				if !errors.Is(err, ErrUnauthorized) {
					t.Fatalf("err = %v, want ErrUnauthorized", err)
				}
				if strings.Contains(err.Error(), token) {
					t.Fatalf("error %q leaks the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestVerifyTokenStartingWithEAS(t *testing.T) {
	const token = "EAS opensesame"
	h := http.Header{"Authorization": {token}}
	if err := verifyAnyDate(token, Request{Method: "POST", Service: "s", Header: h}); err != nil {
		t.Fatalf("raw token that looks like a signature: %v", err)
	}
}

func TestVerifyMissingSignedHeader(t *testing.T) {
	const token = "tok"
	// The signed Content-Type is not the default, because a missing header
	// may stand for the default that old Java SDKs always sign.
	full := javaSDK{contentType: "application/json"}.headers(token, "svc", "", "", []byte("body"), fixedTime)
	if err := verifyAnyDate(token, Request{Method: "POST", Service: "svc", Header: full}); err != nil {
		t.Fatalf("complete headers: %v", err)
	}
	for _, drop := range []string{"Content-MD5", "Date", "Content-Type"} {
		t.Run(drop, func(t *testing.T) {
			h := full.Clone()
			h.Del(drop)
			err := verifyAnyDate(token, Request{Method: "POST", Service: "svc", Header: h})
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("without %s: err = %v, want ErrUnauthorized", drop, err)
			}
		})
	}
}

func TestVerifyOpenService(t *testing.T) {
	for _, h := range []http.Header{{}, {"Authorization": {"anything"}}, {"Authorization": {"EAS garbage"}}} {
		if err := verifyAnyDate("", Request{Method: "POST", Service: "s", Header: h}); err != nil {
			t.Fatalf("empty token must accept %v: %v", h, err)
		}
	}
}

// TestVerifyOverHTTP sends SDK-style requests through a real net/http client
// and server, so that header canonicalisation and transport do not change
// what Verify sees.
func TestVerifyOverHTTP(t *testing.T) {
	const token = "server-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service, extra, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/api/predict/"), "/")
		if extra != "" {
			extra = "/" + extra
		}
		req := Request{Method: r.Method, Service: service, ExtraPath: extra, RawQuery: r.URL.RawQuery, Header: r.Header}
		if err := Verify(token, req); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	body := zeroMD5Body
	tests := []struct {
		name   string
		url    string
		header http.Header
		want   int
	}{
		{"go", "/api/predict/demo/extra", goSDKHeaders(token, "demo", "/extra", body, time.Now()), 200},
		{"python", "/api/predict/demo", pythonSDKHeaders(token, "demo", body, time.Now()), 200},
		{"java", "/api/predict/demo/p?q=1", javaSDK{withQuery: true}.headers(token, "demo", "/p", "q=1", body, time.Now()), 200},
		{"raw", "/api/predict/demo", http.Header{"Authorization": {token}}, 200},
		{"none", "/api/predict/demo", http.Header{}, 401},
		{"wrong", "/api/predict/demo", goSDKHeaders("other", "demo", "", body, time.Now()), 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+tt.url, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range tt.header {
				req.Header[k] = vs
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, msg, tt.want)
			}
		})
	}
}

func TestGenerateToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := GenerateToken()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(tok)
		if err != nil {
			t.Fatalf("token %q is not standard base64: %v", tok, err)
		}
		if len(raw) < 20 || len(raw) != TokenBytes {
			t.Fatalf("token decodes to %d bytes, want %d", len(raw), TokenBytes)
		}
		if len(tok) != 40 {
			t.Fatalf("token length %d, want 40", len(tok))
		}
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
}

func TestSecretRedacted(t *testing.T) {
	s := Secret("hunter2-token")
	for _, got := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %s %q %#v %+v", s, s, s, s, s),
		fmt.Sprintf("%v", struct{ T Secret }{s}),
	} {
		if strings.Contains(got, "hunter2") {
			t.Errorf("formatted secret leaks: %q", got)
		}
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	logger.Info("msg", "token", s)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("msg", "token", s)
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "[redacted]") {
		t.Errorf("log output %q", buf.String())
	}
	if string(s) != "hunter2-token" {
		t.Errorf("string conversion must give the real value")
	}
}

func BenchmarkVerifySigned(b *testing.B) {
	const token = "MzM4ZTc5NDFmNmE1NDBkNWE1OGQxMmE1ZjJjN2Qz"
	req := Request{Method: "POST", Service: "demo", ExtraPath: "/p", RawQuery: "q=1",
		Header: javaSDK{withQuery: true}.headers(token, "demo", "/p", "q=1", zeroMD5Body, fixedTime)}
	b.ReportAllocs()
	for b.Loop() {
		if err := verifyAnyDate(token, req); err != nil {
			b.Fatal(err)
		}
	}
}
