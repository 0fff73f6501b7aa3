// Package cycle runs the update cycle: for every image of every managed
// Application it asks the registry for tags, lets the image's strategy
// choose, and writes back what changed.
//
// A cycle reads top to bottom in Updater.run (run.go), whose state is a
// run of its own, made for each cycle and targeted check:
//
//  1. plan: turn each Application's settings, compiled when they were read,
//     into jobs (one per image), reporting bad settings for that image only;
//  2. check: each Application on its own, its listings and choices taking
//     the --max-concurrency slots in turn with the others' (round-robin
//     across namespaces, then Applications: see slots), within one time
//     for all of them (WithApplicationTimeout); one tag listing per
//     distinct (repository, credentials), however many Applications use
//     it; the strategy picks a version per job;
//  3. write: each write-back method's writer (a writeback.Writer) gets the
//     changes of the Applications checked together: a writeback.Change per
//     changed Application (per changed source, for the argocd method); an
//     Application still being checked does not hold the others' writes
//     for more than half of its time;
//  4. finish: tell the observer (the ImageUpdaters' status), the metrics
//     and the log.
//
// One failing image or Application never stops the others, and one
// whose registries never answer delays its own images only.
package cycle
