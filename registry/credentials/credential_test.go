package credentials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestCredentialRedaction(t *testing.T) {
	const password = "s3cr3t-Pa55"
	c := Credential{Username: "AWS", Password: password}
	printed := map[string]string{
		"String":   c.String(),
		"GoString": c.GoString(),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10v"} {
		printed[verb] = fmt.Sprintf(verb, c)
		printed["&"+verb] = fmt.Sprintf(verb, &c)
		printed["slice"+verb] = fmt.Sprintf(verb, []Credential{c})
	}
	var logBuf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logBuf, nil), slog.NewJSONHandler(&logBuf, nil)} {
		slog.New(h).Info("resolved", "cred", c)
	}
	printed["slog"] = logBuf.String()
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]string
	if err := json.Unmarshal(js, &decoded); err != nil {
		t.Fatal(err)
	}
	printed["json"] = string(js) + fmt.Sprint(decoded)
	printed["error"] = fmt.Errorf("wrapped: %v", c).Error()

	for how, s := range printed {
		if strings.Contains(s, password) {
			t.Errorf("%s prints the password: %s", how, s)
		}
		if !strings.Contains(s, "AWS") || !strings.Contains(s, "<redacted>") {
			t.Errorf("%s should show the username and <redacted>: %s", how, s)
		}
	}
	if got := fmt.Sprint(Credential{Username: "u"}); strings.Contains(got, "redacted") {
		t.Errorf("an empty password needs no redaction: %s", got)
	}
}
