package git

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func manyImages(n int) []writeback.ImageUpdate {
	out := make([]writeback.ImageUpdate, n)
	for i := range out {
		out[i] = writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: fmt.Sprintf("a%d", i), Image: mustRef(fmt.Sprintf("ghcr.io/org/app%d", i))}, New: imageref.Version{Tag: "v2"}, Old: imageref.Version{Tag: "v1"}}
	}
	return out
}

// Templates come from Applications (git-branch) and must not be able to
// spin, fill memory or hold the repository lock.
func TestTemplateLimits(t *testing.T) {
	tests := []struct {
		name, text string
		images     int
		wantErr    string // "" renders
	}{
		{name: "the documented form", text: "image-updater-{{.SHA256}}", images: 2},
		{name: "range over the images", text: "upd-{{range .Images}}{{.Alias}}-{{end}}", images: 3},
		{name: "range over a root field from inside", text: "{{range .Images}}{{range $.Images}}x{{end}}{{end}}", images: 3},
		{name: "printf within bounds", text: `{{printf "%-20s|%.8s" "a" .SHA256}}`, images: 1},
		{name: "range over a huge number", text: "{{range 9223372036854775807}}{{end}}x", wantErr: "range over"},
		{name: "range over a variable holding a number", text: "{{$n := 1000000000}}{{range $n}}{{end}}x", wantErr: "range over"},
		{name: "range over a computed value", text: `{{range (len (printf "%200s" "x"))}}{{end}}x`, wantErr: "range over"},
		{name: "a defined template", text: `{{define "t"}}{{.SHA256}}{{end}}x`, wantErr: "{{define}} and {{block}} are not allowed"},
		{name: "a block", text: `{{block "t" .}}{{.SHA256}}{{end}}`, wantErr: "{{define}} and {{block}} are not allowed"},
		{name: "a call of an undefined template", text: `{{template "t" .}}`, wantErr: `{{template "t"}} is not allowed`},
		{name: "ranges nested too deep", text: "{{range .Images}}{{range $.Images}}{{range $.Images}}{{range $.Images}}x{{end}}{{end}}{{end}}{{end}}", wantErr: "nested more than"},
		{name: "printf width bomb", text: `{{printf "%0999999999d" 1}}`, wantErr: "width or precision 0999999999"},
		{name: "printf precision bomb", text: `{{printf "%.999999999f" 1.0}}`, wantErr: "width or precision"},
		{name: "printf width from an argument", text: `{{printf "%*d" 999999999 1}}`, wantErr: "from an argument"},
		{name: "output bomb", text: `{{range .Images}}{{range $.Images}}{{printf "%256s" "x"}}{{end}}{{end}}`, images: 40, wantErr: "output over"},
		{name: "ranges nested over many images", text: "{{range .Images}}{{range $.Images}}{{range $.Images}}{{end}}{{end}}{{end}}x", images: 1000, wantErr: "could take more than 200000 steps"},
		{name: "ranges nested over few images", text: "{{range .Images}}{{range $.Images}}{{range $.Images}}{{end}}{{end}}{{end}}x", images: 20},
		{name: "a variable doubled in a range", text: `{{$x := "ab"}}{{range .Images}}{{$x = printf "%s%s" $x $x}}{{end}}{{len $x}}`, images: 24, wantErr: "a string over 65536 bytes"},
		{name: "a variable doubled by print", text: `{{$x := "ab"}}{{range .Images}}{{$x = print $x $x}}{{end}}{{len $x}}`, images: 24, wantErr: "a string over 65536 bytes"},
		{name: "a variable grown by js", text: `{{$x := "<<<<"}}{{range .Images}}{{$x = js $x}}{{end}}{{len $x}}`, images: 24, wantErr: "a string over 65536 bytes"},
		{name: "printf with many wide verbs", text: `{{printf "` + strings.Repeat("%256d", 300) + `"}}`, images: 1, wantErr: "a string over 65536 bytes"},
		{name: "recursion", text: `{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}`, images: 1, wantErr: "not allowed"},
		{name: "2^62 nested calls writing nothing", text: nestedCalls(62), images: 1, wantErr: "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := renderBranchTemplate(tt.text, newBranchTemplateData(update{Images: manyImages(tt.images)}))
			if took := time.Since(start); took > templateTimeout+time.Second {
				t.Errorf("took %s", took)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, errTemplateLimit) {
				t.Errorf("error %v is not errTemplateLimit", err)
			}
		})
	}
	if _, err := ParseCommitMessageTemplate("{{range 99999999}}{{end}}"); err == nil || !errors.Is(err, errTemplateLimit) {
		t.Errorf("commit message template: %v, want the range refused", err)
	}
}

// TestTemplateStopped: a render that breaks a limit has stopped when it
// returns, whether refused before it runs (ranges nested three deep over
// 1,000 images, a billion steps that write nothing) or stopped by its
// time running out, and leaves no goroutine behind to burn a core.
func TestTemplateStopped(t *testing.T) {
	data := newBranchTemplateData(update{Images: manyImages(1000)})
	tests := []struct {
		name, text string
		timeout    time.Duration
		wantErr    string
	}{
		{"a billion steps writing nothing", "{{range .Images}}{{range $.Images}}{{range $.Images}}{{end}}{{end}}{{end}}x", templateTimeout, "could take more than"},
		{"writes after the time is up", "{{range .Images}}{{.Alias}}{{end}}", -time.Second, "still running after"},
		{"calls after the time is up", `{{range .Images}}{{$x := printf "%s" .Alias}}{{end}}`, -time.Second, "still running after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			tmpl, err := parseLimitedTemplate("git-branch", tt.text)
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderWithin(tmpl, data, tt.timeout)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errTemplateLimit) {
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			}
			poll.Until(t, 5*time.Second, "the render's goroutines to end", func() (bool, string) {
				n := runtime.NumGoroutine()
				return n <= before, fmt.Sprintf("%d goroutines, %d before", n, before)
			})
		})
	}
}

// FuzzBranchTemplate: whatever the template, rendering ends within the
// time limit with output within the size limit.
func FuzzBranchTemplate(f *testing.F) {
	for _, s := range []string{
		"image-updater-{{.SHA256}}", "{{range .Images}}{{.Name}}-{{.NewTag}}{{end}}", `{{printf "%5d" 3}}`,
		"{{range 10}}x{{end}}", `{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`, "{{with .Images}}{{len .}}{{end}}",
		`{{range $i, $e := .Images}}{{if $i}}-{{end}}{{$e.Alias}}{{end}}`, "{{.Images | len | print}}", `{{slice "abc" 1}}`,
	} {
		f.Add(s)
	}
	data := newBranchTemplateData(update{Images: manyImages(5)})
	f.Fuzz(func(t *testing.T, text string) {
		start := time.Now()
		out, _ := renderBranchTemplate(text, data)
		if took := time.Since(start); took > templateTimeout+2*time.Second {
			t.Fatalf("%q took %s", text, took)
		}
		if len(out) > maxBranchNameLength {
			t.Fatalf("%q rendered %d bytes", text, len(out))
		}
	})
}

// nestedCalls is a template whose level i calls level i-1 twice: 2^n calls
// that write nothing, which ran on after the time limit (text/template
// cannot be stopped) when templates could call templates.
func nestedCalls(n int) string {
	var b strings.Builder
	b.WriteString(`{{define "t0"}}{{end}}`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{{define "t%d"}}{{template "t%d"}}{{template "t%d"}}{{end}}`, i, i-1, i-1)
	}
	fmt.Fprintf(&b, `{{template "t%d"}}`, n)
	return b.String()
}
