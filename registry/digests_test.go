package registry

import (
	"net/http"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// Two cycles against the real registry, each listing the repository and
// then asking the metadata of one tag: the second asks for the tag's digest
// only when it cannot trust what the first learnt.
func TestTagDigestKnownAcrossCycles(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	for _, tc := range []struct {
		name     string
		fields   []string                      // of the registries.conf entry
		opts     []MetadataOption              // of both Metadata calls
		between  func(t *testing.T, c *Client) // after the first cycle
		list     bool                          // list the tags before asking
		wantHEAD int                           // in the second cycle
		moved    bool                          // the second cycle sees the tag's new digest
	}{
		{name: "listing unchanged: no HEAD", list: true, wantHEAD: 0},
		{name: "tag pushed again, listing unchanged: the old digest stands", list: true, wantHEAD: 0,
			between: func(t *testing.T, c *Client) {
				reg.PushTags(t, "moved-quiet", []string{"v1"}, testenv.Created(time.Unix(2e9, 0)))
			}},
		{name: "a tag pushed changes the listing", list: true, wantHEAD: 1, moved: true,
			between: func(t *testing.T, c *Client) {
				reg.PushTags(t, "moved-loud", []string{"v1", "v2"}, testenv.Created(time.Unix(2e9, 0)))
			}},
		{name: "a push notification forgets", list: true, wantHEAD: 1, moved: true,
			between: func(t *testing.T, c *Client) {
				reg.PushTags(t, "notified", []string{"v1"}, testenv.Created(time.Unix(2e9, 0)))
				c.ForgetTags(imageRef(t, reg.Host+"/notified"))
			}},
		{name: "following the tag asks each time", list: true, opts: []MetadataOption{FollowTag()}, wantHEAD: 1},
		{name: "mutabletags asks each time", list: true, fields: []string{"mutabletags: true"}, wantHEAD: 1},
		{name: "without a listing nothing is trusted", list: false, wantHEAD: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := map[string]string{
				"tag pushed again, listing unchanged: the old digest stands": "moved-quiet",
				"a tag pushed changes the listing":                           "moved-loud",
				"a push notification forgets":                                "notified",
			}[tc.name]
			if repo == "" {
				repo = "steady"
			}
			first := reg.PushTags(t, repo, []string{"v1"}, testenv.Created(time.Unix(1e9, 0)))
			rec := newRecorder()
			c := NewClient(WithConfig(testConfig(t, reg.Host, tc.fields...)), withBaseTransport(rec))
			ref := imageRef(t, reg.Host+"/"+repo+":v1")
			cycle := func() string {
				if tc.list {
					if _, err := c.Tags(t.Context(), ref, credref.Ref{}); err != nil {
						t.Fatal(err)
					}
				}
				md, err := c.Metadata(t.Context(), ref, credref.Ref{}, nil, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				return md.Digest
			}
			if d := cycle(); d != first.String() {
				t.Fatalf("first cycle: digest %s, want %s", d, first)
			}
			if tc.between != nil {
				tc.between(t, c)
			}
			rec.reset()
			d := cycle()
			if got := rec.count(http.MethodHead, "/manifests/"); got != tc.wantHEAD {
				t.Errorf("second cycle: %d manifest HEADs, want %d (%v)", got, tc.wantHEAD, rec.requests())
			}
			if moved := d != first.String(); moved != tc.moved {
				t.Errorf("second cycle: digest %s, first was %s; want moved %v", d, first, tc.moved)
			}
		})
	}
}

func TestListingHash(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		same bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "b"}, []string{"b", "a"}, false},
		{[]string{"ab"}, []string{"a", "b"}, false},
		{nil, []string{}, true},
		{[]string{"a"}, []string{"a", ""}, false},
	} {
		if got := listingHash(tc.a) == listingHash(tc.b); got != tc.same {
			t.Errorf("%q and %q: same hash %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
