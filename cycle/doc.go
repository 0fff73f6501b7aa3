// Package cycle runs the update cycle: for every image of every managed
// Application it asks the registry for tags, lets the image's strategy
// choose, and writes back what changed.
//
// A cycle reads top to bottom in Updater.RunOnce:
//
//  1. plan: turn each Application's annotations into jobs (one per image),
//     reporting bad settings for that image only;
//  2. list: one tag listing per distinct (repository, credentials), however
//     many Applications use it, with bounded concurrency;
//  3. choose: the strategy picks a version per job;
//  4. write: each write-back method's writer (a writeback.Writer) gets all
//     of its changes at once: a writeback.Change per changed Application
//     (per changed source, for the argocd method).
//
// One failing image or Application never stops the others.
package cycle
