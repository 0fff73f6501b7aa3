package gitwire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

// advertise is a repository server's advertisement of refs references,
// each name padded to nameLen; refs < 0 never ends.
func advertise(refs, nameLen int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info/refs") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		pkt := func(s string) error {
			_, err := fmt.Fprintf(w, "%04x%s", len(s)+4, s)
			return err
		}
		_ = pkt("# service=git-upload-pack\n")
		_, _ = w.Write([]byte("0000"))
		const hash = "0123456789abcdef0123456789abcdef01234567"
		_ = pkt(hash + " HEAD\x00symref=HEAD:refs/heads/main ofs-delta side-band-64k\n")
		_ = pkt(hash + " refs/heads/main\n")
		for i := 0; refs < 0 || i < refs; i++ {
			name := fmt.Sprintf("refs/tags/t%d", i)
			name += strings.Repeat("x", max(nameLen-len(name), 0))
			if pkt(hash+" "+name+"\n") != nil {
				return // the client hung up
			}
		}
		_, _ = w.Write([]byte("0000"))
	}
}

// TestAdvertisementBound: a repository server that advertises more
// references than are read, or more bytes, is refused with an error naming
// the repository, and what it sent costs little heap; a server that sends
// an error body without end has it cut. Before the bound, go-git decoded
// the whole advertisement: 1,000,000 references (58 MiB) allocated about
// 600 MiB.
func TestAdvertisementBound(t *testing.T) {
	tests := []struct {
		name    string
		handler http.Handler
		want    string // "" lists the branches
	}{
		{"within the bounds", advertise(1000, 0), ""},
		{"too many references", advertise(1_000_000, 0), "the reference advertisement lists more than 100000 references, the most the client reads"},
		{"no end of references", advertise(-1, 0), "the reference advertisement lists more than"},
		{"too many bytes", advertise(400, 60_000), "the reference advertisement is larger than 16 MiB, the most the client reads"},
		{"an error body without end", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			line := []byte(strings.Repeat("e", 1023) + "\n")
			for {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}), "unexpected requesting"},
	}
	r := gitauth.NewResolver(noObjects{}, "argocd", t.TempDir(), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			url := srv.URL + "/team/repo.git"
			acc, err := r.Access(context.Background(), url, repoaccess.Credentials{}, false)
			if err != nil {
				t.Fatal(err)
			}
			defer acc.Close()
			var rb Branches
			grew := allocated(func() { rb, err = (&Clone{URL: url}).List(context.Background(), acc) })
			t.Logf("%d MiB allocated: %.300v", grew>>20, err)
			if tt.want == "" {
				if err != nil || rb.Heads["main"].IsZero() || rb.Default != "main" {
					t.Fatalf("got %v, %v; want the branches", rb, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "list branches of "+url) {
				t.Fatalf("got %v, want an error naming %s with %q", err, url, tt.want)
			}
			if strings.Contains(tt.want, "advertisement") && !errors.Is(err, bounded.ErrTooLarge) {
				t.Errorf("%v is not bounded.ErrTooLarge", err)
			}
			if len(err.Error()) > 8<<10 {
				t.Errorf("the error holds %d bytes", len(err.Error()))
			}
			// The advertisement read up to the bound, and what go-git keeps
			// of 100,000 references.
			if grew > 128<<20 {
				t.Errorf("the refused answer allocated %d MiB", grew>>20)
			}
		})
	}
}

// allocated is how many bytes f allocates, an upper bound on how much it
// grows the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
