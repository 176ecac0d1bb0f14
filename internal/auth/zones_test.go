package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, whatever the machine has
)

// sdkDate is the Date the Go and Python SDKs send from a client whose zone
// is off hours from UTC, at the instant at: its wall clock labelled GMT.
func sdkDate(at time.Time, off time.Duration) string {
	return at.UTC().Add(off).Format("Mon, 02 Jan 2006 15:04:05") + " GMT"
}

// Issue 31: a signed request from a client in UTC+8 got 401 from a server
// in UTC unless --signature-client-zones named +08:00. Every real zone
// passes by default, with the client's clock a few minutes off.
func TestSignedFromEveryZone(t *testing.T) {
	const token = "tok"
	now := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)
	shanghai, err := time.LoadLocation("Asia/Shanghai") // time/tzdata is linked in: never missing
	if err != nil {
		t.Fatal(err)
	}
	h := time.Hour
	for _, server := range []*time.Location{time.UTC, shanghai} {
		for _, tc := range []struct {
			off time.Duration
			ok  bool
		}{
			{-12 * h, true}, {-5 * h, true}, {-3*h - 30*time.Minute, true}, {0, true}, {5*h + 45*time.Minute, true},
			{8 * h, true}, {12*h + 45*time.Minute, true}, {14 * h, true},
			{-12*h - 20*time.Minute, false}, {14*h + 20*time.Minute, false}, {-13 * h, false}, {15 * h, false}, {-26 * h, false},
		} {
			for _, skew := range []time.Duration{-3 * time.Minute, 0, 3 * time.Minute} {
				name := fmt.Sprintf("server %s, client %v, clock %v off", server, tc.off, skew)
				o := Options{Now: func() time.Time { return now }, Local: server, Replay: NewReplayCache(0)}
				req := Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", sdkDate(now.Add(skew), tc.off), []byte("x"))}
				_, err := o.Verify(token, req)
				if tc.ok && err != nil {
					t.Errorf("%s: %v", name, err)
				}
				if !tc.ok && !errors.Is(err, ErrUnauthorized) {
					t.Errorf("%s: err = %v, want ErrUnauthorized", name, err)
				}
			}
		}
	}
	// A window narrower than half a quarter hour leaves gaps between
	// the zones: a clock 7 minutes off its zone is refused with 1 minute.
	o := Options{SignatureWindow: time.Minute, Now: func() time.Time { return now }, Local: time.UTC, Replay: NewReplayCache(0)}
	for off, ok := range map[time.Duration]bool{8 * h: true, 8*h + 7*time.Minute: false} {
		_, err := o.Verify(token, Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", sdkDate(now, off), nil)})
		if (err == nil) != ok {
			t.Errorf("1m window, Date %v ahead: %v", off, err)
		}
	}
}

// clock is a settable Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// A widened Date is good for a day, so the replay protection is the cache:
// a signature is good again only within the window of its first use,
// whatever zone its Date passes in.
func TestSignedReplayRefusedInEveryZone(t *testing.T) {
	const token = "tok"
	t0 := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)
	for _, off := range []time.Duration{8 * time.Hour, 0, -5 * time.Hour} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			c := &clock{t0}
			o := Options{Now: c.now, Local: time.UTC, Replay: NewReplayCache(0)}
			req := Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", sdkDate(t0, off), []byte("body"))}
			for _, d := range []time.Duration{0, time.Second, 10 * time.Minute} {
				// The same request again: concurrent copies, the SDK's
				// retry within the second.
				c.t = t0.Add(d)
				if _, err := o.Verify(token, req); err != nil {
					t.Fatalf("%v after its first use: %v", d, err)
				}
			}
			// Replayed later, its Date still passes (read in another zone),
			// but the signature has been used: refused.
			for _, d := range []time.Duration{16 * time.Minute, 3 * time.Hour, 8 * time.Hour, 19 * time.Hour} {
				c.t = t0.Add(d)
				_, err := o.Verify(token, req)
				if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "first used") && !strings.Contains(err.Error(), "any time zone") {
					t.Errorf("replayed %v later: err = %v, want a refusal", d, err)
				}
			}
			// The client's next request, signed afresh, passes.
			c.t = t0.Add(3 * time.Hour)
			fresh := Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", sdkDate(c.t, off), []byte("body"))}
			if _, err := o.Verify(token, fresh); err != nil {
				t.Errorf("a new signature 3h later: %v", err)
			}
		})
	}
	// A request from a client in UTC, replayed 8 hours later: its Date is
	// one a client in UTC-8 could send now. Only the cache tells.
	c := &clock{t0}
	o := Options{Now: c.now, Local: time.UTC, Replay: NewReplayCache(0)}
	req := Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", t0.Format(http.TimeFormat), nil)}
	if _, err := o.Verify(token, req); err != nil {
		t.Fatal(err)
	}
	c.t = t0.Add(8 * time.Hour)
	if _, err := o.Verify(token, req); err == nil || !strings.Contains(err.Error(), "first used 8h0m0s ago") {
		t.Errorf("a UTC request replayed as if from UTC-8: %v", err)
	}
}

// An altered request fails whatever its zone, and a signature that does
// not verify leaves no trace: the genuine request still passes.
func TestSignedAlteredRefused(t *testing.T) {
	const token = "tok"
	now := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)
	o := Options{Now: func() time.Time { return now }, Local: time.UTC, Replay: NewReplayCache(0)}
	date := sdkDate(now, 8*time.Hour)
	genuine := signedAt(token, "/api/predict/s", date, []byte("body"))
	for name, alter := range map[string]func(h http.Header) (Request, []byte){
		"another Date": func(h http.Header) (Request, []byte) {
			h.Set("Date", sdkDate(now.Add(time.Second), 8*time.Hour))
			return Request{Method: "POST", Service: "s", Header: h}, []byte("body")
		},
		"another service": func(h http.Header) (Request, []byte) {
			return Request{Method: "POST", Service: "other", Header: h}, []byte("body")
		},
		"another extra path": func(h http.Header) (Request, []byte) {
			return Request{Method: "POST", Service: "s", ExtraPath: "/x", Header: h}, []byte("body")
		},
		"another token": func(h http.Header) (Request, []byte) {
			h.Set("Authorization", "EAS "+sdkSign("not-the-token", "POST\n"+h.Get("Content-MD5")+"\napplication/octet-stream\n"+date+"\n/api/predict/s"))
			return Request{Method: "POST", Service: "s", Header: h}, []byte("body")
		},
	} {
		req, body := alter(genuine.Clone())
		check, err := o.Verify(token, req)
		if err == nil {
			err = check.Body(body)
		}
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: err = %v, want ErrUnauthorized", name, err)
		}
	}
	if o.Replay.Len() != 0 {
		t.Errorf("refused signatures were remembered: %d", o.Replay.Len())
	}
	// Another body: the signature verifies (it is the genuine one) and the
	// body check refuses it.
	check, err := o.Verify(token, Request{Method: "POST", Service: "s", Header: genuine})
	if err != nil || !errors.Is(check.Body([]byte("other body")), ErrUnauthorized) {
		t.Errorf("another body: %v", err)
	}
	check, err = o.Verify(token, Request{Method: "POST", Service: "s", Header: genuine})
	if err != nil || check.Body([]byte("body")) != nil {
		t.Errorf("the genuine request: %v", err)
	}
}

// With OnlyClientZones the old rule holds: only UTC, the server's zone and
// the named ones, and nothing is remembered.
func TestOnlyClientZones(t *testing.T) {
	const token = "tok"
	now := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)
	o := Options{Now: func() time.Time { return now }, Local: time.UTC, OnlyClientZones: true,
		ClientZones: []time.Duration{-5 * time.Hour}, Replay: NewReplayCache(0)}
	for off, ok := range map[time.Duration]bool{0: true, -5 * time.Hour: true, 8 * time.Hour: false} {
		_, err := o.Verify(token, Request{Method: "POST", Service: "s", Header: signedAt(token, "/api/predict/s", sdkDate(now, off), nil)})
		if (err == nil) != ok {
			t.Errorf("client in %v: %v", off, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--signature-client-zones") {
			t.Errorf("the refusal does not name the flag: %v", err)
		}
	}
	if o.Replay.Len() != 0 {
		t.Errorf("signatures remembered with OnlyClientZones: %d", o.Replay.Len())
	}
}

func TestReplayCacheBound(t *testing.T) {
	c := NewReplayCache(1024)
	now := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)
	for k := range uint64(1500) {
		if _, ok := c.use(k, now, now.Add(time.Hour), time.Minute); !ok {
			t.Fatalf("key %d refused at its first use", k)
		}
	}
	if c.Len() != 1024 || c.Evicted() != 1500-1024 {
		t.Errorf("len %d, evicted %d: want the bound, the oldest forgotten", c.Len(), c.Evicted())
	}
	if _, ok := c.use(1499, now.Add(2*time.Minute), now.Add(time.Hour), time.Minute); ok {
		t.Error("a held key passed after the window")
	}
	if _, ok := c.use(0, now.Add(2*time.Minute), now.Add(time.Hour), time.Minute); !ok {
		t.Error("a forgotten key is new again")
	}
	// Past their Dates' expiry, entries go without counting as evicted.
	c.use(99999, now.Add(2*time.Hour), now.Add(3*time.Hour), time.Minute)
	if c.Len() != 1 || c.Evicted() != 1500-1024+1 {
		t.Errorf("after expiry: len %d, evicted %d", c.Len(), c.Evicted())
	}
}
