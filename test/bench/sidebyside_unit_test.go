package bench

import "testing"

func TestReplaceSection(t *testing.T) {
	section := sideBySideHeading + "\n\nnew figures\n\n"
	tests := []struct {
		name, page, want string
	}{
		{
			name: "replaced, the next section kept",
			page: "# Page\n\n" + handWrittenMarker + "\n\n" + sideBySideHeading + "\n\nold figures\n\n## Next\n\nkept\n",
			want: "# Page\n\n" + handWrittenMarker + "\n\n" + section + "## Next\n\nkept\n",
		},
		{
			name: "replaced at the end of the page",
			page: "# Page\n\n" + sideBySideHeading + "\n\nold figures\n",
			want: "# Page\n\n" + section,
		},
		{
			name: "added below the marker, before the hand-written sections",
			page: "# Page\n\n## Generated\n\n" + handWrittenMarker + "\n\n## Hand\n\ntext\n",
			want: "# Page\n\n## Generated\n\n" + handWrittenMarker + "\n\n" + section + "## Hand\n\ntext\n",
		},
		{
			name: "added at the end without a marker",
			page: "# Page\n\ntext\n",
			want: "# Page\n\ntext\n\n" + section,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replaceSection(tt.page, section); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
