package window

import (
	"strings"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestOpenAndNext(t *testing.T) {
	tests := []struct {
		name    string
		windows string
		at      string
		open    bool
		next    string // "" when open, or none within a year
	}{
		{name: "no windows: always open", windows: "", at: "2026-12-05T03:00:00Z", open: true},
		// 09:00 to 17:00 in Berlin (UTC+1 in December), Monday to Friday.
		{name: "inside the allow window", windows: "allow 0 9 * * 1-5 8h Europe/Berlin", at: "2026-12-02T10:00:00Z", open: true},
		{name: "before it opens", windows: "allow 0 9 * * 1-5 8h Europe/Berlin", at: "2026-12-02T07:30:00Z", next: "2026-12-02T08:00:01Z"},
		{name: "after it closed, on a Friday: Monday", windows: "allow 0 9 * * 1-5 8h Europe/Berlin", at: "2026-12-04T16:30:00Z", next: "2026-12-07T08:00:01Z"},
		{name: "a deny window wins", windows: "allow 0 0 * * * 24h; deny 0 12 * * * 2h", at: "2026-12-02T13:00:00Z", next: "2026-12-02T14:00:01Z"},
		{name: "outside the deny window", windows: "deny 0 12 * * * 2h", at: "2026-12-02T15:00:00Z", open: true},
		{name: "the holidays denied, in UTC", windows: "deny 0 0 24 12 * 72h", at: "2026-12-25T10:00:00Z", next: "2026-12-27T00:00:01Z"},
		{name: "daylight saving time: 9:00 in Berlin is 07:00 UTC in July", windows: "allow 0 9 * * * 1h Europe/Berlin", at: "2026-07-01T07:30:00Z", open: true},
		{name: "a deny window every day all day: no opening", windows: "deny 0 0 * * * 24h", at: "2026-12-02T00:00:30Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Parse(tt.windows)
			if err != nil {
				t.Fatal(err)
			}
			now := at(tt.at)
			if got := set.Open(now); got != tt.open {
				t.Errorf("Open(%s) = %v, want %v", tt.at, got, tt.open)
			}
			next := set.Next(now)
			switch {
			case tt.next == "" && !next.IsZero():
				t.Errorf("Next(%s) = %s, want none", tt.at, next)
			case tt.next != "" && !next.Equal(at(tt.next)):
				t.Errorf("Next(%s) = %s, want %s", tt.at, next.UTC().Format(time.RFC3339), tt.next)
			}
			if !next.IsZero() && (!set.Open(next) || set.Open(next.Add(-2*time.Second))) {
				t.Errorf("Next(%s) = %s is not where the set opens", tt.at, next)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"allow 0 9 * * 1-5", "want <allow|deny> <5 cron fields> <duration>"},
		{"maybe 0 9 * * * 1h", `kind "maybe" is not allow or deny`},
		{"allow 0 25 * * * 1h", `schedule "0 25 * * *"`},
		{"allow @daily 1h", "want <allow|deny>"},
		{"allow 0 9 * * * forever", `duration "forever"`},
		{"allow 0 9 * * * -1h", `duration "-1h"`},
		{"allow 0 9 * * * 1h Mars/Olympus", `time zone "Mars/Olympus"`},
		{"allow 0 9 * * * 1h Local", `time zone "Local"`},
		{"allow 0 0 30 2 * 1h", `schedule "0 0 30 2 *" never comes`},
		{strings.Repeat("deny 0 0 * * * 1h;", MaxWindows+1), "more than 20 windows"},
	} {
		if _, err := Parse(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%.40q): %v, want an error with %q", tt.in, err, tt.want)
		}
	}
}

// FuzzParse: any text gives windows whose Open and Next hold together,
// or an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"allow 0 9 * * 1-5 8h Europe/Berlin", "deny */5 * * * * 1m; allow 0 0 1 1 * 1h UTC", "deny 0 0 * * * 24h"} {
		f.Add(s)
	}
	now := at("2026-12-02T10:00:00Z")
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		if next := set.Next(now); !next.IsZero() && (!next.After(now) || !set.Open(next)) {
			t.Errorf("%q: Next %s is not an opening after now", s, next)
		}
		_ = set.String()
	})
}
