package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
)

// FuzzVerify feeds arbitrary Authorization and signed-header values to
// Verify (the Date check off, so that signatures are reached). It must never panic, it must only fail with ErrUnauthorized, and a
// signature made with any key other than the token must never verify.
func FuzzVerify(f *testing.F) {
	f.Add("tok", "EAS kDaBQJju8wXrfFT5RWTtRivHupg=", "00c489acdf2361ef2d7a07b688c473a9", "application/octet-stream", "Mon, 30 Nov 2026 07:00:00 GMT", "demo", "", "", "other-key")
	f.Add("tok", "tok", "", "", "", "s", "/x", "a=1", "k")
	f.Add("tok", "Bearer tok", "", "", "", "s", "", "", "k")
	f.Add("tok", "EAS ", "", "", "", "s", "", "", "k")
	f.Add("tok", "EAS ====", "x", "y", "z", "s", "/p", "q", "k")
	f.Add("", "anything", "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, token, authz, md5, ct, date, service, extra, query, otherKey string) {
		h := http.Header{}
		h.Set("Authorization", authz)
		h.Set("Content-MD5", md5)
		h.Set("Content-Type", ct)
		h.Set("Date", date)
		req := Request{Method: "POST", Service: service, ExtraPath: extra, RawQuery: query, Header: h}
		err := verifyAnyDate(token, req)
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("error %v does not wrap ErrUnauthorized", err)
		}
		if token == "" {
			if err != nil {
				t.Fatalf("open service rejected a request: %v", err)
			}
			return
		}

		// A correct signature over this request under a different key must
		// not verify (HMAC keys shorter than the block size are zero-padded,
		// so a key with trailing NULs is the same key and is skipped).
		if sameHMACKey(otherKey, token) {
			return
		}
		m := hmac.New(sha1.New, []byte(otherKey))
		m.Write([]byte("POST\n" + md5 + "\n" + h.Get("Content-Type") + "\n" + h.Get("Date") + "\n" + req.Resource()))
		forged := h.Clone()
		forged.Set("Authorization", "EAS "+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		if authz := forged.Get("Authorization"); authz == token {
			return // the forged header happens to be the raw token itself
		}
		if err := verifyAnyDate(token, Request{Method: "POST", Service: service, ExtraPath: extra, RawQuery: query, Header: forged}); err == nil {
			t.Fatalf("signature under key %q verified for token %q", otherKey, token)
		}
	})
}

func sameHMACKey(a, b string) bool {
	trim := func(s string) string {
		for len(s) > 0 && s[len(s)-1] == 0 {
			s = s[:len(s)-1]
		}
		return s
	}
	if len(a) <= 64 && len(b) <= 64 {
		return trim(a) == trim(b)
	}
	return a == b
}
