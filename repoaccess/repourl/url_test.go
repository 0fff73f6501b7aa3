package repourl

import "testing"

func TestURLWithin(t *testing.T) {
	tests := []struct {
		prefix, repo string
		want         bool
	}{
		{"https://github.com", "https://github.com/org/repo.git", true},
		{"https://github.com/", "https://github.com/org/repo.git", true},
		{"https://GitHub.com/Org", "https://github.com/org/repo", true},
		{"https://github.com/org.git", "https://github.com/org/repo", true},
		{"https://github.com/org/repo.git", "https://github.com/org/repo", true},
		{"https://github.com/org/repo/", "https://github.com/org/repo.git/", true},
		{"https://github.com", "https://github.com.evil.io/org/repo", false},
		{"https://github.com", "https://github.community/org/repo", false},
		{"https://github.com", "https://github.com:8443/org/repo", false},
		{"https://github.com", "https://github.com@evil.io/org/repo", false},
		{"https://github.com", "http://github.com/org/repo", false},
		{"https://github.com/org", "https://github.com/organic/repo", false},
		{"https://github.com/org/repo", "https://github.com/org/repository", false},
		{"http://127.0.0.1:4123", "http://127.0.0.1:41234/repo.git", false},
		{"http://127.0.0.1", "http://127.0.0.1.nip/repo.git", false},
		{"git@github.com:org", "git@github.com:org/repo.git", true},
		{"git@github.com:org", "ssh://git@github.com/org/repo.git", true},
		{"git@github.com", "git@github.com.evil.io:org/repo.git", false},
		{"git@github.com:org", "git@github.com:organic/repo.git", false},
		{"ssh://git@github.com:2222/org", "ssh://git@github.com:22220/org/repo", false},
		{"", "https://github.com/org/repo", false},
		{"https://github.com", "", false},
	}
	for _, tt := range tests {
		if got := Covers(tt.prefix, tt.repo); got != tt.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tt.prefix, tt.repo, got, tt.want)
		}
	}
}

func TestPermittedBy(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		repo     string
		want     bool
	}{
		{"nothing", nil, "https://github.com/org/repo", false},
		{"star", []string{"*"}, "https://github.com/org/repo.git", true},
		{"exact", []string{"https://github.com/org/repo.git"}, "https://github.com/org/repo", true},
		{"exact in another case", []string{"https://GitHub.com/Org/Repo"}, "https://github.com/org/repo.git", true},
		{"another repository", []string{"https://github.com/org/repo"}, "https://github.com/org/other", false},
		{"glob in the org", []string{"https://github.com/org/*"}, "https://github.com/org/repo.git", true},
		{"glob stops at a slash", []string{"https://github.com/org/*"}, "https://github.com/org/sub/repo", false},
		{"double star crosses slashes", []string{"https://github.com/org/**"}, "https://github.com/org/sub/repo", true},
		{"glob does not reach a look-alike host", []string{"https://github.com/*"}, "https://github.com.evil.io/repo", false},
		{"glob over the host", []string{"https://*.example.com/**"}, "https://git.example.com/org/repo", true},
		{"scp-like pattern, ssh URL", []string{"git@github.com:org/*"}, "ssh://git@github.com/org/repo.git", true},
		{"deny wins", []string{"!https://github.com/org/secret", "*"}, "https://github.com/org/secret.git", false},
		{"deny leaves the rest", []string{"!https://github.com/org/secret", "*"}, "https://github.com/org/repo", true},
		{"deny alone allows nothing", []string{"!https://github.com/org/secret"}, "https://github.com/org/repo", false},
		{"deny everything", []string{"!*", "*"}, "https://github.com/org/repo", false},
		{"broken allow pattern", []string{"https://github.com/org/[", "https://github.com/org/repo"}, "https://github.com/org/repo", true},
		{"broken deny pattern", []string{"!https://github.com/org/[", "*"}, "https://github.com/org/repo", false},
		{"unparsable URL", []string{"*"}, "https://github.com:port/org/repo", false},
	}
	for _, tt := range tests {
		if got := permitted(tt.patterns, tt.repo); got != tt.want {
			t.Errorf("%s: PermittedBy(%q, %q) = %v, want %v", tt.name, tt.patterns, tt.repo, got, tt.want)
		}
	}
}

func TestRemoteRepoURL(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"https://github.com/org/repo.git", true},
		{"HTTP://127.0.0.1:8080/repo.git", true},
		{"ssh://git@github.com/org/repo.git", true},
		{"git@github.com:org/repo.git", true},
		{"file:///var/lib/clones/abc", false},
		{"/var/lib/clones/abc", false},
		{"git://github.com/org/repo.git", false},
		{"https:///repo.git", false},
		{"", false},
	}
	for _, tt := range tests {
		u, err := ParseURL(tt.url)
		if got := err == nil && u.Remote(); got != tt.want {
			t.Errorf("Remote(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestHasDotSegment(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"https://github.com/org/repo.git", false},
		{"https://github.com/org/../other/repo.git", true},
		{"https://github.com/org/./repo.git", true},
		{"https://github.com/org/%2e%2e/other/repo.git", true},
		{"https://github.com/org/%2E%2E/other/repo.git", true},
		{"git@github.com:org/../other/repo.git", true},
		{"https://github.com/org/..repo.git", false},
		{"https://github.com/org/repo..", false},
	}
	for _, tt := range tests {
		u, err := ParseURL(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.HasDotSegment(); got != tt.want {
			t.Errorf("HasDotSegment(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestSameRepository(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"https://GitHub.com/Org/Repo.git", "https://github.com/org/repo/", true},
		{"https://github.com:443/org/repo", "https://github.com/org/repo.git", true},
		{"git@github.com:org/repo.git", "ssh://git@github.com/org/repo", true},
		{"ssh://git@github.com:22/org/repo", "git@github.com:org/repo", true},
		{"https://bot:s3cret@github.com/org/repo", "https://github.com/org/repo", true},
		{"https://github.com/org/repo", "http://github.com/org/repo", false},
		{"https://github.com:8443/org/repo", "https://github.com/org/repo", false},
		{"git@github.com:org/repo", "deploy@github.com:org/repo", false},
		{"https://github.com/org/repo", "https://github.com/org/repo2", false},
		{"https://bot:pa%2Fss@github.com/org/repo", "https://github.com/org/repo", true},
		{"https://github.com/org%2Frepo", "https://github.com/org/repo", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := SameRepository(tt.a, tt.b); got != tt.want {
			t.Errorf("SameRepository(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func permitted(patterns []string, raw string) bool {
	u, err := ParseURL(raw)
	return err == nil && u.PermittedBy(patterns)
}
