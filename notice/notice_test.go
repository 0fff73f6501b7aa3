package notice

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestEncode(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 500, time.FixedZone("x", 3600))
	many := make([]Version, 100)
	for i := range many {
		many[i] = Version{Alias: "a", Image: strings.Repeat("r", 200), From: "1.0.0", To: "1.1.0"}
	}
	tests := []struct {
		name    string
		n       Notice
		want    string
		omitted int
	}{
		{
			name: "an update",
			n:    Notice{At: at, Images: []Version{{Alias: "web", Image: "ghcr.io/example/web", From: "1.5.2", To: "1.6.0"}}, Charts: []Version{{Chart: "redis", From: "18.0.1", To: "18.0.2"}}},
			want: `{"at":"2026-12-03T11:00:00Z","images":[{"alias":"web","image":"ghcr.io/example/web","from":"1.5.2","to":"1.6.0"}],"charts":[{"chart":"redis","from":"18.0.1","to":"18.0.2"}]}`,
		},
		{
			name: "a failure",
			n:    Notice{At: at, Message: "image web: listing tags: 401 Unauthorized"},
			want: `{"at":"2026-12-03T11:00:00Z","message":"image web: listing tags: 401 Unauthorized"}`,
		},
		{name: "versions past the bound", n: Notice{At: at, Images: many}, omitted: 85},
		{name: "a long message", n: Notice{At: at, Message: strings.Repeat("é", 2000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.n.Encode()
			if tt.want != "" && got != tt.want {
				t.Errorf("Encode() =\n%s\nwant\n%s", got, tt.want)
			}
			if len(got) > MaxBytes || !utf8.ValidString(got) {
				t.Errorf("Encode() of %d bytes (valid UTF-8: %t), want at most %d", len(got), utf8.ValidString(got), MaxBytes)
			}
			back, err := Decode(got)
			if err != nil {
				t.Fatal(err)
			}
			if back.Omitted != tt.omitted || len(back.Images)+back.Omitted != len(tt.n.Images) {
				t.Errorf("decoded %d images and %d omitted, want %d omitted of %d", len(back.Images), back.Omitted, tt.omitted, len(tt.n.Images))
			}
			if len(back.Message) > maxMessage {
				t.Errorf("message of %d bytes kept", len(back.Message))
			}
		})
	}
}

func TestSame(t *testing.T) {
	n := Notice{At: time.Unix(100, 0), Message: "image web: 401 Unauthorized"}
	later := n
	later.At = time.Unix(200, 0)
	other := later
	other.Message = "image web: 404 Not Found"
	tests := []struct {
		name  string
		value string
		n     Notice
		want  bool
	}{
		{"the same, later", n.Encode(), later, true},
		{"another message", n.Encode(), other, false},
		{"none yet", "", n, false},
		{"edited into something else", "{not json", n, false},
	}
	for _, tt := range tests {
		if got := Same(tt.value, tt.n); got != tt.want {
			t.Errorf("%s: Same = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestKinds(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		a := k.Annotation()
		if !strings.HasPrefix(a, "argocd-image-updater.argoproj.io/last-") || seen[a] {
			t.Errorf("annotation %q of kind %q", a, k)
		}
		seen[a] = true
	}
}

// FuzzDecode: whatever an annotation holds, Decode returns or errs, and
// what it returns encodes within the bound.
func FuzzDecode(f *testing.F) {
	f.Add(`{"at":"2026-12-03T11:00:00Z","images":[{"alias":"web","image":"x","from":"1","to":"2"}],"message":"m"}`)
	f.Add(`{"at":"x"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, value string) {
		n, err := Decode(value)
		if err != nil {
			return
		}
		if got := n.Encode(); len(got) > MaxBytes {
			t.Errorf("Encode() of %d bytes", len(got))
		}
	})
}
