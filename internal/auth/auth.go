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
// them, and four more checks stop a captured request from being replayed
// (docs/protocol.md "EAS signature"):
//
//   - Date must parse and lie within a window (15 minutes by default) of the
//     server's clock read in some time zone. The Go and Python SDKs stamp
//     their local wall-clock time with a "GMT" suffix, so a client in UTC+8
//     sends a Date 8 hours ahead of the server's UTC clock: every real
//     zone offset (UTC-12:00 to UTC+14:00, in quarter hours) is accepted.
//   - Because that makes a Date good for a day, each accepted signature is
//     remembered (ReplayCache) and is good again only within the window of
//     its first use: a replay later is refused, whatever the zone.
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
	"encoding/binary"
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
// default: a 15 minute window, any client zone, the package's shared
// replay cache, the server's local zone, time.Now.
type Options struct {
	// SignatureWindow bounds |Date - now| of a signed request, now read in
	// the client's zone; 0 means DefaultSignatureWindow, a negative value
	// turns the Date and replay checks off (any Date, even a missing one,
	// is accepted: the old behaviour).
	SignatureWindow time.Duration
	// ClientZones are UTC offsets whose wall clock a Date is read as when
	// OnlyClientZones is set (the server's own zone and UTC always are).
	ClientZones []time.Duration
	// OnlyClientZones refuses Dates stamped in any other zone than UTC,
	// the server's and ClientZones; by default every real zone offset
	// (UTC-12:00..UTC+14:00 in quarter hours) is accepted.
	OnlyClientZones bool
	// Replay remembers accepted signatures; nil means a cache shared by
	// the package, of DefaultReplayEntries.
	Replay *ReplayCache
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
		dc, err := o.checkDate(req.Header.Get("Date"))
		if err != nil {
			return BodyCheck{}, err
		}
		sig, ok := verifySigned(token, strings.TrimSpace(rest), req)
		if !ok {
			return BodyCheck{}, fmt.Errorf("%w: EAS signature does not match; check the token and that Content-MD5, Content-Type, Date and the path are sent as signed", ErrUnauthorized)
		}
		// Only a verified signature is remembered: nobody without the
		// token can fill the cache.
		if err := o.checkReplay(sig, dc); err != nil {
			return BodyCheck{}, err
		}
		return BodyCheck{signed: true, contentMD5: req.Header.Get("Content-MD5")}, nil
	default:
		return BodyCheck{}, fmt.Errorf("%w: wrong token in Authorization header", ErrUnauthorized)
	}
}

// dateLayouts are the Date forms accepted: RFC 1123 with any zone name
// (the SDKs write "GMT", Go's RFC1123 "UTC"), with a numeric zone, and the
// two older forms HTTP allows.
var dateLayouts = []string{time.RFC1123, time.RFC1123Z, time.RFC850, time.ANSIC}

// The real-world UTC offsets: from UTC-12:00 (Baker Island) to UTC+14:00
// (Kiribati), all multiples of a quarter hour (Nepal's +05:45, the
// Chatham Islands' +12:45).
const (
	zoneStep = 15 * time.Minute
	zoneMin  = -12 * time.Hour
	zoneMax  = 14 * time.Hour
)

// dateCheck is what checkDate learnt of an accepted Date, for checkReplay.
type dateCheck struct {
	on      bool          // false: the checks are off (a negative window)
	now     time.Time     // the server's clock
	expires time.Time     // when the Date stops passing the check
	window  time.Duration // the signature window
}

// checkDate accepts a Date within the window of now read as labelled, as
// the server's local wall clock, as the wall clock of a client zone, or
// (unless OnlyClientZones) as that of any real zone offset.
func (o Options) checkDate(date string) (dateCheck, error) {
	w := o.SignatureWindow
	if w < 0 {
		return dateCheck{}, nil
	}
	if w == 0 {
		w = DefaultSignatureWindow
	}
	date = strings.TrimSpace(date)
	if date == "" {
		return dateCheck{}, fmt.Errorf("%w: an EAS-signed request must send and sign a Date header", ErrUnauthorized)
	}
	var t time.Time
	var err error
	for _, l := range dateLayouts {
		if t, err = time.Parse(l, date); err == nil {
			break
		}
	}
	if err != nil {
		return dateCheck{}, fmt.Errorf("%w: the Date header %q is not an HTTP date such as %q", ErrUnauthorized, capString(date, 64), "Mon, 02 Jan 2006 15:04:05 GMT")
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
	skew := t.Sub(n) // a client in UTC+8 labelling local time GMT: about +8h
	// Expiry in the cache: the latest moment the Date can still pass.
	dc := dateCheck{on: true, now: n, window: w, expires: t.Add(-zoneMin + w)}
	_, off := n.In(loc).Zone()
	zones := append([]time.Duration{0, time.Duration(off) * time.Second}, o.ClientZones...)
	if o.OnlyClientZones {
		for _, z := range zones {
			if within(skew - z) {
				return dc, nil
			}
		}
		return dateCheck{}, fmt.Errorf("%w: the Date header is more than %s from the server's clock in UTC, the server's zone and --signature-client-zones; a signature is good only that long: sign each request with the current time and check the client's clock and zone (or the server's --signature-window, --signature-client-zones, --signature-any-zone)", ErrUnauthorized, w)
	}
	// The zone offset nearest the skew, within the real range.
	z := min(max(skew.Round(zoneStep), zoneMin), zoneMax)
	if within(skew - z) {
		return dc, nil
	}
	return dateCheck{}, fmt.Errorf("%w: the Date header is more than %s from the server's clock read in any time zone (UTC-12:00 to UTC+14:00); a signature is good only that long: sign each request with the current time and check the client's clock (or the server's --signature-window)", ErrUnauthorized, w)
}

// checkReplay refuses a signature first used more than the window ago.
// Every accepted signature is remembered, whichever zone its Date passed
// in: a request from a client in UTC, replayed 8 hours later, has a Date
// that a client in UTC+8 could have sent, so only its first use tells.
func (o Options) checkReplay(sig []byte, dc dateCheck) error {
	if !dc.on || o.OnlyClientZones {
		// Without the widened zones the Date alone bounds a replay to
		// the window, as it always did.
		return nil
	}
	c := o.Replay
	if c == nil {
		c = defaultReplay()
	}
	first, ok := c.use(binary.BigEndian.Uint64(sig), dc.now, dc.expires, dc.window)
	if !ok {
		return fmt.Errorf("%w: this EAS signature was first used %s ago, and a signed request is good only %s after its first use (a replayed request?): sign each request anew", ErrUnauthorized, dc.now.Sub(first).Round(time.Second), dc.window)
	}
	return nil
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
// could have built for req, and returns it decoded. sig is decoded once and
// compared as bytes in constant time, so a wrong signature takes the same
// time whichever byte differs.
func verifySigned(token, sig string, req Request) ([]byte, bool) {
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(got) != sha1.Size {
		return nil, false
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
	return got, ok == 1
}

// equal compares two strings in constant time for equal lengths. The length
// of the configured token is not secret enough to matter (generated tokens
// all have the same length), but the contents are.
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
