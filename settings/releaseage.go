package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxReleaseAge bounds a minimum release age.
const MaxReleaseAge = 365 * 24 * time.Hour

// ParseReleaseAge reads a minimum release age: a duration ("36h", "90m")
// or a number of days ("7d"), from 0 (none) to a year; "" is none.
func ParseReleaseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		var n int
		if n, err = strconv.Atoi(days); err == nil {
			d = time.Duration(n) * 24 * time.Hour
		}
	}
	if err != nil || d < 0 || d > MaxReleaseAge {
		return 0, fmt.Errorf("%.40q is not an age from 0 to 365d (\"7d\", \"36h\")", s)
	}
	return d, nil
}
