package frame

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var buf []byte
	in := []Frame{
		{Kind: Hello, Payload: []byte(`{"pid":1}`)},
		{Kind: Request, ID: 1<<63 + 5, Payload: []byte("body")},
		{Kind: Answer, ID: 7, Payload: AnswerPayload(404, []byte("nope"))},
		{Kind: Ready, Payload: []byte{}},
	}
	for _, f := range in {
		buf = Append(buf, f)
	}
	r := bytes.NewReader(buf)
	for i, want := range in {
		got, err := Read(r, 1<<20)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Kind != want.Kind || got.ID != want.ID || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, err := Read(r, 1<<20); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	st, body, err := ParseAnswer(in[2].Payload)
	if err != nil || st != 404 || string(body) != "nope" {
		t.Fatalf("ParseAnswer: %d %q %v", st, body, err)
	}
}

func TestReadRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"short length": {[]byte{0, 0, 0, 8, 'Q', 0, 0, 0, 0, 0, 0, 0, 0}, "shorter than a header"},
		"unknown kind": {[]byte{0, 0, 0, 9, 'Z', 0, 0, 0, 0, 0, 0, 0, 0}, "unknown kind"},
		"over the max": {[]byte{0, 0, 1, 9, 'Q', 0, 0, 0, 0, 0, 0, 0, 0}, "larger than the limit"},
		"cut payload":  {[]byte{0, 0, 0, 12, 'Q', 0, 0, 0, 0, 0, 0, 0, 0, 'a'}, "unexpected EOF"},
		"cut header":   {[]byte{0, 0, 0}, "unexpected EOF"},
		"huge length":  {[]byte{0xff, 0xff, 0xff, 0xff, 'Q', 0, 0, 0, 0, 0, 0, 0, 0}, "larger than the limit"},
	} {
		_, err := Read(bytes.NewReader(tc.b), 100)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	if _, err := Read(bytes.NewReader([]byte{0, 0, 1, 9, 'Q', 0, 0, 0, 0, 0, 0, 0, 0}), 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the max: %v is not ErrTooLarge", err)
	}
	for _, p := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 99}, {0, 0, 2, 88}, {0xff, 0, 0, 200}} {
		if _, _, err := ParseAnswer(p); err == nil {
			t.Errorf("ParseAnswer(%v) accepted", p)
		}
	}
}

// TestWriterCoalesces sends from many goroutines and reads every frame back
// whole: frames never interleave, whatever the grouping.
func TestWriterCoalesces(t *testing.T) {
	pr, pw := io.Pipe()
	w := NewWriter(pw)
	const senders, each = 8, 200
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := uint64(s*each + i)
				if err := w.Send(Request, id, []byte("part-"), bytes.Repeat([]byte{byte(s)}, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); pw.Close() }()
	seen := map[uint64]bool{}
	r := bufio.NewReader(pr)
	for {
		f, err := Read(r, 1<<20)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s, i := int(f.ID)/each, int(f.ID)%each
		want := append([]byte("part-"), bytes.Repeat([]byte{byte(s)}, i)...)
		if f.Kind != Request || !bytes.Equal(f.Payload, want) || seen[f.ID] {
			t.Fatalf("frame %d: kind %q payload %q (seen before: %v)", f.ID, f.Kind, f.Payload, seen[f.ID])
		}
		seen[f.ID] = true
	}
	if len(seen) != senders*each {
		t.Fatalf("read %d frames, want %d", len(seen), senders*each)
	}
}

// FuzzRead holds the reader to never panicking on any bytes, never
// returning a payload over its limit, and round-tripping what it accepts.
func FuzzRead(f *testing.F) {
	f.Add(Append(nil, Frame{Kind: Request, ID: 3, Payload: []byte("x")}))
	f.Add(Append(Append(nil, Frame{Kind: Hello, Payload: []byte(`{}`)}), Frame{Kind: Answer, ID: 1, Payload: AnswerPayload(200, nil)}))
	f.Add([]byte{0, 0, 0, 9, 'R', 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 'Q'})
	f.Fuzz(func(t *testing.T, b []byte) {
		const max = 4096
		r := bytes.NewReader(b)
		for {
			fr, err := Read(r, max)
			if err != nil {
				return
			}
			if len(fr.Payload) > max || !fr.Kind.Known() {
				t.Fatalf("accepted %+v", fr)
			}
			again, err := Read(bytes.NewReader(Append(nil, fr)), max)
			if err != nil || again.Kind != fr.Kind || again.ID != fr.ID || !bytes.Equal(again.Payload, fr.Payload) {
				t.Fatalf("round trip of %+v: %+v, %v", fr, again, err)
			}
			if fr.Kind == Answer {
				if st, body, err := ParseAnswer(fr.Payload); err == nil {
					if st < 100 || st > 599 || !bytes.Equal(AnswerPayload(st, body), fr.Payload) {
						t.Fatalf("answer %d %q does not round-trip", st, body)
					}
				}
			}
		}
	})
}
