// Package healthgate follows the versions the update cycle writes for
// images with a health gate (the health-gate annotations, or a healthGate
// block of an ImageUpdater) for a window after Argo CD deployed them, and
// judges each from what Argo CD says of its Application: a failed sync,
// or health Degraded where it was not before, breaks the version, which
// is written back by the same write-back method and skipped from then on;
// Healthy at the end of the window verifies it. A version the updater
// wrote that a person rolled back (the override set back, the commit
// reverted, Argo CD's rollback) is held: skipped, and, after Argo CD's
// rollback, the version rolled back to written into the spec by the
// cycle. Its state survives a restart in the Application's
// health-gate-state annotation or the ImageUpdater's status.
package healthgate
