package auth

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"
)

// signedAt builds the headers of a request that the Java SDK signs at when,
// over resource.
func signedAt(token, resource, date string, body []byte) http.Header {
	sum := md5.Sum(body)
	contentMD5 := hex.EncodeToString(sum[:])
	h := http.Header{}
	h.Set("Content-MD5", contentMD5)
	h.Set("Date", date)
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Authorization", "EAS "+sdkSign(token, "POST\n"+contentMD5+"\napplication/octet-stream\n"+date+"\n"+resource))
	return h
}

// Issue 14: any Date was accepted (2001, 2100), so a captured signed request
// could be replayed for ever.
func TestSignedDateOutsideWindowRefused(t *testing.T) {
	const token = "tok"
	now := time.Now()
	for _, tt := range []struct {
		name string
		date string
		ok   bool
	}{
		{"now", now.UTC().Format(http.TimeFormat), true},
		{"now, RFC1123 UTC", now.UTC().Format(time.RFC1123), true},
		{"ten minutes ago", now.Add(-10 * time.Minute).UTC().Format(http.TimeFormat), true},
		{"server local time labelled GMT", now.Format("Mon, 02 Jan 2006 15:04:05") + " GMT", true},
		{"2001", "Mon, 01 Jan 2001 00:00:00 GMT", false},
		{"2100", "Fri, 01 Jan 2100 00:00:00 GMT", false},
		// Any zone's wall clock passes (UTC-12:00..UTC+14:00); beyond, no
		// client's clock can be.
		{"an hour ago: a client in UTC-1", now.Add(-time.Hour).UTC().Format(http.TimeFormat), true},
		{"13 hours ago", now.Add(-13 * time.Hour).UTC().Format(http.TimeFormat), false},
		{"15 hours ahead", now.Add(15 * time.Hour).UTC().Format(http.TimeFormat), false},
		{"missing", "", false},
		{"unreadable", "yesterday", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", tt.date, []byte("x"))}
			err := Verify(token, req)
			if tt.ok && err != nil {
				t.Fatalf("Date %q: %v", tt.date, err)
			}
			if !tt.ok && !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Date %q: err = %v, want ErrUnauthorized", tt.date, err)
			}
		})
	}
}

// Issue 14: a signature over an empty resource passed for any service.
func TestSignedEmptyOrOtherResourceRefused(t *testing.T) {
	const token = "tok"
	date := time.Now().UTC().Format(http.TimeFormat)
	for _, res := range []string{"", "/", "/api/predict/other", "/api/predict/"} {
		req := Request{Method: "POST", Service: "s", Header: signedAt(token, res, date, []byte("x"))}
		if err := Verify(token, req); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("signed resource %q for /api/predict/s: err = %v, want ErrUnauthorized", res, err)
		}
	}
}

// The KServe doors sign the request path itself.
func TestSignedRequestPath(t *testing.T) {
	const token = "tok"
	date := time.Now().UTC().Format(http.TimeFormat)
	req := Request{Method: "POST", Service: "m", Path: "/v2/models/m/infer", Header: signedAt(token, "/v2/models/m/infer", date, []byte("x"))}
	if err := Verify(token, req); err != nil {
		t.Fatalf("signature over the request path: %v", err)
	}
	req.Path = "/v2/models/m/ready"
	if err := Verify(token, req); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("signature over another path: %v", err)
	}
}

// Issue 14: the same signature passed with another body; the server checks
// Content-MD5 against the body it read.
func TestSignedBodyMustMatchContentMD5(t *testing.T) {
	const token = "tok"
	date := time.Now().UTC().Format(http.TimeFormat)
	body := zeroMD5Body
	req := Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", date, body)}
	check, err := Options{}.Verify(token, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Body(body); err != nil {
		t.Fatalf("the signed body: %v", err)
	}
	if err := check.Body([]byte("another body")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("another body: err = %v, want ErrUnauthorized", err)
	}
	// Every MD5 spelling the SDKs send is accepted for the right body.
	sum := md5.Sum(body)
	for _, m := range []string{hex.EncodeToString(sum[:]), "c489acdf2361ef2d7a07b688c473a9", base64.StdEncoding.EncodeToString(sum[:])} {
		if err := (BodyCheck{signed: true, contentMD5: m}).Body(body); err != nil {
			t.Errorf("Content-MD5 %q: %v", m, err)
		}
	}
	// A signed request with a body but no Content-MD5 binds no body.
	if err := (BodyCheck{signed: true}).Body(body); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("no Content-MD5 with a body: err = %v", err)
	}
	if err := (BodyCheck{signed: true}).Body(nil); err != nil {
		t.Errorf("no Content-MD5 and no body: %v", err)
	}
	// Raw and Bearer tokens carry no body check.
	check, err = Options{}.Verify(token, Request{Method: "POST", Service: "s", Header: http.Header{"Authorization": {token}}})
	if err != nil || check.Body([]byte("anything")) != nil {
		t.Errorf("raw token: %v", err)
	}
}

func TestSignatureWindowOption(t *testing.T) {
	const token = "tok"
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	at := func(d time.Duration) Request {
		return Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", now.Add(d).Format(http.TimeFormat), nil)}
	}
	o := Options{SignatureWindow: time.Minute, Now: func() time.Time { return now }, Local: time.UTC}
	if _, err := o.Verify(token, at(50*time.Second)); err != nil {
		t.Errorf("within a 1m window: %v", err)
	}
	if _, err := o.Verify(token, at(-2*time.Minute)); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("outside a 1m window: %v", err)
	}
	// A client that stamps +08:00 local time labelled GMT: with only the
	// named zones, +08:00 must be named.
	o.OnlyClientZones = true
	if _, err := o.Verify(token, at(8*time.Hour)); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("+08:00 local time without the zone allowed: %v", err)
	}
	o.ClientZones = []time.Duration{8 * time.Hour}
	if _, err := o.Verify(token, at(8*time.Hour)); err != nil {
		t.Errorf("+08:00 local time with the zone allowed: %v", err)
	}
	o.ClientZones, o.OnlyClientZones = nil, false
	o.SignatureWindow = -1 // off
	if _, err := o.Verify(token, at(-1000*time.Hour)); err != nil {
		t.Errorf("window off: %v", err)
	}
}

// The Java SDK's setUrl mode signs the request path after the service; with
// none, that would be "", a resource that fits every service. It is refused.
func TestSignedURLModeWithoutPathRefused(t *testing.T) {
	const token = "tok"
	h := javaSDK{urlMode: true}.headers(token, "demo", "", "", zeroMD5Body, fixedTime)
	if err := verifyAnyDate(token, Request{Method: "POST", Service: "demo", Header: h}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("signature over an empty resource: err = %v, want ErrUnauthorized", err)
	}
}
