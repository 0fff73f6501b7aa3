package manifests

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The image a plain `docker build` makes carries what Argo CD Image
// Updater's image carries for ext: login scripts (seed 003's calls
// `aws ecr get-login-password`), and answers as /manager, the binary
// argocd-operator's Deployment runs. No container engine runs where the
// tests do, so the build file itself is read: its last stage, with the
// build argument at its default.
func TestDockerfileDefaults(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := regexp.MustCompile(`(?m)^FROM `).Split(string(data), -1)
	final := stages[len(stages)-1]
	// Instructions continue over lines ending in a backslash.
	final = strings.ReplaceAll(final, "\\\n", " ")
	if !regexp.MustCompile(`(?m)^ARG WITH_SCRIPT_TOOLS=true$`).MatchString(final) {
		t.Errorf("the final stage does not default WITH_SCRIPT_TOOLS to true:\n%s", final)
	}
	install := regexp.MustCompile(`if \[ "\$\{WITH_SCRIPT_TOOLS\}" = "true" \]; then apk add --no-cache ([^;]+);`).FindStringSubmatch(final)
	if install == nil {
		t.Fatalf("no package installation under WITH_SCRIPT_TOOLS:\n%s", final)
	}
	for _, pkg := range []string{"aws-cli", "git", "openssh-client"} {
		if !strings.Contains(" "+install[1]+" ", " "+pkg+" ") {
			t.Errorf("with WITH_SCRIPT_TOOLS=true the image lacks %s: apk add %s", pkg, install[1])
		}
	}
	for _, want := range []string{
		"RUN ln -s /usr/local/bin/argocd-image-updater /manager",
		`ENTRYPOINT ["/sbin/tini", "--", "/usr/local/bin/argocd-image-updater"]`,
	} {
		if !strings.Contains(final, want) {
			t.Errorf("the final stage lacks %q", want)
		}
	}
}
