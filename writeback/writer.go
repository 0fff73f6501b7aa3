package writeback

import (
	"context"

	"github.com/image-updater/argocd-image-updater/application"
)

// Writer writes new image versions with one write-back method.
type Writer interface {
	// Write writes changes and returns one Result per change, in their
	// order. One change failing does not stop the others: its Result
	// carries the error, which names the Application (and the image, when
	// one image is at fault).
	Write(ctx context.Context, changes []Change) []Result
}

// Change is what one write carries for one Application: new versions of
// its images and the source they are written for. The argocd method
// writes one source's list per Change; the git method takes all of an
// Application's images in one Change, whose Source tells the repository,
// revision, path and type it writes for. Charts are new versions of the
// source's chart (its targetRevision), which the argocd method writes in
// the same patch.
type Change struct {
	App    *application.Application
	Source application.Source
	Images []ImageUpdate
	Charts []ChartUpdate
	// Record, when set, gives annotations of the Application to set in
	// the same request as the versions, with their values for what that
	// request writes (the Result it would have): the record kept of the
	// write (health gate, rollbacks) and the notice of it land with the
	// write or not at all, and one request writes them all. An empty
	// value sets nothing. The argocd method asks it for its patch; after a
	// git push, the update cycle asks it for the refresh of the
	// Application.
	Record func(Result) map[string]string
}

// Result is what a Writer did with one Change.
type Result struct {
	// Namespace and Name are the Application's.
	Namespace, Name string
	// Changed lists the images whose versions were written (in dry-run
	// mode: would have been); empty when the Application or its files
	// already held every version, or when Err is set.
	Changed []ImageUpdate
	// ChangedCharts lists the charts whose versions were written, as
	// Changed the images.
	ChangedCharts []ChartUpdate
	// Written is true when the change was persisted: a patch accepted or
	// a commit pushed; false in dry-run mode.
	Written bool
	// Patch is the JSON patch the argocd method sent, or in dry-run mode
	// would have sent; nil when nothing needed writing.
	Patch []byte
	// Commit is the pushed commit holding the change (git), Branch the
	// branch written to, and PullRequest the web page of the pull request
	// opened or updated for it, when the Application asked for one.
	Commit, Branch, PullRequest string
	// Push is the push that carried Commit, shared by the results of
	// the Applications it carried; nil when unknown.
	Push *Push
	// Recorded holds the annotations of the Change's Record set with the
	// versions; nil when none was.
	Recorded map[string]string
	// ParentNamespace and ParentName name the Application whose manifests
	// define this one, when the change went there (app of apps): Argo CD
	// applies it when it reads that Application's sources.
	ParentNamespace, ParentName string
	Err                         error
}
