package git

import (
	"fmt"
	"strings"
	"text/template"
)

// DefaultCommitMessageTemplate is used when no template is configured. Its
// output matches the messages existing users already see in their history.
const DefaultCommitMessageTemplate = `build: automatic update of {{ .AppName }}
{{ range .AppChanges }}
updates image {{ .Image }} tag '{{ .OldTag }}' to '{{ .NewTag }}'
{{- end }}
`

// ImageChange is one image whose version a write-back changed.
type ImageChange struct {
	// Image is the repository path without the registry host, as Argo
	// CD Image Updater names it in commit messages ("org/app" for
	// "quay.io/org/app:1.0", "nginx" for "nginx").
	Image  string
	Alias  string
	OldTag string
	NewTag string
	// Labels are the new version's image labels (v1.3.0), known when the
	// update strategy read the image's metadata (newest-build, digest);
	// empty for semver and alphabetical, which read only tags.
	Labels map[string]string
}

// CommitMessageData is what a commit-message template sees.
type CommitMessageData struct {
	AppName    string
	AppChanges []ImageChange
}

// CommitMessageTemplate is a parsed commit-message template.
type CommitMessageTemplate struct {
	tmpl *template.Template
}

// ParseCommitMessageTemplate parses a Go text/template. An empty text means
// the default template. Unknown fields are reported when rendering, because
// text/template resolves fields only against data.
func ParseCommitMessageTemplate(text string) (*CommitMessageTemplate, error) {
	if strings.TrimSpace(text) == "" {
		text = DefaultCommitMessageTemplate
	}
	t, err := parseLimitedTemplate("commit-message", text)
	if err != nil {
		return nil, fmt.Errorf("parse commit message template: %w", err)
	}
	return &CommitMessageTemplate{tmpl: t}, nil
}

// Render executes the template. A message that renders empty is an error,
// since git refuses empty commit messages.
func (t *CommitMessageTemplate) Render(data CommitMessageData) (string, error) {
	out, err := renderLimited(t.tmpl, data)
	if err != nil {
		return "", fmt.Errorf("render commit message template: %w", err)
	}
	msg := strings.TrimSpace(out)
	if msg == "" {
		return "", fmt.Errorf("render commit message template: the message is empty")
	}
	return msg + "\n", nil
}

// SampleCommitMessageData is what the template command renders a template
// with, so users can check their template without a cluster.
func SampleCommitMessageData() CommitMessageData {
	return CommitMessageData{
		AppName: "example-app",
		AppChanges: []ImageChange{
			{Image: "eks-app", Alias: "app", OldTag: "v0.0.1", NewTag: "v0.0.2",
				Labels: map[string]string{"org.opencontainers.image.revision": "4f2a9c1", "org.opencontainers.image.source": "https://github.com/example/eks-app"}},
			{Image: "example/web", Alias: "web", OldTag: "1.4.0", NewTag: "1.5.0"},
		},
	}
}
