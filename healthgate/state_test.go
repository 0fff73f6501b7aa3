package healthgate

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// TestParseState: the annotation as the gate writes it reads back; one a
// person broke, or too large, is an error; entries are bounded.
func TestParseState(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	st := State{
		Records: []api.HealthGateRecord{{Alias: "web", Version: "2", State: api.HealthGateVerified, WrittenAt: at}, {Alias: "app", Version: "1.1.0", PreviousVersion: "1.0.0", State: api.HealthGatePending, WrittenAt: at}},
		Skipped: []api.SkippedVersion{{Alias: "app", Version: "1.0.9", SkippedAt: at, Reason: "the sync failed"}},
	}
	got, err := ParseState(st.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.Records[0].Alias != "app" || got.Records[1].Alias != "web" || len(got.Skipped) != 1 || got.Skipped[0].Reason != "the sync failed" {
		t.Errorf("read back %+v", got)
	}
	if s := (State{}).Encode(); s != "" {
		t.Errorf("empty state encoded as %q", s)
	}

	for _, bad := range []string{"{", `{"records":"x"}`, "[]", `{"records":[` + strings.Repeat(`{"alias":"a","version":"1"},`, 2000) + `{}]}`} {
		if _, err := ParseState(bad); err == nil {
			t.Errorf("ParseState(%.40q...) accepted", bad)
		}
	}

	// Entries without an image or a version are dropped, each image has
	// one record and its most recent skips, each version once.
	var skips []string
	for i := range 15 {
		skips = append(skips, fmt.Sprintf(`{"alias":"app","version":"1.%d.0","skippedAt":"2026-03-01T10:%02d:00Z"}`, i, i))
	}
	skips = append(skips, `{"alias":"app","version":"1.14.0","skippedAt":"2026-03-01T09:00:00Z"}`, `{"version":"x"}`, `{"alias":"y"}`)
	got, err = ParseState(`{"records":[{"alias":"app","version":"1"},{"alias":"app","version":"2"},{"version":"3"},{"alias":"` + strings.Repeat("a", 300) + `","version":"4","message":"` + strings.Repeat("m", 2000) + `"}],"skipped":[` + strings.Join(skips, ",") + `]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 2 || got.Records[1].Version != "1" || len(got.Records[0].Alias) != maxField || len(got.Records[0].Message) != maxMessage {
		t.Errorf("records %+v", got.Records)
	}
	var versions []string
	for _, s := range got.Skipped {
		versions = append(versions, s.Version)
	}
	if want := []string{"1.5.0", "1.6.0", "1.7.0", "1.8.0", "1.9.0", "1.10.0", "1.11.0", "1.12.0", "1.13.0", "1.14.0"}; !slices.Equal(versions, want) {
		t.Errorf("skipped %v, want %v", versions, want)
	}
}

// TestStateBound: a state over MaxStateBytes loses what is no longer
// followed, oldest first, never a record still followed.
func TestStateBound(t *testing.T) {
	var st State
	long := strings.Repeat("m", maxMessage)
	for i := range 200 {
		state := api.HealthGateVerified
		if i%50 == 0 {
			state = api.HealthGatePending
		}
		st.Records = append(st.Records, api.HealthGateRecord{Alias: fmt.Sprintf("img%03d", i), Version: "1", State: state, Message: long,
			WrittenAt: metav1.NewTime(time.Unix(int64(i), 0))})
		st.Skipped = append(st.Skipped, api.SkippedVersion{Alias: fmt.Sprintf("img%03d", i), Version: "0", Reason: long, SkippedAt: metav1.NewTime(time.Unix(int64(i), 0))})
	}
	st.normalize("")
	if n := len(st.Encode()); n > MaxStateBytes {
		t.Fatalf("%d bytes", n)
	}
	pending := 0
	for _, r := range st.Records {
		if active(r) {
			pending++
		}
	}
	// Every judged record goes before a skip; then the oldest skips.
	if pending != 4 || len(st.Records) != 4 || len(st.Skipped) == 0 || st.Skipped[len(st.Skipped)-1].Alias != "img199" || st.Skipped[0].Alias == "img000" {
		t.Errorf("%d records kept (%d followed), skips from %s", len(st.Records), pending, st.Skipped[0].Alias)
	}
}

// TestClear: the entries of health-gate-clear.
func TestClear(t *testing.T) {
	tests := []struct {
		value string
		left  []string
	}{
		{"all", nil},
		{"1.1.0", []string{"app:stable@sha256:aa", "web:1.2.0"}},
		{"web:1.1.0", []string{"app:1.1.0", "app:stable@sha256:aa", "web:1.2.0"}},
		{" app:1.1.0 ,web:1.2.0,", []string{"app:stable@sha256:aa", "web:1.1.0"}},
		{"stable@sha256:aa", []string{"app:1.1.0", "web:1.1.0", "web:1.2.0"}},
		{"app:stable@sha256:aa", []string{"app:1.1.0", "web:1.1.0", "web:1.2.0"}},
		{"sha256:aa", []string{"app:1.1.0", "app:stable@sha256:aa", "web:1.1.0", "web:1.2.0"}},
		{"nothing", []string{"app:1.1.0", "app:stable@sha256:aa", "web:1.1.0", "web:1.2.0"}},
	}
	for _, tt := range tests {
		var st State
		for _, p := range []string{"app:1.1.0", "app:stable@sha256:aa", "web:1.1.0", "web:1.2.0"} {
			alias, version, _ := strings.Cut(p, ":")
			st.skip(alias, version, "", time.Unix(0, 0))
		}
		st.Clear(tt.value)
		var left []string
		for _, s := range st.Skipped {
			left = append(left, s.Alias+":"+s.Version)
		}
		if !slices.Equal(left, tt.left) {
			t.Errorf("Clear(%q) left %v, want %v", tt.value, left, tt.left)
		}
	}
}

func FuzzParseState(f *testing.F) {
	f.Add(`{"records":[{"alias":"app","version":"1.1.0","state":"Pending","writtenAt":"2026-03-01T10:00:00Z","deployedAt":null}],"skipped":[{"alias":"app","version":"1"}]}`)
	f.Add(`{"records":null}`)
	f.Add(`{"records":[{"alias":"a","version":"1","window":"-5m"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseState(s)
		if err != nil {
			return
		}
		if n := len(st.Encode()); n > MaxStateBytes {
			t.Fatalf("%d bytes kept", n)
		}
		for _, r := range st.Records {
			if d := windowOf(r); d <= 0 || r.Alias == "" || r.Version == "" {
				t.Fatalf("record %+v, window %v", r, d)
			}
		}
	})
}
