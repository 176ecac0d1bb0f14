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
