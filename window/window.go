// Package window is update windows: when an Application's new versions
// may be written, as Argo CD's sync windows say when it may sync. A window
// opens at each time of its cron schedule, in its time zone, and stays
// open for its duration. Deny windows win over allow windows; with allow
// windows, writes wait outside them.
package window

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Kinds of windows.
const (
	Allow = "allow"
	Deny  = "deny"
)

// MaxWindows bounds the windows of one Application.
const MaxWindows = 20

// Window is one allow or deny window.
type Window struct {
	Kind     string
	Schedule string
	Duration time.Duration
	TimeZone string

	schedule cron.Schedule
	loc      *time.Location
}

// parser reads a schedule as Argo CD reads a sync window's: five fields,
// no descriptors, no seconds.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// New checks a window's fields: kind allow or deny, a five-field cron
// schedule, a positive duration ("1h", at most a year) and an IANA time
// zone ("" is UTC).
func New(kind, schedule, duration, timeZone string) (Window, error) {
	w := Window{Kind: strings.ToLower(kind), Schedule: schedule, TimeZone: timeZone}
	if w.Kind != Allow && w.Kind != Deny {
		return Window{}, fmt.Errorf("kind %.20q is not allow or deny", kind)
	}
	var err error
	if w.schedule, err = parser.Parse(schedule); err != nil {
		return Window{}, fmt.Errorf("schedule %.80q: %w", schedule, err)
	}
	if w.schedule.Next(time.Now()).IsZero() {
		// Argo CD reads such a window as always active.
		return Window{}, fmt.Errorf("schedule %.80q never comes (a day that no month has)", schedule)
	}
	if w.Duration, err = time.ParseDuration(duration); err != nil || w.Duration <= 0 || w.Duration > 366*24*time.Hour {
		return Window{}, fmt.Errorf("duration %.20q is not a duration from 1s to 8784h (\"1h\", \"90m\")", duration)
	}
	if w.loc, err = time.LoadLocation(timeZone); err != nil || strings.EqualFold(timeZone, "local") {
		return Window{}, fmt.Errorf("time zone %.40q is not one (\"Europe/Berlin\", \"UTC\")", timeZone)
	}
	return w, nil
}

// Parse reads windows written as one line each, separated by ";":
// "<allow|deny> <minute> <hour> <day> <month> <weekday> <duration> [<time
// zone>]", such as "allow 0 9 * * 1-5 8h Europe/Berlin".
func Parse(s string) (Set, error) {
	var set Set
	for entry := range strings.SplitSeq(s, ";") {
		f := strings.Fields(entry)
		if len(f) == 0 {
			continue
		}
		if len(f) < 7 || len(f) > 8 {
			return nil, fmt.Errorf("window %.80q: want <allow|deny> <5 cron fields> <duration> [<time zone>]", strings.TrimSpace(entry))
		}
		tz := ""
		if len(f) == 8 {
			tz = f[7]
		}
		w, err := New(f[0], strings.Join(f[1:6], " "), f[6], tz)
		if err != nil {
			return nil, fmt.Errorf("window %.80q: %w", strings.TrimSpace(entry), err)
		}
		set = append(set, w)
		if len(set) > MaxWindows {
			return nil, fmt.Errorf("more than %d windows", MaxWindows)
		}
	}
	return set, nil
}

// active tells whether the window is open at t, as Argo CD computes it:
// the schedule read in the window's time zone's offset at t.
func (w Window) active(t time.Time) bool {
	off := w.offset(t)
	return w.schedule.Next(t.UTC().Add(off - w.Duration)).Before(t.UTC().Add(off))
}

func (w Window) offset(t time.Time) time.Duration {
	_, secs := t.In(w.loc).Zone()
	return time.Duration(secs) * time.Second
}

func (w Window) String() string {
	s := fmt.Sprintf("%s %s %s", w.Kind, w.Schedule, w.Duration)
	if w.TimeZone != "" {
		s += " " + w.TimeZone
	}
	return s
}

// Set is an Application's windows.
type Set []Window

// Open tells whether writes may be made at t, as Argo CD tells whether an
// automated sync may run: not in an active deny window; in an active
// allow window; outside every allow window, only when there is none.
func (s Set) Open(t time.Time) bool {
	allowed, allows := false, false
	for _, w := range s {
		switch active := w.active(t); {
		case w.Kind == Deny && active:
			return false
		case w.Kind == Allow:
			allows = true
			allowed = allowed || active
		}
	}
	return allowed || !allows
}

// horizon is how far Next looks for an opening, and maxEdges how many
// times of the windows' schedules it looks at in all: a tenant's
// windows cost at most that.
const (
	horizon  = 366 * 24 * time.Hour
	maxEdges = 2000
)

// Next is the first time after t that writes may be made, when they may
// not at t; the zero time when s opens at t, or not within a year, or
// not within the maxEdges times of its schedules looked at.
func (s Set) Next(t time.Time) time.Time {
	if s.Open(t) {
		return time.Time{}
	}
	// The set changes only where a window opens or closes.
	var edges []time.Time
	for _, w := range s {
		off := w.offset(t)
		at := t.UTC().Add(off - w.Duration)
		for range maxEdges / len(s) {
			at = w.schedule.Next(at)
			if at.IsZero() {
				break
			}
			start := at.Add(-off)
			if start.Sub(t) > horizon {
				break
			}
			// A second in: at its very edge a window is neither.
			edges = append(edges, start.Add(time.Second), start.Add(w.Duration+time.Second))
		}
	}
	slices.SortFunc(edges, func(a, b time.Time) int { return a.Compare(b) })
	for _, e := range edges {
		if e.After(t) && s.Open(e) {
			return e
		}
	}
	return time.Time{}
}

// String lists the windows as Parse reads them.
func (s Set) String() string {
	parts := make([]string, len(s))
	for i, w := range s {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}
