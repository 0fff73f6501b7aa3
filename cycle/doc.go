// Package cycle runs the update cycle: for every image of every managed
// Application it asks the registry for tags, lets the image's strategy
// choose, and writes back what changed.
//
// A cycle reads top to bottom in Updater.run (run.go), whose state is a
// run of its own, made for each cycle and targeted check:
//
//  1. plan: turn each Application's settings, compiled when they were read,
//     into jobs (one per image), reporting bad settings for that image only;
//  2. list: one tag listing per distinct (repository, credentials), however
//     many Applications use it, with bounded concurrency;
//  3. choose: the strategy picks a version per job;
//  4. write: each write-back method's writer (a writeback.Writer) gets all
//     of its changes at once: a writeback.Change per changed Application
//     (per changed source, for the argocd method);
//  5. finish: tell the observer (the ImageUpdaters' status), the metrics
//     and the log.
//
// One failing image or Application never stops the others.
package cycle
