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
// them, and three more checks stop a captured request from being replayed
// (docs/protocol.md "EAS signature"):
//
//   - Date must parse and lie within a window of the server's clock (15
//     minutes by default). The Go and Python SDKs stamp local time with a
//     "GMT" suffix, so the Date is also read as the server's own local wall
//     clock, and as that of the client zones the operator names.
//   - The signed resource must be the request's: /api/predict/<service> and
//     its extra path, or the request path itself; never empty.
//   - Content-MD5 must be the MD5 of the body actually received. The server
//     reads the body after the headers are admitted, so Verify returns a
//     BodyCheck that the caller runs on the body. The MD5 is accepted as
//     base64, as hex, and as hex without leading zeros (the Java SDK's).
//
// All functions are safe for concurrent use.
package auth

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
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
	// Path is the request's URL path as received. A signature over it is
	// accepted: the KServe doors (/v2/models/...) are signed that way.
	// "" for callers that only serve /api/predict.
	Path string
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

// DefaultSignatureWindow is how far the Date of a signed request may lie
// from the server's clock, either way, when Options.SignatureWindow is 0.
const DefaultSignatureWindow = 15 * time.Minute

// Options tunes the checks of signed requests. The zero value is the
// default: a 15 minute window, the server's local zone, time.Now.
type Options struct {
	// SignatureWindow bounds |Date - now| of a signed request; 0 means
	// DefaultSignatureWindow, a negative value turns the Date check off
	// (any Date, even a missing one, is accepted: the old behaviour).
	SignatureWindow time.Duration
	// ClientZones are the UTC offsets of clients whose SDK stamps local
	// time with a "GMT" label (the Go and Python SDKs); their Dates are
	// read as that zone's wall clock too. The server's own zone (Local) is
	// always read that way.
	ClientZones []time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Local is the server's zone; nil means time.Local.
	Local *time.Location
}

// BodyCheck is what Verify leaves to do once the body is read: a signed
// request binds its body through Content-MD5. The zero value (raw and Bearer
// tokens, open services) accepts any body.
type BodyCheck struct {
	signed     bool
	contentMD5 string
}

// Body returns an error wrapping ErrUnauthorized unless body is the one
// the request signed: its MD5 must equal the signed Content-MD5 (base64,
// hex, or hex without leading zeros). A signed request with a non-empty
// body must send Content-MD5; the SDKs always do. body is the body as
// received, before any decompression.
func (b BodyCheck) Body(body []byte) error {
	if !b.signed {
		return nil
	}
	if b.contentMD5 == "" {
		if len(body) == 0 {
			return nil
		}
		return fmt.Errorf("%w: an EAS-signed request with a body must send and sign Content-MD5, the MD5 of the body", ErrUnauthorized)
	}
	sum := md5.Sum(body)
	hx := hex.EncodeToString(sum[:])
	got := strings.TrimSpace(b.contentMD5)
	if got == base64.StdEncoding.EncodeToString(sum[:]) || strings.EqualFold(got, hx) || strings.EqualFold(got, strings.TrimLeft(hx, "0")) {
		return nil
	}
	return fmt.Errorf("%w: the body does not match the signed Content-MD5; a signature covers one body only", ErrUnauthorized)
}

// Verify checks req against token with the default Options. It does not
// check the body: a caller that reads one uses Options.Verify and runs the
// BodyCheck on it.
func Verify(token string, req Request) error {
	_, err := Options{}.Verify(token, req)
	return err
}

// Verify checks the Authorization header of req against token. An empty
// token means the service is open and every request passes. Otherwise it
// returns an error wrapping ErrUnauthorized when the header is missing,
// malformed or does not match, or a signed request's Date is missing or
// outside the window; the message never contains the token or the
// expected signature. On success the BodyCheck must be run on the body the
// request carries.
//
// A signed request is accepted when its signature matches any message the
// known SDKs build for this request:
//   - verb "POST" (what every SDK signs) or the actual method;
//   - Content-Type as received or "application/octet-stream";
//   - resource /api/predict/<service><extra path>, the request path
//     (req.Path), or the extra path alone when it is not empty (the Java
//     SDK's setUrl mode signs only its request path), each with or without
//     "?<query>" (the Java SDK appends it).
//
// All comparisons take constant time in the token and signature values.
func (o Options) Verify(token string, req Request) (BodyCheck, error) {
	if token == "" {
		return BodyCheck{}, nil
	}
	authz := strings.TrimSpace(req.Header.Get("Authorization"))
	if authz == "" {
		return BodyCheck{}, fmt.Errorf(`%w: missing Authorization header; send "Authorization: <token>" or an EAS signature`, ErrUnauthorized)
	}
	// The raw form is checked first so that a configured token that happens
	// to start with "EAS " still works as a raw token.
	if equal(authz, token) {
		return BodyCheck{}, nil
	}
	scheme, rest, hasScheme := strings.Cut(authz, " ")
	switch {
	case hasScheme && strings.EqualFold(scheme, "Bearer"):
		if equal(strings.TrimSpace(rest), token) {
			return BodyCheck{}, nil
		}
		return BodyCheck{}, fmt.Errorf("%w: wrong token in Authorization header", ErrUnauthorized)
	case hasScheme && strings.EqualFold(scheme, "EAS"):
		// The Date is checked first: it is cheap, and a stale replay
		// costs no HMAC.
		if err := o.checkDate(req.Header.Get("Date")); err != nil {
			return BodyCheck{}, err
		}
		if verifySigned(token, strings.TrimSpace(rest), req) {
			return BodyCheck{signed: true, contentMD5: req.Header.Get("Content-MD5")}, nil
		}
		return BodyCheck{}, fmt.Errorf("%w: EAS signature does not match; check the token and that Content-MD5, Content-Type, Date and the path are sent as signed", ErrUnauthorized)
	default:
		return BodyCheck{}, fmt.Errorf("%w: wrong token in Authorization header", ErrUnauthorized)
	}
}

// dateLayouts are the Date forms accepted: RFC 1123 with any zone name
// (the SDKs write "GMT", Go's RFC1123 "UTC"), with a numeric zone, and the
// two older forms HTTP allows.
var dateLayouts = []string{time.RFC1123, time.RFC1123Z, time.RFC850, time.ANSIC}

// checkDate accepts a Date within the window of now, read as labelled, as
// the server's local wall clock, or as the wall clock of a client zone.
func (o Options) checkDate(date string) error {
	w := o.SignatureWindow
	if w < 0 {
		return nil
	}
	if w == 0 {
		w = DefaultSignatureWindow
	}
	date = strings.TrimSpace(date)
	if date == "" {
		return fmt.Errorf("%w: an EAS-signed request must send and sign a Date header", ErrUnauthorized)
	}
	var t time.Time
	var err error
	for _, l := range dateLayouts {
		if t, err = time.Parse(l, date); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: the Date header %q is not an HTTP date such as %q", ErrUnauthorized, capString(date, 64), "Mon, 02 Jan 2006 15:04:05 GMT")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	loc := time.Local
	if o.Local != nil {
		loc = o.Local
	}
	n := now()
	within := func(d time.Duration) bool { return d <= w && d >= -w }
	if within(t.Sub(n)) {
		return nil
	}
	// Local time labelled GMT: compare the wall clocks.
	_, off := n.In(loc).Zone()
	if within(t.Sub(n) - time.Duration(off)*time.Second) {
		return nil
	}
	for _, z := range o.ClientZones {
		if within(t.Sub(n) - z) {
			return nil
		}
	}
	return fmt.Errorf("%w: the Date header is more than %s from the server's clock; a signature is good only that long: sign each request with the current time and check the client's clock (or the server's --signature-window and --signature-client-zones)", ErrUnauthorized, w)
}

func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// resources lists the resources a signature of req may cover; never "".
func (r Request) resources() []string {
	full := r.Resource()
	base := []string{full}
	if r.Path != "" && r.Path != full {
		base = append(base, r.Path)
	}
	if r.ExtraPath != "" {
		base = append(base, r.ExtraPath)
	}
	if r.RawQuery == "" {
		return base
	}
	out := base
	for _, b := range base {
		out = append(out, b+"?"+r.RawQuery)
	}
	return out
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
	resources := req.resources()

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
