package humanize

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 160 << 20: "160.0 MiB", 3 << 40: "3.0 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFirstN(t *testing.T) {
	items := []string{"a", "b", "c", "d"}
	if got := FirstN(items, 4); len(got) != 4 || got[3] != "d" {
		t.Errorf("FirstN(4 items, 4) = %q", got)
	}
	got := FirstN(items, 2)
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "and 2 more" {
		t.Errorf("FirstN(4 items, 2) = %q", got)
	}
	if items[2] != "c" {
		t.Errorf("FirstN changed its input: %q", items)
	}
}
