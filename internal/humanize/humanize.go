// Package humanize formats quantities for people: the server's events and
// logs and the CLI's tables share one spelling.
package humanize

import (
	"fmt"
	"strconv"
)

// Bytes writes a byte count with a binary unit, e.g. 1.5 GiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit && exp < 4; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// FirstN keeps the first n items of a list a message names, and says how
// many it leaves out as a last item ("and 3 more"), so that a long list
// does not drown the message. It does not change items.
func FirstN(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(append(make([]string, 0, n+1), items[:n]...), fmt.Sprintf("and %d more", len(items)-n))
}
