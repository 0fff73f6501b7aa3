package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageUpdaterSpec says which Applications of the resource's namespace are
// managed and how their images are updated. Settings given at several
// levels are taken from the most specific one: image, then
// applicationRef, then spec.
type ImageUpdaterSpec struct {
	// Namespace is ignored: Applications are matched in the resource's own
	// namespace. Kept so that resources which still set it apply.
	//
	// Deprecated: the resource's namespace is used.
	// +optional
	Namespace *string `json:"namespace,omitempty"`

	// CommonUpdateSettings are the defaults of every image.
	// +optional
	*CommonUpdateSettings `json:"commonUpdateSettings,omitempty"`

	// WriteBackConfig is the default write-back of every Application.
	// +optional
	*WriteBackConfig `json:"writeBackConfig,omitempty"`

	// ImagesVerification is the default signature verification of every
	// image.
	// +optional
	ImagesVerification *ImagesVerification `json:"imagesVerification,omitempty"`

	// HealthGate is the default health gate of every image.
	// +optional
	HealthGate *HealthGate `json:"healthGate,omitempty"`

	// RollbackHold, true unless a level sets it false, holds an image a
	// person rolled back (the override set back, Argo CD's rollback, the
	// updater's commit reverted): the version rolled back from is not
	// written again, nor an older one, until a newer one appears. False
	// writes it again, as the rollback-hold annotation "false" does. No
	// schema default: one at the ref level would hide the spec's.
	// +optional
	RollbackHold *bool `json:"rollbackHold,omitempty"`

	// UpdateWindows say when the Applications' new versions may be
	// written, as Argo CD's sync windows say when they may sync.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	UpdateWindows []UpdateWindow `json:"updateWindows,omitempty"`

	// UseSyncWindows also applies the sync windows of each Application's
	// AppProject that match it; false when no level sets it.
	// +optional
	UseSyncWindows *bool `json:"useSyncWindows,omitempty"`

	// ApplicationRefs select Applications in the resource's namespace. An
	// Application matched by several refs is handled by the first. Each
	// cycle matches each ref against every Application of the namespace:
	// at most 1000 of them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=namePattern
	ApplicationRefs []ApplicationRef `json:"applicationRefs"`
}

// MaxApplicationRefs bounds spec.applicationRefs, as the CRD's maxItems
// does (the marker above must say the same); the controller refuses an
// ImageUpdater stored with more before the CRD had the bound.
const MaxApplicationRefs = 1000

// ApplicationRef selects Applications by name and labels, with settings
// for their images.
// +kubebuilder:validation:XValidation:rule="!(has(self.useAnnotations) && self.useAnnotations == true) ? ((has(self.images) && size(self.images) > 0) || (has(self.charts) && size(self.charts) > 0)) : true",message="Either useAnnotations must be true, or images or charts must be provided with at least one item"
type ApplicationRef struct {
	// NamePattern is a glob matched against the Application's name.
	// +kubebuilder:validation:Required
	NamePattern string `json:"namePattern"`

	// LabelSelectors further restrict the Applications matched.
	// +optional
	LabelSelectors *metav1.LabelSelector `json:"labelSelectors,omitempty"`

	// UseAnnotations reads the images and their settings from the
	// Application's argocd-image-updater.argoproj.io/* annotations; the
	// other settings of the ref are then ignored.
	// +optional
	// +kubebuilder:default:=false
	UseAnnotations *bool `json:"useAnnotations,omitempty"`

	// CommonUpdateSettings override the spec's for this ref's images.
	// +optional
	*CommonUpdateSettings `json:"commonUpdateSettings,omitempty"`

	// WriteBackConfig overrides the spec's for this ref's Applications.
	// +optional
	*WriteBackConfig `json:"writeBackConfig,omitempty"`

	// ImagesVerification overrides the spec's for this ref's images.
	// +optional
	ImagesVerification *ImagesVerification `json:"imagesVerification,omitempty"`

	// HealthGate overrides the spec's for this ref's images.
	// +optional
	HealthGate *HealthGate `json:"healthGate,omitempty"`

	// RollbackHold overrides the spec's for this ref's Applications.
	// +optional
	RollbackHold *bool `json:"rollbackHold,omitempty"`

	// UpdateWindows replace the spec's for this ref's Applications.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	UpdateWindows []UpdateWindow `json:"updateWindows,omitempty"`

	// UseSyncWindows overrides the spec's for this ref's Applications.
	// +optional
	UseSyncWindows *bool `json:"useSyncWindows,omitempty"`

	// Images are the images to update; required unless useAnnotations
	// or charts.
	// +optional
	// +listType=map
	// +listMapKey=alias
	Images []ImageConfig `json:"images,omitempty"`

	// Charts are the Helm charts whose version (their source's
	// targetRevision) to update, as the chart-list annotation names
	// them.
	// +optional
	// +listType=map
	// +listMapKey=alias
	// +kubebuilder:validation:MaxItems=50
	Charts []ChartConfig `json:"charts,omitempty"`

	// GitTags are the git repositories whose sources, pinned to a tag
	// (targetRevision), move to the newest tag within a constraint, as
	// the git-tag-list annotation names them.
	// +optional
	// +listType=map
	// +listMapKey=alias
	// +kubebuilder:validation:MaxItems=20
	GitTags []GitTagConfig `json:"gitTags,omitempty"`
}

// GitTagConfig is one git repository whose sources pinned to a tag are
// moved to its newest tag. The images' settings of the ref and the spec
// do not apply to it.
type GitTagConfig struct {
	// Alias names the repository; unique among the ref's images, charts
	// and git repositories.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9-._]*$`
	Alias string `json:"alias"`

	// RepoURL is the sources' repoURL, compared as Argo CD compares
	// repository URLs.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MaxLength=2048
	RepoURL string `json:"repoURL"`

	// Constraint is the semver range the tags must satisfy ("^1.4");
	// empty admits every release.
	// +optional
	Constraint string `json:"constraint,omitempty"`

	// UpdateStrategy is semver (the default), alphabetical or numeric.
	// +optional
	UpdateStrategy *string `json:"updateStrategy,omitempty"`

	// AllowTags keeps only matching tags (regexp:<expression>, or any:
	// all).
	// +optional
	AllowTags *string `json:"allowTags,omitempty"`

	// IgnoreTags are globs of tags never chosen; a lone "*" pauses the
	// repository.
	// +listType=atomic
	// +optional
	IgnoreTags []string `json:"ignoreTags,omitempty"`
}

// ChartConfig is one Helm chart to update. The images' settings of the
// ref and the spec do not apply to it: a chart's versions are not its
// images' tags.
type ChartConfig struct {
	// Alias names the chart; unique among the ref's images and charts.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9-._]*$`
	Alias string `json:"alias"`

	// ChartName is the source's chart field, with an optional semver
	// constraint after ':', as in the chart-list annotation
	// ("postgresql:^15").
	// +kubebuilder:validation:Required
	ChartName string `json:"chartName"`

	// UpdateStrategy is semver (the default), alphabetical or numeric.
	// +optional
	UpdateStrategy *string `json:"updateStrategy,omitempty"`

	// AllowTags keeps only matching versions (regexp:<expression>, or
	// any: all).
	// +optional
	AllowTags *string `json:"allowTags,omitempty"`

	// IgnoreTags are globs of versions never chosen; a lone "*" pauses
	// the chart.
	// +listType=atomic
	// +optional
	IgnoreTags []string `json:"ignoreTags,omitempty"`
}

// ImageConfig is one image to update.
type ImageConfig struct {
	// Alias names the image; unique within its applicationRef.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9-._]*$`
	Alias string `json:"alias"`

	// ImageName is the image with an optional version constraint after
	// the last ':', as in the image-list annotation ("nginx:~1.26").
	// +kubebuilder:validation:Required
	ImageName string `json:"imageName"`

	// CommonUpdateSettings override the ref's for this image.
	// +optional
	*CommonUpdateSettings `json:"commonUpdateSettings,omitempty"`

	// ImagesVerification overrides the ref's for this image.
	// +optional
	ImagesVerification *ImagesVerification `json:"imagesVerification,omitempty"`

	// HealthGate overrides the ref's for this image.
	// +optional
	HealthGate *HealthGate `json:"healthGate,omitempty"`

	// ManifestTarget says where in the Application's manifests the
	// version goes.
	// +optional
	*ManifestTarget `json:"manifestTargets,omitempty"`
}

// CommonUpdateSettings choose the new version of an image.
type CommonUpdateSettings struct {
	// UpdateStrategy is semver, newest-build, digest, alphabetical or
	// numeric (or the older names latest and name, and Flux's numerical);
	// semver when no level sets it. No
	// schema default: a default at the ref or image level would hide what
	// a wider level sets.
	// +optional
	UpdateStrategy *string `json:"updateStrategy,omitempty"`

	// ForceUpdate updates the image even when the Application does not
	// run it; false when no level sets it.
	// +optional
	ForceUpdate *bool `json:"forceUpdate,omitempty"`

	// AllowTags keeps only matching tags (regexp:<expression>, or any:
	// all). A group named version, (?P<version>...), is the part of the
	// tag semver, alphabetical and numeric order by.
	// +optional
	AllowTags *string `json:"allowTags,omitempty"`

	// IgnoreTags are globs of tags never chosen.
	// +listType=atomic
	// +optional
	IgnoreTags []string `json:"ignoreTags,omitempty"`

	// PullSecret is the registry credential reference (pullsecret:,
	// secret:, ...); Secrets must be in the resource's namespace.
	// +optional
	PullSecret *string `json:"pullSecret,omitempty"`

	// Platforms the image must be built for ("linux/amd64").
	// +listType=atomic
	// +optional
	Platforms []string `json:"platforms,omitempty"`

	// MinimumReleaseAge is how long the updater must have known a
	// version before it may be chosen: a duration ("36h") or days ("7d"),
	// at most 365d; "0" for none. Unset, the controller's
	// --minimum-release-age applies.
	// +kubebuilder:validation:MaxLength=40
	// +optional
	MinimumReleaseAge *string `json:"minimumReleaseAge,omitempty"`

	// PromoteFrom takes only the version of the image's repository that
	// another Application of the same namespace (the stage) runs and
	// whose health gate verified it.
	// +optional
	PromoteFrom *PromoteFrom `json:"promoteFrom,omitempty"`

	// PinDigest writes the chosen tag with the digest it points at
	// (tag@sha256:...), the digest of the multi-platform index when there
	// is one: never (the default), if-not-present (pinned once; a tag
	// that moves later is not followed) or always (pinned again when the
	// tag moves). The digest strategy pins always.
	// +kubebuilder:validation:Enum=never;if-not-present;always
	// +optional
	PinDigest *string `json:"pinDigest,omitempty"`
}

// PromoteFrom names the stage an image is promoted from.
type PromoteFrom struct {
	// Application is the stage, an Application of the resource's
	// namespace.
	// +kubebuilder:validation:MaxLength=253
	Application string `json:"application"`
	// SoakTime is how long the stage must have run the version since it
	// was deployed there ("1h", "2d"); none when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	SoakTime string `json:"soakTime,omitempty"`
}

// UpdateWindow is a time when new versions may (allow) or may not (deny)
// be written: from each time of Schedule, for Duration.
type UpdateWindow struct {
	// Kind is allow or deny.
	// +kubebuilder:validation:Enum=allow;deny
	Kind string `json:"kind"`
	// Schedule is a five-field cron schedule ("0 9 * * 1-5").
	// +kubebuilder:validation:MaxLength=100
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open ("8h").
	// +kubebuilder:validation:MaxLength=20
	Duration string `json:"duration"`
	// TimeZone is the IANA time zone of Schedule; UTC when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// WriteBackConfig says where a new version is written.
type WriteBackConfig struct {
	// Method is argocd, git, git:repocreds or git:secret:<name>; taken
	// from a wider level when unset, argocd when no level sets it.
	// +optional
	// +kubebuilder:validation:Pattern=`^(argocd|git|git:[a-zA-Z0-9][a-zA-Z0-9-._/:]*)$`
	Method *string `json:"method,omitempty"`

	// GitConfig configures the git write-back.
	// +optional
	*GitConfig `json:"gitConfig,omitempty"`
}

// GitConfig configures the git write-back.
type GitConfig struct {
	// Repository to commit to; the Application's source repository when
	// unset.
	// +optional
	Repository *string `json:"repository,omitempty"`

	// Branch to commit to, as the git-branch annotation
	// ("base:target" included).
	// +optional
	Branch *string `json:"branch,omitempty"`

	// WriteBackTarget is the file written: kustomization[:<dir>],
	// helmvalues[:<file>], or an override file's path.
	// +optional
	WriteBackTarget *string `json:"writeBackTarget,omitempty"`

	// PullRequest proposes the change as a pull or merge request instead
	// of pushing it to the branch.
	// +optional
	PullRequest *PullRequestConfig `json:"pullRequest,omitempty"`
}

// PullRequestConfig names the forge whose pull requests are opened.
// Exactly one forge, said in rules of a few terms each: the API server
// bounds each rule's estimated cost over every applicationRef.
// +kubebuilder:validation:XValidation:rule="has(self.github) || has(self.gitlab) || has(self.gitea) || has(self.bitbucket) || has(self.bitbucketServer) || has(self.azureDevOps)",message="Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.github) || !(has(self.gitlab) || has(self.gitea) || has(self.bitbucket) || has(self.bitbucketServer) || has(self.azureDevOps))",message="Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.gitlab) || !(has(self.gitea) || has(self.bitbucket) || has(self.bitbucketServer) || has(self.azureDevOps))",message="Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.gitea) || !(has(self.bitbucket) || has(self.bitbucketServer) || has(self.azureDevOps))",message="Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.bitbucket) || !(has(self.bitbucketServer) || has(self.azureDevOps))",message="Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.bitbucketServer) || !(has(self.azureDevOps))",message="Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"
type PullRequestConfig struct {
	// GitHub opens GitHub pull requests.
	// +optional
	GitHub *ForgeConfig `json:"github,omitempty"`
	// GitLab opens GitLab merge requests.
	// +optional
	GitLab *ForgeConfig `json:"gitlab,omitempty"`
	// Gitea opens Gitea or Forgejo pull requests.
	// +optional
	Gitea *ForgeConfig `json:"gitea,omitempty"`
	// Bitbucket opens Bitbucket Cloud pull requests, which have no labels.
	// +optional
	Bitbucket *ForgeConfig `json:"bitbucket,omitempty"`
	// BitbucketServer opens Bitbucket Data Center (Server) pull requests,
	// which have no labels.
	// +optional
	BitbucketServer *ForgeConfig `json:"bitbucketServer,omitempty"`
	// AzureDevOps opens Azure DevOps pull requests.
	// +optional
	AzureDevOps *ForgeConfig `json:"azureDevOps,omitempty"`
	// Labels are put on the pull or merge request when it is opened, and
	// kept when it is updated (on services that have labels).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	Labels []string `json:"labels,omitempty"`
}

// ForgeConfig holds a forge's settings; kept as written.
// +kubebuilder:pruning:PreserveUnknownFields
type ForgeConfig struct{}

// ImagesVerification asks for the signatures of new versions to be
// verified before they are written.
// +kubebuilder:validation:XValidation:rule="self.enabled == false || has(self.cosignKey) || has(self.keyless)",message="at least one verification method (cosignKey or keyless) is required when verification is enabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.cosignKey) && has(self.keyless))",message="cosignKey and keyless are exclusive"
type ImagesVerification struct {
	// Enabled turns verification on.
	// +optional
	// +kubebuilder:default:=true
	Enabled *bool `json:"enabled,omitempty"`

	// CosignKey is the public key signatures are checked with.
	// +optional
	CosignKey *CosignKey `json:"cosignKey,omitempty"`

	// Keyless checks keyless signatures (a short-lived certificate for an
	// identity, as `cosign sign` makes without a key) against the trusted
	// root the controller is given (--sigstore-trusted-root).
	// +optional
	Keyless *KeylessVerification `json:"keyless,omitempty"`
}

// KeylessVerification is who must have signed: the signing certificate's
// identity and OIDC issuer, each exactly or as a regular expression (Go
// syntax, unanchored), as `cosign verify`'s flags of the same names.
// +kubebuilder:validation:XValidation:rule="has(self.certificateIdentity) != has(self.certificateIdentityRegexp)",message="set exactly one of certificateIdentity and certificateIdentityRegexp"
// +kubebuilder:validation:XValidation:rule="has(self.certificateOidcIssuer) != has(self.certificateOidcIssuerRegexp)",message="set exactly one of certificateOidcIssuer and certificateOidcIssuerRegexp"
type KeylessVerification struct {
	// CertificateIdentity is the certificate's subject, exactly.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	CertificateIdentity string `json:"certificateIdentity,omitempty"`
	// CertificateIdentityRegexp matches the certificate's subject.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	CertificateIdentityRegexp string `json:"certificateIdentityRegexp,omitempty"`
	// CertificateOIDCIssuer is the OIDC issuer, exactly.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	CertificateOIDCIssuer string `json:"certificateOidcIssuer,omitempty"`
	// CertificateOIDCIssuerRegexp matches the OIDC issuer.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	CertificateOIDCIssuerRegexp string `json:"certificateOidcIssuerRegexp,omitempty"`
}

// HealthGate follows each version written for a window: a version that
// breaks the Application (a failed sync, or health Degraded where it was
// not before the write) is written back to the version before it and
// skipped from then on; one that stays Healthy is verified. The most
// specific level with a healthGate block gives the whole setting.
type HealthGate struct {
	// Enabled turns the gate on.
	// +optional
	// +kubebuilder:default:=true
	Enabled *bool `json:"enabled,omitempty"`

	// Window is how long a deployed version is followed, as a duration
	// ("5m", "90s", from 1s to 24h); 5m when unset.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	Window *string `json:"window,omitempty"`
}

// CosignKey is a key in a Secret of the resource's namespace.
type CosignKey struct {
	// SecretName is the Secret's name.
	// +kubebuilder:validation:Required
	SecretName string `json:"secretName"`
	// Key is the Secret's key holding the public key.
	// +optional
	Key string `json:"key,omitempty"`
}

// ManifestTarget says where the version goes; only one of its fields may
// be set.
// +kubebuilder:validation:XValidation:rule="(has(self.helm) ? 1 : 0) + (has(self.kustomize) ? 1 : 0) + (has(self.plugin) ? 1 : 0) == 1",message="Exactly one of helm, kustomize or plugin must be specified within manifestTargets if the block is present."
type ManifestTarget struct {
	// Helm names the Helm parameters of the image.
	// +optional
	Helm *HelmTarget `json:"helm,omitempty"`

	// Kustomize names the Kustomize image entry.
	// +optional
	Kustomize *KustomizeTarget `json:"kustomize,omitempty"`

	// Plugin names the environment variables of a config management
	// plugin.
	// +optional
	Plugin *PluginTarget `json:"plugin,omitempty"`
}

// PluginTarget names the plugin's environment variables receiving the
// image: name and tag, or spec for name:tag in one.
// +kubebuilder:validation:XValidation:rule="has(self.spec) || has(self.name)",message="At least one of spec or name must be specified in plugin target."
type PluginTarget struct {
	// Name is the variable receiving the image name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name *string `json:"name,omitempty"`
	// Tag is the variable receiving the version.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tag *string `json:"tag,omitempty"`
	// Spec is the variable receiving name:tag; name and tag are then
	// ignored.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Spec *string `json:"spec,omitempty"`
}

// HelmTarget names the parameters receiving the image: name and tag
// (image.name and image.tag when unset), or spec for name:tag in one.
type HelmTarget struct {
	// Name is the parameter receiving the image name.
	// +optional
	Name *string `json:"name,omitempty"`
	// Tag is the parameter receiving the version.
	// +optional
	Tag *string `json:"tag,omitempty"`
	// Spec is the parameter receiving name:tag; name and tag are then
	// ignored.
	// +optional
	Spec *string `json:"spec,omitempty"`
	// Digest is the parameter receiving the digest of a pinned version
	// (pinDigest); the tag parameter then receives the tag alone.
	// +optional
	Digest *string `json:"digest,omitempty"`
}

// KustomizeTarget names the Kustomize image entry replaced.
type KustomizeTarget struct {
	// Name is the image name the entry replaces.
	// +kubebuilder:validation:Required
	Name *string `json:"name"`
}

// ImageUpdaterStatus is what the controller last found.
type ImageUpdaterStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastCheckedAt is when the images were last checked.
	// +optional
	LastCheckedAt *metav1.Time `json:"lastCheckedAt,omitempty"`

	// LastUpdatedAt is when an image was last updated.
	// +optional
	LastUpdatedAt *metav1.Time `json:"lastUpdatedAt,omitempty"`

	// ApplicationsMatched counts the Applications the resource handles.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ApplicationsMatched int32 `json:"applicationsMatched"`

	// ImagesManaged counts the images of those Applications.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ImagesManaged int32 `json:"imagesManaged"`

	// RecentUpdates are the updates of the last check that updated
	// anything.
	// +optional
	// +listType=atomic
	RecentUpdates []RecentUpdate `json:"recentUpdates,omitempty"`

	// HealthGate is, for each image of each Application the health gate
	// follows, the last version written and what became of it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	HealthGate []HealthGateRecord `json:"healthGate,omitempty"`

	// SkippedVersions are the versions the health gate wrote back, which
	// are not written again for that image of that Application until a
	// person clears them (the argocd-image-updater.argoproj.io/health-gate-clear
	// annotation of the Application).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	SkippedVersions []SkippedVersion `json:"skippedVersions,omitempty"`

	// WaitingVersions are, after the last check, the newer versions not
	// taken yet: why, and when they may be.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	WaitingVersions []WaitingVersion `json:"waitingVersions,omitempty"`

	// Conditions: Ready, Reconciling and Error.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WaitingVersion is a newer version of an image or chart of one
// Application that waits.
type WaitingVersion struct {
	// Application is the Application's name, in the resource's namespace.
	Application string `json:"application"`
	// Alias of the image or chart, or its name when it has none.
	Alias string `json:"alias"`
	// Chart is true for a chart's version.
	// +optional
	Chart bool `json:"chart,omitempty"`
	// Version is the version that waits.
	// +optional
	Version string `json:"version,omitempty"`
	// Reason is what it waits for: minimum-release-age, update-window or
	// promotion.
	// +kubebuilder:validation:Enum=minimum-release-age;update-window;promotion
	Reason string `json:"reason"`
	// Until is when it may be taken, when that is known.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
	// Message says why, as the VersionWaiting event does.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// RecentUpdate is one image updated to one version.
type RecentUpdate struct {
	// Alias of the image.
	Alias string `json:"alias"`
	// Image is the image's name, without version.
	Image string `json:"image"`
	// NewVersion is the tag or digest written.
	NewVersion string `json:"newVersion"`
	// ApplicationsUpdated counts the Applications given that version.
	// +kubebuilder:validation:Minimum=0
	ApplicationsUpdated int32 `json:"applicationsUpdated"`
	// UpdatedAt is when it was written.
	UpdatedAt metav1.Time `json:"updatedAt"`
	// Message describes the update.
	// +optional
	Message string `json:"message,omitempty"`
}

// HealthGateState is where a version written under the health gate stands.
// +kubebuilder:validation:Enum=Pending;Verified;Unverified;Reverting;Reverted;Superseded;Written;RolledBack
type HealthGateState string

const (
	// HealthGatePending: written, followed until its window ends.
	HealthGatePending HealthGateState = "Pending"
	// HealthGateVerified: Healthy at the end of its window.
	HealthGateVerified HealthGateState = "Verified"
	// HealthGateUnverified: kept, but its health could not be judged (the
	// Application was Degraded before the write and still is).
	HealthGateUnverified HealthGateState = "Unverified"
	// HealthGateReverting: found broken and skipped; the version before
	// it is being written back.
	HealthGateReverting HealthGateState = "Reverting"
	// HealthGateReverted: the version before it was written back.
	HealthGateReverted HealthGateState = "Reverted"
	// HealthGateSuperseded: another version replaced it before it was
	// judged.
	HealthGateSuperseded HealthGateState = "Superseded"
	// HealthGateWritten: written for an image without a health gate;
	// kept only to tell when someone else rolls it back.
	HealthGateWritten HealthGateState = "Written"
	// HealthGateRolledBack: someone else replaced it with an older
	// version; it is skipped (held) until a person lifts the hold.
	HealthGateRolledBack HealthGateState = "RolledBack"
)

// HealthGateRecord is the last version written for one image of one
// Application under the health gate, and what became of it.
type HealthGateRecord struct {
	// Application is the Application's name, in the resource's namespace.
	// +optional
	Application string `json:"application,omitempty"`
	// Alias of the image, or its name when it has none.
	Alias string `json:"alias"`
	// Image is the image's name, without version.
	// +optional
	Image string `json:"image,omitempty"`
	// Version is the version written.
	Version string `json:"version"`
	// PreviousVersion is the version it replaced, which a revert writes
	// back.
	// +optional
	PreviousVersion string `json:"previousVersion,omitempty"`
	// State is where the version stands.
	State HealthGateState `json:"state"`
	// Window is how long the version is followed once deployed.
	// +optional
	Window string `json:"window,omitempty"`
	// Commit is the git commit that wrote the version, for the git
	// write-back; a sync of another revision is not the version's.
	// +optional
	Commit string `json:"commit,omitempty"`
	// HealthBefore is the Application's health when the version was
	// written.
	// +optional
	HealthBefore string `json:"healthBefore,omitempty"`
	// WrittenAt is when the version was written.
	WrittenAt metav1.Time `json:"writtenAt"`
	// DeployedAt is when Argo CD was first seen running it: the window
	// starts then.
	// +optional
	DeployedAt *metav1.Time `json:"deployedAt,omitempty"`
	// VerifiedAt is when it was verified.
	// +optional
	VerifiedAt *metav1.Time `json:"verifiedAt,omitempty"`
	// RevertedAt is when it was found broken.
	// +optional
	RevertedAt *metav1.Time `json:"revertedAt,omitempty"`
	// Message says why the version stands where it does.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SkippedVersion is a version the health gate wrote back, not chosen
// again for the image of the Application.
type SkippedVersion struct {
	// Application is the Application's name, in the resource's namespace.
	// +optional
	Application string `json:"application,omitempty"`
	// Alias of the image, or its name when it has none.
	Alias string `json:"alias"`
	// Version is the version skipped.
	Version string `json:"version"`
	// SkippedAt is when it was found broken.
	SkippedAt metav1.Time `json:"skippedAt"`
	// Reason is what Argo CD said of it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Apps",type=integer,JSONPath=`.status.applicationsMatched`
// +kubebuilder:printcolumn:name="Images",type=integer,JSONPath=`.status.imagesManaged`
// +kubebuilder:printcolumn:name="Last Checked",type=date,JSONPath=`.status.lastCheckedAt`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`

// ImageUpdater configures the image updates of the Applications of its
// namespace.
type ImageUpdater struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ImageUpdaterSpec   `json:"spec,omitempty"`
	Status ImageUpdaterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ImageUpdaterList is a list of ImageUpdaters.
type ImageUpdaterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageUpdater `json:"items"`
}
