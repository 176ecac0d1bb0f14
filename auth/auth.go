// Package auth checks the per-service tokens of the data plane and keeps the
// admin token of the control plane.
//
// EAS clients authenticate in two ways, and both must keep working against
// eas-server unchanged:
//
//   - Raw: "Authorization: <token>" (curl examples, queue clients, the
//     high-level PAI SDK). "Authorization: Bearer <token>" is accepted as well
//     because OpenAI-compatible clients send the token that way.
//   - Signed: "Authorization: EAS <signature>" (the Go, Python and Java
//     prediction SDKs), where signature is
//     base64(HMAC-SHA1(key=token, msg=verb+"\n"+Content-MD5+"\n"+Content-Type+"\n"+Date+"\n"+resource)).
//
// The signature is checked over the header values exactly as the client sent
// them. The MD5 is not recomputed and the Date is not checked against the
// clock, because the SDKs disagree with the standards they imitate: the Java
// SDK's hex MD5 drops leading zeros, and the Go and Python SDKs stamp local
// time with a "GMT" suffix. Recomputing either would reject real clients.
//
// All functions are safe for concurrent use.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// ErrUnauthorized reports a missing or wrong token; the server maps it to 401.
var ErrUnauthorized = errors.New("unauthorized")

// TokenBytes is the number of random bytes in a generated token. EAS itself
// shows base64 of 20 random bytes (28 characters); 30 bytes give 240 bits and
// a 40-character token with no '=' padding, which is easier to paste into
// shells and headers.
const TokenBytes = 30

// GenerateToken returns a new service or admin token: TokenBytes bytes from
// crypto/rand in standard base64.
func GenerateToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Secret is a token that must never appear in logs or error messages. Its
// String, GoString and LogValue methods return "[redacted]"; convert it to a
// string explicitly where the real value is needed. JSON encoding is left
// alone on purpose: the state dir persists tokens as JSON.
type Secret string

const redacted = "[redacted]"

// String returns "[redacted]" so that fmt verbs such as %s and %v hide the token.
func (Secret) String() string { return redacted }

// GoString returns "[redacted]" so that %#v hides the token.
func (Secret) GoString() string { return redacted }

// LogValue returns "[redacted]" so that slog never writes the token.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

var (
	_ fmt.Stringer   = Secret("")
	_ fmt.GoStringer = Secret("")
	_ slog.LogValuer = Secret("")
)

// Request is what Verify needs from one data-plane call. Header values are
// used exactly as received.
type Request struct {
	Method    string      // HTTP method as received, e.g. "POST"
	Service   string      // service name from /api/predict/<service>
	ExtraPath string      // path after /api/predict/<service>: "" or starting with "/"
	RawQuery  string      // query string without the '?', as received
	Header    http.Header // request headers
}

// Resource returns the canonical resource the SDKs sign:
// /api/predict/<service><extra path>, without the query.
func (r Request) Resource() string {
	return "/api/predict/" + r.Service + r.ExtraPath
}

// StringToSign builds the message that the EAS SDKs sign. It is exported for
// clients (tests, the CLI) that need to produce signed requests.
func StringToSign(method, contentMD5, contentType, date, resource string) string {
	return method + "\n" + contentMD5 + "\n" + contentType + "\n" + date + "\n" + resource
}

// Sign returns base64(HMAC-SHA1(key=token, msg)) where msg is built by
// StringToSign; the Authorization header value is "EAS " followed by it.
func Sign(token, method, contentMD5, contentType, date, resource string) string {
	return base64.StdEncoding.EncodeToString(mac(token, StringToSign(method, contentMD5, contentType, date, resource)))
}

func mac(token, msg string) []byte {
	h := hmac.New(sha1.New, []byte(token))
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// defaultContentType is what the SDKs sign; old Java SDK versions sign it even
// when the request's Content-Type header was changed with setContentType.
const defaultContentType = "application/octet-stream"

// Verify checks the Authorization header of req against token. An empty token
// means the service is open and every request passes. Otherwise it returns an
// error wrapping ErrUnauthorized when the header is missing, malformed or
// does not match; the message never contains the token or the expected
// signature.
//
// A signed request is accepted when its signature matches any message the
// known SDKs build for this request:
//   - verb "POST" (what every SDK signs) or the actual method;
//   - Content-Type as received or "application/octet-stream";
//   - resource /api/predict/<service><extra path>, with or without
//     "?<query>" (the Java SDK appends it), or the extra path alone (the Java
//     SDK's setUrl mode signs only its request path).
//
// All comparisons take constant time in the token and signature values.
func Verify(token string, req Request) error {
	if token == "" {
		return nil
	}
	authz := strings.TrimSpace(req.Header.Get("Authorization"))
	if authz == "" {
		return fmt.Errorf(`%w: missing Authorization header; send "Authorization: <token>" or an EAS signature`, ErrUnauthorized)
	}
	// The raw form is checked first so that a configured token that happens
	// to start with "EAS " still works as a raw token.
	if equal(authz, token) {
		return nil
	}
	scheme, rest, hasScheme := strings.Cut(authz, " ")
	switch {
	case hasScheme && strings.EqualFold(scheme, "Bearer"):
		if equal(strings.TrimSpace(rest), token) {
			return nil
		}
		return fmt.Errorf("%w: wrong token in Authorization header", ErrUnauthorized)
	case hasScheme && strings.EqualFold(scheme, "EAS"):
		if verifySigned(token, strings.TrimSpace(rest), req) {
			return nil
		}
		return fmt.Errorf("%w: EAS signature does not match; check the token and that Content-MD5, Content-Type and Date are sent unchanged", ErrUnauthorized)
	default:
		return fmt.Errorf("%w: wrong token in Authorization header", ErrUnauthorized)
	}
}

// verifySigned reports whether sig is the signature of any message the SDKs
// could have built for req. sig is decoded once and compared as bytes with
// hmac.Equal, so a wrong signature takes the same time whichever byte differs.
func verifySigned(token, sig string, req Request) bool {
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(got) != sha1.Size {
		return false
	}
	h := req.Header
	md5, date := h.Get("Content-MD5"), h.Get("Date")

	methods := []string{"POST"}
	if req.Method != "" && req.Method != "POST" {
		methods = append(methods, req.Method)
	}
	contentTypes := []string{h.Get("Content-Type")}
	if contentTypes[0] != defaultContentType {
		contentTypes = append(contentTypes, defaultContentType)
	}
	full := req.Resource()
	resources := []string{full}
	if req.RawQuery != "" {
		resources = append(resources, full+"?"+req.RawQuery)
	}
	resources = append(resources, req.ExtraPath)
	if req.RawQuery != "" {
		resources = append(resources, req.ExtraPath+"?"+req.RawQuery)
	}

	ok := 0
	for _, m := range methods {
		for _, ct := range contentTypes {
			for _, res := range resources {
				// Every candidate is computed and compared (no early return)
				// so timing does not tell which candidate matched.
				ok |= subtle.ConstantTimeCompare(got, mac(token, StringToSign(m, md5, ct, date, res)))
			}
		}
	}
	return ok == 1
}

// equal compares two strings in constant time for equal lengths. The length
// of the configured token is not secret enough to matter (generated tokens
// all have the same length), but the contents are.
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
