package git

import (
	"strings"
	"testing"
)

func TestCommitMessageTemplate(t *testing.T) {
	tests := []struct {
		name     string
		template string
		want     string
		wantErr  string
	}{
		{
			name:     "default",
			template: "",
			want: "build: automatic update of example-app\n\n" +
				"updates image eks-app tag 'v0.0.1' to 'v0.0.2'\n" +
				"updates image example/web tag '1.4.0' to '1.5.0'\n",
		},
		{
			name:     "custom",
			template: "chore({{ .AppName }}): {{ len .AppChanges }} images\n{{ range .AppChanges }}{{ .Alias }}={{ .NewTag }} {{ end }}",
			want:     "chore(example-app): 2 images\napp=v0.0.2 web=1.5.0\n",
		},
		{
			name:     "image labels (v1.3.0)",
			template: `{{ range .AppChanges }}{{ .Alias }}@{{ index .Labels "org.opencontainers.image.revision" }};{{ end }}`,
			want:     "app@4f2a9c1;web@;\n",
		},
		{name: "syntax error", template: "{{ .AppName", wantErr: "parse commit message template"},
		{name: "unknown field", template: "{{ .Application }}", wantErr: "can't evaluate field Application"},
		{name: "empty output", template: "{{ if false }}x{{ end }}", wantErr: "message is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseCommitMessageTemplate(tt.template)
			var got string
			if err == nil {
				got, err = tmpl.Render(SampleCommitMessageData())
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("message:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
