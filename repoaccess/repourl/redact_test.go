package repourl

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct {
		name, in, want string
		secret         string // must not appear in the result
	}{
		{name: "user and password", in: "https://bot:s3cret@git.example.com/repo.git", want: "https://bot:xxxxx@git.example.com/repo.git", secret: "s3cret"},
		{name: "empty password", in: "https://bot:@git.example.com/repo.git", want: "https://bot:xxxxx@git.example.com/repo.git"},
		{name: "token as user name", in: "https://ghp_abc123@github.com/org/repo", want: "https://xxxxx@github.com/org/repo", secret: "ghp_abc123"},
		{name: "token as user name over http", in: "http://ghp_abc123@127.0.0.1:8080/repo.git", want: "http://xxxxx@127.0.0.1:8080/repo.git", secret: "ghp_abc123"},
		{name: "no user info", in: "https://github.com/org/repo.git", want: "https://github.com/org/repo.git"},
		{name: "ssh user", in: "ssh://deploy@git.example.com:2222/repo.git", want: "ssh://deploy@git.example.com:2222/repo.git"},
		{name: "ssh user and password", in: "ssh://deploy:s3cret@git.example.com/repo.git", want: "ssh://deploy:xxxxx@git.example.com/repo.git", secret: "s3cret"},
		{name: "scp-like", in: "git@github.com:org/repo.git", want: "git@github.com:org/repo.git"},
		{name: "scp-like without user", in: "github.com:org/repo.git", want: "github.com:org/repo.git"},
		{name: "scp-like with password", in: "git:s3cret@github.com:org/repo.git", want: "git:xxxxx@github.com:org/repo.git", secret: "s3cret"},
		{name: "scp-like with @ in path", in: "git@github.com:org/repo@v1", want: "git@github.com:org/repo@v1"},
		{name: "unparsable port", in: "https://bot:s3cret@git.example.com:http/repo.git", want: "https://xxxxx@git.example.com:http/repo.git", secret: "s3cret"},
		{name: "unparsable escape in token", in: "https://ghp_%zz123@github.com/org/repo", want: "https://xxxxx@github.com/org/repo", secret: "ghp_"},
		{name: "unparsable slash in password", in: "https://bot:pa/ss@git.example.com/repo.git", want: "https://xxxxx@git.example.com/repo.git", secret: "pa/ss"},
		{name: "unparsable hash in password", in: "https://bot:pa#ss@git.example.com/repo.git", want: "https://xxxxx@git.example.com/repo.git", secret: "pa#ss"},
		{name: "unparsable control character", in: "https://bot:s3cret@git.example.com/repo.git\n", want: "https://xxxxx@git.example.com/repo.git\n", secret: "s3cret"},
		{name: "unparsable without user info", in: "https://git.example.com:http/repo.git", want: "https://git.example.com:http/repo.git"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactURL(tt.in)
			if got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if tt.secret != "" && strings.Contains(got, tt.secret) {
				t.Errorf("RedactURL(%q) = %q shows %q", tt.in, got, tt.secret)
			}
		})
	}
}

func TestRedactErrorURLs(t *testing.T) {
	tests := []struct {
		msg, want string
	}{
		{`unexpected requesting "http://user:s3cret@127.0.0.1:8080/r.git/info/refs" status code: 502`, `unexpected requesting "http://user:xxxxx@127.0.0.1:8080/r.git/info/refs" status code: 502`},
		{`Get "https://ghp_s3cret@github.com/o/r.git/info/refs": EOF`, `Get "https://xxxxx@github.com/o/r.git/info/refs": EOF`},
		{`parse "https://bot:pa/s3cret@git.example.com/r.git": invalid port`, `parse "https://xxxxx@git.example.com/r.git": invalid port`},
		{`ssh: handshake failed for ssh://git@github.com/o/r.git`, `ssh: handshake failed for ssh://git@github.com/o/r.git`},
		{`nothing to hide in https://github.com/o/r.git`, `nothing to hide in https://github.com/o/r.git`},
	}
	for _, tt := range tests {
		base := errors.New(tt.msg)
		err := RedactErrorURLs(base)
		if err.Error() != tt.want {
			t.Errorf("RedactErrorURLs(%q) = %q, want %q", tt.msg, err, tt.want)
		}
		if !errors.Is(err, base) {
			t.Errorf("RedactErrorURLs(%q) lost the error", tt.msg)
		}
	}
}
