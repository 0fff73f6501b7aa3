package settings

import (
	"testing"
	"time"
)

func TestParseReleaseAge(t *testing.T) {
	day := 24 * time.Hour
	for _, tt := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "7d", want: 7 * day},
		{in: "36h", want: 36 * time.Hour},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "365d", want: 365 * day},
		{in: "366d", bad: true},
		{in: "9000h", bad: true},
		{in: "-1h", bad: true},
		{in: "-1d", bad: true},
		{in: "1.5d", bad: true},
		{in: "d", bad: true},
		{in: "a week", bad: true},
	} {
		got, err := ParseReleaseAge(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseReleaseAge(%q) = %v, %v; want %v, bad %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// FuzzParseReleaseAge: any input gives an age within the bounds or an
// error that quotes at most 40 characters of it (each escaped in at most
// 10 bytes).
func FuzzParseReleaseAge(f *testing.F) {
	for _, s := range []string{"7d", "36h", "0", "99999999999999d", "1e9h", "-0d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseReleaseAge(s)
		if err != nil {
			if len(err.Error()) > 500 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if d < 0 || d > MaxReleaseAge {
			t.Errorf("ParseReleaseAge(%q) = %v, outside the bounds", s, d)
		}
	})
}
